"""Readable tables of analysis figures (the same document `--json` prints)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lowtail import percentiles
from lowtail.units import format_ns, format_share


def analysis_tables(a: dict[str, Any]) -> list[Table]:
    counts = Table(title="packets", title_justify="left", show_header=True, box=None, pad_edge=False)
    for col in ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative"):
        counts.add_column(col, justify="right")
    counts.add_row(
        *(f"{a[k]:,}" for k in ("sent", "received")),
        f"{a['lost']:,} ({format_share(a['lost'], a['sent'])})",
        *(f"{a[k]:,}" for k in ("duplicates", "reordered", "foreign", "negative")),
    )
    tables = [counts]
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
        for key, label in percentiles.labelled():
            t.add_row(label, format_ns(lat[key]))
        t.add_row("mean", format_ns(lat["mean"]))
        t.add_row("stddev", format_ns(lat["stddev"]))
        tables.append(t)
    return tables


def header_line(a: dict[str, Any]) -> str:
    dur = a.get("duration_ns") or 0
    rate = a["sent"] / (dur / 1e9) if dur > 0 else 0.0
    parts = [
        f"{a['pre']['path']} → {a['post']['path']}",
        f"trim {format_ns(a['trim_ns'])}",
        f"{format_ns(dur)} analysed",
    ]
    if rate:
        parts.append(f"{rate:,.0f} pps sent")
    if a.get("partial"):
        parts.append("PARTIAL")
    return " · ".join(parts)
