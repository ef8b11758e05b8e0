"""Interrupt counters: parsing, differences, the run sampler, storage, the attribution of
gaps to interrupt kinds, the interrupt timeline of a run, and RAPL energy."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from host_fixtures import interrupts_text
from lowtail.core.errors import UserError
from lowtail.host.document import describe_energy as describe
from lowtail.host.energy import EnergyMeter
from lowtail.host.interrupts import InterruptSample, InterruptSampler, diff, parse_interrupts, read_interrupts
from lowtail.host.noise import attribute, exclusive


def test_parse_x86_interrupts():
    t = parse_interrupts(interrupts_text(cpus=4, loc=1000, tlb=7))
    assert t.cpus == [0, 1, 2, 3]
    assert t.counts["LOC"] == {0: 1000, 1: 1001, 2: 1002, 3: 1003}
    assert t.counts["TLB"][2] == 9
    assert t.counts["24:eth0-TxRx-0"][1] == 5000 + 24 * 2
    assert t.descriptions["LOC"] == "local timer" and t.descriptions["TLB"] == "TLB shootdowns"
    assert "ERR" not in t.counts and "MIS" not in t.counts  # system-wide, not per CPU


def test_parse_offline_cpus_and_arm64_names():
    text = (
        "           CPU0       CPU2\n"
        " 11:      12345        678     GICv3  27 Level     arch_timer\n"
        " 47:          0          5     GICv3  72 Level     eth0, eth0-rx\n"
        "IPI0:       100        200       Rescheduling interrupts\n"
        "Err:          0\n"
    )
    t = parse_interrupts(text)
    assert t.cpus == [0, 2]
    assert t.counts["11:arch_timer"] == {0: 12345, 2: 678}
    assert t.counts["47:eth0, eth0-rx"][2] == 5
    assert t.descriptions["IPI0"] == "rescheduling IPIs"
    with pytest.raises(UserError):
        parse_interrupts("nothing like it")


def test_live_proc_interrupts_parses():
    t = read_interrupts("/proc")
    assert t.cpus and t.counts


def test_diff_unwraps_32_bit_counters_and_counts_new_rows_from_zero():
    before = parse_interrupts("  CPU0\nLOC: 4294967290 Local timer interrupts\n")
    after = parse_interrupts("  CPU0\nLOC: 3 Local timer interrupts\nTLB: 2 TLB shootdowns\n")
    assert diff(before, after) == {(0, "LOC"): 9, (0, "TLB"): 2}


def totals(samples: list[InterruptSample]) -> dict[tuple[int, str], int]:
    """The sampler's increments summed per (cpu, kind)."""
    out: dict[tuple[int, str], int] = {}
    for s in samples:
        out[(s.cpu, s.kind)] = out.get((s.cpu, s.kind), 0) + s.delta
    return out


def test_sampler_increments_add_up_to_the_whole_difference():
    s = InterruptSampler(interval_s=0.02, housekeeping_cpu=0).start()
    # Five samples: 0.1 s on a quiet machine; a busy one gives the sampler its turns later.
    deadline = time.monotonic() + 30
    while len(s.sample_times_ns) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = s.stop()
    assert len(s.sample_times_ns) >= 5
    assert s.sample_times_ns == sorted(s.sample_times_ns)
    assert totals(samples) == diff(s.first, s.last)
    assert all(x.delta > 0 and 0 < x.interval_ns < 1e9 for x in samples)
    assert len(s.read_cpu_ns) == len(s.read_wall_ns) == len(s.sample_times_ns)


def test_sampler_refuses_a_cpu_that_does_not_exist():
    with pytest.raises(UserError, match="cannot pin the interrupt sampler to CPU 4095"):
        InterruptSampler(interval_s=0.1, housekeeping_cpu=4095).start()
    with pytest.raises(UserError):
        InterruptSampler(interval_s=0)


def _synthetic_core(seed: int = 7):
    """10 s of a core hit by LOC at 250 Hz (5.5 µs), IWI after every second LOC (8.2 µs)
    and bursts of TLB shootdowns (30 µs) whose number varies between 100 ms intervals."""
    rng = np.random.default_rng(seed)
    start, interval, n = 1_700_000_000_000_000_000, 100_000_000, 100
    gaps_t, gaps_len, intervals = [], [], []
    for j in range(n):
        a = start + j * interval
        counts = {"LOC": 25, "IWI": 12 + j % 2, "TLB": int(rng.poisson(3))}
        for kind, dur in (("LOC", 5_500), ("IWI", 8_200), ("TLB", 30_000)):
            for t in rng.uniform(a, a + interval, counts[kind]):
                gaps_t.append(int(t))
                gaps_len.append(dur + int(rng.integers(-200, 200)))
        intervals.append((a, a + interval, {k: v for k, v in counts.items() if v}))
    order = np.argsort(gaps_t)
    totals_ = {k: sum(iv[2].get(k, 0) for iv in intervals) for k in ("LOC", "IWI", "TLB")}
    return np.array(gaps_t)[order], np.array(gaps_len)[order], totals_, intervals


