"""Runs in the database and the experiment report, from synthetic captures with known
latencies (no testbed needed): the floor is found, the verdict follows the budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.core.errors import UserError
from lowtail.experiment.page import verdict_of, write_experiment_report
from lowtail.experiment.spec import Verdict
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.verdict.judge import VerdictRequest


def synthetic_analysis(tmp_path: Path, name: str, latency_ns: int, loss: float = 0.0, packets: int = 20_000):
    pre, post = tmp_path / f"{name}-pre.pcap", tmp_path / f"{name}-post.pcap"
    _native.synth_pair(
        str(pre),
        str(post),
        json.dumps(
            {
                "packets": packets,
                "rate_pps": 10_000.0,
                "base_latency_ns": latency_ns,
                "jitter_ns": 0.0,
                "loss": loss,
                "seed": 7,
            }
        ),
    )
    options = AnalyzeOptions(trim_ns=0, export=str(tmp_path / f"{name}.parquet"))
    return analyze_pair(pre, post, options), options.to_dict()


def run_row(eid: int, dut: str, kind: str, valid: bool = True, rate: int = 10_000) -> dict:
    return {
        "label": f"{dut} @ {rate}",
        "experiment_id": eid,
        "combination_key": f"{dut}/{rate}",
        "dut_name": dut,
        "dut_kind": kind,
        "dut_config": {},
        "calibration": kind == "wire",
        "rate_pps": rate,
        "frame_size": 64,
        "burst": 1,
        "repetition": 0,
        "duration_ns": 2 * 10**9,
        "warmup_ns": 0,
        "started_at": datetime.now(),
        "finished_at": datetime.now(),
        "series_path": None,
        "valid": valid,
        "invalid_reasons": [] if valid else ["the timestamper lost 3 frames (kernel capture drops)"],
        "generator": {"kept_up": True},
        "capture": {"interfaces": []},
        "containment": {"mode": "bare"},
        "energy": None,
        "dut_stats": {},
        "capture_paths": [],
        "traffic": {"flows": 1},
    }


@pytest.fixture
def stored(tmp_path):
    db = tmp_path / "t.duckdb"
    with open_store(db) as store:
        eid = runstore.create_experiment(
            store,
            "exp",
            {"verdict": {"budget": "100us", "percentile": 99}},
            "h1",
            {"kernel": "k", "core_plan": {"generator": 1}, "command": ["lowtail"]},
            str(tmp_path),
        )
        wire, opts = synthetic_analysis(tmp_path, "wire", 3_000)
        dut, _ = synthetic_analysis(tmp_path, "dut", 40_000)
        lossy, _ = synthetic_analysis(tmp_path, "lossy", 40_000, loss=0.01)
        ids = [
            runstore.save_run(store, run_row(eid, "wire", "wire"), wire, opts),
            runstore.save_run(store, run_row(eid, "fwd", "lowtail-fwd"), dut, opts),
            runstore.save_run(store, run_row(eid, "lossy", "custom"), lossy, opts),
            runstore.save_run(store, run_row(eid, "broken", "bridge", valid=False), dut, opts),
        ]
    return db, eid, ids


def test_runs_come_back_with_their_figures_and_the_floor(stored):
    db, eid, ids = stored
    with open_store(db, read_only=True) as store:
        rows = runstore.runs(store, eid)
        floors = runstore.calibration_floor(store, eid)
        assert runstore.done_keys(store, eid) == {"wire/10000", "fwd/10000", "lossy/10000", "broken/10000"}
    assert [r["run_id"] for r in rows] == ids
    fwd = rows[1]
    assert fwd["sent"] == 20_000 and fwd["lost"] == 0
    assert fwd["figures"]["latency_ns"]["p50"] == 40_000
    floor = floors[(10_000, 64, 1)]
    assert floor["run_id"] == ids[0] and floor["lat_p50_ns"] == 3_000


def test_the_verdict_follows_budget_percentile_loss_and_validity(stored):
    db, eid, _ = stored
    with open_store(db, read_only=True) as store:
        wire, fwd, lossy, broken = runstore.runs(store, eid)
    assert verdict_of(wire, Verdict())[0] == "floor"
    assert verdict_of({**wire, "valid": False}, Verdict())[0] == "INVALID"  # no floor then
    assert verdict_of(fwd, Verdict(99, 100_000, 0)) == ("PASS", "pass")
    assert verdict_of(fwd, Verdict(99, 40_000, 0))[0] == "FAIL: latency"  # at the budget is not under it
    assert verdict_of(fwd, Verdict())[0] == "inconclusive"  # 20,000 packets cannot show a 99.999th percentile
    assert verdict_of(lossy, Verdict(99, 100_000, 0))[0] == "FAIL: loss"
    assert verdict_of(lossy, Verdict(99, 100_000, max_loss=10**6))[0] == "PASS"
    assert verdict_of(broken, Verdict(99, 100_000, 0))[0] == "INVALID"


def test_resuming_finds_only_unfinished_experiments(stored):
    db, eid, _ = stored
    with open_store(db) as store:
        assert runstore.resumable_experiment(store, "h1")["experiment_id"] == eid
        assert runstore.resumable_experiment(store, "other") is None
        runstore.set_status(store, eid, "finished")
        assert runstore.resumable_experiment(store, "h1") is None


def test_a_failed_write_leaves_neither_run_nor_analysis(tmp_path):
    with open_store(tmp_path / "t.duckdb") as store:
        eid = runstore.create_experiment(store, "exp", {}, "h", {}, str(tmp_path))
        analysis, opts = synthetic_analysis(tmp_path, "a", 5_000, packets=2_000)
        bad = run_row(eid, "x", "bridge")
        bad["rate_pps"] = None  # NOT NULL column: the insert fails after the analysis was written
        with pytest.raises(duckdb.Error):
            runstore.save_run(store, bad, analysis, opts)
        assert store.con.execute("SELECT count(*) FROM analyses").fetchone() == (0,)
        assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_the_report_has_verdicts_floor_plots_and_host(stored, tmp_path):
    db, eid, ids = stored
    html = write_experiment_report(db, "latest", tmp_path / "r.html").read_text()
    assert "99th percentile under 100.000 µs (95 % confidence), no loss" in html  # the stored file's verdict settings
    assert "2 of 3 runs pass" not in html and "1 of 3 runs pass" in html
    assert html.count("class='lt-plot-spec'") == 2 * 4  # an HDR plot and a worst-event scatter per run
    assert html.count("wire (calibration run 1)") == 3  # the floor curve beside each DuT run's, in its legend
    assert "the timestamper lost 3 frames" in html and "Testbed and host" in html
    stricter = write_experiment_report(
        db, eid, tmp_path / "s.html", request=VerdictRequest.parse(budget="10us")
    ).read_text()
    assert "0 of 3 runs pass" in stricter


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_experiment_report_takes_the_percentile_too(stored, tmp_path):
    """`experiment report --percentile` over the stored [verdict] (99th under 100 µs): the
    same request type as `compare`'s, the budget kept where only the percentile is given."""
    db, eid, _ = stored
    out = tmp_path / "p.html"
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "experiment", "report", str(eid), "--percentile", "99.99", "-o", str(out)],
        env={**os.environ, "LOWTAIL_DB": str(db)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "99.99th percentile under 100.000 µs (95 % confidence), no loss" in out.read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "lowtail", "experiment", "report", str(eid), "--percentile", "99.95"],
        env={**os.environ, "LOWTAIL_DB": str(db)},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--percentile: percentile must be one of" in bad.stderr


@pytest.mark.parametrize("typed", ["95", "95%", "95 %", "0.95", 95, 0.95, 95.0])
def test_a_confidence_is_read_one_way_whatever_its_form(typed):
    assert VerdictRequest.parse(confidence=typed).confidence == pytest.approx(0.95)


@pytest.mark.parametrize("typed", ["0", "100", "100%", "-5", "ninety"])
def test_a_confidence_outside_zero_and_one_is_one_clear_error(typed):
    with pytest.raises(UserError, match="--confidence: "):
        VerdictRequest.parse(confidence=typed)


def test_a_request_replaces_only_the_parts_it_gives():
    stored = Verdict(99, 100_000, 5)
    asked = VerdictRequest.parse(percentile="99.99").over(stored)
    assert (asked.key, asked.budget_ns, asked.max_loss) == ("p99_99", 100_000, 5)
    assert asked.percentile.quantile == Fraction(9999, 10000) and not VerdictRequest().given
