"""The qualification record's page (`lowtail certify -o cert.html`): one page a customer
reads — per configuration a verdict card (every page's, `report/cards.py`) with its confidence, then the facts it
rests on (DuT and configuration, packets, judged percentile with its interval, floor, loss,
degraded or emulated runs), the host, and the data's identity. It renders the record as
`certify` made it and computes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lowtail import percentiles
from lowtail.documents import CertificateDocument, CertifiedConfiguration
from lowtail.report.cards import VerdictCard, cards_html
from lowtail.report.compare import PAGE_STYLE
from lowtail.report.page import Page, esc, table_html
from lowtail.units import format_count, format_ns, format_ns_range, format_percent, format_share
from lowtail.virtualization import TCG_WARNING

# The host facts a record names, in this order, where the experiment stored them.
_HOST_FACTS = (
    "hostname",
    "kernel",
    "kernel_version",
    "kernel_cmdline",
    "cpu_model",
    "cpus_online",
    "core_plan",
    "lowtail_version",
)


def certificate_page(doc: CertificateDocument) -> Page:
    """The page of a qualification record."""
    configs = doc["configurations"]
    page = Page(
        title="lowtail qualification record",
        subtitle=f"{len(configs)} configuration{'s' if len(configs) != 1 else ''} · selection: "
        f"{' '.join(doc['selection'])} · comparison {doc['comparison_id']} · made {doc['created_at']}",
    )
    passed = sum(c["verdict"]["status"] == "PASS" for c in configs)
    page.lead(PAGE_STYLE + cards_html([_card(c) for c in configs], f"{passed} of {len(configs)} configurations pass"))
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


def _card(c: CertifiedConfiguration) -> VerdictCard:
    """A configuration's card, as every page's (the budget in words names the confidence)."""
    v = c["verdict"]
    return VerdictCard(
        c["label"],
        [v],
        emulated=c["emulated"],
        notes=[v.get("budget") or "", *(f"degraded: {d}" for d in v["degraded"])],
        reason_always=True,
    )


def _facts(c: CertifiedConfiguration, level: float) -> str:
    name = percentiles.by_key(c["percentile"]).label if c["percentile"] in percentiles.KEYS else c["percentile"]
    iv = c["interval"]
    why = f" ({iv['why']})" if iv and iv.get("why") else ""
    interval = format_ns_range(iv["lower_ns"], iv["upper_ns"]) if iv and iv["resolvable"] else f"not bounded{why}"
    v = c["verdict"]
    sure = format_percent(v["confidence"], "g") if v["confidence"] is not None else "–"
    rows: list[Sequence[object]] = [
        ["DuT and configuration", ", ".join(f"{k} {val}" for k, val in c["configuration"].items()) or c["label"]],
        ["runs", f"{', '.join(map(str, c['runs'])) or '–'} ({c['repetitions']} repetition(s))"],
        ["packets", f"{format_count(c['packets'])} with a latency, {format_count(c['sent'])} sent"],
        ["loss", f"{format_count(c['lost'])} ({format_share(c['lost'], c['sent'])})"],
        ["judged percentile", f"{name}: {format_ns(c['value_ns'])}"],
        [f"its {format_percent(level, 'g')} interval (two-sided)", interval],
        [
            f"its one-sided bounds at {sure} (what the verdict judges)",
            format_ns_range(v.get("lower_ns"), v.get("upper_ns")),
        ],
        ["budget", v.get("budget") or format_ns(v["budget_ns"])],
        ["verdict", f"{v['label']}: {v['reason']}"],
        ["floor at that percentile", format_ns(c["floor_ns"]) if c["floor_ns"] is not None else "no calibration run"],
        ["degraded", "; ".join(c["degraded"]) or "no"],
        ["emulated (QEMU TCG)", "yes: not the device's latency" if c["emulated"] else "no"],
        ["left out as invalid", "; ".join(_invalid(r) for r in c["invalid_runs"]) or "none"],
    ]
    return table_html(["", ""], rows, "kv")


def _invalid(run: Mapping[str, Any]) -> str:
    return f"run {run.get('run_id')}: {'; '.join(run.get('reasons') or [])}"


def _hosts(configs: Sequence[CertifiedConfiguration]) -> str:
    seen: list[dict[str, Any]] = []
    for c in configs:
        for h in c["hosts"]:
            if h not in seen:
                seen.append(h)
    if not seen:
        return "<p>No host was recorded (plain analyses of captures).</p>"
    rows = [[fact, str(h.get(fact))] for h in seen for fact in _HOST_FACTS if h.get(fact) not in (None, "")]
    return table_html(["fact", "value"], rows, "kv")


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
        ["analysis", "side", "capture", "size", "frames", "analysed"], rows
    )
