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
from typing import Any, cast

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


@dataclass
class Coded:
    """A string column as codes into its distinct values (read once: comparing codes is what
    makes a trace of a million intervals quick to group)."""

    codes: np.ndarray
    values: list[str]

    @classmethod
    def of(cls, column: pa.ChunkedArray[Any]) -> Coded:
        if pa.types.is_dictionary(column.type):
            column = pc.cast(column, pa.string())  # chunks may hold dictionaries of their own
        encoded = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(column.combine_chunks()))
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return cls(codes, [str(v) if v is not None else "" for v in encoded.dictionary.to_pylist()])

    def code(self, value: str) -> int:
        """The code of a value, -2 when the column never holds it (-1 is a missing value's)."""
        try:
            return self.values.index(value)
        except ValueError:
            return -2

    def where(self, values: set[str] | list[str] | tuple[str, ...]) -> np.ndarray:
        """Which rows hold one of these values."""
        wanted = [i for i, v in enumerate(self.values) if v in set(values)]
        return np.isin(self.codes, wanted)

    def strings(self, rows: np.ndarray) -> np.ndarray:
        """The values of these rows."""
        values: np.ndarray = np.asarray(self.values + [""], dtype=object)[self.codes[rows]]
        return values


@dataclass
class TraceView:
    """A trace's intervals read once into arrays, its string columns as codes."""

    rows: int
    cpu: np.ndarray
    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    prio: np.ndarray
    kind: Coded
    name: Coded
    state: Coded
    detail: Coded
    host: Coded

    @classmethod
    def of(cls, intervals: pa.Table) -> TraceView:
        def ints(name: str) -> np.ndarray:
            # Array.to_numpy, not ChunkedArray's: that one loads pandas (most of a second).
            return np.asarray(intervals.column(name).combine_chunks().to_numpy(zero_copy_only=False), dtype=np.int64)

        return cls(
            rows=intervals.num_rows,
            cpu=ints("cpu"),
            start=ints("start_ns"),
            end=ints("end_ns"),
            pid=ints("pid"),
            prio=ints("prio"),
            kind=Coded.of(intervals.column("kind")),
            name=Coded.of(intervals.column("name")),
            state=Coded.of(intervals.column("state")),
            detail=Coded.of(intervals.column("detail")),
            host=Coded.of(intervals.column("host")),
        )

    def on_core(self, core: Core) -> np.ndarray:
        """Which rows are of this core."""
        on: np.ndarray = (self.cpu == core[1]) & (self.host.codes == self.host.code(core[0]))
        return on

    def of_kind(self, *kinds: str) -> np.ndarray:
        return self.kind.where(kinds)


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
    # Its tasks are lowtail's own (trace/own.py): the measurement's, not another task.
    own: bool = False
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


_POINT_KINDS = ("marker", "event", "wakeup", "fork")


def descendants(trace: TraceView, host: str, pids: set[int]) -> set[int]:
    """`pids` and every task the trace shows them starting on `host`, and those started by
    these, in time order (a fork is recorded on the CPU it happened on, so only what started on
    a traced CPU is followed)."""
    forks = np.flatnonzero(trace.of_kind("fork") & (trace.host.codes == trace.host.code(host)))
    out = set(pids)
    for row in forks[np.argsort(trace.start[forks], kind="stable")]:
        parent = trace.detail.values[trace.detail.codes[row]]
        if parent.isdigit() and int(parent) in out:
            out.add(int(trace.pid[row]))
    return out


