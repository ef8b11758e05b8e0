"""The latency plots of the URLLC studies, drawn with the toolkit (`report/figure.py`): the HDR
percentile plot (one curve per series, repetitions as a band, the floor dashed, the budget
line), the CDF overlay of NOMS 2020, Fig. 5, worst events over time (alone or side by side),
latency against rate for several DuTs with knee and R_max, histograms and packet rates.
Each function takes stored figures and returns a plotly figure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from lowtail.core import percentiles
from lowtail.core.units import format_count, format_ns, format_percent, format_rate
from lowtail.report import figure as tk

# (percentile in 0..1, latency ns), as `store.analyses.percentile_curve` returns them.
Points = Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Curve:
    """One series of an HDR percentile plot: its points, and where repetitions were pooled
    the band their curves span (p, lowest ns, highest ns) on the same percentiles."""

    label: str
    points: Points
    band: Sequence[tuple[float, float, float]] = ()
    floor: Points = ()  # the testbed's floor under the same traffic, drawn dashed
    floor_label: str = ""


def _percent(p: float) -> str:
    return format_percent(p, ".7g")


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _nines_points(points: Points) -> tuple[list[float], list[float], list[list[str]]]:
    kept = [(p, v) for p, v in points if p < 1.0 and v is not None]
    xs = [tk.nines_x(p) for p, _ in kept]
    ys = [float(v) for _, v in kept]
    return xs, ys, [[_percent(p), format_ns(v)] for p, v in kept]


def hdr_percentile_plot(
    curves: Sequence[Curve], title: str = "Latency by percentile", budget_ns: int | None = None, height: int = 440
) -> go.Figure:
    """Latency against percentile, x = 1/(1−p) on a log axis ticked 0 %, 90 %, 99 % …:
    one step curve per series, its repetitions' band, its floor dashed, the budget line."""
    fig = tk.new_figure(title, height=height)
    top_x = 10.0
    values: list[float] = [] if budget_ns is None else [budget_ns]
    floors_drawn: set[tuple[Any, ...]] = set()
    for i, curve in enumerate(curves):
        colour = tk.colour(i)
        if curve.band:
            band = [(p, lo, hi) for p, lo, hi in curve.band if p < 1.0]
            xs = [tk.nines_x(p) for p, _, _ in band]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[lo for _, lo, _ in band],
                    mode="lines",
                    line=dict(width=0, shape="hv", color=colour),
                    legendgroup=curve.label,
                    showlegend=False,
                    hoverinfo="skip",
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[hi for _, _, hi in band],
                    mode="lines",
                    line=dict(width=0, shape="hv", color=colour),
                    fill="tonexty",
                    fillcolor=_rgba(colour, 0.18),
                    name=f"{curve.label}: range over repetitions",
                    legendgroup=curve.label,
                    showlegend=False,
                    customdata=[[_percent(p), format_ns(lo), format_ns(hi)] for p, lo, hi in band],
                    hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]} … %{customdata[2]}"),
                )
            )
            values += [v for _, lo, hi in band for v in (lo, hi)]
        xs, ys, text = _nines_points(curve.points)
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(shape="hv", color=colour, width=2),
                    name=curve.label,
                    legendgroup=curve.label,
                    customdata=text,
                    hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]}"),
                )
            )
            top_x, values = max(top_x, max(xs)), values + ys
        fx, fy, ftext = _nines_points(curve.floor)
        if fx and tuple(curve.floor) not in floors_drawn:
            floors_drawn.add(tuple(curve.floor))
            shared = sum(tuple(c.floor) == tuple(curve.floor) for c in curves) > 1
            fig.add_trace(
                go.Scatter(
                    x=fx,
                    y=fy,
                    mode="lines",
                    line=dict(
                        shape="hv",
                        color=tk.FLOOR_COLOUR if shared or len(curves) == 1 else colour,
                        width=1.4,
                        dash="dash",
                    ),
                    name="floor" if shared else curve.floor_label or f"{curve.label}: floor",
                    customdata=ftext,
                    hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]}"),
                )
            )
            top_x, values = max(top_x, max(fx)), values + fy
    fig.update_xaxes(**tk.nines_axis(top_x))
    fig.update_yaxes(**tk.latency_axis(values))
    tk.budget_line(fig, budget_ns)
    return fig


