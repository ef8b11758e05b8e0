"""Plots and report sections of the models: return levels and QQ of the tail model,
latency versus rate with the knee and R_max, the aliasing overlay, the simulated
latency staircases and the simulation-versus-measurement comparison.

Figure functions take the document a model command prints (and stores), so the command's
`--plot` and a report draw the same picture; `*_section` functions read the database."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lowtail import percentiles
from lowtail.errors import UserError
from lowtail.outputs import write_atomically
from lowtail.report import plots
from lowtail.report.page import Page, esc, figure_html, table_html
from lowtail.report.tables import comparison_table, knee_table, overload_table
from lowtail.store import open_store
from lowtail.store.db import Store
from lowtail.store.models import latest_model, model_result, sweep_points
from lowtail.units import format_ns, format_ns_interval, format_p_value, format_rate

plt = plots.plt


# -- figures -----------------------------------------------------------------------------


def return_level_axes(ax, doc: dict[str, Any]) -> None:
    p = doc["plot"]
    curve = [c for c in p["curve"] if c[1] is not None]
    ax.plot([c[0] for c in curve], [plots.us(c[1]) for c in curve], color="#1f5fa8", label="GPD return level")
    band = [c for c in curve if c[2] is not None]
    if band:
        ax.fill_between(
            [c[0] for c in band],
            [plots.us(c[2]) for c in band],
            [plots.us(c[3]) for c in band],
            color="#1f5fa8",
            alpha=0.15,
            linewidth=0,
            label=f"{100 * doc['confidence']:g} % interval",
        )
    if p["empirical_fit"]:
        ax.scatter(
            *zip(*[(m, plots.us(v)) for m, v in p["empirical_fit"]]), s=8, color="#333", label="fit part", zorder=3
        )
    if p["empirical_validation"]:
        ax.scatter(
            *zip(*[(m, plots.us(v)) for m, v in p["empirical_validation"]]),
            s=8,
            color="#d9480f",
            marker="x",
            label="validation part",
            zorder=3,
        )
    if doc.get("endpoint_ns") is not None:
        ax.axhline(plots.us(doc["endpoint_ns"]), color="grey", linestyle="--", linewidth=1, label="upper end (ξ < 0)")
    v = doc["validation"]
    if v["return_level_ns"] is not None:
        ax.plot(
            [v["return_period"]],
            [plots.us(v["return_level_ns"])],
            marker="D",
            color="#b42318",
            linestyle="none",
            label=f"validation level: {v['exceedances']} exceedance(s), 1 expected",
        )
    for name, h in doc.get("horizons", {}).items():
        ax.axvline(h["packets"], color="#999", linestyle=":", linewidth=0.8)
        ax.text(h["packets"], ax.get_ylim()[0], f" {name}", rotation=90, fontsize=7, color="#666", va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("return period [packets]")
    ax.set_ylabel("latency [µs]")
    ax.set_title(f"Return levels (threshold {doc['threshold_percentile']:g} %, ξ = {doc['xi']:.3f})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def qq_axes(ax, doc: dict[str, Any]) -> None:
    qq = doc["plot"]["qq"]
    xs, ys = [plots.us(a) for a, _ in qq], [plots.us(b) for _, b in qq]
    ax.scatter(xs, ys, s=8, color="#1f5fa8")
    lo, hi = min(xs + ys), max(xs + ys)
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("GPD quantile [µs]")
    ax.set_ylabel("measured exceedance [µs]")
    ax.set_title(f"Quantile–quantile, {doc['exceedances']:,} exceedances of the fit part")
    ax.grid(True, alpha=0.3)


def evt_figure(doc: dict[str, Any]):
    """Return levels and the quantile–quantile plot of a tail model, side by side."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    return_level_axes(a, doc)
    qq_axes(b, doc)
    fig.tight_layout()
    if doc.get("warnings"):
        # Across the top, in red: a reader of the picture alone must not take these levels.
        fig.subplots_adjust(top=0.80)
        fig.text(
            0.5,
            0.985,
            "NOT CREDIBLE — " + "; ".join(w.split(";")[0].split(" (")[0] for w in doc["warnings"]),
            ha="center",
            va="top",
            color="#b42318",
            fontsize=10,
            fontweight="bold",
            wrap=True,
        )
    return fig


def _single(draw, doc: dict[str, Any], size=(8, 4.5)):
    fig, ax = plt.subplots(figsize=size)
    draw(ax, doc)
    return fig


