"""Report sections on interrupts and OS noise, built only from the database:
the interrupt timeline of a run placed under its worst events (which interrupt kinds
coincide with the spikes, as its stored explanation says), and the figures of a
`lowtail noise` probe."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import UTC
from pathlib import Path

import plotly.graph_objects as go

from lowtail.core.units import format_count, format_ns
from lowtail.host.document import KIND_NAMES, describe_energy
from lowtail.report import figure as tk
from lowtail.report import plots
from lowtail.report.page import Page, esc, figure_html, table_html
from lowtail.report.tables import interrupt_profile_table, noise_table
from lowtail.store import DbPath, open_store
from lowtail.store.analyses import PAGE_ROWS, worst_events
from lowtail.store.db import Store
from lowtail.store.explain import explanation
from lowtail.store.host import noise_run, run_interrupts
from lowtail.store.runs import run_figures


def interrupt_timeline_section(
    page: Page,
    store: Store,
    run_id: int,
    source: str = "host",
    budget_ns: int | None = None,
    heading: str | None = None,
    level: int = 2,
) -> None:
    """Interrupt increments on the DuT cores placed under the run's worst events, and
    which kinds coincide with the spikes, as the run's explanation stored it
    (explain/coincidence.py). source "guest": a VM guest's own interrupts, on all its vCPUs."""
    guest = source == "guest"
    title = heading or ("Guest interrupts during the run" if guest else "Interrupts during the run")
    samples = run_interrupts(store, run_id, source)
    if not samples:
        page.add(title, "<p class='meta'>No interrupt samples were recorded for this run.</p>", level)
        return
    run = run_figures(store, run_id)
    stored = (explanation(store, run_id) or {}).get("interrupt_coincidence", {}).get(source)
    worst = []
    if run["analysis_id"] is not None:
        worst = [(t, v) for t, v, _ in worst_events(store, run["analysis_id"], PAGE_ROWS)]
    start = run["start_ts_ns"] or min(s[0] - s[4] for s in samples)
    interval = sorted(s[4] for s in samples)[len(samples) // 2]
    where = (
        "the guest's /proc/interrupts, read by the guest on its vCPU 0 and sent over its control port, stamped "
        "with the host's clock on arrival, about every"
        if guest
        else "/proc/interrupts sampled from a housekeeping core every"
    )
    if stored is None:
        fig = _timeline_figure(worst, samples, None, start, [], budget_ns)
        page.add(
            title,
            f"<p class='meta'>{where} {esc(format_ns(interval))}; increments on all CPUs. Which kinds coincide "
            f"with the largest latencies is not stored for this run: <code>lowtail explain {run_id}</code> "
            f"works it out.</p>"
            + figure_html(fig, "Worst latencies (top) and interrupt increments per sampling interval (bottom)"),
            level,
        )
        return
    cpus = set(stored["cpus"]) if stored["cpus"] else None
    spikes = stored["spike_times_ns"]
    rows = stored["rows"]
    fig = _timeline_figure(worst, samples, cpus, start, spikes, budget_ns)
    table = table_html(
        ["kind", "what", "interrupts", "largest spikes with it", "share of intervals with it"],
        [
            [
                r["kind"],
                r["description"],
                f"{r['count']:,}",
                f"{r['spikes_with']} of {r['spikes']}",
                f"{100 * r['interval_share']:.0f} %",
            ]
            for r in rows
        ],
    )
    said = (
        "".join(f"<p>{esc(s)}</p>" for s in stored["sentences"])
        if spikes
        else "<p class='meta'>The run has no stored worst events to compare with.</p>"
    )
    page.add(
        title,
        f"<p class='meta'>{where} {esc(format_ns(interval))}; "
        f"increments on {esc(stored['cpus_text'])}; a spike is one of the {stored['spikes']} largest latencies.</p>"
        + figure_html(fig, "Worst latencies (top) and interrupt increments per sampling interval (bottom)")
        + said
        + table,
        level,
    )


def _timeline_figure(
    worst: list[tuple[int, int]],
    samples: list[tuple[int, int, str, int, int]],
    cpus: Collection[int] | None,
    start_ns: int,
    spikes: list[int],
    budget_ns: int | None = None,
) -> go.Figure:
    """Worst latencies (top) over interrupt increments per sampling interval (bottom), on
    one time axis; the largest spikes marked across both."""
    fig = tk.new_figure(
        "Worst latencies and interrupts over the run",
        height=560,
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.58, 0.42],
        vertical_spacing=0.06,
    )
    fig.add_trace(
        go.Scatter(
            x=[(t - start_ns) / 1e9 for t, _ in worst],
            y=[v for _, v in worst],
            mode="markers",
            marker=dict(size=4, color=tk.colour(0), opacity=0.75),
            name=f"{len(worst):,} worst latencies",
            customdata=[[format_ns(v)] for _, v in worst],
            hovertemplate=tk.hover("%{x:.4f} s: %{customdata[0]}"),
        ),
        row=1,
        col=1,
    )
    for i, t in enumerate(spikes):
        for row in (1, 2):
            tk.vertical_line(
                fig,
                (t - start_ns) / 1e9,
                f"the {len(spikes)} largest latencies",
                "rgba(180,35,24,0.35)",
                "solid",
                row,
                1,
                legend=i == 0 and row == 1,
                width=0.6,
            )
    series: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for t, cpu, kind, delta, _ in samples:
        if cpus is None or cpu in cpus:
            series[kind][t] += delta
    biggest = sorted(series, key=lambda k: -sum(series[k].values()))[:6]
    counts = []
    for i, kind in enumerate(biggest):
        pts = [(t, d) for t, d in sorted(series[kind].items()) if d > 0]
        counts += [d for _, d in pts]
        fig.add_trace(
            go.Scatter(
                x=[(t - start_ns) / 1e9 for t, _ in pts],
                y=[d for _, d in pts],
                mode="lines+markers",
                marker=dict(size=4),
                line=dict(width=1, color=tk.colour(i + 1)),
                name=f"{kind} ({KIND_NAMES.get(kind, kind)})",
                customdata=[[format_count(d)] for _, d in pts],
                hovertemplate=tk.hover("%{x:.3f} s: %{customdata[0]} interrupts"),
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(**tk.latency_axis([v for _, v in worst] + ([budget_ns] if budget_ns else [])), row=1, col=1)
    fig.update_yaxes(**tk.value_axis([1, *counts], "count", "interrupts per interval", log=True), row=2, col=1)
    fig.update_xaxes(**tk.time_axis(), row=2, col=1)
    fig.update_xaxes(ticksuffix=" s", row=1, col=1)
    tk.budget_line(fig, budget_ns, row=1, col=1)
    return fig


def noise_section(page: Page, store: Store, noise_run_id: int | str = "latest") -> None:
    """A stored noise probe: per core its gaps, interrupt profile and largest gaps."""
    r = noise_run(store, noise_run_id)
    head = table_html(*noise_table(r["cores"]))
    sampled = (
        f"sampled every {format_ns(r['sample_interval_ns'])}"
        if r["sample_interval_ns"]
        else "read before and after only"
    )
    page.add(
        f"OS noise (probe {r['noise_run_id']})",
        f"<p class='meta'>{esc(format_ns(r['duration_ns']))} per core, gaps above {esc(format_ns(r['threshold_ns']))}; "
        f"interrupts {esc(sampled)}; energy: {esc(describe_energy(r['energy']))}. Percentiles are exact "
        f"nearest-rank values over the gaps.</p>" + head,
    )
    for c in r["cores"]:
        fig = plots.histogram_plot(c["histogram"], f"CPU {c['cpu']}: gap durations", "gap", "gaps")
        a = c["attribution"]
        profile = table_html(*interrupt_profile_table((p["kind"], p) for p in c["interrupts"]))
        largest = table_html(
            ["time (UTC)", "gap"], [[_utc(t), format_ns(g)] for t, g in sorted(c["largest"], key=lambda x: -x[1])[:10]]
        )
        method = (
            (
                f"<p class='meta'>attribution: {esc(a.get('method', '–'))}, {a.get('intervals', 0)} intervals, "
                f"{100 * a.get('explained_share', 0):.0f} % of the time in gaps under 1 ms explained; "
                f"{a.get('long_gaps', 0):,} gaps of 1 ms or more (other tasks, throttling, hypervisor) "
                f"not attributed</p>"
            )
            if a
            else ""
        )
        page.add(
            f"CPU {c['cpu']}",
            figure_html(fig) + "<h3>Interrupt profile</h3>" + method + profile + "<h3>Largest gaps</h3>" + largest,
        )


def _utc(t_ns: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(t_ns / 1e9, tz=UTC).strftime("%H:%M:%S.%f")


def write_noise_report(db: DbPath, noise_run_id: int | str, output: str | Path) -> Path:
    """The report of one stored noise probe (an id, or 'latest') as one HTML file."""
    with open_store(db, read_only=True) as s:
        page = Page(title="lowtail noise probe", subtitle=str(db))
        noise_section(page, s, noise_run_id)
    return page.write(Path(output))
