"""The page of a comparison (`lowtail compare … -o FILE.html`): which configuration keeps
the tail inside the budget. Read from the stored comparison only — the document
`lowtail compare --json` prints and, per configuration (by its `index`), the percentile
curves (pooled, each repetition's band, the floor's), the CDF points and the repetitions'
worst events, as `store.comparisons` returns them. In this order: a summary (per
configuration its verdict and margin; per rate sweep the highest rate that meets the
budget), NOMS 2020's Table II (pooled exact percentiles with their spread over
repetitions, unresolvable ones marked, the floor, the worst repetition, the verdict) with
the differences beyond run-to-run variation, the HDR overlay (repetitions as a band, floors
dashed, the budget line), the CDF overlay (NOMS 2020, Fig. 5), the worst events side by side,
latency against rate with knees and R_max, the EVT table (Perf. Eval. 2024, Tables 4–5), and the
interrupts of each configuration's worst repetition where they were sampled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowtail.compare.document import UNBOUNDED, ComparisonDocument, ConfigurationDocument, RatePoint, RateSeries
from lowtail.core import percentiles
from lowtail.core.units import format_count, format_counted, format_ns, format_ns_range, format_percent, format_rate
from lowtail.core.virtualization import TCG_WARNING
from lowtail.experiment.page import status_class
from lowtail.report import plots
from lowtail.report.cards import VerdictCard, cards_html
from lowtail.report.interrupts import interrupt_timeline_section
from lowtail.report.page import Cell, Page, esc, figure_html, table_html
from lowtail.report.tables import (
    by_size,
    cause_headline,
    causes_table,
    not_called_by_reason,
    shared_notes,
    unjudged_lines,
)
from lowtail.store import DbPath, open_store
from lowtail.store.db import Store
from lowtail.store.host import run_interrupts
from lowtail.verdict.judge import Status, Verdict

# The tables' style (the qualification record's tables use it too; the cards bring their own).
PAGE_STYLE = """<style>
td small { display: block; color: #777; font-size: .8em; } td.unresolved { color: #999; font-style: italic; }
.lt-configs { font-size: .88em; } .lt-configs td, .lt-configs th { padding: .25em .4em; }
.lt-configs td.text, .lt-configs .v { white-space: nowrap; }
</style>"""


@dataclass
class Drawn:
    """What the page draws per configuration index, as `store.comparisons` returns it:
    curves ({"pooled", "floor": [(p, ns)], "band": [(p, lo, hi)]}), CDF points
    ([(fraction, ns)]) and worst events ([{"run_id", "t_ns", "latency_ns"}])."""

    curves: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    cdf: Mapping[int, Sequence[tuple[float, float]]] = field(default_factory=dict)
    worst: Mapping[int, Sequence[Mapping[str, Any]]] = field(default_factory=dict)


def _status(c: ConfigurationDocument) -> str:
    return str((c.get("verdict") or {}).get("status", Status.INCONCLUSIVE.value))


def _css(c: ConfigurationDocument) -> str:
    """The css class of a configuration's verdict, as the experiment page colours a run's."""
    return status_class(_status(c), bool(c["verdict"]["degraded"]))


def _budget_ns(doc: ComparisonDocument) -> int | None:
    """The budget every latency plot draws: the one all configurations share, if any."""
    verdict = doc.get("verdict")
    return verdict["budget_ns"] if verdict else None


def _judged_key(doc: ComparisonDocument) -> str:
    keys = {c["verdict"]["percentile"] for c in doc["configurations"]} - {""}
    verdict = doc.get("verdict")
    return verdict["key"] if verdict else (keys.pop() if len(keys) == 1 else Verdict().key)


def _margin(c: ConfigurationDocument, where: str = "") -> str:
    """How far the judged percentile is from the budget, in words (`where`: " at 50 kpps")."""
    value, budget = c["verdict"]["value_ns"], c["verdict"]["budget_ns"]
    if value is None or not budget:
        return "no latency to compare with the budget"
    gap = budget - value
    if gap > 0:
        return f"{format_ns(gap)} under the budget{where} ({format_percent(gap / budget, '.2g')} of the budget)"
    return f"{format_ns(-gap)} over the budget{where}"


def _sweep_notes(points: list[RatePoint], by_index: Mapping[int, ConfigurationDocument]) -> list[str]:
    """Where a rate sweep meets the budget: "up to" the highest rate below which every rate
    passes; the passing rates by name where a lower one does not (make run's kernel passed at
    50 kpps only, and read "meets the budget up to 50 kpps" beside an inconclusive 20 kpps)."""
    passing = [p for p in points if p.get("verdict") == Status.PASS.value]
    if not passing:
        return ["meets the budget at no rate swept"]
    upto = next((i for i, p in enumerate(points) if p.get("verdict") != Status.PASS.value), len(points))
    if upto:
        highest = points[upto - 1]
        said = f"meets the budget at every rate up to {format_rate(highest['rate_pps'])}"
    else:
        highest = passing[-1]
        said = f"meets the budget at {', '.join(format_rate(p['rate_pps']) for p in passing)} only"
    return [said, _margin(by_index[highest["configuration"]], f" at {format_rate(highest['rate_pps'])}")]


def _swept(doc: ComparisonDocument) -> list[RateSeries]:
    """The latency-against-rate series with two rates or more."""
    return [s for s in doc.get("rates") or [] if len(s.get("points") or []) >= 2]


def summary_section(page: Page, doc: ComparisonDocument) -> None:
    """The page's lead: per configuration a verdict card (its judged figure, margin,
    repetitions and loss); a rate sweep as one card with the highest rate that meets the
    budget."""
    configs = doc["configurations"]
    by_index = {c["index"]: c for c in configs}
    cards, in_sweep = [], set()
    for s in _swept(doc):
        points = sorted((p for p in s["points"] if p["configuration"] in by_index), key=lambda p: p["rate_pps"])
        swept = [by_index[p["configuration"]] for p in points]
        in_sweep |= {c["index"] for c in swept}
        cards.append(
            VerdictCard(
                s["label"],
                [c["verdict"] for c in swept if c.get("verdict")],
                labels=[format_rate(p["rate_pps"]) for p in points],
                emulated=any(_emulated(c) for c in swept),
                notes=_sweep_notes(points, by_index),
            )
        )
    for c in configs:
        if c["index"] in in_sweep or not c.get("verdict"):
            continue
        cards.append(
            VerdictCard(
                c["label"],
                [c["verdict"]],
                emulated=_emulated(c),
                # The configuration's "degraded" lists reasons; its runs say which are degraded.
                degraded_runs=sum(bool(r.get("degraded")) for r in c["per_run"])
                if c.get("per_run")
                else int(bool(c.get("degraded"))),
                pooled_runs=len(c["per_run"]) if c.get("per_run") else None,
                notes=[
                    _margin(c),
                    f"{c['repetitions']} repetition{'s' if c['repetitions'] != 1 else ''}, "
                    f"{format_count(c.get('lost'))} lost of {format_count(c.get('sent'))}",
                ],
            )
        )
    verdict = doc.get("verdict")
    budget = verdict["text"] if verdict else "each configuration against its runs' own budget"
    passed = sum(_status(c) == Status.PASS.value for c in configs)
    cards, folded = _first_cards(cards)
    page.lead(
        PAGE_STYLE
        + cards_html(cards, f"Budget: {budget}. {passed} of {len(configs)} configurations meet it.")
        + (f"<p class='meta'>{esc(folded)}</p>" if folded else "")
        + "<p class='meta'>Percentiles are exact over the pooled packets of each configuration's repetitions.</p>"
    )


# Cards a comparison's page opens with; past them, the worst first, the rest counted (64
# flows were sixteen rows of cards before the table).
LEAD_CARDS = 12
_WORST_FIRST = {Status.FAIL.value: 0, Status.INVALID.value: 1, Status.INCONCLUSIVE.value: 2, Status.PASS.value: 3}


def _first_cards(cards: list[VerdictCard]) -> tuple[list[VerdictCard], str]:
    """The cards to show, in their order, and a line counting the others by status: those
    that fail first, then the not decided, the passing last."""
    if len(cards) <= LEAD_CARDS:
        return cards, ""
    ranked = sorted(range(len(cards)), key=lambda i: _WORST_FIRST.get(cards[i].status, 4))
    shown = sorted(ranked[:LEAD_CARDS])
    rest: dict[str, int] = {}
    for i in ranked[LEAD_CARDS:]:
        rest[cards[i].status] = rest.get(cards[i].status, 0) + 1
    counted = ", ".join(f"{n:,} {status}" for status, n in rest.items())
    return [cards[i] for i in shown], (
        f"The {LEAD_CARDS} of {len(cards):,} cards that fail or are not decided first; the other "
        f"{len(cards) - LEAD_CARDS:,} ({counted}) are in the table below."
    )


def _emulated(c: ConfigurationDocument) -> bool:
    """Whether a configuration's runs ran under an emulator (TCG)."""
    return any(str(v).lower() == "tcg" for v in (c.get("key") or {}).values())


