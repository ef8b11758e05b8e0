"""What a DuT may ask of the testbed it runs on: the `Testbed` protocol that the namespaces
(topology.py), interfaces (interfaces.py) and hosts (hosts/session.py) testbeds implement.
A DuT kind (testbed/duts/) is written against this and nothing else of a testbed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lowtail.core.errors import Failure
from lowtail.testbed.sites import Site

if TYPE_CHECKING:
    from lowtail.testbed.container import ContainerCgroups
    from lowtail.testbed.document import TestbedDocument


class Testbed(Protocol):
    """One run's testbed as its DuT sees it."""

    # Read-only to a DuT (properties, so a testbed's narrower types, such as the namespaces
    # testbed's `dut_in: str`, still satisfy the protocol).
    @property
    def kind(self) -> str: ...
    @property
    def tag(self) -> str:
        """Unique per testbed: names of what it makes outside its namespaces."""
        ...

    @property
    def work_dir(self) -> Path:
        """The run's directory on this host."""
        ...

    @property
    def wire(self) -> bool:
        """A calibration testbed (no DuT)."""
        ...

    @property
    def dut_ns(self) -> str | None:
        """The DuT's network namespace (None: a host's own)."""
        ...

    @property
    def dut_in(self) -> str | None:
        """Where traffic arrives at the DuT."""
        ...

    @property
    def dut_out(self) -> str | None:
        """Where the DuT sends it on."""
        ...

    @property
    def dut_site(self) -> Site:
        """Where the DuT runs."""
        ...

    def dut_run(self, argv: list[str], what: str, undo: list[str] | None = None) -> None:
        """A one-shot set-up command where the DuT is; `undo` takes it back when the testbed goes."""
        ...

    def dut_undo(self, argv: list[str]) -> None:
        """A command that takes set-up back when the testbed goes."""
        ...

    def dut_binary(self, name: str) -> str:
        """A native program of lowtail's, where the DuT runs."""
        ...

    def dut_path(self, name: str) -> Any:
        """A file of the DuT's, where it runs (a Path on this host, a string on another)."""
        ...

    def dut_link_name(self, prefix: str) -> str:
        """A name for a link the DuT creates."""
        ...

    def dut_isolated_cpus(self) -> set[int] | None:
        """The isolated cores where the DuT runs (None: this host's)."""
        ...

    def spawn(
        self,
        name: str,
        ns: str | None,
        argv: list[str],
        stats: Path | None = None,
        cpus: list[int] | None = None,
        cgroup: Path | list[Path] | None = None,
        container: bool = False,
    ) -> Any:
        """A long-running program of the testbed's, stopped with it (a `ProcessHandle`)."""
        ...

    def container_cgroups(self, cpus: list[int], memory_bytes: int) -> tuple[list[Path], ContainerCgroups]:
        """The cgroups of a contained DuT and what the kernel applied."""
        ...

    def own_path(self, path: Path) -> None:
        """A file or directory outside the work dir that goes with the testbed."""
        ...

    def wait_until_forwarding(self, timeout_s: float, still_starting: Callable[[], bool] = ...) -> float | None:
        """Seconds until the DuT forwarded a probe, or None."""
        ...

    def describe(self) -> TestbedDocument:
        """The testbed as stored with a run."""
        ...


def dut_ports(tb: Testbed) -> tuple[str, str]:
    """The interfaces traffic enters and leaves the DuT by (in, out); Failure where the
    testbed names none (a user's wiring without the DuT's interfaces)."""
    if tb.dut_in is None or tb.dut_out is None:
        raise Failure(
            f"this {tb.kind} testbed names no interfaces of the DuT's: a DuT that forwards between two cannot be set up on it"
        )
    return tb.dut_in, tb.dut_out


def dut_namespace(tb: Testbed) -> str:
    """The DuT's network namespace; Failure where it runs in a host's own (its kind is then
    not one for this testbed)."""
    if tb.dut_ns is None:
        raise Failure(f"this {tb.kind} testbed gives the DuT no network namespace of its own")
    return tb.dut_ns
