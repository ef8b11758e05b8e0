"""The attribution's statistics against a known truth: packets and core intervals made up
here, with a cause that delays a known set of packets, or none at all."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from lowtail.explain.analysis import CAUSE_FLOOR, RunFacts, explain
from lowtail.explain.packets import Packets, batch_wait
from lowtail.trace.timeline import LEGACY_SCHEMA, SCHEMA, host_column

RATE = 10_000
PERIOD = 1_000_000_000 // RATE
N = 30_000
T0 = 1_700_000_000_000_000_000
HOST = "lab"
COVERAGE = {(HOST, 0): (T0, T0 + N * PERIOD), (HOST, 1): (T0, T0 + N * PERIOD)}


def _facts(seed: int) -> RunFacts:
    return RunFacts(
        run_id=seed,
        rate_pps=RATE,
        burst=1,
        dut_kind="lowtail-fwd",
        dut_config={"batch": 1},
        dut_stats={},
        virtualization=None,
        budget_ns=None,
        budget_failed=False,
        roles={
            "dut": {"host": HOST, "cpus": [0], "pids": [100], "comms": ["lowtail-fwd"]},
            "generator": {"host": HOST, "cpus": [1], "pids": [200], "comms": ["lowtail-gen"]},
        },
    )


def _intervals(
    rows: list[tuple[int, int, int, str, str, int, int]], host: str | None = HOST, state: str = ""
) -> pa.Table:
    """A trace's intervals from (cpu, start, end, kind, name, pid, prio) rows, each in `state`;
    on `host`, or as one host's recording is built before it has a host column (None)."""
    n = len(rows)
    # The column types are the trace schema's own: the rows give its first seven columns.
    columns = {k: [r[i] for r in rows] for i, k in enumerate(LEGACY_SCHEMA.names[:7])}
    columns |= {"state": [state] * n, "detail": [""] * n}
    if host is None:
        return pa.Table.from_pydict(columns, schema=LEGACY_SCHEMA)
    return pa.Table.from_pydict(columns | {"host": host_column(host, n)}, schema=SCHEMA)


def _packets(rng: np.random.Generator, extra: np.ndarray) -> Packets:
    ids = np.arange(N, dtype=np.int64)
    pre = T0 + ids * PERIOD + rng.integers(0, 300, N)
    latency = 8_000 + rng.exponential(3_000, N).astype(np.int64) + extra
    return Packets.of(ids, pre, pre + latency, latency)


def _ticks(rng: np.random.Generator, cpu: int, name: str, every_ns: int, duration_ns: int) -> list[tuple]:
    """A periodic interrupt with a random phase: independent of the packets' latencies."""
    start = T0 + int(rng.integers(0, every_ns))
    return [(cpu, t, t + duration_ns, "vector", name, -1, -1) for t in range(start, T0 + N * PERIOD, every_ns)]


