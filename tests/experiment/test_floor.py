"""The floor beside a run: its own experiment's calibration, or one the user names; an
experiment without either shows none, and no caption claims a wire curve not drawn."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_store_and_report import run_row, synthetic_analysis  # noqa: E402  (tests/experiment is on the path)

from lowtail.core.errors import UserError
from lowtail.experiment import spec
from lowtail.experiment.page import write_experiment_report
from lowtail.store import open_store
from lowtail.store import runs as runstore

WIRE_CAPTION = "with the same traffic over a plain wire"


@pytest.fixture
def three_experiments(tmp_path):
    """1: calibrated (wire + kernel); 2: `calibrate = false`, none named; 3: names 1's."""
    db = tmp_path / "f.duckdb"
    wire, opts = synthetic_analysis(tmp_path, "wire", 3_000, packets=2_000)
    dut, _ = synthetic_analysis(tmp_path, "dut", 40_000, packets=2_000)
    with open_store(db) as store:
        ids = []
        for name, calibration in (("calibrated", None), ("bare", None), ("named", 1)):
            eid = runstore.create_experiment(store, name, {}, name, {}, str(tmp_path))
            if calibration is not None:
                runstore.set_calibration(store, eid, calibration)
            if name == "calibrated":
                runstore.save_run(store, run_row(eid, "wire", "wire"), wire, opts)
            runstore.save_run(store, run_row(eid, "kernel", "kernel-mirred"), dut, opts)
            ids.append(eid)
    return db, ids


def test_the_floor_is_the_experiments_own_or_the_named_calibration(three_experiments):
    db, (calibrated, bare, named) = three_experiments
    with open_store(db, read_only=True) as store:
        own = runstore.calibration_floor(store, calibrated)
        assert own[(10_000, 64, 1)]["experiment_id"] == calibrated
        assert runstore.calibration_floor(store, bare) == {}  # another experiment's wire is not its floor
        assert runstore.calibration_floor(store, named)[(10_000, 64, 1)]["experiment_id"] == calibrated
        assert runstore.calibration_floor(store, bare, source=calibrated)[(10_000, 64, 1)]["run_id"] == 1
        with pytest.raises(UserError, match="experiment 2 has no valid calibration runs"):
            runstore.check_calibration(store, bare)
        with pytest.raises(UserError, match="none of its experiments has id 9"):
            runstore.check_calibration(store, 9)


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_report_claims_no_wire_curve_it_does_not_draw(three_experiments, tmp_path):
    db, (calibrated, bare, named) = three_experiments
    without = write_experiment_report(db, bare, tmp_path / "bare.html").read_text()
    assert WIRE_CAPTION not in without and "no calibration" in without
    with_named = write_experiment_report(db, named, tmp_path / "named.html").read_text()
    assert WIRE_CAPTION in with_named and "calibration of experiment 1" in with_named
    # The report of experiment 2 against a calibration named on the command line.
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "experiment", "report", str(bare), "--db", str(db), "--calibration", "1"]
        + ["-o", str(tmp_path / "cli.html")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert WIRE_CAPTION in (tmp_path / "cli.html").read_text()
    refused = subprocess.run(
        [sys.executable, "-m", "lowtail", "experiment", "report", str(bare), "--db", str(db), "--calibration", "2"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "experiment 2 has no valid calibration runs" in refused.stderr


def test_an_experiment_file_names_its_calibration():
    dut = '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'
    exp = spec.parse(
        "[experiment]\ncalibrate = false\ncalibration = 4\n[traffic]\nrates = ['1000pps']\n" + dut, "e.toml"
    )
    assert exp.calibration == 4 and not exp.calibrate
    # Naming a calibration is enough: it does not also measure one of its own (it did).
    named = spec.parse("[experiment]\ncalibration = 1\n[traffic]\nrates = ['1000pps']\n" + dut, "e.toml")
    assert named.calibration == 1 and not named.calibrate
    assert [d.name for d in named.duts] == ["k"]
    own = spec.parse("[traffic]\nrates = ['1000pps']\n" + dut, "e.toml")
    assert own.calibrate and not spec.with_calibration(own, 3).calibrate  # run --calibration 3
    with pytest.raises(UserError, match="ask for two floors"):
        spec.parse("[experiment]\ncalibrate = true\ncalibration = 1\n[traffic]\nrates = ['1000pps']\n" + dut, "e.toml")
    with pytest.raises(UserError, match="line 2: calibration must be an experiment id"):
        spec.parse("[experiment]\ncalibration = 'x'\n[traffic]\nrates = ['1000pps']\n", "e.toml")