def _figure_cell(c: ConfigurationDocument, key: str) -> Cell:
    """A pooled percentile, its range over repetitions under it, its interval on hover;
    greyed and marked where the data cannot bound it."""
    value = (c.get("latency_ns") or {}).get(key)
    spread = (c.get("spread") or {}).get(key) or {}
    interval = (c.get("intervals") or {}).get(key)
    text = f"<span class='v'>{esc(format_ns(value))}</span>"
    if c.get("repetitions", 1) > 1 and spread.get("min") is not None:
        # The range breaks after its dash only, never before its unit: the table fits 1400 px.
        shown = esc(format_ns_range(spread["min"], spread["max"])).replace("–", "–<wbr>").replace(" ", "&nbsp;")
        text += f"<small>{shown}</small>"
    title = ""
    resolvable = interval is None or interval.get("resolvable", True)
    if interval and interval.get("lower_ns") is not None and interval.get("upper_ns") is not None:
        title = f"confidence interval {format_ns(interval['lower_ns'])} … {format_ns(interval['upper_ns'])}"
    if not resolvable:
        text += "<small>not resolved</small>"
        needed = interval.get("packets_needed") if interval else None
        title = "these packets do not bound it" + (f" (that takes {format_count(needed)})" if needed else "")
    return Cell(text, "" if resolvable else "unresolved", html=True, title=title)


