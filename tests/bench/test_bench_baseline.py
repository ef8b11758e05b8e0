"""The PostgreSQL baseline of `make bench` must compute exactly what `lowtail analyze`
computes, or its timings compare different work. These tests run the real pipeline
(dpkt → COPY → SQL in a private PostgreSQL) on small generated pairs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import pg_baseline
from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

unavailable = pg_baseline.postgres_available()
pytestmark = [
    pytest.mark.skipif(unavailable is not None, reason=f"no private PostgreSQL here: {unavailable}"),
    pytest.mark.slow,
]
dpkt = pytest.importorskip("dpkt", reason="dpkt (the baseline's packet library) is not installed")

# 3 s of traffic: the 1 s warm-up trim leaves 2 s; loss bursts, duplicates, reordering,
# interrupts and spikes make every figure non-trivial.
MODEL = {
    "packets": 60_000,
    "rate_pps": 20_000,
    "seed": 7,
    "loss": 0.002,
    "loss_burst": 3,
    "duplicate": 0.002,
    "reorder": 0.001,
    "irq_period_ns": 4_000_000,
    "irq_durations_ns": [5500, 8200],
    "spike_probability": 0.0005,
    "spike_ns": 150_000,
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    pre, post = d / "pre.pcap", d / "post.pcap"
    _native.synth_pair(str(pre), str(post), json.dumps(MODEL), None)
    return pre, post


@pytest.fixture(scope="module")
def pg():
    with pg_baseline.TempPostgres() as server:
        yield server


def sql_figures(pg, pre, post, **options):
    pg.reset()
    pg_baseline.load_pair(pg, pre, post)
    _, doc = pg_baseline.analyze_in_sql(pg, **{**baseline_defaults(), **options})
    return doc


def baseline_defaults():
    d = AnalyzeOptions()
    return {"trim_ns": d.trim_ns, "horizon_ns": d.max_latency_ns, "worst_n": d.worst, "bins": d.histogram_bins}


def test_sql_figures_equal_lowtail_figures(pg, pair):
    pre, post = pair
    sql = sql_figures(pg, pre, post)
    ours = analyze_pair(pre, post, AnalyzeOptions())
    assert ours["lost"] > 0 and ours["duplicates"] > 0 and ours["reordered"] > 0
    assert pg_baseline.differences(sql, ours) == []


def test_sql_follows_trim_and_worst_options(pg, pair):
    pre, post = pair
    sql = sql_figures(pg, pre, post, trim_ns=0, worst_n=50)
    ours = analyze_pair(pre, post, AnalyzeOptions(trim_ns=0, worst=50))
    assert ours["trimmed_pre"] == 0 and len(ours["worst"]) == 50
    assert pg_baseline.differences(sql, ours) == []


def test_a_wrong_figure_is_reported(pair):
    pre, post = pair
    ours = analyze_pair(pre, post, AnalyzeOptions())
    wrong = copy.deepcopy(ours)
    wrong["latency_ns"]["p99_999"] += 1
    wrong["worst"][0]["latency_ns"] += 1
    wrong["lost"] += 1
    diffs = pg_baseline.differences(wrong, ours)
    assert len(diffs) == 3
    assert any(d.startswith("latency p99_999") for d in diffs)


def test_server_is_gone_after_the_block():
    with pg_baseline.TempPostgres() as server:
        root, data = server.root, server.data
        assert server.psql_command("SELECT 6 * 7").strip() == "42"
    assert not root.exists()
    ps = subprocess.run(["pgrep", "-f", f"postgres.*-D {data}"], capture_output=True, text=True)
    assert ps.stdout == ""


def test_benchmark_runs_end_to_end_at_a_tiny_size(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH_DIR / "analyze_vs_postgres.py"),
            "--packets",
            "30000",
            "--rate",
            "10000",  # the benchmark's own flag: packets per second
            "--repeat",
            "1",
            "--large-packets",
            "40000",
            "--memory-packets",
            "30000",
            "--memory-rate",
            "10000",
            "--campaign-pairs",
            "2",
            "--campaign-packets",
            "20000",
            "--workdir",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    speed, memory = doc["speed"], doc["memory"]
    assert speed["figures_identical"]
    for key in ("page_cache_read_s", "lowtail_s", "baseline_load_s", "baseline_sql_s"):
        assert speed[key]["best"] > 0
    assert 0 < memory["max_rss_bytes"] < 2 << 30
    large = doc["large"]
    assert large["figures_identical"] and large["baseline_total_s"] > 0 and large["lowtail_s"] > 0
    assert doc["verdicts"]["large_speedup"] == large["baseline_total_s"] / large["lowtail_s"]
    assert (
        "40,000-packet pair"
        in (tmp_path / "out" / next(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".txt")).read_text()
    )
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".json", ".txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