def test_regression_recovers_the_duration_of_each_varying_kind():
    t, lengths, counts, intervals = _synthetic_core()
    p = attribute(t, lengths, counts, intervals)
    assert p["method"].startswith("interval regression")
    assert p["typical_ns"]["TLB"] == pytest.approx(30_000, rel=0.05)
    # LOC and IWI are clocks: they cannot be told apart and share their mean duration.
    shared = (counts["LOC"] * 5_500 + counts["IWI"] * 8_200) / (counts["LOC"] + counts["IWI"])
    assert p["typical_ns"]["LOC"] == p["typical_ns"]["IWI"] == pytest.approx(shared, rel=0.05)
    assert "IWI, LOC share one duration" in p["method"]
    assert p["explained_share"] == pytest.approx(1.0, abs=0.02)


def test_tlb_shootdowns_are_not_counted_twice():
    # x86 counts a TLB shootdown in TLB and again in CAL (it arrives as a function-call IPI).
    assert exclusive({"CAL": 24, "TLB": 23, "LOC": 250}) == {"CAL": 1, "TLB": 23, "LOC": 250}
    assert exclusive({"CAL": 5, "TLB": 5}) == {"TLB": 5}
    assert exclusive({"CAL": 5, "LOC": 1}) == {"CAL": 5, "LOC": 1}


def test_long_gaps_are_not_blamed_on_interrupts():
    """A 50 ms gap (another task, RT throttling) in an interval with extra TLB shootdowns
    must be counted apart, not inflate the TLB duration."""
    t, lengths, counts, intervals = _synthetic_core()
    t = np.append(t, intervals[10][0] + 1_000)
    lengths = np.append(lengths, 50_000_000)
    order = np.argsort(t)
    p = attribute(t[order], lengths[order], counts, intervals)
    assert p["long_gaps"] == 1 and p["long_gap_total_ns"] == 50_000_000
    assert p["typical_ns"]["TLB"] == pytest.approx(30_000, rel=0.05)


def test_without_intervals_gaps_are_matched_to_interrupts_by_count():
    t, lengths, counts, _ = _synthetic_core()
    p = attribute(t, lengths, counts, None)
    assert p["method"].startswith("count-matched")
    assert len(set(p["typical_ns"].values())) == 1
    # Every gap is an interrupt here, so the matched gaps are all of them.
    assert p["typical_ns"]["LOC"] == float(np.median(lengths))
    assert attribute(t, lengths, {}, None)["method"] == "no interrupts"


def test_energy_from_rapl_counters_with_wraparound(tmp_path):
    def zone(name: str, path: str, uj: int, max_uj: int = 262_143_328_850):
        d = tmp_path / path
        d.mkdir(parents=True)
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text(f"{uj}\n")
        (d / "max_energy_range_uj").write_text(f"{max_uj}\n")

    zone("package-0", "intel-rapl:0", 1_000_000)
    zone("core", "intel-rapl:0:0", 500_000)
    zone("dram", "intel-rapl:0:1", 999_000, max_uj=1_000_000)
    m = EnergyMeter(tmp_path).start()
    (tmp_path / "intel-rapl:0/energy_uj").write_text("6000000\n")  # +5 J
    (tmp_path / "intel-rapl:0:0/energy_uj").write_text("3500000\n")  # +3 J
    (tmp_path / "intel-rapl:0:1/energy_uj").write_text("1000\n")  # wrapped: +0.002 J
    time.sleep(0.05)
    e = m.stop()
    assert e["available"] is True
    assert e["domains"] == {"package-0": 5.0, "package-0/core": 3.0, "package-0/dram": 0.002}
    assert e["joules"] == pytest.approx(5.002)
    assert e["mean_w"] == pytest.approx(5.002 / (e["duration_ns"] / 1e9))
    assert describe(e).endswith("W mean")


def test_energy_not_available_says_why(tmp_path):
    e = EnergyMeter(tmp_path / "no-powercap").start().stop()
    assert e["available"] is False and e["joules"] is None and "does not exist" in e["reason"]
    assert describe(e).startswith("not available (")
    (tmp_path / "empty").mkdir()
    assert "no intel-rapl zones" in EnergyMeter(tmp_path / "empty").start().stop()["reason"]


