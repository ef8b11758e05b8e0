"""The report of a stored experiment: a verdict per run against the URLLC budget, the
calibration floor beside every result, and per run its table, HDR percentile plot and
worst-event scatter. Built only from the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from lowtail.analyze.document import RANKED_BY, FlowsDocument, flow_spread, flows_worst_first, latency_of
from lowtail.analyze.page import flows_section
from lowtail.core import percentiles
from lowtail.core.units import format_count, format_counted, format_ns, format_percent, format_rate
from lowtail.core.virtualization import TCG_WARNING, any_emulated, marked
from lowtail.experiment import clocks
from lowtail.experiment.degraded import degraded_lines
from lowtail.experiment.document import ExperimentRow, RunRow
from lowtail.explain.section import explain_section, headline_banner
from lowtail.models.page import knee_section
from lowtail.report import plots, tables
from lowtail.report.cards import VerdictCard, cards_html
from lowtail.report.interrupts import interrupt_timeline_section
from lowtail.report.page import Cell, Page, breakable, esc, figure_html, table_html
from lowtail.store import DbPath, axes, open_store
from lowtail.store import runs as runstore
from lowtail.store.analyses import PAGE_ROWS, analysis_flows, percentile_curve, worst_events
from lowtail.store.chains import run_chain
from lowtail.store.db import Store, latency_figures_of
from lowtail.store.host import run_interrupts
from lowtail.store.records import show_value
from lowtail.testbed.document import (
    CaptureStatistics,
    DutCounters,
    GeneratorStatistics,
    StoredDutOptions,
    TestbedDocument,
    core_plan_words,
)
from lowtail.verdict import judge as verdicts
from lowtail.verdict.device import DeviceVerdict, Judged, device_verdicts
from lowtail.verdict.judge import Verdict, VerdictRequest, stored_verdict

# The latency figures of a run's facts, and the fewer of the summary table; both add the
# percentile the verdict judges (`_with_judged`).
_RUN_FIGURES = ("p50", "p99", "p99_9", "p99_99", "p99_999", "max")
_SUMMARY_FIGURES = ("p50", "p99", "max")


def _with_judged(keys: tuple[str, ...], verdict: Verdict) -> list[tuple[str, str]]:
    """(key, label) of these figures and the judged percentile, in rank order."""
    chosen = set(keys) | {verdict.key}
    return percentiles.labelled(*(k for k in percentiles.figure_keys() if k in chosen))


_VERDICT_CLASS = {
    verdicts.Status.FLOOR: "meta",
    verdicts.Status.INVALID: "fail",
    verdicts.Status.FAIL: "fail",
    verdicts.Status.INCONCLUSIVE: "warn",
    verdicts.Status.PASS: "pass",
}


def verdict_of(run: Mapping[str, Any], verdict: Verdict) -> tuple[str, str]:
    """(label, css class) of one run against the budget."""
    judgement = verdict.judge(run)
    return judgement.label, verdict_class(judgement)


def status_class(status: verdicts.Status | str, degraded: bool = False) -> str:
    """The css class of a verdict's status (a Status or its value, as a stored document
    has it): pass, fail, warn, meta; a degraded PASS is shown as a warning."""
    status = verdicts.Status(status)
    if status is verdicts.Status.PASS and degraded:
        return "warn"
    return _VERDICT_CLASS[status]


def verdict_class(judgement: verdicts.Judgement) -> str:
    """The css class of a judgement (see `status_class`)."""
    return status_class(judgement.status, bool(judgement.degraded))


def summary_section(
    page: Page,
    experiment: ExperimentRow,
    rows: Sequence[Mapping[str, Any]],
    floors: runstore.Floor,
    verdict: Verdict,
    floor_source: int | None = None,
) -> None:
    """The verdict of every run in one table, with the calibration floor beside each: the
    run's identity and verdict first (never scrolled out of sight), its figures after, and
    the reason of a verdict on a row of its own under the run's, whole and wrapped to the
    window (a column of its own was pushed out of sight behind the table's scroll bar)."""
    judged = percentiles.label(verdict.key)
    figures = [(k, lbl) for k, lbl in _with_judged(_SUMMARY_FIGURES, verdict) if k != verdict.key]
    shown = varying_axes(rows)
    header = (
        ["run", Cell("DuT", "text"), *(a.label for a in shown), "rate", Cell("verdict", "text"), judged]
        + [f"floor {judged}"]
        + [label for _, label in figures]
        + ["sent", "lost", Cell("other options", "text")]
    )
    body = []
    for r in rows:
        lat = (r.get("figures") or {}).get("latency_ns") or {}
        floor = floors.get((r["rate_pps"], r["frame_size"], r["burst"]))
        judgement = verdict.judge(r)
        body.append(
            [
                str(r["run_id"]),
                Cell(_dut_label(r), "text"),
                *(a.show(a.read(r)) if a.present(r) else "" for a in shown),
                format_rate(r["rate_pps"]),
                Cell(judgement.label, f"text verdict {verdict_class(judgement)}"),
                format_ns(lat.get(verdict.key)),
                "" if r["calibration"] else "–" if floor is None else format_ns(latency_figures_of(floor)[verdict.key]),
                *(format_ns(lat.get(k)) for k, _ in figures),
                format_count(r["sent"]),
                tables.run_loss(r),
                Cell(
                    breakable(_options_text(r["dut_config"], leave_out={a.option for a in shown})),
                    "text options",
                    html=True,
                ),
            ]
        )
        why = "" if judgement.status is verdicts.Status.FLOOR else judgement.explanation
        if why:
            body.append([Cell(f"<div>why: {esc(why)}</div>", "text why", html=True, span=len(header))])
    passed = sum(verdict.judge(r).status is verdicts.Status.PASS for r in rows)
    judged_runs = sum(not r["calibration"] for r in rows)
    page.add(
        "Verdict",
        f"<p>Budget: <b>{esc(verdict.describe())}</b>. {passed} of {judged_runs} runs pass. "
        f"A run fails when its packets already break the budget, however few they are (with fewer "
        f"than {verdict.packets_needed:,} packets the {esc(judged)} is their "
        f"maximum); it is inconclusive when none reached the bound but there are too few to show the "
        f"percentile under it. {esc(_floor_text(experiment['experiment_id'], floors, floor_source))}</p>"
        "<style>.lt-runs td { white-space: nowrap; } .lt-runs td.verdict { font-weight: 600; } "
        ".lt-runs tr:has(+ tr > td.why) > td { border-bottom: none; } "
        # The reason stays in the window however far the table scrolls, wrapped to its width.
        ".lt-runs td.why { white-space: normal; padding-top: 0; color: #444; } "
        ".lt-runs td.why > div { position: sticky; left: 0; max-width: calc(100vw - 5em); padding-left: 1.5em; } "
        ".lt-runs table { font-size: .88em; } "
        ".lt-runs td.options { white-space: normal; max-width: 14em; }</style>"
        f"<div class='lt-runs wide'>{table_html(header, body)}</div>" + _invalid_list(rows),
    )


def _banners(page: Page, rows: Sequence[Mapping[str, Any]], verdict: Verdict) -> None:
    """What a reader must know before any figure: an emulator's latencies, runs whose
    traffic was not what was asked for, runs that cannot be trusted or cannot decide."""
    if any_emulated(rows):
        page.banner(TCG_WARNING)
    if clocks.any_two_clocks(rows):
        page.banner(clocks.TWO_CLOCKS_WARNING, "warn")
    judgements = [(r, verdict.judge(r)) for r in rows]
    degraded = degraded_lines(rows)  # each run's own reason is in its row
    if degraded:
        page.banner("Degraded runs (verdicts to be read with this in mind): " + " · ".join(degraded), "warn")
    invalid = [str(r["run_id"]) for r, j in judgements if j.status is verdicts.Status.INVALID]
    if invalid:
        page.banner(f"Invalid runs, not to be trusted: {', '.join(invalid)} (reasons in the verdict table).")
    undecided = [str(r["run_id"]) for r, j in judgements if j.status is verdicts.Status.INCONCLUSIVE]
    if undecided:
        page.banner(
            f"Inconclusive runs: {', '.join(undecided)}: the data cannot decide the budget "
            f"(why, for each, in the verdict table).",
            "warn",
        )


def experiment_devices(rows: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[DeviceVerdict]:
    """The verdict of each device of an experiment (verdict/device.py), over its runs: each
    judged on its own, labelled by what tells it from the device's other runs (its options
    that vary, the rate, the repetition where there are several). The page's cards, `lowtail
    run`'s closing lines and its `--json` all read these."""
    measured = [r for r in rows if not r["calibration"]]
    devices: dict[str, list[Mapping[str, Any]]] = {}
    for r in measured:
        devices.setdefault(r["dut_name"], []).append(r)
    judged = []
    for name, runs in devices.items():
        own = (axes.DUT, axes.KIND, axes.RATE, axes.VIRTUALIZATION)
        shown = [a for a in axes.varying(runs, repetition=False) if a.name not in own]
        for r in sorted(runs, key=lambda r: (r["rate_pps"], r.get("repetition") or 0)):
            label = " · ".join(p for p in (axes.describe(r, shown), format_rate(r["rate_pps"])) if p)
            judged.append((name, r["dut_kind"], Judged(label, verdict.judge(r).as_dict())))
    return device_verdicts(judged)


def experiment_cards(rows: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[VerdictCard]:
    """One verdict card per device: the device's verdict (PASS only if every configuration
    of it passes, FAIL if any fails, else inconclusive with what is missing), the outcome of
    each of its configurations."""
    cards = []
    for device in experiment_devices(rows, verdict):
        runs = [r for r in rows if r["dut_name"] == device.device and not r["calibration"]]
        cards.append(
            VerdictCard(
                _dut_label(runs[0]),
                [p.judgement for p in device.parts],
                labels=[p.label for p in device.parts],
                emulated=any_emulated(runs),
                notes=[f"to decide: {m}" for m in device.missing()],
            )
        )
    return cards


def _dut_label(r: Mapping[str, Any]) -> str:
    label = r["dut_name"] if r["dut_name"] == r["dut_kind"] else f"{r['dut_name']} ({r['dut_kind']})"
    return clocks.marked(marked(label, r.get("virtualization")), r.get("testbed"))


def _floor_text(experiment_id: int, floors: runstore.Floor, source: int | None) -> str:
    """Where the floor column comes from, or why there is none."""
    if not floors:
        return (
            "No floor is shown: the experiment has no calibration (calibrate = false) and names none "
            "(`lowtail experiment report --calibration ID`, or calibration = ID in the file)."
        )
    whose = "the experiment's own calibration" if source == experiment_id else f"the calibration of experiment {source}"
    return (
        f"The floor is {whose}: the same traffic over a plain wire, so latencies near it are the "
        f"testbed's own, not the DuT's."
    )


def varying_axes(rows: Sequence[Mapping[str, Any]]) -> list[axes.Axis]:
    """The axes that vary among the runs, each shown as a column: all but the DuT's name and
    kind (its label), the rate (always a column) and virtualization (marked on the label)."""
    own = (axes.DUT, axes.KIND, axes.RATE, axes.VIRTUALIZATION)
    return [a for a in axes.varying(rows) if a.name not in own]


def _run_title(r: Mapping[str, Any], shown: list[axes.Axis]) -> str:
    """ "fwd (lowtail-fwd) @ 10 kpps, 64 B · burst 16": the run among the others."""
    others = axes.describe(r, [a for a in shown if a.name != "frame_size"])
    return f"{_dut_label(r)} @ {format_rate(r['rate_pps'])}, {r['frame_size']} B" + (f" · {others}" if others else "")


def _invalid_list(rows: Sequence[Mapping[str, Any]]) -> str:
    shown = varying_axes(rows)
    items = [
        f"<li>run {r['run_id']}, {esc(_run_title(r, shown))}: {esc('; '.join(r['invalid_reasons']))}</li>"
        for r in rows
        if r["invalid_reasons"]
    ]
    return f"<p class='fail'>Invalid runs (figures not to be trusted):</p><ul>{''.join(items)}</ul>" if items else ""


def _options_text(options: StoredDutOptions, leave_out: AbstractSet[str | None] = frozenset()) -> str:
    """A run's DuT options as set (durations as typed: `ready_timeout=3min`, a rules file by
    its name and hash), the defaults that say nothing left out."""
    shown = {k: v for k, v in options.items() if k not in leave_out and v not in (None, [], "bare")}
    return ", ".join(f"{k}={show_value(v)}" for k, v in shown.items()) or "–"


def host_section(page: Page, experiment: ExperimentRow) -> None:
    """The host the experiment ran on, as stored with it."""
    host = experiment["host"]
    plan = host.get("core_plan", {})
    cpuset = host.get("cgroup_cpuset")
    rows: list[list[object]]
    if host.get("imported_from"):
        rows = [["imported from", host["imported_from"]], *([k, v] for k, v in (host.get("axes") or {}).items())]
        rows += [["lowtail", host.get("lowtail_version")], ["command", " ".join(host.get("command", []))]]
        page.add("Captures and host", table_html(["", ""], rows + [["status", experiment["status"]]]))
        return
    rows = [
        ["kernel", f"{host.get('kernel')} ({host.get('kernel_version')})"],
        ["kernel command line", host.get("kernel_cmdline")],
        ["CPU", f"{host.get('cpu_model')} · {host.get('cpus_online')} online"],
        ["core plan", core_plan_words(plan)],
        [
            "cpuset cgroups",
            "none" if not cpuset else f"cgroup v{cpuset['version']} at {cpuset['root']}",
        ],
        ["lowtail", host.get("lowtail_version")],
        ["command", " ".join(host.get("command", []))],
        ["status", experiment["status"]],
    ]
    rows.insert(0, ["testbed", host.get("testbed", "namespaces")])
    for role, facts in (host.get("roles") or {}).items():
        rows.append(
            [
                f"{role} host",
                f"{facts.get('ssh')}: {facts.get('hostname')}, kernel {facts.get('kernel')}, {facts.get('cpu_model')} · "
                f"{facts.get('cpus_online')} online, boot id {facts.get('boot_id')}"
                + (f", PTP clocks {facts['ptp_clocks']}" if facts.get("ptp_clocks") else "")
                + (f", time daemons {' '.join(facts['time_daemons'])}" if facts.get("time_daemons") else ""),
            ]
        )
    title = (
        "Testbed and host" if not host.get("roles") else "Testbed and hosts (the controller first, then every role's)"
    )
    page.add(title, table_html(["", ""], rows, "facts"))


def run_section(
    page: Page,
    store: Store,
    r: RunRow,
    floor: RunRow | None,
    verdict: Verdict,
    shown: Sequence[axes.Axis] = (),
) -> None:
    """One run: its verdict and facts, its HDR percentile plot over the floor's, its worst
    events; its heading names its values on the `shown` axes (those that vary)."""
    title = _run_title(r, list(shown))
    lat = latency_of(r.get("figures"))
    judgement = verdict.judge(r)
    gen, cap = r["generator"] or GeneratorStatistics(), r["capture"] or CaptureStatistics()
    facts = [
        [
            "verdict",
            f"<span class='{verdict_class(judgement)}'>{esc(judgement.label)}</span>: {esc(judgement.explanation)}",
        ],
        [
            "sent / received / lost",
            f"{format_count(r['sent'])} / {format_count(r['received'])} / {tables.run_loss(r)}",
        ],
        [
            "latency " + " · ".join(lbl for _, lbl in _with_judged(_RUN_FIGURES, verdict)),
            " · ".join(format_ns(lat.get(k)) for k, _ in _with_judged(_RUN_FIGURES, verdict)),
        ],
        ["generator", esc(generator_summary(gen))],
        ["timestamper", esc(capture_summary(cap))],
        ["DuT options", esc(_options_text(r["dut_config"]))],
        ["containment", esc(_flat(r["containment"]))],
    ]
    facts += _testbed_facts(r.get("testbed"))
    if virtualization := r.get("virtualization"):
        facts.append(
            [
                "virtualization",
                esc(virtualization.upper())
                + (
                    " <span class='fail'>(QEMU's emulator: not a VM's latencies)</span>"
                    if r["virtualization"] == "tcg"
                    else ""
                ),
            ]
        )
    analysis_id = r.get("analysis_id")
    flows = analysis_flows(store, analysis_id) if analysis_id is not None else None
    if flows and len(flows["flows"]) > 1:
        facts.append(["flows", esc(flows_summary(flows))])
    if weights := (r.get("traffic") or {}).get("flow_weights"):
        facts.append(["flow weights", esc(weights_text(weights))])
    if r["dut_stats"]:
        facts.append(["DuT counters", esc(dut_summary(r["dut_stats"]))])
    if r["energy"]:
        e = r["energy"]
        facts.append(
            [
                "energy",
                esc(
                    f"{e['joules']:.3g} J, mean {e['mean_w']:.3g} W"
                    if e.get("available")
                    else f"not measured: {e.get('reason') or 'no energy counters'}"
                ),
            ]
        )
    if r["invalid_reasons"]:
        facts.append(["<span class='fail'>invalid</span>", esc("; ".join(r["invalid_reasons"]))])
    if r.get("degraded_reasons"):
        facts.append(["<span class='warn'>degraded</span>", esc("; ".join(r["degraded_reasons"]))])
    body = (
        "<table class='facts'><tbody>"
        + "".join(f"<tr><td>{k if k.startswith('<') else esc(k)}</td><td>{v}</td></tr>" for k, v in facts)
        + "</tbody></table>"
    )
    body += _chain_html(store, r)
    analysis_id = r["analysis_id"]
    curve = percentile_curve(store, analysis_id)
    budget = None if r["calibration"] else verdict.budget_ns
    if curve and analysis_id is not None:
        floor_curve, floor_label = [], ""
        caption = "HDR percentile plot (x: 1/(1−p), log scale)"
        if floor is not None and not r["calibration"]:
            floor_curve = percentile_curve(store, floor["analysis_id"])
            floor_label = f"wire (calibration run {floor['run_id']})"
            caption += f", with the same traffic over a plain wire (run {floor['run_id']}) dashed: the testbed's floor"
        body += figure_html(
            plots.hdr_percentile_plot(
                [plots.Curve(r["dut_name"], curve, floor=floor_curve, floor_label=floor_label)],
                title=f"{r['dut_name']} @ {format_rate(r['rate_pps'])}",
                budget_ns=budget,
            ),
            caption,
        )
        worst = [(t, v) for t, v, _ in worst_events(store, analysis_id, PAGE_ROWS)]
        figures = r.get("figures")
        start = (figures["start_ts_ns"] if figures else None) or 0
        body += figure_html(
            plots.worst_scatter(worst, f"{len(worst):,} worst latencies over time", start_ns=start, budget_ns=budget),
            "The worst events over the run: periodic patterns point at interrupts or timers",
        )
    page.add(f"Run {r['run_id']}: {title}", body)


def _chain_html(store: Store, r: Mapping[str, Any]) -> str:
    """A chain run's hops (the terminal's lines as a table), with how they add up and which
    hop explain names; nothing for a run of one DuT."""
    chain = run_chain(store, r["run_id"]) if r.get("run_id") is not None else None
    if chain is None:
        return ""
    header, cells = tables.chain_table(chain)
    warnings = "".join(f"<p class='warn'>{esc(w)}</p>" for w in chain["warnings"])
    return (
        f"<h3>Hop by hop</h3><p>The budget judges the whole chain (PRE → POST); each hop is the analysis of the "
        f"captures on either side of its DuT, and {esc(tables.chain_adds_up(chain))}. "
        f"<code>lowtail explain {int(r['run_id'])}</code> names the hop that made the tail.</p>"
        + table_html(header, cells)
        + warnings
    )


def matching_section(page: Page, rows: Sequence[Mapping[str, Any]]) -> None:
    """The IPS's work on the packets its rule matches (`[traffic] match_share`), the table the
    terminal shows: nothing when no run marked packets."""
    found = tables.matching_table(rows)
    if found is None:
        return
    header, cells = found
    page.add(
        "IPS: the packets its rule matches",
        f"<p>{esc(tables.MATCHING_TITLE)}. A share of the packets, chosen by packet id, carries the marker a rule "
        f'of the generated rule set matches; with <code>action = "drop"</code> the marked packets that did not '
        f"arrive are the filter working, and the verdict's <code>max_loss</code> counts only the loss beside them. "
        f"Suricata's own alert and block counters are checked against the marked packets.</p>"
        + table_html(header, cells),
    )


def _run_flows_section(page: Page, store: Store, r: RunRow) -> None:
    """A run of several flows: its worst flows as a table of their own (the run's facts give
    the spread in a line; the distributions are on the analysis's page, `lowtail report ID`)."""
    analysis_id = r.get("analysis_id")
    flows = analysis_flows(store, analysis_id) if analysis_id is not None else None
    if flows and len(flows["flows"]) > 1:
        flows_section(page, flows, heading=f"Run {r['run_id']}: flows", level=3, figures=False)


def flows_summary(flows: FlowsDocument) -> str:
    """A run's flows in a line: how many, the worst flow at the ranking percentile and its
    worst case, the spread across flows."""
    ranked = flows_worst_first(flows["flows"])
    worst, s = ranked[0], flow_spread(flows["flows"])
    shown = percentiles.by_key(RANKED_BY).short
    lat = worst["latency_ns"] or {}
    return (
        f"{len(ranked):,} by {flows['key']} · worst flow {worst['key']}: {shown} {format_ns(lat.get(RANKED_BY))}, "
        f"max {format_ns(lat.get('max'))}, lost {format_count(worst['lost'])} · {shown} across flows "
        f"{format_ns(s['least_ns'])} to {format_ns(s['greatest_ns'])}"
    )


def weights_text(weights: list[int]) -> str:
    """`[traffic] flow_weights` in a line: each flow's weight and share of the packets (the
    first eight flows, then how many more)."""
    total = sum(weights)
    shown = ", ".join(f"{w} ({format_percent(w / total)})" for w in weights[:8])
    more = f", … {len(weights) - 8:,} more" if len(weights) > 8 else ""
    return f"{shown}{more} of every {total:,} packets, flows in the order of their UDP source ports"


def _testbed_facts(testbed: TestbedDocument | None) -> list[list[str]]:
    """Where a run's roles were (on real wiring) and which clocks stamped its two sides."""
    if not testbed:
        return []
    facts = []
    if testbed.get("kind") in ("interfaces", "hosts"):
        points = [
            f"{role} {p['interface']} on {p['host']}"
            for role in ("generator", "pre", "post")
            if isinstance(p := testbed.get(role), dict)
        ]
        facts.append(["testbed", esc(f"{testbed['kind']}: " + ", ".join(points))])
    if testbed.get("axes"):
        facts.append(["axes", esc(", ".join(f"{k}={v}" for k, v in testbed["axes"].items()))])
    c = testbed.get("clocks")
    if c:
        css = "meta" if c.get("same") else "warn"
        facts.append(
            [
                "clocks",
                f"<span class='{css}'>{esc(('one clock: ' if c.get('same') else 'TWO clocks: ') + c.get('why', ''))}</span>",
            ]
        )
    return facts


def generator_summary(gen: GeneratorStatistics) -> str:
    """What a reader needs of the generator's statistics: did it send what was asked, how evenly."""
    if not gen:
        return "no statistics"
    parts = []
    if isinstance(gen.get("achieved_rate_pps"), (int, float)):
        parts.append(
            f"achieved {format_rate(gen['achieved_rate_pps'])}"
            + ("" if gen.get("kept_up", True) else " (did NOT keep up)")
        )
    if "sent" in gen:
        parts.append(f"{gen['sent']:,} frames sent")
    pacing = gen.get("pacing_error_ns")
    if pacing:
        parts.append(
            f"pacing error p50 {format_ns(pacing['p50'])} · p99 {format_ns(pacing['p99'])} · max {format_ns(pacing['max'])}"
        )
    if gen.get("send_errors"):
        parts.append(f"{gen['send_errors']:,} frames refused")
    if "cpu" in gen:
        parts.append(f"core {gen['cpu']}")
    return ", ".join(parts)


def dut_summary(stats: DutCounters) -> str:
    """The DuT's own counters: lowtail-fwd's and testpmd's headline ones, anything else as is."""
    if "forwarded" in stats:  # lowtail-fwd
        dropped = stats.get("dropped", 0)
        parts = [
            f"received {stats.get('received', 0):,}",
            f"forwarded {stats['forwarded']:,}",
            f"dropped {dropped:,}" if not isinstance(dropped, dict) else f"dropped {sum(dropped.values()):,}",
        ]
        if isinstance(stats.get("busy_fraction"), (int, float)):
            parts.append(f"busy {100 * stats['busy_fraction']:.1f} % of the time")
        if "cpu" in stats:
            parts.append(f"core {stats['cpu']}")
        return ", ".join(parts)
    if isinstance(stats.get("suricata"), dict):  # the Suricata IPS: its own counters first
        s = stats["suricata"]
        parts = [
            f"rules {stats.get('rules')} ({stats.get('action')}), {s.get('rules_loaded', 0):,} loaded",
            f"decoded {s.get('packets', 0):,}",
            f"kernel drops {s.get('kernel_drops', 0):,}",
            f"alerts {s.get('alerts', 0):,}",
            f"blocked {s.get('blocked', 0):,}",
        ]
        events = s.get("decoder_events") or {}
        if events:
            parts.append(f"decoder events {sum(events.values()):,} ({', '.join(sorted(events))})")
        return ", ".join(parts)
    return _flat(stats)


def capture_summary(cap: CaptureStatistics) -> str:
    """Per interface: frames, kernel drops, timestamp source."""
    if not cap:
        return "no statistics"
    parts = [
        f"{i.get('iface')}: {i.get('frames', 0):,} frames, {i.get('drops', 0):,} drops, "
        f"{i.get('timestamp_source', '?')} timestamps"
        for i in cap.get("interfaces", [])
    ]
    if cap.get("host_backlog_drops"):
        parts.append(f"host backlog drops {cap['host_backlog_drops']:,}")
    return "; ".join(parts)


def _flat(d: Any, prefix: str = "") -> str:
    """A statistics object as 'key value · key value' (nested keys joined with a dot)."""
    if not isinstance(d, dict):
        return str(d)
    parts = []
    for k, v in d.items():
        if isinstance(v, dict):
            inner = _flat(v, f"{prefix}{k}.")
            if inner:
                parts.append(inner)
        elif isinstance(v, list):
            if len(v) <= 8 and not any(isinstance(x, dict) for x in v):  # not histograms
                parts.append(f"{prefix}{k} {v}")
        elif k.endswith("_ns") and isinstance(v, (int, float)):
            parts.append(f"{prefix}{k[:-3]} {format_ns(v)}")
        elif isinstance(v, float):
            parts.append(f"{prefix}{k} {v:,.6g}")
        else:
            parts.append(f"{prefix}{k} {v}")
    return " · ".join(p for p in parts if p)


def write_experiment_report(
    db: DbPath,
    experiment_id: int | str,
    output: str | Path | None,
    verdict: Verdict | None = None,
    request: VerdictRequest | None = None,
    calibration: int | None = None,
) -> Path:
    """The report of a stored experiment (an id, or 'latest'), judged by `verdict`, else by
    the experiment file's verdict with what `request` asks for over it; its floor is the
    calibration of experiment `calibration`, else the one it names, else its own."""
    with open_store(db, read_only=True) as store:
        experiment = runstore.experiment(store, experiment_id)
        eid = experiment["experiment_id"]
        rows = runstore.runs(store, eid)
        if calibration is not None:
            runstore.check_calibration(store, calibration)
        source = calibration if calibration is not None else runstore.calibration_source(store, eid)
        floors = runstore.calibration_floor(store, eid, source)
        verdict = verdict or stored_verdict(experiment["spec"], request)
        page = Page(
            title=f"lowtail experiment {eid} — {experiment['name']}",
            subtitle=f"{format_counted(len(rows), 'run')} · started {experiment['created_at']:%Y-%m-%d %H:%M} · {experiment['status']}",
        )
        page.lead(cards_html(experiment_cards(rows, verdict), f"Budget: {verdict.describe()}"))
        headline_banner(page, store, [r["run_id"] for r in rows if r["run_id"] is not None])
        _banners(page, rows, verdict)
        summary_section(page, experiment, rows, floors, verdict, source)
        matching_section(page, rows)
        knee_section(page, store, eid, budget_ns=verdict.budget_ns)
        host_section(page, experiment)
        shown = varying_axes(rows)
        for r in rows:
            run_section(page, store, r, floors.get((r["rate_pps"], r["frame_size"], r["burst"])), verdict, shown)
            run_budget = None if r["calibration"] else verdict.budget_ns
            rid = r["run_id"]
            assert rid is not None  # an experiment's runs are stored runs
            explain_section(page, store, rid)
            _run_flows_section(page, store, r)
            if run_interrupts(store, rid):
                interrupt_timeline_section(
                    page, store, rid, budget_ns=run_budget, heading=f"Run {rid}: interrupts", level=3
                )
            if run_interrupts(store, rid, source="guest"):
                interrupt_timeline_section(
                    page,
                    store,
                    rid,
                    source="guest",
                    budget_ns=run_budget,
                    heading=f"Run {r['run_id']}: guest interrupts",
                    level=3,
                )
    return page.write(Path(output or f"lowtail-experiment-{eid}.html"))