@pytest.mark.parametrize("seed", range(6))
def test_independent_events_are_no_cause(seed):
    """Ticks and a busy neighbour task that delay nothing: no cause above the floor, the
    tail reported unexplained."""
    rng = np.random.default_rng(seed)
    p = _packets(rng, np.zeros(N, dtype=np.int64))
    rows = _ticks(rng, 0, "local_timer", 4_000_000, 3_000) + _ticks(rng, 1, "local_timer", 4_000_000, 3_000)
    t = T0
    while t < T0 + N * PERIOD:  # another task on the DuT core now and then, unrelated to the latencies
        d = int(rng.integers(20_000, 400_000))
        rows.append((0, t, t + d, "task", "cc1", 300, 120))
        t += d + int(rng.integers(1_000_000, 30_000_000))
    doc = explain(p, _facts(seed), _intervals(rows), COVERAGE)
    assert doc["tail"]["packets"] > 0
    assert doc["causes"] == [], doc["causes"]
    assert doc["unexplained_share"] == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_a_task_that_delays_a_known_share_is_found_with_that_share(seed):
    """A real-time task that takes the DuT's core for 1.5 ms every 50 ms delays the packets
    in flight then; it is ranked first, named, and its share is the share of tail packets it
    truly delayed (within 0.1), the rest left to the other cause or unexplained."""
    rng = np.random.default_rng(100 + seed)
    ids = np.arange(N)
    pre_base = T0 + ids * PERIOD
    extra = np.zeros(N, dtype=np.int64)
    rows = []
    for start in range(T0 + 7_000_000, T0 + N * PERIOD, 50_000_000):
        end = start + 1_500_000
        rows.append((0, start, end, "task", "lowtail-hog", 4242, 39))
        hit = (pre_base >= start) & (pre_base < end)
        extra[hit] = end - pre_base[hit]
    # Some tail packets delayed by nothing in the trace (a share left unexplained).
    unexplained = rng.choice(np.flatnonzero(extra == 0), 12, replace=False)
    extra[unexplained] += 1_530_000
    p = _packets(rng, extra)
    truth_tail = p.latency_ns > p.percentile(Fraction(999, 1000))
    doc = explain(p, _facts(seed), _intervals(rows), COVERAGE)
    first = doc["causes"][0]
    assert first["kind"] == "preemption" and first["role"] == "dut" and first["cpu"] == 0
    assert first["evidence"]["what"].startswith("lowtail-hog (pid 4242, real-time priority 60)")
    hog_delayed = np.isin(p.id, np.flatnonzero(extra > 0)) & ~np.isin(p.id, unexplained) & truth_tail
    assert abs(first["share"] - hog_delayed.sum() / truth_tail.sum()) <= 0.1
    assert all(c["share"] >= CAUSE_FLOOR for c in doc["causes"])
    assert 0 < doc["unexplained_share"] < 1


@pytest.mark.parametrize("seed", range(3))
def test_a_generator_late_all_run_long_is_not_the_cause_of_the_tail(seed):
    """A busy host's generator leaves most packets late (here 75 % of them, and 90 % of the
    slow ones: barely more): lateness is nearly everywhere, so though it clears chance by a
    margin over 3,000 tail packets it explains barely more of them than of all packets, and
    is no cause (`MIN_LIFT`)."""
    rng = np.random.default_rng(200 + seed)
    ids = np.arange(N, dtype=np.int64)
    slow = rng.random(N) < 0.1
    latency = 8_000 + rng.exponential(3_000, N).astype(np.int64) + np.where(slow, 200_000, 0)
    is_late = rng.random(N) < np.where(slow, 0.9, 0.75)
    due = T0 + ids * PERIOD
    pre = due + np.where(is_late, rng.integers(300_000, 400_000, N), 0)
    p = Packets.of(ids, pre, pre + latency, latency)
    doc = explain(p, _facts(seed), _intervals([]), COVERAGE, Fraction(9, 10))
    assert doc["tail"]["packets"] >= 2_500
    assert not any(c["kind"] == "generator_stall" for c in doc["causes"]), doc["causes"]
    assert doc["headline"] is None


def _fifo(arrivals: np.ndarray, service_ns: int, rng: np.random.Generator) -> np.ndarray:
    """Departures of a FIFO server with a fixed service time (the DuT's work per packet)."""
    out = np.empty_like(arrivals)
    free = arrivals[0]
    for i, a in enumerate(arrivals):
        free = max(free, a) + service_ns + int(rng.integers(0, 500))
        out[i] = free
    return out


@pytest.mark.parametrize("seed", range(3))
def test_a_stalled_generator_is_found_by_the_queue_its_late_packets_make(seed):
    """A task takes the generator's core 1.5 ms every 50 ms; the generator then sends the
    overdue packets back to back and the last of them queue at the DuT (20 µs each). Their
    own lateness is small (the last were due just before the stall ended) and adds nothing to
    their latency: what delayed them is the packets ahead, sent late. The stall is ranked
    first, as the generator's, with the headline, and the task is named."""
    rng = np.random.default_rng(300 + seed)
    ids = np.arange(N, dtype=np.int64)
    due = T0 + ids * PERIOD
    pre = due + rng.integers(0, 300, N)
    rows = []
    for start in range(T0 + 7_000_000 + int(rng.integers(0, PERIOD)), T0 + N * PERIOD, 50_000_000):
        end = start + 1_500_000
        rows.append((1, start, end, "task", "lowtail-hog", 4242, 39))
        overdue = np.flatnonzero((due >= start) & (due < end))
        pre[overdue] = end + 2_000 * np.arange(1, overdue.size + 1)
    post = _fifo(pre, 20_000, rng) + 5_000
    p = Packets.of(ids, pre, post, post - pre)
    doc = explain(p, _facts(seed), _intervals(rows), COVERAGE)
    first = doc["causes"][0]
    assert first["kind"] == "generator_stall" and first["role"] == "generator", doc["causes"]
    assert first["share"] >= 0.8 and "lowtail-hog" in first["evidence"]["what"], first
    assert not any(c["role"] == "dut" for c in doc["causes"]), doc["causes"]
    assert doc["headline"] is not None


