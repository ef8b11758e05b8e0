"""What recording a run's trace needs of the run, written as protocols so that `trace`
knows nothing of `testbed` (the testbed's hosts use trace/tracefs.py's `Shell` to record
on another host; the other way round would be a loop): the testbed's tag, registry, sites
and programs, the DuT's containment, the core plan's roles' cores. The namespaces,
interfaces and hosts testbeds (testbed/topology.py and its kinds), `Dut` and `CoreRoles`
satisfy them as they are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from lowtail.trace.tracefs import Shell


class CorePlan(Protocol):
    """The cores of a run's roles (testbed.cores.CoreRoles)."""

    @property
    def generator(self) -> int: ...
    @property
    def capture(self) -> int: ...
    @property
    def dut(self) -> list[int]: ...


class TracedSite(Protocol):
    """A host where a role runs: this one (`local`) or another."""

    @property
    def label(self) -> str: ...
    @property
    def local(self) -> bool: ...


class Started(Protocol):
    """A program started on another host, once it says it runs."""

    def wait_started(self) -> None: ...


@runtime_checkable
class RemoteTracedSite(Protocol):
    """Another host reached over SSH: a `Shell` there to record with, and a keeper leash
    that runs an undo there however the run ends."""

    @property
    def label(self) -> str: ...
    @property
    def local(self) -> bool: ...
    def trace_shell(self) -> Shell: ...
    def keep(self, name: str, undo: list[list[str]]) -> Started: ...


class RolePoint(Protocol):
    """Where a role's interface is (testbed.sites.Point)."""

    @property
    def site(self) -> TracedSite: ...


class UndoRegistry(Protocol):
    """The testbed's registry of what to undo, on this host, however the run ends."""

    def add(self, kind: str, value: Any) -> None: ...


class TracedHost(Protocol):
    @property
    def label(self) -> str: ...


class TracedProgram(Protocol):
    """A program of the testbed's: its name (which says its role), its pid here, and for a
    program on another host that host and its pid there."""

    @property
    def name(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def host(self) -> TracedHost | None: ...
    @property
    def remote_pid(self) -> int | None: ...


class TracedTestbed(Protocol):
    """A run's testbed as its trace sees it."""

    @property
    def tag(self) -> str: ...
    @property
    def registry(self) -> UndoRegistry | None: ...
    @property
    def dut_site(self) -> TracedSite: ...
    @property
    def dut_host_named(self) -> bool:
        """Whether the DuT runs on a host of the testbed (an external DuT runs on none)."""
        ...

    @property
    def generator(self) -> RolePoint: ...
    @property
    def pre(self) -> RolePoint: ...
    @property
    def post(self) -> RolePoint: ...
    @property
    def programs(self) -> Sequence[TracedProgram]: ...


class TracedDut(Protocol):
    """The DuT as its trace sees it: the cores it was contained to and how it ran."""

    @property
    def containment(self) -> Mapping[str, object]: ...  # its kind's open map: the trace reads its "cpus"
    @property
    def virtualization(self) -> str | None: ...
