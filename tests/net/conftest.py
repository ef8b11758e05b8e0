"""Testbeds for the native programs' tests, built by lowtail's own testbed module.

`wire` is a calibration testbed: one veth pair, both ends (lg0, lg1) in the generator's
namespace. `looped` has a DuT namespace between them: lg0 → in0, out0 → lg1. Each is
unique to its test and removed at the end, also when the test fails; the programs a
test started are killed before that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lowtail.core.binaries import find_binary
from lowtail.testbed.system import missing_capabilities
from lowtail.testbed.topology import NamespacesTestbed

pytestmark = [pytest.mark.root]


def _needs_root() -> None:
    if os.geteuid() != 0 or missing_capabilities():
        pytest.skip("needs root: network namespaces, veth links and packet sockets")


class Bed:
    """A testbed and the `IF@NETNS` names the native programs take for its interfaces."""

    def __init__(self, tb: NamespacesTestbed):
        self.tb = tb
        self.tx = f"{tb.tx}@{tb.lg_ns}"
        self.rx = f"{tb.rx}@{tb.lg_ns}"
        if tb.dut_ns:
            self.dut_in = f"{tb.dut_in}@{tb.dut_ns}"
            self.dut_out = f"{tb.dut_out}@{tb.dut_ns}"


@pytest.fixture
def wire(tmp_path):
    _needs_root()
    with NamespacesTestbed(tmp_path / "testbed", wire=True) as tb:
        yield Bed(tb)


@pytest.fixture
def looped(tmp_path):
    _needs_root()
    with NamespacesTestbed(tmp_path / "testbed") as tb:
        yield Bed(tb)


def native(name: str) -> str:
    return str(find_binary(name))


class Background:
    """A native program started in the background that announces "ready" on stdout."""

    def __init__(self, argv: list[str], stats: Path):
        self.stats = stats
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"{argv[0]} did not get ready: {line!r} {err}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> tuple[int, str, dict]:
        """Signal the program, wait, and return (exit code, stderr, statistics)."""
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=timeout)
        stats = json.loads(self.stats.read_text()) if self.stats.exists() else {}
        return self.proc.returncode, err, stats

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


@pytest.fixture
def background():
    """Start native programs; whatever is still running at the end is killed (before
    the testbed of the test goes: request this fixture after the testbed's)."""
    started: list[Background] = []

    def start(argv: list[str], stats: Path) -> Background:
        b = Background(argv, stats)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()


def link_counters(netns: str, dev: str) -> dict[str, int]:
    """The kernel's counters of an interface: rx/tx packets and drops."""
    done = subprocess.run(
        ["ip", "-n", netns, "-s", "-j", "link", "show", dev], capture_output=True, text=True, check=True
    )
    stats = json.loads(done.stdout)[0]["stats64"]
    return {
        "rx_packets": stats["rx"]["packets"],
        "rx_dropped": stats["rx"]["dropped"],
        "tx_packets": stats["tx"]["packets"],
        "tx_dropped": stats["tx"]["dropped"],
    }


def backlog_drops() -> int:
    """Frames the host dropped from full receive backlogs so far (all CPUs)."""
    lines = open("/proc/net/softnet_stat").read().split("\n")
    return sum(int(line.split()[1], 16) for line in lines if line.strip())


def settle(netns: str, dev: str, expect: int, quiet_s: float = 0.5, timeout_s: float = 30.0) -> int:
    """Wait until `dev` has received `expect` frames, or its count stood still for
    `quiet_s` (frames lost on the way never come): measured, not assumed, so a loaded
    machine that takes seconds to deliver the last frames is waited for. The count."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = link_counters(netns, dev)["rx_packets"]
        if now >= expect:
            return now
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.05)
    return last


def run_native(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
