"""Plots and report sections of the models: return levels and QQ of the tail model,
latency versus rate with the knee and R_max, the aliasing overlay, the simulated
latency staircases and the simulation-versus-measurement comparison.

Figure functions take the document a model command prints (and stores), so the command's
`--plot` and a report draw the same picture; `*_section` functions read the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.core.units import (
    format_count,
    format_counted,
    format_hz,
    format_ns,
    format_ns_interval,
    format_p_value,
    format_rate,
)
from lowtail.models.document import FlowTailsDocument, flow_name
from lowtail.report import figure as tk
from lowtail.report import plots
from lowtail.report.page import Page, esc, figure_html, table_html
from lowtail.report.png import write_png
from lowtail.report.tables import comparison_table, knee_table, overload_table
from lowtail.store import DbPath, open_store
from lowtail.store.db import Store
from lowtail.store.models import (
    ALIASING,
    EVT,
    FLOWS,
    KNEE,
    OVERLOAD,
    SIMULATE,
    latest_model,
    model_result,
    model_row,
    sweep_points,
)

# -- figures -----------------------------------------------------------------------------


def _return_level_traces(
    fig: go.Figure, doc: Mapping[str, Any], row: int | None = None, col: int | None = None
) -> None:
    """The GPD return levels with their interval, both parts' empirical tails, the upper
    end, the validation level and the horizons."""
    p = doc["plot"]
    at = dict(row=row, col=col) if row else {}
    curve = [c for c in p["curve"] if c[1] is not None]
    band = [c for c in curve if c[2] is not None]
    blue = tk.colour(0)
    if band:
        fig.add_trace(
            go.Scatter(
                x=[c[0] for c in band],
                y=[c[2] for c in band],
                mode="lines",
                line=dict(width=0, color=blue),
                showlegend=False,
                hoverinfo="skip",
            ),
            **at,
        )
        fig.add_trace(
            go.Scatter(
                x=[c[0] for c in band],
                y=[c[3] for c in band],
                mode="lines",
                line=dict(width=0, color=blue),
                fill="tonexty",
                fillcolor="rgba(0,114,178,0.15)",
                name=f"{100 * doc['confidence']:g} % interval",
                customdata=[[format_count(c[0]), format_ns(c[2]), format_ns(c[3])] for c in band],
                hovertemplate=tk.hover("1 in %{customdata[0]} packets: %{customdata[1]} … %{customdata[2]}"),
            ),
            **at,
        )
    fig.add_trace(
        go.Scatter(
            x=[c[0] for c in curve],
            y=[c[1] for c in curve],
            mode="lines",
            line=dict(color=blue, width=2),
            name="GPD return level",
            customdata=[[format_count(c[0]), format_ns(c[1])] for c in curve],
            hovertemplate=tk.hover("1 in %{customdata[0]} packets: %{customdata[1]}"),
        ),
        **at,
    )
    for name, pts, symbol, colour in (
        ("fit part", p["empirical_fit"], "circle", "#333333"),
        ("validation part", p["empirical_validation"], "x", tk.colour(5)),
    ):
        if pts:
            fig.add_trace(
                go.Scatter(
                    x=[m for m, _ in pts],
                    y=[v for _, v in pts],
                    mode="markers",
                    marker=dict(symbol=symbol, size=6, color=colour),
                    name=name,
                    customdata=[[format_count(m), format_ns(v)] for m, v in pts],
                    hovertemplate=tk.hover("1 in %{customdata[0]} packets: %{customdata[1]}"),
                ),
                **at,
            )
    if doc.get("endpoint_ns") is not None:
        tk.horizontal_line(fig, doc["endpoint_ns"], "upper end (ξ < 0)", tk.FLOOR_COLOUR, "dash", row, col)
    v = doc["validation"]
    if v["return_level_ns"] is not None:
        fig.add_trace(
            go.Scatter(
                x=[v["return_period"]],
                y=[v["return_level_ns"]],
                mode="markers",
                marker=dict(symbol="diamond", size=10, color=tk.BUDGET_COLOUR),
                name=f"validation level: {v['exceedances']} exceedance(s), 1 expected",
                customdata=[[format_ns(v["return_level_ns"])]],
                hovertemplate=tk.hover("%{customdata[0]}"),
            ),
            **at,
        )
    for name, h in doc.get("horizons", {}).items():
        tk.vertical_line(fig, h["packets"], f"{name} at the run's rate", "#999999", "dot", row, col)
    periods = [c[0] for c in curve] + [m for m, _ in p["empirical_fit"] + p["empirical_validation"]]
    levels = [c[1] for c in curve] + [c[3] for c in band] + [x for _, x in p["empirical_fit"]]
    levels += [x for _, x in p["empirical_validation"]]
    fig.update_xaxes(**tk.value_axis(periods, "count", "return period [packets]", log=True), **at)
    fig.update_yaxes(**tk.latency_axis([x for x in levels if x and x > 0]), **at)


def _not_credible(doc: Mapping[str, Any]) -> str:
    """Why a tail model is not to be believed, when its result says so; else ""."""
    if doc.get("credible", True) is not False:
        return ""
    return "NOT CREDIBLE: " + "; ".join(doc.get("warnings") or ["see the model's warnings"])


def return_level_figure(doc: Mapping[str, Any]) -> go.Figure:
    """Return levels of a tail model with the empirical tails of its fit and validation parts."""
    fig = tk.new_figure(f"Return levels (threshold {doc['threshold_percentile']:g} %, ξ = {doc['xi']:.3f})", height=460)
    _return_level_traces(fig, doc)
    _credibility_note(fig, doc)
    return fig


def _credibility_note(fig: go.Figure, doc: Mapping[str, Any]) -> None:
    said = _not_credible(doc)
    if said:
        fig.add_annotation(
            text=said,
            xref="paper",
            yref="paper",
            x=0.5,
            y=1.0,
            yanchor="bottom",
            showarrow=False,
            font=dict(color=tk.BUDGET_COLOUR, size=13),
        )


def _qq_traces(fig: go.Figure, doc: Mapping[str, Any], row: int | None = None, col: int | None = None) -> None:
    at = dict(row=row, col=col) if row else {}
    qq = doc["plot"]["qq"]
    xs, ys = [a for a, _ in qq], [b for _, b in qq]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker=dict(size=6, color=tk.colour(0)),
            name="exceedances",
            customdata=[[format_ns(a), format_ns(b)] for a, b in qq],
            hovertemplate=tk.hover("model %{customdata[0]}, measured %{customdata[1]}"),
        ),
        **at,
    )
    lo, hi = min(xs + ys, default=0), max(xs + ys, default=1)
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            line=dict(color="#999999", dash="dash", width=1),
            name="y = x",
            hoverinfo="skip",
        ),
        **at,
    )
    fig.update_xaxes(**tk.latency_axis(xs + ys, log=False, title="GPD quantile"), **at)
    fig.update_yaxes(**tk.latency_axis(xs + ys, log=False, title="measured exceedance"), **at)


def qq_figure(doc: Mapping[str, Any]) -> go.Figure:
    """The quantile–quantile plot of a tail model's threshold."""
    fig = tk.new_figure(f"Quantile–quantile, {doc['exceedances']:,} exceedances of the fit part", height=440)
    _qq_traces(fig, doc)
    return fig


