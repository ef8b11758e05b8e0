"""The hypervisor as a cause, against a known truth: packets made up here, stalls no trace
records delaying a known set of them, and the steal samples a VM's /proc/stat would give
(every 100 ms, in 10 ms ticks) — in the stalls' intervals, at random times, or beside a
traced task that delays packets of its own."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_simulated import COVERAGE, PERIOD, T0, N, _facts, _intervals, _packets  # noqa: E402

from lowtail.explain.analysis import explain  # noqa: E402
from lowtail.explain.steal import Steal  # noqa: E402
from lowtail.explain.words import HYPERVISOR, MEASUREMENT_KINDS  # noqa: E402
from lowtail.host.steal import STEAL_KIND  # noqa: E402

SAMPLE_NS = 100_000_000  # the interrupt sampler's interval
TICK_NS = 10_000_000  # one USER_HZ tick of steal
INTERVALS = N * PERIOD // SAMPLE_NS


def _steal(cpu: int, intervals: list[int], ticks: int = 1) -> list[tuple[int, int, str, int, int]]:
    """The stored steal samples of `cpu`: `ticks` ticks in each of these sampling intervals."""
    return [(T0 + (k + 1) * SAMPLE_NS, cpu, STEAL_KIND, ticks * TICK_NS, SAMPLE_NS) for k in intervals]


def _stall(extra: np.ndarray, start: int, length: int) -> np.ndarray:
    """The packets sent while a CPU of the path did not run wait until it runs again."""
    due = T0 + np.arange(N, dtype=np.int64) * PERIOD
    hit = (due >= start) & (due < start + length)
    extra[hit] = np.maximum(extra[hit], start + length - due[hit])
    return hit


def test_steal_delay_is_the_time_in_flight_at_most_the_steal():
    s = Steal(0, np.array([0, 300], dtype=np.int64), np.array([100, 400], dtype=np.int64), np.array([30, 100]))
    a = np.array([10, 90, 150, 350, 50], dtype=np.int64)
    b = np.array([20, 320, 160, 500, 450], dtype=np.int64)
    # In the first interval at most 30 of steal; across both intervals the two parts add up.
    assert s.delay(a, b).tolist() == [10, 10 + 20, 0, 50, 30 + 100]


@pytest.mark.parametrize("seed", range(4))
def test_steal_in_exactly_the_tails_intervals_is_the_hypervisor(seed):
    """Four stalls of 5 ms no trace records, each in a sampling interval in which the DuT's
    CPU had steal (and in no other): the tail is the hypervisor's, a measurement artefact
    said first, with its remedy."""
    rng = np.random.default_rng(500 + seed)
    extra = np.zeros(N, dtype=np.int64)
    chosen = sorted(int(k) for k in rng.choice(INTERVALS, 4, replace=False))
    for k in chosen:
        _stall(extra, T0 + k * SAMPLE_NS + int(rng.integers(5_000_000, 90_000_000)), 5_000_000)
    p = _packets(rng, extra)
    facts = _facts(seed)
    facts.steal = _steal(0, chosen)
    doc = explain(p, facts, _intervals([]), COVERAGE)
    first = doc["causes"][0]
    assert first["kind"] == HYPERVISOR and first["role"] == "host" and first["cpu"] == 0, doc["causes"]
    assert first["share"] >= 0.9, doc["causes"]
    assert first["remedy"]["id"] == "dedicated-vcpus" and "bare metal" in first["remedy"]["action"]
    assert first["evidence"]["steal_ns_by_cpu"] == {"0": 4 * TICK_NS}
    assert first["evidence"]["explained_by_chance"] < 0.5 * first["evidence"]["tail_packets"]
    # Each tail packet of the evidence beside the sample whose steal it flew in.
    for e in first["evidence"]["events"]:
        assert e["event"]["duration_ns"] == TICK_NS and "steal on CPU 0" in e["event"]["what"], e
        assert (
            e["event"]["start_ns"] < e["sent_ns"] + e["latency_ns"]
            and e["sent_ns"] < e["event"]["start_ns"] + SAMPLE_NS
        )
    assert doc["headline"] and "could not measure" in doc["headline"] and "hypervisor" in doc["headline"]
    assert HYPERVISOR in MEASUREMENT_KINDS


@pytest.mark.parametrize("seed", range(6))
def test_steal_at_random_times_is_no_cause(seed):
    """A tail of delays nothing records, and steal on both CPUs in a random third of the
    intervals, unrelated to them: the steal explains no more of the tail than chance, so the
    tail stays unexplained."""
    rng = np.random.default_rng(600 + seed)
    extra = np.zeros(N, dtype=np.int64)
    extra[rng.choice(N, 40, replace=False)] = 1_500_000
    p = _packets(rng, extra)
    facts = _facts(seed)
    facts.steal = [
        row
        for cpu in (0, 1)
        for row in _steal(cpu, [int(k) for k in rng.choice(INTERVALS, INTERVALS // 3, replace=False)])
    ]
    doc = explain(p, facts, _intervals([]), COVERAGE)
    assert not any(c["kind"] == HYPERVISOR for c in doc["causes"]), doc["causes"]
    assert doc["headline"] is None


@pytest.mark.parametrize("seed", range(4))
def test_a_traced_task_and_steal_each_keep_their_own_share(seed):
    """A real-time task takes the DuT's core for 1.5 ms every 100 ms (in the trace), and the
    hypervisor stalls the DuT's CPU for 1.5 ms in ten other places (steal in those intervals;
    some of them hold one of the task's runs too). Each is found with the share of the tail
    it truly delayed (within 0.1): the task's packets stay the task's though they flew in an
    interval with steal, the rest are the hypervisor's."""
    rng = np.random.default_rng(700 + seed)
    extra = np.zeros(N, dtype=np.int64)
    rows = []
    by_hog = np.zeros(N, dtype=bool)
    for start in range(T0 + 7_000_000, T0 + N * PERIOD, SAMPLE_NS):
        rows.append((0, start, start + 1_500_000, "task", "lowtail-hog", 4242, 39))
        by_hog |= _stall(extra, start, 1_500_000)
    by_steal = np.zeros(N, dtype=bool)
    chosen = sorted(int(k) for k in rng.choice(INTERVALS, 10, replace=False))
    for k in chosen:
        by_steal |= _stall(extra, T0 + k * SAMPLE_NS + int(rng.integers(20_000_000, 90_000_000)), 1_500_000)
    p = _packets(rng, extra)
    facts = _facts(seed)
    facts.steal = _steal(0, chosen)
    doc = explain(p, facts, _intervals(rows), COVERAGE, Fraction(99, 100))
    tail = p.latency_ns > p.percentile(Fraction(99, 100))
    truth = {
        "preemption": float((by_hog[p.id] & tail).sum() / tail.sum()),
        HYPERVISOR: float((by_steal[p.id] & tail).sum() / tail.sum()),
    }
    found = {c["kind"]: c for c in doc["causes"]}
    assert set(found) == set(truth), doc["causes"]
    for kind, share in truth.items():
        assert abs(found[kind]["share"] - share) <= 0.1, (kind, share, doc["causes"])
    assert "lowtail-hog" in found["preemption"]["evidence"]["what"]
    assert found[HYPERVISOR]["role"] == "host"
    assert doc["headline"] and "hypervisor" in doc["headline"]