def test_run_interrupts_round_trip_and_timeline_names_the_kind_behind_the_spikes(tmp_path):
    """A stored run whose largest spikes fall in intervals with TLB shootdowns (and LOC
    everywhere): its explanation stores the coincidence, and the timeline section, which
    reads it, must single out TLB and not LOC."""
    from lowtail.explain.coincidence import coincidence
    from lowtail.explain.run import explain_run
    from lowtail.report.interrupts import interrupt_timeline_section
    from lowtail.report.page import Page
    from lowtail.store import open_store
    from lowtail.store.host import run_interrupts, save_run_interrupts

    with open_store(tmp_path / "db.duckdb") as store:
        aid, series = store_synthetic_run(store, tmp_path)
        worst = sorted(
            store.con.execute(
                "SELECT pre_ts_ns, latency_ns FROM analysis_worst WHERE analysis_id = ?", [aid]
            ).fetchall(),
            key=lambda w: -w[1],
        )
        spikes = [t for t, _ in worst[:20]]
        start = min(t for t, _ in worst)
        interval = 10_000_000
        samples = []
        for k in range(0, (max(t for t, _ in worst) - start) // interval + 2):
            end = start - interval + (k + 1) * interval
            samples.append(InterruptSample(end, 2, "LOC", 25, interval))
            samples.append(InterruptSample(end, 0, "LOC", 25, interval))
            if any(end - interval < s <= end for s in spikes) or k == 3:
                samples.append(InterruptSample(end, 2, "TLB", 1, interval))
        assert save_run_interrupts(store, 1, samples) == len(samples)
        assert len(run_interrupts(store, 1)) == len(samples)
        rows = {r["kind"]: r for r in coincidence(spikes, run_interrupts(store, 1), {2})}
        assert rows["TLB"]["spikes_with"] == 20 and rows["TLB"]["interval_share"] < 0.9
        assert rows["LOC"]["spikes_with"] == 20 and rows["LOC"]["interval_share"] == 1.0
        explain_run(store, 1)
        page = Page("t")
        interrupt_timeline_section(page, store, 1)
    html = page.render()
    assert "TLB (TLB shootdowns) on CPU 2 coincides with 20 of the 20 largest spikes" in html
    assert "LOC (local timer) occurs in 100 % of the sampling intervals" in html


SYNTHETIC_RUN = {"packets": 20000, "rate_pps": 10000, "irq_period_ns": 4000000, "irq_durations_ns": [5500, 8200]}


def store_synthetic_run(
    store: Any, tmp_path: Path, synth: dict[str, Any] | None = None, repetition: int = 0
) -> tuple[int, Path]:
    """A stored run of synthetic packets (by default 20,000 at 10 kpps with short periodic
    interrupts), its DuT on CPU 2 and its series exported, as repetition `repetition` of
    experiment 1: its analysis id and series path."""
    import json

    from lowtail import _native
    from lowtail.analyze.pair import AnalyzeOptions, analyze_options, analyze_pair
    from lowtail.store.analyses import save_analysis

    spec = synth or SYNTHETIC_RUN
    where = tmp_path / f"rep{repetition}"
    where.mkdir(exist_ok=True)
    pre, post = where / "pre.pcap", where / "post.pcap"
    _native.synth_pair(str(pre), str(post), json.dumps(spec | {"seed": repetition + 1}), None)
    series = where / "series.parquet"
    a = analyze_pair(pre, post, AnalyzeOptions(trim_ns=0, export=str(series)))
    aid = save_analysis(store, a, options=analyze_options().to_dict())
    store.con.execute(
        """INSERT INTO experiments (experiment_id, name, spec, spec_hash, host, status)
           VALUES (1, 'e', '{}', 'h', '{}', 'finished') ON CONFLICT DO NOTHING"""
    )
    store.con.execute(
        """INSERT INTO runs (experiment_id, combination_key, dut_name, dut_kind, dut_config, calibration, rate_pps,
               frame_size, burst, repetition, duration_ns, warmup_ns, started_at, analysis_id, valid,
               invalid_reasons, generator, capture, containment, series_path)
           VALUES (1, 'k', 'fwd', 'lowtail-fwd', '{}', false, ?, 64, 1, ?, 2000000000, 0, now(), ?, true,
               '[]', '{}', '{}', '{"cpus": [2]}', ?)""",
        [int(spec["rate_pps"]), repetition, aid, str(series)],
    )
    return int(aid), series
