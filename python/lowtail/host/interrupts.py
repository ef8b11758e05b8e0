"""Per-CPU interrupt counters (/proc/interrupts): parsing, differences, and a sampler that
records them during a run from a housekeeping core.

Kinds are the row names of /proc/interrupts: the architecture's interrupts by their
three-letter code (LOC local timer, IWI IRQ work, TLB shootdowns, CAL function calls,
RES rescheduling, NMI, ...) and device interrupts as "<irq>:<device>" ("36:virtio1-req.0").

Why the sampler runs on a housekeeping core and not every second by default: the URLLC studies
found their own 1-second interrupt monitor behind a periodic latency spike (JNSM 2023, §6). Reading
/proc/interrupts walks every CPU's counters but sends no interrupt to the other cores, so
from a core the DuT does not use its cost stays on that core; `DEFAULT_INTERVAL_S` comes
from measuring it (docs/architecture.md, "Interrupt sampling")."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.host import steal as steal_time
from lowtail.host.document import KIND_NAMES

# Chosen by measurement (scripts/sampler-cost.py; figures in docs/architecture.md, "Interrupt
# sampling"): one read + parse costs up to 0.3 ms of CPU on the reading core and disturbs no
# other core, so 10 reads a second cost 0.3 % of a housekeeping core.
DEFAULT_INTERVAL_S = 0.1

_COUNTER_WRAP = 1 << 32  # per-CPU interrupt counters are unsigned int in the kernel
_TRIGGER = re.compile(r"(^|-)(edge|level|fasteoi|simple|percpu|none)$", re.IGNORECASE)


@dataclass
class InterruptTable:
    """One read of /proc/interrupts: counts[kind][cpu]."""

    cpus: list[int]
    counts: dict[str, dict[int, int]]
    descriptions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InterruptSample:
    """`delta` interrupts of `kind` on `cpu` in the `interval_ns` before `t_ns`
    (CLOCK_REALTIME ns). Samplers keep only non-zero deltas."""

    t_ns: int
    cpu: int
    kind: str
    delta: int
    interval_ns: int = 0


def parse_interrupts(text: str) -> InterruptTable:
    """The counters of a /proc/interrupts text: per kind and CPU, with each kind's description."""
    lines = text.splitlines()
    if not lines or "CPU" not in lines[0]:
        raise UserError("not a /proc/interrupts text: its first line names no CPUs")
    cpus = [int(tok[3:]) for tok in lines[0].split() if tok.startswith("CPU") and tok[3:].isdigit()]
    n = len(cpus)
    counts: dict[str, dict[int, int]] = {}
    descriptions: dict[str, str] = {}
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep:
            continue
        key = head.strip()
        toks = rest.split()
        if len(toks) < n or not all(t.isdigit() for t in toks[:n]):
            continue  # ERR, MIS and other system-wide totals: not per CPU
        desc_toks = toks[n:]
        if key.isdigit():
            kind = f"{key}:{_device_name(desc_toks)}"
        else:
            kind = key
        if key.isdigit():
            descriptions[kind] = f"device interrupt ({desc_toks[0]})" if desc_toks else "device interrupt"
        else:
            descriptions[kind] = KIND_NAMES.get(key, " ".join(desc_toks) or key)
        counts[kind] = {cpu: int(v) for cpu, v in zip(cpus, toks[:n])}
    return InterruptTable(cpus=cpus, counts=counts, descriptions=descriptions)


def _device_name(desc_toks: list[str]) -> str:
    """ "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0" → "virtio2-input.0": what follows
    the trigger type; the last word when the format is unfamiliar."""
    for i in range(len(desc_toks) - 1, -1, -1):
        if _TRIGGER.search(desc_toks[i]):
            name = " ".join(desc_toks[i + 1 :])
            if name:
                return name
            break
    return desc_toks[-1] if desc_toks else "?"


