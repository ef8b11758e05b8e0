"""Which interrupt kinds coincide with a run's largest latencies, from the /proc/interrupts
samples every run takes (host/interrupts.py's `InterruptSampler`, and a VM guest's own):
what `lowtail explain` falls back to where the kernel could not be traced, and what the
report's interrupt timeline says under its plot. Computed here and stored with the run's
explanation; the report only shows it."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from lowtail.explain.document import CoincidenceDoc, CoincidenceRow
from lowtail.host.document import KIND_NAMES

SPIKES = 20  # how many of a run's largest latencies count as its spikes


def coincidence(
    spike_times_ns: Sequence[int], samples: Sequence[tuple[int, int, str, int, int]], cpus: set[int] | None
) -> list[CoincidenceRow]:
    """For each interrupt kind on `cpus` (all when None): in how many spikes' sampling
    intervals it incremented, against the share of all intervals in which it did. A kind
    present in nearly every interval (a periodic tick) coincides with every spike and says
    nothing; one that is rare overall but present at the spikes is a suspect.

    samples: (t_ns, cpu, kind, delta, interval_ns), the increment in (t_ns − interval_ns, t_ns]."""
    rows = [s for s in samples if cpus is None or s[1] in cpus]
    if not rows or not spike_times_ns:
        return []
    ends = sorted({s[0] for s in samples})
    interval = sorted(s[4] for s in samples)[len(samples) // 2] or 1
    n_intervals = max(1, round((ends[-1] - ends[0]) / interval) + 1)
    by_kind: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for t, _, kind, delta, _ in rows:
        by_kind[kind][t] += delta

    def interval_end(t: int) -> int | None:
        """The sample that closes the interval holding time t."""
        i = bisect.bisect_left(ends, t)
        return ends[i] if i < len(ends) and ends[i] - interval < t else None

    spike_ends = [interval_end(t) for t in spike_times_ns]
    out: list[CoincidenceRow] = []
    for kind, per_t in by_kind.items():
        hits = sum(e is not None and e in per_t for e in spike_ends)
        out.append(
            CoincidenceRow(
                kind=kind,
                description=KIND_NAMES.get(kind, kind),
                spikes_with=hits,
                spikes=len(spike_times_ns),
                interval_share=min(1.0, len(per_t) / n_intervals),
                count=sum(per_t.values()),
            )
        )
    out.sort(key=lambda r: (-r["spikes_with"] / r["spikes"] + r["interval_share"], r["kind"]))
    return out


def verdicts(rows: list[CoincidenceRow], cpus_text: str) -> list[str]:
    """Plain sentences: which kinds coincide with the spikes (more often than by chance)."""
    said = []
    for r in rows:
        frac = r["spikes_with"] / r["spikes"]
        if r["spikes_with"] == 0:
            continue
        if r["interval_share"] >= 0.9:
            said.append(
                f"{r['kind']} ({r['description']}) occurs in {100 * r['interval_share']:.0f} % of the sampling "
                f"intervals, so it is present at every spike and cannot be singled out by sampling."
            )
        elif frac >= 0.5 and frac >= 1.5 * r["interval_share"]:
            said.append(
                f"{r['kind']} ({r['description']}) on {cpus_text} coincides with {r['spikes_with']} of the "
                f"{r['spikes']} largest spikes, yet occurs in only {100 * r['interval_share']:.0f} % of the "
                f"sampling intervals: a likely cause."
            )
    return said or ["No interrupt kind coincides with the spikes more often than it occurs anyway."]


def run_cpus(run: Mapping[str, Any]) -> tuple[set[int] | None, str]:
    """The DuT cores of a run, from its containment or configuration when recorded."""
    for doc in (run["containment"], run["dut_config"]):
        for key in ("cpus", "cores", "dut_cpus"):
            v = doc.get(key) if isinstance(doc, dict) else None
            if isinstance(v, list) and v and all(isinstance(c, int) for c in v):
                return set(v), f"CPU {','.join(map(str, sorted(v)))}"
    return None, "all CPUs"


def coincidence_doc(
    spike_times_ns: Sequence[int],
    samples: Sequence[tuple[int, int, str, int, int]],
    cpus: set[int] | None,
    cpus_text: str,
) -> CoincidenceDoc:
    """The coincidence of these spikes with these samples, and what it says in sentences."""
    rows = coincidence(spike_times_ns, samples, cpus)
    interval = sorted(s[4] for s in samples)[len(samples) // 2] if samples else 0
    return CoincidenceDoc(
        cpus=sorted(cpus) if cpus else None,
        cpus_text=cpus_text,
        spikes=len(spike_times_ns),
        spike_times_ns=[int(t) for t in spike_times_ns],
        interval_ns=int(interval),
        rows=rows,
        sentences=verdicts(rows, cpus_text) if spike_times_ns else [],
    )
