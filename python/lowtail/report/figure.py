"""The report toolkit's conventions for every figure, in one place: plotly figures whose
axes read in units a person reads, whose legends sit outside the data, whose points say
their value and unit on hover, and whose reference lines (the budget, the floor, a knee)
can be toggled from the legend.

Figures are plotly `Figure`s: a page embeds them as JSON and plotly's JavaScript bundle
draws them (`report/page.py`); a model command's `--plot` renders the same figure as a
PNG with matplotlib (`report/png.py`). Both read their axes from what is set here (tick
values and their labels), so there is one definition of each axis: the nines of the HDR
percentile plot, latencies in ns/µs/ms/s, counts and rates.

Latencies are plotted in nanoseconds, the unit they are stored in; their axes carry
explicit ticks labelled "10 µs", "2.5 ms" (plotly's own labels would read "10k" or 10⁴)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lowtail.core.percentiles import percent_label
from lowtail.core.units import format_count, format_count_tick, format_ns, format_ns_tick, format_rate_tick

# Colours: one per series in turn (colour-blind safe: Okabe–Ito, its yellow, unreadable on
# white, replaced by Tol's olive), and fixed ones for the
# lines every reader learns once: the budget red, the floor grey.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999933")
BUDGET_COLOUR = "#b42318"
FLOOR_COLOUR = "#6b6b6b"
KNEE_COLOUR = "#b42318"
R_MAX_COLOUR = "#067647"

# A plotly layout, axis, trace or shape as plotly takes it: free-form, its keys are plotly's.
PlotlySpec = dict[str, Any]

# -- the nines axis of the HDR percentile plot -------------------------------------------


def _nines(n: int) -> str:
    """The percentile at x = 10^n of the 1/(1−p) axis: 0, 90, 99, 99.9, ..."""
    return "0" if n == 0 else "90" if n == 1 else "99" + ("." + "9" * (n - 2) if n > 2 else "")


# x = 1/(1−p) at 0 %, 90 %, 99 %, … 99.9999 %, and how each is labelled.
NINES: tuple[tuple[float, str], ...] = tuple((10.0**n, percent_label(_nines(n))) for n in range(7))


def nines_x(p: float) -> float:
    """Where percentile p (0..1, below 1) sits on the nines axis: 1/(1−p)."""
    return 1.0 / (1.0 - p)


def nines_axis(top_x: float) -> PlotlySpec:
    """The x axis of an HDR percentile plot: 1/(1−p) on a log scale, ticked at the nines,
    shown up to the last nine the data reaches (at least 90 %)."""
    top = max(10.0, top_x)
    ticks = [(x, text) for x, text in NINES if x <= top * 1.01]
    return dict(
        type="log",
        tickmode="array",
        tickvals=[x for x, _ in ticks],
        ticktext=[text for _, text in ticks],
        range=[0, math.log10(max(top, ticks[-1][0])) + 0.02],
        title=dict(text="percentile"),
        showgrid=True,
    )


# -- ticks in units a person reads -------------------------------------------------------

_NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def _nice_step(span: float, ticks: int = 6) -> float:
    raw = span / max(1, ticks)
    scale = 10.0 ** math.floor(math.log10(raw))
    return next(s * scale for s in _NICE_STEPS if s * scale >= raw * 0.999)


def linear_ticks(lo: float, hi: float, ticks: int = 6) -> list[float]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) covering lo..hi."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = _nice_step(hi - lo, ticks)
    first = math.floor(lo / step) * step
    count = int(math.ceil((hi - first) / step - 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(count)]


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """(labelled, unlabelled) ticks of a log axis over lo..hi (both > 0): 1, 2 and 5 in each
    decade when it spans three decades or fewer, else the decades, with 2 … 9 as minor grid."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = range(first, last + 1)
    if last - first <= 3:
        return [m * 10.0**d for d in decades for m in (1, 2, 5)], []
    every = 1 if last - first <= 8 else 2
    major = [10.0**d for d in decades if (d - first) % every == 0]
    minor = [m * 10.0**d for d in decades for m in range(2, 10)]
    return major, minor


_TICK_TEXT: dict[str, Callable[[float], str]] = {
    "duration": format_ns_tick,
    "count": format_count_tick,
    "rate": format_rate_tick,
}


def _distinct_labels(ticks: list[float], kind: str) -> list[str]:
    """Tick labels with as many digits as it takes to tell them apart (ticks 1 ns apart
    around 100 µs need six)."""
    text = _TICK_TEXT[kind]
    labels = [text(v) for v in ticks]
    if kind == "duration":
        for digits in range(4, 10):
            if len(set(labels)) == len(labels):
                break
            labels = [format_ns_tick(v, digits) for v in ticks]
    return labels


