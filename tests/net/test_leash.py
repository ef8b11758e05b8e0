"""lowtail-leash, the supervisor of every remote role: the program ends when the controller
says stop, when its stdin closes, when heartbeats stop, or by itself; undo commands run
whatever ended it; the clocks and statistics come back on its last lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lowtail.core.binaries import find_binary
from lowtail.core.errors import UserError


def _leash() -> str:
    try:
        return str(find_binary("lowtail-leash"))
    except UserError:
        pytest.skip("lowtail-leash is not built (make build)")


def start(tmp_path: Path, *args: str, program: list[str] | None = None) -> subprocess.Popen:
    argv = [_leash(), "--grace", "1s", "--undo", f"echo undone >> {tmp_path / 'undo'}", *args]
    if program:
        argv += ["--", *program]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def child_pid(leash: subprocess.Popen, before: list[str] | None = None) -> int:
    """The program's pid from the leash's started line. The program shares the leash's
    stdout and may print before the leash does (as the controller's reader allows): such
    lines go to `before`."""
    while True:
        line = leash.stdout.readline()
        words = line.split()
        if words[:1] == ["@leash"]:
            assert words[1] == "started", line
            return int(words[2])
        assert line, "the leash ended before it said it started"
        if before is not None:
            before.append(line.strip())


def gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_stop_interrupts_the_program_runs_undo_and_reports_clocks_and_statistics(tmp_path):
    stats = tmp_path / "stats.json"
    # The program writes its statistics when interrupted, as the native programs do.
    script = f'trap \'echo {{"\\"sent\\"": 7}} > {stats}; exit 0\' INT; echo ready; while :; do sleep 0.05; done'
    leash = start(tmp_path, "--stats", str(stats), program=["sh", "-c", script])
    before: list[str] = []
    pid = child_pid(leash, before)
    assert (before or [leash.stdout.readline().strip()]) == ["ready"]
    leash.stdin.write("\n")  # a heartbeat changes nothing
    leash.stdin.write("stop\n")
    leash.stdin.flush()
    rest = leash.stdout.read().splitlines()
    assert leash.wait(10) == 0
    assert gone(pid)
    assert json.loads(rest[0].split(None, 2)[2]) == {"sent": 7}
    words = rest[-1].split()
    assert words[:3] == ["@leash", "exit", "0"] and words[3] == "clock"
    assert (tmp_path / "undo").read_text() == "undone\n"


def test_a_controller_that_goes_away_stops_the_role(tmp_path):
    leash = start(tmp_path, program=["sleep", "600"])
    pid = child_pid(leash)
    leash.stdin.close()  # what a lost SSH session looks like from the other end
    assert leash.wait(10) == 128 + signal.SIGINT
    assert gone(pid)
    assert "the controller is gone" in leash.stderr.read()
    assert (tmp_path / "undo").read_text() == "undone\n"


def test_a_lost_session_with_nowhere_to_write_still_stops_and_undoes(tmp_path):
    """sshd gone: stdin, stdout and stderr all lead nowhere; writing must not stop the undo."""
    leash = start(tmp_path, program=["sleep", "600"])
    pid = child_pid(leash)
    leash.stdout.close()
    leash.stderr.close()
    leash.stdin.close()
    leash.wait(10)
    assert gone(pid)
    assert (tmp_path / "undo").read_text() == "undone\n"


def test_silence_stops_the_role_after_the_heartbeat_timeout(tmp_path):
    leash = start(tmp_path, "--heartbeat-timeout", "500ms", program=["sleep", "600"])
    pid = child_pid(leash)
    started = time.monotonic()
    assert leash.wait(10) == 128 + signal.SIGINT
    assert time.monotonic() - started >= 0.4
    assert gone(pid)
    assert "no heartbeat" in leash.stderr.read()


def test_a_program_deaf_to_sigint_is_terminated(tmp_path):
    # "ready" once the trap is set (a file): a stop sent before would end sh by SIGINT.
    ready = tmp_path / "ready"
    leash = start(tmp_path, program=["sh", "-c", f"trap '' INT; touch {ready}; while :; do sleep 0.05; done"])
    pid = child_pid(leash)
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    leash.stdin.write("stop\n")
    leash.stdin.flush()
    assert leash.wait(10) == 128 + signal.SIGTERM
    assert gone(pid)


def test_the_program_ending_ends_the_leash_with_its_exit_code(tmp_path):
    leash = start(tmp_path, program=["sh", "-c", "exit 3"])
    assert leash.wait(10) == 3
    assert leash.stdout.read().splitlines()[-1].startswith("@leash exit 3 clock ")
    assert (tmp_path / "undo").read_text() == "undone\n"


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_keeper_holds_until_released_and_a_killed_leash_takes_its_program_along(tmp_path):
    keeper = start(tmp_path)
    assert keeper.stdout.readline().startswith("@leash holding clock ")
    assert keeper.poll() is None
    keeper.send_signal(signal.SIGTERM)
    assert keeper.wait(10) == 0
    assert (tmp_path / "undo").read_text() == "undone\n"

    leash = start(tmp_path, program=["sleep", "600"])
    pid = child_pid(leash)
    leash.kill()  # no undo can run, but the program must not outlive it (PR_SET_PDEATHSIG)
    leash.wait(10)
    assert gone(pid)


def test_a_program_that_cannot_start_is_a_one_line_error(tmp_path):
    leash = start(tmp_path, program=[str(tmp_path / "nothing-here")])
    assert leash.wait(10) == 2
    assert "cannot start" in leash.stderr.read()
