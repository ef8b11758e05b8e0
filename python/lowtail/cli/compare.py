"""`lowtail compare`: which configuration keeps the tail inside the budget — stored runs
grouped into configurations, their repetitions pooled, judged, told apart — and `lowtail
comparison list/report`: the stored comparisons."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from lowtail.cli._app import app
from lowtail.cli._options import Db, Strict, duration_info, label_info, verdict_request
from lowtail.cli._output import (
    EXIT_OK,
    EXIT_PARTIAL,
    count_progress,
    note,
    out,
    print_json,
    strict_exit,
    table_console,
    warn,
)
from lowtail.cli._render import Column, columns_table, fit_columns
from lowtail.core.units import format_counted
from lowtail.core.virtualization import TCG_WARNING
from lowtail.store import DEFAULT_DB
from lowtail.store.selection import HELP as SELECTION_HELP

if TYPE_CHECKING:
    from lowtail.compare.document import ComparisonDocument

comparison_app = typer.Typer(help="Stored comparisons: list them, write their page.", no_args_is_help=True)
app.add_typer(comparison_app, name="comparison")


# The options of `lowtail compare`, each declared once; with Annotated the default follows `=`
# in the signature.
Selection = Annotated[list[str], typer.Argument(help=SELECTION_HELP)]
By = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Axes that make a configuration, comma-separated (experiment: one per experiment; flow: each run's flows; hop: each chain run's hops) [default: those that vary among the runs].",
    ),
]
Budget = Annotated[
    int | None,
    duration_info(
        "--budget", None, "Judge every configuration against this latency bound, e.g. 350us [default: the runs' own]."
    ),
]
Percentile = Annotated[
    str | None, typer.Option(help="...at this percentile, e.g. 99.99 [default: the runs' own, else 99.999].")
]
Confidence = Annotated[
    str | None,
    typer.Option(
        help="Confidence level of the intervals, verdicts and differences: 95, 95% or 0.95 "
        "[default: the runs' own verdict's, else 95].",
    ),
]
Evt = Annotated[bool, typer.Option("--evt", help="Fit (and store) the EVT model of runs that have none yet.")]
Floor = Annotated[
    int | None,
    typer.Option(
        help="Read every configuration against the calibration runs of this experiment [default: each run's own]."
    ),
]
Label = Annotated[str | None, label_info("A name for the stored comparison.")]
Output = Annotated[Path | None, typer.Option("--output", "-o", help="Also write the comparison's HTML page here.")]
StoreComparison = Annotated[
    bool,
    typer.Option(help="Store the comparison (`lowtail comparison list`); --no-store only shows it (and fits no EVT)."),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print the comparison as one JSON document.")]


@app.command(
    help="Compare stored runs: configurations (runs grouped by the axes that make them; runs that "
    "share one are repetitions), each with percentiles exact over all its packets, their confidence "
    "intervals, the spread over repetitions, the worst repetition, the noise floor and a verdict; "
    "which differences these runs can resolve; EVT over runs; latency against rate. The comparison "
    "is stored (`lowtail comparison list`). SELECTION: " + SELECTION_HELP
)
def compare(
    selection: Selection,
    by: By = None,
    budget_ns: Budget = None,
    percentile: Percentile = None,
    confidence: Confidence = None,
    evt: Evt = False,
    floor: Floor = None,
    label: Label = None,
    db: Db = DEFAULT_DB,
    output: Output = None,
    store: StoreComparison = True,
    json_out: JsonOut = False,
    strict: Strict = False,
) -> None:
    """`lowtail compare`."""
    from lowtail.compare.comparison import CompareOptions, compare, compare_and_store
    from lowtail.store import open_store

    _check_outputs(output, store, evt)
    opts = CompareOptions(
        by=[a.strip() for a in by.split(",") if a.strip()] if by else None,
        verdict=verdict_request(budget_ns, percentile, confidence=confidence),
        evt=evt,
        floor=floor,
        label=label,
    )
    with (
        open_store(db, read_only=not store, create=False) as s,
        count_progress("reading series", "rows", not json_out) as progress,
    ):
        doc = (
            compare_and_store(s, list(selection), opts, progress)
            if store
            else compare(s, list(selection), opts, progress).document
        )
    if output is not None:
        from lowtail.compare.page import write_comparison_report

        write_comparison_report(db, doc["comparison_id"] or "latest", output)
    _show(doc, json_out, store, db, output, strict)


def _check_outputs(output: Path | None, store: bool, evt: bool) -> None:
    """Refuse, before anything is computed or stored, a page or EVT models of a comparison
    not stored, and an --output that cannot be written."""
    from lowtail.core.errors import UserError
    from lowtail.core.files import check_output

    if output is not None and not store:
        raise UserError("--output needs the comparison stored (drop --no-store): its page reads it from the database")
    if evt and not store:
        raise UserError("--evt stores the EVT models it fits (drop --no-store)")
    if output is not None:
        check_output(output, "--output")


def _show(doc: ComparisonDocument, json_out: bool, store: bool, db: Path, output: Path | None, strict: bool) -> None:
    """The comparison as one JSON document or as the terminal's view with where it is stored,
    then its warnings; the exit code says whether it is partial."""
    if json_out:
        print_json(doc)
    else:
        printer = table_console()
        printer.print(comparison_view(doc, printer.width))
        if store:
            note(f"stored as comparison {doc['comparison_id']} in {db}" + (f"; page: {output}" if output else ""))
    if doc.get("emulated_runs"):
        warn(TCG_WARNING)
    for reason in doc["partial_reasons"]:
        warn(reason)
    judged = [c["verdict"]["status"] for c in doc["configurations"]]
    raise typer.Exit(strict_exit(EXIT_PARTIAL if doc["partial"] else EXIT_OK, judged, strict, json_out))


def comparison_view(doc: ComparisonDocument, width: int = 80) -> Group:
    """The comparison as the terminal shows it: the Table II-style table within `width`
    columns, why each configuration that did not plainly pass was judged so, the
    differences these runs resolve (and those they cannot), EVT over runs and latency
    against rate where stored, and the notes."""
    from lowtail.report.tables import (
        cause_headline,
        configurations_table,
        evt_table,
        not_resolvable_note,
        rates_table,
    )

    header, rows, optional = configurations_table(doc)
    columns = [
        Column(h, [r[i] for r in rows], figure=i >= len(doc["axes"] or [None]), optional=optional.get(h, 0))
        for i, h in enumerate(header)
    ]
    columns[-1].figure = False  # the verdict reads as words
    budget = doc["verdict"]
    verdict = budget["text"] if budget else "each configuration against its runs' own budget"
    by = ", ".join(a["name"] for a in doc["axes"]) or "nothing (one configuration)"
    fitted = fit_columns(columns, width)
    headline = cause_headline(doc)
    parts: list[Any] = [Text(headline)] if headline else []
    which = f"comparison {doc['comparison_id']}" if doc["comparison_id"] is not None else "comparison (not stored)"
    parts += [
        columns_table(
            f"{which} · {format_counted(len(doc['configurations']), 'configuration')} by {by} · verdict: {verdict}",
            fitted,
        )
    ]
    marked = not_resolvable_note(doc, {c.heading for c in fitted})
    if marked:
        parts.append(Text(marked))
    judged = [c for c in doc["configurations"] if c["verdict"]["status"] != "PASS" or c["verdict"]["degraded"]]
    if judged:
        # Each configuration's reason in short, configurations alike said once (the whole
        # reason of each: --json, the page).
        parts.append(Text("why (each configuration's whole reason: --json or the page):"))
        reasons = grouped([(c["label"], short_reason(c["verdict"])) for c in judged], doc)
        parts += [_indented(line) for line in reasons[:_REASONS_SHOWN]]
        if len(reasons) > _REASONS_SHOWN:  # 64 flows were 256 lines of them
            parts.append(_indented(f"… and {len(reasons) - _REASONS_SHOWN:,} more (--json or the page)"))
    parts.append(Text(_floor_line(doc)))
    parts += _differences(doc)
    if doc["evt"]:
        parts.append(_plain_table("EVT over runs (validation exceedances: 1 expected)", *evt_table(doc)))
    if any(c["explained_runs"] for c in doc.get("causes") or []):
        parts += _causes(doc)
    if any(len(s["points"]) > 1 or s["knees"] for s in doc["rates"]):
        parts.append(_plain_table("latency against rate", *rates_table(doc)))
    parts += [Text(line) for line in host_state_lines(doc)]
    parts += [Text(n) for n in doc["notes"]]
    return Group(*parts)


# The reasons of configurations not passing a terminal lists (in the table's order).
_REASONS_SHOWN = 8


def _indented(text: str) -> Padding:
    """One item of a list under its heading: indented, and wrapping under itself."""
    return Padding(Text(text), (0, 0, 0, 2))


def short_reason(v: Mapping[str, Any]) -> str:
    """A judgement's reason in short: what would decide an inconclusive one, the bound that
    failed a latency FAIL, the loss of a loss FAIL; degraded marked."""
    from lowtail.core import percentiles
    from lowtail.core.units import format_count, format_ns, format_percent

    name = percentiles.label(v["percentile"]) if v.get("percentile") else "the percentile"
    sure = f" with {format_percent(v['confidence'], 'g')} confidence" if v.get("confidence") else ""
    if v["status"] == "inconclusive" and v.get("more_packets"):
        text = f"inconclusive: about {format_count(v['more_packets'])} more packets decide it about half the time"
    elif v["status"] == "FAIL" and v.get("cause") == "latency" and v.get("lower_ns") is not None:
        text = f"FAIL: {name} is at least {format_ns(v['lower_ns'])}{sure}, over {format_ns(v['budget_ns'])}"
    else:
        text = f"{v['label']}: {v['reason']}"
    return text + "".join(f"; degraded: {d}" for d in v["degraded"])


def _causes(doc: ComparisonDocument) -> list[Any]:
    """The causes of the tail grouped under their configuration, each configuration's on a
    line that wraps under itself (a table of three columns lost its first at 100 columns)."""
    from lowtail.report.tables import causes_table

    out: list[Any] = [Text("causes of the tail (lowtail explain; share of the tail packets):")]
    _, rows = causes_table(doc)
    said = [
        (label, f"{causes} ({explained} run{'s' if explained != '1' else ''} explained)")
        for label, explained, causes in rows
    ]
    return out + [_indented(line) for line in grouped(said, doc)]


def grouped(items: list[tuple[str, str]], doc: ComparisonDocument) -> list[str]:
    """ "LABEL, LABEL: TEXT" — configurations that say the same said once, in the order they
    come; "every configuration" when all of them do."""
    by_text: dict[str, list[str]] = {}
    for label, text in items:
        by_text.setdefault(text, []).append(label)
    every = len(doc["configurations"])
    return [
        f"{'every configuration' if len(labels) == every > 1 else ', '.join(labels)}: {text}"
        for text, labels in by_text.items()
    ]


def host_state_lines(doc: ComparisonDocument) -> list[str]:
    """Where configurations' host-state fingerprints differ (`--by host_state` separates them)."""
    labels = [c["label"] for c in doc["configurations"]]
    lines = []
    for d in doc.get("host_state_differences") or []:
        a, b = labels[d["a_index"]], labels[d["b_index"]]
        what = "; ".join(f"{k}: {va or '–'} → {vb or '–'}" for k, (va, vb) in d["settings"].items())
        head = f"{a}: its runs' host state differs" if a == b else f"host state differs between {a} and {b}"
        lines.append(f"{head}: {what}")
    return lines


