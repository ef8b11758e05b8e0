"""What ran on each traced core, as intervals on the captures' clock, and the Parquet file
that keeps them beside the run's series.

An interval is one of:

    task      a task on the core from one sched_switch to the next (name = its comm; pid,
              priority, and the state it left in: "R" preempted, "S"/"D"… it slept)
    vector    an interrupt vector's handler (local_timer, irq_work, call_function — "TLB
              shootdown" in `detail` when it flushed for another core —, reschedule, …)
    irq       a device interrupt's handler (name "<irq>:<device>")
    softirq   a softirq (NET_RX, TIMER, RCU, …)
    vmexit    a VM's vCPU outside the guest (name: the exit reason's number)
    wakeup    a point: a task woken to run on this core (name, pid, priority)
    fork      a point: a task started another (name and pid: the new task's; detail: the
              pid of the task that started it)
    marker    a point: a trace_marker write (the clock markers among them)
    event     a point: any other event a recording asked for (name: the event, detail: its
              device name where it has one)

Times are CLOCK_REALTIME nanoseconds (the packets' clock): the trace's CLOCK_MONOTONIC
stamps shifted by the offset measured at the recording's start and end
(`ClockMapping`), interpolated between them.

A run traced on several hosts (a `hosts` testbed) keeps one file: each host's recording
built on its own clock markers (so onto its own CLOCK_REALTIME), the rows merged with a
`host` column — two hosts' CPU 1 are two cores — and each host's facts (`TraceInfo`, with
its marker uncertainty) in the file's `TraceFacts`.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lowtail.trace.document import ClockFacts, CoverageDoc, TraceSummary
from lowtail.trace.ringbuffer import EventFormat, page_events, page_stats, parse_format
from lowtail.trace.tracefs import SYNC_MARKER, SyncPoint, TraceRecording

SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
# CLOCK_REALTIME may be slewed by NTP by up to 500 ppm against CLOCK_MONOTONIC; a change of
# the offset beyond that (and the markers' uncertainty) is a step.
MAX_SLEW_PPM = 500
TLB_REMOTE_SHOOTDOWN = 1

_FIELDS: list[pa.Field[Any]] = [
    pa.field("cpu", pa.int16()),
    pa.field("start_ns", pa.int64()),
    pa.field("end_ns", pa.int64()),
    pa.field("kind", pa.string()),
    pa.field("name", pa.string()),
    pa.field("pid", pa.int32()),
    pa.field("prio", pa.int16()),
    pa.field("state", pa.string()),
    pa.field("detail", pa.string()),
]
# A file written before traces had several hosts lacks the host column: `read` adds it.
LEGACY_SCHEMA = pa.schema(_FIELDS)
HOST_TYPE = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema([*_FIELDS, pa.field("host", HOST_TYPE)])
_METADATA_KEY = b"lowtail.trace"
# A trace's intervals: what the largest ring buffers (256 MiB per CPU) of a run's traced
# cores hold, with room to spare (a larger file is no trace lowtail wrote).
MAX_INTERVALS = 100_000_000


@dataclass(frozen=True)
class ClockMapping:
    """monotonic → realtime: the offset at the start and end markers, in between interpolated."""

    mono_start_ns: int
    offset_start_ns: int
    mono_end_ns: int
    offset_end_ns: int
    uncertainty_ns: int

    def to_realtime(self, mono: np.ndarray) -> np.ndarray:
        span = max(1, self.mono_end_ns - self.mono_start_ns)
        drift = self.offset_end_ns - self.offset_start_ns
        realtime: np.ndarray = mono + self.offset_start_ns + ((mono - self.mono_start_ns) * drift) // span
        return realtime

    @property
    def change_ns(self) -> int:
        """How much the offset moved between the markers."""
        return self.offset_end_ns - self.offset_start_ns

    @property
    def stepped(self) -> bool:
        """Whether the offset moved more than slewing and the markers' uncertainty allow."""
        allowed = (self.mono_end_ns - self.mono_start_ns) * MAX_SLEW_PPM // 1_000_000 + 2 * self.uncertainty_ns
        return abs(self.change_ns) > allowed


