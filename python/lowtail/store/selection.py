"""What a SELECTION names: the stored runs `lowtail compare` and `lowtail export` work on.

A selection is words: ids name runs — an experiment id (`3`, `experiment:3`, `latest`),
`run:N`, `analysis:N` — and filters on a run's configuration axes narrow them — `dut=fwd`,
`rate=50k`, `containment=container`, `kernel~rt` (contains), `host!=lab1`, any DuT option
(`batch=32`), `experiment=3`; commas give alternatives (`dut=mirred,bridge` keeps either,
`dut!=wire,fwd` neither). The runs named by ids are their union (every stored run when
no id is given); each filter keeps the runs that satisfy it. A plain analysis (`lowtail
analyze`, no run) is selected as a run of its own with DuT "analysis N" (or its label)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from lowtail.core.errors import UserError
from lowtail.core.schema import INT64_MAX
from lowtail.store import axes

if TYPE_CHECKING:
    from lowtail.experiment.document import RunRow
    from lowtail.store.db import Store

HELP = (
    "Runs to work on: an experiment id (3, experiment:3, latest), run:N, analysis:N, and filters on "
    "their configuration: dut=fwd, rate=50k, containment=container, kernel~rt (contains), host!=lab1, "
    "any DuT option (batch=32), experiment=3; commas give alternatives (dut=mirred,bridge). The ids' runs are taken together (all stored runs when "
    "none is given); each filter keeps the runs that match it."
)

_ID = re.compile(r"^(?:(experiment|run|analysis):)?([0-9]+)$")  # ASCII: \d takes "١٢" too
_FILTER = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*(" + "|".join(map(re.escape, axes.OPERATORS)) + r")\s*(.*)$")


@dataclass(frozen=True)
class Filter:
    """One `key op value` word."""

    key: str
    op: str
    text: str

    @property
    def word(self) -> str:
        """The filter as typed."""
        return f"{self.key}{self.op}{self.text}"

    def keeps(self, matches: Callable[[str, str], bool]) -> bool:
        """Whether a run is kept, given `matches(op, value)` for it: `=` and `~` keep it when
        any of the comma-separated values matches, `!=` when none is equal."""
        values = [v.strip() for v in self.text.split(",") if v.strip()]
        if self.op == "!=":
            return all(matches("!=", v) for v in values)
        return any(matches(self.op, v) for v in values)


@dataclass
class Selection:
    """The words of a selection, read: ids by kind, and filters in the order given."""

    words: list[str]
    experiments: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    analyses: list[int] = field(default_factory=list)
    latest: bool = False
    filters: list[Filter] = field(default_factory=list)

    @property
    def has_ids(self) -> bool:
        """Whether any word names runs by id (else every stored run is the start)."""
        return bool(self.experiments or self.runs or self.analyses or self.latest)


def parse(words: list[str]) -> Selection:
    """Read the words of a selection; UserError naming a word that is none of its forms."""
    sel = Selection(list(words))
    for word in words:
        word = word.strip()
        if word == "latest":
            sel.latest = True
            continue
        m = _ID.match(word)
        if m:
            kind, number = m.group(1) or "experiment", int(m.group(2))
            if number > INT64_MAX:  # the database's ids are 64-bit: DuckDB would fail to cast it
                raise UserError(f"cannot read {word!r} as a selection: {number} is past any id lowtail stores")
            getattr(sel, {"experiment": "experiments", "run": "runs", "analysis": "analyses"}[kind]).append(number)
            continue
        f = _FILTER.match(word)
        if f and f.group(3).strip():
            sel.filters.append(Filter(f.group(1), f.group(2), f.group(3).strip()))
            continue
        raise UserError(
            f"cannot read {word!r} as a selection: give an experiment id (3), run:N, analysis:N, "
            f"or a filter such as dut=fwd, rate=50k, kernel~rt"
        )
    return sel


def select(store: Store, words: list[str]) -> list[RunRow]:
    """The runs a selection names, as `store.runs.select_runs` returns them (plain analyses
    as runs of their own), in id order. UserError when an id does not exist, a filter names
    no axis of these runs, or a filter leaves no run (naming the filter and the values
    there were)."""
    # The store (and DuckDB) only once a selection is read: `HELP` is read at start-up.
    from lowtail.store import analyses as analysisstore
    from lowtail.store import runs as runstore
    from lowtail.store.db import newest_id
    from lowtail.store.records import analysis_as_run

    sel = parse(words)
    if sel.latest:
        newest = newest_id(store, "experiments", "experiment_id")
        if newest is None:
            raise UserError(f"{store.path}: holds no experiments yet (run `lowtail run`)")
        sel.experiments.append(newest)
    for table, column, ids, what in (
        ("experiments", "experiment_id", sel.experiments, "experiment"),
        ("runs", "run_id", sel.runs, "run"),
        ("analyses", "analysis_id", sel.analyses, "analysis"),
    ):
        missing = runstore.missing_ids(store, table, column, ids)
        if missing:
            raise runstore.not_found(store, what, missing, also=("analysis", "run", "experiment"))
    if sel.has_ids:
        rows = runstore.select_runs(store, sel.experiments, sel.runs, sel.analyses)
        rows += [analysis_as_run(a) for a in analysisstore.standalone_analyses(store, sel.analyses)]
        start = "the runs named"
    else:
        rows = runstore.select_runs(store)
        start = "the stored runs"
    if not rows:
        raise UserError(f"{store.path}: {start} hold no runs" + (" (run `lowtail run`)" if not sel.has_ids else ""))
    for f in sel.filters:
        rows = _narrow(rows, f)
    return rows


def _narrow(rows: list[RunRow], f: Filter) -> list[RunRow]:
    axis = axes.find(f.key, rows)
    if axis is None:
        raise UserError(
            f"{f.word}: the selected runs have no field {f.key!r} "
            f"(fields: {axes.EXPERIMENT}, {', '.join(axes.names(rows))})"
        )
    try:
        kept = [r for r in rows if f.keeps(partial(axis.matches, r))]
    except UserError as e:
        raise UserError(f"{f.word}: {e}") from None
    values = sorted({axis.show(axis.read(r)) for r in rows if axis.present(r)})
    if not kept:
        shown = ", ".join(values[:12]) + (", …" if len(values) > 12 else "")
        raise UserError(
            f"{f.word} left no run: none of the {len(rows)} selected runs matches it ({f.key} there: {shown})"
        )
    return kept
