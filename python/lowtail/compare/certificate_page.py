"""The qualification record's page (`lowtail certify -o cert.html`): one page a customer
reads — per device a verdict card (every page's, `report/cards.py`: the device's verdict
over its configurations, with the budget and its confidence), then per configuration the
facts it rests on (the device by name and kind with every option it was configured with,
its containment, cores and kernel; the traffic; the runs; packets, judged percentile with
its interval and the one-sided bounds the verdict used, floor, loss, degraded or emulated
runs), the host, and the data's identity. It renders the record as `certify` made it and
computes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lowtail.compare.document import CertificateDocument, CertifiedConfiguration, CertifiedTraffic
from lowtail.compare.page import PAGE_STYLE
from lowtail.core import percentiles
from lowtail.core.units import (
    format_count,
    format_counted,
    format_ns,
    format_ns_range,
    format_percent,
    format_rate,
    format_share,
)
from lowtail.core.virtualization import TCG_WARNING
from lowtail.experiment.document import ExperimentHost
from lowtail.report.cards import VerdictCard, cards_html
from lowtail.report.page import Page, esc, table_html
from lowtail.testbed.document import core_plan_words
from lowtail.verdict.document import DeviceVerdictDocument

# The host facts a record names, in this order and these words, where the experiment stored them.
_HOST_FACTS = {
    "hostname": "host name",
    "kernel": "kernel",
    "kernel_version": "kernel build",
    "kernel_cmdline": "kernel command line",
    "cpu_model": "CPU model",
    "cpus_online": "CPUs online",
    "core_plan": "core plan",
    "lowtail_version": "lowtail version",
}


def certificate_page(doc: CertificateDocument) -> Page:
    """The page of a qualification record."""
    configs = doc["configurations"]
    devices = doc.get("devices") or []
    page = Page(
        title="lowtail qualification record",
        subtitle=f"{format_counted(len(devices), 'device')} in {format_counted(len(configs), 'configuration')} · "
        f"selection: {' '.join(doc['selection'])} ({doc.get('selected', '')}) · "
        + (f"comparison {doc['comparison_id']}" if doc["comparison_id"] is not None else "a comparison not stored"),
    )
    passed = sum(d["status"] == "PASS" for d in devices)
    budget = f"Budget: {doc['budget']} · " if doc.get("budget") else ""
    page.lead(
        PAGE_STYLE
        + cards_html(
            [_device_card(d, configs, one_budget=bool(budget)) for d in devices],
            f"{budget}{passed} of {len(devices)} devices pass",
        )
    )
    if any(c["emulated"] for c in configs):
        page.banner(TCG_WARNING, "warn")
    for why in doc["partial_reasons"]:
        page.banner(f"partial: {why}")
    for c in configs:
        page.add(c["label"], _facts(c, doc["level"]))
    page.add("Host", _hosts(configs))
    page.add("Data", _data(configs, doc["lowtail_version"]))
    if doc["notes"]:
        page.add("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in doc["notes"]) + "</ul>")
    return page


def write_certificate(doc: CertificateDocument, path: str | Path) -> Path:
    """Write the record's page to `path`; returns the path written."""
    return certificate_page(doc).write(Path(path))


def _device_card(
    device: DeviceVerdictDocument, configs: Sequence[CertifiedConfiguration], one_budget: bool
) -> VerdictCard:
    """A device's card: its verdict over its configurations (verdict/device.py), each
    configuration's outcome, what is missing, and the budget in words (its confidence) where
    the record has no one budget said above the cards."""
    own = [c for c in configs if c["device"]["name"] == device["device"]]
    labels = [d["label"] for d in device["configurations"]]
    budgets = [] if one_budget else list(dict.fromkeys(c["verdict"].get("budget") or "" for c in own))
    return VerdictCard(
        f"{device['device']} ({device['kind']})",
        [c["verdict"] for c in own],
        labels=labels if len(own) > 1 else (),
        emulated=any(c["emulated"] for c in own),
        notes=[*(f"to decide: {m}" for m in device["missing"]), *budgets],
        reason_always=len(own) == 1,
    )


