"""What ran on each role's core while each tail packet was in flight, from a run's trace
intervals (trace/timeline.py): the intervals grouped into suspects — a task by its
command name, an interrupt vector, an IRQ, a softirq, a VM exit reason — and for each
suspect the time it took the core inside each packet's window.

Whether a suspect took the core more often around the tail than it does anyway is judged
against the same windows moved to other times of the run (`SHIFTS` circular shifts by a
seeded random amount): a tick that fires every 4 ms overlaps long windows by chance,
and the shifted windows say how often.

A core is a (host, cpu) pair: a run traced on several hosts has a CPU 1 on each, and
they are never mixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SHIFTS = 32
# A softirq is a suspect only when it ran this long: the packets' own path is softirq work
# of a microsecond or two per packet (on veth, NET_RX in the sender's context), and
# counting it would name the traffic as its own cause.
LONG_SOFTIRQ_NS = 20_000

Core = tuple[str, int]  # (host, cpu)


def columns(intervals: pa.Table, names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The trace's columns as arrays (the host column's labels as strings)."""
    out = {}
    for n in names or tuple(intervals.column_names):
        column = intervals.column(n)
        if pa.types.is_dictionary(column.type):
            column = pc.cast(column, pa.string())
        out[n] = column.to_numpy(zero_copy_only=False)
    return out


def on_core(cols: dict[str, np.ndarray], core: Core) -> np.ndarray:
    """Which rows are of this core."""
    on: np.ndarray = (cols["cpu"] == core[1]) & (cols["host"] == core[0])
    return on


