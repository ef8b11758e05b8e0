"""Recording a run's cores with the kernel's own tracepoints, in an ftrace instance of its own.

Why an instance (`/sys/kernel/tracing/instances/lowtail-<tag>`) and never the global
buffer: other runs, other users' tools and tests trace on the same host at the same time,
each in its own buffer; an instance also names its owner (the testbed's tag), so a killed
run's instance is found and removed by `lowtail testbed clean` (its `rmdir` is in the
testbed's registry before the instance exists) and by the next run.

What the instance records, on the roles' CPUs only (`tracing_cpumask`): interrupt vectors
(local timer, IRQ work, function-call IPIs and so TLB shootdowns, rescheduling, ...), IRQ
handlers, softirqs, `sched_switch`, remote TLB shootdowns, and a VM's exits when the DuT is
one (`kvm_exit`/`kvm_entry`).

Clocks: the instance stamps events with `mono` (CLOCK_MONOTONIC); the captures are
stamped with CLOCK_REALTIME. At the start and the end a marker is written into the
instance's own `trace_marker` between two readings of CLOCK_REALTIME: the marker's
monotonic stamp and the middle of the two readings give the offset at that moment, with
half their distance as its uncertainty (microseconds here; a shell on another host reads
`date`, about a millisecond). Events are mapped by the offset interpolated between the
two (NTP slews the clock slowly); a difference beyond slewing is a step, reported.

Overhead: nothing reads the buffer while the traffic flows. Each CPU's ring buffer is
sized for the run (`buffer_size_kb`) and does not overwrite (`options/overwrite` 0): once
full, newer events are dropped and counted, the trace of that CPU ends there, and the
analysis says so (`TraceRecording.dropped`). The buffers are read after the run, as the
kernel's binary pages (`per_cpu/cpuN/trace_pipe_raw`), parsed by `ringbuffer.py`.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

TRACEFS = "/sys/kernel/tracing"
INSTANCE_PREFIX = "lowtail-"
SYNC_MARKER = "lowtail-sync"
# An instance's set-up (mkdir, then writes into its files) and its removal (rmdir) never run
# at once on a host: this kernel's tracefs faulted when an rmdir raced a set-up. Both hold
# this lock (util-linux `flock`), on every host, whoever runs them (a run, its undo, `clean`).
LOCK_FILE = "/run/lowtail-trace.lock"

# The tracepoints every recording enables (those the running kernel lacks are left out
# and listed in the recording). The irq_vectors system is enabled whole: every vector's
# entry and exit.
EVENT_SYSTEMS = ("irq_vectors",)
EVENTS = (
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "sched/sched_switch",
    "sched/sched_wakeup",
    # Who started which task: lowtail's own processes are followed to what they start (trace/own.py).
    "sched/sched_process_fork",
    "tlb/tlb_flush",
)
# A VM DuT's host side: the time its vCPUs spent outside the guest.
VM_EVENTS = ("kvm/kvm_exit", "kvm/kvm_entry")
# Only remote shootdowns (reason 1, TLB_REMOTE_SHOOTDOWN): the local flushes of every
# context switch would be most of the trace.
EVENT_FILTERS = {"tlb/tlb_flush": "reason == 1"}

# Event rate per CPU the buffer is sized for, beyond the packets' own events, and the
# bounds of its size: enough for a quiet second of ticks and switches, never more than a
# sixteenth of the memory available (and at most 256 MiB per CPU).
_BASE_EVENTS_PER_S = 20_000
_EVENTS_PER_PACKET = 8
_BYTES_PER_EVENT = 40
_MIN_BUFFER_KB = 2048
_MAX_BUFFER_KB = 256 * 1024


class TraceUnavailable(Exception):
    """tracefs cannot be used here (not mountable, no permission, events missing): the run
    goes on without a trace, and what explains it falls back to /proc sampling."""


class Shell(Protocol):
    """Where the recording runs: this host, or another one over the testbed's SSH connection."""

    label: str
    local: bool

    def run(self, script: str, what: str) -> str:
        """Run a shell script there; its standard output. `TraceUnavailable` on failure."""
        ...

    def fetch(self, path: str, local: Path) -> None:
        """Bring a file written there to `local`."""
        ...


# How long tracefs may take to answer a script. A healthy kernel answers in milliseconds (a
# large buffer in a second or two); a kernel whose tracing faulted holds every access in an
# unkillable wait. Past this, the run goes on without a trace, and the rest of this boot's
# runs are told at once instead of each waiting again (STUCK_MARKER, keyed by the boot id).
TRACEFS_TIMEOUT_S = 120
STUCK_MARKER = Path("/run/lowtail/tracefs-unresponsive")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def stuck_since() -> str | None:
    """When tracefs stopped answering in this boot (the marker's text), None when it has not."""
    try:
        boot, _, when = STUCK_MARKER.read_text().partition(" ")
    except OSError:
        return None
    return when.strip() if boot == _boot_id() and boot else None