def table_section(page: Page, doc: ComparisonDocument) -> None:
    """NOMS 2020's Table II: per configuration its axes, repetitions, loss, pooled
    percentiles with their spread, the floor at the judged percentile, the worst
    repetition and the verdict; the verdicts' reasons; the differences."""
    configs = doc["configurations"]
    judged = _judged_key(doc)
    present = {k for c in configs for k in (c.get("latency_ns") or {})}
    keys = [k for k in percentiles.figure_keys() if k in present and k != percentiles.MIN]
    axes = doc.get("axes") or [{"name": n, "label": n} for n in doc.get("by") or []]
    header = [
        *(Cell(a["label"], "text") for a in axes),
        "reps",
        "sent",
        "lost",
        *(percentiles.label(k) for k in keys),
        f"floor {percentiles.label(judged)}",
        "worst rep.",
        Cell("verdict", "text"),
    ]
    rows = []
    for c in configs:
        v = c.get("verdict") or {}
        floor = c["floor"]["latency_ns"].get(judged) if c["floor"] else None
        key_text = c.get("key_text") or {}
        rows.append(
            [
                *(Cell(key_text.get(a["name"], c["key"].get(a["name"], "–")), "text") for a in axes),
                str(c["repetitions"]),
                format_count(c.get("sent")),
                format_count(c.get("lost"))
                + (f" ({format_percent(ratio, '.2g')})" if (ratio := c.get("loss_ratio")) else ""),
                *(_figure_cell(c, k) for k in keys),
                format_ns(floor) if floor is not None else "–",
                f"run {c['worst_repetition']}" if c.get("worst_repetition") is not None else "–",
                Cell(v.get("label", _status(c)), f"{_css(c)} text"),
            ]
        )
    reasons = "".join(
        f"<li><b>{esc(c['label'])}</b>: {esc((c.get('verdict') or {}).get('reason', ''))}</li>"
        for c in configs
        if (c.get("verdict") or {}).get("reason")
    )
    floors = sorted({c["floor"]["text"] for c in configs if c["floor"] is not None})
    page.add(
        "Configurations",
        "<p class='meta'>Pooled exact percentiles; under each, its lowest–highest over the repetitions; hover "
        "a figure for its confidence interval. A percentile the packets cannot bound is greyed and marked "
        "“not resolved”.</p>"
        f"<div class='wide'>{table_html(header, rows, 'lt-configs')}</div><ul>{reasons}</ul>"
        + (f"<p class='meta'>Floors: {esc('; '.join(floors))}.</p>" if floors else "")
        + _differences(doc),
    )


