"""An interrupted `lowtail tune` leaves the host as it was before tune, or with only the kept
set — never half-applied: Ctrl-C sent (for real, to the process) as each phase of a trial
begins, a double Ctrl-C and SIGTERM as a change is applied and measured. The trial tries vm.stat_interval (a guideline every untuned
host is proposed; harmless), so "as before" is read back from /proc."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402

from lowtail.host.state import differing  # noqa: E402
from lowtail.store import open_store  # noqa: E402
from lowtail.store import runs as runstore  # noqa: E402
from lowtail.store import tune as tunestore  # noqa: E402
from lowtail.tune.loop import PHASES  # noqa: E402

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow, pytest.mark.host]

LOWTAIL = [sys.executable, "-m", "lowtail"]
STAT_INTERVAL = Path("/proc/sys/vm/stat_interval")
EXPERIMENT = """
[experiment]
name = "tune-signals"
duration = "1s"
warmup = "200ms"
repetitions = 3
calibrate = false
trace = false
[traffic]
rates = ["5000pps"]
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
"""
# `lowtail tune` run with `action` done as the phase named by argv[1] begins (the arguments of
# the action follow it; then the command line). One template for every fault the tests inject.
_AT_PHASE = """
import os, signal, sys, threading
from lowtail.core import signals
import lowtail.tune.loop as loop

phase, nargs = sys.argv[1], {nargs}
args, command = sys.argv[2:2 + nargs], sys.argv[2 + nargs:]


def armed(name):
    return True

{setup}

def at(name):
    if armed(name) and name == phase:  # armed() sees every phase
{action}


class Hooks(loop.TuneHooks):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.phase = at


loop.TuneHooks = Hooks
with signals.stop_on_signals(until_exit=True):
    from lowtail.cli import main
    main(command)
"""
# Real signals sent to itself (args: signal, times; 50 ms apart: the later ones arrive while
# the first is being handled).
_SIGNAL_ACTION = """        sig, times = int(args[0]), int(args[1])
        for k in range(1, times):
            threading.Timer(0.05 * k, os.kill, (os.getpid(), sig)).start()
        os.kill(os.getpid(), sig)"""
_SIGNAL_AT_PHASE = _AT_PHASE.format(nargs=2, setup="", action=_SIGNAL_ACTION)
# The same, in the second trial only: the first trial is kept whatever its comparison says
# (the decision is the test's, so that a kept set exists on any host; what is under test is
# what an interruption leaves), and the signal comes as the phase begins in the next trial.
_SIGNAL_AFTER_A_KEPT_TRIAL = _AT_PHASE.format(
    nargs=2,
    setup="""state = {"decided": False, "second": False}
real_decide = loop.decide


def decide_keep_first(*args, **kwargs):
    if state["decided"]:
        return real_decide(*args, **kwargs)
    state["decided"] = True
    return True, [], "kept by the test's decision"


def armed(name):
    # The second trial begins with its first baseline repetition after the first decision.
    state["second"] = state["second"] or (state["decided"] and name == "measure-baseline")
    return state["second"]


