"""Whether lowtail's stated confidence is what it delivers, on synthetic runs whose truth is
known (bench/latency_models.py): observed against stated, side by side.

1. Percentile intervals (95 % two-sided) and the one-sided bounds behind PASS/FAIL (95 %) at
   p50/p99/p99.9/p99.99, for independent packets, a FIFO behind stalls, a Lindley queue
   behind stalls, and the edges of issue 35: rare 1 ms stalls (about 5 in a 200,000-packet
   run, 10 in a 1,000,000-packet one) and 60 ms stalls about 3 times a run. Printed: how
   often the interval held the truth where it was bounded (stated ≥ 93 %), how many runs it
   bounded, how often a bounded interval missed the truth out of all runs, and how often
   the upper bound fell below / the lower bound rose above the truth out of all runs (the
   errors a PASS or a FAIL would make; stated ≤ 5 %). The classical interval beside them.
2. A/A false calls (two configurations drawn alike) at 2 and 3 repetitions: run-to-run
   shift and scale, ties (integer-microsecond stamps; nanosecond stamps without run-to-run
   variation), two-level run-to-run variation (one core placement or another); stated ≤ 5 %
   of comparisons (Holm over the family makes it fewer).
3. A/B power: the share of pairs called at p50/p99/p99.9 against a shift of the base latency.
4. EVT on an exponential tail (ξ = 0): how often `model evt` calls the tail bounded (stated:
   at most 2.5 %, one side of a 95 % interval; judged ≤ 5 %); on a bounded one (ξ = −0.3),
   how often it is called bounded and how often its own series refutes a bounded fit.
5. The verdict's advice on inconclusive runs: of the runs told "a run about M packets longer
   would be decided about half the time", the share that a run of that length (the same
   process, another seed) decides (stated: about half).

    .venv/bin/python bench/stated_confidence.py [--runs 400] [--packets 200000] [--pairs 400]

Small seeded versions of each run in `make test` (tests/compare/test_intervals.py,
test_differences_simulated.py, test_edges.py, tests/models/test_evt_honest.py); this is the
larger measurement docs/statistics.md cites."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import latency_models as models  # noqa: E402
from lowtail import _native
from lowtail.compare import differences as diffs  # noqa: E402
from lowtail.compare.intervals import Evidence, bounds_document  # noqa: E402
from lowtail.core import confidence  # noqa: E402

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
    bounded, held, wrong, below, above, classical = (dict.fromkeys(KEYS, 0) for _ in range(6))
    started = time.perf_counter()
    for _ in range(runs):
        x = model(rng, packets)
        summary = _native.SeriesSummary()
        summary.record(ts, x)
        doc = bounds_document(Evidence([summary]), list(KEYS), LEVEL, LEVEL)
        ordered = np.sort(x)
        for k, q in KEYS.items():
            c = confidence.rank_interval(packets, Fraction(q), LEVEL)
            if c.bounded_below and c.bounded_above:
                classical[k] += bool(ordered[c.lower - 1] <= truth[k] <= ordered[c.upper - 1])
            iv, one = doc["percentiles"][k], doc["bounds"][k]
            if iv["resolvable"]:
                bounded[k] += 1
                ok = iv["lower_ns"] <= truth[k] <= iv["upper_ns"]  # type: ignore[operator]
                held[k] += ok
                wrong[k] += not ok
            below[k] += one["upper_ns"] is not None and one["upper_ns"] < truth[k]
            above[k] += one["lower_ns"] is not None and one["lower_ns"] > truth[k]
    print(f"\n{name}: {runs} runs of {packets:,} packets ({time.perf_counter() - started:.0f} s)")
    print(
        f"  {'':8} {'two-sided held':>16} {'(bounded)':>10} {'missed/all':>11}   "
        f"{'upper < truth':>14} {'lower > truth':>14}   {'classical':>16}"
    )
    print(f"  {'stated':8} {'≥ 93 %':>16} {'':>10} {'≤ 5 %':>11}   {'≤ 5 %':>14} {'≤ 5 %':>14}   {'(95 %)':>16}")
    for k in KEYS:
        print(
            f"  {k:8} {_share(held[k], bounded[k]):>16} {bounded[k]:>10} {_share(wrong[k], runs):>11}   "
            f"{_share(below[k], runs):>14} {_share(above[k], runs):>14}   {_share(classical[k], runs):>16}"
        )


def _nearest_rank(x: np.ndarray, keys: dict[str, Fraction]) -> dict[str, int]:
    ranks = {k: math.ceil(q * len(x)) - 1 for k, q in keys.items()}
    ordered = np.partition(x, sorted(ranks.values()))
    return {k: int(ordered[r]) for k, r in ranks.items()}


def _configuration(index: int, runs: list[np.ndarray], keys: dict[str, Fraction]) -> dict[str, object]:
    """A configuration as a comparison document holds it (what `differences` reads): each
    repetition's exact values, and its own intervals (whether its packets bound each
    percentile, and its sampling error), computed as an analysis computes them."""
    per_run = []
    for x in runs:
        summary = _native.SeriesSummary()
        summary.record(models.timestamps(len(x)), x)
        own = bounds_document(Evidence([summary]), list(keys), LEVEL, LEVEL)["percentiles"]
        per_run.append(
            {
                "latency_ns": _nearest_rank(x, keys),
                "resolvable": {k: own[k]["resolvable"] for k in keys},
                "intervals": {k: [own[k]["lower_ns"], own[k]["upper_ns"]] for k in keys},
            }
        )
    return {
        "index": index,
        "label": f"c{index}",
        "key": {"c": index},
        "repetitions": len(runs),
        "latency_ns": _nearest_rank(np.concatenate(runs), keys),
        "per_run": per_run,
        "degraded": [],
        "emulated": False,
    }


Variation = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def shift_and_scale(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Run-to-run variation: a per-run normal shift and lognormal scale."""
    return models.shifted(x, rng, SHIFT_SD_NS, SCALE_SD)


