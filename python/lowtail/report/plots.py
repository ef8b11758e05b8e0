"""The plots of the URLLC studies, in one place: HDR percentile curves, worst-event scatters,
histograms, rates over time. Each function returns a matplotlib figure."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from lowtail.percentiles import percent_label  # noqa: E402


def _nines(n: int) -> str:
    """The percentile at x = 10^n of the 1/(1−p) axis: 0, 90, 99, 99.9, ..."""
    return "0" if n == 0 else "90" if n == 1 else "99" + ("." + "9" * (n - 2) if n > 2 else "")


NINES_TICKS = [10.0**n for n in range(7)]
NINES_LABELS = [percent_label(_nines(n)) for n in range(7)]


def us(ns: float | None) -> float | None:
    """Nanoseconds as the microseconds the plots' latency axes are in."""
    return None if ns is None else ns / 1e3


def hdr_percentile_plot(
    curves: Sequence[tuple[str, Sequence[tuple[float, int]]]],
    title: str = "Latency by percentile",
    floor_ns: float | None = None,
    budget_ns: float | None = None,
):
    """curves: (label, [(percentile in 0..1, value_ns), ...]). The x axis is
    1/(1-p) on a log scale, labelled with the percentile it stands for."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    top_x = 10.0
    y_max, y_min = 0.0, float("inf")
    for label, rows in curves:
        pts = [(1.0 / (1.0 - p), us(v)) for p, v in rows if p < 1.0]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.step(xs, ys, where="post", label=label, linewidth=1.4)
        top_x = max(top_x, max(xs))
        y_max, y_min = max(y_max, max(ys)), min(y_min, min(ys))
    ax.set_xscale("log")
    ticks = [t for t in NINES_TICKS if t <= max(top_x * 1.01, 10)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _: NINES_LABELS[NINES_TICKS.index(x)] if x in NINES_TICKS else "")
    )
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(1, max(ticks[-1], top_x))
    if y_min > 0 and y_max / y_min > 30:
        ax.set_yscale("log")
    if floor_ns is not None:
        ax.axhline(us(floor_ns), color="grey", linestyle=":", linewidth=1, label="measurement floor")
    if budget_ns is not None:
        ax.axhline(us(budget_ns), color="#b42318", linestyle="--", linewidth=1, label="budget")
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency [µs]")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def worst_scatter(
    points: Sequence[tuple[float, float]],
    title: str,
    start_ns: float = 0.0,
    overlay: Sequence[tuple[float, float]] | None = None,
    overlay_label: str = "model",
):
    """points: (pre_ts_ns, latency_ns) of the worst events; x in seconds since start."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    if points:
        xs = [(t - start_ns) / 1e9 for t, _ in points]
        ys = [us(v) for _, v in points]
        ax.scatter(xs, ys, s=4, alpha=0.7, label=f"{len(points)} worst", color="#1f5fa8", linewidths=0)
    if overlay:
        ax.scatter(
            [(t - start_ns) / 1e9 for t, _ in overlay],
            [us(v) for _, v in overlay],
            s=4,
            alpha=0.5,
            color="#d9480f",
            linewidths=0,
            label=overlay_label,
        )
    ax.set_xlabel("time since first packet [s]")
    ax.set_ylabel("latency [µs]")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def histogram_plot(bins: Sequence[tuple[int, int, int]], title: str, xlabel: str = "latency [µs]"):
    """bins: (lo_ns, hi_ns, count), non-empty only; log count axis shows the tail."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if bins:
        lefts = [us(lo) for lo, _, _ in bins]
        widths = [us(hi - lo) for lo, hi, _ in bins]
        counts = [c for _, _, c in bins]
        ax.bar(lefts, counts, width=widths, align="edge", color="#1f5fa8", edgecolor="none")
        ax.set_yscale("log")
        span = max(us(hi) for _, hi, _ in bins) / max(min(lefts), 1e-3)
        if span > 100 and min(lefts) > 0:
            ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("packets")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return fig


def rates_plot(pre: Sequence[int], post: Sequence[int], title: str = "Packets per second"):
    """Packets per second sent (PRE) and received (POST) over the run."""
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.plot(range(len(pre)), pre, label="PRE (sent)", drawstyle="steps-post")
    ax.plot(range(len(post)), post, label="POST (received)", drawstyle="steps-post", linestyle="--")
    ax.set_xlabel("second since first packet")
    ax.set_ylabel("packets/s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
