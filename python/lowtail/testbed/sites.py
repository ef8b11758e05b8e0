"""Where a testbed's roles run, and the interfaces they use there.

A `Site` is a place programs run and files are written: `LocalSite` is this host (inside a
network namespace or not), `hosts.remote.RemoteSite` another host reached by SSH. A `Point`
is one interface a role uses at a site: the generator's transmit interface, the PRE and POST
points of the timestamper. The run (experiment/measure.py) starts its programs through the
sites of its points, so the same run works on every testbed kind.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lowtail.core.binaries import find_binary
from lowtail.testbed.document import PointDocument, SiteIdentity, TimeSources


class Site(Protocol):
    """A place where a role's programs run."""

    local: bool
    label: str

    def binary(self, name: str) -> str:
        """The path of a native program there."""
        ...

    def path(self, name: str) -> str:
        """The path of one of the run's files there."""
        ...

    def spawn(self, name: str, argv: list[str], ns: str | None = None, stats: str | None = None) -> Any:
        """Start a long-running program there (a `Program` or its remote equivalent)."""
        ...

    def fetch(self, name: str, local: Path) -> None:
        """Bring one of the run's files (written there) to `local` on this host."""
        ...

    def isolated_cpus(self) -> set[int] | None:
        """The cores isolated from the scheduler there (None: this host's, found by the caller)."""
        ...

    def clocks(self, program: Any, start: tuple[int, int], end: tuple[int, int]) -> tuple[tuple[int, int], ...]:
        """(CLOCK_REALTIME, CLOCK_MONOTONIC) at a program's start and end as the site read
        them; `start` and `end` are this host's readings around it."""
        ...

    def identity(self) -> SiteIdentity:
        """The host's name and boot id: one boot id, one kernel clock."""
        ...


@dataclass(frozen=True)
class Point:
    """An interface a role uses: where (`site`), its name and network namespace, its MAC."""

    site: Any
    interface: str
    netns: str | None
    mac: str

    def describe(self) -> PointDocument:
        """The point as stored with a run."""
        return {"host": self.site.label, "interface": self.interface, "netns": self.netns, "mac": self.mac}


# Programs that discipline a host's clocks: their presence is part of a side's clock record.
TIME_DAEMONS = ("ptp4l", "phc2sys", "ts2phc", "timemaster", "chronyd", "ntpd", "systemd-timesyn")


def local_time_sources() -> TimeSources:
    """This host's PTP hardware clocks (name by ptpN) and the time daemons running."""
    clocks = {}
    for ptp in sorted(Path("/sys/class/ptp").glob("ptp*")):
        try:
            clocks[ptp.name] = (ptp / "clock_name").read_text().strip()
        except OSError:
            continue
    daemons = set()
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue
        if name in TIME_DAEMONS:
            daemons.add(name)
    return {"clocks": clocks, "daemons": sorted(daemons), "port_state": None}


def boot_id() -> str | None:
    """This kernel's boot id (a new one every boot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


class LocalSite:
    """This host: programs started by the testbed, files in its work directory."""

    local = True

    def __init__(self, testbed: Any):
        # The testbed (topology.Testbed or a kind built on it) whose programs these are.
        self.testbed = testbed
        self.label = socket.gethostname()

    def binary(self, name: str) -> str:
        return str(find_binary(name))

    def path(self, name: str) -> str:
        return str(self.testbed.work_dir / name)

    def spawn(self, name: str, argv: list[str], ns: str | None = None, stats: str | None = None) -> Any:
        return self.testbed.spawn(name, ns, argv, stats=Path(stats) if stats else None)

    def fetch(self, name: str, local: Path) -> None:
        if Path(self.path(name)).resolve() != Path(local).resolve():
            raise AssertionError(f"{name} is written where it is read: {local}")

    def isolated_cpus(self) -> set[int] | None:
        return None

    def clocks(self, program: Any, start: tuple[int, int], end: tuple[int, int]) -> tuple[tuple[int, int], ...]:
        return start, end

    def identity(self) -> SiteIdentity:
        return {"host": self.label, "boot_id": boot_id(), "ptp": local_time_sources()}
