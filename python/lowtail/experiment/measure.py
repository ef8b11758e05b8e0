"""One run: build the testbed, start the DuT, wait until it forwards, capture both sides
while the generator sends, take everything down, and say whether the run can be trusted.

Order matters: the timestamper is capturing before the first frame leaves and stops only
after the last one had time to come back (the drain); the DuT is watched while traffic
flows, so a crash is reported as a crash, not as mysterious loss.

The testbed comes from the session (testbed/sessions.py): lowtail's namespaces, the user's
interfaces, or other hosts. Programs start through the sites of the testbed's points, so
this file does not care where they run; PRE and POST on two hosts get a timestamper each,
and the run records which clock stamped each side (lowtail.experiment.clocks).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.core.errors import Failure
from lowtail.core.units import format_ns
from lowtail.experiment import clocks
from lowtail.experiment.live import LiveFeed, LiveSample
from lowtail.experiment.spec import Combination, Experiment, Traffic, Trust
from lowtail.host.document import EnergyReading
from lowtail.host.energy import EnergyMeter
from lowtail.host.interrupts import InterruptSampler
from lowtail.testbed.cores import CAPTURE_RT_PRIORITY, CoreRoles
from lowtail.testbed.document import CaptureStatistics, Containment, DutCounters, GeneratorStatistics, TestbedDocument
from lowtail.testbed.duts import make_dut
from lowtail.testbed.duts.base import Dut, DutFacts
from lowtail.testbed.process import time_limit
from lowtail.testbed.sessions import Session
from lowtail.testbed.sites import Point
from lowtail.testbed.topology import NamespacesTestbed
from lowtail.trace.document import TraceDocument
from lowtail.trace.run import start_run_trace

# RFC 2544's benchmarking range: never a real host's address.
SRC_IP, DST_IP = "198.18.0.1", "198.19.0.1"
SNAPLEN = 128
# lowtail-gen's exit code when it sent everything but did not hold the rate or had frames
# refused: a result (its statistics say which), not a failure.
GENERATOR_BEHIND = _native.PROGRAM_EXIT_CODES["degraded"]
# A native program's exit code when an output (capture, statistics) hit a full disk.
DISK_FULL = _native.PROGRAM_EXIT_CODES["disk_full"]


class DutFailed(Exception):
    """The DuT never forwarded (bad command, crash at start-up): the run is stored invalid."""


@dataclass
class Outcome:
    started_at: datetime
    finished_at: datetime | None = None
    generator: GeneratorStatistics = field(default_factory=lambda: GeneratorStatistics())
    capture: CaptureStatistics = field(default_factory=lambda: CaptureStatistics())
    dut_stats: DutCounters = field(default_factory=dict)  # the DuT kind's own (testbed/duts), as is
    containment: Containment = field(default_factory=lambda: {"mode": "bare"})
    virtualization: str | None = None  # kvm | tcg when the DuT is a VM
    guest_interrupts: list[Any] = field(default_factory=list)
    traffic_window_ns: tuple[int, int] | None = None  # when the interrupt samplers ran
    energy: EnergyReading | None = None
    interrupts: Any = None
    steal: list[Any] = field(default_factory=list)  # the sampler's steal time (host/steal.py)
    invalid_reasons: list[str] = field(default_factory=list)
    # Trusted figures, but not of the traffic the file asked for (see spec.Trust).
    degraded_reasons: list[str] = field(default_factory=list)
    pre: Path | None = None
    post: Path | None = None
    # A chain's captures of the links between its hops, in order (between PRE and POST).
    links: list[Path] = field(default_factory=list)
    frames_planned: int = 0
    # Set as soon as the testbed is built (a run whose testbed fails is not stored).
    testbed: TestbedDocument = field(default_factory=lambda: TestbedDocument(kind=""))
    trace: TraceDocument | None = None  # the kernel trace of the roles' cores


def frames_for(exp: Experiment, combo: Combination) -> int:
    """Frames the generator sends in one run: warm-up and measured time at the run's rate."""
    return math.ceil(combo.traffic.rate_pps * (exp.warmup_ns + exp.measured_ns(combo.traffic)) / 1e9)


# How long the timestamper has to say it captures.
CAPTURE_START_TIMEOUT_S = 15.0


def programs_time_limit_s(exp: Experiment, combo: Combination, dut: Dut[Any]) -> float:
    """The longest a run's programs may run (they stop by themselves then, should lowtail
    hang): twice what the run takes from its first program's start at the most — the DuT's
    readiness, the timestamper's start, the traffic and its drain — and a minute."""
    run_s = dut.ready_timeout_s + CAPTURE_START_TIMEOUT_S + exp.traffic_ns(combo.traffic) / 1e9
    return 2 * run_s + 60


