"""Whether lowtail's stated confidence is what it delivers, on synthetic runs whose truth is
known (bench/latency_models.py): observed against nominal, side by side.

1. Interval coverage at p50/p99/p99.9/p99.99 (95 % stated) for independent packets, a FIFO
   behind stalls (truth analytic) and a Lindley queue behind stalls (truth from a long
   seeded series), beside the classical order-statistic interval that assumes independence.
2. A/A false calls: two configurations drawn from one model with run-to-run variation
   (per-run random shift and scale), at 2 and 3 repetitions; nominal: at most 5 % of
   comparisons (Holm over the family makes it fewer).
3. A/B power: the share of pairs called at p50/p99/p99.9 against a shift of the base latency.

    .venv/bin/python bench/stated_confidence.py [--runs 400] [--packets 200000] [--pairs 400]

Small versions of each run in `make test` (tests/compare/test_intervals.py,
test_differences_simulated.py); this is the larger measurement docs/statistics.md cites."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import latency_models as models  # noqa: E402
from lowtail import _native, confidence  # noqa: E402
from lowtail.compare import differences as diffs  # noqa: E402
from lowtail.compare.intervals import Evidence, interval  # noqa: E402

KEYS = {"p50": "0.5", "p99": "0.99", "p99_9": "0.999", "p99_99": "0.9999"}
LEVEL = 0.95
SHIFT_SD_NS, SCALE_SD = 300.0, 0.05
Model = Callable[[np.random.Generator, int], np.ndarray]


def _share(k: int, n: int) -> str:
    """ "94.5 % (±2.3)": a share with its binomial standard error's two-sigma half-width."""
    if n == 0:
        return "–"
    p = k / n
    return f"{100 * p:5.1f} % (±{200 * math.sqrt(max(p * (1 - p), 1e-12) / n):.1f})"