def _mark_stuck() -> None:
    try:
        STUCK_MARKER.parent.mkdir(parents=True, exist_ok=True)
        STUCK_MARKER.write_text(f"{_boot_id()} {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    except OSError:
        pass  # not root, or no /run: each run waits its own timeout


class LocalShell:
    """This host."""

    local = True

    def __init__(self, label: str = "localhost") -> None:
        self.label = label

    def run(self, script: str, what: str) -> str:
        since = stuck_since()
        if since is not None:
            raise TraceUnavailable(
                f"{what}: the kernel's tracefs stopped answering at {since} and stays so until a reboot "
                f"(see `dmesg`; {STUCK_MARKER})"
            )
        try:
            done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=TRACEFS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _mark_stuck()
            raise TraceUnavailable(
                f"{what}: tracefs did not answer within {TRACEFS_TIMEOUT_S} s (a kernel fault in tracing? see `dmesg`)"
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise TraceUnavailable(f"{what}: {last}")
        return done.stdout

    def fetch(self, path: str, local: Path) -> None:
        if Path(path).resolve() != local.resolve():
            local.write_bytes(Path(path).read_bytes())


@dataclass(frozen=True)
class SyncPoint:
    """A marker written into the trace between two readings of CLOCK_REALTIME."""

    label: str
    realtime_before_ns: int
    realtime_after_ns: int

    @property
    def realtime_ns(self) -> int:
        return (self.realtime_before_ns + self.realtime_after_ns) // 2

    @property
    def uncertainty_ns(self) -> int:
        return (self.realtime_after_ns - self.realtime_before_ns + 1) // 2


@dataclass
class TraceRecording:
    """What a stopped recording holds: each CPU's raw ring-buffer pages, the formats of the
    events in them, the clock markers, and what was lost."""

    host: str
    instance: str
    cpus: list[int]
    events: list[str]
    missing_events: list[str]
    buffer_kb: int
    page_size: int
    raw: dict[int, bytes]
    formats: dict[str, str]
    sync: list[SyncPoint]
    # Per CPU: events dropped because the buffer was full (the trace ends early there),
    # and events overwritten (never, with overwrite off; kept as the kernel counts them).
    dropped: dict[int, int] = field(default_factory=dict)
    overrun: dict[int, int] = field(default_factory=dict)
    started_ns: int = 0
    stopped_ns: int = 0

    @property
    def bytes(self) -> int:
        return sum(len(b) for b in self.raw.values())


def buffer_kb_for(duration_s: float, packets_per_s: float) -> int:
    """The per-CPU buffer that holds a run of this length at this rate (see the bounds above)."""
    events = (_BASE_EVENTS_PER_S + _EVENTS_PER_PACKET * packets_per_s) * max(duration_s, 1.0)
    want = int(events * _BYTES_PER_EVENT * 1.5) // 1024
    try:
        available_kb = _mem_available_kb()
    except OSError:
        available_kb = 1 << 22
    cap = max(_MIN_BUFFER_KB, min(_MAX_BUFFER_KB, available_kb // 16))
    return max(_MIN_BUFFER_KB, min(want, cap))


def _mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise OSError("MemAvailable missing from /proc/meminfo")


def cpumask(cpus: list[int]) -> str:
    """`tracing_cpumask`'s hexadecimal mask (comma-separated 32-bit groups) of these CPUs."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    text = f"{mask:x}"
    groups: list[str] = []
    while text:
        groups.insert(0, text[-8:])
        text = text[:-8]
    return ",".join(groups) or "0"


def _write_marker(fd: int, text: str) -> None:
    """Write a marker into the trace. The kernel refuses it with EBADF ("as if not open for
    write") when the CPU's buffer is full — overwrite is off, so the trace of that CPU ended
    there — or its recording is off: the marker is then missing from the trace, which the clock
    mapping allows (timeline.clock_mapping maps from the markers it finds)."""
    try:
        os.write(fd, text.encode())
    except OSError as e:
        if e.errno != errno.EBADF:
            raise


class Recorder:
    """One run's ftrace instance on one host.

    rec = Recorder(LocalShell(), "lt123x0abc", cpus=[0, 1], buffer_kb=8192, register_undo=reg)
    rec.start(); ... traffic ...; recording = rec.stop(work_dir)
    """

    def __init__(
        self,
        shell: Shell,
        tag: str,
        cpus: list[int],
        buffer_kb: int,
        register_undo: Callable[[list[str]], None],
        vm: bool = False,
        extra_events: tuple[str, ...] = (),
    ) -> None:
        self.shell = shell
        self.tag = tag
        self.cpus = sorted(set(cpus))
        self.buffer_kb = buffer_kb
        self.register_undo = register_undo
        self.events = EVENTS + (VM_EVENTS if vm else ()) + tuple(extra_events)
        self.instance = f"{TRACEFS}/instances/{INSTANCE_PREFIX}{tag}"
        self.enabled: list[str] = []
        self.missing: list[str] = []
        self.sync: list[SyncPoint] = []
        self.started_ns = 0
        self._made = False

    def start(self) -> None:
        """Mount tracefs if it is not, make the instance and start it. `TraceUnavailable`
        (with nothing left behind) when any of it is refused."""
        self.register_undo(removal(self.instance))
        i = shlex.quote(self.instance)
        mask = cpumask(self.cpus)
        systems = " ".join(EVENT_SYSTEMS)
        events = " ".join(self.events)
        filters = "".join(
            f"[ -e {i}/events/{e}/filter ] && echo {shlex.quote(f)} > {i}/events/{e}/filter\n"
            for e, f in EVENT_FILTERS.items()
        )
        lock = shlex.quote(LOCK_FILE)
        script = f"""set -e
exec 9>>{lock} || {{ echo "cannot open {LOCK_FILE}" >&2; exit 1; }}
flock 9
T={TRACEFS}
[ -d $T/instances ] || mount -t tracefs nodev $T 2>/dev/null || {{ echo "cannot mount tracefs at $T" >&2; exit 1; }}
mkdir {i}
echo 0 > {i}/tracing_on
echo mono > {i}/trace_clock
echo 0 > {i}/options/overwrite
echo {self.buffer_kb} > {i}/buffer_size_kb
echo {mask} > {i}/tracing_cpumask
set +e
for s in {systems}; do
  if [ -e {i}/events/$s/enable ]; then echo 1 > {i}/events/$s/enable && echo "enabled $s"; else echo "missing $s"; fi
done
for e in {events}; do
  if [ -e {i}/events/$e/enable ]; then echo 1 > {i}/events/$e/enable && echo "enabled $e"; else echo "missing $e"; fi
done
{filters}set -e
echo 1 > {i}/tracing_on
"""
        try:
            out = self.shell.run(script, f"starting the kernel trace on {self.shell.label}")
        except TraceUnavailable:
            self._remove_quietly()
            raise
        self._made = True
        for line in out.splitlines():
            word, _, name = line.partition(" ")
            (self.enabled if word == "enabled" else self.missing if word == "missing" else []).append(name)
        if "sched/sched_switch" not in self.enabled:
            self.remove()
            raise TraceUnavailable(f"the kernel of {self.shell.label} has no sched_switch tracepoint")
        self.started_ns = time.time_ns()
        self.sync.append(self.mark("start"))

    def mark(self, label: str) -> SyncPoint:
        """A clock marker in the trace between two CLOCK_REALTIME readings."""
        text = f"{SYNC_MARKER} {label}"
        marker = f"{self.instance}/trace_marker"
        # The marker is recorded on the CPU that writes it: one the instance traces.
        if self.shell.local:
            fd = os.open(marker, os.O_WRONLY)
            affinity = os.sched_getaffinity(0)
            try:
                os.sched_setaffinity(0, {self.cpus[0]})  # this thread only
                before = time.clock_gettime_ns(time.CLOCK_REALTIME)
                _write_marker(fd, text)
                after = time.clock_gettime_ns(time.CLOCK_REALTIME)
            finally:
                os.sched_setaffinity(0, affinity)
                os.close(fd)
            return SyncPoint(label, before, after)
        out = self.shell.run(
            f"taskset -c {self.cpus[0]} sh -c 'b=$(date +%s%N); echo {text} > {marker}; a=$(date +%s%N); echo $b $a'",
            f"marking the trace clock on {self.shell.label}",
        )
        before, after = (int(x) for x in out.split()[:2])
        return SyncPoint(label, before, after)

    def stop(self, work_dir: Path) -> TraceRecording:
        """Stop tracing, read every CPU's buffer and the event formats, remove the instance."""
        self.sync.append(self.mark("stop"))
        stopped = time.time_ns()
        i = shlex.quote(self.instance)
        # Each recording's raw pages in a folder of its own (a run traced on several hosts
        # holds several recordings of a CPU 0), written there directly on this host, or
        # written on the other host and brought back.
        dump = work_dir / f"trace-raw-{self.tag}"
        dump.mkdir(parents=True, exist_ok=True)
        remote_dir = str(dump) if self.shell.local else f"/tmp/{INSTANCE_PREFIX}{self.tag}.raw"
        d = shlex.quote(remote_dir)
        formats = " ".join(["ftrace/print", *self.enabled_events()])
        script = f"""set -e
echo 0 > {i}/tracing_on
mkdir -p {d}
page=$(( $(cat {i}/buffer_subbuf_size_kb 2>/dev/null || echo 4) * 1024 ))
echo "page $page"
for c in {" ".join(map(str, self.cpus))}; do
  dd if={i}/per_cpu/cpu$c/trace_pipe_raw of={d}/cpu$c.raw bs=$page iflag=nonblock status=none 2>/dev/null || true
  echo "stats $c $(tr '\\n' ';' < {i}/per_cpu/cpu$c/stats)"
done
for e in {formats}; do
  echo "format $e"; sed 's/^/| /' {i}/events/$e/format
done
"""
        try:
            out = self.shell.run(script, f"reading the kernel trace on {self.shell.label}")
            raw: dict[int, bytes] = {}
            for c in self.cpus:
                local = dump / f"cpu{c}.raw"
                if not self.shell.local:
                    self.shell.fetch(f"{remote_dir}/cpu{c}.raw", local)
                raw[c] = local.read_bytes() if local.exists() else b""
        finally:
            self.remove()
            for f in dump.glob("cpu*.raw"):
                f.unlink()
            dump.rmdir()
            if not self.shell.local:
                self.shell.run(f"rm -rf {d}", f"removing the raw trace on {self.shell.label}")
        page, dropped, overrun, formats_text = _parse_stop_output(out)
        return TraceRecording(
            host=self.shell.label,
            instance=self.instance,
            cpus=self.cpus,
            events=list(self.enabled),
            missing_events=list(self.missing),
            buffer_kb=self.buffer_kb,
            page_size=page,
            raw=raw,
            formats=formats_text,
            sync=list(self.sync),
            dropped=dropped,
            overrun=overrun,
            started_ns=self.started_ns,
            stopped_ns=stopped,
        )

    def enabled_events(self) -> list[str]:
        """Every event the recording enabled, a system as its events (their formats are read)."""
        names = [e for e in self.enabled if "/" in e]
        systems = [s for s in self.enabled if "/" not in s]
        if systems:
            listing = self.shell.run(
                " ".join(f"ls -d {shlex.quote(self.instance)}/events/{s}/*/ ;" for s in systems),
                f"listing trace events on {self.shell.label}",
            )
            for line in listing.split():
                parts = line.rstrip("/").split("/")
                names.append(f"{parts[-2]}/{parts[-1]}")
        return names

    def remove(self) -> None:
        """Remove the instance (its buffers go with it); safe to call twice."""
        if self._made:
            self.shell.run(shlex.join(removal(self.instance)), f"removing the trace instance on {self.shell.label}")
            self._made = False

    def _remove_quietly(self) -> None:
        try:
            self.shell.run(shlex.join(removal(self.instance)), f"removing the trace instance on {self.shell.label}")
        except TraceUnavailable:
            pass


def removal(instance: str) -> list[str]:
    """The command that removes an instance if it is there, holding the set-up's lock (LOCK_FILE):
    the same whether the run removes it, an undo after a crash, or `lowtail testbed clean`."""
    i = shlex.quote(instance)
    return ["/bin/sh", "-c", f"[ ! -d {i} ] || flock {shlex.quote(LOCK_FILE)} rmdir {i} 2>/dev/null || true"]


_STAT = re.compile(r"([a-z ]+):\s*(\d+)")


def _parse_stop_output(out: str) -> tuple[int, dict[int, int], dict[int, int], dict[str, str]]:
    """The page size, per-CPU dropped and overrun counts, and each event's format text."""
    page = 4096
    dropped: dict[int, int] = {}
    overrun: dict[int, int] = {}
    formats: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("| ") or line == "|":
            if current is not None:
                current.append(line[2:])
            continue
        current = None
        word, _, rest = line.partition(" ")
        if word == "page":
            page = int(rest)
        elif word == "stats":
            cpu_text, _, stats = rest.partition(" ")
            values = {k.strip(): int(v) for k, v in _STAT.findall(stats.replace(";", "\n"))}
            dropped[int(cpu_text)] = values.get("dropped events", 0)
            overrun[int(cpu_text)] = values.get("overrun", 0)
        elif word == "format":
            current = formats.setdefault(rest.strip(), [])
    return page, dropped, overrun, {k: "\n".join(v) for k, v in formats.items()}