@dataclass
class TraceInfo:
    """What is known of one host's recording (`local`: this host's, read with its own
    clock; else another host's, its markers bracketed by `date` there)."""

    host: str
    cpus: list[int]
    events: list[str]
    missing_events: list[str]
    buffer_kb: int
    raw_bytes: int
    duration_ns: int
    clock: ClockFacts
    coverage: list[CoverageDoc] = field(default_factory=list)
    local: bool = True

    @property
    def truncated_cpus(self) -> list[int]:
        return [c["cpu"] for c in self.coverage if c["dropped"] or c["pages_with_loss"]]

    def coverage_of(self, cpu: int) -> tuple[int | None, int | None]:
        for c in self.coverage:
            if c["cpu"] == cpu:
                return c["first_ns"], c["last_ns"]
        return None, None


@dataclass
class TraceFacts:
    """What the Parquet file's metadata says of its recordings: one per traced host."""

    hosts: list[TraceInfo]

    @property
    def raw_bytes(self) -> int:
        return sum(h.raw_bytes for h in self.hosts)

    @property
    def duration_ns(self) -> int:
        return max((h.duration_ns for h in self.hosts), default=0)

    @property
    def events(self) -> list[str]:
        return sorted({e for h in self.hosts for e in h.events})

    def coverage(self) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """Each traced core's (host, cpu) stretch of time: its first and last event."""
        return {(h.host, c["cpu"]): (c["first_ns"], c["last_ns"]) for h in self.hosts for c in h.coverage}

    def widening_ns(self) -> dict[str, int]:
        """How much a packet's window on each host's cores is widened: another host's clock
        is known within its markers' uncertainty (the `date` bracket there); this host's
        within microseconds, left as it is."""
        return {h.host: 0 if h.local else int(h.clock.get("uncertainty_ns", 0)) for h in self.hosts}

    def summary(self) -> TraceSummary:
        """What an explanation says of the trace's hosts: cores, truncation, clock mapping."""
        return {
            "cpus": sorted({c for h in self.hosts for c in h.cpus}),
            "truncated_cpus": sorted({c for h in self.hosts for c in h.truncated_cpus}),
            "clock": self.hosts[0].clock if len(self.hosts) == 1 else {},
            "hosts": [
                {
                    "host": h.host,
                    "local": h.local,
                    "cpus": h.cpus,
                    "truncated_cpus": h.truncated_cpus,
                    "clock": h.clock,
                }
                for h in self.hosts
            ],
        }


