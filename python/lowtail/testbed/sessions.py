"""A sweep's hold on its testbed kind: what is checked once before the first run, the core
plan, the hosts' metadata, and a fresh testbed for each run.

`LocalSession` serves lowtail's namespaces and the user's interfaces on this host;
`hosts.session.HostsSession` holds SSH connections to other hosts for the whole sweep
(programs copied once, each host's facts read once).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from lowtail.host.document import RoleHost
from lowtail.testbed.cores import CoreChoices, CoreRoles
from lowtail.testbed.interfaces import InterfacesTestbed, check_interfaces
from lowtail.testbed.system import require_privileges
from lowtail.testbed.topology import NamespacesTestbed
from lowtail.testbed.wiring import Hosts, Interfaces, Namespaces, Wiring


class Session(Protocol):
    """What a sweep needs of its testbed kind."""

    wiring: Wiring

    def check(self, dut_interfaces: list[tuple[str, ...] | None]) -> None:
        """Everything that would stop a run, found before the first one."""
        ...

    def plan(self, cores: CoreChoices) -> CoreRoles:
        """The core of each program, where it runs."""
        ...

    def hosts(self) -> dict[str, RoleHost]:
        """The metadata of the hosts of other roles, by role (empty: all on this host)."""
        ...

    def check_disk(self, need_bytes: int) -> None:
        """A Failure when a host that writes captures has not `need_bytes` free."""
        ...

    def testbed(
        self,
        run_dir: Path,
        wire: bool,
        dut_interfaces: tuple[str, ...] | None,
        hops: list[tuple[str, ...] | None] | None = None,
    ) -> AbstractContextManager[NamespacesTestbed]:
        """A fresh testbed for one run (a context manager); `hops`, a chain's: each hop's
        interfaces (None on lowtail's namespaces; the hosts testbed takes no chain, the
        experiment file refuses one there)."""
        ...


class LocalSession:
    """Every role on this host: lowtail's namespaces, or the user's interfaces."""

    def __init__(self, wiring: Namespaces | Interfaces):
        self.wiring = wiring

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def check(self, dut_interfaces: list[tuple[str, ...] | None]) -> None:
        require_privileges("lowtail run")
        if isinstance(self.wiring, Interfaces):
            for interfaces in dut_interfaces or [None]:
                check_interfaces(self.wiring, interfaces)

    def plan(self, cores: CoreChoices) -> CoreRoles:
        return CoreRoles.for_host(cores)

    def hosts(self) -> dict[str, RoleHost]:
        return {}

    def check_disk(self, need_bytes: int) -> None:
        pass

    def testbed(
        self,
        run_dir: Path,
        wire: bool,
        dut_interfaces: tuple[str, ...] | None,
        hops: list[tuple[str, ...] | None] | None = None,
    ) -> NamespacesTestbed:
        if isinstance(self.wiring, Interfaces):
            return InterfacesTestbed(run_dir, self.wiring, dut_interfaces, hops)
        return NamespacesTestbed(run_dir, wire=wire, hops=max(1, len(hops or [])))


def open_session(wiring: Wiring, log: Callable[[str], None] = lambda message: None) -> Any:
    """The session of a wiring (a context manager); `log` says what slow work is being done."""
    if isinstance(wiring, Hosts):
        from lowtail.testbed.hosts.session import HostsSession

        return HostsSession(wiring, log)
    return LocalSession(wiring)
