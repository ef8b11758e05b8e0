"""Interrupt recordings made elsewhere: the /proc/interrupts samples a measurement campaign
kept beside each capture pair, read into the samples lowtail stores for its own runs
(`host.interrupts.InterruptSample`: the increment of one kind on one CPU in one sampling
interval, non-zero ones only).

Two shapes are read, told apart by their header line:

- **The URLLC studies' files**: semicolon-separated, one header row of columns named
  `<IRQ>_<description>_CPU<n>` (`LOC_Local_timer_interrupts_CPU2`,
  `33_PCI-MSI_32769-edge_virtio0-input.0_CPU2`), then one row of *cumulative* counts per
  sample, taken every `period_ns` (about a second), with no timestamp column; a field is
  empty where that CPU has no such line. Sample k is placed at `t0_ns + k·period_ns`: the
  files carry no time, so the recording is taken to start with the capture, which places
  each count within one period (said wherever the counts are used).
- **lowtail's own samples**: comma-separated with the header `t_ns,cpu,kind,delta,interval_ns`
  (the columns of `run_interrupts`): increments already, each with its time.

Counters are the kernel's per-CPU `unsigned int`s: one that goes down near the top of 32 bits
wrapped and is unwrapped; one that goes down otherwise was reset (the host rebooted, the
device was removed and added again), and that interval of that counter is left out — its
increment is unknown — and counted in the facts. Columns that name no CPU (ERR, MIS: totals)
are skipped and named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lowtail.core import files
from lowtail.core.errors import UserError
from lowtail.host.interrupts import InterruptSample

# Larger than any interrupt recording of a run (a day of 1 s samples of 200 columns is ~40 MB).
MAX_BYTES = 256 * 1024 * 1024
COUNTER_WRAP = 1 << 32
# A decrease is a wrap only when the counter stood this close to the top of 32 bits and the
# unwrapped increment is plausible (fewer than this many interrupts in one sample).
_WRAP_PLAUSIBLE = 1 << 31
_MAX_COUNT = (1 << 63) - 1
_STUDY_COLUMN = re.compile(r"^(?P<irq>[^_]+)_(?P<description>.*)_CPU(?P<cpu>[0-9]{1,5})$")
_TRIGGER = re.compile(r"(^|-)(edge|level|fasteoi|simple|percpu|none)$", re.IGNORECASE)
LOWTAIL_HEADER = ("t_ns", "cpu", "kind", "delta", "interval_ns")
# How a kind may be written (printable, bounded): what a header names is data, not markup.
_KIND = re.compile(r"^[\x21-\x7e][\x20-\x7e]{0,199}$")


@dataclass
class Recording:
    """What one interrupt file held: its samples and what was found reading it."""

    shape: str  # "studies" | "lowtail"
    samples: list[InterruptSample]
    period_ns: int
    rows: int  # samples (rows of counts) in the file
    cpus: list[int]
    kinds: list[str]
    wraps: int = 0  # counter wraps unwrapped
    resets: int = 0  # counter resets: those intervals of those counters left out
    empty_fields: int = 0  # fields left empty (a CPU without that line)
    skipped_columns: list[str] = field(default_factory=list)  # columns that name no CPU

    def facts(self) -> dict[str, object]:
        """What the run stores of the recording (beside its samples)."""
        return {
            "shape": self.shape,
            "period_ns": self.period_ns,
            "rows": self.rows,
            "cpus": self.cpus,
            "kinds": self.kinds,
            "wraps": self.wraps,
            "resets": self.resets,
            "empty_fields": self.empty_fields,
            "skipped_columns": self.skipped_columns[:20],
        }


def read_recording(path: Path, t0_ns: int, period_ns: int) -> Recording:
    """The samples of an interrupt file (UserError naming the file, and the line, when it is
    not one); the studies' rows are placed every `period_ns` from `t0_ns`."""
    data = files.read_input(path, "interrupt recording", MAX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a text file (byte {e.start} is not UTF-8)") from None
    try:
        return parse_recording(text, t0_ns, period_ns)
    except RecordingError as e:
        raise UserError(f"{path}: {e}") from None


class RecordingError(ValueError):
    """What is wrong with an interrupt recording's text, in words (the caller names the file)."""


def parse_recording(text: str, t0_ns: int, period_ns: int) -> Recording:
    """An interrupt recording's samples from its text (RecordingError when it is neither shape)."""
    if period_ns <= 0:
        raise RecordingError("the sampling period must be positive")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None:
        raise RecordingError("is empty: no header line")
    header = lines[start].strip().lstrip("\ufeff")
    if tuple(h.strip() for h in header.split(",")) == LOWTAIL_HEADER:
        return _lowtail_samples(lines, start)
    return _study_samples(lines, start, header, t0_ns, period_ns)


def _study_samples(lines: list[str], start: int, header: str, t0_ns: int, period_ns: int) -> Recording:
    names = [n.strip() for n in header.split(";")]
    if len(names) < 1 or not any(_STUDY_COLUMN.match(n) for n in names):
        raise RecordingError(
            "line 1: neither a header of <IRQ>_<description>_CPU<n> columns separated by ';' "
            f"(LOC_Local_timer_interrupts_CPU2) nor lowtail's {','.join(LOWTAIL_HEADER)}"
        )
    columns: list[tuple[str, int] | None] = []
    skipped: list[str] = []
    seen: set[tuple[str, int]] = set()
    for n in names:
        m = _STUDY_COLUMN.match(n)
        if m is None:
            if n:
                skipped.append(n[:80])
            columns.append(None)
            continue
        key = (_kind_of(m.group("irq"), m.group("description")), int(m.group("cpu")))
        if not _KIND.match(key[0]):
            raise RecordingError(f"line {start + 1}: column {n[:80]!r} names no interrupt lowtail can keep")
        if key in seen:
            raise RecordingError(f"line {start + 1}: column {n[:80]!r} appears twice")
        seen.add(key)
        columns.append(key)
    previous: list[int | None] = [None] * len(columns)
    samples: list[InterruptSample] = []
    rows = wraps = resets = empty = 0
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(";")]
        if len(fields) > len(columns) and any(fields[len(columns) :]):
            raise RecordingError(f"line {number}: {len(fields)} fields, the header names {len(columns)}")
        fields += [""] * (len(columns) - len(fields))
        t_ns = t0_ns + rows * period_ns
        for i, column in enumerate(columns):
            if column is None:
                continue
            text = fields[i]
            if not text:
                empty += 1
                previous[i] = None  # no count now: the next one has nothing to be compared with
                continue
            if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > _MAX_COUNT:
                raise RecordingError(f"line {number}: {names[i][:80]!r} is {text[:40]!r}, not a count")
            value = int(text)
            before = previous[i]
            previous[i] = value
            if before is None:
                continue
            delta = value - before
            if delta < 0:
                unwrapped = delta + COUNTER_WRAP
                if before < COUNTER_WRAP and 0 <= unwrapped < _WRAP_PLAUSIBLE and before >= _WRAP_PLAUSIBLE:
                    wraps += 1
                    delta = unwrapped
                else:
                    resets += 1
                    continue
            if delta:
                samples.append(InterruptSample(t_ns, column[1], column[0], delta, period_ns))
        rows += 1
    if rows == 0:
        raise RecordingError("has a header but no row of counts")
    kept = [c for c in columns if c is not None]
    return Recording(
        shape="studies",
        samples=samples,
        period_ns=period_ns,
        rows=rows,
        cpus=sorted({cpu for _, cpu in kept}),
        kinds=sorted({kind for kind, _ in kept}),
        wraps=wraps,
        resets=resets,
        empty_fields=empty,
        skipped_columns=skipped,
    )


