"""The model commands' results in the terminal (`lowtail model ...` without --json): the
same tables the reports show (report/tables.py) where there are some, and the EVT,
aliasing and simulation summaries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape as markup_escape
from rich.table import Table

from lowtail.cli._output import note, out, warn
from lowtail.core import percentiles
from lowtail.core.units import (
    format_counted,
    format_hz,
    format_ns,
    format_ns_interval,
    format_p_value,
    format_percent,
    format_rate,
)
from lowtail.models.document import FlowTailsDocument, flow_name
from lowtail.report.tables import comparison_table, evt_tail_text, knee_table, overload_table


def table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    """A plain terminal table: the first column left-aligned, the figures right-aligned."""
    t = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        t.add_row(*r)
    return t


def overload_lines(d: Mapping[str, Any]) -> None:
    """The overload model's table."""
    out.print(table("overload model", *overload_table(d)))


def knee_lines(doc: Mapping[str, Any], db: object) -> None:
    """One DuT's sweep: its table and its knee beside the predicted R_max."""
    out.print(table(f"{doc['dut']} (experiment {doc['experiment_id']})", *knee_table(doc)))
    line = (
        f"knee: {format_rate(doc['knee_pps'])} (last rate without overload: "
        f"{format_rate(doc['last_ok_pps']) if doc['last_ok_pps'] else '–'})"
        if doc["knee_pps"] is not None
        else "no overloaded rate in this sweep"
    )
    if doc["r_max_pps"] is not None:
        line += f"; predicted R_max {format_rate(doc['r_max_pps'])}"
    out.print(line)
    if doc.get("model_id") is not None:
        note(f"stored as model {doc['model_id']} in {db}")


def evt_tables(d: Mapping[str, Any]) -> None:
    """The EVT model's thresholds, tail, return levels, validation and stationarity."""
    note(
        f"{d['source']}: {d['samples']:,} samples, fit on the first {d['fit_samples']:,}, "
        f"validated on the last {d['validation_samples']:,}"
    )
    rows = [
        [
            f"{t['percentile']:g} %",
            format_ns(t["threshold_ns"]),
            f"{t['exceedances']:,}",
            format_ns(t["sigma_ns"], 1) if t["sigma_ns"] is not None else "–",
            f"{t['xi']:.3f}" if t["xi"] is not None else "–",
            f"{t['xi_ci'][0]:.3f}…{t['xi_ci'][1]:.3f}" if t["xi_ci"] else "–",
            f"{t['js_divergence']:.4g}" if t["js_divergence"] is not None else "–",
            "◀" if t["percentile"] == d["threshold_percentile"] else "",
        ]
        for t in d["thresholds"]
    ]
    out.print(
        table(
            "thresholds (◀ chosen: lowest Jensen–Shannon divergence)",
            ["threshold", "value", "exceedances", "σ", "ξ", f"ξ {d['confidence'] * 100:g} %", "JS", ""],
            rows,
        )
    )
    for t in d["thresholds"]:
        if t["note"]:
            out.print(f"  {t['percentile']:g} %: {t['note']}")
    tail = evt_tail_text(d)
    out.print(f"tail: {tail}")
    levels = [
        [
            f"{int(float(m)):,} packets",
            format_ns(r["level_ns"]) if r["level_ns"] is not None else "below threshold",
            format_ns_interval(r["ci_ns"]),
        ]
        for m, r in d["return_levels"].items()
    ]
    levels += [
        [
            f"{name} at {format_rate(d['rate_pps'])}",
            format_ns(h["level_ns"]) if h["level_ns"] is not None else "–",
            format_ns_interval(h["ci_ns"]),
        ]
        for name, h in d["horizons"].items()
    ]
    out.print(table("return levels", ["period", "level", "interval"], levels))
    v = d["validation"]
    out.print(
        f"validation: {v['exceedances']} exceedance event(s) ({v['exceedance_samples']} packets) of "
        f"{format_ns(v['return_level_ns'])}, the level for {v['samples']:,} packets (expected: 1)"
    )
    st = d["stationarity"]
    out.print(
        f"stationarity: ADF p = {format_p_value(st['adf_p'])}, "
        f"KPSS p = {format_p_value(st['kpss_p'], st.get('kpss_p_bound'))}"
        f" → {st['verdict']} ({st['series']})"
    )