def _floor_line(doc: ComparisonDocument) -> str:
    floors = [c["floor"] for c in doc["configurations"] if c["floor"] is not None]
    if not floors:
        return "no floor: no calibration run of the same traffic (`lowtail calibrate`, or --floor ID)"
    runs = sorted({r for f in floors for r in f["runs"]})
    experiments = sorted({e for f in floors for e in f["experiments"]})
    return (
        f"floor: the same traffic over a plain wire, calibration run{'s' if len(runs) > 1 else ''} "
        f"{', '.join(map(str, runs))} of experiment{'s' if len(experiments) > 1 else ''} "
        f"{', '.join(map(str, experiments))}"
        + ("" if len(floors) == len(doc["configurations"]) else " (configurations without one show –)")
    )


_MAX_UNRESOLVED_SHOWN = 8


def _differences(doc: ComparisonDocument) -> list[Text]:
    from lowtail.compare.document import FEW_REPETITIONS, UNBOUNDED
    from lowtail.report.tables import by_size, not_called_by_reason, shared_notes, unjudged_lines

    family = doc.get("difference_family") or {}
    lines = []
    if doc["differences"]:
        # Many configurations: the pairs that differ on one axis isolate an effect; the
        # others (several axes at once) are counted and left to --json.
        # Largest first, the rest folded with a count; a note the pairs share said once.
        shown = by_size(doc["differences"])
        if len(shown) > _MAX_UNRESOLVED_SHOWN:
            shown = [d for d in shown if len(d["axes_differing"]) <= 1][:_MAX_UNRESOLVED_SHOWN]
        lines.append(
            Text(
                f"differences beyond run-to-run variation ({family.get('comparisons', 0)} comparisons, "
                f"{100 * (1 - doc['level']):g} % chance of any false call, Holm), largest first:"
            )
        )
        lines += [Text("  " + d["text"]) for d in shown]
        if len(shown) < len(doc["differences"]):
            lines.append(
                Text(f"  … and {len(doc['differences']) - len(shown)} smaller or across several axes (--json)")
            )
        lines += [Text(f"  ({note})") for note in shared_notes(doc["differences"])]
    elif family.get("comparisons"):
        lines.append(Text(f"no difference beyond run-to-run variation ({family['comparisons']} comparisons, Holm)"))
    # Pairs not called because a repetition's packets do not bound the percentile, or a
    # configuration has one repetition, are said once (per percentile, or in a note).
    unresolved = [d for d in doc["not_resolvable"] if d["reason"] not in (UNBOUNDED, FEW_REPETITIONS)]
    if len(unresolved) > _MAX_UNRESOLVED_SHOWN:
        unresolved.sort(key=lambda d: len(d["axes_differing"]) > 1)
    if unresolved:
        lines.append(Text(f"not called ({len(unresolved)}):"))
        for why, pairs in not_called_by_reason(unresolved):
            more = (
                f"; … and {len(pairs) - _MAX_UNRESOLVED_SHOWN} more (--json)"
                if len(pairs) > _MAX_UNRESOLVED_SHOWN
                else ""
            )
            lines.append(Text(f"  {why} ({len(pairs)}): {'; '.join(pairs[:_MAX_UNRESOLVED_SHOWN])}{more}"))
    return lines + [Text(line) for line in unjudged_lines(doc)]