@dataclass
class Suspect:
    """Intervals of one thing on one core, in time order, none overlapping."""

    cpu: int
    kind: str  # task | vector | irq | softirq | vmexit
    name: str
    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    prio: np.ndarray
    detail: list[str] = field(default_factory=list)
    host: str = ""
    cumulative: np.ndarray = field(init=False)

    @property
    def core(self) -> Core:
        return (self.host, self.cpu)

    def __post_init__(self) -> None:
        self.cumulative = np.concatenate([[0], np.cumsum(self.end - self.start)])

    def _busy_before(self, t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.start, t, side="right")
        total = self.cumulative[k]
        last = np.maximum(k - 1, 0)
        after = np.where(k > 0, np.maximum(0, self.end[last] - np.maximum(t, self.start[last])), 0)
        return total - after

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Time this suspect held the core inside each window [a, b)."""
        if self.start.size == 0:
            return np.zeros(a.shape, dtype=np.int64)
        busy: np.ndarray = self._busy_before(b) - self._busy_before(a)
        return busy

    def largest_in(self, a: int, b: int) -> int | None:
        """The index of the interval that took most of the window [a, b)."""
        lo = max(0, int(np.searchsorted(self.end, a, side="right")))
        hi = int(np.searchsorted(self.start, b, side="left"))
        if hi <= lo:
            return None
        took = np.minimum(self.end[lo:hi], b) - np.maximum(self.start[lo:hi], a)
        return lo + int(np.argmax(took))

    def periodic(self) -> float | None:
        """The period (ns) of a suspect that recurs at a steady rate (80 % of its gaps
        within 5 % of the median gap), else None."""
        if self.start.size < 8:
            return None
        gaps = np.diff(self.start)
        median = float(np.median(gaps))
        if median <= 0:
            return None
        steady = np.mean(np.abs(gaps - median) <= 0.05 * median)
        return median if steady >= 0.8 else None


def suspects(
    intervals: pa.Table, cores: set[Core], own_pids: dict[Core, set[int]], own_comms: dict[Core, set[str]]
) -> list[Suspect]:
    """The suspects on these cores: every task but the core's role's own and the idle
    task, every interrupt vector, IRQ, softirq and VM exit reason."""
    out: list[Suspect] = []
    if intervals.num_rows == 0:
        return out
    cols = columns(intervals)
    keys = np.char.add(np.char.add(cols["kind"].astype(str), "\x1f"), cols["name"].astype(str))
    for core in sorted(cores):
        host, cpu = core
        on_cpu = on_core(cols, core)
        if not on_cpu.any():
            continue
        for key in np.unique(keys[on_cpu]):
            kind, name = str(key).split("\x1f", 1)
            if kind in ("marker", "event", "wakeup"):
                continue
            rows = np.flatnonzero(on_cpu & (keys == key))
            if kind == "task":
                pids = cols["pid"][rows]
                keep = (pids != 0) & ~np.isin(pids, list(own_pids.get(core, set())))
                if name in own_comms.get(core, set()) or name.startswith(("ksoftirqd/", "swapper/")):
                    continue
                rows = rows[keep]
            if kind == "softirq":
                rows = rows[(cols["end_ns"][rows] - cols["start_ns"][rows]) >= LONG_SOFTIRQ_NS]
            if rows.size == 0:
                continue
            order = np.argsort(cols["start_ns"][rows], kind="stable")
            rows = rows[order]
            start, end = cols["start_ns"][rows].astype(np.int64), cols["end_ns"][rows].astype(np.int64)
            # Nested entries of one vector (rare) would count twice: keep each interval's part
            # after the previous one's end.
            start = np.maximum(start, np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]]))
            end = np.maximum(start, end)
            out.append(
                Suspect(
                    cpu,
                    kind,
                    name,
                    start,
                    end,
                    cols["pid"][rows].astype(np.int64),
                    cols["prio"][rows].astype(np.int64),
                    [str(d) for d in cols["detail"][rows]],
                    host,
                )
            )
    return out


def shifted_windows(
    a: np.ndarray, b: np.ndarray, span: tuple[int, int], seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The same windows moved by `SHIFTS` seeded random amounts, wrapped inside `span`."""
    lo, hi = span
    length = max(1, hi - lo)
    rng = np.random.default_rng(seed)
    out = []
    for delta in rng.integers(length // 10, length - length // 10 + 1, size=SHIFTS):
        start = lo + (a - lo + int(delta)) % length
        out.append((start, start + (b - a)))
    return out


def task_label(name: str, pid: int, prio: int) -> str:
    """ "lowtail-hog (pid 4121, SCHED_FIFO 60)": a task as the evidence names it (the
    kernel's priority: below 100 real-time, 99 − rt_priority; from 100 ordinary, 120 + nice)."""
    if prio < 0:
        return name
    policy = f"real-time priority {99 - prio}" if prio < 100 else f"nice {prio - 120}"
    return f"{name} (pid {pid}, {policy})"


def waiting(intervals: pa.Table, core: Core, pids: set[int], comms: set[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """When a role's own task waited for this core: from its wake-up (or from being
    preempted, still runnable) until it ran again. None when the role has no task here
    (a DuT inside the kernel): then any task on its core counts."""
    cols = columns(intervals, ("cpu", "host", "start_ns", "end_ns", "kind", "name", "pid", "state"))
    own = on_core(cols, core) & (np.isin(cols["pid"], list(pids)) | np.isin(cols["name"], list(comms)))
    runs = np.flatnonzero(own & (cols["kind"] == "task"))
    if runs.size == 0:
        return None
    wakeups = np.sort(cols["start_ns"][np.flatnonzero(own & (cols["kind"] == "wakeup"))])
    runs = runs[np.argsort(cols["start_ns"][runs], kind="stable")]
    starts: list[int] = []
    ends: list[int] = []
    previous_end: int | None = None
    previous_state = ""
    since: int | None
    for r in runs:
        began = int(cols["start_ns"][r])
        if previous_end is not None and previous_state == "R":
            since = previous_end  # preempted: runnable all along
        else:
            k = np.searchsorted(wakeups, began, side="right") - 1
            since = int(wakeups[k]) if k >= 0 and (previous_end is None or wakeups[k] >= previous_end) else None
        if since is not None and since < began:
            starts.append(since)
            ends.append(began)
        previous_end, previous_state = int(cols["end_ns"][r]), str(cols["state"][r])
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def restricted(s: Suspect, starts: np.ndarray, ends: np.ndarray) -> Suspect:
    """The suspect's intervals cut to these (sorted, disjoint) windows: only the time it held
    the core while the role's task waited for it."""
    out_s, out_e, keep = [], [], []
    j = 0
    for i in range(s.start.size):
        a, b = int(s.start[i]), int(s.end[i])
        while j < starts.size and ends[j] <= a:
            j += 1
        k = j
        while k < starts.size and starts[k] < b:
            lo, hi = max(a, int(starts[k])), min(b, int(ends[k]))
            if hi > lo:
                out_s.append(lo)
                out_e.append(hi)
                keep.append(i)
            k += 1
    idx = np.asarray(keep, dtype=np.int64)
    return Suspect(
        s.cpu,
        s.kind,
        s.name,
        np.asarray(out_s, dtype=np.int64),
        np.asarray(out_e, dtype=np.int64),
        s.pid[idx] if idx.size else np.zeros(0, dtype=np.int64),
        s.prio[idx] if idx.size else np.zeros(0, dtype=np.int64),
        [s.detail[i] for i in keep],
        s.host,
    )