def measure(
    exp: Experiment,
    combo: Combination,
    plan: CoreRoles,
    run_dir: Path,
    session: Session,
    on_live: Callable[[LiveSample], None] = lambda sample: None,
) -> Outcome:
    """One run of a combination on a fresh testbed of the session: its programs'
    statistics, captures and the reasons (if any) it cannot be trusted. `on_live` gets the
    programs' running figures about once a second while the traffic flows (where they
    run on this host)."""
    outcome = Outcome(started_at=datetime.now(), frames_planned=frames_for(exp, combo))
    dut = make_dut(combo.dut.kind, combo.dut.name, combo.dut.options)
    hops = len(combo.dut.hops)
    with (
        time_limit(programs_time_limit_s(exp, combo, dut)),
        session.testbed(
            run_dir,
            wire=combo.dut.calibration,
            dut_interfaces=combo.dut.interfaces,
            hops=[h.interfaces for h in combo.dut.hops],
        ) as tb,
    ):
        outcome.testbed = tb.describe()
        try:
            dut.start(tb, plan)
            outcome.degraded_reasons += dut.core_plan_warnings(plan)
            _wait_until_forwarding(tb, dut)
            links = tb.links if hops else []
            captures = _start_capture(tb, plan, run_dir, outcome, combo.traffic.udp_dst_port, links)
            # Its instance is in the testbed's registry: however the run ends, it goes with the testbed.
            tracer = start_run_trace(
                tb, plan, dut, exp.traffic_ns(combo.traffic) / 1e9, combo.traffic.rate_pps, enabled=exp.trace
            )
            _send(exp, combo, tb, plan, run_dir, dut, outcome, captures, on_live)
            time.sleep(exp.drain_ns / 1e9)
            outcome.trace = tracer.stop(tb, run_dir)
        except DutFailed as e:
            outcome.invalid_reasons.append(str(e))
            _record_dut(outcome, dut.facts(dut.stop(), frames_sent=None))
            outcome.finished_at = datetime.now()
            return outcome
        for capture in captures:
            if capture.died():
                raise Failure(
                    _disk_full_or(capture, f"the timestamper stopped during the run: {capture.exit_message()}")
                )
        _finish_capture(tb, captures, run_dir, outcome)
        _record_dut(outcome, dut.facts(dut.stop(), frames_sent=int(outcome.generator.get("sent") or 0)))
        if outcome.traffic_window_ns:
            outcome.guest_interrupts = dut.guest_interrupts(*outcome.traffic_window_ns)
        judge_outcome(outcome, exp.trust)
    outcome.finished_at = datetime.now()
    return outcome


def _record_dut(outcome: Outcome, facts: DutFacts) -> None:
    """What the run keeps of its DuT, all of it from `Dut.facts` (the one place a kind declares it)."""
    outcome.dut_stats = facts["statistics"]
    outcome.containment = facts["containment"]
    outcome.virtualization = facts["virtualization"]
    outcome.invalid_reasons += facts["invalid_reasons"]


def _wait_until_forwarding(tb: NamespacesTestbed, dut: Dut[Any]) -> None:
    took = tb.wait_until_forwarding(dut.ready_timeout_s, still_starting=lambda: dut.failure() is None)
    if took is None:
        raise DutFailed(
            dut.failure()
            or f"the DuT {dut.name} ({dut.kind}) forwarded nothing within {dut.ready_timeout_s:g} s of starting"
        )


# The programs' running figures (one JSON line a second each), read while the traffic flows.
GENERATOR_LIVE, CAPTURE_LIVE = "generator.live.jsonl", "capture.live.jsonl"


@dataclass
class _Capture:
    """One timestamper process: the sides (pre, post) it stamps at one site."""

    program: Any
    site: Any
    sides: list[str]
    stats: str
    clock_start: tuple[int, int]
    clock_end: tuple[int, int] | None = None

    def died(self) -> bool:
        return bool(self.program.died())

    def exit_message(self) -> str:
        return str(self.program.exit_message())

    def log_tail(self, lines: int) -> str:
        return str(self.program.log_tail(lines))

    @property
    def name(self) -> str:
        return str(self.program.name)

    def returncode(self) -> int | None:
        code = self.program.returncode()
        return None if code is None else int(code)