def evt_figure(doc: Mapping[str, Any]) -> go.Figure:
    """Return levels and the quantile–quantile plot of a tail model, side by side."""
    fig = tk.new_figure(
        f"Tail model: threshold {doc['threshold_percentile']:g} %, ξ = {doc['xi']:.3f}",
        height=480,
        rows=1,
        cols=2,
        subplot_titles=["Return levels", f"Quantile–quantile, {doc['exceedances']:,} exceedances"],
        horizontal_spacing=0.1,
    )
    _return_level_traces(fig, doc, 1, 1)
    _qq_traces(fig, doc, 1, 2)
    _credibility_note(fig, doc)
    return fig


def knee_sweep(knee: Mapping[str, Any], label: str) -> plots.Sweep:
    """A stored knee result as one DuT's sweep for the latency-versus-rate plot."""
    return plots.Sweep(
        label,
        [(r["rate_pps"], {k: r[f"{k}_ns"] for k in _SWEEP_FIGURES}, bool(r["overloaded"])) for r in knee["rates"]],
        knee.get("knee_pps"),
        knee.get("r_max_pps"),
        _SWEEP_FIGURES,
    )


_SWEEP_FIGURES = ("p50", "p99", "p99_999", "max")


def latency_vs_rate_figure(
    knee: Mapping[str, Any], title: str = "Latency versus packet rate", budget_ns: int | None = None
) -> go.Figure:
    """Percentiles per offered rate with the measured knee and the predicted R_max."""
    return plots.latency_vs_rate_plot([knee_sweep(knee, knee.get("dut") or "DuT")], title, budget_ns)


