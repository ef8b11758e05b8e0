"""Steal time (host/steal.py): /proc/stat's steal column parsed (the live one, and one
without the column), read by the interrupt sampler at its own sample times, stored with a
run's samples and read back, and a stored run's steal turned into the hypervisor cause."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from host_fixtures import interrupts_text
from lowtail.host.interrupts import InterruptSample, InterruptSampler
from lowtail.host.steal import STEAL_KIND, STEAL_SOURCE, parse_steal, read_steal, steal_deltas, user_hz
from test_host_interrupts import store_synthetic_run

# /proc/stat of a 2-CPU guest (Linux 6.1): user nice system idle iowait irq softirq steal guest guest_nice.
STAT = """cpu  62687 0 10273 42292 988 0 972 841 0 0
cpu0 27929 0 4712 25699 174 0 88 {steal0} 0 0
cpu1 34757 0 5560 16593 814 0 884 {steal1} 0 0
intr 4421397 9 0 0 0 0 0 0 0 1 0
ctxt 7659932
btime 1764294132
processes 60105
procs_running 2
procs_blocked 0
softirq 3091373 0 630281 5 270706 40493 0 3070 1122137 0 1024681
"""
# A kernel before steal was accounted (2.6.10): four values per CPU.
STAT_WITHOUT_STEAL = "cpu  100 0 50 900\ncpu0 60 0 20 400\ncpu1 40 0 30 500\nintr 1234\nctxt 5678\n"


def _proc(root: Path, steal0: int = 443, steal1: int = 398, stat: str | None = None) -> Path:
    """A proc root with /proc/interrupts and /proc/stat, the latter replaced atomically (a
    sampler reading it meanwhile sees the old text or the new, never half of one)."""
    root.mkdir(exist_ok=True)
    (root / "interrupts").write_text(interrupts_text(cpus=2))
    tmp = root / "stat.new"
    tmp.write_text(stat if stat is not None else STAT.format(steal0=steal0, steal1=steal1))
    tmp.replace(root / "stat")
    return root


def test_parse_steal_in_ns_per_cpu():
    steal = parse_steal(STAT.format(steal0=443, steal1=398), 100)
    assert steal == {0: 4_430_000_000, 1: 3_980_000_000}  # ticks of 10 ms; the all-CPU line is not a CPU
    assert parse_steal(STAT.format(steal0=3, steal1=0), 250) == {0: 12_000_000, 1: 0}


def test_a_stat_without_the_steal_column_gives_nothing(tmp_path):
    assert parse_steal(STAT_WITHOUT_STEAL, 100) is None
    assert read_steal(_proc(tmp_path / "old", stat=STAT_WITHOUT_STEAL)) is None
    assert read_steal(tmp_path / "nowhere") is None  # no /proc/stat at all


def test_live_proc_stat_steal_is_each_cpus_column():
    """The live /proc/stat: one value per CPU line, its 8th value in ns, never going back."""
    hz = user_hz()
    first = read_steal()
    assert first is not None and set(first) >= set(os.sched_getaffinity(0))
    lines = [ln.split() for ln in Path("/proc/stat").read_text().splitlines() if ln[:3] == "cpu" and ln[3:4].isdigit()]
    later = read_steal()
    assert later is not None
    for fields in lines:
        cpu, ticks = int(fields[0][3:]), int(fields[8])
        assert first[cpu] <= ticks * 1_000_000_000 // hz <= later[cpu]
    assert all(d > 0 for d in steal_deltas(first, later).values())


def test_steal_deltas_are_non_zero_and_forget_a_cpu_that_went_back():
    assert steal_deltas({0: 10, 1: 50, 2: 7}, {0: 30, 1: 40, 2: 7, 3: 5}) == {0: 20}


def test_the_sampler_takes_steal_at_its_own_sample_times(tmp_path):
    """Steal that grows between two reads is a sample of the reading interval, stamped with
    the same time as the interrupt samples; no steal, no sample."""
    root = _proc(tmp_path / "proc")
    s = InterruptSampler(interval_s=0.02, housekeeping_cpu=None, proc_root=root).start()
    deadline = time.monotonic() + 30
    while len(s.sample_times_ns) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    _proc(root, steal0=443 + 3)  # the hypervisor took 30 ms from CPU 0
    n = len(s.sample_times_ns)
    while len(s.sample_times_ns) < n + 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    tick = 1_000_000_000 // user_hz()
    assert [(x.cpu, x.kind, x.delta) for x in s.steal] == [(0, STEAL_KIND, 3 * tick)]
    (x,) = s.steal
    k = s.sample_times_ns.index(x.t_ns)
    assert k > 0 and x.interval_ns == x.t_ns - s.sample_times_ns[k - 1]


def test_the_sampler_without_the_steal_column_samples_interrupts_alone(tmp_path):
    root = _proc(tmp_path / "proc", stat=STAT_WITHOUT_STEAL)
    s = InterruptSampler(interval_s=0.02, housekeeping_cpu=None, proc_root=root).start()
    time.sleep(0.1)
    s.stop()
    assert len(s.sample_times_ns) >= 2 and s.steal == []


def test_the_live_sampler_adds_up_to_proc_stat():
    """On this host: the steal the sampler recorded is, per CPU, what /proc/stat's steal grew
    by between its first and last reads (at most, with the reads before and after it)."""
    before = read_steal()
    if before is None:
        pytest.skip("this kernel's /proc/stat has no steal column")
    s = InterruptSampler(interval_s=0.02, housekeeping_cpu=None).start()
    time.sleep(0.3)
    s.stop()
    after = read_steal()
    assert after is not None
    for cpu in after:
        recorded = sum(x.delta for x in s.steal if x.cpu == cpu)
        assert 0 <= recorded <= after[cpu] - before.get(cpu, after[cpu])
    assert all(x.delta > 0 and x.t_ns in s.sample_times_ns for x in s.steal)


def test_stored_steal_round_trips_beside_the_interrupts(tmp_path):
    """The steal samples are stored as a source of their own: read back as written, and the
    host's interrupts (what the interrupt timeline and the coincidence read) are untouched."""
    from lowtail.store import open_store
    from lowtail.store.host import run_interrupts, save_run_interrupts

    interrupts = [InterruptSample(2_000, 0, "LOC", 25, 100)]
    steal = [
        InterruptSample(1_000, 1, STEAL_KIND, 10_000_000, 100),
        InterruptSample(2_000, 0, STEAL_KIND, 20_000_000, 100),
    ]
    with open_store(tmp_path / "db.duckdb") as store:
        save_run_interrupts(store, 7, interrupts)
        assert save_run_interrupts(store, 7, steal, source=STEAL_SOURCE) == 2
        assert run_interrupts(store, 7, STEAL_SOURCE) == [
            (1_000, 1, STEAL_KIND, 10_000_000, 100),
            (2_000, 0, STEAL_KIND, 20_000_000, 100),
        ]
        assert run_interrupts(store, 7) == [(2_000, 0, "LOC", 25, 100)]