def _clock_reading() -> tuple[int, int]:
    return time.clock_gettime_ns(time.CLOCK_REALTIME), time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _start_capture(
    tb: NamespacesTestbed, plan: CoreRoles, run_dir: Path, outcome: Outcome, udp_port: int, links: list[Point]
) -> list[_Capture]:
    """The timestamper: one process stamping PRE and POST where they are at one site (one
    clock), else one process per side; the one process on this host also writes its
    running figures (it matches PRE and POST as it captures). A chain's links (in other
    namespaces of this host) are stamped by the same process as PRE and POST: one clock for
    every timestamp of a packet; it then writes no running figures (they match two sides)."""
    outcome.pre, outcome.post = run_dir / "pre.pcap.zst", run_dir / "post.pcap.zst"
    points: dict[str, Point] = {"pre": tb.pre, "post": tb.post}
    link_sides = [link_side(i) for i in range(1, len(links) + 1)]
    points |= dict(zip(link_sides, links, strict=True))
    outcome.links = [run_dir / f"{side}.pcap.zst" for side in link_sides]
    groups = [["pre", "post", *link_sides]] if tb.pre.site is tb.post.site else [["pre"], ["post"]]
    captures = []
    for sides in groups:
        site = points[sides[0]].site
        name = "capture" if len(sides) == 2 else f"capture-{sides[0]}"
        stats = site.path(f"{name}.json")
        argv = [site.binary("lowtail-cap")]
        for side in sides:
            point = points[side]
            # The process runs where its first side is; a link elsewhere is named IF@NETNS.
            iface = point.interface if point.netns == points[sides[0]].netns else f"{point.interface}@{point.netns}"
            argv += ["--iface", iface, "--out", site.path(f"{side}.pcap.zst")]
        argv += [
            "--cpu",
            str(plan.capture),
            "--rt-priority",
            str(CAPTURE_RT_PRIORITY),
            "--snaplen",
            str(SNAPLEN),
            "--zstd",
            "--stats-json",
            stats,
            "--ready-file",
            site.path(f"{name}.ready"),
        ]
        if site.local and len(sides) == 2:
            argv += ["--live-json", site.path(CAPTURE_LIVE), "--live-udp-port", str(udp_port)]
        started = _clock_reading()
        program = site.spawn(name, argv, ns=points[sides[0]].netns, stats=stats)
        capture = _Capture(program, site, sides, stats, started)
        captures.append(capture)
        if not program.wait_file(Path(site.path(f"{name}.ready")), timeout_s=CAPTURE_START_TIMEOUT_S):
            raise Failure(_disk_full_or(capture, f"the timestamper did not start: {capture.exit_message()}"))
    return captures


def link_side(number: int) -> str:
    """The name of a chain's `number`-th captured link (from 1): its capture is NAME.pcap.zst."""
    return f"link{number}"


def _finish_capture(tb: NamespacesTestbed, captures: list[_Capture], run_dir: Path, outcome: Outcome) -> None:
    """Stop the timestampers, bring their captures here, and record their statistics, the
    clock of each side and whether a clock was stepped during the run."""
    docs: list[CaptureStatistics] = []
    sides = {}
    for capture in captures:
        if capture.program.stop() == DISK_FULL:
            raise Failure(_disk_full_or(capture, "the timestamper could not write its capture"))
        capture.clock_end = _clock_reading()
        written = capture.program.statistics()
        doc: CaptureStatistics = written if written else {}
        docs.append(doc)
        for side in capture.sides:
            capture.site.fetch(f"{side}.pcap.zst", run_dir / f"{side}.pcap.zst")
        entries = doc.get("interfaces", [])
        for i, side in enumerate(capture.sides[:2] if len(capture.sides) > 2 else capture.sides):
            point = tb.pre if side == "pre" else tb.post
            entry = entries[i] if i < len(entries) else {}
            sides[side] = clocks.clock_side(
                point.site.label,
                point.site.identity().get("boot_id"),
                point.interface,
                entry,
                process=f"{point.site.label}/{'+'.join(capture.sides)}",
                ptp=point.site.identity().get("ptp"),
            )
        start, end = capture.site.clocks(capture.program, capture.clock_start, capture.clock_end)
        if start is not None and end is not None and clocks.stepped(start, end):
            outcome.invalid_reasons.append(
                f"the clock of the timestamper on {capture.site.label} was stepped by "
                f"{format_ns(clocks.clock_step_ns(start, end))} during the run (NTP, PTP or someone set it): "
                f"latencies across the step are wrong"
            )
    outcome.capture = _merged(docs)
    if "pre" in sides and "post" in sides:
        outcome.testbed["clocks"] = clocks.judge(sides["pre"], sides["post"])