def overload_figure(doc: Mapping[str, Any]) -> go.Figure:
    """CPU time per second against the packet rate: interrupts first, then t_CPU per packet;
    where the line reaches one second is R_max."""
    fig = tk.new_figure(f"Overload model: t_CPU = {format_ns(doc['t_cpu_ns'])} per packet")
    r_max, d_sum, t_cpu = doc["r_max_pps"], doc["d_sum_ns_per_s"], doc["t_cpu_ns"]
    xs = [0, 1.25 * r_max]
    ys = [d_sum + x * t_cpu for x in xs]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            line=dict(color=tk.colour(0), width=2),
            name="interrupts + packets",
            customdata=[[format_rate(x), format_ns(y)] for x, y in zip(xs, ys)],
            hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]} of CPU per second"),
        )
    )
    tk.horizontal_line(fig, d_sum, f"interrupts d_Σ = {format_ns(d_sum)} per s", tk.colour(5), "dot")
    tk.horizontal_line(fig, 1e9, "one second", tk.FLOOR_COLOUR, "dash")
    tk.vertical_line(fig, r_max, f"R_max = {format_rate(r_max)}", tk.R_MAX_COLOUR, "dash")
    fig.update_xaxes(**tk.value_axis(xs, "rate", "packet rate", log=False, include_zero=True))
    fig.update_yaxes(**tk.value_axis([0, *ys, 1e9], "duration", "CPU time per second", log=False))
    return fig


def aliasing_figure(doc: Mapping[str, Any]) -> go.Figure:
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


def simulate_figure(doc: Mapping[str, Any]) -> go.Figure:
    """The CDF of predicted latency per case: batches show as steep steps and flat runs
    (NOMS 2020, Fig. 5). With a measured run, its percentiles are drawn over it."""
    fig = plots.cdf_plot(
        [(case["label"], case["result"]["cdf"]) for case in doc["cases"]], "Predicted latency distribution"
    )
    comp = doc.get("comparison")
    if comp:
        rows = [r for r in comp["rows"] if r["measured_ns"] is not None]
        fig.add_trace(
            go.Scatter(
                x=[r["measured_ns"] for r in rows],
                y=[percentiles.fraction(r["percentile"]) for r in rows],
                mode="markers",
                marker=dict(symbol="x", size=9, color=tk.BUDGET_COLOUR),
                name=f"measured, run {comp['run_id']}",
                customdata=[[percentiles.label(r["percentile"]), format_ns(r["measured_ns"])] for r in rows],
                hovertemplate=tk.hover("%{customdata[0]}: %{customdata[1]}"),
            )
        )
    return fig


# -- report sections -------------------------------------------------------------------


def evt_section(page: Page, store: Store, model_id: int | str | None = None, run_id: int | None = None) -> bool:
    """The tail model of a run (or a given model result). False when there is none."""
    row = model_result(store, model_id, EVT) if model_id is not None else latest_model(store, EVT, run_id=run_id)
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
                "yes" if doc["bounded"] else "not shown",
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
                f"{name} at {format_rate(doc['rate_pps'] or 0)}",  # horizons are there when the rate is
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
        + figure_html(return_level_figure(doc), "Return levels with the empirical tails of both parts")
        + figure_html(qq_figure(doc), "Quantile–quantile plot of the chosen threshold"),
    )
    return True


def knee_section(
    page: Page, store: Store, experiment_id: int, dut_name: str | None = None, budget_ns: int | None = None
) -> bool:
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
        stored = latest_model(store, KNEE, experiment_id=experiment_id, dut_name=dut)
        if stored is None:
            page.add(
                title,
                f"<p class='meta'>No knee is stored for this sweep: <code>lowtail model knee {experiment_id}</code> "
                "finds it.</p>",
            )
            continue
        knee = stored["result"]
        if knee.get("r_max_pps") is None:
            overload = latest_model(store, OVERLOAD, experiment_id=experiment_id, dut_name=dut)
            if overload:
                knee = {**knee, "r_max_pps": overload["result"]["r_max_pps"]}
        verdict = (
            f"measured knee (first overloaded rate): <b>{esc(format_rate(knee['knee_pps']))}</b>"
            if knee["knee_pps"] is not None
            else "no overloaded rate in this sweep (overload is loss or a growing queue; the budget's verdicts are above)"
        )
        r_max = knee.get("r_max_pps")
        if r_max is not None:
            verdict += f"; predicted R_max: <b>{esc(format_rate(r_max))}</b>"
        page.add(
            title,
            f"<p>{verdict}</p>"
            + table_html(*knee_table(knee), text=(5,))
            + figure_html(
                latency_vs_rate_figure(knee, f"{dut}: latency versus rate", budget_ns),
                "Percentiles per offered rate; the knee is the first overloaded rate",
            ),
        )
    return shown


