"""lowtail's own processes during a run: the command itself (every thread of it: the interrupt
sampler is one), every process it started (the testbed's programs, the keeper leashes, the
helpers it runs, a VM DuT's QEMU), each known by pid and start time and with its threads.

What runs on a DuT core and is one of these is the measurement, not "another task": explain
gives its time there to the measurement (`shared_core` for the generator's and timestamper's
programs, `lowtail_process` for the rest) and never names it as a preemptor of the DuT. A pid
is the run's own only with the start time it had then: a pid used again later by another
process is not.

The process tree is read from /proc twice — when the trace starts and before it stops — so a
helper that lived through either is known; one that started and ended between them left its
events under a pid this list does not hold (a helper of that kind runs milliseconds, at
set-up, before the traffic).
"""

from __future__ import annotations

import os
from pathlib import Path

from lowtail.trace.document import OwnProcessDoc


def _stat(pid: int, proc: Path) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks after boot) of a process, None when it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything: the fields follow the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _boot_ns(proc: Path) -> int | None:
    """When this machine booted (CLOCK_REALTIME ns), from /proc/stat's btime."""
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) * 1_000_000_000
    except (OSError, ValueError):
        pass
    return None


def own_processes(root: int | None = None, proc: Path = Path("/proc")) -> list[OwnProcessDoc]:
    """`root` (this process by default) and every process below it, as they are now."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    try:
        entries = [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []
    for pid in entries:
        found = _stat(pid, proc)
        if found is not None:
            parents[pid], starts[pid] = found
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    boot = _boot_ns(proc)
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: list[OwnProcessDoc] = []
    todo = [root] if root in parents else []
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        comm = _read(proc / str(pid) / "comm")
        if comm is None:
            continue  # ended while the tree was read
        out.append(
            OwnProcessDoc(
                pid=pid,
                started_ns=None if boot is None else boot + starts[pid] * 1_000_000_000 // hz,
                comm=comm,
                threads=_threads(pid, proc),
            )
        )
    return sorted(out, key=lambda p: p["pid"])


def merged(*lists: list[OwnProcessDoc]) -> list[OwnProcessDoc]:
    """Several readings of the tree as one: a process by (pid, start time), its threads united."""
    by_key: dict[tuple[int, int | None], OwnProcessDoc] = {}
    for docs in lists:
        for d in docs:
            key = (d["pid"], d["started_ns"])
            if key in by_key:
                by_key[key]["threads"] = sorted(set(by_key[key]["threads"]) | set(d["threads"]))
            else:
                by_key[key] = OwnProcessDoc(
                    pid=d["pid"], started_ns=d["started_ns"], comm=d["comm"], threads=list(d["threads"])
                )
    return sorted(by_key.values(), key=lambda p: (p["pid"], p["started_ns"] or 0))


def task_ids(docs: list[OwnProcessDoc]) -> set[int]:
    """Every pid and thread id of these processes (the trace's `pid` is a thread's id)."""
    return {d["pid"] for d in docs} | {t for d in docs for t in d["threads"]}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _threads(pid: int, proc: Path) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(proc / str(pid) / "task") if t.isdigit())
    except OSError:
        return []
