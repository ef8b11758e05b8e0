"""Aliasing between two clocks: periodic interrupts on the device and constant-rate traffic.

A packet that arrives while an interrupt runs waits for its end; one whose processing
is interrupted waits for the whole interrupt. With 100 µs between packets and interrupts
shorter than 15 µs, the traffic samples the interrupts far too sparsely, and the packets
it does catch form the regular sawtooth lines of the URLLC studies' worst-event plots (Commun. Mag.
2020, section V-B; NOMS 2020, section V-C): the phase of interrupt k in the packet grid moves by a
fixed step each time, so the delay of the packets hit falls (or rises) linearly and
wraps around once per beat period

    1 / |f_pkt − N·f_irq|,   N = round(f_pkt / f_irq)

which is why restarting the load generator (a few ppm of rate) changes the picture.

Against a stored run with interrupt samples (its own /proc/interrupts samples, or an imported
campaign's recording), the interrupt cycle is the run's own (`interrupt_cycle`): the timer's
rate on the DuT's CPU and the kinds that come with every k-th tick (IRQ work at 83 Hz beside a
250 Hz timer: timer, timer, timer + IRQ work), not a default pattern; the two durations of the
cycle are fitted to the run's delayed packets unless given. The samples give rates, not
times: the phase and the clock's ppm come from the worst events' fit, and the overlay is
checked against the measured lines' slope (`worst_slope`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lowtail.analyze.document import latency_of
from lowtail.core import series
from lowtail.core.errors import UserError
from lowtail.core.units import format_ns
from lowtail.experiment.document import TrafficDocument
from lowtail.explain.sampled import dut_cpus_of, period_of, rates
from lowtail.models.document import (
    AliasingDocument,
    AliasingMeasurement,
    AliasingPattern,
    AliasingSpecDocument,
    Beat,
    InterruptClockFit,
    InterruptCompanion,
    InterruptCycleDoc,
    InterruptKindRate,
)
from lowtail.store.analyses import analysis
from lowtail.store.datadir import series_problem
from lowtail.store.db import Store, as_id
from lowtail.store.models import ALIASING, ModelLinks, save_model
from lowtail.store.runs import run_figures
from lowtail.trace.document import RoleDoc, TraceDocument

_CHUNK = 1 << 20
# The most packets one simulation walks through (about a minute of 2-core time per 10⁹).
MAX_PACKETS = 10**10


@dataclass
class AliasingSpec:
    rate_pps: float = 10_000.0
    irq_rate_hz: float = 250.0
    irq_durations_ns: list[float] = field(default_factory=lambda: [5_500.0, 8_200.0])
    duration_s: float = 30.0
    base_latency_ns: float = 3_100.0
    # The packet's own processing time: an interrupt that starts during it delays it too.
    service_ns: float = 0.0
    # First interrupt, relative to the first packet.
    irq_phase_ns: float = 0.0
    # Which entry of irq_durations_ns the first interrupt has.
    duration_offset: int = 0
    worst: int = 5000
    # Mean of exponential noise on every packet in `simulate` (seeded): without it the
    # undisturbed packets all tie and the worst-N plot shows no body band.
    jitter_ns: float = 0.0
    seed: int = 1

    def as_document(self) -> AliasingSpecDocument:
        """The parameters as the result stores them."""
        return {
            "rate_pps": self.rate_pps,
            "irq_rate_hz": self.irq_rate_hz,
            "irq_durations_ns": list(self.irq_durations_ns),
            "duration_s": self.duration_s,
            "base_latency_ns": self.base_latency_ns,
            "service_ns": self.service_ns,
            "irq_phase_ns": self.irq_phase_ns,
            "duration_offset": self.duration_offset,
            "worst": self.worst,
            "jitter_ns": self.jitter_ns,
            "seed": self.seed,
        }

    def check(self) -> None:
        numbers = (self.rate_pps, self.irq_rate_hz, self.duration_s)
        if not all(math.isfinite(x) and x > 0 for x in numbers):
            raise UserError("rate, interrupt rate and duration must be positive (finite) numbers")
        if self.rate_pps * self.duration_s > MAX_PACKETS:
            raise UserError(
                f"{self.rate_pps:g} pps for {self.duration_s:g} s is more than the {MAX_PACKETS:,} packets "
                f"this model simulates"
            )
        if not self.irq_durations_ns or min(self.irq_durations_ns) < 0:
            raise UserError("give at least one non-negative interrupt duration")
        if max(self.irq_durations_ns) >= 1e9 / self.irq_rate_hz:
            raise UserError(
                f"an interrupt of {format_ns(max(self.irq_durations_ns))} does not fit in its period, "
                f"{format_ns(1e9 / self.irq_rate_hz)} at {self.irq_rate_hz:.6g} Hz"
            )


def beat(rate_pps: float, irq_rate_hz: float) -> Beat:
    """The beat between the traffic and the nearest harmonic of the interrupt clock."""
    harmonic = max(1, round(rate_pps / irq_rate_hz))
    f_beat = abs(rate_pps - harmonic * irq_rate_hz)
    return {"harmonic": harmonic, "beat_hz": f_beat, "pattern_period_s": (1.0 / f_beat) if f_beat > 0 else None}


def latency_at(times_ns: np.ndarray, spec: AliasingSpec) -> np.ndarray:
    """Model latency of packets arriving at `times_ns` (ns since the first packet)."""
    period = 1e9 / spec.irq_rate_hz
    durations = np.asarray(spec.irq_durations_ns, dtype=np.float64)
    t = np.asarray(times_ns, dtype=np.float64) - spec.irq_phase_ns
    k = np.floor(t / period)
    start = k * period
    cycle = len(durations)
    d_now = durations[(k.astype(np.int64) + spec.duration_offset) % cycle]
    d_next = durations[(k.astype(np.int64) + 1 + spec.duration_offset) % cycle]
    waiting = np.maximum(0.0, start + d_now - t)
    # An interrupt starting while the packet is being processed delays it by its length.
    preempted = np.where(start + period < t + waiting + spec.service_ns, d_next, 0.0)
    return spec.base_latency_ns + spec.service_ns + waiting + preempted


def simulate(spec: AliasingSpec) -> AliasingPattern:
    """The worst-N events of constant-rate traffic against the interrupts."""
    spec.check()
    n = int(spec.rate_pps * spec.duration_s)
    gap = 1e9 / spec.rate_pps
    best_t = np.empty(0)
    best_l = np.empty(0)
    hits = 0
    rng = np.random.default_rng(spec.seed)
    for first in range(0, n, _CHUNK):
        idx = np.arange(first, min(n, first + _CHUNK), dtype=np.float64)
        times = idx * gap
        lat = latency_at(times, spec)
        hits += int(np.count_nonzero(lat > spec.base_latency_ns + spec.service_ns))
        if spec.jitter_ns > 0:
            lat = lat + rng.exponential(spec.jitter_ns, len(lat))
        best_t, best_l = _keep_worst(np.r_[best_t, times], np.r_[best_l, lat], spec.worst)
    order = np.argsort(best_t)
    return {
        "spec": spec.as_document(),
        "packets": n,
        "packets_delayed": hits,
        # Packets further apart than an interrupt lasts cannot resolve it: the lines appear.
        "undersampled": gap > max(spec.irq_durations_ns),
        **beat(spec.rate_pps, spec.irq_rate_hz),
        "worst": [[float(t), float(v)] for t, v in zip(best_t[order], best_l[order])],
    }


def _keep_worst(times: np.ndarray, lat: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(lat) <= n:
        return times, lat
    keep = np.argpartition(lat, len(lat) - n)[len(lat) - n :]
    return times[keep], lat[keep]


def fit_interrupt_clock(
    times_ns: np.ndarray, latencies_ns: np.ndarray, spec: AliasingSpec, max_ppm: float = 500.0
) -> InterruptClockFit:
    """Find the interrupt frequency and phase, in the capture's clock, that explain the
    delayed packets of a measurement (`times_ns` since its first packet).

    Two oscillators never agree to the ppm, and the pattern depends on exactly that
    difference, so the nominal rate alone cannot reproduce a measured pattern. Delayed
    packets arrive within one interrupt length after an interrupt starts, so they cluster
    in phase at the true frequency: the frequency maximising the Rayleigh statistic
    |Σ exp(2πi·f·t)| over ±max_ppm is the interrupt clock. The phase and which interrupt
    is the long one are then chosen to minimise the median error over the delayed packets."""
    times = np.asarray(times_ns, dtype=np.float64)
    lat = np.asarray(latencies_ns, dtype=np.float64)
    excess = lat - spec.base_latency_ns - spec.service_ns
    hit = excess > 0.5 * min(spec.irq_durations_ns)
    if np.count_nonzero(hit) < 10:
        raise UserError(
            f"only {int(np.count_nonzero(hit))} packets are delayed by more than half the shortest "
            "interrupt: too few to find the interrupt clock (need 10); check --irq-durations"
        )
    t, e = times[hit], excess[hit]
    span = float(t.max() - t.min()) or 1.0
    f0 = spec.irq_rate_hz
    step = 1e9 / span / 8.0
    width = f0 * max_ppm * 1e-6
    freqs = np.arange(f0 - width, f0 + width + step, step)
    # Where each delayed packet puts the interrupt start, taking the mean duration.
    starts = t - (float(np.mean(spec.irq_durations_ns)) - e)
    power = np.array([_rayleigh(starts, f) for f in freqs])
    f_best = float(freqs[int(np.argmax(power))])
    fine = np.linspace(f_best - step, f_best + step, 41)
    f_best = float(fine[int(np.argmax([_rayleigh(starts, f) for f in fine]))])
    angle = float(np.angle(np.sum(np.exp(-2j * np.pi * f_best * starts * 1e-9))))
    period = 1e9 / f_best
    phase0 = (-angle / (2 * np.pi) * period) % period
    index = np.round((starts - phase0) / period)
    # Locked clocks (the interrupt period an exact multiple of the packet spacing, as a
    # timer tick and a pacer on one clock source make them): every delayed packet meets its
    # interrupt at the same place, the measured lines are flat, and the clock is the
    # traffic's rate over the harmonic. It is tried beside the free fit, and kept when it
    # explains the delayed packets as well.
    harmonic = max(1, round(spec.rate_pps / f0))
    locked_period = 1e9 * harmonic / spec.rate_pps
    periods = [None] + ([locked_period] if abs(1e9 / locked_period / f0 - 1) * 1e6 <= max_ppm else [])
    durations = np.asarray(spec.irq_durations_ns, dtype=np.float64)
    best = None
    for offset in range(len(spec.irq_durations_ns)):
        # With the right durations, each delayed packet gives its interrupt's exact start,
        # and the starts lie on a line k·T + φ: fit it, drop what does not fit, refit.
        exact = t + e - durations[(index.astype(np.int64) + offset) % len(durations)]
        for fixed in periods:
            slope, intercept, keep = _interrupt_line(index, exact, fixed, min(spec.irq_durations_ns))
            for phase in _phases_meeting_the_hits(slope * index + intercept, t, keep, intercept, spec.service_ns):
                trial = AliasingSpec(
                    **{**asdict(spec), "irq_rate_hz": 1e9 / slope, "irq_phase_ns": phase, "duration_offset": offset}
                )
                err = float(np.median(np.abs(latency_at(t, trial) - lat[hit])))
                # The locked clock is the simpler model: kept unless the free one is better by more than noise.
                rank = err - (_LOCKED_PREFERENCE_NS if fixed is not None else 0.0)
                if best is None or rank < best[0]:
                    best = (rank, err, trial, fixed is not None)
    assert best is not None  # at least one trial is made
    _, err, fitted, locked = best
    # Report the first interrupt after the first packet: moving the phase back by j
    # periods renumbers the interrupts, so the duration cycle moves with it.
    period = 1e9 / fitted.irq_rate_hz
    j = math.floor(fitted.irq_phase_ns / period)
    fitted.irq_phase_ns -= j * period
    fitted.duration_offset = (fitted.duration_offset - j) % len(spec.irq_durations_ns)
    return {
        "irq_rate_hz": fitted.irq_rate_hz,
        "offset_ppm": (fitted.irq_rate_hz / f0 - 1.0) * 1e6,
        "irq_phase_ns": fitted.irq_phase_ns,
        "duration_offset": fitted.duration_offset,
        "median_error_ns": err,
        "warning": poor_fit_warning(err, min(spec.irq_durations_ns)),
        "locked": locked,
        "delayed_packets": int(np.count_nonzero(hit)),
        "rayleigh": float(power.max()) / math.sqrt(len(t)),
    }


POOR_FIT_SHARE = 0.5
"""A fit missing the delayed packets by more than this share of the shortest interrupt
(median) does not explain them: they are not this periodic interrupt's doing."""


