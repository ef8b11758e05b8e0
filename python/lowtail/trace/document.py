"""What a run stores of its kernel trace (trace/run.py records it, store/explain.py keeps it,
explain/run.py reads it back through the store's codec).

JSON by nature, typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import Any, TypedDict


class OwnProcessDoc(TypedDict):
    """One of lowtail's own processes during a run: its pid, when it started (CLOCK_REALTIME
    ns, from /proc's start time in clock ticks after boot), its command name, its threads."""

    pid: int
    started_ns: int | None
    comm: str
    threads: list[int]


class RoleDoc(TypedDict):
    """A role's host and cores there, and the tasks that are its own (by pid and by command
    name). A trace stored before roles had hosts reads with host "" (the store's codec): the
    one host its trace file names is then the role's (explain/run.py)."""

    host: str
    cpus: list[int]
    pids: list[int]
    comms: list[str]


# Why a POST timestamper on a host of its own is listed as untraced.
POST_UNTRACED = "only the PRE timestamper's core is traced; the POST capture runs on a host of its own"


class UntracedDoc(TypedDict):
    """A role whose host was not traced, and why."""

    role: str
    host: str
    reason: str


# A recording's clock mapping (trace/timeline.py's ClockMapping as written, with `stepped` and
# `change_ns`): free-form, as each lowtail wrote it into the trace file's metadata.
ClockFacts = dict[str, Any]


class CoverageDoc(TypedDict):
    """The stretch of time one CPU's trace covers (`timeline.build`, its times mapped to
    CLOCK_REALTIME), and whether it ended early (events dropped, pages with loss)."""

    cpu: int
    first_ns: int | None
    last_ns: int | None
    events: int
    dropped: int
    pages_with_loss: int


class TraceHostSummary(TypedDict):
    """One traced host as an explanation says it: its cores, those whose trace ended early, its clock."""

    host: str
    local: bool  # this host's recording, read with its own clock
    cpus: list[int]
    truncated_cpus: list[int]
    clock: ClockFacts


class TraceSummary(TypedDict):
    """What an explanation says of the trace's hosts (`timeline.TraceFacts.summary`): every
    traced core, those truncated, the clock mapping when there is one host ({} otherwise)."""

    cpus: list[int]
    truncated_cpus: list[int]
    clock: ClockFacts
    hosts: list[TraceHostSummary]


class TraceDocument(TypedDict, total=False):
    """What a run stores of its trace: how it was recorded (`method` "tracefs", or "none"
    with `reason`), the file, the roles, what was not traced, and the recordings' facts
    (timeline.TraceFacts as a dataclass's dict: one entry per traced host)."""

    method: str
    reason: str
    path: str
    roles: dict[str, RoleDoc]
    untraced: list[UntracedDoc]
    info: dict[str, object]
    parse_s: float
    # lowtail's own processes on this host during the run (trace/own.py): the measurement's,
    # never "another task" on a DuT core.
    own_processes: list[OwnProcessDoc]