def _facts(c: CertifiedConfiguration, level: float) -> str:
    name = percentiles.by_key(c["percentile"]).label if c["percentile"] in percentiles.KEYS else c["percentile"]
    iv = c["interval"]
    why = f" ({iv['why']})" if iv and iv.get("why") else ""
    interval = format_ns_range(iv["lower_ns"], iv["upper_ns"]) if iv and iv["resolvable"] else f"not bounded{why}"
    v = c["verdict"]
    device, traffic = c["device"], c["traffic"]
    run_ids = ", ".join(map(str, c["runs"]))
    runs = format_counted(traffic["runs"], "run") + (
        f" (run{'s' if len(c['runs']) > 1 else ''} {run_ids})" if run_ids else ""
    )
    rows: list[Sequence[object]] = [
        ["device", f"{device['name']} (kind {device['kind']})"],
        [
            "configured options",
            "; ".join(f"{k}: {val}" for k, val in device["options_shown"].items()) or "none recorded with its runs",
        ],
        ["containment", device["containment"]],
        ["cores", device["cores"]],
        ["kernel", device["kernel"] or "not recorded"],
        *([["guest kernel", device["guest_kernel"]]] if device["guest_kernel"] else []),
        ["traffic", _traffic_text(traffic)],
        ["runs", f"{runs}, {format_counted(c['repetitions'], 'repetition')}"],
        ["packets", f"{format_count(c['packets'])} with a latency, {format_count(c['sent'])} sent"],
        ["loss", _loss_text(c)],
        ["judged percentile", f"{name}: {format_ns(c['value_ns'])}"],
        [f"its {format_percent(level, 'g')} interval (two-sided)", interval],
        ["its one-sided bounds (what the verdict judged)", c["bounds"]["text"]],
        ["budget", v.get("budget") or format_ns(v["budget_ns"])],
        ["verdict", f"{v['label']}: {v['reason']}"],
        ["floor at that percentile", format_ns(c["floor_ns"]) if c["floor_ns"] is not None else "no calibration run"],
        ["degraded", "; ".join(c["degraded"]) or "no"],
        ["emulated (QEMU TCG)", "yes: not the device's latency" if c["emulated"] else "no"],
        ["left out as invalid", "; ".join(_invalid(r) for r in c["invalid_runs"]) or "none"],
    ]
    return table_html(["", ""], rows, "kv", text=(1,))


def _loss_text(c: CertifiedConfiguration) -> str:
    """The loss the verdict counts; an IPS's intended drops beside it, as what they are."""
    lost = c["lost"] - c["intended_drops"]
    text = f"{format_count(lost)} ({format_share(lost, c['sent'])})"
    if not c["intended_drops"]:
        return text
    meant = c["intended_drops"]
    return (
        f"{text} not meant; {format_count(meant)} ({format_share(meant, c['sent'])}) dropped by the rule set as meant"
    )


def _traffic_text(t: CertifiedTraffic) -> str:
    """ "20 kpps, 64 B frames on the wire, bursts of 1, 1 flow; 9.600 s measured per run after 1.000 s of
    warm-up": figures in the one unit formatter's words (a setting's exact form read "9600ms" beside "24s")."""
    parts = [
        format_rate(t["rate_pps"]) if t["rate_pps"] else "rate not given",
        f"{t['frame_size']} B frames on the wire" if t["frame_size"] else "frame size not recorded",
        f"bursts of {t['burst']}" if t["burst"] else "burst not recorded",
        format_counted(t["flows"], "flow") if t["flows"] else "flows not recorded",
    ]
    timing = (
        f"{format_ns(t['duration_ns'])} measured per run"
        + (f" after {format_ns(t['warmup_ns'])} of warm-up" if t["warmup_ns"] else "")
        if t["duration_ns"]
        else "measured time differs between its runs"
    )
    return ", ".join(parts) + f"; {timing}"


def _invalid(run: Mapping[str, Any]) -> str:
    return f"run {run.get('run_id')}: {'; '.join(run.get('reasons') or [])}"


def _hosts(configs: Sequence[CertifiedConfiguration]) -> str:
    seen: list[ExperimentHost] = []
    for c in configs:
        for h in c["hosts"]:
            if h not in seen:
                seen.append(h)
    if not seen:
        return "<p>No host was recorded (plain analyses of captures).</p>"
    rows = []
    for h in seen:
        facts: Mapping[str, Any] = h
        for fact, words in _HOST_FACTS.items():
            value = facts.get(fact)
            if value not in (None, ""):
                rows.append([words, core_plan_words(value) if fact == "core_plan" else str(value)])
    return table_html(["fact", "value"], rows, "kv", text=(1,))


def _data(configs: Sequence[CertifiedConfiguration], version: str) -> str:
    rows = [
        [
            str(d["analysis_id"]),
            side,
            str(d["captures"][side]["path"]),
            format_count(d["captures"][side]["bytes"]) + " B" if d["captures"][side]["bytes"] is not None else "–",
            format_count(d["captures"][side]["frames"]) if d["captures"][side]["frames"] is not None else "–",
            f"{d['analysed_at']} (lowtail {d['lowtail_version']})",
        ]
        for c in configs
        for d in c["data"]
        for side in ("pre", "post")
    ]
    return f"<p>Record made by lowtail {esc(version)}.</p>" + table_html(
        ["analysis", "side", "capture", "size", "frames", "analysed"], rows, text=(1, 2, 5)
    )