def poor_fit_warning(median_error_ns: float, shortest_ns: float) -> str | None:
    """What to say about a fitted interrupt clock whose median error is too large to trust."""
    if median_error_ns <= POOR_FIT_SHARE * shortest_ns:
        return None
    return (
        f"the fitted interrupt clock misses the delayed packets by {format_ns(median_error_ns)} (median), more "
        f"than half the shortest interrupt ({format_ns(shortest_ns)}): these delays are not the periodic "
        "interrupt described (check --irq-rate and --irq-durations, or look for another cause), so the "
        "pattern shown does not explain them"
    )


# How much larger a locked clock's median error may be than a free fit's for it to be kept.
_LOCKED_PREFERENCE_NS = 10.0


def _interrupt_line(
    index: np.ndarray, exact: np.ndarray, period: float | None, shortest_ns: float
) -> tuple[float, float, np.ndarray]:
    """The line k·T + φ through the interrupt starts the delayed packets give (T fitted, or
    fixed when given), refitted three times without the starts that do not fit it."""
    keep = np.ones(len(exact), dtype=bool)
    slope = intercept = 0.0
    for _ in range(3):
        if period is None:
            slope, intercept = np.polyfit(index[keep], exact[keep], 1)
        else:
            slope, intercept = period, float(np.median(exact[keep] - period * index[keep]))
        keep = np.abs(exact - (slope * index + intercept)) < max(200.0, 0.02 * shortest_ns)
        if np.count_nonzero(keep) < 3:
            break
    return float(slope), float(intercept), keep


