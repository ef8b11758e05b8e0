"""A toolkit figure as a static PNG, drawn by matplotlib: what a model command's `--plot
FILE.png` writes, where a picture without a browser is really needed. It draws the same
plotly figure a page shows — its traces, reference lines, axes with their tick values and
labels (the nines, "10 µs") — so each figure is defined once. It covers what the toolkit's
figures use: lines and step lines, markers, bands, bars, polygons, lines across the plot,
log axes, side-by-side panels."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.ticker

# A Figure drawn straight to a file needs neither pyplot nor a backend chosen: pyplot's import
# alone was a second of a model command's `--plot` on a busy host.
from matplotlib.figure import Figure

from lowtail.core.files import write_atomically

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.axes import Axes

    from lowtail.report.figure import PlotlySpec

_DASH = {"solid": "-", "dash": "--", "dot": ":", "dashdot": "-.", "longdash": "--", None: "-"}
_MARKER = {"circle": "o", "circle-open": "o", "square": "s", "triangle-up": "^", "diamond": "D", "x": "x", None: "o"}
_DPI = 110


def _colour(value: Any) -> Any:
    """A plotly colour ("#0072B2", "rgba(0,114,178,0.18)") as matplotlib takes it."""
    if isinstance(value, str) and value.startswith("rgba"):
        r, g, b, a = (float(v) for v in re.findall(r"[0-9.]+", value))
        return (r / 255, g / 255, b / 255, a)
    return value


def _numbers(values: Any) -> list[float]:
    return [math.nan if v is None else float(v) for v in (values or ())]


def _ref(name: str | None, letter: str) -> str:
    """A trace's or shape's axis reference ("x2", "x2 domain", "paper") as its layout key."""
    name = (name or letter).split()[0]
    return f"{letter}axis" if name in (letter, "paper") else f"{letter}axis{name[1:]}"


def _panels(layout: PlotlySpec, refs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, int]]:
    """Where each (x axis, y axis) pair goes in a grid, from the axes' domains."""

    def domain(key: str) -> float:
        return float((layout.get(key) or {}).get("domain", [0, 1])[0])

    cols = sorted({round(domain(x), 3) for x, _ in refs})
    rows = sorted({round(domain(y), 3) for _, y in refs}, reverse=True)
    return {(x, y): (rows.index(round(domain(y), 3)), cols.index(round(domain(x), 3))) for x, y in refs}


def _draw_trace(ax: Axes, t: PlotlySpec, previous_y: list[float] | None) -> list[float]:
    kind = t.get("type", "scatter")
    x, y = _numbers(t.get("x")), _numbers(t.get("y"))
    name = t.get("name") if t.get("showlegend", True) is not False else None
    line, marker = t.get("line") or {}, t.get("marker") or {}
    colour = _colour(line.get("color") or marker.get("color"))
    if kind == "bar":
        ax.bar(x, y, color=colour, label=name, alpha=0.85)
        return y
    mode = t.get("mode", "lines")
    step = line.get("shape") == "hv"
    fill = t.get("fill")
    if fill == "tonexty" and previous_y is not None:
        ax.fill_between(
            x, previous_y, y, step="post" if step else None, color=_colour(t.get("fillcolor")), linewidth=0, label=name
        )
        return y
    if fill == "toself":
        ax.fill(x, y, color=_colour(t.get("fillcolor")) or colour, linewidth=0)
        return y
    if "lines" in mode and line.get("width", 1) != 0:
        style = dict(color=colour, linestyle=_DASH.get(line.get("dash")), linewidth=line.get("width") or 1.5)
        if step:
            ax.step(x, y, where="post", label=name, **style)
        else:
            ax.plot(x, y, label=name, **style)
        name = None
    if "markers" in mode and marker.get("opacity", 1) != 0:
        symbol = marker.get("symbol")
        fill = _colour(marker.get("color")) or colour
        if isinstance(symbol, str) and symbol.endswith("-open"):
            paint = dict(facecolors="none", edgecolors=fill)
        elif symbol == "x":  # a marker of lines only: its colour is its edge's
            paint = dict(color=fill)
        else:
            paint = dict(facecolors=fill, edgecolors="none")
        ax.scatter(
            x,
            y,
            s=(marker.get("size") or 6) ** 2 / 2,
            marker=_MARKER.get(symbol, "o"),
            alpha=marker.get("opacity", 1),
            label=name,
            zorder=3,
            **paint,
        )
    return y


