"""Which process is which: a pid with its start time names one process (a pid reused later
has another start time). Owners of testbeds and of imports in progress are recorded so, and
what a dead owner left is removed by the next command that finds it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from lowtail.core import signals

# A stop signal (Ctrl-C) is raised as an exception wherever the main thread stands. Raised
# inside subprocess's poll() between its taking of the child's `_waitpid_lock` and the `try`
# that gives the lock back, it leaves the lock taken: every later poll of that child says
# "running" and every wait blocks for ever (seen: Ctrl-C in a run of a VM DuT left lowtail
# waiting in a program's stop(), QEMU already a zombie). So lowtail polls and waits on its
# children whole, a stop arriving inside raised once the step is over: steps this short.
_WAIT_STEP_S = 0.05


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat),
    or None when no such process exists. Together with the pid it names one process:
    a pid reused later has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def is_alive(pid: int, start_time: int | None) -> bool:
    """Whether the process that had this pid and start time still runs."""
    now = process_start_time(pid)
    if now is None:
        return False
    if start_time is not None and now != start_time:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def this_process() -> tuple[int, int | None]:
    """This process's pid and start time."""
    return os.getpid(), process_start_time(os.getpid())


def exit_code(child: subprocess.Popen[bytes] | subprocess.Popen[str]) -> int | None:
    """The child's exit code (negative: the signal that ended it), None while it runs; a stop
    signal that arrives meanwhile is raised after the poll, not inside it."""
    with signals.held():
        return child.poll()


def wait_for(child: subprocess.Popen[bytes] | subprocess.Popen[str], timeout_s: float | None = None) -> int | None:
    """Wait for the child to end: its exit code, or None once `timeout_s` passed (None: no
    limit). In steps, each whole: a stop signal is raised within one step."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = _WAIT_STEP_S if deadline is None else max(0.0, deadline - time.monotonic())
        with signals.held():
            try:
                return child.wait(min(_WAIT_STEP_S, left))
            except subprocess.TimeoutExpired:
                pass
        if deadline is not None and time.monotonic() >= deadline:
            return None