def _phases_meeting_the_hits(
    predicted_starts: np.ndarray, arrivals: np.ndarray, keep: np.ndarray, intercept: float, service_ns: float
) -> list[float]:
    """The fitted phase, and earlier ones that put the interrupts at or before the packets
    they delayed. A packet delayed by an interrupt arrived after it started (or while it was
    processed); a fitted start a few ns after such a packet, from noise on the latencies,
    makes the model miss it. Where the clocks are locked every delayed packet lies on that
    edge, and the fit misses them all."""
    late = (predicted_starts - arrivals - service_ns)[keep & (predicted_starts > arrivals + service_ns)]
    shifts = {0.0} | {float(q) + 1.0 for q in (np.quantile(late, [0.5, 0.9, 1.0]) if len(late) else [])}
    return [intercept - s for s in sorted(shifts)]


def _rayleigh(times_ns: np.ndarray, f_hz: float) -> float:
    return float(np.abs(np.sum(np.exp(-2j * np.pi * f_hz * times_ns * 1e-9))))


# How finely `worst_slope` looks: latency bins, and slopes from 10 ns/s to 1 ms/s of latency.
_SLOPE_BIN_NS = 250.0
_SLOPES = np.logspace(-8, -3, 200)


def worst_slope(worst: list[list[float]], base_latency_ns: float) -> float | None:
    """The slope of the worst events' lines (ns of latency per ns of time; negative: falling),
    from the events themselves: the delayed ones (above 30 % of their 99th-percentile excess,
    so the body's jitter stays out) in their episodes (bursts apart by 20 median gaps), and the
    slope at which each episode's events, moved back along it, gather in the fewest latency
    bins. None with fewer than 10 delayed events."""
    w = np.asarray(worst, dtype=np.float64).reshape(-1, 2)
    w = w[np.argsort(w[:, 0], kind="stable")]
    excess = w[:, 1] - base_latency_ns
    if excess.size < 10:
        return None
    hit = excess > max(1_000.0, 0.3 * float(np.quantile(excess, 0.99)))
    t, e = w[hit, 0], excess[hit]
    if t.size < 10:
        return None
    gaps = np.diff(t)
    cuts = np.flatnonzero(gaps > 20 * max(1.0, float(np.median(gaps)))) + 1
    episodes = [(tt - tt[0], ee) for tt, ee in zip(np.split(t, cuts), np.split(e, cuts)) if tt.size >= 4]
    if not episodes:
        return None

    def gathered(slope: float) -> float:
        total = 0.0
        for tt, ee in episodes:
            _, counts = np.unique(np.floor((ee + slope * tt) / _SLOPE_BIN_NS), return_counts=True)
            total += float((counts.astype(np.float64) ** 2).sum())
        return total

    candidates = np.r_[-_SLOPES[::-1], 0.0, _SLOPES]
    best = float(candidates[int(np.argmax([gathered(x) for x in candidates]))])
    if best == 0.0:
        return 0.0
    fine = np.linspace(0.8 * best, 1.2 * best, 81)
    # Read back as the events' own slope: moving them back by `slope` undid a fall of `-slope`.
    return -float(fine[int(np.argmax([gathered(x) for x in fine]))])


