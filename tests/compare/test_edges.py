"""Confidence at the edges (issue 35), each the command or the model that showed it:

- rare stalls: a percentile their clusters dominate is not bounded by one run with too few of
  them (seed 51: 1 ms stalls about 5 times a run was FAIL "at least 983.767 µs" at a 975 µs
  budget the device keeps: its true p99.99 is 965 µs); on simulated runs of rare stalls, the
  intervals stated hold the truth as often as they say;
- ties: repetitions that share whole-nanosecond (or microsecond) values are not called
  different with p = 0; two repetitions are not enough to call anything (two-level run-to-run
  variation called 13 % of A/A pairs);
- the advice on inconclusive verdicts comes from the exact count of packets at the budget
  (seed 1013 said "about 0 more packets" where 127 reach the budget and a FAIL needs 131;
  seed 5 said "no number of packets will decide it" where 215 of 200,000 reach 60 µs), and
  `packets_needed` is the interval's own figure.

bench/stated_confidence.py measures the same at scale (`--only edges,aa,advice`)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from compare_support import experiment, store_run
from scipy.stats import t as student

import latency_models as models
from lowtail import _native
from lowtail.compare import differences as diffs
from lowtail.compare.intervals import Evidence, bounds_document, interval
from lowtail.store import open_store


def lowtail(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lowtail", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def synth(tmp: Path, seed: int, packets: int, *sets: str) -> tuple[Path, Path]:
    pre, post = tmp / f"s{seed}-pre.pcap", tmp / f"s{seed}-post.pcap"
    args: list[object] = ["synth", pre, post, "--packets", packets, "--seed", seed]
    for s in sets:
        args += ["--set", s]
    done = lowtail(*args)
    assert done.returncode == 0, done.stderr
    return pre, post


def judged(pre: Path, post: Path, budget: str, percentile: str) -> dict:
    done = lowtail(
        "analyze", pre, post, "--no-store", "--trim", "0", "--budget", budget, "--percentile", percentile, "--json"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rare_stalls_seed_51_keeps_its_budget_is_not_failed(tmp_path):
    pre, post = synth(tmp_path, 51, 200_000, "spike_probability=2.5e-05", "spike_ns=1000000")
    doc = judged(pre, post, "975us", "99.99")
    assert doc["verdict"]["status"] != "FAIL", doc["verdict"]["reason"]
    p9999 = doc["intervals"]["percentiles"]["p99_99"]
    assert not p9999["resolvable"] and "clusters" in p9999["why"], p9999


@pytest.mark.parametrize(
    ("stalls", "words"),
    [
        (1, "come in 1 cluster of about 4 packets (a stall), fewer than the 15"),
        (3, "come in 3 clusters of about 4 packets (stalls)"),
    ],
)
def test_a_percentile_few_stalls_dominate_says_how_many_in_words_that_count(stalls, words):
    """`make run` printed "the packets above the p99.999 come in 1 clusters of about 4": one
    stall of four packets above the p99.99 of 200,000, or three."""
    rng = np.random.default_rng(35)
    latency = rng.integers(5_000, 6_000, 200_000).astype(np.int64)
    for start in (100_000, 150_000, 50_000)[:stalls]:
        latency[start : start + 4] = 1_000_000 + np.arange(4)
    s = _native.SeriesSummary()
    s.record(models.timestamps(200_000), latency)
    iv = interval(Evidence([s]), "p99_99")
    assert not iv.resolvable and iv.why is not None and words in iv.why, iv.why


def test_a_percentile_more_packets_would_bound_names_them_as_packets():
    """It read "not bounded from above: that takes about 769,657 with its packets as
    clustered as measured" (a count without its noun)."""
    rng = np.random.default_rng(36)
    s = _native.SeriesSummary()
    s.record(models.timestamps(200_000), rng.integers(5_000, 6_000, 200_000).astype(np.int64))
    iv = interval(Evidence([s]), "p99_999")
    assert not iv.resolvable and iv.why is not None
    assert re.search(r"not bounded from above: that takes about [0-9,]+ packets", iv.why), iv.why


