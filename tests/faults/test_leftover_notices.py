"""What a command killed outright (SIGKILL) leaves on the host is said by the next lowtail
command of any kind, first, in one line with how to undo it: host settings still changed by a
`host apply` or a `tune` trial (its undo file in flight), and testbeds whose owner is gone.
`lowtail testbed clean` undoes the settings. Before, a user who ran no further `tune` or `run`
was never told (46 tasks stayed on CPU 1 after a killed `tune --one-by-one`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from host_fixtures import file_states, make_sysroot

# Each test leaves a killed command's state on purpose and looks at it (tests/conftest.py).
pytestmark = pytest.mark.leftovers

LOWTAIL = [sys.executable, "-m", "lowtail"]
# Apply the untuned sysroot's run-time changes as a tune trial does, then die by SIGKILL
# with them in force (argv: sysroot, undo file).
_KILLED_WHILE_APPLIED = """
import os, signal, sys
from pathlib import Path
from lowtail.host.apply import apply_changes, planned_changes
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan
from lowtail.host.sysroot import SysRoot

root = SysRoot.open(sys.argv[1])
plan = CorePlan((0,), (1, 2, 3), "test")
apply_changes(root, planned_changes(Host(root), plan, cpuset=None), plan, Path(sys.argv[2]), command="tune")
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def state_dirs(tmp_path):
    """The notices turned on, with state directories of this test's own (another run's
    leftovers on this shared host are not this test's)."""
    env = dict(os.environ)
    env |= {
        "LOWTAIL_LEFTOVER_NOTICES": "1",
        "LOWTAIL_UNDO_STATE_DIR": str(tmp_path / "undo-state"),
        "LOWTAIL_STATE_DIR": str(tmp_path / "testbed-state"),
    }
    return env


def run(env: dict[str, str], *argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LOWTAIL, *map(str, argv)], capture_output=True, text=True, env=env, timeout=120)


def test_settings_a_killed_trial_left_are_said_by_the_next_command_and_undone_by_clean(tmp_path, state_dirs):
    root = make_sysroot(tmp_path / "sysroot", tuned=False)
    before = file_states(root)
    undo_file = tmp_path / "trial.undo.json"
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_WHILE_APPLIED, str(root), str(undo_file)], env=state_dirs, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    assert file_states(root) != before and undo_file.exists()
    # Any command, even one that has nothing to do with the host, says it first.
    listed = run(state_dirs, "list", "--db", tmp_path / "x.duckdb")
    first = listed.stderr.splitlines()[0]
    assert "a tune that was killed" in first and "left host settings changed" in first, listed.stderr
    assert f"`lowtail host undo {undo_file}`" in first and "`lowtail testbed clean`" in first
    # The marker of a live process (this test's own apply) is not a leftover.
    assert run(state_dirs, "list", "--db", tmp_path / "x.duckdb").stderr.count("was killed") == 1
    if os.geteuid() != 0:
        pytest.skip("testbed clean needs root")
    cleaned = run(state_dirs, "testbed", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert "undid" in cleaned.stderr and str(undo_file) in cleaned.stderr, cleaned.stderr
    restored = file_states(root)
    thp = ("sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag")
    # A plain sysroot file holds the word written back, where the kernel shows it bracketed.
    assert {k: v for k, v in restored.items() if k not in thp} == {k: v for k, v in before.items() if k not in thp}
    assert [restored[k].strip() for k in thp] == ["always", "madvise"]
    assert not undo_file.exists()
    again = run(state_dirs, "list", "--db", tmp_path / "x.duckdb")
    assert "was killed" not in again.stderr, again.stderr


def test_a_testbed_whose_owner_is_gone_is_said_by_the_next_command(tmp_path, state_dirs):
    gone = subprocess.Popen(["true"])
    gone.wait()
    tag = f"lt{gone.pid}x0abc"
    states = Path(state_dirs["LOWTAIL_STATE_DIR"])
    states.mkdir()
    (states / f"{tag}.json").write_text(
        json.dumps({"tag": tag, "owner_pid": gone.pid, "owner_start": None, "netns": [f"{tag}-lg"]})
    )
    listed = run(state_dirs, "list", "--db", tmp_path / "x.duckdb")
    said = [line for line in listed.stderr.splitlines() if "killed run(s) left testbed(s)" in line]
    assert said and tag in said[0] and "`lowtail testbed clean` removes them" in said[0], listed.stderr


def test_a_state_file_its_owner_was_killed_while_saving_is_said_and_cleaned(tmp_path, state_dirs):
    """SIGKILL between creating a testbed's state file copy and renaming it leaves `<tag>.partial`
    (a fresh clone's `make test` left one, empty): the next command says so, and `testbed clean`
    removes it; a live owner's is not touched."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    tag, live = f"lt{gone.pid}x0abc", f"lt{os.getpid()}x0def"
    states = Path(state_dirs["LOWTAIL_STATE_DIR"])
    states.mkdir()
    (states / f"{tag}.partial").write_text("")
    (states / f"{live}.partial").write_text("")
    listed = run(state_dirs, "list", "--db", tmp_path / "x.duckdb")
    said = [line for line in listed.stderr.splitlines() if "killed run(s) left testbed(s)" in line]
    assert said and tag in said[0] and live not in said[0], listed.stderr
    if os.geteuid() != 0:
        pytest.skip("testbed clean needs root")
    cleaned = run(state_dirs, "testbed", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (states / f"{tag}.partial").exists() and (states / f"{live}.partial").exists()


def test_the_notices_are_one_line_each_and_quiet_when_nothing_is_left(tmp_path, state_dirs):
    done = run(state_dirs, "list", "--db", tmp_path / "x.duckdb")
    assert "killed" not in done.stderr, done.stderr