def _difference_text(d: Mapping[str, Any]) -> str:
    return str(d["text"])  # its note is said once, under the list (`shared_notes`)


_DIFFERENCES_SHOWN = 8
"""Differences a page lists before folding the rest."""
_PAIRS_LISTED = 40
"""Pairs not called a page lists under one reason (64 flows are 2,016 pairs a percentile)."""
_REASONS_LISTED = 20
"""Reasons for pairs not called a page lists (a reason may name its pair)."""


def _differences(doc: ComparisonDocument) -> str:
    """The differences beyond run-to-run variation, with the family they were judged in:
    first those between configurations that differ on one axis (each isolates an effect),
    largest first, the smaller ones and the rest folded with a count, a note the pairs share
    said once; then, folded, the pairs not called and why."""
    resolved = by_size(doc.get("differences") or [])
    isolated = [d for d in resolved if len(d.get("axes_differing") or [None]) <= 1]
    shown, smaller = isolated[:_DIFFERENCES_SHOWN], isolated[_DIFFERENCES_SHOWN:]
    several = [d for d in resolved if d not in isolated]
    unresolved = doc.get("not_resolvable") or []
    family = doc.get("difference_family") or {}
    how = (
        f"<p>Each percentile of each pair is judged on its repetitions (Student's t on the log of their "
        f"values); Holm's procedure over the {family['comparisons']} comparisons made holds the chance of "
        f"any false call at {100 * (1 - family['level']):g} %. Degraded runs, and emulated against "
        f"native ones, are shown, never called.</p>"
        if family.get("comparisons")
        else ""
    )
    if not resolved:
        body = "<p>No difference between configurations is beyond run-to-run variation.</p>"
    elif shown:
        body = "<p>Largest first:</p><ul>" + "".join(f"<li>{esc(_difference_text(d))}</li>" for d in shown) + "</ul>"
    else:
        body = "<p>Every difference is between configurations that differ on several axes at once.</p>"
    body += "".join(f"<p class='meta'>{esc(note)}</p>" for note in shared_notes(resolved))
    for summary, items in (
        (f"{len(smaller)} smaller differences", smaller),
        (f"Between configurations that differ on several axes ({len(several)})", several),
    ):
        if items:
            body += (
                f"<details><summary>{esc(summary)}</summary><ul>"
                + "".join(f"<li>{esc(_difference_text(d))}</li>" for d in items)
                + "</ul></details>"
            )
    if unresolved:
        # The percentiles a repetition's packets do not bound, one line per set of
        # configurations (as the terminal says them: their reasons name each pair, and 64
        # flows made 10,080 lines of them); then one line per other reason, its pairs after it.
        reasons = not_called_by_reason([d for d in unresolved if d["reason"] != UNBOUNDED])
        listed = [esc(line) for line in unjudged_lines(doc)] + [
            f"{esc(why)} ({len(pairs)}): {esc('; '.join(pairs[:_PAIRS_LISTED]))}"
            + (f"; … and {len(pairs) - _PAIRS_LISTED:,} more (--json)" if len(pairs) > _PAIRS_LISTED else "")
            for why, pairs in reasons[:_REASONS_LISTED]
        ]
        if len(reasons) > _REASONS_LISTED:
            listed.append(esc(f"… and {len(reasons) - _REASONS_LISTED:,} more reasons (--json)"))
        body += (
            f"<details><summary>{esc(f'Not called ({len(unresolved):,})')}</summary><ul class='lt-not-called'>"
            + "".join(f"<li>{item}</li>" for item in listed)
            + "</ul></details>"
        )
    return "<h3>Differences</h3>" + how + body