def cdf_plot(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    title: str = "Latency distribution (CDF)",
    budget_ns: int | None = None,
    log: bool | None = None,
) -> go.Figure:
    """The cumulative share of packets against latency, one step curve per series (NOMS 2020,
    Fig. 5: batches show as steep steps and flat runs). series: (label, [(ns, share)])."""
    fig = tk.new_figure(title)
    values: list[float | None] = [] if budget_ns is None else [budget_ns]
    for i, (label, cdf) in enumerate(series):
        pts = [(v, c) for v, c in cdf if v is not None]
        if not pts:
            continue
        if pts[0][1] > 0:  # rise from zero: a constant latency is one vertical step, not nothing
            pts.insert(0, (pts[0][0], 0.0))
        fig.add_trace(
            go.Scatter(
                x=[v for v, _ in pts],
                y=[c for _, c in pts],
                mode="lines",
                line=dict(shape="hv", color=tk.colour(i), width=1.8),
                name=label,
                customdata=[[format_ns(v), format_percent(c, ".6g")] for v, c in pts],
                hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]} of the packets"),
            )
        )
        values += [v for v, _ in pts]
    fig.update_xaxes(**tk.latency_axis(values, log=log))
    fig.update_yaxes(
        range=[0, 1.02],
        tickmode="array",
        tickvals=[0, 0.25, 0.5, 0.75, 1],
        ticktext=["0 %", "25 %", "50 %", "75 %", "100 %"],
        title=dict(text="share of packets"),
    )
    if budget_ns is not None:
        tk.vertical_line(fig, budget_ns, tk.budget_label(budget_ns), tk.BUDGET_COLOUR, "dash")
    return fig


DISPLAY_POINTS = 1_500
"""Most markers a scatter of events draws: more make a page heavy and a plot no clearer."""