def read_interrupts(proc_root: str | Path = "/proc") -> InterruptTable:
    """/proc/interrupts of the live host (or of another proc root), parsed."""
    path = Path(proc_root) / "interrupts"
    try:
        return parse_interrupts(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (is {proc_root} a proc filesystem?)") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def diff(before: InterruptTable, after: InterruptTable) -> dict[tuple[int, str], int]:
    """Interrupts between two reads, per (cpu, kind); counters that wrapped are unwrapped,
    rows that appeared count from zero."""
    out: dict[tuple[int, str], int] = {}
    for kind, per_cpu in after.counts.items():
        old = before.counts.get(kind, {})
        for cpu, v in per_cpu.items():
            d = v - old.get(cpu, 0)
            if d < 0:
                d += _COUNTER_WRAP
            if d:
                out[(cpu, kind)] = d
    return out


class InterruptSampler:
    """Reads /proc/interrupts every `interval_s` from a thread pinned to
    `housekeeping_cpu`; `stop()` takes a last read and returns every non-zero increment.
    Each read also takes /proc/stat's steal time (host/steal.py): `steal` holds its samples
    (kind "steal", delta in ns), none where the kernel has no steal column.

        s = InterruptSampler(interval_s=DEFAULT_INTERVAL_S, housekeeping_cpu=0)
        s.start(); ...; samples = s.stop()
    """

    def __init__(
        self, interval_s: float = DEFAULT_INTERVAL_S, housekeeping_cpu: int | None = 0, proc_root: str | Path = "/proc"
    ):
        if interval_s <= 0:
            raise UserError(f"interrupt sampling interval must be positive, not {interval_s}")
        self.interval_ns = round(interval_s * 1e9)
        self.housekeeping_cpu = housekeeping_cpu
        self.proc_root = Path(proc_root)
        self.samples: list[InterruptSample] = []
        # Steal time (host/steal.py) read at the same sample times: kind "steal", delta in ns.
        self.steal: list[InterruptSample] = []
        self._steal_hz = steal_time.user_hz()
        self._last_steal: dict[int, int] | None = None
        self.sample_times_ns: list[int] = []
        # Each read + parse: CPU time it cost the housekeeping core, and wall time it took.
        self.read_cpu_ns: list[int] = []
        self.read_wall_ns: list[int] = []
        self.first: InterruptTable | None = None
        self.last: InterruptTable | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> InterruptSampler:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._run, name="lowtail-irq-sampler", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def stop(self) -> list[InterruptSample]:
        if self._thread is None:
            return self.samples
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise self._error
        return self.samples

    def _read(self) -> tuple[int, InterruptTable, dict[int, int] | None]:
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        t = time.time_ns()
        table = read_interrupts(self.proc_root)
        stolen = steal_time.read_steal(self.proc_root, self._steal_hz)
        self.read_wall_ns.append(time.perf_counter_ns() - w0)
        self.read_cpu_ns.append(time.thread_time_ns() - c0)
        return t, table, stolen

    def _record(self, t: int, table: InterruptTable, stolen: dict[int, int] | None) -> None:
        prev_t = self.sample_times_ns[-1]
        assert self.last is not None  # the first sample is taken before any is recorded
        for (cpu, kind), d in diff(self.last, table).items():
            self.samples.append(InterruptSample(t, cpu, kind, d, t - prev_t))
        if stolen is not None and self._last_steal is not None:
            for cpu, d in steal_time.steal_deltas(self._last_steal, stolen).items():
                self.steal.append(InterruptSample(t, cpu, steal_time.STEAL_KIND, d, t - prev_t))
        self.sample_times_ns.append(t)
        self.last = table
        self._last_steal = stolen

    def _run(self) -> None:
        try:
            if self.housekeeping_cpu is not None:
                try:
                    os.sched_setaffinity(0, {self.housekeeping_cpu})  # this thread only
                except OSError as e:
                    raise UserError(
                        f"cannot pin the interrupt sampler to CPU {self.housekeeping_cpu}: "
                        f"{e.strerror} (choose an online housekeeping CPU)"
                    ) from None
            t, self.first, self._last_steal = self._read()
            self.last = self.first
            self.sample_times_ns.append(t)
        except BaseException as e:  # reported by start()
            self._error = e
            self._started.set()
            return
        self._started.set()
        try:
            start = time.monotonic_ns()
            k = 1
            while not self._stop.wait(max(0.0, (start + k * self.interval_ns - time.monotonic_ns()) / 1e9)):
                self._record(*self._read())
                k += 1
                # A late wake-up skips missed ticks instead of reading back to back.
                k = max(k, (time.monotonic_ns() - start) // self.interval_ns + 1)
            self._record(*self._read())
        except BaseException as e:
            self._error = e