def _draw_shape(ax: Axes, s: PlotlySpec) -> None:
    line = s.get("line") or {}
    style: dict[str, Any] = dict(  # matplotlib's keyword arguments: free-form
        color=line.get("color"), linestyle=_DASH.get(line.get("dash")), linewidth=line.get("width") or 1.2
    )
    label = s.get("name") if s.get("showlegend") else None
    if str(s.get("xref", "")).endswith(("domain", "paper")):
        ax.axhline(s["y0"], label=label, **style)
    elif str(s.get("yref", "")).endswith(("domain", "paper")):
        ax.axvline(s["x0"], label=label, **style)


def _style_axis(ax: Axes, which: str, a: PlotlySpec) -> None:
    set_scale, set_lim, set_ticks, set_label = (
        (ax.set_xscale, ax.set_xlim, ax.set_xticks, ax.set_xlabel)
        if which == "x"
        else (ax.set_yscale, ax.set_ylim, ax.set_yticks, ax.set_ylabel)
    )
    log = a.get("type") == "log"
    if log:
        set_scale("log")
    if a.get("range"):
        lo, hi = a["range"]
        set_lim(*((10**lo, 10**hi) if log else (lo, hi)))
    if a.get("tickvals") is not None:
        set_ticks(a["tickvals"], a.get("ticktext") or [str(v) for v in a["tickvals"]])
        (ax.xaxis if which == "x" else ax.yaxis).set_minor_locator(matplotlib.ticker.NullLocator())
        if a.get("range"):
            set_lim(*((10 ** a["range"][0], 10 ** a["range"][1]) if log else a["range"]))
    elif a.get("ticksuffix"):
        suffix = a["ticksuffix"]
        (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}{suffix}")
        )
    title = (a.get("title") or {}).get("text")
    if title:
        set_label(title)


def write_png(fig: go.Figure, path: str | Path) -> Path:
    """Draw a toolkit figure into a PNG file (replaced atomically)."""
    spec = fig.to_plotly_json()
    layout, traces = spec["layout"], spec["data"]
    shapes = layout.get("shapes", [])
    refs = {(_ref(t.get("xaxis"), "x"), _ref(t.get("yaxis"), "y")) for t in traces}
    refs |= {(_ref(s.get("xref"), "x"), _ref(s.get("yref"), "y")) for s in shapes}
    refs = refs or {("xaxis", "yaxis")}
    where = _panels(layout, refs)
    rows = 1 + max(r for r, _ in where.values())
    cols = 1 + max(c for _, c in where.values())
    width = 8 * cols if cols > 1 else 8.5
    figure = Figure(figsize=(width, 4.2 * rows))
    grid = figure.subplots(rows, cols, squeeze=False)
    previous: dict[tuple[str, str], list[float] | None] = {}
    for t in traces:
        key = (_ref(t.get("xaxis"), "x"), _ref(t.get("yaxis"), "y"))
        ax = grid[where[key]]
        previous[key] = _draw_trace(ax, t, previous.get(key))
    for s in shapes:
        _draw_shape(grid[where[(_ref(s.get("xref"), "x"), _ref(s.get("yref"), "y"))]], s)
    for (xkey, ykey), cell in where.items():
        ax = grid[cell]
        _style_axis(ax, "x", layout.get(xkey) or {})
        _style_axis(ax, "y", layout.get(ykey) or {})
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    title = (layout.get("title") or {}).get("text")
    if title:
        figure.suptitle(title, fontsize=11)
    for a in layout.get("annotations", []):
        if a.get("xref") == "paper" and a.get("yref") == "paper" and a.get("text"):
            figure.text(0.06 + 0.9 * a["x"], 0.08 + 0.82 * a["y"], a["text"], ha="center", fontsize=9)
    figure.tight_layout()
    # Whole or not at all, into a directory that must exist (see files.write_atomically).
    return write_atomically(path, lambda tmp: figure.savefig(tmp, dpi=_DPI, bbox_inches="tight", format="png"), "plot")
