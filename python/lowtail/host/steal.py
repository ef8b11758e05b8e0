"""Steal time: the CPU time the hypervisor under a virtual machine ran something else on
one of its vCPUs, per CPU, from /proc/stat (the 8th value of each `cpuN` line, in USER_HZ
ticks). No ftrace event records it: inside the guest the vCPU simply did not run. The
interrupt sampler (host/interrupts.py) reads it at its own sample times, so every run keeps
the steal of each ~100 ms interval beside its interrupt samples (source "steal" in
run_interrupts, the delta in ns), and explain/steal.py matches it with the unexplained tail.

The kernel keeps steal in ns but prints it in USER_HZ ticks (10 ms at the usual 100): a
sample sees steal in whole ticks, and a steal shorter than a tick shows in the interval in
which the CPU's total crossed a tick. A kernel without the column (before 2.6.11), or a
host no hypervisor steals from (bare metal: always 0), gives nothing to store.
"""

from __future__ import annotations

import os
from pathlib import Path

# How the samples are kept in run_interrupts (source, kind): beside the host's and the guest's.
STEAL_SOURCE = "steal"
STEAL_KIND = "steal"
# /proc/stat's `cpuN` values: user nice system idle iowait irq softirq steal guest guest_nice.
_STEAL_FIELD = 7


def user_hz() -> int:
    """The unit of /proc/stat's times, ticks per second (USER_HZ, 100 on every common kernel)."""
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


def parse_steal(text: str, hz: int) -> dict[int, int] | None:
    """Each CPU's total steal (ns) in a /proc/stat text; None when its lines have no steal column."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        label, _, rest = line.partition(" ")
        if not label.startswith("cpu") or not label[3:].isdigit():
            continue
        values = rest.split()
        if len(values) <= _STEAL_FIELD or not values[_STEAL_FIELD].isdigit():
            return None
        out[int(label[3:])] = int(values[_STEAL_FIELD]) * 1_000_000_000 // hz
    return out or None


def read_steal(proc_root: str | Path = "/proc", hz: int | None = None) -> dict[int, int] | None:
    """The live host's steal per CPU (ns); None where /proc/stat is missing or has no steal column."""
    try:
        text = (Path(proc_root) / "stat").read_text()
    except OSError:
        return None
    return parse_steal(text, hz if hz is not None else user_hz())


def steal_deltas(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    """The steal (ns) each CPU had between two reads, non-zero ones only (like the interrupt
    samples); a CPU whose total went back (taken offline and on again) gives none."""
    out = {}
    for cpu, total in sorted(after.items()):
        d = total - before.get(cpu, total)
        if d > 0:
            out[cpu] = d
    return out
