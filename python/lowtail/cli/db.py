"""`lowtail list`, `lowtail show` and `lowtail recover`: what the results database holds, and
what a damaged one still holds, copied out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import Db
from lowtail.cli._output import EXIT_PARTIAL, note, out, print_json, table_console, warn
from lowtail.cli._render import analysis_tables, header_line, middle_cut
from lowtail.core import percentiles
from lowtail.core.units import format_ns
from lowtail.store import DEFAULT_DB


@app.command("list", help="List the analyses stored in the database, newest first.")
def list_(
    db: Db = DEFAULT_DB,
    limit: int = typer.Option(50, min=1, max=1_000_000, help="How many to show."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """`lowtail list`."""
    from lowtail.store import open_store
    from lowtail.store.analyses import list_analyses

    with open_store(db, read_only=True) as s:
        rows = list_analyses(s, limit)
    if json_out:
        print_json(rows)
        return
    _print_analyses(rows)


def _print_analyses(rows: Sequence[Mapping[str, Any]]) -> None:
    """The analyses as a table within the terminal's width: the label and the capture's name
    share what the figures leave (a narrow terminal drops the median)."""
    p50, p99_999 = percentiles.by_key("p50").short, percentiles.by_key("p99_999").short
    this_year = datetime.now().year
    cells = [
        [
            str(r["analysis_id"]),
            f"{r['created_at']:%b %d %H:%M}" if r["created_at"].year == this_year else f"{r['created_at']:%Y-%m-%d}",
            r["label"] or "",
            f"{r['sent']:,}",
            f"{r['lost']:,}",
            format_ns(r["lat_p50_ns"]),
            format_ns(r["lat_p99_999_ns"]),
            format_ns(r["lat_max_ns"]),
            # The capture's file name says which it is (its folder is in `show`).
            Path(r["pre_path"]).name + (" (partial)" if r["partial"] else ""),
        ]
        for r in rows
    ]
    header = ["id", "created", "label", "sent", "lost", p50, p99_999, "max", "pre capture"]
    widths = [max([len(col), *(len(c[i]) for c in cells)]) for i, col in enumerate(header)]
    console = table_console()
    label_width, capture_width = _label_and_capture_widths(widths, console.width)
    if capture_width < _CAPTURE_NARROWEST:  # a narrow terminal: the median gives way (`show` has it)
        del header[5], widths[5]
        cells = [c[:5] + c[6:] for c in cells]
        label_width, capture_width = _label_and_capture_widths(widths, console.width)
    t = Table(box=None, pad_edge=False)
    for i, col in enumerate(header):
        # Figures and dates keep their width; the label and the capture's name share the rest,
        # the name cut in its middle (its start and its end say which capture it is).
        width = {"label": label_width, "pre capture": capture_width}.get(col, widths[i])
        t.add_column(
            col,
            justify="left" if col in ("created", "label", "pre capture") else "right",
            no_wrap=True,
            min_width=width,
            max_width=width,
            overflow="ellipsis",
        )
    for c in cells:
        t.add_row(*c[:-1], middle_cut(c[-1], capture_width))
    console.print(t)


_LABEL_WIDEST = 14
_LABEL_NARROWEST = 8
_CAPTURE_NARROWEST = 16


def _label_and_capture_widths(widths: list[int], terminal: int) -> tuple[int, int]:
    """The label's and the capture name's widths (the second and the last of `widths`) in a
    terminal `terminal` columns wide, the other columns keeping theirs: the label up to 14,
    giving way down to 8 while the name does not fit whole; the name the rest."""
    label, capture = widths[2], widths[-1]
    room = terminal - (sum(widths) - label - capture) - 2 * (len(widths) - 1)  # two spaces between columns
    label = min(label, _LABEL_WIDEST)
    if room - label < capture:
        label = max(min(label, _LABEL_NARROWEST), room - capture)
    return label, max(min(capture, room - label), 5)


@app.command(help="Show one stored analysis (an id, or 'latest').")
def show(
    analysis: str = typer.Argument("latest", help="Analysis id or 'latest'."),
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(
        False, "--json", help="Print the stored figures as JSON (with the verdict against its budget, if it has one)."
    ),
) -> None:
    """`lowtail show`."""
    from lowtail.analyze.flows import for_printing
    from lowtail.store import open_store
    from lowtail.store.analyses import analysis as stored_analysis
    from lowtail.verdict.analysis_budget import analysis_budget

    with open_store(db, read_only=True) as s:
        doc = stored_analysis(s, analysis)
        budget = analysis_budget(s, doc)
    a: dict[str, Any] = {**doc["figures"], **doc["inputs"], "analysis_id": doc["analysis_id"]}
    # A run's analysis is judged as its experiment judges the run; one of `analyze --budget`
    # as it was then; a plain analysis has no budget of its own to show.
    if not budget.is_default:
        a["verdict"] = budget.judge()
    if doc["flows"] is not None:  # as `analyze` printed them: worst first
        a["flows"] = for_printing(doc["flows"])
    if json_out:
        print_json(a)
        return
    note(f"analysis {doc['analysis_id']} · {doc['created_at']:%Y-%m-%d %H:%M:%S} · " + header_line(a))
    for table in analysis_tables(a):
        out.print(table)
    if a.get("verdict"):
        v = a["verdict"]
        # A calibration run is the floor, judged against no budget.
        against = "" if v["status"] == "floor" else f" · {v['budget']}"
        out.print(f"verdict: {v['label']}{against} ({budget.whose}) · {v['reason']}", soft_wrap=True)
    for w in doc["warnings"]:
        warn(w)


@app.command(
    help="Copy what a damaged database still holds into a new one: every row that can be read, "
    "ids kept. The damaged file is only read."
)
def recover(
    damaged: Path = typer.Argument(..., help="The damaged database."),
    new: Path = typer.Argument(..., help="A new database to copy into (must not exist)."),
    json_out: bool = typer.Option(False, "--json", help="Print per table the rows found and copied as JSON."),
) -> None:
    """`lowtail recover`."""
    from lowtail.store.recover import recover as copy_readable

    copies = copy_readable(damaged, new)
    lost = sum(c.lost for c in copies)
    if json_out:
        print_json([{"table": c.table, "rows": c.rows, "copied": c.copied} for c in copies])
    else:
        t = Table(box=None)
        for col in ("table", "rows", "copied", "lost"):
            t.add_column(col, justify="left" if col == "table" else "right")
        for c in copies:
            if c.rows:
                t.add_row(c.table, f"{c.rows:,}", f"{c.copied:,}", f"{c.lost:,}" if c.lost else "")
        out.print(t)
        note(
            f"copied {sum(c.copied for c in copies):,} rows into {new}"
            + (f"; {lost:,} could not be read" if lost else "")
        )
    if lost:
        raise typer.Exit(EXIT_PARTIAL)
