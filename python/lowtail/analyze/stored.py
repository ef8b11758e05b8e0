"""`analyze_and_store`: one capture pair analysed, judged against a budget when one is
asked for, its series and distribution written where asked, and stored once — what
`lowtail analyze` does, without the printing (nor its page: pages are drawn from the store).

The database is opened while the native analysis runs (`OpenedEarly`); a database that
cannot take the analysis (busy) does not lose the figures: they come back with the reason
they were not stored, for the caller to print before it fails.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lowtail.analyze.document import AnalysisDocument, LatencyFigures
from lowtail.analyze.pair import AnalyzeOptions, ProgressCallback, analyze_pair, measured_rate
from lowtail.core import files, series, signals
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.core.files import remove_database, write_result
from lowtail.store import DatabaseBusy
from lowtail.verdict.judge import DEFAULT_CONFIDENCE, Verdict

if TYPE_CHECKING:
    from lowtail.store.db import Store


@dataclass(frozen=True)
class AnalyzeRequest:
    """One `lowtail analyze`: the pair, how to read it (`options`), the budget to judge it
    against (None: no verdict), the rate it was sent at (a configuration), what to write
    beside the figures, whether and where to store it."""

    pre: Path
    post: Path
    options: AnalyzeOptions
    db: Path
    verdict: Verdict | None = None
    nominal_rate_pps: int | None = None
    export: Path | None = None
    hgrm: Path | None = None
    store: bool = True
    keep_series: bool = True
    label: str | None = None

    @staticmethod
    def check_outputs(
        export: Path | None,
        report: Path | None,
        store: bool,
        label: str | None = None,
        hgrm: Path | None = None,
        captures: tuple[Path, Path] | None = None,
    ) -> None:
        """Refuse, before any work, an export file of no known format, two outputs that name
        one file or an output over a capture, and a report or a label of an analysis not
        stored (either would be lost): UserError naming the option."""
        if export is not None:
            series.check_export_path(export)
        for option, output in (("--hgrm", hgrm), ("--report", report)):
            if output is not None:
                files.check_output(output, option)
        files.check_distinct_outputs(
            (("--export", export), ("--hgrm", hgrm), ("--report", report)),
            (("PRE", captures[0]), ("POST", captures[1])) if captures else (),
        )
        if report and not store:
            raise UserError("--report needs the analysis stored (drop --no-store)")
        if label is not None and not store:
            raise UserError("--label names the analysis in the database: drop --no-store, or the label")

    @staticmethod
    def checked_rate(nominal_rate_pps: int | None) -> int | None:
        """The configured rate (`--rate`), refused when it is not above zero."""
        if nominal_rate_pps is not None and nominal_rate_pps <= 0:
            raise UserError("--rate 0: a rate above zero, e.g. 100kpps")
        return nominal_rate_pps


@dataclass
class AnalyzeOutcome:
    """The analysis (with `analysis_id`, `verdict`, `export_path` as they were made),
    whether storing it made a new analysis (False: it repeats a stored one exactly), why it
    was not stored when the database could not take it, and the page written of it (by the
    caller, from the store)."""

    doc: AnalysisDocument
    new: bool = True
    report: Path | None = None
    not_stored: Failure | None = None


class OpenedEarly:
    """The database, opened while the analysis runs: DuckDB's module takes a tenth of a
    second to import and a new database as long again to be given its tables, and the
    analysis's native threads need no interpreter meanwhile. A database this command made
    is removed again when the analysis fails (nothing is left that the user did not get);
    a database that cannot be opened is said after the figures, as before."""

    def __init__(self, db: Path):
        self.db = db
        self.store: Store | None = None
        self.made = False
        self.problem: Failure | None = None

    def __call__(self) -> None:
        importlib.import_module("lowtail.store.analyses")
        from lowtail.store import open_store

        self.made = not self.db.exists()
        try:
            self.store = open_store(self.db)
        except DatabaseBusy as e:
            self.problem = e
            self.made = False
        except (UserError, Failure):
            self.made = False  # said again, with its exit code, when the analysis is stored

    def discard(self) -> None:
        """The analysis failed: close the database, and remove it if this command made it."""
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.made:
            remove_database(self.db)


def analyze_and_store(
    request: AnalyzeRequest,
    progress: Callable[[], AbstractContextManager[ProgressCallback | None]] = lambda: nullcontext(None),
) -> AnalyzeOutcome:
    """The analysis `request` asks for, judged, written and stored; `progress` gives the
    callback that follows the reading of the captures (for as long as they are read)."""
    early = OpenedEarly(request.db) if request.store else None
    try:
        with progress() as on_progress:
            a = analyze_pair(
                request.pre,
                request.post,
                request.options,
                on_progress=on_progress,
                while_waiting=early,
                confidence=request.verdict.confidence if request.verdict else DEFAULT_CONFIDENCE,
                budgets=[request.verdict.budget_ns] if request.verdict else (),
            )
    except BaseException:
        if early is not None:
            early.discard()
        raise
    _judge_and_write(a, request)
    outcome = AnalyzeOutcome(a)
    if request.store:
        # Models read a stored series as Parquet: a CSV export is not one.
        stored = a
        if request.export is not None and request.export.suffix.lower() != ".parquet":
            stored = a.copy()
            stored["export_path"] = None
        try:
            a["analysis_id"], outcome.new = _store(stored, request, early)
        except DatabaseBusy as e:  # the figures are still printed: they are the result
            outcome.not_stored = e
    return outcome


def _judge_and_write(a: AnalysisDocument, request: AnalyzeRequest) -> None:
    """The figures as asked: the series' summary kept or not, the configured rate, the
    verdict, the exported series finished and the HDR distribution written."""
    if not request.keep_series:
        a["summary"] = None
    if request.nominal_rate_pps is not None:
        a["nominal_rate_pps"] = request.nominal_rate_pps
    verdict = request.verdict
    if verdict is not None:
        figures: LatencyFigures = a.get("latency_ns") or {}
        judged = figures.get(verdict.key)
        a["verdict"] = verdict.judge_figures(
            int(figures.get("samples") or 0),
            None if judged is None else int(judged),
            a["lost"],
            a["sent"],
            intervals=a.get("intervals"),
            rate_pps=request.nominal_rate_pps or measured_rate(a),
        ).as_dict() | {"budget": verdict.describe()}
    if request.export:
        series.finish_export(request.export)
        a["export_path"] = str(request.export)
    if request.hgrm:
        write_result(request.hgrm, a["hgrm"], "--hgrm")


def _store(a: AnalysisDocument, request: AnalyzeRequest, early: OpenedEarly | None = None) -> tuple[int, bool]:
    """Store the analysis, once (in the database opened while it ran, when it could be):
    (its id, whether it is new) — an analysis that repeats a stored one exactly (the same
    captures read the same way, the same figures) is that one. A stop signal while it is
    written waits for the commit, and the command then says whether the analysis was stored."""
    from lowtail.store import open_store
    from lowtail.store.analyses import identical_analysis, save_analysis

    if early is not None and early.problem is not None:
        raise early.problem
    opened = early.store if early is not None else None
    options, label, db = request.options.to_dict(), request.label, request.db
    stored: list[tuple[int, bool]] = []
    try:
        with opened or open_store(db) as s, signals.held():
            found = identical_analysis(s, a, options=options, label=label)
            if found is not None:
                stored.append((found, False))
            else:
                stored.append((save_analysis(s, a, options=options, label=label), True))
    except KeyboardInterrupt:
        what = f"the analysis was stored as analysis {stored[0][0]} in {db}" if stored else "nothing was stored"
        raise Interrupted(f"interrupted: {what}") from None
    return stored[0]
