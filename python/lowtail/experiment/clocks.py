"""The clocks a run's PRE and POST timestamps come from, and what they mean for its latencies.

A latency is POST's timestamp minus PRE's, so it is only as good as the agreement of the two
clocks. Each side's clock is recorded with the run (`runs.testbed.clocks`): the host that
stamped it (name and boot id: one kernel, one CLOCK_REALTIME), the interface, the source
(`hardware` or `software`, as the timestamper observed it per frame) and the NIC's PTP hardware
clock (`phc_index`) when hardware stamped. Two sides read one clock when one timestamper
process stamped both in software, or both with one PHC, or two processes under one kernel
(same boot id) in software. Anything else is two clocks, and `lowtail run` and the
experiment report say so beside the run. A clock that is stepped during a run (NTP, PTP,
`date`) makes the run invalid: `clock_step_ns` finds the step from readings of CLOCK_REALTIME
and CLOCK_MONOTONIC (which never steps) at the capture's start and end.

Shared by the testbed (which records) and the report (which reads), so neither needs the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowtail.testbed.document import ClockJudgement, ClockSide, TimeSources

# Said wherever runs whose PRE and POST came from different clocks are shown.
TWO_CLOCKS_WARNING = (
    "runs marked [2 clocks] were stamped with different clocks on their PRE and POST side: their latencies "
    "include the offset and drift between those clocks (as good as the clocks' synchronisation, e.g. PTP)"
)
# The most NTP slews a clock (500 ppm), plus the time between reading the two clocks.
_SLEW_PPM = 500
_READING_SLACK_NS = 1_000_000


def clock_side(
    host: str,
    boot_id: str | None,
    interface: str,
    capture_entry: Mapping[str, Any],
    process: str,
    ptp: TimeSources | None = None,
) -> ClockSide:
    """One side's clock: where it was stamped (`process` tells timestamper processes apart)
    and how, from the timestamper's statistics for that interface."""
    return {
        "host": host,
        "boot_id": boot_id,
        "interface": interface,
        "timestamp_source": capture_entry.get("timestamp_source"),
        "phc_index": capture_entry.get("phc_index"),
        "process": process,
        "ptp": ptp,
    }


def judge(pre: ClockSide, post: ClockSide) -> ClockJudgement:
    """Whether PRE and POST read one clock, and why (in words), with both sides recorded."""
    sources = {pre.get("timestamp_source"), post.get("timestamp_source")}
    same_kernel = pre.get("boot_id") is not None and pre.get("boot_id") == post.get("boot_id")
    same_process = same_kernel and pre.get("process") == post.get("process")
    if "mixed" in sources or len(sources) > 1:
        same, why = False, f"PRE stamped by {_source(pre)}, POST by {_source(post)}"
    elif sources == {"hardware"}:
        same = same_kernel and pre.get("phc_index") is not None and pre.get("phc_index") == post.get("phc_index")
        why = (
            f"both sides stamped by PTP hardware clock {pre.get('phc_index')} of {pre['host']}"
            if same
            else f"PRE stamped by {_source(pre)}, POST by {_source(post)}"
        )
    elif same_process:
        same, why = True, f"one timestamper on {pre['host']} stamped both sides with its kernel clock"
    elif same_kernel:
        same, why = True, f"both sides stamped with the kernel clock of one host ({pre['host']}: same boot id)"
    else:
        same, why = False, f"PRE stamped on {pre['host']}, POST on {post['host']}: two hosts' clocks"
    return {"same": same, "why": why, "pre": pre, "post": post}


def _source(side: ClockSide) -> str:
    source = side.get("timestamp_source") or "unknown"
    phc = f" (PHC {side['phc_index']})" if side.get("phc_index") is not None and source == "hardware" else ""
    return f"{source} timestamps{phc} on {side.get('host')} {side.get('interface')}"


def clock_step_ns(start: tuple[int, int], end: tuple[int, int]) -> int:
    """How far CLOCK_REALTIME was stepped between two (realtime, monotonic) readings: its
    advance minus the monotonic clock's (0 when it only ran)."""
    return (end[0] - start[0]) - (end[1] - start[1])


def stepped(start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the step is more than slewing (at most 500 ppm of the time between) explains."""
    elapsed = max(0, end[1] - start[1])
    return abs(clock_step_ns(start, end)) > elapsed * _SLEW_PPM // 1_000_000 + _READING_SLACK_NS


def two_clocks(testbed: Mapping[str, Any] | None) -> bool:
    """Whether a stored run's PRE and POST were stamped with different clocks."""
    clocks = (testbed or {}).get("clocks") or {}
    return clocks.get("same") is False


def marked(label: str, testbed: Mapping[str, Any] | None) -> str:
    """A DuT's label with "[2 clocks]" when its run's sides used different clocks."""
    return f"{label} [2 clocks]" if two_clocks(testbed) else label


def any_two_clocks(runs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of these stored runs had PRE and POST on different clocks."""
    return any(two_clocks(r.get("testbed")) for r in runs)