def _kind_of(irq: str, description: str) -> str:
    """A column's interrupt as lowtail names it (host/interrupts.py): the architecture's by its
    code (LOC, IWI, CAL), a device's as "<irq>:<device>" with the device name that follows its
    trigger type ("33_PCI-MSI_32769-edge_virtio0-input.0" → "33:virtio0-input.0")."""
    if not irq.isdigit():
        return irq
    words = description.split("_")
    for i in range(len(words) - 1, -1, -1):
        if _TRIGGER.search(words[i]):
            device = "_".join(words[i + 1 :])
            if device:
                return f"{irq}:{device}"
            break
    return f"{irq}:{words[-1] if words and words[-1] else '?'}"


def _lowtail_samples(lines: list[str], start: int) -> Recording:
    samples: list[InterruptSample] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(LOWTAIL_HEADER):
            raise RecordingError(f"line {number}: {len(fields)} fields, the header names {len(LOWTAIL_HEADER)}")
        t, cpu, kind, delta, interval = fields
        numbers = (t, cpu, delta, interval)
        if not all(n.isascii() and n.isdigit() and len(n) <= 19 and int(n) <= _MAX_COUNT for n in numbers):
            raise RecordingError(f"line {number}: t_ns, cpu, delta and interval_ns must be whole numbers ≥ 0")
        if int(cpu) > 99_999:
            raise RecordingError(f"line {number}: CPU {cpu} is no CPU number")
        if not _KIND.match(kind):
            raise RecordingError(f"line {number}: {kind[:40]!r} is no interrupt kind")
        if int(interval) <= 0:
            raise RecordingError(f"line {number}: interval_ns must be positive")
        if int(delta):
            samples.append(InterruptSample(int(t), int(cpu), kind, int(delta), int(interval)))
    if not samples:
        raise RecordingError("holds no interrupt increment")
    intervals = sorted(s.interval_ns for s in samples)
    return Recording(
        shape="lowtail",
        samples=samples,
        period_ns=intervals[len(intervals) // 2],
        rows=len({s.t_ns for s in samples}),
        cpus=sorted({s.cpu for s in samples}),
        kinds=sorted({s.kind for s in samples}),
    )