def value_axis(
    values: Iterable[float | None], kind: str, title: str, log: bool | None = None, include_zero: bool = False
) -> PlotlySpec:
    """An axis over `values` whose ticks read in a person's units. kind: "duration" (ns),
    "count" or "rate" (packets/s). log None: logarithmic when the positive values span more
    than 30×. include_zero: a linear axis starts at 0 (counts, rates)."""
    seen = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    positive = [v for v in seen if v > 0]
    text = _TICK_TEXT[kind]
    if log is None:
        log = bool(positive) and max(positive) / min(positive) > 30
    if log and positive:
        lo, hi = min(positive), max(positive)
        major, minor = log_ticks(lo, hi)
        pad = 0.04 * max(math.log10(hi / lo), 0.3)
        return dict(
            type="log",
            tickmode="array",
            tickvals=major,
            ticktext=[text(v) for v in major],
            minor=dict(tickvals=minor, showgrid=True, gridcolor="#f3f3f3") if minor else None,
            range=[math.log10(lo) - pad, math.log10(hi) + pad],
            title=dict(text=title),
        )
    lo = min(seen, default=0.0)
    hi = max(seen, default=1.0)
    if include_zero:
        lo = min(lo, 0.0)
    ticks = linear_ticks(lo, hi)
    pad = 0.03 * ((hi - lo) or 1.0)
    return dict(
        type="linear",
        tickmode="array",
        tickvals=ticks,
        ticktext=_distinct_labels(ticks, kind),
        range=[lo if include_zero and lo == 0 else lo - pad, hi + pad],
        title=dict(text=title),
    )


def latency_axis(values: Iterable[float | None], log: bool | None = None, title: str = "latency") -> PlotlySpec:
    """A latency axis (values in ns) labelled in ns, µs, ms or s."""
    return value_axis(values, "duration", title, log)


def time_axis(title: str = "time since the first packet") -> PlotlySpec:
    """Seconds since a run's first packet: plotly's own ticks, with the unit."""
    return dict(type="linear", ticksuffix=" s", title=dict(text=title))


# -- figures, traces and reference lines -------------------------------------------------


def new_figure(
    title: str,
    height: int = 420,
    rows: int = 1,
    cols: int = 1,
    subplot_titles: Sequence[str] | None = None,
    **grid: Any,
) -> go.Figure:
    """An empty figure with the house layout: the title, a white background, the legend
    under the plot (it never covers data), hover showing every series at the pointer's x."""
    if rows * cols > 1 or subplot_titles or grid:
        # A grid of one panel is still a grid: its traces are added by row and column.
        fig = make_subplots(rows=rows, cols=cols, subplot_titles=subplot_titles, **grid)
    else:
        fig = go.Figure()
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)),
        template="plotly_white",
        height=height,
        margin=dict(l=70, r=20, t=60, b=50),
        # Under the x axis' ticks and title: a fixed distance in pixels, whatever the height.
        legend=dict(orientation="h", x=0, xanchor="left", y=-62 / max(height - 110, 100), yanchor="top"),
        hovermode="closest",
        font=dict(family="system-ui, -apple-system, Segoe UI, sans-serif", size=12),
        hoverlabel=dict(namelength=-1),
    )
    return fig


def colour(i: int) -> str:
    """The colour of the i-th series."""
    return PALETTE[i % len(PALETTE)]


def hover(template: str) -> str:
    """A hover template whose extra box (the trace name) is shown inside it instead."""
    return template + "<extra>%{fullData.name}</extra>"


def horizontal_line(
    fig: go.Figure, y: float, name: str, colour: str, dash: str = "dash", row: int | None = None, col: int | None = None
) -> None:
    """A line across the whole plot at y, in the legend (so it can be toggled) and drawn
    over the data."""
    xref, yref = _refs(fig, row, col)
    fig.add_shape(
        type="line",
        xref=f"{xref} domain",
        yref=yref,
        x0=0,
        x1=1,
        y0=y,
        y1=y,
        line=dict(color=colour, dash=dash, width=1.5),
        name=name,
        showlegend=row in (None, 1) and col in (None, 1),
        legendgroup=name,
        layer="above",
    )


def vertical_line(
    fig: go.Figure,
    x: float,
    name: str,
    colour: str,
    dash: str = "solid",
    row: int | None = None,
    col: int | None = None,
    legend: bool = True,
    width: float = 1.5,
) -> None:
    """A line across the whole plot at x, in the legend unless `legend` is False (the
    lines of a group show one entry and toggle together)."""
    xref, yref = _refs(fig, row, col)
    fig.add_shape(
        type="line",
        xref=xref,
        yref=f"{yref} domain",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        line=dict(color=colour, dash=dash, width=width),
        name=name,
        showlegend=legend,
        legendgroup=name,
        layer="above",
    )


def _refs(fig: go.Figure, row: int | None, col: int | None) -> tuple[str, str]:
    """The x and y axis references ("x2", "y2") of a subplot, ("x", "y") for a single plot."""
    if row is None or col is None:
        return "x", "y"
    ref = fig.get_subplot(row, col)
    return ref.xaxis.plotly_name.replace("axis", ""), ref.yaxis.plotly_name.replace("axis", "")


def budget_label(budget_ns: int) -> str:
    """The legend entry of a budget line: "budget 350 µs" (as round as the budget is)."""
    return f"budget {format_ns_tick(budget_ns, 6)}"


def budget_line(fig: go.Figure, budget_ns: int | None, row: int | None = None, col: int | None = None) -> None:
    """The latency budget as a red dashed line across a latency y axis (nothing when no
    budget applies)."""
    if budget_ns is not None:
        horizontal_line(fig, budget_ns, budget_label(budget_ns), BUDGET_COLOUR, "dash", row, col)


def latency_hover(ns: Sequence[float | None]) -> list[str]:
    """The latencies as hover text with their unit, as tables show them."""
    return [format_ns(v) for v in ns]


def count_hover(n: Sequence[int]) -> list[str]:
    """Counts as hover text."""
    return [format_count(int(v)) for v in n]