def thin_for_display(points: Sequence[tuple[float, float]], limit: int = DISPLAY_POINTS) -> list[tuple[float, float]]:
    """At most `limit` of (time, value) points for drawing, in time order: the highest half
    of the limit kept whole (the worst events are the point of the plot), the rest an evenly
    spaced sample of the others, so periodic patterns still show. The exact figures stay in
    the tables and the stored analysis."""
    if len(points) <= limit:
        return list(points)
    by_value = sorted(range(len(points)), key=lambda i: points[i][1], reverse=True)
    top = set(by_value[: limit // 2])
    others = [i for i in range(len(points)) if i not in top]
    step = len(others) / (limit - len(top))
    sample = {others[int(k * step)] for k in range(limit - len(top))}
    return [points[i] for i in sorted(top | sample, key=lambda i: points[i][0])]


def _worst_trace(
    points: Sequence[tuple[float, float]], start_ns: float, name: str, colour: str, size: int = 5
) -> go.Scatter:
    """Events as markers (thinned for display, said in the legend's name)."""
    drawn = thin_for_display(points)
    if len(drawn) < len(points):
        name = f"{name} ({len(drawn):,} drawn: the {DISPLAY_POINTS // 2:,} highest and a sample of the rest)"
    return go.Scatter(
        x=[round((t - start_ns) / 1e9, 9) for t, _ in drawn],
        y=[v for _, v in drawn],
        mode="markers",
        marker=dict(size=size, color=colour, opacity=0.75),
        name=name,
        customdata=[[format_ns(v)] for _, v in drawn],
        hovertemplate=tk.hover("%{x:.6f} s: %{customdata[0]}"),
    )


def worst_scatter(
    points: Sequence[tuple[float, float]],
    title: str,
    start_ns: float = 0.0,
    budget_ns: int | None = None,
    overlay: Sequence[tuple[float, float]] | None = None,
    overlay_label: str = "model",
) -> go.Figure:
    """The worst events over the run (time since its first packet, latency); an overlay
    (a model's events) in a second colour."""
    fig = tk.new_figure(title, height=380)
    values = [v for _, v in points] + [v for _, v in overlay or ()]
    fig.add_trace(_worst_trace(points, start_ns, f"{len(points):,} worst", tk.colour(0)))
    if overlay:
        fig.add_trace(_worst_trace(overlay, start_ns, overlay_label, tk.colour(5)))
    fig.update_xaxes(**tk.time_axis())
    fig.update_yaxes(**tk.latency_axis(values + ([budget_ns] if budget_ns else [])))
    tk.budget_line(fig, budget_ns)
    return fig


def worst_scatter_grid(
    panels: Sequence[tuple[str, Sequence[tuple[float, float]], float]],
    title: str = "Worst events over time",
    budget_ns: int | None = None,
    columns: int = 3,
) -> go.Figure:
    """Worst events of several configurations side by side on one latency axis, so their
    heights compare at a glance. panels: (label, [(pre_ts_ns, latency_ns)], start_ns)."""
    rows = max(1, math.ceil(len(panels) / columns))
    cols = max(1, math.ceil(len(panels) / rows))  # rows as full as they go: 4 panels are 2 × 2
    height = 80 + 300 * rows
    fig = tk.new_figure(
        title,
        height=height,
        rows=rows,
        cols=cols,
        subplot_titles=[label for label, _, _ in panels],
        shared_yaxes="all",
        horizontal_spacing=0.04,
        # The same 60 px between rows however many there are (a share of the height made
        # plotly refuse 22 rows: "vertical spacing cannot be greater than 1 / (rows - 1)").
        vertical_spacing=60 / height if rows > 1 else 0.0,
    )
    values = [v for _, pts, _ in panels for _, v in pts] + ([budget_ns] if budget_ns else [])
    for i, (label, pts, start) in enumerate(panels):
        row, col = i // cols + 1, i % cols + 1
        trace = _worst_trace(pts, start, label, tk.colour(i), size=4)
        trace.showlegend = False  # the panel's title names it
        fig.add_trace(trace, row=row, col=col)
        last_row = i + cols >= len(panels)
        fig.update_xaxes(**tk.time_axis(), row=row, col=col)
        if not last_row:
            fig.update_xaxes(title=None, row=row, col=col)
        tk.budget_line(fig, budget_ns, row=row, col=col)
    fig.update_yaxes(**tk.latency_axis(values))
    fig.update_yaxes(title=None, col=2)
    fig.update_yaxes(title=None, col=3)
    return fig


def histogram_plot(
    bins: Sequence[tuple[int, int, int]], title: str, axis_title: str = "latency", counted: str = "packets"
) -> go.Figure:
    """A histogram of durations from non-empty bins (lo_ns, hi_ns, count); counts on a log
    axis (the tail shows), durations on a log axis when they span more than 100×."""
    fig = tk.new_figure(title, height=360)
    if not bins:
        fig.add_annotation(text="no values", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
        return fig
    floor = 0.6  # under one count: bars rise from below the log axis' first tick
    xs, ys = [], []
    for lo, hi, c in bins:
        xs += [lo, lo, hi, hi, None]
        ys += [floor, c, c, floor, None]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            fill="toself",
            line=dict(width=0.5, color=tk.colour(0)),
            fillcolor=_rgba(tk.colour(0), 0.55),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[(lo + hi) / 2 for lo, hi, _ in bins],
            y=[c for _, _, c in bins],
            mode="markers",
            marker=dict(size=6, color=tk.colour(0), opacity=0),
            name=counted,
            showlegend=False,
            customdata=[[format_ns(lo), format_ns(hi), format_count(c)] for lo, hi, c in bins],
            hovertemplate=tk.hover(f"%{{customdata[0]}} … %{{customdata[1]}}: %{{customdata[2]}} {counted}"),
        )
    )
    lo_all: float = min(lo for lo, _, _ in bins)
    hi_all: float = max(hi for _, hi, _ in bins)
    log_x = lo_all > 0 and hi_all / lo_all > 100
    if hi_all - lo_all < 0.1 * hi_all:  # one narrow peak (a constant gap): show it among its neighbours
        centre = (lo_all + hi_all) / 2
        lo_all, hi_all = centre * 0.95, centre * 1.05
    fig.update_xaxes(**tk.latency_axis([lo_all, hi_all], log=log_x, title=axis_title))
    counts = [c for _, _, c in bins]
    fig.update_yaxes(**tk.value_axis([1, *counts], "count", counted, log=True))
    return fig


def rates_plot(
    pre: Sequence[int], post: Sequence[int], span_ns: int | None = None, title: str = "Packets per second"
) -> go.Figure:
    """Packets per second sent (PRE) and received (POST), one bar per second since the
    first packet. span_ns is PRE's first to last packet, untrimmed (the counts start at the
    first packet, not after the trim). The last second is usually cut short: its bar is its
    count over the part of it the run covered, so a run shorter than a second still shows
    its rate; a sliver under a tenth of a second (or POST's tail after the last send) is too
    short for a rate and is left out rather than scaled up a hundredfold."""
    fig = tk.new_figure(title, height=340)
    covered = seconds_covered(max(len(pre), len(post)), span_ns)
    rates: list[float] = []
    for i, (name, counts) in enumerate((("PRE (sent)", pre), ("POST (received)", post))):
        shown = [(s, c, c / covered[s]) for s, c in enumerate(counts) if covered[s] >= _SHORTEST_RATED_S]
        rates += [y for _, _, y in shown]
        fig.add_trace(
            go.Bar(
                x=[s for s, _, _ in shown],
                y=[y for _, _, y in shown],
                name=name,
                marker=dict(color=tk.colour(i), opacity=[1.0 if covered[s] == 1.0 else 0.55 for s, _, _ in shown]),
                customdata=[
                    [
                        format_count(c),
                        format_rate(y),
                        "" if covered[s] == 1.0 else f" (the run covered {covered[s]:.3g} s of it)",
                    ]
                    for s, c, y in shown
                ],
                hovertemplate=tk.hover("second %{x}%{customdata[2]}: %{customdata[0]} packets, %{customdata[1]}"),
            )
        )
    seconds = len(covered)
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_xaxes(title=dict(text="second since the first packet"), dtick=1 if seconds <= 20 else None)
    fig.update_yaxes(**tk.value_axis([0, *rates], "rate", "packets per second", log=False, include_zero=True))
    return fig


_SHORTEST_RATED_S = 0.1
"""A partial second shorter than this is too short to scale to a rate."""


def seconds_covered(seconds: int, span_ns: int | None) -> list[float]:
    """How much of each one-second bin since the first packet the sending covered: 1.0 for
    the full ones, the fraction for the last, 0.0 for bins after the last packet sent (POST's
    tail). Without a span every bin counts as full."""
    if not span_ns or span_ns <= 0:
        return [1.0] * seconds
    span_s = span_ns / 1e9
    return [max(0.0, min(1.0, span_s - s)) for s in range(seconds)]


@dataclass(frozen=True)
class Sweep:
    """One DuT's latency over offered rates, with its knee and predicted R_max where stored.
    points: (rate_pps, {figure key: ns}, overloaded)."""

    label: str
    points: Sequence[tuple[float, Mapping[str, float | None], bool]]
    knee_pps: float | None = None
    r_max_pps: float | None = None
    figures: Sequence[str] = field(default=("p50", "p99", "p99_999", "max"))


_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
_SYMBOLS = ("circle", "square", "triangle-up", "diamond", "x")


def latency_vs_rate_plot(
    sweeps: Sequence[Sweep], title: str = "Latency versus offered rate", budget_ns: int | None = None
) -> go.Figure:
    """Latency percentiles per offered rate, one colour per DuT and one dash per percentile;
    overloaded rates circled; each DuT's measured knee (solid) and predicted R_max (dashed)."""
    fig = tk.new_figure(title, height=460)
    values: list[float | None] = [] if budget_ns is None else [budget_ns]
    rates: list[float] = []
    single = len(sweeps) == 1
    for i, sweep in enumerate(sweeps):
        pts = sorted(sweep.points, key=lambda p: p[0])
        rates += [r for r, _, _ in pts]
        # Highest figure first, so a lower one drawn on top stays seen where they meet (with few
        # packets the 99.999 % is the maximum, and hid under it); the legend keeps rank order.
        for j, key in reversed(list(enumerate(sweep.figures))):
            row = [(r, figs.get(key)) for r, figs, _ in pts if figs.get(key) is not None]
            if not row:
                continue
            colour = tk.colour(j) if single else tk.colour(i)
            name = percentiles.label(key) if single else f"{sweep.label} · {percentiles.label(key)}"
            dash = ("dot" if key == "max" else "solid") if single else _DASHES[j % len(_DASHES)]
            fig.add_trace(
                go.Scatter(
                    x=[r for r, _ in row],
                    y=[v for _, v in row],
                    mode="lines+markers",
                    legendrank=100 * i + j,
                    line=dict(color=colour, dash=dash, width=1.8),
                    marker=dict(symbol=_SYMBOLS[j % len(_SYMBOLS)], size=7, color=colour),
                    name=name,
                    customdata=[[format_rate(r), format_ns(v)] for r, v in row],
                    hovertemplate=tk.hover(f"{percentiles.label(key)} at %{{customdata[0]}}: %{{customdata[1]}}"),
                )
            )
            values += [v for _, v in row]
        over = [(r, figs) for r, figs, o in pts if o]
        if over:
            fig.add_trace(
                go.Scatter(
                    x=[r for r, _ in over],
                    y=[max((v for v in figs.values() if v is not None), default=None) for _, figs in over],
                    mode="markers",
                    marker=dict(size=16, symbol="circle-open", color=tk.KNEE_COLOUR, line=dict(width=2)),
                    name=f"{sweep.label}: overloaded" if not single else "overloaded",
                    customdata=[[format_rate(r)] for r, _ in over],
                    hovertemplate=tk.hover("overloaded at %{customdata[0]}"),
                )
            )
        prefix = "" if single else f"{sweep.label}: "
        if sweep.knee_pps is not None:
            colour = tk.KNEE_COLOUR if single else tk.colour(i)
            tk.vertical_line(fig, sweep.knee_pps, f"{prefix}measured knee {format_rate(sweep.knee_pps)}", colour)
            rates.append(sweep.knee_pps)
        if sweep.r_max_pps is not None:
            colour = tk.R_MAX_COLOUR if single else tk.colour(i)
            tk.vertical_line(
                fig, sweep.r_max_pps, f"{prefix}predicted R_max {format_rate(sweep.r_max_pps)}", colour, "dash"
            )
            rates.append(sweep.r_max_pps)
    fig.update_xaxes(**tk.value_axis(rates, "rate", "offered rate", log=False))
    fig.update_yaxes(**tk.latency_axis(values, log=True if values else None))
    tk.budget_line(fig, budget_ns)
    return fig