# A kind is part of the timer's cycle when it comes with every k-th tick: its rate within this
# share of the timer's over k, k at most MAX_CYCLE, and at least this share of the timer's rate.
CYCLE_TOLERANCE = 0.02
MAX_CYCLE = 12
MIN_RATE_SHARE = 0.05
_TIMER = "LOC"


def interrupt_cycle(
    samples: list[tuple[int, int, str, int, int]], cpus: set[int] | None, source: str
) -> InterruptCycleDoc | None:
    """The interrupt cycle on the DuT's CPU from a run's interrupt samples: the local timer
    (or the most frequent kind), the kinds that come with every k-th tick, and the cycle of
    ticks they make ("LOC", "LOC", "LOC+IWI"); None without samples on those CPUs."""
    found = rates(samples, cpus)
    if not found:
        return None
    by_cpu: dict[int, dict[str, float]] = {}
    for r in found:
        by_cpu.setdefault(r["cpu"], {})[r["kind"]] = r["rate_hz"]
    cpu = max(by_cpu, key=lambda c: (by_cpu[c].get(_TIMER, 0.0), -c))
    on = by_cpu[cpu]
    base = _TIMER if _TIMER in on else max(on, key=lambda k: on[k])
    base_rate = on[base]
    companions: list[InterruptCompanion] = []
    others: list[InterruptKindRate] = []
    for kind, rate in sorted(on.items(), key=lambda kv: -kv[1]):
        if kind == base:
            continue
        every = round(base_rate / rate) if rate > 0 else 0
        steady = 1 <= every <= MAX_CYCLE and abs(base_rate / every / rate - 1) <= CYCLE_TOLERANCE
        if steady and rate >= MIN_RATE_SHARE * base_rate:
            companions.append({"kind": kind, "rate_hz": rate, "every": every})
        else:
            others.append({"kind": kind, "rate_hz": rate})
    length = 1
    for c in companions:
        length = math.lcm(length, int(c["every"]))
    length = length if length <= MAX_CYCLE else max((int(c["every"]) for c in companions), default=1)
    cycle = [
        "+".join([base, *(c["kind"] for c in companions if (i + 1) % int(c["every"]) == 0)]) for i in range(length)
    ]
    period = period_of(samples)
    span = max(s[0] for s in samples) - min(s[0] - s[4] for s in samples)
    return InterruptCycleDoc(
        source=source,
        cpu=cpu,
        period_ns=period,
        span_ns=int(span),
        base=base,
        base_rate_hz=base_rate,
        companions=companions,
        others=others,
        cycle=cycle,
        durations_ns=[],
        resolution=f"counts every {format_ns(period)} over {format_ns(span)}: which kinds recur on CPU {cpu} and "
        f"how often (a count is exact to one interrupt over the recording), not when each fired — the phase and "
        f"the clock's ppm are fitted to the worst events",
    )