def test_a_stored_runs_steal_is_read_by_explain(tmp_path):
    """A stored run (no trace) whose largest latencies fall in the sampling intervals with
    steal on its DuT CPU: `explain_run` reads the stored steal and names the hypervisor."""
    from lowtail.explain.run import explain_run
    from lowtail.explain.section import explain_section, headline_banner
    from lowtail.report.page import Page
    from lowtail.store import open_store
    from lowtail.store.host import save_run_interrupts

    with open_store(tmp_path / "db.duckdb") as store:
        aid, series = store_synthetic_run(store, tmp_path)
        t = pq.read_table(series, columns=["pre_ts_ns", "latency_ns"])
        pre_ns, latency = t.column("pre_ts_ns").to_numpy(), t.column("latency_ns").to_numpy()
        order = latency.argsort()[::-1][:20]  # the p99.9 tail of 20,000 packets
        interval = 10_000_000
        start = int(pre_ns.min())
        ends = sorted({start + ((int(pre_ns[i]) - start) // interval + 1) * interval for i in order})
        steal = [InterruptSample(end, 2, STEAL_KIND, 10_000_000, interval) for end in ends]
        run_id = store.con.execute("SELECT run_id FROM runs").fetchone()[0]
        save_run_interrupts(store, run_id, steal, source=STEAL_SOURCE)
        doc = explain_run(store, run_id)
        page = Page("t")
        headline_banner(page, store, [run_id])
        explain_section(page, store, run_id)
    first = doc["causes"][0]
    assert first["kind"] == "hypervisor" and first["role"] == "host" and first["cpu"] == 2, doc["causes"]
    assert first["share"] >= 0.9 and doc["headline"] and "hypervisor" in doc["headline"]
    # The page reads the stored explanation: the headline first, the cause in words, the remedy.
    html = page.render()
    assert "could not measure" in html and "steal time (measurement artefact)" in html
    assert "dedicated vCPUs or on bare metal" in html and "the hypervisor (steal on CPU 2 in its" in html