class _Builder:
    """Intervals of one CPU from its events, in time order."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.rows: list[tuple[int, int, int, str, str, int, int, str, str]] = []
        self.stack: list[list[Any]] = []  # open interrupt contexts: [kind, name, start, detail]
        self.task: tuple[str, int, int, int] | None = None  # comm, pid, prio, since
        self.first: int | None = None
        self.last: int | None = None

    def add(
        self,
        kind: str,
        name: str,
        start: int,
        end: int,
        pid: int = -1,
        prio: int = -1,
        state: str = "",
        detail: str = "",
    ) -> None:
        self.rows.append((self.cpu, start, end, kind, name, pid, prio, state, detail))

    def enter(self, kind: str, name: str, ts: int) -> None:
        self.stack.append([kind, name, ts, ""])

    def leave(self, kind: str, name: str, ts: int) -> None:
        stack = self.stack
        if stack:
            top = stack[-1]
            if top[0] == kind and top[1] == name:
                stack.pop()
                self.rows.append((self.cpu, top[2], ts, kind, name, -1, -1, "", top[3]))
                return
        for i in range(len(self.stack) - 1, -1, -1):
            k, n, start, detail = self.stack[i]
            if k == kind and n == name:
                del self.stack[i:]
                self.add(kind, name, start, ts, detail=detail)
                return
        # An exit whose entry came before the trace started: nothing to close.

    def mark_shootdown(self) -> None:
        for entry in reversed(self.stack):
            if entry[0] == "vector":
                entry[3] = "TLB shootdown"
                return

    def switch(self, ts: int, prev: tuple[str, int, int, int], nxt: tuple[str, int, int]) -> None:
        comm, pid, prio, state = prev
        # The previous task ran since the last switch on this core (when the trace lost
        # that switch, its `prev` is still the task that ran up to this one).
        since = self.task[3] if self.task is not None else self.first
        if since is not None and ts >= since:
            self.add("task", comm, since, ts, pid, prio, _state_letter(state))
        self.task = (nxt[0], nxt[1], nxt[2], ts)

    def finish(self) -> None:
        if self.task is not None and self.last is not None and self.last > self.task[3]:
            comm, pid, prio, since = self.task
            self.add("task", comm, since, self.last, pid, prio, "")


def _state_letter(state: int) -> str:
    """sched_switch's prev_state as `ps` writes it: R (preempted, still runnable), S, D, …"""
    if state & 0xFF == 0:
        return "R"
    for bit, letter in enumerate("SDTtXZPI"):
        if state & (1 << bit):
            return letter
    return "?"


def build(recording: TraceRecording, local: bool = True) -> tuple[pa.Table, TraceInfo]:
    """The recording's intervals (on the realtime clock, its host in every row) and what is known of it."""
    formats = [parse_format(key, text) for key, text in recording.formats.items()]
    builders = {}
    markers: dict[str, int] = {}
    coverage: list[CoverageDoc] = []
    for cpu in recording.cpus:
        buf = recording.raw.get(cpu, b"")
        b = _Builder(cpu)
        builders[cpu] = b
        handlers = {fmt.id: _handler(fmt, markers) for fmt in formats}
        events = 0
        for ts, off, length in page_events(buf, recording.page_size):
            events += 1
            if b.first is None:
                b.first = ts
            b.last = ts
            if length >= 8:
                handle = handlers.get(_EVENT_ID.unpack_from(buf, off)[0])
                if handle is not None:
                    handle(b, buf, off, ts)
        b.finish()
        stats = page_stats(buf, recording.page_size)
        coverage.append(
            CoverageDoc(
                cpu=cpu,
                first_ns=b.first,  # the trace's clock here; CLOCK_REALTIME once the clock is known
                last_ns=b.last,
                events=events,
                dropped=recording.dropped.get(cpu, 0),
                pages_with_loss=stats.pages_with_loss,
            )
        )
    clock = clock_mapping(recording.sync, markers)
    rows = [r for b in builders.values() for r in b.rows]
    rows.sort(key=lambda r: (r[1], r[0]))
    columns: list[tuple[Any, ...]] = list(zip(*rows)) if rows else [() for _ in SCHEMA]
    table = pa.table(
        {
            "cpu": pa.array(columns[0], pa.int16()),
            "start_ns": pa.array(clock.to_realtime(np.asarray(columns[1], dtype=np.int64)), pa.int64()),
            "end_ns": pa.array(clock.to_realtime(np.asarray(columns[2], dtype=np.int64)), pa.int64()),
            "kind": pa.array(columns[3], pa.string()),
            "name": pa.array(columns[4], pa.string()),
            "pid": pa.array(columns[5], pa.int32()),
            "prio": pa.array(columns[6], pa.int16()),
            "state": pa.array(columns[7], pa.string()),
            "detail": pa.array(columns[8], pa.string()),
            "host": host_column(recording.host, len(rows)),
        },
        schema=SCHEMA,
    )

    def realtime(ns: int | None) -> int | None:
        return None if ns is None else int(clock.to_realtime(np.asarray([ns], dtype=np.int64))[0])

    mapped: list[CoverageDoc] = [
        {**c, "first_ns": realtime(c["first_ns"]), "last_ns": realtime(c["last_ns"])} for c in coverage
    ]
    info = TraceInfo(
        host=recording.host,
        cpus=recording.cpus,
        events=recording.events,
        missing_events=recording.missing_events,
        buffer_kb=recording.buffer_kb,
        raw_bytes=recording.bytes,
        duration_ns=max(0, recording.stopped_ns - recording.started_ns),
        clock=asdict(clock) | {"stepped": clock.stepped, "change_ns": clock.change_ns},
        coverage=mapped,
        local=local,
    )
    return table, info