def cycle_durations(cycle: list[str], short_ns: float, long_ns: float) -> list[float]:
    """Each tick of the cycle's duration: the timer's alone `short_ns`, with a companion `long_ns`."""
    return [long_ns if "+" in slot else short_ns for slot in cycle]


# The short level is searched at these shares of the long one (the fit's median error decides).
_SHORT_SHARES = (0.4, 0.5, 0.6, 0.67, 0.75, 0.85, 1.0)


def fitted_levels(
    spec: AliasingSpec, measured: AliasingMeasurement, cycle: list[str], max_ppm: float
) -> tuple[list[float], InterruptClockFit]:
    """The cycle's durations from the run's worst events: the long level is the top of the
    delayed packets' excess (its 99th percentile), the short one the share of it whose fit
    misses the delayed packets least; and that fit."""
    pts = np.asarray(measured["worst"], dtype=np.float64).reshape(-1, 2)
    excess = pts[:, 1] - spec.base_latency_ns - spec.service_ns
    delayed = excess[excess > max(500.0, 0.3 * float(np.quantile(excess, 0.99)))] if excess.size else excess
    if delayed.size < 10:
        raise UserError(
            f"the run has {int(delayed.size)} clearly delayed packets among its worst events: too few to fit the "
            "interrupt cycle's durations (give --irq-durations)"
        )
    long_ns = float(np.quantile(delayed, 0.99))
    period_ns = 1e9 / spec.irq_rate_hz
    if long_ns >= period_ns:
        # Stalls longer than a tick are not the interrupt cycle: no durations of it fit them.
        raise UserError(
            f"the run's delayed packets wait up to {format_ns(long_ns)} (99th percentile of their excess), "
            f"longer than the interrupt period ({format_ns(period_ns)} at {spec.irq_rate_hz:.6g} Hz): these are "
            f"not the interrupt cycle's delays (`lowtail explain` names their cause); give --irq-durations to "
            f"simulate the cycle anyway"
        )
    best: tuple[float, list[float], InterruptClockFit] | None = None
    for share in _SHORT_SHARES if any("+" in slot for slot in cycle) else (1.0,):
        durations = cycle_durations(cycle, share * long_ns, long_ns)
        trial = dataclasses.replace(spec, irq_durations_ns=durations)
        fit = fit_interrupt_clock(pts[:, 0], pts[:, 1], trial, max_ppm)
        if best is None or fit["median_error_ns"] < best[0]:
            best = (fit["median_error_ns"], durations, fit)
    assert best is not None
    return best[1], best[2]


