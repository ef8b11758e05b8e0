"""`lowtail analyze PRE POST`: exact latency figures of a capture pair."""

from __future__ import annotations

import importlib
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from lowtail.analyze.flows import DEFAULT_FLOW_KEY, FLOW_KEYS, for_printing, parse_flow_key
from lowtail.analyze.pair import (
    SHOWN_WORST,
    AnalysisDocument,
    AnalyzeOptions,
    analyze_options,
    analyze_pair,
    worst_first,
)
from lowtail.cli._app import app
from lowtail.cli._options import db_option, duration_option, unit_option, verdict_request
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, byte_progress, fail, note, out, print_json, warn
from lowtail.cli._render import analysis_tables, header_line, measured_rate
from lowtail.core import series, signals
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.core.files import write_result
from lowtail.store import DatabaseBusy
from lowtail.verdict.judge import DEFAULT_CONFIDENCE, Verdict

if TYPE_CHECKING:
    from lowtail.store.db import Store

# Defaults shown and used here are the native options' own.
DEFAULTS = AnalyzeOptions()


class Endianness(str, Enum):
    big = "big"
    little = "little"


class IdFormat(str, Enum):
    lowtail = "lowtail"
    moonsniff = "moonsniff"


class _OpenedEarly:
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
            for leftover in (self.db, self.db.with_name(self.db.name + ".wal")):
                leftover.unlink(missing_ok=True)


