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

With `vlans` (one VLAN id per link over one physical loop, HVNet's layout) the named
interfaces are the loop's ends and each link gets a VLAN sub-interface `NAME.ID` there, made
(and registered for removal first) by the testbed: the generator and PRE on the first id, POST
on the last, a chain's hop i between the ids of links i-1 and i, and the timestamper sees the
links between hops on PRE's end of the loop (every link crosses the wire once, so it passes
both ends). A hop whose in and out are on the same end cannot hand its frames to the next hop
on that end: hops alternate ends (docs/chains.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.testbed.document import TestbedDocument
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.registry import Registry
from lowtail.testbed.sites import Point
from lowtail.testbed.system import ip, local_argv, require_privileges, sh
from lowtail.testbed.topology import HopTestbed, NamespacesTestbed
from lowtail.testbed.wiring import Interfaces, vlan_interface

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


def vlan_refused(name: str, stderr: str) -> str:
    """Why the VLAN sub-interface `name` could not be made, from `ip`'s complaint: a kernel
    without 802.1Q says "Unknown device type"."""
    said = " ".join(stderr.split())
    if "Unknown device type" in said:
        return (
            f"cannot make the VLAN sub-interface {name}: this kernel has no 802.1Q VLAN support "
            f"(CONFIG_VLAN_8021Q, module 8021q); [testbed] vlans needs it"
        )
    return f"cannot make the VLAN sub-interface {name}: {said or 'ip failed'}"


def mac_of(name: str) -> str:
    """The interface's MAC address."""
    return (_sysfs(name)("address") or "").strip()


class InterfacesTestbed(NamespacesTestbed):
    """The user's interfaces as a run's testbed: no namespaces, the DuT's set-up undone after."""

    kind = "interfaces"

    def __init__(
        self,
        work_dir: Path,
        wiring: Interfaces,
        dut_interfaces: tuple[str, ...] | None,
        hops: list[tuple[str, ...] | None] | None = None,
    ):
        super().__init__(work_dir, wire=False)
        self.wiring = wiring
        self.lg_ns = None
        self.dut_ns = None
        # The interfaces the user named (checked before anything is made): the DuT's, or each hop's.
        self.named: list[tuple[str, ...] | None] = list(hops) if hops else [dut_interfaces]
        self.dut_interfaces = dut_interfaces
        vlans = wiring.vlans
        # The generator's, PRE's and POST's interfaces, the links between hops, each hop's in and out.
        self.points = {"generator": wiring.generator, "pre": wiring.pre, "post": wiring.post}
        self.link_names: list[str] = []
        self.hop_interfaces: list[tuple[str, ...] | None] = list(self.named)
        # Sub-interfaces to make: name → (parent, VLAN id).
        self.vlan_links: dict[str, tuple[str, int]] = {}
        if vlans:
            self.points = {
                "generator": self._vlan(wiring.generator, vlans[0]),
                "pre": self._vlan(wiring.pre, vlans[0]),
                "post": self._vlan(wiring.post, vlans[-1]),
            }
            self.link_names = [self._vlan(wiring.pre, v) for v in vlans[1:-1]]
            self.hop_interfaces = [
                (self._vlan(p[0], vlans[i]), self._vlan(p[1], vlans[i + 1])) if p else None
                for i, p in enumerate(self.named)
            ]
        self.dut_in, self.dut_out = self.hop_interfaces[0] or (None, None)

    def _vlan(self, parent: str, vlan: int) -> str:
        name = vlan_interface(parent, vlan)
        self.vlan_links[name] = (parent, vlan)
        return name

    def _build(self) -> None:
        require_privileges("an interfaces testbed")
        for interfaces in self.named:
            check_interfaces(self.wiring, interfaces)
        assert isinstance(self.registry, Registry)
        for name, (parent, vlan) in self.vlan_links.items():
            # Registered before it exists: whatever ends the run, it goes.
            self.registry.add("undo", ["ip", "link", "del", name])
            made = ip(
                "link", "add", "link", parent, "name", name, "type", "vlan", "id", str(vlan), what="", check=False
            )
            if made.returncode != 0:
                raise UserError(vlan_refused(name, made.stderr))
            ip("link", "set", name, "up", what=f"bringing {name} up")
        for name in [*self.points.values(), *self.link_names]:
            self.macs[name] = mac_of(name)

    @property
    def links(self) -> list[Point]:
        """The links between a chain's hops, where the timestamper sees them (PRE's end of the loop)."""
        return [Point(self.site, name, None, self.macs[name]) for name in self.link_names]

    def hop(self, index: int, name: str) -> HopTestbed:
        interfaces = self.hop_interfaces[index] or (None, None)
        return HopTestbed(self, index, name, dut_ns=None, dut_in=interfaces[0], dut_out=interfaces[1])

    @property
    def namespaces(self) -> list[str]:
        return []

    @property
    def generator(self) -> Point:
        return Point(self.site, self.points["generator"], None, self.macs[self.points["generator"]])

    @property
    def pre(self) -> Point:
        return Point(self.site, self.points["pre"], None, self.macs[self.points["pre"]])

    @property
    def post(self) -> Point:
        return Point(self.site, self.points["post"], None, self.macs[self.points["post"]])

    @property
    def dst_mac(self) -> str:
        return self.wiring.dst_mac or self.macs[self.points["post"]]

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
            None,
            self.points["generator"],
            self.points["post"],
            self.generator.mac,
            self.dst_mac,
            timeout_s,
            still_starting,
        )

    def describe(self) -> TestbedDocument:
        doc: TestbedDocument = {
            "kind": self.kind,
            "generator": self.generator.describe(),
            "pre": self.pre.describe(),
            "post": self.post.describe(),
            "dut_interfaces": list(self.dut_interfaces or []),
            "dst_mac": self.dst_mac,
        }
        if self.wiring.vlans:
            doc["vlans"] = list(self.wiring.vlans)
        return doc


def _sleep_unless(duration_ns: int, still_starting: Callable[[], bool]) -> bool:
    """Wait `duration_ns` while the DuT keeps running; False when it stopped."""
    import time

    deadline = time.monotonic() + duration_ns / 1e9
    while time.monotonic() < deadline:
        if not still_starting():
            return False
        time.sleep(0.05)
    return still_starting()
