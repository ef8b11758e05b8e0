"""How an explanation is said, on the terminal and on a page alike: each cause kind in words, a
cause's core, a source's interrupt rates per CPU, and text from stored data made printable.
Light (no numpy, no plotting): `lowtail explain` answering from the store loads only this."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    """Text from stored data (a task's name in a trace, a file's column) as it may be printed:
    control characters escaped as \\xNN (an escape, a newline), so a name cannot move the
    cursor or forge a line."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def rates_lines(sampled: Mapping[str, Any]) -> list[str]:
    """A source's interrupt rates per CPU in a line each ("CPU 2: LOC 250 Hz, IWI 83.3 Hz")."""
    per_cpu: dict[int, list[str]] = {}
    for r in sampled.get("rates") or []:
        per_cpu.setdefault(r["cpu"], []).append(f"{r['kind']} {r['rate_hz']:.4g} Hz")
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