@app.command(
    help="Match a PRE and a POST capture by packet id and print exact latency figures. "
    "Reads pcap (µs/ns, either byte order), pcapng and MoonSniff .mscap records, "
    "plain or zstd/gzip-compressed."
)
def analyze(
    pre: Path = typer.Argument(..., help="Capture of the packets entering the device under test."),
    post: Path = typer.Argument(..., help="Capture of the packets leaving it."),
    id_offset: int | None = typer.Option(
        None, min=0, help=f"Bytes from the start of the UDP payload to the id [default: {DEFAULTS.id_offset}]."
    ),
    id_width: int | None = typer.Option(
        None, help=f"Id width in bytes, 4 or 8 [default: {DEFAULTS.id_width}]; 4-byte ids are unwrapped."
    ),
    id_endian: Endianness | None = typer.Option(None, help=f"Id byte order [default: {DEFAULTS.id_endian}]."),
    id_format: IdFormat | None = typer.Option(
        None, help="Preset: lowtail (u64 big-endian at 0) or moonsniff (u32 little-endian at 0)."
    ),
    udp_port: int | None = typer.Option(None, min=0, max=65535, help="Only UDP datagrams to this port carry ids."),
    moonsniff_records: bool = typer.Option(
        False, "--moonsniff-records", help="Read files without pcap magic as MoonSniff records (automatic for *.mscap)."
    ),
    trim_ns: int = duration_option(
        "--trim",
        DEFAULTS.trim_ns,
        "Warm-up to cut from the first PRE packet: 1s, 500ms; 0 keeps all.",
    ),
    max_latency_ns: int = duration_option(
        "--max-latency", DEFAULTS.max_latency_ns, "Latencies above this count as losses (bounds memory to rate × this)."
    ),
    worst: int = typer.Option(
        SHOWN_WORST,
        min=0,
        help=f"How many of the worst events --json prints, worst first (the analysis keeps and stores "
        f"at least {DEFAULTS.worst:,} for the report and the models).",
    ),
    flow_key: str | None = typer.Option(
        None,
        "--flow-key",
        help=f"What tells PRE's flows apart: {', '.join(FLOW_KEYS)} (5tuple: addresses and UDP ports; "
        f"src-port: the UDP source port; none: one flow, for captures whose flows mean nothing) "
        f"[default: {DEFAULT_FLOW_KEY}].",
    ),
    export: Path | None = typer.Option(
        None, help=f"Write the matched series ({series.columns_text()}) to this file: FILE.parquet or FILE.csv."
    ),
    hgrm: Path | None = typer.Option(None, help="Write the HDR percentile distribution (.hgrm, values in µs) here."),
    nominal: int | None = unit_option(
        "--rate",
        "rate",
        None,
        "The rate the traffic was sent at, e.g. 100kpps: its configuration (a measured rate is not one).",
    ),
    budget_ns: int | None = duration_option(
        "--budget", None, "Judge the latencies against this bound, e.g. 350us, as `lowtail run` judges a run."
    ),
    percentile: str = typer.Option("99.999", help="...at this percentile (with --budget)."),
    max_loss: int = typer.Option(0, min=0, help="...with at most this many packets lost (with --budget)."),
    confidence: str = typer.Option(
        "95", help="...with this confidence: the one-sided bound judged (with --budget): 95, 95% or 0.95."
    ),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the analysis in the database."),
    keep_series: bool = typer.Option(
        True,
        "--series/--no-series",
        help="Store the latencies' summary (exact distribution and time blocks, a few hundred kB) that "
        "`lowtail compare` pools and bounds; --no-series keeps only the figures.",
    ),
    label: str | None = typer.Option(None, help="A name for this analysis in the database."),
    report: Path | None = typer.Option(None, help="Also write an HTML report to this file."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """`lowtail analyze` (its help is the user's documentation)."""
    if export is not None:
        series.check_export_path(export)
    if report and not store:
        raise UserError("--report needs the analysis stored (drop --no-store)")
    verdict = _verdict(budget_ns, percentile, max_loss, confidence)
    if nominal is not None and nominal <= 0:
        raise UserError("--rate 0: a rate above zero, e.g. 100kpps")
    options = analyze_options(
        id_offset=id_offset,
        id_width=id_width,
        id_endian=id_endian.value if id_endian else None,
        id_format=id_format.value if id_format else None,
        udp_port=udp_port,
        moonsniff_records=moonsniff_records,
        trim_ns=trim_ns,
        max_latency_ns=max_latency_ns,
        worst=max(worst, DEFAULTS.worst),
        export=series.parquet_path_for(export) if export else None,
        flow_key=parse_flow_key(flow_key) if flow_key is not None else None,
    )
    early = _OpenedEarly(db) if store else None
    try:
        with byte_progress("analysing") as progress:
            a = analyze_pair(
                pre,
                post,
                options,
                on_progress=progress,
                while_waiting=early,
                confidence=verdict.confidence if verdict else DEFAULT_CONFIDENCE,
                budgets=[verdict.budget_ns] if verdict else (),
            )
    except BaseException:
        if early is not None:
            early.discard()
        raise
    if not keep_series:
        a["summary"] = None
    if nominal is not None:
        a["nominal_rate_pps"] = nominal
    if verdict is not None:
        figures = a.get("latency_ns") or {}
        judged = figures.get(verdict.key)
        a["verdict"] = verdict.judge_figures(
            int(figures.get("samples") or 0),
            None if judged is None else int(judged),
            a["lost"],
            a["sent"],
            intervals=a.get("intervals"),
            rate_pps=nominal or measured_rate(a),
        ).as_dict() | {"budget": verdict.describe()}
    if export:
        series.finish_export(export)
        a["export_path"] = str(export)
    if hgrm:
        write_result(hgrm, a["hgrm"], "--hgrm")
    not_stored: Failure | None = None
    new = True
    if store:
        # Models read a stored series as Parquet: a CSV export is not one.
        stored = a
        if export is not None and export.suffix.lower() != ".parquet":
            stored = a.copy()
            stored["export_path"] = None
        try:
            a["analysis_id"], new = _store(stored, db, options, label, early)
        except DatabaseBusy as e:  # the figures are still printed: they are the result
            not_stored = e
    written = None
    if report and not_stored is None:
        written = _write_report(db, a["analysis_id"], report)
        a["report"] = str(written)
    for w in a["warnings"]:
        warn(w)
    not_stored_message = f"the analysis printed above was not stored: {not_stored}" if not_stored else None
    a.pop("summary", None)  # stored as it is; not a figure to print
    if json_out:
        if not_stored_message:
            # One document on stdout: the figures, and the error beside them.
            a["error"], a["exit_code"] = not_stored_message, Failure.exit_code
        shown = worst_first(a, worst)
        if "flows" in shown:
            shown["flows"] = for_printing(shown["flows"])
        print_json(shown)
    else:
        note(header_line(a))
        for table in analysis_tables(a):
            out.print(table)
        if a.get("verdict"):
            v = a["verdict"]
            out.print(f"verdict: {v['label']} · {v['budget']} · {v['reason']}", soft_wrap=True)
        if store and not_stored is None:
            note(
                f"stored as analysis {a['analysis_id']} in {db}"
                if new
                else f"already stored as analysis {a['analysis_id']} in {db} (the same captures, options and figures): "
                "not stored again"
            )
        if export:
            note(f"wrote the matched series to {export}")
        if hgrm:
            note(f"wrote the HDR distribution to {hgrm}")
        if written:
            note(f"wrote the report to {written}")
    if not_stored_message:
        fail(not_stored_message, Failure.exit_code, json_doc=False)
    raise typer.Exit(EXIT_PARTIAL if a["partial"] else EXIT_OK)


def _verdict(budget_ns: int | None, percentile: str, max_loss: int, confidence: str) -> Verdict | None:
    """The budget --budget, --percentile, --max-loss and --confidence ask for (None without
    --budget): the request over the default budget, as `compare` reads one over the stored."""
    if budget_ns is None:
        return None
    return verdict_request(budget_ns, percentile, max_loss, confidence).over(Verdict())


def _store(
    a: AnalysisDocument, db: Path, options: AnalyzeOptions, label: str | None, early: _OpenedEarly | None = None
) -> tuple[int, bool]:
    """Store the analysis, once (in the database opened while it ran, when it could be):
    (its id, whether it is new) — an analysis that repeats a stored one exactly (the same
    captures read the same way, the same figures) is that one. A stop signal while it is
    written waits for the commit, and the command then says whether the analysis was stored."""
    from lowtail.store import open_store
    from lowtail.store.analyses import identical_analysis, save_analysis

    if early is not None and early.problem is not None:
        raise early.problem
    opened = early.store if early is not None else None
    stored: list[tuple[int, bool]] = []
    try:
        with opened or open_store(db) as s, signals.held():
            found = identical_analysis(s, a, options=options.to_dict(), label=label)
            if found is not None:
                stored.append((found, False))
            else:
                stored.append((save_analysis(s, a, options=options.to_dict(), label=label), True))
    except KeyboardInterrupt:
        what = f"the analysis was stored as analysis {stored[0][0]} in {db}" if stored else "nothing was stored"
        raise Interrupted(f"interrupted: {what}") from None
    return stored[0]


def _write_report(db: Path, analysis_id: int, report: Path) -> Path:
    """The report of the analysis just stored; when it cannot be written, the error says
    that the analysis is stored all the same."""
    from lowtail.analyze.page import write_analysis_report

    try:
        return write_analysis_report(db, analysis_id, report)
    except (UserError, Failure) as e:
        raise type(e)(
            f"{e} (the analysis is stored as analysis {analysis_id} in {db}: "
            f"`lowtail report {analysis_id} -o FILE` writes its report later)"
        ) from None