def coverage(name: str, model: Model, truth: dict[str, int], runs: int, packets: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ts = models.timestamps(packets)
    stated = dict.fromkeys(KEYS, 0)
    held = dict.fromkeys(KEYS, 0)
    classical = dict.fromkeys(KEYS, 0)
    started = time.perf_counter()
    for _ in range(runs):
        x = model(rng, packets)
        summary = _native.SeriesSummary()
        summary.record(ts, x)
        ev = Evidence([summary])
        ordered = np.sort(x)
        for k, q in KEYS.items():
            c = confidence.rank_interval(packets, Fraction(q), LEVEL)
            if c.bounded_below and c.bounded_above:
                classical[k] += bool(ordered[c.lower - 1] <= truth[k] <= ordered[c.upper - 1])
            iv = interval(ev, k, LEVEL)
            if iv.resolvable and iv.lower_ns is not None and iv.upper_ns is not None:
                stated[k] += 1
                held[k] += iv.lower_ns <= truth[k] <= iv.upper_ns
    print(f"\n{name}: {runs} runs of {packets:,} packets ({time.perf_counter() - started:.0f} s)")
    print(f"  {'':8} {'nominal':>8}  {'lowtail (bounded runs)':>24}  {'bounded':>8}  {'classical':>18}")
    for k in KEYS:
        print(
            f"  {k:8} {100 * LEVEL:7.0f} %  {_share(held[k], stated[k]):>24}  {stated[k]:>8}"
            f"  {_share(classical[k], runs):>18}"
        )


def _nearest_rank(x: np.ndarray, keys: dict[str, Fraction]) -> dict[str, int]:
    ranks = {k: math.ceil(q * len(x)) - 1 for k, q in keys.items()}
    ordered = np.partition(x, sorted(ranks.values()))
    return {k: int(ordered[r]) for k, r in ranks.items()}


def _configuration(index: int, runs: list[np.ndarray], keys: dict[str, Fraction]) -> dict[str, object]:
    """A configuration as a comparison document holds it (what `differences` reads)."""
    bounded = {k: confidence.rank_interval(len(runs[0]), q, LEVEL).resolvable for k, q in keys.items()}
    return {
        "index": index,
        "label": f"c{index}",
        "key": {"c": index},
        "repetitions": len(runs),
        "latency_ns": _nearest_rank(np.concatenate(runs), keys),
        "per_run": [{"latency_ns": _nearest_rank(x, keys), "resolvable": bounded} for x in runs],
        "degraded": [],
        "emulated": False,
    }


def _draw(rng: np.random.Generator, model: Model, reps: int, packets: int, shift_ns: float) -> list[np.ndarray]:
    return [models.shifted(model(rng, packets) + int(shift_ns), rng, SHIFT_SD_NS, SCALE_SD) for _ in range(reps)]


def false_calls(name: str, model: Model, pairs: int, packets: int, seed: int) -> None:
    keys = {k: Fraction(q) for k, q in KEYS.items() if k != "p99_99"}
    print(f"\nA/A, {name}: {pairs} pairs of configurations drawn alike, {packets:,} packets a repetition")
    print(f"  {'reps':>4}  {'nominal':>8}  {'comparisons called':>20}  {'pairs with any call':>20}")
    for reps in (2, 3):
        rng = np.random.default_rng(seed + reps)
        called = comparisons = any_call = 0
        for _ in range(pairs):
            a = _configuration(0, _draw(rng, model, reps, packets, 0.0), keys)
            b = _configuration(1, _draw(rng, model, reps, packets, 0.0), keys)
            found, _, family = diffs.differences([a, b], LEVEL, tuple(keys))
            called += len(found)
            comparisons += family["comparisons"]
            any_call += bool(found)
        print(f"  {reps:>4}  {'≤ 5 %':>8}  {_share(called, comparisons):>20}  {_share(any_call, pairs):>20}")


def power(name: str, model: Model, pairs: int, packets: int, seed: int) -> None:
    keys = {k: Fraction(q) for k, q in KEYS.items() if k != "p99_99"}
    shifts = (0, 250, 500, 1_000, 2_000, 4_000)
    print(f"\nA/B power, {name}: base latency shifted (base {models.BASE_NS:,} ns), 3 repetitions, {pairs} pairs")
    print(f"  {'shift':>8}  " + "  ".join(f"{k:>16}" for k in keys) + f"  {'wrong way':>9}")
    for shift in shifts:
        rng = np.random.default_rng(seed + shift)
        found_at = dict.fromkeys(keys, 0)
        wrong = 0
        for _ in range(pairs):
            a = _configuration(0, _draw(rng, model, 3, packets, 0.0), keys)
            b = _configuration(1, _draw(rng, model, 3, packets, float(shift)), keys)
            for d in diffs.differences([a, b], LEVEL, tuple(keys))[0]:
                found_at[d["percentile"]] += 1
                wrong += d["lower"] != "c0"
        print(f"  {shift:>5} ns  " + "  ".join(f"{_share(found_at[k], pairs):>16}" for k in keys) + f"  {wrong:>9}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per coverage model")
    ap.add_argument("--packets", type=int, default=200_000, help="packets per simulated run")
    ap.add_argument("--pairs", type=int, default=400, help="pairs of configurations for A/A and A/B")
    ap.add_argument("--pair-packets", type=int, default=50_000, help="packets per repetition in A/A and A/B")
    args = ap.parse_args()

    independent = {k: models.independent_quantile(float(q)) for k, q in KEYS.items()}
    stalled = {k: models.stalls_quantile(float(q)) for k, q in KEYS.items()}
    long_lindley = models.lindley(np.random.default_rng(99), 20_000_000)
    lindley = {k: int(np.quantile(long_lindley, float(q), method="inverted_cdf")) for k, q in KEYS.items()}
    del long_lindley
    coverage("independent packets", models.independent, independent, args.runs, args.packets, 1)
    coverage("FIFO behind stalls (truth analytic)", models.stalls, stalled, args.runs, args.packets, 2)
    coverage(
        "Lindley queue behind stalls (truth: 20M-packet series)", models.lindley, lindley, args.runs, args.packets, 3
    )
    false_calls("independent packets + run-to-run shift/scale", models.independent, args.pairs, args.pair_packets, 10)
    false_calls("FIFO behind stalls + run-to-run shift/scale", models.stalls, args.pairs, args.pair_packets, 20)
    power("independent packets", models.independent, max(100, args.pairs // 4), args.pair_packets, 30)


if __name__ == "__main__":
    main()