@pytest.mark.slow
def test_intervals_of_rare_stalls_miss_the_truth_in_at_most_the_stated_share_of_runs():
    """1 ms stalls about 5 times a 200,000-packet run. Issue 35: the runs that were bounded were
    those that saw more stalls than usual, and their intervals missed (1 of 26 and 0 of 25
    held). Now a percentile the stalls dominate is bounded only from 15 clusters: the runs
    with many stalls say "not bounded by one run". What remains bounded and wrong are runs
    that saw one stall or none (4 % of runs: a run that misses the stalls looks like a device
    without them), within the stated 5 % of all runs — docs/statistics.md names the limit."""
    truth = {
        k: models.stalls_quantile(float(q), models.RARE_200K) for k, q in (("p99_9", "0.999"), ("p99_99", "0.9999"))
    }
    rng = np.random.default_rng(3501)
    ts = models.timestamps(200_000)
    missed = {k: 0 for k in truth}
    runs = 150
    for _ in range(runs):
        x = models.stalls(rng, 200_000, models.RARE_200K)
        s = _native.SeriesSummary()
        s.record(ts, x)
        doc = bounds_document(Evidence([s]), list(truth))
        stalls_seen = int(np.count_nonzero(np.diff((x > 100_000).astype(np.int8)) == 1))
        for k, v in truth.items():
            iv = doc["percentiles"][k]
            if iv["resolvable"] and not iv["lower_ns"] <= v <= iv["upper_ns"]:
                missed[k] += 1
                assert stalls_seen <= 2, (k, stalls_seen, iv)  # only runs that (nearly) missed the stalls
    for k in truth:
        # At most 5 % of all runs, within sampling (150 runs: 13 or more happens 1 % of the time).
        assert missed[k] <= 12, (k, missed)


@pytest.mark.slow
def test_the_median_behind_rare_stalls_is_not_placed_below_its_truth_more_than_stated():
    """1 ms stalls about 5 times a 200,000-packet run move even the median: how many of their
    packets a run holds varies as a Poisson count of five, which the run's blocks at the median
    (it is not clustered there) cannot show. The upper bound behind a PASS fell below the true
    p50 in 6.7 % of 1,000 runs (bench/stated_confidence.py --only edges); the clusters seen
    above the median now set a floor under its dispersion (3.3 % there). These 1,000 seeded
    runs: 58 below before, 36 now."""
    truth = models.stalls_quantile(0.5, models.RARE_200K)
    rng = np.random.default_rng(3502)
    ts = models.timestamps(200_000)
    below = bounded = 0
    for _ in range(1000):
        s = _native.SeriesSummary()
        s.record(ts, models.stalls(rng, 200_000, models.RARE_200K))
        doc = bounds_document(Evidence([s]), ["p50"])
        upper = doc["bounds"]["p50"]["upper_ns"]
        below += upper is not None and upper < truth
        bounded += doc["percentiles"]["p50"]["resolvable"]
    # At most the stated 5 %; and the median stays bounded in most runs (the floor widens its
    # interval, it does not refuse it: 932 of these 1,000, as before).
    assert below <= 50 and bounded >= 900, (below, bounded)


def test_students_t_is_exact_without_scipy():
    for df in (1, 2, 3, 4, 7, 30):
        for x in (0.0, 0.5, 2.0, 12.7):
            assert diffs.t_two_sided(x, df) == pytest.approx(2 * student.sf(x, df), abs=1e-12)
        assert diffs.t_quantile(0.975, df) == pytest.approx(student.ppf(0.975, df), rel=1e-9)


def _side(label: str, values: list[int], spans: list[list[int]] | None = None) -> diffs.Side:
    return diffs.Side(label, list(values), [True] * len(values), values[0], False, False, list(spans or []))


def test_repetitions_that_tie_are_never_called_with_p_zero():
    # Three repetitions each, every one on one whole nanosecond: the standard error was 0 and
    # "A is lower than B at p50 by 1 ns … p = 0" followed.
    tie = diffs.judge(_side("A", [3439] * 3), _side("B", [3440] * 3), "p50", 0.95)
    assert tie["reason"] == diffs.RESOLUTION and tie.get("p_value") is None, tie
    # Microsecond stamps: a 1 µs step is the resolution.
    coarse = diffs.judge(_side("A", [5000] * 3), _side("B", [6000] * 3), "p99", 0.95)
    assert coarse["reason"] == diffs.RESOLUTION, coarse
    # A difference beyond the repetitions' own sampling error is still tested (and its p > 0).
    apart = diffs.judge(
        _side("A", [3439, 3440, 3439], [[3437, 3442]] * 3),
        _side("B", [3460, 3461, 3460], [[3458, 3463]] * 3),
        "p50",
        0.95,
    )
    assert apart["reason"] == diffs.NOT_SIGNIFICANT and 0 < apart["p_value"] < 0.05, apart


