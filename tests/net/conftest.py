"""Real network namespaces and veth pairs for the native programs' tests.

Every test gets a fresh namespace with a unique name; deleting the namespace at the end
(even when the test fails) removes its veth links with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lowtail.binaries import find_binary


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces and packet sockets)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip command"
    return None


pytestmark = [pytest.mark.root]


@dataclass
class Netns:
    """A namespace holding veth pairs, all in the same namespace."""

    name: str
    links: list[tuple[str, str]] = field(default_factory=list)

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True, capture_output=True, timeout=30)

    def veth(self, a: str, b: str) -> None:
        self.ip("link", "add", a, "type", "veth", "peer", "name", b)
        self.ip("link", "set", a, "up")
        self.ip("link", "set", b, "up")
        self.links.append((a, b))

    def at(self, iface: str) -> str:
        """The `IF@NETNS` name the native programs take."""
        return f"{iface}@{self.name}"


@pytest.fixture
def netns():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    name = f"ltnet-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, timeout=30)
    ns = Netns(name)
    try:
        ns.ip("link", "set", "lo", "up")
        # No IPv6 on test links: the kernel would send its own neighbour discovery
        # frames, and captures would hold more than the generator sent.
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                        "net.ipv6.conf.default.disable_ipv6=1"], check=True, capture_output=True, timeout=30)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


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
    """Start native programs; whatever is still running at the end is killed."""
    started: list[Background] = []

    def start(argv: list[str], stats: Path) -> Background:
        b = Background(argv, stats)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()


def run_native(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def settle() -> None:
    """Give frames still in flight through veth links time to arrive."""
    time.sleep(0.2)
