"""A run's stored explanation (`lowtail explain`, stored by the run's sweep or the command)
as a section of a page (the experiment's, and the explanation's own: report/explain_page.py):
the causes of its tail ranked, each with its evidence and remedy, the unexplained share; and
the headline, once per page, when the host could not measure what was asked. Read from the
store only (store/explain.py): nothing is worked out here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lowtail.report.page import Page, esc, table_html
from lowtail.store.db import Store
from lowtail.store.explain import explanation, headlines
from lowtail.units import format_ns, format_percent

# What each cause kind is called on a page (docs/explain.md describes them).
KIND_WORDS = {
    "preemption": "another task preempted the DuT",
    "interrupt": "an interrupt on the DuT's core",
    "softirq": "softirq work on the DuT's core",
    "aliasing": "a periodic interrupt beating with the traffic",
    "generator_stall": "the generator stalled (measurement artefact)",
    "timestamper_stall": "the timestamper stalled (measurement artefact)",
    "shared_core": "the testbed's own program took the DuT's core (measurement artefact)",
    "hypervisor": "the hypervisor took the CPU: steal time (measurement artefact)",
    "overload": "queueing from overload",
    "batching": "batching",
    "virtualization": "virtualization",
}
EVIDENCE_SHOWN = 3


def headline_banner(page: Page, store: Store, run_ids: Iterable[int]) -> None:
    """Said first, once: the host could not measure what was asked in these runs."""
    said = headlines(store, run_ids)
    if said:
        runs = ", ".join(str(r) for r in sorted(said))
        page.banner(f"{next(iter(said.values()))} (runs {runs})", "warn")


def explain_section(page: Page, store: Store, run_id: int, heading: str | None = None, level: int = 3) -> None:
    """The stored explanation of a run; where there is none, the command that makes it."""
    title = heading or f"Run {run_id}: causes of the tail"
    doc = explanation(store, run_id)
    if doc is None:
        page.add(
            title,
            f"<p class='meta'>Not explained yet: <code>lowtail explain {run_id}</code> works it out.</p>",
            level,
        )
        return
    tail = doc["tail"]
    head = (
        f"<p class='meta'>{tail['packets']:,} tail packets, {esc(tail['rule'])} "
        f"({esc(format_ns(tail['threshold_ns']))}); unexplained: {esc(format_percent(doc['unexplained_share']))} "
        f"of them. Trace: {esc(_trace_text(doc.get('trace') or {}))}.</p>"
    )
    causes = doc.get("causes") or []
    if not causes:
        body = "<p>No cause explains more of the tail than chance would.</p>"
    else:
        body = table_html(
            ["#", "cause", "role", "CPU", "share of tail", "added", "what ran", "remedy", "source"],
            [
                [
                    i,
                    KIND_WORDS.get(c["kind"], c["kind"]),
                    c["role"],
                    core_text(c, doc),
                    format_percent(c["share"]),
                    format_ns(c["added_ns"]),
                    str(c["evidence"].get("what", "")),
                    c["remedy"]["action"],
                    c["remedy"]["source"],
                ]
                for i, c in enumerate(causes, 1)
            ],
        )
        body += _evidence_table(causes)
    notes = "".join(f"<p class='meta'>{esc(n)}</p>" for n in doc.get("notes") or [])
    page.add(title, head + body + notes, level)


def _evidence_table(causes: list[Any]) -> str:
    """The first few tail packets of each cause beside what ran while they were in flight."""
    rows = []
    for i, c in enumerate(causes, 1):
        for e in (c["evidence"].get("events") or [])[:EVIDENCE_SHOWN]:
            event: Mapping[str, Any] = e.get("event") or {}
            rows.append(
                [
                    i,
                    e["packet_id"],
                    format_ns(e["latency_ns"]),
                    format_ns(e["delay_ns"]),
                    str(event.get("what", "")),
                    format_ns(event["duration_ns"]) if "duration_ns" in event else "",
                ]
            )
    if not rows:
        return ""
    return "<h4>Evidence</h4>" + table_html(["#", "packet", "latency", "delay explained", "what ran", "for"], rows)


def _trace_text(trace: Mapping[str, Any]) -> str:
    method = trace.get("method", "none")
    untraced = [u for u in trace.get("untraced") or [] if isinstance(u, dict)]
    missing = "".join(
        f"; not traced: the {u['role']}{' on ' + u['host'] if u['host'] else ''} ({u['reason']})" for u in untraced
    )
    if method == "tracefs":
        hosts = [h["host"] for h in trace.get("hosts") or []]
        where = f" of {', '.join(hosts)}" if any(not h.get("local", True) for h in trace.get("hosts") or []) else ""
        return f"kernel tracepoints on the roles' cores{where}{missing}"
    return f"none ({trace.get('reason') or 'the run was recorded without one'})"


def core_text(cause: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    """A cause's core as a table shows it: "3", or "3 on root@db1" when the run was traced
    on other hosts too (each host has its own CPU 3)."""
    if cause.get("cpu") is None:
        return ""
    hosts = (doc.get("trace") or {}).get("hosts") or []
    if cause.get("host") and any(not h.get("local", True) for h in hosts):
        return f"{cause['cpu']} on {cause['host']}"
    return str(cause["cpu"])
