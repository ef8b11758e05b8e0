"""A run traced on several hosts, without a kernel: synthetic recordings of two hosts
merged into one trace file (trace/timeline.py), and explained (explain/analysis.py) with
cores keyed by (host, cpu). Both hosts have a CPU 1; what runs on one host's CPU 1 is
never taken for what ran on the other's, and another host's windows are widened by its
clock's uncertainty."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "explain"))
from test_simulated import _intervals  # noqa: E402

from lowtail.explain.analysis import RunFacts, explain  # noqa: E402
from lowtail.explain.packets import Packets
from lowtail.trace import timeline

RATE = 10_000
PERIOD = 1_000_000_000 // RATE
N = 20_000
T0 = 1_700_000_000_000_000_000
END = T0 + N * PERIOD
HOG_NS = 200_000
HERE, THERE = "controller", "root@dut-host"


def _table(rows: list[tuple[int, int, int, str, str, int, int]]) -> pa.Table:
    """One host's intervals as a recording is built (no host column yet), the tasks running."""
    return _intervals(rows, host=None, state="R")


def _info(host: str, local: bool, uncertainty_ns: int) -> timeline.TraceInfo:
    return timeline.TraceInfo(
        host=host,
        cpus=[0, 1],
        events=["sched/sched_switch"],
        missing_events=[],
        buffer_kb=4096,
        raw_bytes=1 << 16,
        duration_ns=END - T0,
        clock={"uncertainty_ns": uncertainty_ns, "stepped": False, "change_ns": 0},
        coverage=[
            {"cpu": c, "first_ns": T0, "last_ns": END, "events": 10, "dropped": 0, "pages_with_loss": 0} for c in (0, 1)
        ],
        local=local,
    )


def _packets(rng: np.random.Generator, slow: np.ndarray) -> Packets:
    ids = np.arange(N, dtype=np.int64)
    pre = T0 + ids * PERIOD + rng.integers(0, 300, N)
    latency = 8_000 + rng.exponential(2_000, N).astype(np.int64) + np.where(slow, HOG_NS, 0)
    return Packets.of(ids, pre, pre + latency, latency)


def _hog(p: Packets, slow: np.ndarray, shift_ns: int = 0) -> list[tuple]:
    """A SCHED_FIFO task on CPU 1 while each slow packet was in flight (moved by `shift_ns`)."""
    return [
        (1, int(a) + shift_ns, int(b) + shift_ns, "task", "hog", 4242, 10)
        for a, b in zip(p.pre_ns[slow], p.post_ns[slow])
    ]


def _facts() -> RunFacts:
    """The DuT on CPU 1 of the other host; the generator and the timestamper here (CPU 1 is
    the generator's here, CPU 0 the timestamper's)."""
    return RunFacts(
        run_id=1,
        rate_pps=RATE,
        burst=1,
        dut_kind="kernel-mirred",
        dut_config={},
        dut_stats={},
        virtualization=None,
        budget_ns=None,
        budget_failed=False,
        roles={
            "dut": {"host": THERE, "cpus": [1], "pids": [], "comms": []},
            "generator": {"host": HERE, "cpus": [0], "pids": [200], "comms": ["lowtail-gen"]},
            "timestamper": {"host": HERE, "cpus": [0], "pids": [300], "comms": ["lowtail-cap"]},
        },
    )


def _explain(p: Packets, here: list[tuple], there: list[tuple], uncertainty_ns: int = 1000, tmp_path=None):
    table, facts = timeline.merge(
        [(_table(here), _info(HERE, True, 2_000)), (_table(there), _info(THERE, False, uncertainty_ns))]
    )
    if tmp_path is not None:  # through the file, as `lowtail explain` reads it
        path = tmp_path / "trace.parquet"
        timeline.write(table, facts, path)
        timeline.check(path, 1_000_000)
        table, facts = timeline.read(path)
    run = _facts()
    run.widen_ns = facts.widening_ns()
    return explain(p, run, table, facts.coverage())


@pytest.mark.parametrize("seed", range(3))
def test_a_hog_on_the_other_hosts_cpu_1_is_the_dut_preempted_there(seed, tmp_path):
    rng = np.random.default_rng(seed)
    slow = rng.random(N) < 0.01
    p = _packets(rng, slow)
    doc = _explain(p, [], _hog(p, slow), tmp_path=tmp_path)
    (cause,) = [c for c in doc["causes"] if c["kind"] == "preemption"]
    assert (cause["role"], cause["host"], cause["cpu"]) == ("dut", THERE, 1)
    assert cause["share"] >= 0.8 and "hog" in cause["evidence"]["what"]


@pytest.mark.parametrize("seed", range(3))
def test_the_same_hog_on_this_hosts_cpu_1_is_nobodys_core(seed):
    """CPU 1 here is no role's core: keyed by CPU alone, the hog would be taken for the DuT's."""
    rng = np.random.default_rng(seed)
    slow = rng.random(N) < 0.01
    p = _packets(rng, slow)
    doc = _explain(p, _hog(p, slow), [])
    assert doc["causes"] == [], doc["causes"]
    assert doc["unexplained_share"] == 1.0


def test_another_hosts_window_is_widened_by_its_clock_uncertainty():
    """The hog placed 300 µs after each slow packet left (an offset of the other host's clock
    within its markers' uncertainty) still explains them when the uncertainty is 1 ms; with
    a clock known to 10 µs it does not."""
    rng = np.random.default_rng(7)
    slow = rng.random(N) < 0.01
    p = _packets(rng, slow)
    late = _hog(p, slow, shift_ns=HOG_NS + 300_000)
    widened = _explain(p, [], late, uncertainty_ns=1_000_000)
    assert [(c["kind"], c["host"]) for c in widened["causes"]] == [("preemption", THERE)]
    exact = _explain(p, [], late, uncertainty_ns=10_000)
    assert exact["causes"] == []


def test_merged_rows_keep_their_host_and_a_one_host_file_of_old_reads_as_its_host(tmp_path):
    here = [(1, T0 + 10, T0 + 20, "task", "a", 1, 120)]
    there = [(1, T0 + 5, T0 + 15, "task", "b", 2, 120), (0, T0 + 30, T0 + 40, "task", "c", 3, 120)]
    table, facts = timeline.merge([(_table(here), _info(HERE, True, 1)), (_table(there), _info(THERE, False, 9))])
    assert table.schema.equals(timeline.SCHEMA)
    assert pa.types.is_dictionary(table.schema.field("host").type)
    rows = table.to_pylist()
    assert [(r["host"], r["cpu"], r["name"]) for r in rows] == [(THERE, 1, "b"), (HERE, 1, "a"), (THERE, 0, "c")]
    assert facts.widening_ns() == {HERE: 0, THERE: 9}
    assert set(facts.coverage()) == {(HERE, 0), (HERE, 1), (THERE, 0), (THERE, 1)}
    with pytest.raises(ValueError, match="two recordings of one host"):
        timeline.merge([(_table(here), _info(HERE, True, 1)), (_table(here), _info(HERE, True, 1))])
    # A file written before traces had hosts: one host's columns and facts.
    import json
    from dataclasses import asdict

    old = tmp_path / "old.parquet"
    meta = {b"lowtail.trace": json.dumps({k: v for k, v in asdict(_info(HERE, True, 1)).items() if k != "local"})}
    pq.write_table(_table(here).replace_schema_metadata(meta), old)
    timeline.check(old, 10)
    table, facts = timeline.read(old)
    assert [h.host for h in facts.hosts] == [HERE] and table.column("host").to_pylist() == [HERE]