def test_the_tie_of_four_runs_is_not_called(tmp_path):
    """Issue 35's command: four runs of one model, two labelled A and two B."""
    db = tmp_path / "t.duckdb"
    spec = {"packets": 100_000, "rate_pps": 100_000.0, "base_latency_ns": 3300, "jitter_ns": 200.0}
    spec |= {"spike_probability": 0.0005, "spike_ns": 5000}
    with open_store(db) as store:
        eid = experiment(store, "tie")
        for i, seed in enumerate((700049, 700050, 700051, 700052)):
            store_run(store, tmp_path, eid, "A" if i < 2 else "B", repetition=i % 2, seed=seed, **spec)
    done = lowtail("compare", eid, "--by", "dut", "--json", "--db", db)
    assert done.returncode in (0, 3), done.stderr
    doc = json.loads(done.stdout)
    assert doc["differences"] == [], doc["differences"]
    reasons = {d["percentile"]: d["why"] for d in doc["not_resolvable"] if d["percentile"] == "p50"}
    assert "not enough repetitions" in reasons["p50"], reasons


@pytest.mark.parametrize("repetitions", [2, 3])
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_two_level_run_variation_is_not_called_more_than_its_level(repetitions):
    keys = {"p50": Fraction(1, 2), "p99": Fraction(99, 100)}
    rng = np.random.default_rng(3520 + repetitions)
    called = 0
    pairs = 150
    for _ in range(pairs):
        configs = []
        for c in (0, 1):
            runs = [models.two_level(models.independent(rng, 20_000), rng) for _ in range(repetitions)]
            per_run = []
            for x in runs:
                s = _native.SeriesSummary()
                s.record(models.timestamps(len(x)), x)
                own = bounds_document(Evidence([s]), list(keys))["percentiles"]
                per_run.append(
                    {
                        "latency_ns": {k: own[k]["value_ns"] for k in keys},
                        "resolvable": {k: own[k]["resolvable"] for k in keys},
                        "intervals": {k: [own[k]["lower_ns"], own[k]["upper_ns"]] for k in keys},
                    }
                )
            both = np.concatenate(runs)
            pooled = {k: int(np.sort(both)[math.ceil(q * len(both)) - 1]) for k, q in keys.items()}
            configs.append(
                {"index": c, "label": f"c{c}", "key": {"c": c}, "latency_ns": pooled, "per_run": per_run}
                | {"degraded": [], "emulated": False}
            )
        called += len(diffs.differences(configs, 0.95, tuple(keys))[0])
    if repetitions == 2:
        assert called == 0  # "not enough repetitions", never a call
    else:
        assert called / (pairs * len(keys)) <= 0.05, called


@pytest.mark.parametrize(
    ("seed", "packets", "sets", "budget"),
    [
        (1013, 100_000, ("spike_probability=0.0004", "spike_ns=50000"), "23714ns"),
        (5, 200_000, ("spike_probability=0.0002", "spike_ns=100000"), "60us"),
    ],
)
def test_the_advice_is_consistent_with_the_exact_count_at_the_budget(tmp_path, seed, packets, sets, budget):
    pre, post = synth(tmp_path, seed, packets, *sets)
    doc = judged(pre, post, budget, "99.9")
    v = doc["verdict"]
    s = _native.SeriesSummary()  # the exact count, from the analysis's own figures
    analysis = _native.Analyzer(str(pre), str(post), _native.AnalyzeOptions(trim_ns=0))
    analysis.run()
    summary = analysis.take_summary()
    assert summary is not None
    reach = Evidence([summary]).count_at_least(v["budget_ns"])
    del s
    assert f"{reach:,} of {packets:,} packets" in v["reason"], v["reason"]
    assert doc["intervals"]["reach"] == [[v["budget_ns"], reach]]
    bound = doc["intervals"]["bounds"]["p99_9"]
    assert v["packets_needed"] == bound["packets_needed"]  # the interval's figure, at its clustering
    if v["status"] == "inconclusive":
        assert "no number of packets" not in v["reason"] or reach == packets // 1000, v["reason"]
        assert v["more_packets"] is None or v["more_packets"] >= 1, v
        # A FAIL needs more packets at the budget than this run has: the advice says more.
        more = re.search(r"about ([\d,]+) packets longer", v["reason"])
        assert more is None or int(more.group(1).replace(",", "")) == v["more_packets"]
    if seed == 1013:
        assert reach == 127 and v["status"] == "inconclusive" and v["more_packets"] > 0, v
    if seed == 5:
        assert reach == 215 and "no number of packets" not in v["reason"], v
