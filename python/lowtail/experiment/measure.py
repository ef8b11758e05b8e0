"""One run: build the testbed, start the DuT, wait until it forwards, capture both sides
while the generator sends, take everything down, and say whether the run can be trusted.

Order matters: the timestamper is capturing before the first frame leaves and stops only
after the last one had time to come back (the drain); the DuT is watched while traffic
flows, so a crash is reported as a crash, not as mysterious loss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lowtail.binaries import find_binary
from lowtail.errors import Failure
from lowtail.experiment.live import LiveFeed, LiveSample
from lowtail.experiment.spec import Combination, Experiment
from lowtail.host.energy import EnergyMeter
from lowtail.host.interrupts import InterruptSampler
from lowtail.testbed.cores import CAPTURE_RT_PRIORITY, CoreRoles
from lowtail.testbed.kinds import make_dut
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.topology import Testbed
from lowtail.units import format_ns

# RFC 2544's benchmarking range: never a real host's address.
SRC_IP, DST_IP = "198.18.0.1", "198.19.0.1"
SNAPLEN = 128
# lowtail-gen's exit code when it sent everything but did not hold the rate or had frames
# refused: a result (its statistics say which), not a failure.
GENERATOR_BEHIND = 3


class DutFailed(Exception):
    """The DuT never forwarded (bad command, crash at start-up): the run is stored invalid."""


@dataclass
class Outcome:
    started_at: datetime
    finished_at: datetime | None = None
    generator: dict[str, Any] = field(default_factory=dict)
    capture: dict[str, Any] = field(default_factory=dict)
    dut_stats: dict[str, Any] = field(default_factory=dict)
    containment: dict[str, Any] = field(default_factory=lambda: {"mode": "bare"})
    virtualization: str | None = None  # kvm | tcg when the DuT is a VM
    guest_interrupts: list[Any] = field(default_factory=list)
    traffic_window_ns: tuple[int, int] | None = None  # when the interrupt samplers ran
    energy: dict[str, Any] | None = None
    interrupts: Any = None
    invalid_reasons: list[str] = field(default_factory=list)
    pre: Path | None = None
    post: Path | None = None
    frames_planned: int = 0


def frames_for(exp: Experiment, combo: Combination) -> int:
    """Frames the generator sends in one run: warm-up and measured time at the run's rate."""
    return math.ceil(combo.traffic.rate_pps * (exp.warmup_ns + exp.measured_ns(combo.traffic)) / 1e9)


def measure(
    exp: Experiment,
    combo: Combination,
    plan: CoreRoles,
    run_dir: Path,
    on_live: Callable[[LiveSample], None] = lambda sample: None,
) -> Outcome:
    """One run of a combination on a fresh testbed: its programs' statistics, captures and
    the reasons (if any) it cannot be trusted. `on_live` gets the programs' running
    figures about once a second while the traffic flows."""
    outcome = Outcome(started_at=datetime.now(), frames_planned=frames_for(exp, combo))
    dut = make_dut(combo.dut.kind, combo.dut.name, combo.dut.options)
    with Testbed(run_dir, wire=combo.dut.calibration) as tb:
        try:
            dut.start(tb, plan)
            outcome.containment = dut.containment
            outcome.virtualization = dut.virtualization
            _wait_until_forwarding(tb, dut)
            capture = _start_capture(tb, plan, run_dir, outcome, combo.traffic.udp_dst_port)
            _send(exp, combo, tb, plan, run_dir, dut, outcome, on_live)
            time.sleep(exp.drain_ns / 1e9)
        except DutFailed as e:
            outcome.invalid_reasons.append(str(e))
            outcome.dut_stats = dut.stop()
            outcome.finished_at = datetime.now()
            return outcome
        if capture.died():
            raise Failure(_disk_full_or(capture, f"the timestamper stopped during the run: {capture.exit_message()}"))
        capture.stop()
        outcome.capture = capture.statistics() or {}
        outcome.dut_stats = dut.stop()
        if outcome.traffic_window_ns:
            outcome.guest_interrupts = dut.guest_interrupts(*outcome.traffic_window_ns)
        _judge(outcome)
    outcome.finished_at = datetime.now()
    return outcome


def _wait_until_forwarding(tb: Testbed, dut) -> None:
    took = wait_forwarding(
        tb.lg_ns,
        tb.tx,
        tb.rx,
        tb.macs[tb.tx],
        tb.macs[tb.rx],
        dut.ready_timeout_s,
        still_starting=lambda: dut.failure() is None,
    )
    if took is None:
        raise DutFailed(
            dut.failure()
            or f"the DuT {dut.name} ({dut.kind}) forwarded nothing within {dut.ready_timeout_s:g} s of starting"
        )


# The programs' running figures (one JSON line a second each), read while the traffic flows.
GENERATOR_LIVE, CAPTURE_LIVE = "generator.live.jsonl", "capture.live.jsonl"