def _merged(docs: list[CaptureStatistics]) -> CaptureStatistics:
    """One timestamper's statistics as they are; two timestampers' as one document (their
    interfaces in PRE, POST order, frames and drops summed) with each kept in full."""
    if len(docs) == 1:
        return docs[0]
    if not all(docs):
        return {}
    return {
        "interfaces": [entry for d in docs for entry in d.get("interfaces", [])],
        "frames": sum(d.get("frames", 0) for d in docs),
        "drops": sum(d.get("drops", 0) for d in docs),
        "complete": all(d.get("complete", False) for d in docs),
        "host_backlog_drops": sum(d.get("host_backlog_drops") or 0 for d in docs),
        "timestampers": docs,
    }


def generator_argv(
    binary: str,
    interface: str,
    traffic: Traffic,
    count: int,
    src_mac: str,
    dst_mac: str,
    plan: CoreRoles,
    isolated: set[int] | None,
    stats: str,
) -> list[str]:
    """lowtail-gen's command line for `count` frames of `traffic` from `interface`, pinned
    and scheduled as the core plan says on a host whose isolated cores are `isolated`: the
    one place it is written (a run, and bench/testbed_loop.py's testbed loop)."""
    return [
        binary,
        "--iface",
        interface,
        "--rate",
        str(traffic.rate_pps),
        "--count",
        str(count),
        "--frame-size",
        str(traffic.frame_size),
        "--burst",
        str(traffic.burst),
        "--udp-dst-port",
        str(traffic.udp_dst_port),
        "--flows",
        str(traffic.flows),
        *(("--flow-weights", ",".join(map(str, traffic.flow_weights))) if traffic.flow_weights else ()),
        "--src-mac",
        src_mac,
        "--dst-mac",
        dst_mac,
        "--src-ip",
        SRC_IP,
        "--dst-ip",
        DST_IP,
        "--cpu",
        str(plan.generator),
        *plan.generator_scheduling(isolated),
        "--stats-json",
        stats,
        # The share of packets that carry the IPS rule's marker (none unless asked).
        *(("--match-share", repr(traffic.match_share)) if traffic.match_share else ()),
    ]


def _send(
    exp: Experiment,
    combo: Combination,
    tb: NamespacesTestbed,
    plan: CoreRoles,
    run_dir: Path,
    dut: Dut[Any],
    outcome: Outcome,
    captures: list[_Capture],
    on_live: Callable[[LiveSample], None],
) -> None:
    t = combo.traffic
    site = tb.generator.site
    stats = site.path("generator.json")
    argv = generator_argv(
        site.binary("lowtail-gen"),
        tb.generator.interface,
        t,
        outcome.frames_planned,
        tb.generator.mac,
        tb.dst_mac,
        plan,
        site.isolated_cpus(),
        stats,
    )
    # The running figures are read here: only from programs on this host.
    feed = None
    if site.local:
        argv += ["--live-json", site.path(GENERATOR_LIVE)]
        feed = LiveFeed(Path(site.path(GENERATOR_LIVE)), Path(captures[0].site.path(CAPTURE_LIVE)))
    # This host's interrupts and energy describe the run only where the DuT runs here.
    sampler = InterruptSampler(housekeeping_cpu=plan.housekeeping) if tb.dut_site.local else None
    meter = EnergyMeter() if tb.dut_site.local else None
    for instrument in (sampler, meter):
        if instrument is not None:
            instrument.start()
    window_start = time.time_ns()
    generator = site.spawn("generator", argv, ns=tb.generator.netns, stats=stats)
    # A generator that cannot keep up would take forever at an unreachable rate: the run
    # is invalid anyway once it takes twice as long as planned.
    deadline = time.monotonic() + 2 * outcome.frames_planned / t.rate_pps + 5.0
    crash = None
    try:
        # A DuT that crashes does not stop the traffic: what it did to the rest of the run
        # (loss from then on) is measured, and the run is marked invalid.
        while generator.wait(0.05) is None:
            sample = feed.poll() if feed is not None else None
            if sample is not None:
                on_live(sample)
            crash = crash or dut.failure()
            # A timestamper gone (its host lost) ends the run now: nothing more is measured.
            if time.monotonic() > deadline or any(c.died() for c in captures):
                generator.stop()
                break
    finally:
        outcome.energy = meter.stop() if meter else None
        outcome.interrupts = sampler.stop() if sampler else None
        outcome.steal = sampler.steal if sampler else []
        outcome.traffic_window_ns = (window_start, time.time_ns())
    written = generator.statistics()
    outcome.generator = written if written else {}
    if crash:
        outcome.invalid_reasons.append(f"{crash} while traffic was flowing")
    elif generator.stop_signal is not None:
        outcome.invalid_reasons.append("the generator did not finish in time and was stopped")
    elif generator.popen.returncode not in (0, GENERATOR_BEHIND):
        raise Failure(_disk_full_or(generator, f"the traffic generator failed: {generator.exit_message()}"))
    crash = crash or dut.failure()
    if crash and not outcome.invalid_reasons:
        outcome.invalid_reasons.append(f"{crash} during the run")


