"""`lowtail analyze PRE POST`: exact latency figures of a capture pair."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from lowtail.analyze.flows import DEFAULT_FLOW_KEY, FLOW_KEYS, for_printing, parse_flow_key
from lowtail.analyze.pair import SHOWN_WORST, AnalyzeOptions, analyze_options, worst_first
from lowtail.analyze.stored import AnalyzeOutcome, AnalyzeRequest, analyze_and_store
from lowtail.cli._app import app
from lowtail.cli._options import Db, Strict, duration_info, label_info, unit_info, verdict_request
from lowtail.cli._output import (
    EXIT_OK,
    EXIT_PARTIAL,
    byte_progress,
    fail,
    note,
    out,
    print_json,
    strict_exit,
    warn,
)
from lowtail.cli._render import analysis_tables, header_line
from lowtail.core import series
from lowtail.core.errors import Failure, UserError
from lowtail.store import DEFAULT_DB
from lowtail.verdict.judge import DEFAULT_CONFIDENCE, DEFAULT_PERCENTILE, Verdict

# Defaults shown and used here are the native options' own.
DEFAULTS = AnalyzeOptions()


class Endianness(str, Enum):
    big = "big"
    little = "little"


class IdFormat(str, Enum):
    lowtail = "lowtail"
    moonsniff = "moonsniff"


# The options of `lowtail analyze`, each declared once; the signature lists them a line each.
Pre = Annotated[Path, typer.Argument(help="Capture of the packets entering the device under test.")]
Post = Annotated[Path, typer.Argument(help="Capture of the packets leaving it.")]
IdOffset = Annotated[
    int | None,
    typer.Option(min=0, help=f"Bytes from the start of the UDP payload to the id [default: {DEFAULTS.id_offset}]."),
]
IdWidth = Annotated[
    int | None,
    typer.Option(help=f"Id width in bytes, 4 or 8 [default: {DEFAULTS.id_width}]; 4-byte ids are unwrapped."),
]
IdEndian = Annotated[Endianness | None, typer.Option(help=f"Id byte order [default: {DEFAULTS.id_endian}].")]
IdFormatOption = Annotated[
    IdFormat | None, typer.Option(help="Preset: lowtail (u64 big-endian at 0) or moonsniff (u32 little-endian at 0).")
]
UdpPort = Annotated[int | None, typer.Option(min=0, max=65535, help="Only UDP datagrams to this port carry ids.")]
MoonsniffRecords = Annotated[
    bool,
    typer.Option(
        "--moonsniff-records", help="Read files without pcap magic as MoonSniff records (automatic for *.mscap)."
    ),
]
Trim = Annotated[
    int, duration_info("--trim", DEFAULTS.trim_ns, "Warm-up to cut from the first PRE packet: 1s, 500ms; 0 keeps all.")
]
MaxLatency = Annotated[
    int,
    duration_info(
        "--max-latency", DEFAULTS.max_latency_ns, "Latencies above this count as losses (bounds memory to rate × this)."
    ),
]
Worst = Annotated[
    int,
    typer.Option(
        min=0,
        help=f"How many of the worst events --json prints, worst first (the analysis keeps and stores "
        f"at least {DEFAULTS.worst:,} for the report and the models).",
    ),
]
FlowKey = Annotated[
    str | None,
    typer.Option(
        "--flow-key",
        help=f"What tells PRE's flows apart: {', '.join(FLOW_KEYS)} (5tuple: addresses and UDP ports; "
        f"src-port: the UDP source port; none: one flow, for captures whose flows mean nothing) "
        f"[default: {DEFAULT_FLOW_KEY}].",
    ),
]
Export = Annotated[
    Path | None,
    typer.Option(help=f"Write the matched series ({series.columns_text()}) to this file: FILE.parquet or FILE.csv."),
]
Hgrm = Annotated[Path | None, typer.Option(help="Write the HDR percentile distribution (.hgrm, values in µs) here.")]
NominalRate = Annotated[
    int | None,
    unit_info(
        "--rate",
        "rate",
        None,
        "The rate the traffic was sent at, e.g. 100kpps: its configuration (a measured rate is not one).",
    ),
]
Budget = Annotated[
    int | None,
    duration_info(
        "--budget", None, "Judge the latencies against this bound, e.g. 350us, as `lowtail run` judges a run."
    ),
]
Percentile = Annotated[
    str | None,
    typer.Option(help=f"...at this percentile (with --budget) [default: {DEFAULT_PERCENTILE.digits}]."),
]
MaxLoss = Annotated[
    int | None,
    typer.Option(min=0, help=f"...with at most this many packets lost (with --budget) [default: {Verdict.max_loss}]."),
]
Confidence = Annotated[
    str | None,
    typer.Option(
        help="...with this confidence: the one-sided bound judged (with --budget): 95, 95% or 0.95 "
        f"[default: {DEFAULT_CONFIDENCE:.0%}]."
    ),
]
StoreAnalysis = Annotated[bool, typer.Option(help="Store the analysis in the database.")]
KeepSeries = Annotated[
    bool,
    typer.Option(
        "--series/--no-series",
        help="Store the latencies' summary (exact distribution and time blocks, a few hundred kB) that "
        "`lowtail compare` pools and bounds; --no-series keeps only the figures.",
    ),
]
Label = Annotated[str | None, label_info("A name for this analysis in the database.")]
Report = Annotated[Path | None, typer.Option(help="Also write an HTML report to this file.")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]


@app.command(
    help="Match a PRE and a POST capture by packet id and print exact latency figures. "
    "Reads pcap (µs/ns, either byte order), pcapng and MoonSniff .mscap records, "
    "plain or zstd/gzip-compressed."
)
def analyze(
    pre: Pre,
    post: Post,
    id_offset: IdOffset = None,
    id_width: IdWidth = None,
    id_endian: IdEndian = None,
    id_format: IdFormatOption = None,
    udp_port: UdpPort = None,
    moonsniff_records: MoonsniffRecords = False,
    trim_ns: Trim = DEFAULTS.trim_ns,
    max_latency_ns: MaxLatency = DEFAULTS.max_latency_ns,
    worst: Worst = SHOWN_WORST,
    flow_key: FlowKey = None,
    export: Export = None,
    hgrm: Hgrm = None,
    nominal: NominalRate = None,
    budget_ns: Budget = None,
    percentile: Percentile = None,
    max_loss: MaxLoss = None,
    confidence: Confidence = None,
    db: Db = DEFAULT_DB,
    store: StoreAnalysis = True,
    keep_series: KeepSeries = True,
    label: Label = None,
    report: Report = None,
    json_out: JsonOut = False,
    strict: Strict = False,
) -> None:
    """`lowtail analyze` (its help is the user's documentation)."""
    AnalyzeRequest.check_outputs(export, report, store, label, hgrm, (pre, post))
    request = AnalyzeRequest(
        pre,
        post,
        verdict=_verdict(budget_ns, percentile, max_loss, confidence, strict),
        nominal_rate_pps=AnalyzeRequest.checked_rate(nominal),
        options=analyze_options(
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
        ),
        db=db,
        export=export,
        hgrm=hgrm,
        store=store,
        keep_series=keep_series,
        label=label,
    )
    outcome = analyze_and_store(request, progress=lambda: byte_progress("analysing"))
    if report and outcome.not_stored is None:
        _write_report(outcome, db, report)
    _render(outcome, request, worst, json_out, strict)


def _render(outcome: AnalyzeOutcome, request: AnalyzeRequest, worst: int, json_out: bool, strict: bool) -> None:
    """The analysis as one JSON document or as tables with what was written and stored;
    the exit code says whether it is partial, or that it could not be stored."""
    a, not_stored = outcome.doc, outcome.not_stored
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
        _print_tables(outcome, request)
    if not_stored_message:
        fail(not_stored_message, Failure.exit_code, json_doc=False)
    judged = [a["verdict"]["status"]] if a.get("verdict") else []
    raise typer.Exit(strict_exit(EXIT_PARTIAL if a["partial"] else EXIT_OK, judged, strict, json_out))


def _print_tables(outcome: AnalyzeOutcome, request: AnalyzeRequest) -> None:
    a, db = outcome.doc, request.db
    note(header_line(a))
    for table in analysis_tables(a):
        out.print(table)
    if a.get("verdict"):
        v = a["verdict"]
        out.print(f"verdict: {v['label']} · {v['budget']} · {v['reason']}", soft_wrap=True)
    if request.store and outcome.not_stored is None:
        note(
            f"stored as analysis {a['analysis_id']} in {db}"
            if outcome.new
            else f"already stored as analysis {a['analysis_id']} in {db} (the same captures, options and figures): "
            "not stored again"
        )
    if request.export:
        note(f"wrote the matched series to {request.export}")
    if request.hgrm:
        note(f"wrote the HDR distribution to {request.hgrm}")
    if outcome.report:
        note(f"wrote the report to {outcome.report}")


def _verdict(
    budget_ns: int | None, percentile: str | None, max_loss: int | None, confidence: str | None, strict: bool
) -> Verdict | None:
    """The budget --budget, --percentile, --max-loss and --confidence ask for (None without
    --budget): the request over the default budget, as `compare` reads one over the stored.
    The others (and --strict) without --budget judge nothing: refused rather than ignored."""
    if budget_ns is None:
        given = [
            name
            for name, v in (
                ("--percentile", percentile),
                ("--max-loss", max_loss),
                ("--confidence", confidence),
                ("--strict", strict or None),
            )
            if v is not None
        ]
        if given:
            raise UserError(
                f"{' and '.join(given)} judge{'s' if len(given) == 1 else ''} the latencies against a budget: "
                "give --budget too (e.g. --budget 350us)"
            )
        return None
    return verdict_request(budget_ns, percentile, max_loss, confidence).over(Verdict())


def _write_report(outcome: AnalyzeOutcome, db: Path, report: Path) -> None:
    """The report of the analysis just stored, named in the outcome and its document; when it
    cannot be written, the error says that the analysis is stored all the same."""
    from lowtail.analyze.page import write_analysis_report

    analysis_id = outcome.doc["analysis_id"]
    try:
        outcome.report = write_analysis_report(db, analysis_id, report)
        outcome.doc["report"] = str(outcome.report)
    except (UserError, Failure) as e:
        raise type(e)(
            f"{e} (the analysis is stored as analysis {analysis_id} in {db}: "
            f"`lowtail report {analysis_id} -o FILE` writes its report later)"
        ) from None