def none(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """No run-to-run variation at all."""
    return x


def _draw(
    rng: np.random.Generator,
    model: Model,
    reps: int,
    packets: int,
    shift_ns: float,
    vary: Variation = shift_and_scale,
    after: Callable[[np.ndarray], np.ndarray] = lambda x: x,
) -> list[np.ndarray]:
    return [after(vary(model(rng, packets) + int(shift_ns), rng)) for _ in range(reps)]


def false_calls(
    name: str,
    model: Model,
    pairs: int,
    packets: int,
    seed: int,
    vary: Variation = shift_and_scale,
    after: Callable[[np.ndarray], np.ndarray] = lambda x: x,
) -> None:
    keys = {k: Fraction(q) for k, q in KEYS.items() if k != "p99_99"}
    print(f"\nA/A, {name}: {pairs} pairs of configurations drawn alike, {packets:,} packets a repetition")
    print(f"  {'reps':>4}  {'stated':>8}  {'comparisons called':>20}  {'pairs with any call':>20}  {'judged':>7}")
    for reps in (2, 3):
        rng = np.random.default_rng(seed + reps)
        called = comparisons = any_call = judged = 0
        for _ in range(pairs):
            a = _configuration(0, _draw(rng, model, reps, packets, 0.0, vary, after), keys)
            b = _configuration(1, _draw(rng, model, reps, packets, 0.0, vary, after), keys)
            found, _, family = diffs.differences([a, b], LEVEL, tuple(keys))
            called += len(found)
            comparisons += len(keys)
            judged += family["comparisons"]
            any_call += bool(found)
        print(
            f"  {reps:>4}  {'≤ 5 %':>8}  {_share(called, comparisons):>20}  {_share(any_call, pairs):>20}  {judged:>7}"
        )


def power(name: str, model: Model, pairs: int, packets: int, seed: int) -> None:
    keys = {k: Fraction(q) for k, q in KEYS.items() if k != "p99_99"}
    shifts = (0, 250, 500, 1_000, 2_000, 4_000)
    print(f"\nA/B power, {name}: base latency shifted (base {models.BASE_NS:,} ns), 3 repetitions, {pairs} pairs")
    print(f"  {'shift':>8}  " + "  ".join(f"{k:>16}" for k in keys) + f"  {'wrong way':>9}")
    for shift in shifts:
        rng = np.random.default_rng(seed + shift)  # 3 repetitions: the fewest a difference is called from
        found_at = dict.fromkeys(keys, 0)
        wrong = 0
        for _ in range(pairs):
            a = _configuration(0, _draw(rng, model, 3, packets, 0.0), keys)
            b = _configuration(1, _draw(rng, model, 3, packets, float(shift)), keys)
            for d in diffs.differences([a, b], LEVEL, tuple(keys))[0]:
                found_at[d["percentile"]] += 1
                wrong += d["lower"] != "c0"
        print(f"  {shift:>5} ns  " + "  ".join(f"{_share(found_at[k], pairs):>16}" for k in keys) + f"  {wrong:>9}")


def _evt_models(
    runs: int, samples: int, seed: int, draw: Callable[[np.random.Generator, int], np.ndarray]
) -> Iterator[dict[str, Any]]:
    """`model evt` of `runs` series of `samples` latencies each drawn by `draw`, one at a time."""
    import tempfile

    from lowtail.core import series
    from lowtail.models.evt import evt_model

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tail.parquet"
        for _ in range(runs):
            lat = np.round(draw(rng, samples)).astype(np.int64)
            pre = models.timestamps(samples)
            series.write_series(path, np.arange(samples, dtype=np.int64), pre, pre + lat)
            yield dict(evt_model(path))


def evt_bounded(runs: int, samples: int, seed: int) -> None:
    """`model evt` on exactly exponential tails (ξ = 0): how often it calls them bounded."""
    started = time.perf_counter()
    bounded = sum(
        bool(doc["bounded"])
        for doc in _evt_models(runs, samples, seed, lambda rng, n: 3_300 + rng.exponential(1_000.0, n))
    )
    print(
        f"\nEVT on an exponential tail (ξ = 0): {runs} runs of {samples:,} samples ({time.perf_counter() - started:.0f} s)"
    )
    print(f"  called bounded: {_share(bounded, runs)} (stated: at most 2.5 %, judged ≤ 5 %)")


def _bounded_tail(rng: np.random.Generator, n: int) -> np.ndarray:
    """10 µs plus an exponential body; above its 99th percentile a GPD(σ = 400 ns, ξ = −0.3)."""
    from lowtail.models import gpd

    lat = 10_000 + rng.exponential(300.0, n)
    u = np.quantile(lat, 0.99)
    tail = lat > u
    lat[tail] = u + gpd.sample(int(tail.sum()), 400.0, -0.3, rng)
    return lat


def evt_refuted(runs: int, samples: int, seed: int) -> None:
    """`model evt` on bounded tails (GPD ξ = −0.3 above the 99th percentile): how often the
    tail is called bounded, and how often a fit that read bounded was refuted by a latency of
    its own series above the highest end it allows (what the check against the series costs)."""
    started = time.perf_counter()
    bounded = refuted = 0
    for doc in _evt_models(runs, samples, seed, _bounded_tail):
        bounded += bool(doc["bounded"])
        refuted += "refuted_by_ns" in doc
    print(
        f"\nEVT on a bounded tail (ξ = −0.3): {runs} runs of {samples:,} samples ({time.perf_counter() - started:.0f} s)"
    )
    print(f"  called bounded: {_share(bounded, runs)}; refuted by the series: {_share(refuted, runs)}")


def advice(name: str, model: Model, truth_ns: int, key: str, runs: int, packets: int, seed: int) -> None:
    """Runs inconclusive at a budget 20 % from the truth: how often a run of the length the
    advice names (the same process) is decided."""
    from lowtail.verdict.judge import Status, Verdict

    rng = np.random.default_rng(seed)
    digits = {"p99": "99", "p99_9": "99.9", "p99_99": "99.99"}[key]
    told = decided = never = 0
    for budget in (int(truth_ns * 0.8), int(truth_ns * 1.2)):
        verdict = Verdict(digits, budget)  # type: ignore[arg-type]
        for _ in range(runs):
            j = _judged(verdict, model(rng, packets))
            if j.status is not Status.INCONCLUSIVE:
                continue
            if j.more_packets is None:
                never += "no number" in j.reason
                continue
            told += 1
            again = _judged(verdict, model(rng, packets + j.more_packets))
            decided += again.status in (Status.PASS, Status.FAIL)
    print(f"\nadvice, {name}, {key} with budgets 20 % below and above the truth ({truth_ns:,} ns): {runs} runs each")
    print(f"  inconclusive runs told a length: {told}; a run of that length decided: {_share(decided, told)}")
    print(f"  (stated: about half — the median length that decides); 'no number of packets': {never}")


def _judged(verdict, x: np.ndarray):  # type: ignore[no-untyped-def]
    summary = _native.SeriesSummary()
    summary.record(models.timestamps(len(x)), x)
    doc = bounds_document(Evidence([summary]), [verdict.key], LEVEL, verdict.confidence, [verdict.budget_ns])
    value = int(_nearest_rank(x, {verdict.key: verdict.judged.quantile})[verdict.key])
    return verdict.judge_figures(len(x), value, 0, len(x), intervals=doc, rate_pps=1e9 / models.INTERVAL_NS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per coverage model")
    ap.add_argument("--packets", type=int, default=200_000, help="packets per simulated run")
    ap.add_argument("--pairs", type=int, default=400, help="pairs of configurations for A/A and A/B")
    ap.add_argument("--pair-packets", type=int, default=50_000, help="packets per repetition in A/A and A/B")
    ap.add_argument("--evt-runs", type=int, default=200, help="exponential tails modelled by `model evt`")
    ap.add_argument("--only", default="", help="comma-separated parts: coverage,edges,aa,power,evt,advice")
    args = ap.parse_args()
    parts = set(args.only.split(",")) if args.only else {"coverage", "edges", "aa", "power", "evt", "advice"}

    if "coverage" in parts:
        independent = {k: models.independent_quantile(float(q)) for k, q in KEYS.items()}
        stalled = {k: models.stalls_quantile(float(q)) for k, q in KEYS.items()}
        long_lindley = models.lindley(np.random.default_rng(99), 20_000_000)
        lindley = {k: int(np.quantile(long_lindley, float(q), method="inverted_cdf")) for k, q in KEYS.items()}
        del long_lindley
        coverage("independent packets", models.independent, independent, args.runs, args.packets, 1)
        coverage("FIFO behind stalls (truth analytic)", models.stalls, stalled, args.runs, args.packets, 2)
        coverage(
            "Lindley queue behind stalls (truth: 20M-packet series)",
            models.lindley,
            lindley,
            args.runs,
            args.packets,
            3,
        )
    if "edges" in parts:
        for label, stall, packets in (
            ("rare 1 ms stalls, ~5 a run", models.RARE_200K, 200_000),
            ("rare 1 ms stalls, ~10 a run", models.RARE_1M, 1_000_000),
            ("60 ms stalls, ~3 a run", models.LONG_RARE, 200_000),
        ):
            truth = {k: models.stalls_quantile(float(q), stall) for k, q in KEYS.items()}
            runs = args.runs if packets <= args.packets else max(50, args.runs // 4)
            coverage(f"FIFO behind {label} (truth analytic)", models.stalls_of(stall), truth, runs, packets, 4)
    if "aa" in parts:
        false_calls(
            "independent packets + run-to-run shift/scale", models.independent, args.pairs, args.pair_packets, 10
        )
        false_calls("FIFO behind stalls + run-to-run shift/scale", models.stalls, args.pairs, args.pair_packets, 20)
        false_calls(
            "ties: integer-microsecond stamps, run-to-run shift/scale",
            models.independent,
            args.pairs,
            args.pair_packets,
            40,
            after=models.microseconds,
        )
        false_calls(
            "ties: nanosecond stamps, no run-to-run variation", models.independent, args.pairs, 100_000, 50, vary=none
        )
        false_calls(
            "two-level run-to-run variation (base +0 or +300 ns)",
            models.independent,
            args.pairs,
            100_000,
            60,
            vary=models.two_level,
        )
    if "power" in parts:
        power("independent packets", models.independent, max(100, args.pairs // 4), args.pair_packets, 30)
    if "evt" in parts:
        evt_bounded(args.evt_runs, 300_000, 70)
        evt_refuted(args.evt_runs, 300_000, 71)
    if "advice" in parts:
        truth = models.independent_quantile(0.9999)
        advice("independent packets", models.independent, truth, "p99_99", args.runs, 30_000, 80)
        advice("FIFO behind stalls", models.stalls, models.stalls_quantile(0.99), "p99", args.runs, 20_000, 81)


if __name__ == "__main__":
    main()
