"""The report of one stored analysis."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lowtail.analyze.document import (
    RANKED_BY,
    AnalysisFigures,
    FlowDocument,
    FlowsDocument,
    StoredAnalysis,
    flow_spread,
    flows_worst_first,
)
from lowtail.core import percentiles
from lowtail.core.units import format_ns, format_percent, format_share
from lowtail.report import plots
from lowtail.report.cards import VerdictCard, cards_html
from lowtail.report.page import Cell, Page, esc, figure_html, table_html
from lowtail.report.tables import interval_text, unresolved_note
from lowtail.store import DbPath, open_store
from lowtail.store.analyses import PAGE_ROWS, analysis
from lowtail.verdict.analysis_budget import AnalysisBudget, analysis_budget
from lowtail.verdict.judge import VerdictRequest


def analysis_sections(page: Page, doc: StoredAnalysis, name: str = "") -> None:
    """Append the tables and plots of one stored analysis to a page."""
    f = doc["figures"]
    prefix = f"{name} · " if name else ""
    counts = table_html(
        ["sent", "received", "lost", "duplicates", "reordered", "foreign", "negative", "unmatched"],
        [
            [
                f"{f[k]:,}"
                for k in ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative", "unmatched")
            ]
        ],
    )
    lat = f.get("latency_ns")
    lat_table = ""
    if lat:
        rows: list[list[object]] = [["latency", *(format_ns(lat[k]) for k in percentiles.figure_keys())]]
        rows[0].append(format_ns(lat["mean"]))
        intervals = f.get("intervals")
        if intervals:
            rows.append([f"{format_percent(intervals['level'], 'g')} interval"] + _interval_cells(f) + [""])
        why = unresolved_note(intervals, "hover over one for its reason")
        lat_table = table_html([""] + [label for _, label in percentiles.labelled()] + ["mean"], rows)
        lat_table += f"<p class='meta'>{esc(why)}</p>" if why else ""
    inputs = doc["inputs"]
    meta = table_html(
        ["side", "file", "format", "compression", "frames", "with id", "foreign"],
        [
            [
                side.upper(),
                inputs[side]["path"],
                inputs[side]["format"],
                inputs[side]["compression"],
                f"{inputs[side]['frames']:,}",
                f"{inputs[side]['with_id']:,}",
                f"{inputs[side]['not_udp'] + inputs[side]['too_short'] + inputs[side]['snapped']:,}",
            ]
            for side in ("pre", "post")
        ],
    )
    warn_html = "".join(f"<p class='warn'>⚠ {esc(w)}</p>" for w in doc["warnings"])
    if doc["partial"]:
        page.banner("PARTIAL: the input was cut short; the figures cover only part of it.")
    page.add(
        f"{prefix}Figures (analysis {doc['analysis_id']})",
        f"<p class='meta'>trim {esc(format_ns(f['trim_ns']))} · {esc(format_ns(f['duration_ns']))} "
        f"analysed · percentiles are exact nearest-rank values</p>" + counts + lat_table + meta + warn_html,
    )
    curves = [plots.Curve(name or f"analysis {doc['analysis_id']}", [(p, v) for p, v, _ in doc["percentiles"]])]
    page.add(
        f"{prefix}Latency distribution",
        figure_html(
            plots.hdr_percentile_plot(curves, "Latency by percentile"),
            "HDR percentile plot: x is 1/(1−p) on a log scale, so each nine gets the same width",
        )
        + figure_html(plots.histogram_plot(doc["histograms"]["latency"], "Latency histogram")),
    )
    start = f.get("start_ts_ns") or 0
    page.add(
        f"{prefix}Worst events",
        figure_html(
            plots.worst_scatter(
                [(t, v) for t, v, _ in doc["worst"]], f"{len(doc['worst']):,} worst latencies over time", start_ns=start
            ),
            "The worst events over the run: periodic patterns point at interrupts or timers",
        ),
    )
    flows = doc.get("flows")
    if flows and len(flows["flows"]) > 1:
        flows_section(page, flows, prefix)
    page.add(
        f"{prefix}Traffic",
        figure_html(plots.rates_plot(doc["rates"]["pre"], doc["rates"]["post"], sending_span_ns(f)))
        + "<div class='side-by-side'>"
        + figure_html(
            plots.histogram_plot(doc["histograms"]["jitter_pre"], "Inter-arrival times, PRE", "inter-arrival time")
        )
        + figure_html(
            plots.histogram_plot(doc["histograms"]["jitter_post"], "Inter-arrival times, POST", "inter-arrival time")
        )
        + "</div>",
    )


# The most flows the section's table lists and its plots draw (the worst ones, and the best).
SHOWN_FLOWS = 20
PLOTTED_FLOWS = 12


def _flow_points(flow: FlowDocument) -> list[tuple[float, float]]:
    """A flow's distribution at the figures the store keeps of it: (percentile in 0..1,
    latency ns) from its minimum through every headline percentile to its maximum."""
    lat = flow["latency_ns"] or {}
    keys = percentiles.figure_keys()
    return [(percentiles.fraction(k), float(v)) for k in keys if (v := lat.get(k)) is not None]


def flows_section(
    page: Page, flows: FlowsDocument, prefix: str = "", heading: str = "Flows", level: int = 2, figures: bool = True
) -> None:
    """The section "flows": how far the flows lie apart, the worst flows first with their
    packets, loss and figures, and (with `figures`) their distributions overlaid (the worst,
    and the best)."""
    rows = flows["flows"]
    s = flow_spread(rows)
    ranked = flows_worst_first(rows)
    shown_pct = percentiles.by_key(RANKED_BY)
    table = table_html(
        ["flow", "sent", "lost", "p50", shown_pct.short, "p99.99", "max"],
        [
            [
                f["key"],
                f"{f['sent']:,}",
                f"{f['lost']:,} ({format_share(f['lost'], f['sent'])})",
                *(format_ns((f["latency_ns"] or {}).get(k)) for k in ("p50", RANKED_BY, "p99_99", "max")),
            ]
            for f in ranked[:SHOWN_FLOWS]
        ],
    )
    lead = (
        f"<p class='meta'>{len(rows):,} flows told apart by {esc(flows['key'])}"
        + (" (the last holds every flow beyond those told apart)" if flows["overflowed"] else "")
        + f" · {esc(shown_pct.short)} from {esc(format_ns(s['least_ns']))} to {esc(format_ns(s['greatest_ns']))},"
        f" median {esc(format_ns(s['median_ns']))} · worst case {esc(format_ns(s['worst_max_ns']))} · loss"
        f" {esc(format_percent(s['least_loss']))} to {esc(format_percent(s['greatest_loss']))} · the"
        f" {min(SHOWN_FLOWS, len(rows))} worst flows by {esc(shown_pct.short)}, then worst case</p>"
    )
    if not figures:
        page.add(f"{prefix}{heading}", lead + table, level)
        return
    plotted = ranked[: PLOTTED_FLOWS - 1] + ranked[-1:] if len(ranked) > PLOTTED_FLOWS else ranked
    curves = [plots.Curve(f["key"], _flow_points(f)) for f in plotted if f["latency_ns"]]
    cdf = [(f["key"], [(v, p) for p, v in _flow_points(f)]) for f in plotted if f["latency_ns"]]
    page.add(
        f"{prefix}{heading}",
        lead
        + table
        + figure_html(
            plots.hdr_percentile_plot(curves, "Latency by percentile, per flow"),
            f"The {len(curves)} worst flows and the best, at the figures stored per flow (min, every "
            "headline percentile, max)",
        )
        + figure_html(plots.cdf_plot(cdf, "Latency distribution per flow (CDF)", log=True)),
        level,
    )


def _interval_cells(figures: Mapping[str, Any]) -> list[object]:
    """Each figure's interval as the terminal's table shows it; one not resolved says why on
    hover."""
    lat, shown = figures["latency_ns"], (figures.get("intervals") or {}).get("percentiles") or {}
    cells: list[object] = []
    for k in percentiles.figure_keys():
        iv = shown.get(k)
        text = interval_text(lat[k], iv, lat["max"])
        cells.append(Cell(text, title=iv["why"] or "") if iv and not iv["resolvable"] else text)
    return cells


def analysis_card(doc: StoredAnalysis, budget: AnalysisBudget) -> str:
    """The analysis's verdict card: its judged percentile against its budget, and whose the
    budget is."""
    card = VerdictCard(doc["label"] or f"analysis {doc['analysis_id']}", [budget.judge()])
    return cards_html([card], f"Budget: {budget.verdict.describe()} ({budget.whose})")


def sending_span_ns(figures: AnalysisFigures) -> int | None:
    """PRE's first to last packet: the analysed duration plus the trim cut from its start
    (the per-second counts start at the first packet, before the trim)."""
    duration = figures.get("duration_ns")
    return None if duration is None else int(duration) + int(figures.get("trim_ns") or 0)


def write_analysis_report(
    db: DbPath, analysis_id: int | str, output: str | Path | None = None, request: VerdictRequest | None = None
) -> Path:
    """The report of one stored analysis (an id, or 'latest') as one HTML file, by default
    lowtail-report-<id>.html (the id the analysis has, 'latest' resolved), judged against
    its budget (`analysis_budget`) with what `request` asks for over it."""
    with open_store(db, read_only=True) as s:
        doc = analysis(s, analysis_id, PAGE_ROWS)
        budget = analysis_budget(s, doc, request)
    page = Page(
        title=f"lowtail analysis {doc['analysis_id']}" + (f" — {doc['label']}" if doc["label"] else ""),
        subtitle=f"{doc['pre_path']} → {doc['post_path']}",
    )
    page.lead(analysis_card(doc, budget))
    analysis_sections(page, doc)
    return page.write(Path(output or f"lowtail-report-{doc['analysis_id']}.html"))