def aliasing_lines(d: Mapping[str, Any]) -> None:
    """The aliasing pattern and, against a run, the fitted interrupt clock."""
    m = d["model"]
    period = "∞ (the phase stands still)" if m["pattern_period_s"] is None else format_ns(m["pattern_period_s"] * 1e9)
    out.print(
        f"{m['spec']['rate_pps']:,.6g} pps traffic against {m['spec']['irq_rate_hz']:.6f} Hz interrupts "
        f"of {', '.join(format_ns(x) for x in m['spec']['irq_durations_ns'])}: beat {m['beat_hz']:.6g} Hz "
        f"(harmonic {m['harmonic']}), pattern period {period}; "
        f"{m['packets_delayed']:,} of {m['packets']:,} packets delayed"
        + ("; undersampled: the regular lines appear" if m["undersampled"] else "")
    )
    if d["fit"]:
        f = d["fit"]
        out.print(
            f"fitted interrupt clock: {f['irq_rate_hz']:.6f} Hz ({f['offset_ppm']:+.2f} ppm"
            + (", locked to the traffic" if f.get("locked") else "")
            + f"), first at "
            f"{format_ns(f['irq_phase_ns'])}, median error {format_ns(f['median_error_ns'])} over "
            f"{f['delayed_packets']} delayed packets"
        )
        if f.get("warning"):
            warn(f["warning"])
    cycle = d.get("cycle")
    if cycle:
        steps = ", ".join(
            f"{c['kind']} every {c['every']} ticks ({format_hz(c['rate_hz'])})" for c in cycle["companions"]
        )
        out.print(
            f"interrupt cycle from the run's {cycle['source']} samples on CPU {cycle['cpu']}: {cycle['base']} at "
            f"{cycle['base_rate_hz']:.6g} Hz"
            + (f", {steps}" if steps else "")
            + f"; ticks {', '.join(cycle['cycle'])} "
            f"of {', '.join(format_ns(x) for x in cycle['durations_ns'])}",
            markup=False,
        )
        out.print(f"  ({cycle['resolution']})", markup=False)
    slopes = d.get("slopes")
    if slopes and slopes["measured_ns_per_s"] is not None and slopes["model_ns_per_s"] is not None:
        out.print(
            f"lines: measured {format_ns(slopes['measured_ns_per_s'])}/s, model {format_ns(slopes['model_ns_per_s'])}/s",
            markup=False,
        )


def simulate_tables(d: Mapping[str, Any]) -> None:
    """The predicted figures of each case and, against a run, the comparison."""

    figures = percentiles.labelled("min", "p50", "p99", "p99_999", "max")
    rows = []
    for c in d["cases"]:
        res, lat = c["result"], c["result"]["latency_ns"] or {}
        rows.append(
            [
                c["label"],
                format_percent(res["loss"]),
                format_percent(res["utilisation"] or 0, ".1f"),
                *(format_ns(lat.get(k), 1) for k, _ in figures),
            ]
        )
    rates = {c["spec"]["rate_pps"] for c in d["cases"]}
    at = f" at {format_rate(rates.pop())}" if len(rates) == 1 else ""  # else each case names its rate
    out.print(
        table(
            f"predicted{at} ({d['cases'][0]['result']['offered']:,} packets per case)",
            ["case", "loss", "core busy", *(label for _, label in figures)],
            rows,
        )
    )
    comp = d["comparison"]
    if comp:
        out.print(
            table(
                f"run {comp['run_id']} ({comp['dut']}, {format_rate(comp['rate_pps'])}, work "
                f"{format_ns(comp['work_ns'])}, batch {comp['batch']}): base latency "
                f"{format_ns(comp['base_latency_ns'])} ({comp['base_latency_source']})",
                *comparison_table(comp),
            )
        )
        ml = comp["measured_loss"]
        out.print(
            f"loss: measured {'–' if ml is None else format_percent(ml)}, "
            f"predicted {format_percent(comp['predicted_loss'])}"
        )


# The flows' tails a terminal's table shows (all of them in --json and on the page).
SHOWN_FLOW_TAILS = 30


def flow_tails_table(d: FlowTailsDocument) -> None:
    """Each flow's tail model: verified ones worst predicted first, then the contradicted
    and those the data cannot support; under the table, why those were not verified (the
    counts of each check are in `--json` and on the page)."""
    from lowtail.models.flow_evt import worst_predicted

    note(
        f"{d.get('source', d['series'])}: {format_counted(len(d['flows']), 'flow')} · {d['verified']:,} verified · "
        f"{d['contradicted']:,} contradicted · {d['unsupported']:,} the data cannot support"
    )
    t = Table(title="flows' tails, worst predicted first", title_justify="left", box=None, pad_edge=False)
    # 80 columns: a flow's packets (much alike in a flows experiment) stay in --json and on the page.
    t.add_column("flow", justify="left", no_wrap=True)
    for col in ("ξ", "p99.99\npredicted", "p99.99\nobserved"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("check", justify="left", no_wrap=True)
    # Every flow not verified is shown (they are the news), the verified worst first in the room left.
    others = [f for f in d["flows"] if f["status"] != "verified"][:SHOWN_FLOW_TAILS]
    shown = worst_predicted(d)[: max(SHOWN_FLOW_TAILS - len(others), 10)] + others
    for f in shown:
        t.add_row(
            markup_escape(flow_name(f)),
            "–" if f["xi"] is None else f"{f['xi']:.3f}",
            format_ns(f["predicted_ns"].get("p99_99")),
            format_ns(f["observed_ns"].get("p99_99")),
            f["status"],
        )
    out.print(t)
    if len(d["flows"]) > len(shown):
        hidden = len(d["flows"]) - len(shown)
        note(f"… and {hidden:,} more {'flow' if hidden == 1 else 'flows'} (`--json`, or the page: all of them)")
    for f in shown:
        if f["status"] != "verified":
            out.print(f"{flow_name(f)} {f['status']}: {f['reason']}", soft_wrap=True, markup=False)
