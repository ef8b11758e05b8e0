"""Readable tables: the analysis figures (the same document `--json` prints), and the
column fitting every wide table of runs or configurations uses within a terminal's width."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.markup import escape as markup_escape
from rich.table import Table
from rich.text import Text

from lowtail.analyze.pair import measured_rate
from lowtail.core import percentiles
from lowtail.core.units import format_ns, format_percent, format_rate, format_share
from lowtail.report.tables import interval_text, unresolved_note


def analysis_tables(a: Mapping[str, Any]) -> list[RenderableType]:
    counts = Table(title="packets", title_justify="left", show_header=True, box=None, pad_edge=False)
    for col in ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative"):
        counts.add_column(col, justify="right")
    counts.add_row(
        *(f"{a[k]:,}" for k in ("sent", "received")),
        f"{a['lost']:,} ({format_share(a['lost'], a['sent'])})",
        *(f"{a[k]:,}" for k in ("duplicates", "reordered", "foreign", "negative")),
    )
    tables: list[RenderableType] = [counts]
    lat = a.get("latency_ns")
    if lat:
        # One row per figure: ten columns of "123.456 µs" do not fit 80 characters, and
        # rich would cut the numbers to "123.4…" (piped output is 80 wide too).
        t = Table(
            title=f"latency ({lat['samples']:,} samples, exact nearest rank)",
            title_justify="left",
            box=None,
            pad_edge=False,
            show_header=False,
        )
        t.add_column("percentile", justify="left")
        t.add_column("latency", justify="right")
        intervals = a.get("intervals") or {}
        shown = intervals.get("percentiles") or {}
        t.add_column("interval", justify="right")
        level = f"{format_percent(intervals['level'], 'g')} interval" if intervals else ""
        t.add_row("", "", level)
        for key, label in percentiles.labelled():
            t.add_row(label, format_ns(lat[key]), interval_text(lat[key], shown.get(key), lat["max"]))
        t.add_row("mean", format_ns(lat["mean"]), "")
        t.add_row("stddev", format_ns(lat["stddev"]), "")
        tables.append(t)
        why = unresolved_note(a.get("intervals"))
        if why is not None:
            tables.append(Text(why))
    flows_table = worst_flows_table(a)
    if flows_table is not None:
        tables.append(flows_table)
    return tables


def worst_flows_table(a: Mapping[str, Any]) -> Table | None:
    """The worst flows of an analysis of several flows (None for one flow): how far the
    flows lie apart in its title, the worst `SHOWN_FLOWS` below, each with its loss, median,
    ranking percentile and worst case."""
    from lowtail.analyze.document import RANKED_BY, flow_spread, flows_worst_first
    from lowtail.analyze.flows import SHOWN_FLOWS

    flows = (a.get("flows") or {}).get("flows") or []
    if len(flows) < 2:
        return None
    s = flow_spread(flows)
    ranked = percentiles.by_key(RANKED_BY)
    title = (
        f"flows ({len(flows):,} by {a['flows']['key']}; {ranked.short} from {format_ns(s['least_ns'])} to "
        f"{format_ns(s['greatest_ns'])}, median {format_ns(s['median_ns'])}; loss "
        f"{format_percent(s['least_loss'])} to {format_percent(s['greatest_loss'])}) — worst first"
    )
    t = Table(title=title, title_justify="left", box=None, pad_edge=False)
    # A 5-tuple is ~30 characters: the flow's packets stay in --json, so that a row fits 80.
    t.add_column("flow", justify="left", no_wrap=True)
    for col in ("lost", "p50", ranked.short, "max"):
        t.add_column(col, justify="right", no_wrap=True)
    for f in flows_worst_first(flows)[:SHOWN_FLOWS]:
        lat = f["latency_ns"] or {}
        t.add_row(
            markup_escape(f["key"]),
            f"{f['lost']:,} ({format_share(f['lost'], f['sent'])})",
            format_ns(lat.get("p50")),
            format_ns(lat.get(RANKED_BY)),
            format_ns(lat.get("max")),
        )
    return t


def header_line(a: Mapping[str, Any]) -> str:
    dur = a.get("duration_ns") or 0
    parts = [
        f"{a['pre']['path']} → {a['post']['path']}",
        f"trim {format_ns(a['trim_ns'])}",
        f"{format_ns(dur)} analysed",
    ]
    measured = measured_rate(a)
    if a.get("nominal_rate_pps"):
        parts.append(f"sent at {format_rate(a['nominal_rate_pps'])}")
    elif measured:
        parts.append(f"sent at {format_rate(measured)} (measured)")
    if a.get("partial"):
        parts.append("PARTIAL")
    return " · ".join(parts)


@dataclass
class Column:
    """One column of a terminal table: heading (may hold a line break) and cells."""

    heading: str
    cells: list[str]
    figure: bool = True  # right-aligned, never wrapped
    # Left out, highest first, while the table is wider than the terminal (the JSON and
    # the report have them); 0: always shown.
    optional: int = 0

    @property
    def width(self) -> int:
        """The widest line of the heading and the cells."""
        return max(len(line) for text in [self.heading, *self.cells] for line in text.splitlines())


def middle_cut(text: str, width: int) -> str:
    """`text` in at most `width` characters: its middle replaced by "…" when it is longer
    (a file name's start and its end both say which file it is)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def fit_columns(columns: list[Column], width: int) -> list[Column]:
    """The columns left once optional ones are dropped, highest level first, until the
    table fits `width` (one space between columns)."""
    for level in sorted({c.optional for c in columns if c.optional}, reverse=True):
        if sum(c.width for c in columns) + len(columns) - 1 <= width:
            break
        columns = [c for c in columns if c.optional != level]
    return columns


def columns_table(title: str, columns: list[Column]) -> Table:
    """A borderless table of these columns, one row per cell index."""
    t = Table(title=title, title_justify="left", box=None, pad_edge=False, collapse_padding=True)
    for c in columns:
        # Figures never wrap (a figure cut or broken over lines would mislead); names and
        # axis values fold rather than lose letters when the terminal is narrower still.
        t.add_column(c.heading, justify="right" if c.figure else "left", no_wrap=c.figure, overflow="fold")
    for i in range(len(columns[0].cells) if columns else 0):
        t.add_row(*(c.cells[i] for c in columns))
    return t