def latency_vs_rate_figure(knee: dict[str, Any], title: str = "Latency versus packet rate"):
    """Percentiles per offered rate with the measured knee and the predicted R_max."""
    rows = knee["rates"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rates = [r["rate_pps"] for r in rows]
    for figure, style in (("p50", "-o"), ("p99", "-s"), ("p99_999", "-^"), ("max", ":.")):
        key = f"{figure}_ns"
        pts = [(r["rate_pps"], plots.us(r[key])) for r in rows if r[key] is not None]
        if pts:
            ax.plot(*zip(*pts), style, markersize=4, label=percentiles.label(figure))
    ax.set_yscale("log")
    over = [r["rate_pps"] for r in rows if r["overloaded"]]
    if over:
        ax.scatter(
            over,
            [plots.us(r["max_ns"] or r["p99_ns"] or 1) for r in rows if r["overloaded"]],
            s=80,
            facecolors="none",
            edgecolors="#b42318",
            label="overloaded",
        )
    if knee.get("knee_pps") is not None:
        ax.axvline(
            knee["knee_pps"], color="#b42318", linewidth=1.2, label=f"measured knee {format_rate(knee['knee_pps'])}"
        )
    if knee.get("r_max_pps") is not None:
        ax.axvline(
            knee["r_max_pps"],
            color="#067647",
            linestyle="--",
            linewidth=1.2,
            label=f"predicted R_max {format_rate(knee['r_max_pps'])}",
        )
    ax.set_xlabel("offered rate [packets/s]")
    ax.set_ylabel("latency [µs]")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    if rates:
        lo = min(rates + [knee.get("r_max_pps") or rates[0]])
        hi = max(rates + [knee.get("r_max_pps") or rates[-1]])
        ax.set_xlim(lo * 0.9 - 0.02 * hi, hi * 1.05)
    return fig


def overload_figure(doc: dict[str, Any]):
    """CPU time per second against the packet rate: interrupts first, then t_CPU per packet;
    where the line reaches one second is R_max."""
    fig, ax = plt.subplots(figsize=(8, 4))
    r_max, d_sum, t_cpu = doc["r_max_pps"], doc["d_sum_ns_per_s"], doc["t_cpu_ns"]
    xs = [0, 1.25 * r_max]
    ax.plot(xs, [(d_sum + x * t_cpu) / 1e6 for x in xs], color="#1f5fa8", label="interrupts + packets")
    ax.axhline(d_sum / 1e6, color="#d9480f", linestyle=":", label=f"interrupts d_Σ = {format_ns(d_sum)} per s")
    ax.axhline(1000, color="grey", linestyle="--", label="one second")
    ax.axvline(r_max, color="#067647", linestyle="--", label=f"R_max = {format_rate(r_max)}")
    ax.set_xlabel("packet rate [packets/s]")
    ax.set_ylabel("CPU time per second [ms]")
    ax.set_title(f"Overload model: t_CPU = {format_ns(t_cpu)} per packet")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def aliasing_figure(doc: dict[str, Any]):
    """The aliasing model's worst events, over the measured ones when there are some."""
    model = [(t, v) for t, v in doc["model"]["worst"]]
    measured = doc.get("measured")
    title = (
        f"{doc['model']['spec']['irq_rate_hz']:.4f} Hz interrupts against {doc['model']['spec']['rate_pps']:,.6g} pps"
        f" traffic (beat {doc['model']['beat_hz']:.4g} Hz)"
    )
    if measured:
        return plots.worst_scatter(
            [(t, v) for t, v in measured["worst"]], title, start_ns=0.0, overlay=model, overlay_label="aliasing model"
        )
    return plots.worst_scatter(model, title, start_ns=0.0)


def simulate_figure(doc: dict[str, Any]):
    """The CDF of predicted latency per case: batches show as steep steps and flat runs
    (NOMS 2020, Fig. 5). With a measured run, its percentiles are drawn over it."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for case in doc["cases"]:
        cdf = case["result"]["cdf"]
        if cdf:
            # From no packet at the first latency: each step rises where its packets arrive,
            # so a case of one latency (a burst the batch takes whole) is its vertical step,
            # not a single point that draws nothing.
            xs = [plots.us(cdf[0][0])] + [plots.us(v) for v, _ in cdf]
            ys = [0.0] + [c for _, c in cdf]
            ax.step(xs, ys, where="post", label=case["label"], linewidth=1.2)
    comp = doc.get("comparison")
    if comp:
        pts = [
            (plots.us(r["measured_ns"]), percentiles.fraction(r["percentile"]))
            for r in comp["rows"]
            if r["measured_ns"] is not None
        ]
        ax.scatter(*zip(*pts), color="#b42318", marker="x", zorder=3, label=f"measured, run {comp['run_id']}")
    ax.set_xlabel("latency [µs]")
    ax.set_ylabel("fraction of packets")
    ax.set_title("Predicted latency distribution")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


# -- report sections -------------------------------------------------------------------


def evt_section(page: Page, store: Store, model_id: int | str | None = None, run_id: int | None = None) -> bool:
    """The tail model of a run (or a given model result). False when there is none."""
    row = model_result(store, model_id) if model_id is not None else latest_model(store, "evt", run_id=run_id)
    if row is None:
        return False
    doc = row["result"]
    v, st = doc["validation"], doc["stationarity"]
    xi_ci = doc["xi_ci"] and f"[{doc['xi_ci'][0]:.3f}, {doc['xi_ci'][1]:.3f}]"
    head = table_html(
        [
            "threshold",
            "exceedances",
            "σ",
            "ξ",
            f"ξ {100 * doc['confidence']:g} % interval",
            "bounded",
            "upper end",
            "JS divergence",
        ],
        [
            [
                f"{doc['threshold_percentile']:g} % = {format_ns(doc['threshold_ns'])}",
                f"{doc['exceedances']:,}",
                format_ns(doc["sigma_ns"]),
                f"{doc['xi']:.3f}",
                xi_ci or "–",
                "yes" if doc["bounded"] else "no",
                format_ns(doc["endpoint_ns"]),
                f"{doc['js_divergence']:.4g}",
            ]
        ],
    )
    levels = table_html(
        ["return period", "return level", "interval"],
        [
            [
                f"{int(float(m)):,} packets",
                format_ns(r["level_ns"]),
                format_ns_interval(r["ci_ns"]),
            ]
            for m, r in doc["return_levels"].items()
        ]
        + [
            [
                f"{name} at {format_rate(doc['rate_pps'])}",
                format_ns(h["level_ns"]),
                format_ns_interval(h["ci_ns"]),
            ]
            for name, h in doc["horizons"].items()
        ],
    )
    checks = table_html(
        ["return period (validation)", "level", "expected", "exceedances (events)", "packets above"],
        [
            [
                f"{int(c['return_period']):,}",
                format_ns(c["return_level_ns"]),
                f"{c['expected']:g}",
                str(c["exceedances"]),
                str(c["exceedance_samples"]),
            ]
            for c in v["checks"]
        ],
    )
    stat = (
        f"<p>Stationarity of the fit part ({esc(st['series'])}): ADF p = {format_p_value(st['adf_p'])}, KPSS p = "
        f"{format_p_value(st['kpss_p'], st.get('kpss_p_bound'))} → <b>{esc(st['verdict'])}</b>.</p>"
    )
    partial = ("<p class='fail'>PARTIAL: " + esc("; ".join(doc["partial_reasons"])) + "</p>") if doc["partial"] else ""
    # Results stored before the check have no "warnings": nothing is claimed about them.
    partial += "".join(f"<p class='fail'>NOT CREDIBLE: {esc(w)}</p>" for w in doc.get("warnings", []))
    page.add(
        f"Tail model (model {row['model_id']}, {row['source'] or ''})",
        partial + f"<p class='meta'>{doc['samples']:,} samples: fit on the first {doc['fit_samples']:,}, "
        f"validated on the last {doc['validation_samples']:,}. {esc(doc['js_binning'])}.</p>"
        + head
        + levels
        + checks
        + stat
        + figure_html(_single(return_level_axes, doc), "Return levels with the empirical tails of both parts")
        + figure_html(_single(qq_axes, doc, (5.5, 5)), "Quantile–quantile plot of the chosen threshold"),
    )
    return True


def knee_section(page: Page, store: Store, experiment_id: int, dut_name: str | None = None) -> bool:
    """Latency versus rate for each DuT swept over two rates or more, with its stored knee
    (`lowtail model knee`, or the model step at the end of `lowtail run`) and the predicted
    R_max (the knee's own, else the latest stored overload model of that DuT). A sweep whose
    knee is not stored says so. False when there is no sweep to show."""
    try:
        sweeps = sweep_points(store, experiment_id, dut_name)
    except UserError:  # no analysed runs yet: nothing to draw
        return False
    shown = False
    for dut, points in sweeps.items():
        if len({p["rate_pps"] for p in points}) < 2:
            continue
        shown = True
        title = f"Latency versus rate — {dut}"
        stored = latest_model(store, "knee", experiment_id=experiment_id, dut_name=dut)
        if stored is None:
            page.add(
                title,
                f"<p class='meta'>No knee is stored for this sweep: <code>lowtail model knee {experiment_id}</code> "
                "finds it.</p>",
            )
            continue
        knee = stored["result"]
        if knee.get("r_max_pps") is None:
            overload = latest_model(store, "overload", experiment_id=experiment_id, dut_name=dut)
            if overload:
                knee = {**knee, "r_max_pps": overload["result"]["r_max_pps"]}
        verdict = (
            f"measured knee (first overloaded rate): <b>{esc(format_rate(knee['knee_pps']))}</b>"
            if knee["knee_pps"] is not None
            else "no overloaded rate in this sweep"
        )
        if knee.get("r_max_pps") is not None:
            verdict += f"; predicted R_max: <b>{esc(format_rate(knee['r_max_pps']))}</b>"
        page.add(
            title,
            f"<p>{verdict}</p>"
            + table_html(*knee_table(knee))
            + figure_html(
                latency_vs_rate_figure(knee, f"{dut}: latency versus rate"),
                "Percentiles per offered rate; the knee is the first overloaded rate",
            ),
        )
    return shown


def overload_section(page: Page, store: Store, model_id: int | str) -> None:
    """A stored overload model: its figures, the interrupt load and the CPU-time plot."""
    row = model_result(store, model_id)
    doc = row["result"]
    irqs = table_html(
        ["interrupt", "rate", "duration", "per second"],
        [
            [
                i["kind"] or "–",
                f"{i['rate_hz']:g} Hz",
                format_ns(i["duration_ns"]),
                format_ns(i["rate_hz"] * i["duration_ns"]),
            ]
            for i in doc["interrupts"]
        ],
    )
    page.add(
        f"Overload model (model {row['model_id']})",
        table_html(*overload_table(doc)) + irqs + figure_html(overload_figure(doc)),
    )


def aliasing_section(page: Page, store: Store, model_id: int | str) -> None:
    """A stored aliasing model: the beat, the fitted interrupt clock and the overlay."""
    row = model_result(store, model_id)
    doc = row["result"]
    m = doc["model"]
    text = (
        f"<p>Beat {m['beat_hz']:.4g} Hz against harmonic {m['harmonic']}: the pattern repeats every "
        f"{'∞' if m['pattern_period_s'] is None else format_ns(m['pattern_period_s'] * 1e9)}.</p>"
    )
    if doc.get("fit"):
        f = doc["fit"]
        text += (
            f"<p>Interrupt clock fitted to the measurement: {f['irq_rate_hz']:.6f} Hz "
            f"({f['offset_ppm']:+.2f} ppm{', locked to the traffic' if f.get('locked') else ''}), "
            f"median error {format_ns(f['median_error_ns'])} over "
            f"{f['delayed_packets']} delayed packets.</p>"
        )
    page.add(f"Interrupt aliasing (model {row['model_id']})", text + figure_html(aliasing_figure(doc)))


def simulate_section(page: Page, store: Store, model_id: int | str) -> None:
    """A stored device simulation: the comparison with its run and the predicted CDFs."""
    row = model_result(store, model_id)
    doc = row["result"]
    html = ""
    comp = doc.get("comparison")
    if comp:
        html += table_html(*comparison_table(comp))
    page.add(f"Device simulation (model {row['model_id']})", html + figure_html(simulate_figure(doc)))


def write_model_report(db: str | Path, model_id: int | str, output: str | Path) -> Path:
    """A page for one stored model result."""
    with open_store(db, read_only=True) as s:
        row = model_result(s, model_id)
        page = Page(title=f"lowtail model {row['model_id']} — {row['kind']}", subtitle=row["source"] or "")
        kind = row["kind"]
        if kind == "evt":
            evt_section(page, s, row["model_id"])
        elif kind == "knee":
            knee_section(page, s, row["experiment_id"], row["dut_name"])
        elif kind == "overload":
            overload_section(page, s, row["model_id"])
        elif kind == "aliasing":
            aliasing_section(page, s, row["model_id"])
        else:
            simulate_section(page, s, row["model_id"])
    return page.write(Path(output))


def save_figure(fig, path: str | Path) -> Path:
    """Write a figure as PNG (the `--plot` of the model commands) and free it."""
    try:
        # the suffix names the image format, not the temporary file's name
        fmt = Path(path).suffix.lstrip(".") or "png"
        return write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format=fmt), "plot")
    finally:
        plt.close(fig)


__all__: Sequence[str] = [
    "evt_section",
    "knee_section",
    "overload_section",
    "aliasing_section",
    "simulate_section",
    "write_model_report",
    "evt_figure",
    "latency_vs_rate_figure",
    "overload_figure",
    "aliasing_figure",
    "simulate_figure",
    "save_figure",
]
