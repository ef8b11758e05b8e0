"""Interrupts at the resolution they were sampled: how often each kind fired on each CPU, and
how its count in each sampling period goes with the number of tail packets in that period.

Every run samples /proc/interrupts (every ~100 ms: host/interrupts.py), a VM guest its own,
and an imported pair may bring the recording a campaign kept (every ~1 s, without
timestamps: experiment/irq_recordings.py). Counts per period say how many interrupts of a
kind a CPU had in that period, not when within it: they cannot tell which packet an
interrupt delayed, only whether the periods with more of a kind are the periods with more
tail packets. That is what this computes, and what it says it can and cannot attribute.

The correlation is Pearson's r between the per-period count of a kind on a CPU and the
per-period count of tail packets (by their PRE time). Whether it is more than chance is
judged the way explain judges every cause: the same counts moved against the tail's —
every circular shift of the interrupt series (which keeps its own rhythm) — and the share
of shifts with an r at least as large is the one-sided p-value (`tests/explain/
test_sampled.py` checks its false-alarm rate and its power against a known truth;
docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lowtail.core.units import format_ns
from lowtail.explain.coincidence import run_cpus
from lowtail.explain.document import CorrelationDoc, RateDoc, SampledDoc
from lowtail.host.document import KIND_NAMES

# A correlation is said to be beyond chance at this one-sided p-value (circular shifts).
SIGNIFICANCE = 0.05
# Kinds shown per CPU (by rate), so a host with 200 device lines stays readable.
KINDS_SHOWN = 12

Sample = tuple[int, int, str, int, int]  # (t_ns, cpu, kind, delta, interval_ns)


def description(kind: str) -> str:
    """A kind in words ("LOC" → "local timer", "33:virtio0-input.0" → "device interrupt")."""
    return KIND_NAMES.get(kind, "device interrupt" if ":" in kind else kind)


def period_of(samples: Sequence[Sample]) -> int:
    """The samples' period: the median of their intervals."""
    intervals = sorted(s[4] for s in samples)
    return int(intervals[len(intervals) // 2]) if intervals else 0


def rates(samples: Sequence[Sample], cpus: set[int] | None = None) -> list[RateDoc]:
    """Each kind's rate on each CPU (these CPUs, all when None) over the whole recording: its
    count over the time the samples cover, highest first per CPU."""
    if not samples:
        return []
    start = min(s[0] - s[4] for s in samples)
    end = max(s[0] for s in samples)
    span_s = max(1e-9, (end - start) / 1e9)
    counts: dict[tuple[int, str], int] = {}
    for _, cpu, kind, delta, _ in samples:
        if cpus is None or cpu in cpus:
            counts[(cpu, kind)] = counts.get((cpu, kind), 0) + delta
    out = [
        RateDoc(cpu=cpu, kind=kind, description=description(kind), count=n, rate_hz=n / span_s)
        for (cpu, kind), n in counts.items()
    ]
    out.sort(key=lambda r: (r["cpu"], -r["rate_hz"], r["kind"]))
    return out


def _grid(samples: Sequence[Sample], first_ns: int, last_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """The sampling periods (start, end] that lie inside [first_ns, last_ns]."""
    ends = np.array(sorted({s[0] for s in samples}), dtype=np.int64)
    period = period_of(samples)
    starts = np.concatenate([[ends[0] - period], ends[:-1]]) if ends.size else ends
    inside = (starts >= first_ns) & (ends <= last_ns)
    return starts[inside], ends[inside]


def correlations(
    samples: Sequence[Sample], tail_pre_ns: np.ndarray, first_ns: int, last_ns: int, cpus: set[int] | None
) -> list[CorrelationDoc]:
    """Each kind on each CPU (these, all when None) against the tail packets, period by period."""
    if not samples:
        return []
    starts, ends = _grid(samples, first_ns, last_ns)
    n = ends.size
    if n < 3:
        return []
    index = {int(t): i for i, t in enumerate(ends)}
    # A tail packet belongs to the period (start, end] its PRE time falls in.
    k = np.searchsorted(ends, np.sort(tail_pre_ns), side="left")
    inside = (k < n) & (np.sort(tail_pre_ns) > starts[np.minimum(k, n - 1)])
    tail = np.bincount(k[inside], minlength=n).astype(float)
    series: dict[tuple[int, str], np.ndarray] = {}
    for t, cpu, kind, delta, _ in samples:
        i = index.get(int(t))
        if i is None or (cpus is not None and cpu not in cpus):
            continue
        series.setdefault((cpu, kind), np.zeros(n))[i] += delta
    out = []
    for (cpu, kind), counts in series.items():
        r, p = _correlation(counts, tail)
        out.append(
            CorrelationDoc(
                cpu=cpu,
                kind=kind,
                r=r,
                p=p,
                periods=n,
                significant=r is not None and p is not None and r > 0 and p <= SIGNIFICANCE,
            )
        )
    out.sort(key=lambda c: (not c["significant"], c["p"] if c["p"] is not None else 2.0, c["cpu"], c["kind"]))
    return out


def _correlation(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """Pearson's r of x and y, and its one-sided p-value against every circular shift of x."""
    if np.std(x) == 0 or np.std(y) == 0:
        return None, None
    xs = (x - x.mean()) / x.std()
    ys = (y - y.mean()) / y.std()
    n = x.size
    # r of every circular shift at once: the circular cross-correlation through the FFT.
    shifted = np.real(np.fft.ifft(np.fft.fft(xs) * np.conj(np.fft.fft(ys)))) / n
    r = float(shifted[0])
    beyond = int(np.sum(shifted[1:] >= r - 1e-12))
    return round(r, 4), round((1 + beyond) / n, 4)


def resolution(period_ns: int, placed: str | None) -> str:
    """What counts every `period_ns` can and cannot attribute, in a sentence."""
    period = format_ns(period_ns)
    text = (
        f"interrupt counts every {period}: they say how many interrupts of each kind each CPU had in each "
        f"{period} and whether the periods with more of a kind hold more tail packets (per-period counts "
        f"against per-period tail counts); they cannot say which packet an interrupt delayed"
    )
    return text + (f"; {placed}" if placed else "")


def sampled_doc(
    source: str,
    samples: Sequence[Sample],
    tail_pre_ns: np.ndarray,
    first_ns: int,
    last_ns: int,
    dut_cpus: set[int] | None,
    placed: str | None = None,
) -> SampledDoc:
    """A source's interrupt samples read against the tail (see the module's docstring)."""
    period = period_of(samples)
    starts, _ = _grid(samples, first_ns, last_ns) if samples else (np.zeros(0), np.zeros(0))
    shown = _top(rates(samples, dut_cpus))
    found = correlations(samples, tail_pre_ns, first_ns, last_ns, dut_cpus)
    where = f"CPU {','.join(map(str, sorted(dut_cpus)))}" if dut_cpus else "all CPUs"
    sentences = [
        f"{c['kind']} ({description(c['kind'])}) on CPU {c['cpu']}: the periods with more of it hold more tail "
        f"packets (r = {c['r']:.2f}, p = {c['p']:.3g} over {c['periods']} periods of {format_ns(period)})"
        for c in found
        if c["significant"]
    ]
    enough = math.ceil(1 / SIGNIFICANCE)
    if found and found[0]["periods"] < enough:
        sentences.append(
            f"{found[0]['periods']} periods of {format_ns(period)} are too few to tell a correlation from chance "
            f"(the circular shifts need at least {enough} for p ≤ {SIGNIFICANCE:g})"
        )
    elif not sentences and found:
        sentences = [
            f"no interrupt kind on {where} goes with the tail period by period beyond chance "
            f"(p ≤ {SIGNIFICANCE:g}, {found[0]['periods']} periods of {format_ns(period)})"
        ]
    return SampledDoc(
        source=source,
        period_ns=period,
        periods=int(starts.size),
        dut_cpus=sorted(dut_cpus) if dut_cpus else None,
        placed=placed,
        rates=shown,
        correlation=found,
        resolution=resolution(period, placed),
        sentences=sentences,
    )


def _top(found: list[RateDoc]) -> list[RateDoc]:
    """The `KINDS_SHOWN` most frequent kinds of each CPU."""
    out: list[RateDoc] = []
    per_cpu: dict[int, int] = {}
    for r in found:
        if per_cpu.get(r["cpu"], 0) < KINDS_SHOWN:
            out.append(r)
            per_cpu[r["cpu"]] = per_cpu.get(r["cpu"], 0) + 1
    return out


def recording_facts(run: Mapping[str, Any], source: str) -> dict[str, object]:
    """What an imported run stored of its interrupt recording of `source` (experiment/external.py,
    `TestbedDocument.interrupts`: the recording's facts, each read by the key it needs)."""
    found = ((run.get("testbed") or {}).get("interrupts") or {}).get(source)
    return found if isinstance(found, dict) else {}


def dut_cpus_of(run: Mapping[str, Any], source: str, roles: Mapping[str, Mapping[str, Any]]) -> set[int] | None:
    """The DuT's CPUs in a source's interrupt samples: an imported recording's `dut_cpu`, the
    host's DuT cores of the run's roles or configuration, none known for a guest (all CPUs)."""
    recorded = recording_facts(run, source).get("dut_cpu")
    if isinstance(recorded, int):
        return {recorded}
    if source == "guest":
        return None
    cpus = (roles.get("dut") or {}).get("cpus")
    if isinstance(cpus, list) and cpus:
        return {int(c) for c in cpus}
    return run_cpus(run)[0]