# Past this many configurations the overlays draw the worst of them and the best (a curve
# each for 64 flows was 3.4 MB of a page, and no one reads 64 curves).
PLOTTED_CONFIGURATIONS = 12


def _plotted(doc: ComparisonDocument) -> tuple[list[ConfigurationDocument], str]:
    """The configurations an overlay draws, and what its caption adds when not all of them:
    the worst at the judged percentile and the best, in the table's order."""
    configs = doc["configurations"]
    if len(configs) <= PLOTTED_CONFIGURATIONS:
        return list(configs), ""
    key = _judged_key(doc)
    ranked = sorted(configs, key=lambda c: -((c.get("latency_ns") or {}).get(key) or 0))
    chosen = {c["index"] for c in ranked[: PLOTTED_CONFIGURATIONS - 1] + ranked[-1:]}
    short = percentiles.by_key(key).short if key in percentiles.KEYS else key
    note = (
        f" Drawn: the {PLOTTED_CONFIGURATIONS - 1} of {len(configs):,} configurations with the highest {short}, "
        "and the lowest."
    )
    return [c for c in configs if c["index"] in chosen], note


def hdr_section(page: Page, doc: ComparisonDocument, drawn: Drawn) -> None:
    """One HDR curve per configuration over its repetitions' band, its floor dashed."""
    curves = []
    plotted, drawn_note = _plotted(doc)
    for c in plotted:
        stored = drawn.curves.get(c["index"]) or {}
        curves.append(
            plots.Curve(
                c["label"],
                stored.get("pooled") or [],
                band=stored.get("band") or (),
                floor=stored.get("floor") or (),
                floor_label=f"{c['label']}: floor",
            )
        )
    if not any(c.points for c in curves):
        page.add("Latency by percentile", "<p class='meta'>No percentile curves are stored with this comparison.</p>")
        return
    page.add(
        "Latency by percentile",
        figure_html(
            plots.hdr_percentile_plot(curves, "Latency by percentile, per configuration", _budget_ns(doc), 520),
            "HDR percentile plot of each configuration's pooled packets; the shaded band spans its repetitions' "
            "own curves, dashed curves are the testbed's floor. Click a legend entry to hide or show it." + drawn_note,
        ),
    )


def cdf_section(page: Page, doc: ComparisonDocument, drawn: Drawn) -> None:
    """The CDF overlay of NOMS 2020, Fig. 5 (steps of batches and bursts show in it)."""
    plotted, drawn_note = _plotted(doc)
    series = [(c["label"], [(v, f) for f, v in drawn.cdf[c["index"]]]) for c in plotted if drawn.cdf.get(c["index"])]
    if series:
        page.add(
            "Latency distribution (CDF)",
            figure_html(
                plots.cdf_plot(series, "Cumulative distribution of latency", _budget_ns(doc)),
                "The share of each configuration's packets at or under each latency: batches show as steep steps "
                "and flat runs (NOMS 2020, Fig. 5)." + drawn_note,
            ),
        )