# -- against a stored run -----------------------------------------------------------------


def measured_worst(store: Store, text: str) -> tuple[AliasingMeasurement, ModelLinks]:
    """Worst events of a stored run (12, run:12) or analysis (analysis:7), times relative to
    its first packet, with its rate, span and median; and the ids to link a result to."""
    kind, _, ident = text.partition(":")
    if not ident:
        kind, ident = "run", text
    if as_id(ident) is None or kind not in ("run", "analysis"):
        raise UserError(f"--run {text!r}: give a run id (12 or run:12) or analysis:ID")
    keys: ModelLinks = {}
    if kind == "run":
        r = run_figures(store, int(ident), also=("analysis",))
        if r["analysis_id"] is None:
            raise UserError(f"run {ident} has no analysis")
        analysis_id, keys["run_id"] = r["analysis_id"], r["run_id"]
    else:
        analysis_id = int(ident)
    a = analysis(store, analysis_id)
    keys.update({"analysis_id": a["analysis_id"], "source": f"{kind} {ident}"})
    if not a["worst"] or (a["duration_ns"] or 0) <= 0 or a["sent"] < 2:
        raise UserError(f"{kind} {ident}: no worst events stored to compare with")
    start, span = _packet_clock(store, a)
    return (
        {
            "worst": [[t - start, v] for t, v, _ in a["worst"]],
            "rate_pps": (a["sent"] - 1) / (span / 1e9),
            "duration_ns": span,
            "base_latency_ns": a["lat_p50_ns"] or 0,  # worst events stored: latencies were matched
            "analysis_id": a["analysis_id"],
        },
        keys,
    )