def test_no_steal_sampled_changes_nothing():
    """A run without steal samples (bare metal, or a kernel without the column) explains as before."""
    rng = np.random.default_rng(800)
    extra = np.zeros(N, dtype=np.int64)
    _stall(extra, T0 + 1_234_567_000, 5_000_000)
    p = _packets(rng, extra)
    doc = explain(p, _facts(0), _intervals([]), COVERAGE)
    assert doc["causes"] == [] and doc["unexplained_share"] == 1.0 and doc["headline"] is None


def test_this_hosts_steal_is_not_blamed_on_a_role_of_another_host():
    """On a hosts testbed the steal samples are the controller's: another host's CPU 0 is not
    this machine's CPU 0. The same packets and steal as above, with every role on another
    host, give no hypervisor cause; with the DuT's role here, they do."""
    rng = np.random.default_rng(500)
    extra = np.zeros(N, dtype=np.int64)
    chosen = sorted(int(k) for k in rng.choice(INTERVALS, 4, replace=False))
    for k in chosen:
        _stall(extra, T0 + k * SAMPLE_NS + int(rng.integers(5_000_000, 90_000_000)), 5_000_000)
    p = _packets(rng, extra)
    facts = _facts(0)
    facts.steal = _steal(0, chosen)
    facts.steal_roles = []
    assert not [c for c in explain(p, facts, _intervals([]), COVERAGE)["causes"] if c["kind"] == HYPERVISOR]
    facts.steal_roles = ["dut"]
    assert explain(p, facts, _intervals([]), COVERAGE)["causes"][0]["kind"] == HYPERVISOR


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_steal_injected_into_a_stored_run_names_the_hypervisor_with_its_resolution(tmp_path):
    """A stored run, and steal written into its stored samples in the intervals its slowest
    packets flew in: `explain --json` names the hypervisor — a cause of its own kind (never a
    process's name) and an entry of what could not be seen — with its sampling resolution."""
    import json
    import subprocess

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment, store_run

    from lowtail.host.interrupts import InterruptSample
    from lowtail.store import open_store
    from lowtail.store.host import save_run_interrupts

    db = tmp_path / "steal.duckdb"
    with open_store(db) as store:
        e = experiment(store, "vm", {"percentile": 99.9, "budget": "30us"})
        run = store_run(store, tmp_path, e, "fwd", packets=50_000, seed=4, spike_probability=0.0002, spike_ns=40_000)
        (series,) = store.con.execute("SELECT series_path FROM runs WHERE run_id = ?", [run]).fetchone()
        table = pq.read_table(series, columns=["pre_ts_ns", "latency_ns"])
        pre = table.column("pre_ts_ns").to_numpy()
        slow = pre[table.column("latency_ns").to_numpy() >= 30_000]
        assert slow.size, "the run has no spikes"
        first = int(pre.min())
        ends = sorted({first + ((int(t) - first) // SAMPLE_NS + 1) * SAMPLE_NS for t in slow})
        save_run_interrupts(store, run, [InterruptSample(t, 0, STEAL_KIND, TICK_NS, SAMPLE_NS) for t in ends], "steal")
    # The run's own tail (p99.9: its 10 spikes among 40 packets of jitter), and its spikes alone.
    explained = []
    for above in ([], ["--above", "35us"]):
        done = subprocess.run(
            [sys.executable, "-m", "lowtail", "explain", str(run), "--db", str(db), "--json", *above],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        explained.append(json.loads(done.stdout))
    for doc in explained:
        (unseen,) = [u for u in doc["unseen"] if u["kind"] == HYPERVISOR]
        assert unseen["cpu"] == 0 and unseen["sampling_interval_ns"] == SAMPLE_NS and unseen["tick_ns"] == TICK_NS
        assert "every 100.000 ms" in unseen["resolution"] and "ticks of 10.000 ms" in unseen["resolution"]
        assert unseen["steal_ns"] == len(ends) * TICK_NS and 0 <= unseen["share"] <= 1
    # Among the spikes alone, the steal in their intervals is beyond chance: the hypervisor is a cause.
    doc = explained[1]
    (unseen,) = [u for u in doc["unseen"] if u["kind"] == HYPERVISOR]
    assert unseen["cpu"] == 0 and unseen["sampling_interval_ns"] == SAMPLE_NS and unseen["tick_ns"] == TICK_NS
    assert "every 100.000 ms" in unseen["resolution"] and "ticks of 10.000 ms" in unseen["resolution"]
    assert unseen["steal_ns"] == len(ends) * TICK_NS and 0 <= unseen["share"] <= 1
    for c in doc["causes"]:
        if c["kind"] == HYPERVISOR:
            assert "pid" not in c["evidence"]["what"] and c["evidence"]["resolution"] == unseen["resolution"]
    hypervisor = [c for c in doc["causes"] if c["kind"] == HYPERVISOR]
    assert hypervisor, (doc["tail"], doc["causes"], doc["unseen"])
    assert doc["headline"] and "steal time on CPU 0" in doc["headline"] and "pid" not in doc["headline"]