def merge(parts: list[tuple[pa.Table, TraceInfo]]) -> tuple[pa.Table, TraceFacts]:
    """Several hosts' recordings as one trace: their rows in time order, each with its host
    (one dictionary for the column), and each host's facts. Hosts must be distinct: two
    recordings of one host would mix its cores."""
    hosts = [info.host for _, info in parts]
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"two recordings of one host ({', '.join(hosts)})")
    tables = [_with_host(t, info.host) for t, info in parts]
    if not tables:
        return SCHEMA.empty_table(), TraceFacts([])
    table = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    order = pc.sort_indices(table, sort_keys=[("start_ns", "ascending"), ("cpu", "ascending")])
    return table.take(order), TraceFacts([info for _, info in parts])


def _with_host(table: pa.Table, host: str) -> pa.Table:
    """The table with its host column (a legacy file has none: all its rows are `host`'s),
    as a dictionary of that one label."""
    if "host" in table.column_names:
        table = table.drop_columns(["host"])
    return table.append_column(pa.field("host", HOST_TYPE), host_column(host, table.num_rows)).cast(SCHEMA)


def host_column(host: str, rows: int) -> pa.Array[Any]:
    """The host column of `rows` rows of one host: one dictionary entry, every index 0."""
    return pa.DictionaryArray.from_arrays(np.zeros(rows, dtype=np.int32), pa.array([host], pa.string()))


_EVENT_ID = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
Handler = Callable[[_Builder, bytes, int, int], None]


def _int_reader(fmt: EventFormat, name: str) -> Callable[[bytes, int], int]:
    """A fast reader of one integer field (4 or 8 bytes, or any size through int.from_bytes)."""
    f = fmt.fields[name]
    if f.size == 4:
        unpack = (_I32 if f.signed else _U32).unpack_from
        o = f.offset
        return lambda buf, off: unpack(buf, off + o)[0]
    return lambda buf, off: int(fmt.read(buf, off, name))