def _packet_clock(store: Store, a: Mapping[str, Any]) -> tuple[int, int]:
    """First packet time and span of an analysis. The beat depends on the rate to the ppm,
    so the series' exact first and last timestamps (Parquet column statistics, no data read)
    are preferred over the analysis window, which starts at the trim, not at a packet."""
    path = a.get("series_path")
    if path and Path(path).exists():
        found_samples = latency_of(a["figures"]).get("samples")
        samples = None if found_samples is None else int(found_samples)
        problem = series_problem(store, path, samples, a["lat_min_ns"], a["lat_max_ns"])
        if problem:
            raise UserError(f"analysis {a['analysis_id']}: {problem}")
        found = series.pre_time_range(path)
        if found is not None and found[1] > found[0]:
            return found[0], found[1] - found[0]
    return (a["start_ts_ns"] or 0) + a["trim_ns"], a["duration_ns"]


def with_measurement(spec: AliasingSpec, measured: AliasingMeasurement) -> None:
    """Take the traffic's rate, span and median from a measurement (`measured_worst`)."""
    spec.rate_pps = measured["rate_pps"]
    spec.duration_s = measured["duration_ns"] / 1e9
    spec.base_latency_ns = float(measured["base_latency_ns"])


def aliasing_model(
    spec: AliasingSpec,
    measured: AliasingMeasurement | None = None,
    fit: bool = True,
    max_ppm: float = 500.0,
    fitted: InterruptClockFit | None = None,
) -> AliasingDocument:
    """The aliasing pattern of `spec`; with a measurement and `fit`, the interrupt clock is
    first fitted to its delayed packets (and `spec` takes the fitted frequency and phase; a
    fit made already is given as `fitted`), and the slopes of the measured and modelled lines
    are set side by side. The document `lowtail model aliasing --json` prints."""
    if measured is not None and fit:
        if fitted is None:
            pts = np.array(measured["worst"], dtype=np.float64)
            fitted = fit_interrupt_clock(pts[:, 0], pts[:, 1], spec, max_ppm)
        spec.irq_rate_hz, spec.irq_phase_ns = fitted["irq_rate_hz"], fitted["irq_phase_ns"]
        spec.duration_offset = fitted["duration_offset"]
    model = simulate(spec)
    doc: AliasingDocument = {"model": model, "fit": fitted if fit else None, "measured": measured, "partial": False}
    if measured is not None:
        per_s = 1e9  # slopes in ns of latency per second
        found = worst_slope(measured["worst"], spec.base_latency_ns)
        drawn = worst_slope(model["worst"], spec.base_latency_ns)
        doc["slopes"] = {
            "measured_ns_per_s": None if found is None else found * per_s,
            "model_ns_per_s": None if drawn is None else drawn * per_s,
        }
    return doc


@dataclass(frozen=True)
class AliasingOptions:
    """The pattern to simulate: the interrupts, the packet's service and the traffic of
    `spec`; with `run` (12, run:12, analysis:7) the traffic's rate, span and median come from
    that stored run (unless given here) and, with `fit`, the interrupt clock is fitted to it
    within ± `max_ppm`."""

    spec: AliasingSpec = field(default_factory=AliasingSpec)
    run: str | None = None
    fit: bool = True
    max_ppm: float = 500.0
    rate_pps: float | None = None
    duration_s: float | None = None
    base_latency_ns: float | None = None
    # Given: these, not the run's interrupt cycle (a run without interrupt samples uses `spec`'s).
    irq_rate_hz: float | None = None
    irq_durations_ns: list[float] | None = None


