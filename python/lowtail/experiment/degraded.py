"""Degraded runs said once: one line per kind of problem over an experiment's runs ("3 of 9
runs degraded: generator stalled 1.17–2.6 ms (runs 3, 5, 7)"), for `lowtail run` (before its
table) and the top of the experiment page, and what to change for each kind; each run's own
reason stays in its row of the table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lowtail.core.units import format_ns, format_ns_range

# The generator's two reasons (experiment/measure.generator_stalled), each with the figure
# of the run's generator statistics it is about.
_GENERATOR_KINDS = (("generator stalled", "max"), ("generator late", "p99"))


# What to change, per kind of reason: the generator kept off its core, or the core plan
# putting a busy-polling DuT beside the testbed's own programs.
_GENERATOR_REMEDY = (
    "give the generator a core nothing else runs on ([cores] generator, isolated: `lowtail host plan`), "
    "or measure on a quieter host"
)
_CORE_PLAN_REMEDY = (
    "give the DuT cores apart from the generator's and the timestamper's ([cores] dut, on a host with enough cores)"
)


def _kind(reason: str) -> tuple[str, str | None]:
    """The kind of a degraded reason and the pacing figure that measures it (None: the kind
    is the whole text, as a core plan's warning is)."""
    for kind, figure in _GENERATOR_KINDS:
        if reason.startswith(kind):
            return kind, figure
    return reason, None


def degraded_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per kind of reason the valid runs were degraded for, with how many runs, the
    range of the generator's pacing figure where it is the reason, and which runs."""
    measured = [r for r in rows if r.get("valid", True)]
    groups: dict[str, tuple[str | None, list[Mapping[str, Any]]]] = {}
    for r in measured:
        for reason in r.get("degraded_reasons") or ():
            kind, figure = _kind(reason)
            runs = groups.setdefault(kind, (figure, []))[1]
            if r not in runs:
                runs.append(r)
    lines = []
    for kind, (figure, runs) in groups.items():
        values = [
            v
            for r in runs
            if isinstance(v := ((r.get("generator") or {}).get("pacing_error_ns") or {}).get(figure or ""), int)
        ]
        lo, hi = (min(values), max(values)) if values else (None, None)
        size = "" if lo is None else f" {format_ns(lo)}" if lo == hi else f" {format_ns_range(lo, hi)}"
        ids = ", ".join(str(r["run_id"]) for r in runs)
        lines.append(
            f"{len(runs)} of {len(measured)} runs degraded: {kind}{size} (run{'s' if len(runs) > 1 else ''} {ids})"
        )
    return lines


def what_to_change(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What would make degraded runs measure what the file asked for, once per kind."""
    kinds = {_kind(reason)[0] for r in rows if r.get("valid", True) for reason in r.get("degraded_reasons") or ()}
    out = []
    if kinds & {k for k, _ in _GENERATOR_KINDS}:
        out.append(_GENERATOR_REMEDY)
    if any(k.startswith("core plan") for k in kinds):
        out.append(_CORE_PLAN_REMEDY)
    return out