def suspects(
    trace: TraceView, cores: set[Core], own_pids: dict[Core, set[int]], own_comms: dict[Core, set[str]]
) -> list[Suspect]:
    """The suspects on these cores: every task but the core's role's own and the idle
    task, every interrupt vector, IRQ, softirq and VM exit reason."""
    out: list[Suspect] = []
    if trace.rows == 0:
        return out
    intervals = ~trace.of_kind(*_POINT_KINDS)
    tasks = trace.of_kind("task")
    softirqs = trace.of_kind("softirq")
    idle = np.asarray([v.startswith(("ksoftirqd/", "swapper/")) for v in trace.name.values] + [False])
    for core in sorted(cores):
        host, cpu = core
        mine = trace.on_core(core) & intervals
        own_names = np.asarray([v in own_comms.get(core, set()) for v in trace.name.values] + [False])
        # A task of the role's own (by pid or command name), the idle task and the kernel's
        # softirq threads are no suspect; nor a softirq short enough to be the packets' own path.
        not_own = ~np.isin(trace.pid, list(own_pids.get(core, set()))) & (trace.pid != 0)
        keep_task = tasks & not_own & ~own_names[trace.name.codes] & ~idle[trace.name.codes]
        keep_softirq = softirqs & ((trace.end - trace.start) >= LONG_SOFTIRQ_NS)
        rows = np.flatnonzero(mine & (~tasks | keep_task) & (~softirqs | keep_softirq))
        if rows.size == 0:
            continue
        group = trace.kind.codes[rows] * (len(trace.name.values) + 1) + trace.name.codes[rows]
        order = np.lexsort((trace.start[rows], group))
        rows, group = rows[order], group[order]
        cuts = np.flatnonzero(np.diff(group)) + 1
        for chunk in np.split(rows, cuts):
            first = int(chunk[0])
            start, end = trace.start[chunk], trace.end[chunk]
            # Nested entries of one vector (rare) would count twice: keep each interval's part
            # after the previous one's end.
            start = np.maximum(start, np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]]))
            end = np.maximum(start, end)
            out.append(
                Suspect(
                    cpu,
                    trace.kind.values[trace.kind.codes[first]],
                    trace.name.values[trace.name.codes[first]],
                    start,
                    end,
                    trace.pid[chunk],
                    trace.prio[chunk],
                    [str(d) for d in trace.detail.strings(chunk)],
                    host,
                )
            )
    out.sort(key=lambda s: (s.core, s.kind, s.name))
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


def waiting(trace: TraceView, core: Core, pids: set[int], comms: set[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """When a role's own task waited for this core: from its wake-up (or from being
    preempted, still runnable) until it ran again. None when the role has no task here
    (a DuT inside the kernel): then any task on its core counts."""
    own = trace.on_core(core) & (np.isin(trace.pid, list(pids)) | trace.name.where(comms))
    runs = np.flatnonzero(own & trace.of_kind("task"))
    if runs.size == 0:
        return None
    wakeups = np.sort(trace.start[np.flatnonzero(own & trace.of_kind("wakeup"))])
    runs = runs[np.argsort(trace.start[runs], kind="stable")]
    began = trace.start[runs]
    previous_end = np.concatenate([[np.iinfo(np.int64).min], trace.end[runs][:-1]])
    preempted = np.concatenate([[False], trace.state.codes[runs][:-1] == trace.state.code("R")])
    # Else since its wake-up: the last one before it ran, when that came after its previous run.
    k = np.searchsorted(wakeups, began, side="right") - 1
    woken = np.where(k >= 0, wakeups[np.maximum(k, 0)] if wakeups.size else 0, np.iinfo(np.int64).min)
    woke_since = (k >= 0) & (woken >= previous_end)
    since = np.where(preempted, previous_end, np.where(woke_since, woken, began))
    waited = since < began
    return since[waited].astype(np.int64), began[waited].astype(np.int64)


def subset(s: Suspect, rows: np.ndarray) -> Suspect:
    """The suspect's intervals where `rows` (a mask) holds."""
    return Suspect(
        s.cpu,
        s.kind,
        s.name,
        s.start[rows],
        s.end[rows],
        s.pid[rows],
        s.prio[rows],
        [d for d, k in zip(s.detail, rows.tolist()) if k],
        s.host,
        s.own,
    )


def restricted(s: Suspect, starts: np.ndarray, ends: np.ndarray) -> Suspect:
    """The suspect's intervals cut to these (sorted, disjoint) windows: only the time it held
    the core while the role's task waited for it."""
    if s.start.size == 0 or starts.size == 0:
        idx = np.zeros(0, dtype=np.int64)
        return Suspect(s.cpu, s.kind, s.name, idx, idx, idx, idx, [], s.host, s.own)
    # Each interval meets the windows from the first that ends after it starts to the last
    # that starts before it ends: every such pair, cut to their common part.
    first = np.searchsorted(ends, s.start, side="right")
    past = np.searchsorted(starts, s.end, side="left")
    count = np.maximum(0, past - first)
    interval = np.repeat(np.arange(s.start.size), count)
    window = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
    lo = np.maximum(s.start[interval], starts[window])
    hi = np.minimum(s.end[interval], ends[window])
    keep = hi > lo
    idx = interval[keep]
    return Suspect(
        s.cpu,
        s.kind,
        s.name,
        lo[keep].astype(np.int64),
        hi[keep].astype(np.int64),
        s.pid[idx],
        s.prio[idx],
        [s.detail[i] for i in idx.tolist()],
        s.host,
        s.own,
    )