def aliasing_and_store(store: Store | None, opts: AliasingOptions, *, save: bool = True) -> AliasingDocument:
    """The aliasing model of `opts` (`aliasing_model`, against its run when it names one),
    stored as an `aliasing` model result when `save` (the document then carries its `model_id`)."""
    spec = dataclasses.replace(opts.spec, irq_durations_ns=list(opts.spec.irq_durations_ns))
    measured: AliasingMeasurement | None = None
    keys: ModelLinks = {}
    if opts.run is not None:
        if store is None:
            raise UserError("--run needs the database (--db)")
        measured, keys = measured_worst(store, opts.run)
        with_measurement(spec, measured)
    if opts.rate_pps is not None:
        spec.rate_pps = opts.rate_pps
    if opts.duration_s is not None:
        spec.duration_s = opts.duration_s
    if opts.base_latency_ns is not None:
        spec.base_latency_ns = opts.base_latency_ns
    if opts.irq_rate_hz is not None:
        spec.irq_rate_hz = opts.irq_rate_hz
    if opts.irq_durations_ns is not None:
        spec.irq_durations_ns = list(opts.irq_durations_ns)
    cycle = None
    fitted = None
    run_id = keys.get("run_id")
    if store is not None and measured is not None and run_id is not None and opts.irq_rate_hz is None:
        cycle = run_cycle(store, run_id)
    if cycle is not None and measured is not None:
        spec.irq_rate_hz = cycle["base_rate_hz"]
        if opts.irq_durations_ns is not None and len(opts.irq_durations_ns) == 2:
            # Two durations given: the timer's alone and with its companion, laid on the run's cycle.
            spec.irq_durations_ns = cycle_durations(cycle["cycle"], *opts.irq_durations_ns)
        elif opts.irq_durations_ns is None:
            spec.irq_durations_ns, fitted = fitted_levels(spec, measured, cycle["cycle"], opts.max_ppm)
        cycle["durations_ns"] = list(spec.irq_durations_ns)
    spec.check()
    doc = aliasing_model(spec, measured, opts.fit, opts.max_ppm, fitted if opts.fit else None)
    if cycle is not None:
        doc["cycle"] = cycle
    if save:
        if store is None:
            raise UserError("storing the model needs the database (--db)")
        inputs = {
            "irq_rate_hz": opts.irq_rate_hz or opts.spec.irq_rate_hz,
            "irq_durations_ns": opts.irq_durations_ns or opts.spec.irq_durations_ns,
            "run": opts.run,
            "fit": opts.fit,
            "cycle": None if cycle is None else cycle["cycle"],
        }
        doc["model_id"] = save_model(
            store,
            ALIASING,
            inputs,
            doc,
            source=keys.get("source"),
            run_id=keys.get("run_id"),
            analysis_id=keys.get("analysis_id"),
        )
    return doc


def run_cycle(store: Store, run_id: int) -> InterruptCycleDoc | None:
    """The interrupt cycle of a stored run from its interrupt samples: a guest's when it has
    one (the DuT's own kernel), else the host's, on the DuT's CPU; None without samples."""
    from lowtail.store import runs as runstore
    from lowtail.store.explain import run_trace
    from lowtail.store.host import run_interrupts

    (run,) = runstore.select_runs(store, run_ids=[run_id])
    trace = run_trace(store, run_id) or TraceDocument()
    plan = (run.get("traffic") or TrafficDocument()).get("core_plan")
    roles = trace.get("roles") or {"dut": RoleDoc(host="", cpus=list(plan["dut"]) if plan else [], pids=[], comms=[])}
    for source in ("guest", "host"):
        samples = run_interrupts(store, run_id, source)
        if samples:
            found = interrupt_cycle(samples, dut_cpus_of(run, source, roles), source)
            if found is not None:
                return found
    return None