def _plain_table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    return columns_table(title, [Column(h, [r[i] for r in rows], figure=i > 0) for i, h in enumerate(header)])


@comparison_app.command("list", help="List stored comparisons, newest first.")
def list_comparisons(db: Db = DEFAULT_DB, json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """`lowtail comparison list`."""
    from lowtail.store import comparisons, open_store

    with open_store(db, read_only=True) as store:
        rows = comparisons.list_comparisons(store)
    if json_out:
        print_json(rows)
        return
    t = Table(box=None)
    for col in ("id", "created", "label", "selection", "by", "configurations"):
        t.add_column(col, justify="right" if col in ("id", "configurations") else "left")
    for r in rows:
        t.add_row(
            str(r["comparison_id"]),
            f"{r['created_at']:%Y-%m-%d %H:%M}",
            r["label"] or "",
            " ".join(r["selection"]),
            ",".join(r["by_axes"]),
            str(r["configurations"]),
        )
    out.print(t)


@comparison_app.command("report", help="Write the HTML page of a stored comparison (an id, or 'latest').")
def comparison_report(
    comparison: str = typer.Argument("latest", help="Comparison id or 'latest'."),
    db: Db = DEFAULT_DB,
    output: Path | None = typer.Option(
        None, "--output", "-o", help="HTML file [default: lowtail-comparison-<id>.html]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail comparison report`."""
    from lowtail.compare.page import write_comparison_report
    from lowtail.store import comparisons, open_store

    with open_store(db, read_only=True) as store:
        cid = comparisons.comparison(store, comparison)["comparison_id"]
    path = write_comparison_report(db, cid, output or Path(f"lowtail-comparison-{cid}.html"))
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
