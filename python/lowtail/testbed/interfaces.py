"""A testbed on the user's own wiring on this host (`[testbed] kind = "interfaces"`).

    generator ──► (tap/mirror: PRE) ──► DuT in … DuT out ──► (tap/mirror: POST)

The generator transmits on a named interface, the timestamper stamps at the PRE and POST
interfaces (PRE may be the generator's own interface: it sees the frames leave), and the
DuT is either outside lowtail's control (`kind = "external"`) or one of lowtail's DuTs
bound to the two interfaces it names, in this host's network namespace. lowtail makes
nothing here but the DuT's own set-up, and every piece of that is registered (with the
command that takes it back) before it is made: the teardown, or `lowtail testbed clean`
after a killed run, leaves the interfaces as they were found.

Interfaces are checked before anything starts: one that does not exist, is down or has no
carrier is an error naming its role.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.testbed.document import TestbedDocument
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.registry import Registry
from lowtail.testbed.sites import Point
from lowtail.testbed.system import local_argv, require_privileges, sh
from lowtail.testbed.topology import NamespacesTestbed
from lowtail.testbed.wiring import Interfaces

_IFF_UP = 0x1


def interface_problem(name: str, role: str, read: Callable[[str], str | None], where: str = "") -> str | None:
    """Why interface `name` cannot serve as `role` (None: it can). `read(file)` returns the
    content of /sys/class/net/NAME/<file>, or None when there is no such file."""
    flags = read("flags")
    if flags is None:
        return f"interface {name}{where} ({role}) does not exist"
    if not int(flags.strip(), 16) & _IFF_UP:
        return f"interface {name}{where} ({role}) is down: bring it up (ip link set {name} up)"
    carrier = read("carrier")
    if carrier is not None and carrier.strip() == "0":
        return (
            f"interface {name}{where} ({role}) has no link (no carrier: is its cable, or its peer, connected and up?)"
        )
    return None


def _sysfs(name: str) -> Callable[[str], str | None]:
    def read(attribute: str) -> str | None:
        try:
            return (Path("/sys/class/net") / name / attribute).read_text()
        except OSError:  # no such interface, or carrier of a link that is down (EINVAL)
            return None

    return read


def roles_of(wiring: Interfaces, dut_interfaces: tuple[str, ...] | None) -> dict[str, str]:
    """Every interface of the wiring with the role(s) it plays, in words."""
    roles: dict[str, list[str]] = {}
    for name, role in (
        (wiring.generator, "the generator's"),
        (wiring.pre, "the timestamper's PRE point"),
        (wiring.post, "the timestamper's POST point"),
    ):
        roles.setdefault(name, []).append(role)
    for name, role in zip(dut_interfaces or (), ("the DuT's in", "the DuT's out")):
        roles.setdefault(name, []).append(role)
    return {name: " and ".join(r) for name, r in roles.items()}


def check_interfaces(wiring: Interfaces, dut_interfaces: tuple[str, ...] | None = None) -> None:
    """A UserError naming every interface of the wiring that cannot play its role."""
    problems = [
        p
        for name, role in roles_of(wiring, dut_interfaces).items()
        if (p := interface_problem(name, role, _sysfs(name)))
    ]
    if problems:
        raise UserError("; ".join(problems))


def mac_of(name: str) -> str:
    """The interface's MAC address."""
    return (_sysfs(name)("address") or "").strip()


class InterfacesTestbed(NamespacesTestbed):
    """The user's interfaces as a run's testbed: no namespaces, the DuT's set-up undone after."""

    kind = "interfaces"

    def __init__(self, work_dir: Path, wiring: Interfaces, dut_interfaces: tuple[str, ...] | None):
        super().__init__(work_dir, wire=False)
        self.wiring = wiring
        self.lg_ns = None
        self.dut_ns = None
        self.dut_in, self.dut_out = dut_interfaces or (None, None)
        self.dut_interfaces = dut_interfaces

    def _build(self) -> None:
        require_privileges("an interfaces testbed")
        check_interfaces(self.wiring, self.dut_interfaces)
        for name in roles_of(self.wiring, self.dut_interfaces):
            self.macs[name] = mac_of(name)

    @property
    def namespaces(self) -> list[str]:
        return []

    @property
    def generator(self) -> Point:
        return Point(self.site, self.wiring.generator, None, self.macs[self.wiring.generator])

    @property
    def pre(self) -> Point:
        return Point(self.site, self.wiring.pre, None, self.macs[self.wiring.pre])

    @property
    def post(self) -> Point:
        return Point(self.site, self.wiring.post, None, self.macs[self.wiring.post])

    @property
    def dst_mac(self) -> str:
        return self.wiring.dst_mac or self.macs[self.wiring.post]

    def dut_run(self, argv: list[str], what: str, undo: list[str] | None = None) -> None:
        if undo:
            self.dut_undo(undo)
        sh(*local_argv(argv), what=what)

    def dut_undo(self, argv: list[str]) -> None:
        assert isinstance(self.registry, Registry)
        self.registry.add("undo", list(argv))

    def dut_link_name(self, prefix: str) -> str:
        # The host's namespace: the testbed's tag keeps the name its own.
        return f"lt{prefix}{self.tag[-4:]}"

    def wait_until_forwarding(
        self, timeout_s: float, still_starting: Callable[[], bool] = lambda: True
    ) -> float | None:
        if not self.wiring.probe:
            # A DuT that drops the probe's frames (a router): give it the settle time instead.
            return self.wiring.settle_ns / 1e9 if _sleep_unless(self.wiring.settle_ns, still_starting) else None
        return wait_forwarding(
            None, self.wiring.generator, self.wiring.post, self.generator.mac, self.dst_mac, timeout_s, still_starting
        )

    def describe(self) -> TestbedDocument:
        return {
            "kind": self.kind,
            "generator": self.generator.describe(),
            "pre": self.pre.describe(),
            "post": self.post.describe(),
            "dut_interfaces": list(self.dut_interfaces or []),
            "dst_mac": self.dst_mac,
        }


def _sleep_unless(duration_ns: int, still_starting: Callable[[], bool]) -> bool:
    """Wait `duration_ns` while the DuT keeps running; False when it stopped."""
    import time

    deadline = time.monotonic() + duration_ns / 1e9
    while time.monotonic() < deadline:
        if not still_starting():
            return False
        time.sleep(0.05)
    return still_starting()