# The configurations whose worst events a comparison's page draws (64 flows were 22 rows of
# panels): those with the largest worst event, said in the caption.
WORST_PANELS = 12


def worst_section(page: Page, doc: ComparisonDocument, drawn: Drawn) -> None:
    """The worst events of each configuration's worst repetition, side by side (of the
    `WORST_PANELS` configurations with the largest, when there are more)."""
    panels = []
    for c in doc["configurations"]:
        events = drawn.worst.get(c["index"]) or []
        rep = c.get("worst_repetition")
        chosen = [e for e in events if rep is not None and rep in (e.get("run_id"), e.get("analysis_id"))] or events
        if chosen:
            which = f" (run {rep})" if rep is not None else ""
            panels.append((c["label"] + which, [(e["t_ns"], e["latency_ns"]) for e in chosen], 0))
    if not panels:
        return
    caption = "The largest latencies of each configuration's worst repetition over its run, on one latency axis."
    if len(panels) > WORST_PANELS:
        worst_first = sorted(panels, key=lambda p: -max(v for _, v in p[1]))[:WORST_PANELS]
        panels = [p for p in panels if p in worst_first]  # in the table's order
        caption += f" The {WORST_PANELS} of {len(doc['configurations']):,} configurations with the largest worst event."
    page.add(
        "Worst events",
        figure_html(
            plots.worst_scatter_grid(panels, "Worst events over time, per configuration", _budget_ns(doc)), caption
        ),
    )


def rate_section(page: Page, doc: ComparisonDocument) -> None:
    """Latency against rate for every swept series, with knees and predicted R_max."""
    judged = _judged_key(doc)
    sweeps = []
    for s in _swept(doc):
        knees = s.get("knees") or []
        knee = next((k["knee_pps"] for k in knees if k.get("knee_pps") is not None), None)
        r_max = next((k["r_max_pps"] for k in knees if k.get("r_max_pps") is not None), None)
        sweeps.append(
            plots.Sweep(
                s["label"],
                [(p["rate_pps"], p.get("latency_ns") or {}, False) for p in s["points"]],
                knee,
                r_max,
                ("p50", judged),
            )
        )
    if not sweeps:
        return
    said = "; ".join(
        f"{s.label}: {_knee_text(s.knee_pps, bool(series.get('knees')))}"
        + (f", predicted R_max {format_rate(s.r_max_pps)}" if s.r_max_pps else "")
        + _knee_source(series)
        for s, series in zip(sweeps, _swept(doc))
    )
    page.add(
        "Latency versus rate",
        f"<p>{esc(said)}</p>"
        + figure_html(
            plots.latency_vs_rate_plot(sweeps, "Latency versus offered rate", _budget_ns(doc)),
            "The median and the judged percentile per offered rate (several series: one colour each, the "
            "percentiles told apart by dash and marker); vertical lines: each series' measured knee (first "
            "overloaded rate, solid) and predicted R_max (dashed), as `lowtail model knee` stored them.",
        ),
    )


def _knee_text(knee_pps: float | None, stored: bool) -> str:
    """ "knee 100 kpps"; "no overloaded rate swept" where the stored knee model found none
    (it read "knee not stored" then); "knee not stored" where there is no model."""
    if knee_pps:
        return f"knee {format_rate(knee_pps)}"
    return "no overloaded rate swept" if stored else "knee not stored"


def _knee_source(series: RateSeries) -> str:
    """Where a knee model read runs beyond this series (it sweeps every run of the DuT's
    name), so the reader knows it speaks for more than the runs compared here."""
    wider = [k for k in series.get("knees") or [] if k.get("other_runs")]
    return "".join(f" (read from all {k['dut']} runs of experiment {k['experiment_id']})" for k in wider)