def overload_section(page: Page, store: Store, model_id: int | str) -> None:
    """A stored overload model: its figures, the interrupt load and the CPU-time plot."""
    row = model_result(store, model_id, OVERLOAD)
    doc = row["result"]
    irqs = table_html(
        ["interrupt", "rate", "duration", "per second"],
        [
            [
                i["kind"] or "–",
                format_hz(i["rate_hz"], 6),
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
    row = model_result(store, model_id, ALIASING)
    doc = row["result"]
    m = doc["model"]
    text = (
        f"<p>Beat {m['beat_hz']:.4g} Hz against harmonic {m['harmonic']}: the pattern repeats every "
        f"{'∞' if m['pattern_period_s'] is None else format_ns(m['pattern_period_s'] * 1e9)}.</p>"
    )
    f = doc["fit"]
    if f:
        text += (
            f"<p>Interrupt clock fitted to the measurement: {f['irq_rate_hz']:.6f} Hz "
            f"({f['offset_ppm']:+.2f} ppm{', locked to the traffic' if f.get('locked') else ''}), "
            f"median error {format_ns(f['median_error_ns'])} over "
            f"{f['delayed_packets']} delayed packets.</p>"
        )
    page.add(f"Interrupt aliasing (model {row['model_id']})", text + figure_html(aliasing_figure(doc)))


def simulate_section(page: Page, store: Store, model_id: int | str) -> None:
    """A stored device simulation: the comparison with its run and the predicted CDFs."""
    row = model_result(store, model_id, SIMULATE)
    doc = row["result"]
    html = ""
    comp = doc.get("comparison")
    if comp:
        html += table_html(*comparison_table(comp))
    page.add(f"Device simulation (model {row['model_id']})", html + figure_html(simulate_figure(doc)))


def write_knee_report(db: DbPath, experiment_id: int, dut_name: str | None, output: str | Path) -> Path:
    """A page of an experiment's rate sweep: its stored knees (`lowtail model knee --report`)."""
    with open_store(db, read_only=True) as s:
        page = Page(title=f"lowtail — rate sweep of experiment {experiment_id}")
        knee_section(page, s, experiment_id, dut_name)
    return page.write(Path(output))


def flow_tails_section(page: Page, doc: FlowTailsDocument) -> None:
    """Each flow's tail model (`lowtail model flows`): the verified flows worst predicted first,
    then the contradicted ones and those the data cannot support, each with why."""
    verified = sorted(
        (f for f in doc["flows"] if f["status"] == "verified"),
        key=lambda f: -(f["predicted_ns"].get("p99_99") or 0.0),
    )
    rows = verified + [f for f in doc["flows"] if f["status"] != "verified"]
    page.add(
        "Flows' tails (EVT per flow)",
        f"<p class='meta'>{format_counted(len(doc['flows']), 'flow')} · {doc['verified']:,} verified · {doc['contradicted']:,} "
        f"contradicted · {doc['unsupported']:,} the data cannot support (CNSM 2022's flow-level estimation and "
        "verification)</p>"
        + table_html(
            ["flow", "packets", "ξ", "p99.99 predicted", "p99.99 observed", "check"],
            [
                [
                    flow_name(f),
                    f"{f['packets']:,}",
                    "–" if f["xi"] is None else f"{f['xi']:.3f}",
                    format_ns(f["predicted_ns"].get("p99_99")),
                    format_ns(f["observed_ns"].get("p99_99")),
                    f"{f['status']}: {f['reason']}",
                ]
                for f in rows[:200]
            ],
            text=(5,),
        ),
    )


def write_model_report(db: DbPath, model_id: int | str, output: str | Path) -> Path:
    """A page for one stored model result."""
    with open_store(db, read_only=True) as s:
        row = model_row(s, model_id)
        page = Page(title=f"lowtail model {row['model_id']} — {row['kind']}", subtitle=row["source"] or "")
        kind = row["kind"]
        if kind == "evt":
            evt_section(page, s, row["model_id"])
        elif kind == "knee":
            assert row["experiment_id"] is not None  # a knee is of an experiment's sweep
            knee_section(page, s, row["experiment_id"], row["dut_name"])
        elif kind == "overload":
            overload_section(page, s, row["model_id"])
        elif kind == "aliasing":
            aliasing_section(page, s, row["model_id"])
        elif kind == "flows":
            flow_tails_section(page, model_result(s, row["model_id"], FLOWS)["result"])
        else:
            simulate_section(page, s, row["model_id"])
    return page.write(Path(output))


def save_figure(fig: go.Figure, path: str | Path) -> Path:
    """Write a figure as PNG (the `--plot` of the model commands)."""
    return write_png(fig, path)


__all__: Sequence[str] = [
    "evt_section",
    "knee_section",
    "overload_section",
    "aliasing_section",
    "simulate_section",
    "flow_tails_section",
    "write_model_report",
    "evt_figure",
    "latency_vs_rate_figure",
    "overload_figure",
    "aliasing_figure",
    "simulate_figure",
    "save_figure",
]