def _batcher(
    arrivals: np.ndarray, batch: int, t_cpu_ns: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Departures of a DuT that takes what is waiting (up to `batch`), works `t_cpu_ns` on
    each, and sends the batch only when all of it is done (lowtail-fwd, DPDK's Snort); and
    each packet's hold: the work on the packets after it in its batch."""
    out = np.empty_like(arrivals)
    held = np.zeros_like(arrivals)
    free = int(arrivals[0])
    i = 0
    while i < arrivals.size:
        free = max(free, int(arrivals[i])) + int(rng.integers(0, 2_000))  # polling, wake-up
        k = i + 1
        while k < arrivals.size and k - i < batch and arrivals[k] <= free:
            k += 1
        free += (k - i) * t_cpu_ns
        out[i:k] = free + 1_000 * np.arange(k - i)  # one sendmmsg: a microsecond a frame
        held[i:k] = t_cpu_ns * np.arange(k - i - 1, -1, -1)
        i = k
    return out, held


@pytest.mark.parametrize("seed", range(3))
def test_the_hold_of_a_batch_is_the_work_on_the_rest_of_it(seed):
    """Bursts of 32 at 10 kpps into a batch-32 DuT that takes what is waiting: the burst's
    first frame goes alone, the rest arrive while it is worked on and go in batches whose
    earlier arrivals wait for the work on all the later ones (NOMS 2020, Fig. 5). The hold
    batching accounts for is that work, (batch - 1 - place) * t_cpu, not the fraction of a
    microsecond between their arrivals on a wire, which was all it counted before."""
    rng = np.random.default_rng(400 + seed)
    ids = np.arange(N, dtype=np.int64)
    pre = T0 + (ids // 32) * 32 * PERIOD + 500 * (ids % 32) + rng.integers(0, 100, N)
    t_cpu = 9_000
    post, truth = _batcher(pre, 32, t_cpu, rng)
    p = Packets.of(ids, pre, post + 8_000, post + 8_000 - pre)
    wait, sizes = batch_wait(p, float(t_cpu))
    assert sizes.max() > 16
    assert np.mean(np.abs(wait - truth[p.id]) <= 1_000) >= 0.99


@pytest.mark.parametrize("seed", range(3))
def test_the_testbeds_own_timestamper_on_the_duts_core_is_the_measurements_not_a_preemption(seed):
    """On a host with few cores the core plan puts the timestamper on the DuT's core; when its
    program takes that core in the tail packets' windows, the cause is the measurement's
    layout (`shared_core`, role timestamper, in the headline), never "another task preempted
    the DuT" — which `tune` would try to move, and which it is not."""
    rng = np.random.default_rng(300 + seed)
    ids = np.arange(N)
    pre_base = T0 + ids * PERIOD
    extra = np.zeros(N, dtype=np.int64)
    rows = []
    for start in range(T0 + 5_000_000, T0 + N * PERIOD, 40_000_000):
        end = start + 1_000_000
        rows.append((0, start, end, "task", "lowtail-cap", 300, 49))
        hit = (pre_base >= start) & (pre_base < end)
        extra[hit] = end - pre_base[hit]
    p = _packets(rng, extra)
    facts = _facts(seed)
    facts.roles["timestamper"] = {"host": HOST, "cpus": [0], "pids": [300], "comms": ["lowtail-cap"]}
    doc = explain(p, facts, _intervals(rows), COVERAGE)
    first = doc["causes"][0]
    assert first["kind"] == "shared_core" and first["role"] == "timestamper" and first["cpu"] == 0
    assert first["remedy"]["id"] == "own-core-per-role"
    assert not [c for c in doc["causes"] if c["kind"] == "preemption"]
    assert doc["headline"] and "the timestamper took the DuT's core" in doc["headline"]