loop.decide = decide_keep_first
""",
    action=_SIGNAL_ACTION,
)
# The data directory taken away, a regular file left in its place (args: the directory):
# every later measurement fails to make its experiment's folder.
_DATA_DIR_LOST_AT_PHASE = _AT_PHASE.format(
    nargs=1,
    setup="",
    action="""        if os.path.isdir(args[0]):
            os.rename(args[0], args[0] + ".moved")
            open(args[0], "w").close()""",
)


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """One stored before experiment, shared by every case."""
    if STAT_INTERVAL.read_text().strip() == "3600":
        pytest.skip("vm.stat_interval is 3600 already: tune proposes nothing to interrupt here")
    d = tmp_path_factory.mktemp("tune-signals")
    (d / "t.toml").write_text(EXPERIMENT)
    done = subprocess.run(
        [*LOWTAIL, "run", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--json"], capture_output=True, text=True
    )
    assert done.returncode in (0, 3), done.stderr
    runs = json.loads(done.stdout)
    # Every run's --json carries the host-state fingerprint it was measured under.
    state = runs[0]["host_state"]
    assert (
        len(state["id"]) == 10 and state["settings"]["kernel command line"] == Path("/proc/cmdline").read_text().strip()
    )
    assert state["settings"]["vm.stat_interval"] == STAT_INTERVAL.read_text().strip()
    return d, runs[0]["experiment_id"]


# Ctrl-C as every phase begins; a double Ctrl-C and SIGTERM (the same handler: core/signals.py)
# as a change is applied and while its effect is measured, where what is undone differs.
INTERRUPTIONS = [
    *(pytest.param(p, signal.SIGINT, 1, id=f"ctrl-c-{p}") for p in PHASES),
    *(
        pytest.param(p, sig, times, id=f"{name}-{p}")
        for p in ("apply", "measure-after")
        for sig, times, name in ((signal.SIGINT, 2, "double"), (signal.SIGTERM, 1, "term"))
    ),
]


@pytest.mark.parametrize(("phase", "sig", "times"), INTERRUPTIONS)
def test_an_interrupted_tune_leaves_the_host_as_before_or_with_the_kept_set(before, phase, sig, times, tmp_path):
    d, eid = before
    stat_before = STAT_INTERVAL.read_text().strip()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_PHASE, phase, str(int(sig)), str(times),
         "tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes",
         "--only", "vm.stat_interval", "--undo-dir", str(undo_dir)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if "interrupted" in line]
    assert said, done.stderr
    # Nothing was kept (the trial was cut short), so the host is exactly as before tune.
    assert STAT_INTERVAL.read_text().strip() == stat_before
    assert not list(undo_dir.glob("*.undo.json")), "an undo file of a change still in force"
    if phase in ("measure-before", "propose"):
        return  # before any change: the command's own interruption line
    assert "the host holds what tune kept: nothing" in said[-1], said
    if phase not in ("measure-baseline", "apply"):  # the first repetition's: not applied yet
        assert "(vm.stat_interval) is undone" in said[-1], said


TIMER_MIGRATION = Path("/proc/sys/kernel/timer_migration")


@pytest.mark.parametrize(
    ("phase", "sig", "times"),
    [
        *(pytest.param(p, signal.SIGTERM, 1, id=f"term-{p}") for p in ("apply", "compare")),
        pytest.param("apply", signal.SIGINT, 2, id="double-apply"),
        pytest.param("measure-after", signal.SIGINT, 1, id="ctrl-c-measure-after"),
    ],
)
def test_interrupted_after_a_kept_trial_the_host_holds_exactly_the_kept_set(before, phase, sig, times, tmp_path):
    """One by one, the first trial kept, the second interrupted as its change is applied, as
    its effect is measured and as it is compared:
    the host holds the first trial's setting and nothing of the second's, the kept undo file
    stays (and gives back the first exactly), the second trial's is gone, and the line says both."""
    d, eid = before
    if TIMER_MIGRATION.read_text().strip() == "0":
        pytest.skip("kernel.timer_migration is 0 already: tune proposes no second change here")
    settings = {"vm.stat_interval": STAT_INTERVAL, "timer_migration": TIMER_MIGRATION}

    def read_back() -> dict[str, str]:
        return {k: f.read_text().strip() for k, f in settings.items()}

    as_before = read_back()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SIGNAL_AFTER_A_KEPT_TRIAL, phase, str(int(sig)), str(times),
             "tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes", "--one-by-one",
             "--only", "vm.stat_interval,timer_migration", "--undo-dir", str(undo_dir)],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 130, done.stderr
        assert "Traceback" not in done.stderr
        with open_store(d / "t.duckdb", read_only=True) as store:
            session = tunestore.session(store, max(s["tune_id"] for s in tunestore.sessions(store)))
        assert session["status"] == "interrupted" and len(session["kept"]) == 1, session
        (kept,) = session["kept"]
        (second,) = set(settings) - {kept}
        now = read_back()
        assert now[second] == as_before[second]  # nothing of the interrupted trial
        assert now[kept] != as_before[kept]  # the kept set, in force
        said = [line for line in done.stderr.splitlines() if "interrupted" in line]
        assert said and f"the host holds what tune kept: {kept}" in said[-1], done.stderr
        (kept_file,) = undo_dir.glob("*.undo.json")  # the kept trial's; the interrupted one's is gone
        undone = subprocess.run([*LOWTAIL, "host", "undo", str(kept_file)], capture_output=True, text=True)
        assert undone.returncode == 0, undone.stderr
        assert read_back() == as_before
    finally:
        for k, f in settings.items():
            if f.read_text().strip() != as_before[k]:
                f.write_text(as_before[k])


