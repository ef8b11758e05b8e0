"""The page of a comparison (`lowtail compare … -o FILE.html`): which configuration keeps
the tail inside the budget. Built from the comparison document as `lowtail compare --json`
prints it and the store keeps it, in this order: a summary banner (per configuration its
verdict, the margin to the budget, and where rates were swept the highest rate that meets
it), the seeds' Table II (pooled exact percentiles, their spread over repetitions and
whether the data resolves them, the floor, the verdict) with the differences that are
beyond run-to-run variation, the HDR overlay (repetitions as a band, floors dashed, the
budget line), the CDF overlay, the worst events side by side, latency against rate with
knees and R_max, the EVT tables (001 Tables 4–5), and the interrupts of each
configuration's worst repetition where they were recorded.

The document, per configuration (`configurations[]`): `key` (axis → value), `runs`,
`repetitions`, `sent`, `lost`, `loss_ratio`, `latency_ns` (p50 … p99_999, max: pooled
exact percentiles), `spread` (figure → [min, max] over repetitions), `interval_ns` (figure
→ [low, high], the distribution-free confidence interval; null where the data cannot
resolve the percentile), `worst_repetition` (a run id), `verdict` (a judgement as
`Judgement.as_dict` gives it), and where stored `floor_ns` (figure → ns of the testbed's
floor), `curve` ([p, ns] pooled), `band` ([p, lowest ns, highest ns] over repetitions),
`floor_curve`, `cdf` ([ns, share]), `worst` ([pre_ts_ns, ns]) with `start_ts_ns`. At the
top: `budget` (`percentile`, `budget_ns`, `max_loss`), `by` (the axes that make a
configuration), `differences` (`a`, `b` as configuration keys, `percentile`,
`difference_ns`, `resolvable`, `text`), `latency_vs_rate` (per DuT: `label`, `points`
[{`rate_pps`, `latency_ns`, `overloaded`}], `knee_pps`, `r_max_pps`) and `evt` (per
configuration: `key`, `runs`, `fitted`, `bounded`, `mean_exceedances`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lowtail import axes, percentiles
from lowtail.report import plots
from lowtail.report.interrupts import interrupt_timeline_section
from lowtail.report.page import Cell, Page, esc, figure_html, table_html
from lowtail.store.db import Store
from lowtail.store.host import run_interrupts
from lowtail.units import format_count, format_ns, format_ns_range, format_percent, format_rate
from lowtail.verdict import Status, Verdict
from lowtail.virtualization import TCG_WARNING

# The figures of the Table II-style table, in rank order.
TABLE_FIGURES = ("p50", "p99", "p99_9", "p99_99", "p99_999", "max")
_STATUS_CLASS = {"PASS": "pass", "FAIL": "fail", "INVALID": "fail", "inconclusive": "warn"}
_CARD_CLASS = {"PASS": "met", "FAIL": "broken", "INVALID": "broken"}
_PAGE_STYLE = """<style>
.lt-summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: .6em; margin: 1em 0; }
.lt-card { border: 1px solid #ddd; border-left: 6px solid #999; border-radius: 4px; padding: .5em .8em; }
.lt-card.met { border-left-color: #067647; } .lt-card.broken { border-left-color: #b42318; }
.lt-card.undecided { border-left-color: #d9a400; }
.lt-card .name { font-weight: 600; } .lt-card .status { font-size: 1.15em; font-weight: 700; }
.lt-card.met .status { color: #067647; } .lt-card.broken .status { color: #b42318; }
.lt-card.undecided .status { color: #9a6700; }
.lt-configs td.text { white-space: nowrap; }
.lt-card .detail { color: #444; font-size: .9em; }
td small { display: block; color: #777; font-size: .8em; } td.unresolved { color: #999; font-style: italic; }
td.worst { font-weight: 600; }
</style>"""


def configuration_label(key: dict[str, Any], shown: Sequence[str] | None = None) -> str:
    """A configuration in words from its axis values: "fwd · container · 50 kpps"."""
    names = [n for n in (shown if shown is not None else key) if n in key]
    return " · ".join(axes.show_value(n, key[n]) for n in names) or "all runs"


def _varying(configurations: list[dict[str, Any]]) -> list[str]:
    """The key axes whose values differ between configurations (the ones worth naming)."""
    names: dict[str, None] = {}
    for c in configurations:
        names.update(dict.fromkeys(c["key"]))
    varying = [n for n in names if len({repr(c["key"].get(n)) for c in configurations}) > 1]
    return varying or list(names)


def _verdict(doc: dict[str, Any]) -> Verdict:
    b = doc.get("budget") or {}
    return Verdict(
        float(b.get("percentile", Verdict.percentile)),
        int(b.get("budget_ns", Verdict.budget_ns)),
        int(b.get("max_loss", Verdict.max_loss)),
    )


def _margin(c: dict[str, Any], verdict: Verdict) -> str:
    """How far the judged percentile is from the budget, in words."""
    value = (c.get("latency_ns") or {}).get(verdict.key)
    if value is None:
        return "no latency to compare"
    gap = verdict.budget_ns - value
    share = format_percent(abs(gap) / verdict.budget_ns, ".2g")
    return f"{format_ns(gap)} under the budget ({share})" if gap > 0 else f"{format_ns(-gap)} over the budget"


def _status(c: dict[str, Any]) -> str:
    return (c.get("verdict") or {}).get("status", "inconclusive")


def _card(title: str, status: str, lines: Sequence[str]) -> str:
    css = _CARD_CLASS.get(status.split(":")[0].split(",")[0], "undecided")
    details = "".join(f"<div class='detail'>{esc(line)}</div>" for line in lines if line)
    return f"<div class='lt-card {css}'><div class='name'>{esc(title)}</div><div class='status'>{esc(status)}</div>{details}</div>"


def summary_section(page: Page, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """Per configuration its verdict and margin; where rates were swept, per configuration
    without its rate the highest rate that meets the budget."""
    configs = doc["configurations"]
    passed = sum(_status(c) == Status.PASS.value for c in configs)
    intro = (
        f"<p>Budget: <b>{esc(verdict.describe())}</b>. {passed} of {len(configs)} configurations meet it. "
        f"Percentiles are exact over the pooled packets of each configuration's repetitions.</p>"
    )
    if axes.RATE in shown and len({c["key"].get(axes.RATE) for c in configs}) > 1:
        cards = _rate_cards(configs, verdict, [n for n in shown if n != axes.RATE])
    else:
        cards = [
            _card(
                configuration_label(c["key"], shown),
                (c.get("verdict") or {}).get("label", _status(c)),
                [
                    f"{percentiles.label(verdict.key)}: {format_ns((c.get('latency_ns') or {}).get(verdict.key))}",
                    _margin(c, verdict),
                    f"{c.get('repetitions', len(c.get('runs', [])))} repetitions, "
                    f"{format_count(c.get('lost'))} lost of {format_count(c.get('sent'))}",
                ],
            )
            for c in configs
        ]
    page.add("Summary", _PAGE_STYLE + intro + f"<div class='lt-summary'>{''.join(cards)}</div>")


def _rate_cards(configs: list[dict[str, Any]], verdict: Verdict, others: list[str]) -> list[str]:
    """One card per configuration without its rate: the highest swept rate that passes."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in configs:
        groups[configuration_label(c["key"], others)].append(c)
    cards = []
    for label, members in groups.items():
        members.sort(key=lambda c: c["key"].get(axes.RATE) or 0)
        passing = [c for c in members if _status(c) == Status.PASS.value]
        per_rate = ", ".join(f"{format_rate(c['key'][axes.RATE])} {_status(c)}" for c in members)
        if passing:
            best = passing[-1]
            lines = [f"meets the budget up to {format_rate(best['key'][axes.RATE])}", _margin(best, verdict), per_rate]
            status = Status.PASS.value
        else:
            lines = ["meets the budget at no swept rate", per_rate]
            status = "FAIL" if any(_status(c) == "FAIL" for c in members) else "inconclusive"
        cards.append(_card(label, status, lines))
    return cards


def _figure_cell(c: dict[str, Any], key: str) -> Cell:
    value = (c.get("latency_ns") or {}).get(key)
    spread = (c.get("spread") or {}).get(key)
    interval = (c.get("interval_ns") or {}).get(key, ())
    text = esc(format_ns(value))
    if spread and c.get("repetitions", 1) > 1:
        text += f"<small>{esc(format_ns_range(*spread))}</small>"
    resolvable = key == percentiles.MAX or "interval_ns" not in c or bool(interval)
    if not resolvable:
        text += "<small>not resolved</small>"
    return Cell(text, "" if resolvable else "unresolved", html=True)


def table_section(page: Page, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """The seeds' Table II: per configuration its axes, repetitions, loss, pooled
    percentiles with their spread over repetitions, the floor, the worst repetition and
    the verdict; then the differences beyond run-to-run variation."""
    keys = [k for k in percentiles.figure_keys(*TABLE_FIGURES)]
    if verdict.key not in keys:
        keys = [k for k in percentiles.figure_keys() if k in set(keys) | {verdict.key}]
    judged = percentiles.label(verdict.key)
    header = [
        *(Cell(axes.by_name(n).label if axes.by_name(n) else n, "text") for n in shown),
        "reps",
        "sent",
        "lost",
        *(percentiles.label(k) for k in keys),
        f"floor {judged}",
        "worst rep.",
        "verdict",
    ]
    rows = []
    for c in doc["configurations"]:
        v = c.get("verdict") or {}
        floor = (c.get("floor_ns") or {}).get(verdict.key)
        rows.append(
            [
                *(Cell(axes.show_value(n, c["key"].get(n)).removeprefix(f"{n} "), "text") for n in shown),
                str(c.get("repetitions", len(c.get("runs", [])))),
                format_count(c.get("sent")),
                format_count(c.get("lost"))
                + (f" ({format_percent(c['loss_ratio'], '.2g')})" if c.get("loss_ratio") else ""),
                *(_figure_cell(c, k) for k in keys),
                format_ns(floor) if floor is not None else "–",
                f"run {c['worst_repetition']}" if c.get("worst_repetition") is not None else "–",
                Cell(v.get("label", v.get("status", "–")), _STATUS_CLASS.get(v.get("status", ""), "") + " text"),
            ]
        )
    reasons = "".join(
        f"<li><b>{esc(configuration_label(c['key'], shown))}</b>: {esc((c.get('verdict') or {}).get('reason', ''))}</li>"
        for c in doc["configurations"]
        if (c.get("verdict") or {}).get("reason")
    )
    page.add(
        "Configurations",
        "<p class='meta'>Pooled exact percentiles; under each, its range over the repetitions (lowest–highest); a percentile "
        "whose confidence interval the data cannot bound is marked “not resolved”. The floor is the testbed's "
        "own latency under the same traffic.</p>"
        f"<div class='wide'>{table_html(header, rows, 'lt-configs')}</div><ul>{reasons}</ul>"
        + _differences(doc, shown),
    )


def _differences(doc: dict[str, Any], shown: list[str]) -> str:
    diffs = doc.get("differences") or []
    if not diffs:
        return "<p class='meta'>No differences between configurations are beyond run-to-run variation.</p>"
    items = []
    for d in diffs:
        text = d.get("text") or (
            f"{configuration_label(d['a'], shown)} against {configuration_label(d['b'], shown)} at "
            f"{percentiles.label(d['percentile'])}: {format_ns(d.get('difference_ns'))}"
        )
        css = "" if d.get("resolvable", True) else " class='meta'"
        items.append(f"<li{css}>{esc(text)}</li>")
    return f"<h3>Differences</h3><ul>{''.join(items)}</ul>"


def hdr_section(page: Page, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """One HDR curve per configuration over its repetitions' band, its floor dashed."""
    curves = [
        plots.Curve(
            configuration_label(c["key"], shown),
            c.get("curve") or [],
            band=c.get("band") or (),
            floor=c.get("floor_curve") or (),
            floor_label=f"{configuration_label(c['key'], shown)}: floor",
        )
        for c in doc["configurations"]
    ]
    if not any(c.points for c in curves):
        page.add("Latency by percentile", "<p class='meta'>No percentile curves are stored with this comparison.</p>")
        return
    page.add(
        "Latency by percentile",
        figure_html(
            plots.hdr_percentile_plot(curves, "Latency by percentile, per configuration", verdict.budget_ns, 520),
            "HDR percentile plot over the pooled repetitions; the band is the range of the repetitions' own curves, "
            "the dashed curves the testbed's floor. Click a legend entry to hide or show it.",
        ),
    )


def cdf_section(page: Page, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """The CDF overlay of 004 Fig. 5, where CDF points are stored (burst and batch sweeps)."""
    series = [(configuration_label(c["key"], shown), c["cdf"]) for c in doc["configurations"] if c.get("cdf")]
    if series:
        page.add(
            "Latency distribution (CDF)",
            figure_html(
                plots.cdf_plot(series, "Cumulative distribution of latency", verdict.budget_ns),
                "Batches show as steep steps and flat runs (004 Fig. 5).",
            ),
        )


def worst_section(page: Page, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """The worst events of each configuration's worst repetition, side by side."""
    panels = [
        (
            configuration_label(c["key"], shown)
            + (f" (run {c['worst_repetition']})" if c.get("worst_repetition") else ""),
            c["worst"],
            c.get("start_ts_ns") or min((t for t, _ in c["worst"]), default=0),
        )
        for c in doc["configurations"]
        if c.get("worst")
    ]
    if panels:
        page.add(
            "Worst events",
            figure_html(
                plots.worst_scatter_grid(panels, "Worst events over time, per configuration", verdict.budget_ns),
                "The worst repetition's largest latencies over its run, on one latency axis.",
            ),
        )


def rate_section(page: Page, doc: dict[str, Any], verdict: Verdict) -> None:
    """Latency against rate for every swept DuT, with knees and predicted R_max."""
    sweeps = [
        plots.Sweep(
            s["label"],
            [(p["rate_pps"], p.get("latency_ns") or {}, bool(p.get("overloaded"))) for p in s["points"]],
            s.get("knee_pps"),
            s.get("r_max_pps"),
            ("p50", verdict.key),
        )
        for s in doc.get("latency_vs_rate") or []
        if len(s.get("points") or []) >= 2
    ]
    if sweeps:
        knees = "; ".join(
            f"{s.label}: knee {format_rate(s.knee_pps) if s.knee_pps else 'not reached'}"
            + (f", predicted R_max {format_rate(s.r_max_pps)}" if s.r_max_pps else "")
            for s in sweeps
        )
        page.add(
            "Latency versus rate",
            f"<p>{esc(knees)}</p>"
            + figure_html(
                plots.latency_vs_rate_plot(sweeps, "Latency versus offered rate", verdict.budget_ns),
                "Median (solid) and judged percentile per offered rate; vertical lines: each DuT's measured knee "
                "(first overloaded rate) and predicted R_max (dashed).",
            ),
        )


def evt_section(page: Page, doc: dict[str, Any], shown: list[str]) -> None:
    """001 Tables 4–5: per configuration the share of bounded tails among its fitted runs
    and the mean number of validation exceedances (1 expected)."""
    rows = doc.get("evt") or []
    if not rows:
        return
    body = [
        [
            Cell(configuration_label(r["key"], shown), "text"),
            str(r.get("runs", "–")),
            str(r.get("fitted", "–")),
            f"{r['bounded']} ({format_percent(r['bounded'] / r['fitted'], '.3g')})" if r.get("fitted") else "–",
            "–" if r.get("mean_exceedances") is None else f"{r['mean_exceedances']:.2f}",
        ]
        for r in rows
    ]
    page.add(
        "Tail models (EVT)",
        "<p class='meta'>Per configuration, the stored tail models of its runs: how many have a bounded tail "
        "(ξ < 0) and the mean number of validation exceedances of the fitted return level (1 expected).</p>"
        + table_html(["configuration", "runs", "fitted", "bounded tails", "mean exceedances"], body),
    )


def interrupts_section(page: Page, store: Store, doc: dict[str, Any], verdict: Verdict, shown: list[str]) -> None:
    """The interrupt timeline of each configuration's worst repetition, where sampled."""
    for c in doc["configurations"]:
        run_id = c.get("worst_repetition")
        if run_id is None:
            continue
        for source, what in (("host", "interrupts"), ("guest", "guest interrupts")):
            if run_interrupts(store, run_id, source):
                interrupt_timeline_section(
                    page,
                    store,
                    run_id,
                    source=source,
                    budget_ns=verdict.budget_ns,
                    heading=f"{configuration_label(c['key'], shown)}: {what} (run {run_id})",
                )


def comparison_page(doc: dict[str, Any], store: Store | None = None, title: str = "") -> Page:
    """The page of a comparison document; with the store it was read from, also the
    interrupts of each configuration's worst repetition."""
    verdict = _verdict(doc)
    configs = doc["configurations"]
    shown = list(doc.get("by") or _varying(configs))
    page = Page(
        title=title or f"lowtail comparison{' ' + str(doc['comparison_id']) if doc.get('comparison_id') else ''}",
        subtitle=f"{len(configs)} configurations · {sum(len(c.get('runs', [])) for c in configs)} runs · "
        f"by {', '.join(shown)}",
    )
    if any(str(c["key"].get(axes.VIRTUALIZATION) or "").lower() == "tcg" for c in configs):
        page.banner(TCG_WARNING)
    if doc.get("partial"):
        page.banner("PARTIAL: " + "; ".join(doc.get("partial_reasons") or ["some runs could not be read"]))
    for w in doc.get("warnings") or []:
        page.banner(w, "warn")
    summary_section(page, doc, verdict, shown)
    table_section(page, doc, verdict, shown)
    hdr_section(page, doc, verdict, shown)
    cdf_section(page, doc, verdict, shown)
    worst_section(page, doc, verdict, shown)
    rate_section(page, doc, verdict)
    evt_section(page, doc, shown)
    if store is not None:
        interrupts_section(page, store, doc, verdict, shown)
    return page


def write_comparison_page(doc: dict[str, Any], output: str | Path, store: Store | None = None) -> Path:
    """The page of a comparison document as one self-contained HTML file."""
    return comparison_page(doc, store).write(Path(output))