def _handler(fmt: EventFormat, markers: dict[str, int]) -> Handler | None:
    """What one event does to its CPU's intervals, with its fields' offsets resolved once."""
    system, name = fmt.system, fmt.name
    if system == "sched" and name == "sched_switch":
        prev_pid, prev_prio = _int_reader(fmt, "prev_pid"), _int_reader(fmt, "prev_prio")
        next_pid, next_prio = _int_reader(fmt, "next_pid"), _int_reader(fmt, "next_prio")

        def switch(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            prev = (
                str(fmt.read(buf, off, "prev_comm")),
                prev_pid(buf, off),
                prev_prio(buf, off),
                int(fmt.read(buf, off, "prev_state")),
            )
            b.switch(ts, prev, (str(fmt.read(buf, off, "next_comm")), next_pid(buf, off), next_prio(buf, off)))

        return switch
    if system == "sched" and name == "sched_wakeup":
        woken, woken_prio = _int_reader(fmt, "pid"), _int_reader(fmt, "prio")
        target = _int_reader(fmt, "target_cpu")

        def wakeup(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            b.rows.append(
                (
                    target(buf, off),
                    ts,
                    ts,
                    "wakeup",
                    str(fmt.read(buf, off, "comm")),
                    woken(buf, off),
                    woken_prio(buf, off),
                    "",
                    "",
                )
            )

        return wakeup
    if system == "sched" and name == "sched_process_fork":
        parent, child = _int_reader(fmt, "parent_pid"), _int_reader(fmt, "child_pid")

        def fork(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            comm = str(fmt.read(buf, off, "child_comm"))
            b.add("fork", comm, ts, ts, pid=child(buf, off), detail=str(parent(buf, off)))

        return fork
    if system == "irq_vectors" and name.endswith(("_entry", "_exit")):
        vector = name.rsplit("_", 1)[0]
        if name.endswith("_entry"):
            return lambda b, buf, off, ts: b.stack.append(["vector", vector, ts, ""])
        return lambda b, buf, off, ts: b.leave("vector", vector, ts)
    if system == "irq" and name == "irq_handler_entry":
        irq = _int_reader(fmt, "irq")
        return lambda b, buf, off, ts: b.stack.append(["irq", f"{irq(buf, off)}:{fmt.read(buf, off, 'name')}", ts, ""])
    if system == "irq" and name == "irq_handler_exit":
        irq = _int_reader(fmt, "irq")

        def irq_exit(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            prefix = f"{irq(buf, off)}:"
            for entry in reversed(b.stack):
                if entry[0] == "irq" and entry[1].startswith(prefix):
                    b.leave("irq", entry[1], ts)
                    return

        return irq_exit
    if system == "irq" and name in ("softirq_entry", "softirq_exit"):
        vec = _int_reader(fmt, "vec")

        def label(buf: bytes, off: int) -> str:
            v = vec(buf, off)
            return SOFTIRQ_NAMES[v] if v < len(SOFTIRQ_NAMES) else str(v)

        if name == "softirq_entry":
            return lambda b, buf, off, ts: b.stack.append(["softirq", label(buf, off), ts, ""])
        return lambda b, buf, off, ts: b.leave("softirq", label(buf, off), ts)
    if system == "tlb" and name == "tlb_flush":
        reason = _int_reader(fmt, "reason")

        def flush(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            if reason(buf, off) == TLB_REMOTE_SHOOTDOWN:
                b.mark_shootdown()

        return flush
    if system == "kvm" and name == "kvm_exit":
        exit_reason = _int_reader(fmt, "exit_reason")
        return lambda b, buf, off, ts: b.stack.append(["vmexit", str(exit_reason(buf, off) & 0xFFFF), ts, ""])
    if system == "kvm" and name == "kvm_entry":

        def entry(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            for e in reversed(b.stack):
                if e[0] == "vmexit":
                    b.leave("vmexit", e[1], ts)
                    return

        return entry
    if system == "ftrace" and name == "print":

        def marker(b: _Builder, buf: bytes, off: int, ts: int) -> None:
            text = str(fmt.read(buf, off, "buf")).strip()
            if text.startswith(SYNC_MARKER):
                markers[text[len(SYNC_MARKER) :].strip()] = ts
            b.add("marker", text[:200], ts, ts, pid=int(fmt.read(buf, off, "common_pid")))

        return marker
    if system in ("irq_vectors", "irq", "sched", "tlb", "kvm"):
        return None  # the rest of an enabled system: not used

    def point(b: _Builder, buf: bytes, off: int, ts: int) -> None:
        detail = str(fmt.read(buf, off, "name")) if "name" in fmt.fields else ""
        b.add("event", name, ts, ts, pid=int(fmt.read(buf, off, "common_pid")), detail=detail)

    return point


def clock_mapping(sync: list[SyncPoint], markers: dict[str, int]) -> ClockMapping:
    """The mapping from the start and stop markers found in the trace. A marker the trace
    lacks (its CPU's buffer filled up before the stop) leaves the start's offset alone."""
    points = [(markers[s.label], s) for s in sync if s.label in markers]
    if not points:
        raise ValueError("the trace holds none of its clock markers")
    (m0, s0), (m1, s1) = points[0], points[-1]
    return ClockMapping(
        mono_start_ns=m0,
        offset_start_ns=s0.realtime_ns - m0,
        mono_end_ns=m1,
        offset_end_ns=s1.realtime_ns - m1,
        uncertainty_ns=max(s0.uncertainty_ns, s1.uncertainty_ns),
    )


def write(table: pa.Table, info: TraceInfo | TraceFacts, path: Path) -> None:
    """The intervals as zstd-compressed Parquet, what is known of the recordings in its metadata
    (one host's recording is a trace of that host alone)."""
    if isinstance(info, TraceInfo):
        table, info = merge([(table, info)])
    meta = {_METADATA_KEY: json.dumps(asdict(info)).encode()}
    partial = path.with_name(f".{path.name}.partial")
    pq.write_table(table.replace_schema_metadata(meta), partial, compression="zstd")
    partial.replace(path)


def check(path: Path, max_intervals: int) -> None:
    """Refuse (ValueError, the rule in words) a file that is not a trace `write` could have
    written: other columns or types than SCHEMA's, more than `max_intervals` intervals, or
    recording facts of other types than TraceInfo's (a bundle's trace is untrusted input, and
    `read` trusts its file)."""
    import msgspec

    try:
        metadata = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError, ValueError) as e:
        first = str(e).strip().splitlines()
        raise ValueError(f"is not a Parquet file ({first[0][:200] if first else type(e).__name__})") from None
    if not any(_schema(path).equals(s) for s in (SCHEMA, LEGACY_SCHEMA)):
        raise ValueError(f"has other columns than a trace's ({', '.join(SCHEMA.names)})")
    if metadata.num_rows > max_intervals:
        raise ValueError(f"holds {metadata.num_rows:,} intervals, more than a trace may ({max_intervals:,})")
    raw = (metadata.metadata or {}).get(_METADATA_KEY)
    if raw is None:
        raise ValueError("has no recording facts in its metadata")
    try:
        _facts(msgspec.json.decode(raw))  # each host's coverage validated as a CoverageDoc
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise ValueError(f"its recording facts are not a trace's ({e})") from None


def _schema(path: Path) -> pa.Schema:
    """The file's columns as written (the dictionary type of `host` kept)."""
    return pq.ParquetFile(path).schema_arrow.remove_metadata()


def _facts(meta: Any) -> TraceFacts:
    """The recording facts of a file's metadata: a file of one host's recording written
    before traces had several hosts holds that recording's facts alone."""
    import msgspec

    if isinstance(meta, dict) and "hosts" in meta:
        return msgspec.convert(meta, TraceFacts)
    return TraceFacts([msgspec.convert(meta, TraceInfo)])


class NotRegularFile(ValueError):
    """A trace path that names a directory, a FIFO, a device (or a link to one): never opened."""


def read_checked(path: Path) -> tuple[pa.Table, TraceFacts]:
    """`read`, for a file that may be damaged or replaced: NotRegularFile when the path is not a
    regular file (nothing is opened: a FIFO would block, /dev/zero never end), ValueError (the
    rule in words) when it is no trace `write` could have written or cannot be read whole."""
    from lowtail.core.files import special_kind

    kind = special_kind(path)
    if kind is not None:
        raise NotRegularFile(f"is {kind}, not a regular file")
    check(path, MAX_INTERVALS)
    try:
        return read(path)
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()
        raise ValueError(f"cannot be read whole ({first[0][:200] if first else type(e).__name__})") from None


def read(path: Path) -> tuple[pa.Table, TraceFacts]:
    """A trace file's intervals (each with its host) and the facts of its recordings."""
    table = pq.ParquetFile(path).read()
    facts = _facts(json.loads((table.schema.metadata or {})[_METADATA_KEY]))
    table = table.replace_schema_metadata(None)
    if "host" not in table.column_names:
        table = _with_host(table, facts.hosts[0].host if facts.hosts else "")
    return table, facts