def test_after_a_reboot_tune_measures_again_against_the_stored_before(before):
    """`tune --after-reboot ID`: the session's before (stored by a dry run that took it with
    --before, measuring nothing) compared with a new measurement; the result is added to the
    session, which `--json` prints again; an unknown session is one line and exit 2."""
    d, eid = before
    base = [*LOWTAIL, "tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--json"]
    planned = subprocess.run([*base, "--before", str(eid)], capture_output=True, text=True)
    assert planned.returncode == 0, planned.stderr
    session = json.loads(planned.stdout)
    assert session["dry_run"] and session["before"] == eid
    done = subprocess.run([*base, "--after-reboot", str(session["tune_id"])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["tune_id"] == session["tune_id"] and doc["before"] == eid
    (later,) = doc["after_reboot"]
    assert later["after"] not in (None, eid) and later["effect"] and later["comparison_id"] == doc["comparison_id"]
    assert later["cmdline"] == Path("/proc/cmdline").read_text().strip()
    missing = subprocess.run([*base, "--after-reboot", "999"], capture_output=True, text=True)
    assert missing.returncode == 2 and json.loads(missing.stdout)["exit_code"] == 2
    assert "no tune session 999" in missing.stderr


def test_a_failure_while_measuring_again_undoes_the_change_being_tried(before, tmp_path):
    """Not only signals: the measurement with the change applied fails (its data directory is
    gone, a regular file stands in its place), and the applied change is undone before the
    error is said."""
    d, eid = before
    stat_before = STAT_INTERVAL.read_text().strip()
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", _DATA_DIR_LOST_AT_PHASE, "measure-after", str(data),
         "tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes",
         "--only", "vm.stat_interval", "--undo-dir", str(tmp_path), "--data-dir", str(data)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode not in (0, 70, 130), done.stderr
    assert "Traceback" not in done.stderr
    assert "the change being tried (vm.stat_interval) is undone" in done.stderr, done.stderr
    assert STAT_INTERVAL.read_text().strip() == stat_before
    assert not list(tmp_path.glob("*.undo.json"))


def test_a_tune_killed_outright_is_undone_by_the_next_tune(before, tmp_path):
    """SIGKILL cannot be caught: the trial it was trying stays in force. The session named its
    owner and the trial's undo file before applying, so the next `tune --yes` on the database
    finds the session "running" with its owner gone, undoes that trial, marks it "killed" and
    says so before it measures; the runs it then measures differ from the before's exactly in
    the setting it applies."""
    d, eid = before
    stat_before = STAT_INTERVAL.read_text().strip()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    args = ["tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes",
            "--only", "vm.stat_interval", "--undo-dir", str(undo_dir), "--one-by-one"]  # fmt: skip
    killed = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_PHASE, "measure-after", str(int(signal.SIGKILL)), "1", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert STAT_INTERVAL.read_text().strip() == "3600"  # in force: nothing could undo it
    (left,) = undo_dir.glob("*.undo.json")
    done = subprocess.run([*LOWTAIL, *args, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    try:
        assert done.returncode == 0, done.stderr
        assert "was killed while running: the change it was trying is undone" in done.stderr, done.stderr
        assert not left.exists()
        doc = json.loads(done.stdout)
        with open_store(d / "t.duckdb", read_only=True) as store:
            statuses = {s["tune_id"]: s["status"] for s in tunestore.sessions(store)}
        assert statuses[doc["tune_id"] - 1] == "killed" and statuses[doc["tune_id"]] == "finished"
        (tried,) = doc["changes"]
        before_state = fingerprints(d, eid)[0]["settings"]
        after_state = fingerprints(d, tried["after"])[0]["settings"]
        assert differing(before_state, after_state) == {"vm.stat_interval": (stat_before, "3600")}
        # The trial's repetitions were measured in turn with the kept state's, and only the
        # trial's under the change.
        with open_store(d / "t.duckdb", read_only=True) as store:
            runs = {e: [r["run_id"] for r in runstore.runs(store, e)] for e in (tried["baseline"], tried["after"])}
        assert sorted(runs[tried["baseline"]] + runs[tried["after"]]) == [
            x for pair in zip(runs[tried["baseline"]], runs[tried["after"]], strict=True) for x in pair
        ]
        assert all(s["settings"]["vm.stat_interval"] == stat_before for s in fingerprints(d, tried["baseline"]))
    finally:
        for kept in undo_dir.glob("*.undo.json"):
            subprocess.run([*LOWTAIL, "host", "undo", str(kept), "--force"], capture_output=True)
    assert STAT_INTERVAL.read_text().strip() == stat_before


def test_a_before_measured_from_another_file_is_refused(before, tmp_path):
    """--before must be this experiment file's measurement: another one's runs would make every
    difference a difference of experiments. One line, exit 2, nothing measured or changed."""
    d, eid = before
    other = tmp_path / "other.toml"
    other.write_text(EXPERIMENT.replace('name = "tune-signals"', 'name = "another"'))
    done = subprocess.run(
        [*LOWTAIL, "tune", str(other), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--before {eid}: experiment {eid} (tune-signals) was not measured from {other}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def fingerprints(d: Path, experiment: int) -> list[dict]:
    with open_store(d / "t.duckdb", read_only=True) as store:
        return [r["host_state"] for r in runstore.runs(store, experiment)]


def test_a_hosts_experiment_is_refused_before_anything_is_measured(tmp_path):
    """tune changes this host's settings; a hosts testbed's DuT runs elsewhere. One line, exit 2."""
    (tmp_path / "id").write_text("")
    spec = tmp_path / "hosts.toml"
    spec.write_text(
        EXPERIMENT.replace('kind = "lowtail-fwd"', 'kind = "lowtail-fwd"\ninterfaces = ["eth2", "eth3"]')
        + '[testbed]\nkind = "hosts"\nidentity = "id"\n[testbed.loadgen]\nssh = "root@lg"\ninterface = "eth1"\n'
        '[testbed.timestamper]\nssh = "root@ts"\npre = "eth1"\npost = "eth2"\n[testbed.dut]\nssh = "root@dut"\n'
    )
    done = subprocess.run(
        [*LOWTAIL, "tune", str(spec), "--db", str(tmp_path / "t.duckdb"), "--yes"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "tune changes this host's settings" in done.stderr and len(done.stderr.strip().splitlines()) == 1
