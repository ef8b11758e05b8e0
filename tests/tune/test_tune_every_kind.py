"""`tune --yes` on the live host with every kind of change this host allows — sysctls
(vm.stat_interval, timer_migration), THP's "[a] b c" files, idle states (the governor
proposal; this VM has no cpufreq), and the CPUs of every other task (other-tasks) — all at
once and one by one, ended by keep + `host undo`, by undo, by SIGTERM, by a double Ctrl-C
and by SIGKILL then the next command (any: `list`), which says what is left and how to
undo it; `testbed clean` undoes it. After each, every setting reads as before. The issue's
defect: `tune --yes` could not restore THP (the trial restored its whole line: EINVAL) and
left PID 1 and every user task on one CPU, vm.stat_interval 3600 and timer_migration 0.

KSM and the governor's own file are off or absent here: tests/test_host_settings.py runs the
same trials on a sysroot that has them. Run under `flock /tmp/lowtail-host.lock`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402
from test_tune_signals import _SIGNAL_AFTER_A_KEPT_TRIAL, _SIGNAL_AT_PHASE, EXPERIMENT  # noqa: E402

from lowtail.host import settings as host_settings  # noqa: E402
from lowtail.host.state import OWN_PROGRAMS  # noqa: E402

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow, pytest.mark.host]

LOWTAIL = [sys.executable, "-m", "lowtail"]
KINDS = "vm.stat_interval,timer_migration,thp,governor,other-tasks"
FILES = {
    "proc/sys/vm/stat_interval": "int",
    "proc/sys/kernel/timer_migration": "int",
    "sys/kernel/mm/transparent_hugepage/enabled": "selected",
    "sys/kernel/mm/transparent_hugepage/defrag": "selected",
    "sys/kernel/mm/ksm/run": "int",
}


def host_now() -> dict[str, object]:
    """Every setting tune may change here, as the kernel means it: the files above, every idle
    state's disable, and the allowed CPUs of every user thread (lowtail's own programs aside)."""
    out: dict[str, object] = {}
    for rel, kind in FILES.items():
        p = Path("/") / rel
        if p.exists():
            out[rel] = host_settings.value(kind, p.read_text())
    for p in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpuidle/state*/disable")):
        out[str(p)] = p.read_text().strip()
    for status in Path("/proc").glob("[0-9]*/task/[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue  # ended meanwhile
        if fields.get("Name", "").strip().startswith(OWN_PROGRAMS) or "Cpus_allowed_list" not in fields:
            continue
        out[str(status.parent)] = fields["Cpus_allowed_list"].strip()
    return out


def differences(before: dict[str, object], after: dict[str, object]) -> dict[str, tuple[object, object]]:
    """What reads otherwise than before, tasks that ended or started meanwhile aside."""
    return {k: (v, after[k]) for k, v in before.items() if k in after and after[k] != v}


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune-every-kind")
    (d / "t.toml").write_text(EXPERIMENT.replace('name = "tune-signals"', 'name = "tune-every-kind"'))
    done = subprocess.run([*LOWTAIL, "run", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--json"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    return d, json.loads(done.stdout)[0]["experiment_id"]


def tune_args(d: Path, eid: int, undo_dir: Path, *extra: str) -> list[str]:
    return ["tune", str(d / "t.toml"), "--db", str(d / "t.duckdb"), "--before", str(eid), "--yes",
            "--only", KINDS, "--undo-dir", str(undo_dir), *extra]  # fmt: skip


def undo_kept(undo_dir: Path) -> None:
    for kept in sorted(undo_dir.glob("*.undo.json")):
        done = subprocess.run([*LOWTAIL, "host", "undo", str(kept)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("one_by_one", [False, True], ids=["all-at-once", "one-by-one"])
def test_tune_kept_or_undone_then_host_undo_gives_every_setting_back(before, tmp_path, one_by_one):
    d, eid = before
    as_before = host_now()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    try:
        done = subprocess.run(
            [*LOWTAIL, *tune_args(d, eid, undo_dir, "--json", *(["--one-by-one"] if one_by_one else []))],
            cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "could not restore" not in done.stderr
        kept = sorted(undo_dir.glob("*.undo.json"))
        if not kept:  # every trial undone by tune itself
            assert differences(as_before, host_now()) == {}
        changes = json.loads(done.stdout)["changes"]
        if not one_by_one:  # one trial: one measurement, kept or undone together, one undo file
            assert len({c["after"] for c in changes}) == 1 and changes[0]["after"] is not None, changes
            assert len({c["kept"] for c in changes}) == 1, changes
            assert len({c["undo_file"] for c in changes}) == 1 and len(kept) == (1 if changes[0]["kept"] else 0)
    finally:
        undo_kept(undo_dir)
    assert differences(as_before, host_now()) == {}


@pytest.mark.parametrize(
    ("template", "phase", "sig", "times"),
    [
        (_SIGNAL_AT_PHASE, "measure-after", signal.SIGTERM, 1),
        (_SIGNAL_AT_PHASE, "apply", signal.SIGINT, 2),
        (_SIGNAL_AFTER_A_KEPT_TRIAL, "measure-after", signal.SIGTERM, 1),
        (_SIGNAL_AFTER_A_KEPT_TRIAL, "apply", signal.SIGINT, 2),
    ],
    ids=["term", "double-ctrl-c", "term-after-a-kept-trial", "double-ctrl-c-after-a-kept-trial"],
)
def test_an_interrupted_tune_of_every_kind_leaves_the_host_as_before_or_the_kept_set(
    before, tmp_path, template, phase, sig, times
):
    d, eid = before
    as_before = host_now()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    try:
        done = subprocess.run(
            [sys.executable, "-c", template, phase, str(int(sig)), str(times),
             *tune_args(d, eid, undo_dir, "--one-by-one")],
            cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert done.returncode == 130, done.stderr
        assert "Traceback" not in done.stderr and "not undone" not in done.stderr, done.stderr
        if template is _SIGNAL_AT_PHASE:  # nothing kept: as before, and no undo file left
            assert differences(as_before, host_now()) == {}
            assert not list(undo_dir.glob("*.undo.json"))
    finally:
        undo_kept(undo_dir)
    assert differences(as_before, host_now()) == {}


def test_a_tune_killed_outright_is_said_by_the_next_command_and_undone_by_testbed_clean(before, tmp_path):
    """SIGKILL with a trial of every kind in force (46 tasks stayed on one CPU in the issue):
    the next command of any kind says so first, with the undo file and the way to undo it."""
    d, eid = before
    as_before = host_now()
    undo_dir = tmp_path / "undo"
    undo_dir.mkdir()
    env = dict(os.environ, LOWTAIL_LEFTOVER_NOTICES="1")
    killed = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_PHASE, "measure-after", str(int(signal.SIGKILL)), "1",
         *tune_args(d, eid, undo_dir, "--one-by-one")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip
    try:
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        (left,) = undo_dir.glob("*.undo.json")
        assert differences(as_before, host_now()) != {}  # in force: nothing could undo it
        listed = subprocess.run([*LOWTAIL, "list", "--db", str(tmp_path / "x.duckdb")],
                                capture_output=True, text=True, env=env)  # fmt: skip
        first = listed.stderr.splitlines()[0]
        assert "a tune that was killed" in first and str(left) in first and "lowtail testbed clean" in first, first
        cleaned = subprocess.run([*LOWTAIL, "testbed", "clean"], capture_output=True, text=True, env=env)
        assert cleaned.returncode == 0 and "undid" in cleaned.stderr, cleaned.stderr
        assert not left.exists()
    finally:
        undo_kept(undo_dir)
    assert differences(as_before, host_now()) == {}
