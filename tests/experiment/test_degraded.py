"""A run is trusted only when its instruments say so, and the generator is one of them: a
generator that stalled (late bursts leave back to back, so the DuT saw traffic the file did
not ask for) marks the run degraded, with the reason stored and shown beside its verdict."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pytest
from rich.console import Console
from test_store_and_report import run_row, synthetic_analysis  # noqa: E402  (tests/experiment is on the path)

from lowtail.cli.run import run_json, runs_table
from lowtail.core.errors import UserError
from lowtail.experiment import spec
from lowtail.experiment.degraded import degraded_lines
from lowtail.experiment.measure import Outcome, judge_outcome
from lowtail.experiment.page import write_experiment_report
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.verdict.judge import Status, Verdict

# The generator's statistics of a run the issue found stored valid and PASS.
STALLED = {
    "sent": 12_000,
    "kept_up": True,
    "send_errors": 0,
    "late_bursts": 1_234,
    "pacing_error_ns": {"samples": 12_000, "p50": 3_000, "p99": 44_000_000, "max": 72_000_000},
    "cpu_wait": {"share": 0.071},
}
CAPTURE = {"interfaces": [{"iface": "lg0", "frames": 12_000, "drops": 0}]}


def outcome(generator: dict) -> Outcome:
    return Outcome(started_at=datetime.now(), generator=generator, capture=CAPTURE)


def test_a_stalled_generator_degrades_the_run_and_says_by_how_much():
    stalled = outcome(STALLED)
    judge_outcome(stalled, spec.Trust())
    assert stalled.invalid_reasons == []
    (reason,) = stalled.degraded_reasons
    assert reason.startswith("generator stalled 72.000 ms (over [trust] max_stall 1.000 ms;")
    assert "p99 pacing error 44.000 ms" in reason and "1,234 of 12,000 bursts late" in reason
    steady = outcome(STALLED | {"pacing_error_ns": {"samples": 12_000, "p50": 900, "p99": 20_000, "max": 60_000}})
    judge_outcome(steady, spec.Trust())
    assert steady.degraded_reasons == [] and steady.invalid_reasons == []
    # Only the p99 beyond its threshold: late often, never long.
    often = outcome(STALLED | {"pacing_error_ns": {"samples": 12_000, "p50": 900, "p99": 400_000, "max": 500_000}})
    judge_outcome(often, spec.Trust())
    assert [r.split(" (")[0] for r in often.degraded_reasons] == ["generator late: p99 pacing error 400.000 µs"]


def test_the_thresholds_come_from_the_experiment_file():
    base = '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'
    exp = spec.parse('[trust]\nmax_stall = "100ms"\nmax_pacing_p99 = "50ms"\n' + base, "e.toml")
    assert exp.trust == spec.Trust(max_stall_ns=100_000_000, max_pacing_p99_ns=50_000_000)
    relaxed = outcome(STALLED)
    judge_outcome(relaxed, exp.trust)
    assert relaxed.degraded_reasons == []
    assert spec.parse(base, "e.toml").trust == spec.Trust(max_stall_ns=1_000_000, max_pacing_p99_ns=100_000)
    with pytest.raises(UserError, match="line 2: max_stall"):
        spec.parse('[trust]\nmax_stall = "soon"\n' + base, "e.toml")


def test_a_degraded_run_is_marked_in_its_verdict_the_tables_and_the_json(tmp_path):
    db = tmp_path / "d.duckdb"
    reason = "generator stalled 72.000 ms (over [trust] max_stall 1.000 ms; p99 pacing error 44.000 ms)"
    with open_store(db) as store:
        eid = runstore.create_experiment(store, "d", {"verdict": {"percentile": 99}}, "hd", {}, str(tmp_path))
        analysis, opts = synthetic_analysis(tmp_path, "d", 40_000, packets=2_000)
        runstore.save_run(store, run_row(eid, "fwd", "lowtail-fwd") | {"degraded_reasons": [reason]}, analysis, opts)
        (row,) = runstore.runs(store, eid)
        experiment = runstore.experiment(store, eid)
    judgement = Verdict(99, 1_000_000, 0).judge(row)
    assert judgement.status is Status.PASS and judgement.label == "PASS, degraded"
    assert judgement.explanation.startswith("degraded: generator stalled 72.000 ms")
    console = Console(width=80, record=True, highlight=False)
    console.print(runs_table(experiment, [row], {}, Verdict(99, 1_000_000, 0)))
    assert "degraded: generator stalled 72.000 ms" in " ".join(console.export_text().split())
    assert run_json(row, {}, Verdict())["degraded_reasons"] == [reason]
    # `lowtail run` says what degraded the runs once, grouped (degraded_lines): its table's
    # notes then leave it out — a degraded PASS needs none, a FAIL only its reason. Before, a
    # busy host's nine degraded runs made `make run` end in 49 lines at 100 columns (33 now).
    for budget, note in ((1_000_000, None), (10_000, "run 1 (FAIL: latency, degraded): 99 % is at least")):
        console = Console(width=80, record=True, highlight=False)
        console.print(runs_table(experiment, [row], {}, Verdict(99, budget, 0), degraded_said=True))
        said = " ".join(console.export_text().split())
        assert "generator stalled" not in said and ("PASS, degraded" in said or "FAIL: latency, degraded" in said)
        assert (note in said) if note else "run 1 (" not in said, said
    assert degraded_lines([row]) == ["1 of 1 runs degraded: generator stalled (run 1)"]
    html = write_experiment_report(db, eid, tmp_path / "d.html").read_text()
    assert "PASS, degraded" in html and "generator stalled 72.000 ms" in html


@pytest.mark.root
@pytest.mark.slow
def test_a_real_run_stores_why_it_is_degraded(tmp_path):
    from test_run import experiment, needs_programs, needs_root, run_json  # noqa: PLC0415

    for mark in (needs_root, needs_programs):
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    # Every burst leaves some nanoseconds late: a threshold of 1 ns marks any run.
    toml = experiment(tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n[trust]\nmax_stall = "1ns"\n')
    done, runs = run_json(tmp_path, toml)
    assert done.returncode == 3, done.stderr  # degraded: not to be trusted as measured
    (r,) = runs
    assert r["degraded_reasons"] and r["degraded_reasons"][0].startswith("generator stalled")
    assert r["verdict"]["degraded"] == r["degraded_reasons"]
    # said once per kind of reason across the runs ("1 of 1 runs degraded: … (run 1)")
    assert f"run {r['run_id']}" in done.stderr and "degraded" in done.stderr
    assert "over [trust] max_stall 1 ns" in r["degraded_reasons"][0]  # stored, brackets and all
    with open_store(tmp_path / "t.duckdb", read_only=True) as store:
        (stored,) = runstore.runs(store, r["experiment_id"])
    assert stored["degraded_reasons"] == r["degraded_reasons"] and json.dumps(stored["generator"])


@pytest.mark.root
@pytest.mark.slow
def test_an_experiment_whose_runs_are_all_degraded_exits_3_saying_why_last(tmp_path):
    """Before: every run of `make run` was degraded and `lowtail run` exited 0, its warning
    after a 40-line table. Now the warnings come before the table, the device verdicts after
    it, and the last line says why the result is not to be trusted and what to change."""
    from test_run import LOWTAIL, experiment, needs_programs, needs_root  # noqa: PLC0415

    for mark in (needs_root, needs_programs):
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    toml = experiment(
        tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n[trust]\nmax_stall = "1ns"\n', rates=(3000, 4000)
    )
    done = subprocess.run(
        [*LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order it was written
        text=True,
        timeout=600,
    )
    assert done.returncode == 3, done.stdout
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    warned = next(i for i, line in enumerate(lines) if "2 of 2 runs degraded: generator stalled" in line)
    table = next(i for i, line in enumerate(lines) if line.split()[:2] == ["run", "DuT"])
    devices = next(i for i, line in enumerate(lines) if line.startswith("verdict per device"))
    assert warned < table < devices, done.stdout
    assert lines[-1].startswith("warning: not to be trusted as measured: every run degraded"), lines[-1]
    assert "to change: give the generator a core nothing else runs on" in lines[-1]