def evt_section(page: Page, doc: ComparisonDocument) -> None:
    """Perf. Eval. 2024, Tables 4–5: per configuration the share of bounded tails among its runs' EVT
    models and the mean number of validation exceedances (1 expected)."""
    rows = doc.get("evt") or []
    if not rows:
        return
    body = [
        [
            Cell(r["label"], "text"),
            str(r.get("repetitions", "–")),
            str(r.get("models", "–")),
            "–" if r["bounded_share"] is None else f"{r['bounded']} ({format_percent(r['bounded_share'], '.3g')})",
            "–" if r.get("mean_exceedances") is None else f"{r['mean_exceedances']:.2f}",
            "–" if r.get("mean_xi") is None else f"{r['mean_xi']:.3f}",
            str(r.get("not_credible") or 0),
            Cell("; ".join(f"run {m['run_id']}: {m['why']}" for m in r.get("missing") or []) or "–", "text"),
        ]
        for r in rows
    ]
    page.add(
        "Tail models (EVT)",
        "<p class='meta'>Per configuration, the stored tail models of its runs: how many have a bounded tail "
        "(ξ < 0), the mean number of validation exceedances of the fitted return level (1 expected), the mean ξ, "
        "and how many fits are not credible.</p>"
        + table_html(
            [
                Cell("configuration", "text"),
                "repetitions",
                "models",
                "bounded tails",
                "mean exceedances",
                "mean ξ",
                "not credible",
                Cell("without a model", "text"),
            ],
            body,
        ),
    )


def interrupts_section(page: Page, store: Store, doc: ComparisonDocument) -> None:
    """The interrupt timeline of each configuration's worst repetition, where sampled: once
    per run, under every configuration it is the worst repetition of (a run's flows or hops
    are configurations of one run: 64 flows drew its timeline 64 times, 13 MB of a page)."""
    whose: dict[int, list[ConfigurationDocument]] = {}
    for c in doc["configurations"]:
        run_id = c.get("worst_repetition")
        if run_id is not None and run_id in c.get("runs", []):
            whose.setdefault(run_id, []).append(c)
    for run_id, configs in whose.items():
        labels = [c["label"] for c in configs]
        named = labels[0] if len(labels) == 1 else format_counted(len(labels), "configuration")
        for source, what in (("host", "interrupts"), ("guest", "guest interrupts")):
            if run_interrupts(store, run_id, source):
                interrupt_timeline_section(
                    page,
                    store,
                    run_id,
                    source=source,
                    budget_ns=(configs[0].get("verdict") or {}).get("budget_ns"),
                    heading=f"{named}: {what} (run {run_id})",
                )


def host_state_section(page: Page, doc: ComparisonDocument) -> None:
    """Where configurations' host-state fingerprints differ (the settings in force when their
    runs started: host/state.py), setting by setting."""
    found = doc.get("host_state_differences") or []
    if not found:
        return
    labels = [c["label"] for c in doc["configurations"]]
    rows = [
        [labels[d["a_index"]], labels[d["b_index"]], name, a or "–", b or "–"]
        for d in found
        for name, (a, b) in d["settings"].items()
    ]
    page.add(
        "Host state",
        "<p class='meta'>The host's tuning when the runs started differs between these configurations "
        "(<code>--by host_state</code> compares by it).</p>"
        + table_html(["configuration", "against", "setting", "value", "against"], rows, text=(1, 2, 3, 4)),
    )


