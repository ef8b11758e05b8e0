"""`--strict`: a verdict as the exit code, for a CI gate. Without it a verdict is a result
(FAIL included: exit 0); with it 4 when a verdict is FAIL, 5 when one is not decided, 3 for
a partial result, 0 only when every verdict is PASS — the same on `analyze --budget`,
`compare`, `certify`, `experiment show` (and `run`, which shares `experiment show`'s end).
Three stored runs, one of each status (as tests/compare/test_one_verdict.py builds them)."""

from __future__ import annotations

import json

import pytest
from compare_support import THREE_STATUS_RUNS, lowtail_cli, three_status_experiment

from lowtail.store import open_store

RUNS = THREE_STATUS_RUNS
STRICT_EXIT = {"pass": 0, "fail": 4, "short": 5}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("strict")
    db = tmp / "v.duckdb"
    with open_store(db) as store:
        three, _ = three_status_experiment(store, tmp, "three duts")
        alone = {}
        for dut in RUNS:
            eid, runs = three_status_experiment(store, tmp, f"{dut} alone", (dut,))
            alone[dut] = (eid, runs[dut])
    return {"tmp": tmp, "db": db, "three": three, "alone": alone}


@pytest.mark.parametrize("dut", sorted(RUNS))
@pytest.mark.parametrize("command", ["compare", "certify", "experiment-show"])
def test_each_status_has_its_exit_code_only_with_strict(stored, command, dut):
    eid, run_id = stored["alone"][dut]
    args = ["experiment", "show", eid] if command == "experiment-show" else [command, f"run:{run_id}"]
    args += ["--db", stored["db"]]
    if command != "experiment-show":
        args.append("--no-store")  # the test reads; nothing to keep
    plain = lowtail_cli(*args)
    assert plain.returncode == 0, plain.stderr  # a verdict is a result
    gated = lowtail_cli(*args, "--strict")
    assert gated.returncode == STRICT_EXIT[dut], gated.stderr
    last = gated.stderr.strip().splitlines()[-1] if gated.stderr.strip() else ""
    if STRICT_EXIT[dut]:
        assert last.startswith("--strict: the verdict is ") and last.endswith(f"exit {STRICT_EXIT[dut]}"), last
    else:
        assert "--strict" not in gated.stderr
    # --json: the same code, the document alone on stdout (the verdict is in it)
    as_json = lowtail_cli(*args, "--strict", "--json")
    assert as_json.returncode == STRICT_EXIT[dut], as_json.stderr
    json.loads(as_json.stdout)


def test_one_failing_device_among_three_closes_the_gate_with_4(stored):
    done = lowtail_cli("experiment", "show", stored["three"], "--db", stored["db"], "--strict")
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "--strict: the verdict is FAIL: exit 4"


def test_analyze_gates_its_budget_and_refuses_strict_without_one(stored):
    tmp = stored["tmp"]
    pre, post = sorted(tmp.glob("*pass*-pre.pcap"))[0], sorted(tmp.glob("*pass*-post.pcap"))[0]
    common = [pre, post, "--no-store", "--trim", "0"]
    tight = [*common, "--percentile", "99.99", "--budget", "5us"]  # every packet takes 10 µs or more
    loose = [*common, "--percentile", "99.99", "--budget", "100us"]
    unseeable = [*common, "--percentile", "99.9999", "--budget", "1s"]  # 60,000 packets cannot show it
    assert lowtail_cli("analyze", *loose, "--strict").returncode == 0
    for args, verdict, gated in ((tight, "FAIL", 4), (unseeable, "inconclusive", 5)):
        plain = lowtail_cli("analyze", *args, "--json")
        assert plain.returncode == 0 and json.loads(plain.stdout)["verdict"]["status"] == verdict, plain.stderr
        assert lowtail_cli("analyze", *args, "--strict").returncode == gated
    refused = lowtail_cli("analyze", *common, "--strict")
    assert refused.returncode == 2
    assert "--strict judges the latencies against a budget: give --budget too" in refused.stderr