def _disk_full_or(program: Any, message: str) -> str:
    """The run's failure reason: "disk full: …" when the program's exit code says its
    output hit a full disk (the programs' typed signal; their log may not even have been
    written), else `message`."""
    if program.returncode() == DISK_FULL:
        return f"disk full: {program.name} could not write its output (free some space; finished runs are kept)"
    return message


def judge_outcome(outcome: Outcome, trust: Trust) -> None:
    """The reasons this run cannot be trusted, or is degraded, from the programs' own statistics."""
    gen, cap = outcome.generator, outcome.capture
    stalled = generator_stalled(gen, trust)
    if stalled:
        outcome.degraded_reasons.append(stalled)
    if not gen:
        outcome.invalid_reasons.append("the generator wrote no statistics")
    elif gen.get("kept_up") is False:
        outcome.invalid_reasons.append(generator_behind(gen))
    if gen.get("send_errors"):
        outcome.invalid_reasons.append(
            f"the generator's interface refused {gen['send_errors']:,} frames"
            + (f" ({gen['first_send_error']})" if gen.get("first_send_error") else "")
        )
    drops = capture_drops(cap)
    if drops:
        outcome.invalid_reasons.append(f"the timestamper lost {drops:,} frames (kernel capture drops)")
    if not cap:
        outcome.invalid_reasons.append("the timestamper wrote no statistics: its drops are unknown")


def generator_stalled(gen: GeneratorStatistics, trust: Trust) -> str | None:
    """Why the generator's pacing degrades the run ("generator stalled 2.6 ms (...)"), or
    None when its bursts left close enough to their schedule (spec.Trust's thresholds)."""
    pacing = gen.get("pacing_error_ns")
    worst, p99 = (pacing.get("max"), pacing.get("p99")) if pacing else (None, None)
    stalled = worst is not None and worst > trust.max_stall_ns
    if stalled:
        head = f"generator stalled {format_ns(worst)} (over [trust] max_stall {format_ns(trust.max_stall_ns)}"
    elif p99 is not None and p99 > trust.max_pacing_p99_ns:
        head = (
            f"generator late: p99 pacing error {format_ns(p99)} (over [trust] max_pacing_p99 "
            f"{format_ns(trust.max_pacing_p99_ns)}"
        )
    else:
        return None
    details = [f"p99 pacing error {format_ns(p99)}" if stalled and p99 is not None else None]
    if isinstance(gen.get("late_bursts"), int) and pacing and pacing.get("samples"):
        details.append(f"{gen['late_bursts']:,} of {pacing['samples']:,} bursts late")
    cpu_wait = gen.get("cpu_wait")
    share = cpu_wait.get("share") if cpu_wait else None
    if isinstance(share, (int, float)):
        details.append(f"off its core {100 * share:.1f} % of the run")
    return head + "".join(f"; {d}" for d in details if d) + ")"


GENERATOR_BEHIND_REASON = "the generator did not hold the requested rate"


def generator_behind(gen: GeneratorStatistics) -> str:
    """Why a generator that did not keep up makes the run invalid, in its own figures."""
    details = []
    if isinstance(gen.get("achieved_rate_pps"), (int, float)) and gen.get("rate_pps"):
        details.append(f"achieved {gen['achieved_rate_pps']:,.0f} of {gen['rate_pps']:,} pps")
    if isinstance(gen.get("max_lag_ns"), int):
        details.append(f"up to {format_ns(gen['max_lag_ns'])} behind schedule")
    return (
        GENERATOR_BEHIND_REASON
        + (f": {', '.join(details)}" if details else "")
        + " (a rate beyond this host, or its cores were busy with other work)"
    )


def capture_drops(cap: CaptureStatistics) -> int:
    """Kernel drops over all interfaces of a capture's statistics."""
    total = 0
    for entry in cap.get("interfaces", []):
        total += int(entry.get("kernel_drops", entry.get("drops", 0)) or 0)
    return total + int(cap.get("kernel_drops", 0) or 0)