def _banners(page: Page, doc: ComparisonDocument) -> None:
    configs = doc["configurations"]
    headline = cause_headline(doc)
    if headline:
        page.banner(headline, "warn")
    if doc.get("emulated_runs") or any(str(v).lower() == "tcg" for c in configs for v in (c.get("key") or {}).values()):
        page.banner(TCG_WARNING)
    if doc.get("partial"):
        page.banner("PARTIAL: " + "; ".join(doc.get("partial_reasons") or ["some runs could not be read"]))
    invalid = [c["label"] for c in configs if c.get("invalid_runs")]
    if invalid:
        page.banner(f"Runs left out as not to be trusted in: {', '.join(invalid)} (see the verdicts).", "warn")
    # Each reason once, with the configurations it holds for (a run's flows or hops are
    # configurations of the one run: its reason was said once per flow).
    by_reason: dict[str, list[str]] = {}
    for c in configs:
        for why in c.get("degraded") or []:
            by_reason.setdefault(why, []).append(c["label"])
    degraded = [
        f"{labels[0] if len(labels) == 1 else format_counted(len(labels), 'configuration')}: {why}"
        for why, labels in by_reason.items()
    ]
    if degraded:
        page.banner("Degraded runs (verdicts to be read with this in mind): " + " · ".join(degraded), "warn")
    if doc.get("verdict") is None:
        page.banner(
            "The runs were stored with different budgets: each configuration is judged against its own.", "warn"
        )


def _left_out(doc: ComparisonDocument) -> list[str]:
    """The runs the selection named but the comparison left out, one line per reason."""
    by_reason: dict[str, list[str]] = {}
    for r in doc.get("left_out") or []:
        by_reason.setdefault(r["why"], []).append(str(r["run_id"]))
    return [f"run{'s' if len(ids) > 1 else ''} {', '.join(ids)} left out: {why}" for why, ids in by_reason.items()]


def comparison_page(doc: ComparisonDocument, drawn: Drawn, store: Store | None = None) -> Page:
    """The page of a comparison document and what it draws; with the store it was read
    from, also the interrupts of each configuration's worst repetition."""
    configs = doc["configurations"]
    cid = doc.get("comparison_id")
    by = ", ".join(a["label"] for a in doc.get("axes") or []) or "nothing (one configuration)"
    page = Page(
        title=f"lowtail comparison{f' {cid}' if cid else ''}",
        subtitle=f"{format_counted(len(configs), 'configuration')} by {by} · "
        f"{format_counted(len({r for c in configs for r in c.get('runs', [])}), 'run')}"
        + (f" · selection: {' '.join(doc['selection'])}" if doc.get("selection") else ""),
    )
    _banners(page, doc)
    summary_section(page, doc)
    table_section(page, doc)
    hdr_section(page, doc, drawn)
    cdf_section(page, doc, drawn)
    worst_section(page, doc, drawn)
    rate_section(page, doc)
    evt_section(page, doc)
    if any(c["explained_runs"] for c in doc.get("causes") or []):
        page.add(
            "Causes of the tail",
            "<p class='meta'>From each run's stored explanation "
            "(<code>lowtail explain</code>); a cause's share is the tail packets it keeps over all the tail "
            "packets of the configuration's explained runs (with one run, that run's own share).</p>"
            + table_html(*causes_table(doc), text=(2,)),
        )
    if store is not None:
        interrupts_section(page, store, doc)
    host_state_section(page, doc)
    notes = [*(doc.get("notes") or []), *_left_out(doc)]
    if notes:
        page.add("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return page


def write_comparison_report(db: DbPath, comparison_id: int | str, path: str | Path) -> Path:
    """Write the page of stored comparison `comparison_id` (an id, or 'latest') of database
    `db` to `path`; returns the path written."""
    from lowtail.store import comparisons as comparestore  # the stored comparison (lowtail compare)

    with open_store(db, read_only=True) as store:
        row = comparestore.comparison(store, comparison_id)
        cid = row["comparison_id"]
        drawn = Drawn(
            comparestore.comparison_curves(store, cid),
            comparestore.comparison_cdf(store, cid),
            comparestore.comparison_worst(store, cid),
        )
        page = comparison_page(row["document"], drawn, store)
    if row.get("label"):
        page.title += f" — {row['label']}"
    return page.write(Path(path))
