"""How an explanation is said, on the terminal and on a page alike: each cause kind in words, a
cause's core, a source's interrupt rates per CPU.
Light (no numpy, no plotting): `lowtail explain` answering from the store loads only this."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lowtail.core.units import format_hz

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
    "lowtail_process": "lowtail's own process took the DuT's core (measurement artefact)",
    "overload": "queueing from overload",
    "batching": "batching",
    "virtualization": "virtualization",
}


def rates_lines(sampled: Mapping[str, Any]) -> list[str]:
    """A source's interrupt rates per CPU in a line each ("CPU 2: LOC 250 Hz, IWI 83.3 Hz")."""
    per_cpu: dict[int, list[str]] = {}
    for r in sampled.get("rates") or []:
        per_cpu.setdefault(r["cpu"], []).append(f"{r['kind']} {format_hz(r['rate_hz'])}")
    return [f"CPU {cpu}: {', '.join(kinds)}" for cpu, kinds in sorted(per_cpu.items())]


def core_text(cause: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    """A cause's core as a table shows it: "3", or "3 on root@db1" when the run was traced
    on other hosts too (each host has its own CPU 3)."""
    if cause.get("cpu") is None:
        return ""
    hosts = (doc.get("trace") or {}).get("hosts") or []
    if cause.get("host") and any(not h.get("local", True) for h in hosts):
        return f"{cause['cpu']} on {cause['host']}"
    return str(cause["cpu"])