def _start_capture(tb: Testbed, plan: CoreRoles, run_dir: Path, outcome: Outcome, udp_port: int):
    outcome.pre, outcome.post = run_dir / "pre.pcap.zst", run_dir / "post.pcap.zst"
    argv = [
        str(find_binary("lowtail-cap")),
        "--iface",
        tb.tx,
        "--out",
        str(outcome.pre),
        "--iface",
        tb.rx,
        "--out",
        str(outcome.post),
        "--cpu",
        str(plan.capture),
        "--rt-priority",
        str(CAPTURE_RT_PRIORITY),
        "--snaplen",
        str(SNAPLEN),
        "--zstd",
        "--stats-json",
        str(run_dir / "capture.json"),
        "--ready-file",
        str(run_dir / "capture.ready"),
        "--live-json",
        str(run_dir / CAPTURE_LIVE),
        "--live-udp-port",
        str(udp_port),
    ]
    capture = tb.spawn("capture", tb.lg_ns, argv, stats=run_dir / "capture.json")
    if not capture.wait_file(run_dir / "capture.ready", timeout_s=15.0):
        raise Failure(_disk_full_or(capture, f"the timestamper did not start: {capture.exit_message()}"))
    return capture


def _send(
    exp: Experiment,
    combo: Combination,
    tb: Testbed,
    plan: CoreRoles,
    run_dir: Path,
    dut,
    outcome: Outcome,
    on_live: Callable[[LiveSample], None],
) -> None:
    t = combo.traffic
    stats = run_dir / "generator.json"
    argv = [
        str(find_binary("lowtail-gen")),
        "--iface",
        tb.tx,
        "--rate",
        str(t.rate_pps),
        "--count",
        str(outcome.frames_planned),
        "--frame-size",
        str(t.frame_size),
        "--burst",
        str(t.burst),
        "--udp-dst-port",
        str(t.udp_dst_port),
        "--flows",
        str(t.flows),
        "--src-mac",
        tb.macs[tb.tx],
        "--dst-mac",
        tb.macs[tb.rx],
        "--src-ip",
        SRC_IP,
        "--dst-ip",
        DST_IP,
        "--cpu",
        str(plan.generator),
        *plan.generator_scheduling(),
        "--stats-json",
        str(stats),
        "--live-json",
        str(run_dir / GENERATOR_LIVE),
    ]
    feed = LiveFeed(run_dir / GENERATOR_LIVE, run_dir / CAPTURE_LIVE)
    sampler = InterruptSampler(housekeeping_cpu=plan.housekeeping)
    meter = EnergyMeter()
    sampler.start()
    meter.start()
    window_start = time.time_ns()
    generator = tb.spawn("generator", tb.lg_ns, argv, stats=stats)
    # A generator that cannot keep up would take forever at an unreachable rate: the run
    # is invalid anyway once it takes twice as long as planned.
    deadline = time.monotonic() + 2 * outcome.frames_planned / t.rate_pps + 5.0
    crash = None
    try:
        # A DuT that crashes does not stop the traffic: what it did to the rest of the run
        # (loss from then on) is measured, and the run is marked invalid.
        while generator.wait(0.05) is None:
            sample = feed.poll()
            if sample is not None:
                on_live(sample)
            crash = crash or dut.failure()
            if time.monotonic() > deadline:
                generator.stop()
                break
    finally:
        outcome.energy = meter.stop()
        outcome.interrupts = sampler.stop()
        outcome.traffic_window_ns = (window_start, time.time_ns())
    outcome.generator = generator.statistics() or {}
    if crash:
        outcome.invalid_reasons.append(f"{crash} while traffic was flowing")
    elif generator.stop_signal is not None:
        outcome.invalid_reasons.append("the generator did not finish in time and was stopped")
    elif generator.popen.returncode not in (0, GENERATOR_BEHIND):
        raise Failure(_disk_full_or(generator, f"the traffic generator failed: {generator.exit_message()}"))
    crash = crash or dut.failure()
    if crash and not outcome.invalid_reasons:
        outcome.invalid_reasons.append(f"{crash} during the run")


def _disk_full_or(program, message: str) -> str:
    if "No space left on device" in program.log_tail(5):
        return "disk full: a capture could not be written (free some space; finished runs are kept)"
    return message


def _judge(outcome: Outcome) -> None:
    """The reasons this run cannot be trusted, from the programs' own statistics."""
    gen, cap = outcome.generator, outcome.capture
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


GENERATOR_BEHIND_REASON = "the generator did not hold the requested rate"


def generator_behind(gen: dict[str, Any]) -> str:
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


def capture_drops(cap: dict[str, Any]) -> int:
    """Kernel drops over all interfaces of a capture's statistics."""
    total = 0
    for entry in cap.get("interfaces", []):
        total += int(entry.get("kernel_drops", entry.get("drops", 0)) or 0)
    return total + int(cap.get("kernel_drops", 0) or 0)
