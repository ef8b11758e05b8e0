"""Which process is which: a pid with its start time names one process (a pid reused later
has another start time). Owners of testbeds and of imports in progress are recorded so, and
what a dead owner left is removed by the next command that finds it."""

from __future__ import annotations

import os
from pathlib import Path


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
