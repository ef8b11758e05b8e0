"""The software testbed of one run: network namespaces linked by veth pairs.

    namespace <tag>-lg (generator + timestamper)      namespace <tag>-dut (device under test)
        lg0  ──────────── veth ──────────────────────►  in0
        lg1  ◄─────────── veth ───────────────────────  out0

The generator sends on lg0, the timestamper captures lg0 (frames leaving towards the
DuT: PRE) and lg1 (frames coming back: POST). A calibration testbed has no DuT: lg0 and
lg1 are the two ends of one veth pair, a plain wire.

A chain of N DuTs (`hops = N`, N ≥ 2) gives each its own namespace <tag>-h1 … <tag>-hN,
with its in0 and out0, linked in sequence:

    lg0 ──► h1:in0 │ h1:out0 ──► h2:in0 │ h2:out0 ──► … hN:in0 │ hN:out0 ──► lg1

Every link is captured where its frames leave (`links`: h1's out0 … h(N-1)'s out0, between
PRE and POST), by the one timestamper, so every timestamp of a packet comes from one clock
and its per-hop latencies add up to its end-to-end latency. Each hop's DuT sees the testbed
through `hop(i)`: its own namespace, in0, out0 and work directory, as a lone DuT would.

Everything is recorded in the testbed's registry before it is made and removed by
`close()`, which runs on normal exit, on errors and on Ctrl-C/SIGTERM/SIGHUP, to its end
whatever signals arrive while it runs (`lowtail.core.signals`).

What a run needs of any testbed — the generator's and timestamper's `Point`s, the DuT's
interfaces and how to set it up (`dut_run`, `dut_undo`, `dut_binary`, `dut_path`), the
readiness probe — is defined here; `interfaces.py` and `hosts/` provide the same on the
user's wiring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from lowtail.core import signals
from lowtail.core.errors import Failure
from lowtail.core.processes import process_start_time
from lowtail.testbed import containment
from lowtail.testbed.container import ContainerCgroups, create_container_cgroups, namespace_argv
from lowtail.testbed.document import TestbedDocument
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.process import Program
from lowtail.testbed.protocol import dut_ports
from lowtail.testbed.registry import (
    OwnedProcess,
    Registry,
    delete_netns,
    hop_tag,
    netns_name,
    new_tag,
    run_undo,
)
from lowtail.testbed.sites import LocalSite, Point
from lowtail.testbed.system import ip, local_argv, require_privileges, sh, tool


class Link(msgspec.Struct):
    """An interface as `ip -json link show` describes it, as far as the testbed reads it."""

    address: str  # its MAC address


class NamespacesTestbed:
    kind = "namespaces"
    tx = "lg0"
    rx = "lg1"
    # The DuT's interfaces (None on a user's wiring that names none: a DuT kind that needs
    # them asks `protocol.dut_ports`, which says so).
    dut_in: str | None = "in0"
    dut_out: str | None = "out0"
    # None where the testbed is not this host's namespaces (a user's interfaces, hosts) and,
    # for the DuT's, on a calibration wire.
    lg_ns: str | None
    dut_ns: str | None

    def __init__(self, work_dir: Path, wire: bool = False, hops: int = 1):
        self.work_dir = Path(work_dir)
        self.wire = wire
        self.tag = new_tag()
        self.lg_ns = netns_name(self.tag, "lg")
        # The DuTs' namespaces in the order traffic passes them: one "dut", or a chain's h1 … hN.
        self.hop_ns: list[str] = (
            []
            if wire
            else [netns_name(self.tag, "dut")]
            if hops == 1
            else [netns_name(self.tag, f"h{i}") for i in range(1, hops + 1)]
        )
        self.dut_ns = self.hop_ns[0] if self.hop_ns else None
        self.programs: list[Program] = []
        self.macs: dict[str, str] = {}
        self.registry: Registry | None = None
        self.site = LocalSite(self)

    # -- what a run uses: the generator's and timestamper's points, the DuT's side -------------------

    @property
    def generator(self) -> Point:
        """The generator's transmit interface."""
        return Point(self.site, self.tx, self.lg_ns, self.macs[self.tx])

    @property
    def pre(self) -> Point:
        """The timestamper's PRE point: frames on their way into the DuT."""
        return Point(self.site, self.tx, self.lg_ns, self.macs[self.tx])

    @property
    def post(self) -> Point:
        """The timestamper's POST point: frames the DuT sent out."""
        return Point(self.site, self.rx, self.lg_ns, self.macs[self.rx])

    @property
    def links(self) -> list[Point]:
        """A chain's captured links between PRE and POST, in order: where each hop's frames
        leave it (its out0) on their way to the next (none for one DuT)."""
        _, dut_out = dut_ports(self)
        return [Point(self.site, dut_out, ns, self.macs[f"{ns}/{dut_out}"]) for ns in self.hop_ns[:-1]]

    def hop(self, index: int, name: str) -> HopTestbed:
        """The testbed as the chain's `index`-th DuT (from 0), named `name`, sees it."""
        return HopTestbed(self, index, name, self.hop_ns[index], self.dut_in, self.dut_out)

    @property
    def dst_mac(self) -> str:
        """The destination MAC of the test traffic."""
        return self.macs[self.rx]

    @property
    def dut_host_named(self) -> bool:
        """Whether the DuT runs on a host of the testbed: here, this one (an external DuT of a
        hosts testbed runs on none)."""
        return True

    @property
    def dut_site(self) -> LocalSite:
        """Where the DuT runs."""
        return self.site

    def dut_run(self, argv: list[str], what: str, undo: list[str] | None = None) -> None:
        """Run a one-shot set-up command where the DuT is; `undo` (registered first) takes it
        back when the testbed goes. In the DuT's own namespace nothing needs undoing."""
        if undo:
            self.dut_undo(undo)
        sh(tool("ip"), "netns", "exec", self._namespace(self.dut_ns, "DuT"), *local_argv(argv), what=what)

    def dut_undo(self, argv: list[str]) -> None:
        """A command that takes set-up back when the testbed goes (the namespace does here)."""

    def dut_binary(self, name: str) -> str:
        """A native program, where the DuT runs."""
        return self.site.binary(name)

    def dut_path(self, name: str) -> Path:
        """A file of the DuT's (its statistics), where it runs."""
        return self.work_dir / name

    def dut_link_name(self, prefix: str) -> str:
        """A name for a link the DuT creates (its own namespace: no one else's names to meet)."""
        return f"{prefix}0"

    def dut_isolated_cpus(self) -> set[int] | None:
        """The isolated cores where the DuT runs (None: this host's)."""
        return None

    def wait_until_forwarding(
        self, timeout_s: float, still_starting: Callable[[], bool] = lambda: True
    ) -> float | None:
        """Probe frames until one comes back through the DuT: seconds it took, or None."""
        return wait_forwarding(
            self.lg_ns, self.tx, self.rx, self.macs[self.tx], self.macs[self.rx], timeout_s, still_starting
        )

    def describe(self) -> TestbedDocument:
        """The testbed as stored with a run."""
        return {"kind": self.kind}

    # -- life cycle ----------------------------------------------------------------------------

    def __enter__(self) -> NamespacesTestbed:
        require_privileges("a testbed")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.registry = Registry.for_this_process(self.tag)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def registry_in_use(self) -> Registry:
        """The registry of what this testbed makes: it exists from `__enter__` until `close()`;
        before or after, nothing may be made (it would be left behind)."""
        if self.registry is None:
            raise Failure(
                f"testbed {self.tag} is not up: nothing can be set up before it is entered or after it is closed"
            )
        return self.registry

    def _namespace(self, ns: str | None, role: str) -> str:
        """A namespace this testbed made (a calibration wire has no DuT's; a user's wiring none)."""
        if ns is None:
            raise Failure(f"testbed {self.tag} ({self.kind}{', a wire' if self.wire else ''}) has no {role} namespace")
        return ns

    def _build(self) -> None:
        lg_ns = self._namespace(self.lg_ns, "generator")
        for ns in self.namespaces:
            self.registry_in_use.add("netns", ns)
            ip("netns", "add", ns, what=f"creating network namespace {ns}")
            # No IPv6 autoconfiguration chatter (router solicitations, MLD) on the test links.
            sh(
                tool("ip"),
                "netns",
                "exec",
                ns,
                tool("sysctl", "procps"),
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                what=f"quieting IPv6 in namespace {ns}",
            )
        if self.wire:
            ip(
                "-n",
                lg_ns,
                "link",
                "add",
                self.tx,
                "type",
                "veth",
                "peer",
                "name",
                self.rx,
                what="creating the calibration wire",
            )
            ends = [(lg_ns, self.tx), (lg_ns, self.rx)]
        else:
            # The ends in the order traffic passes them; each consecutive pair is one veth link.
            dut_in, dut_out = dut_ports(self)
            ends = [(lg_ns, self.tx)]
            for ns in self.hop_ns:
                ends += [(ns, dut_in), (ns, dut_out)]
            ends.append((lg_ns, self.rx))
            for (from_ns, from_dev), (to_ns, to_dev) in zip(ends[::2], ends[1::2], strict=True):
                ip(
                    "link",
                    "add",
                    from_dev,
                    "netns",
                    from_ns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    to_dev,
                    "netns",
                    to_ns,
                    what=f"creating the veth pair {from_dev}–{to_dev}",
                )
        for ns, dev in ends:
            ip("-n", ns, "link", "set", dev, "up", what=f"bringing {dev} up")
            mac = self.link(ns, dev).address
            self.macs[dev if ns == self.lg_ns or len(self.hop_ns) == 1 else f"{ns}/{dev}"] = mac

    @property
    def namespaces(self) -> list[str]:
        return [ns for ns in (self.lg_ns, *self.hop_ns) if ns]

    def link(self, ns: str, dev: str) -> Link:
        shown = ip("-n", ns, "-json", "-details", "link", "show", dev, what=f"reading {dev}").stdout
        try:
            return msgspec.json.decode(shown, type=tuple[Link])[0]
        except msgspec.DecodeError as e:
            raise Failure(f"`ip -json link show {dev}` in {ns} said what lowtail cannot read: {e}") from None

    def close(self) -> None:
        """Remove everything this testbed made; safe to call twice."""
        if self.registry is None:
            return
        with signals.held():
            problems = []
            for program in reversed(self.programs):
                program.stop()
            self.programs.clear()
            for step, items in (
                ("undo", run_undo),
                ("cgroups", containment.remove_cgroup),
                ("netns", delete_netns),
                ("paths", _remove_path),
            ):
                # Set-up is undone newest first, as it was stacked.
                pending = list(getattr(self.registry, step))
                for item in reversed(pending) if step == "undo" else pending:
                    try:
                        items(item)
                        self.registry.discard(step, item)
                    except (Failure, OSError) as e:
                        problems.append(str(e))
            if problems:
                raise Failure(
                    f"testbed {self.tag} not fully removed ({'; '.join(problems)}); "
                    f"`lowtail testbed clean` removes the rest"
                )
            self.registry.forget()
            self.registry = None

    # -- programs and cgroups -----------------------------------------------------------------------

    def spawn(
        self,
        name: str,
        ns: str | None,
        argv: list[str],
        stats: Path | None = None,
        cpus: list[int] | None = None,
        cgroup: Path | list[Path] | None = None,
        container: bool = False,
    ) -> Program:
        """Start `argv` inside namespace `ns` (None: this host's), optionally pinned to `cpus` (taskset) or
        placed in `cgroup` (one or several) before it executes anything; `container` gives
        it its own PID, mount and UTS namespaces too."""
        cmd = [tool("ip"), "netns", "exec", ns] if ns else []
        if cpus:
            cmd += [tool("taskset", "util-linux"), "-c", containment.format_cpu_list(cpus)]
        if container:
            cmd += namespace_argv()
        cmd += argv
        if cgroup is not None:
            # The shell joins the cgroups, then becomes the program: nothing runs outside them.
            cgroups = [str(cgroup)] if isinstance(cgroup, Path) else [str(c) for c in cgroup]
            join = f'for g in {" ".join(f"${i}" for i in range(1, len(cgroups) + 1))}; do echo $$ > "$g/cgroup.procs" || exit 126; done; shift {len(cgroups)}; exec "$@"'
            cmd = ["/bin/sh", "-c", join, "sh", *cgroups, *cmd]
        with signals.held():  # a program is never started without being known to the teardown
            program = Program(name, cmd, self.work_dir / f"{name}.log", stats, signal_group=container)
            self.programs.append(program)
            self.registry_in_use.add("processes", OwnedProcess(program.pid, process_start_time(program.pid), name))
        return program

    def container_cgroups(self, cpus: list[int], memory_bytes: int) -> tuple[list[Path], ContainerCgroups]:
        """The cgroups of a container DuT (exclusive cpuset, memory reservation) and what
        was applied; each is in the registry before it exists."""
        return create_container_cgroups(
            self.tag, cpus, memory_bytes, register=lambda path: self.registry_in_use.add("cgroups", str(path))
        )

    def own_path(self, path: Path) -> None:
        """A file or directory outside the work dir that must go with the testbed."""
        self.registry_in_use.add("paths", str(path))


class HopTestbed:
    """One hop of a chain as its DuT sees the testbed (`testbed.protocol.Testbed`): its own
    namespace with in0 and out0 (or, on real wiring, its VLAN sub-interfaces in this host's),
    its own work directory and name (`tag`) for what it makes outside the namespace (cgroups,
    sockets, links), everything else the chain's testbed's — which starts, registers and
    removes it all."""

    wire = False

    def __init__(
        self,
        chain: NamespacesTestbed,
        index: int,
        name: str,
        dut_ns: str | None,
        dut_in: str | None,
        dut_out: str | None,
    ):
        self.chain = chain
        self.kind = chain.kind
        self.index = index
        self.dut_ns = dut_ns
        self.dut_in, self.dut_out = dut_in, dut_out
        self.tag = hop_tag(chain.tag, index)
        self.work_dir = chain.work_dir / f"hop{index + 1}-{name}"
        self.work_dir.mkdir(parents=True, exist_ok=True)

    @property
    def dut_site(self) -> LocalSite:
        return self.chain.site

    def dut_run(self, argv: list[str], what: str, undo: list[str] | None = None) -> None:
        if self.dut_ns is None:  # real wiring: the chain's testbed registers the undo
            self.chain.dut_run(argv, what, undo)
        else:
            sh(tool("ip"), "netns", "exec", self.dut_ns, *local_argv(argv), what=what)

    def dut_undo(self, argv: list[str]) -> None:
        """In its namespace nothing (it goes with the testbed); on real wiring, registered."""
        if self.dut_ns is None:
            self.chain.dut_undo(argv)

    def dut_binary(self, name: str) -> str:
        return self.chain.dut_binary(name)

    def dut_path(self, name: str) -> Path:
        return self.work_dir / name

    def dut_link_name(self, prefix: str) -> str:
        # In this host's namespace each hop's links need names of their own.
        return f"{prefix}0" if self.dut_ns is not None else f"{self.chain.dut_link_name(prefix)}{self.index + 1}"

    def dut_isolated_cpus(self) -> set[int] | None:
        return None

    def spawn(
        self,
        name: str,
        ns: str | None,
        argv: list[str],
        stats: Path | None = None,
        cpus: list[int] | None = None,
        cgroup: Path | list[Path] | None = None,
        container: bool = False,
    ) -> Program:
        return self.chain.spawn(name, ns, argv, stats, cpus, cgroup, container)

    def container_cgroups(self, cpus: list[int], memory_bytes: int) -> tuple[list[Path], ContainerCgroups]:
        registry = self.chain.registry
        assert registry is not None
        return create_container_cgroups(
            self.tag, cpus, memory_bytes, register=lambda path: registry.add("cgroups", str(path))
        )

    def own_path(self, path: Path) -> None:
        self.chain.own_path(path)

    def wait_until_forwarding(
        self, timeout_s: float, still_starting: Callable[[], bool] = lambda: True
    ) -> float | None:
        return self.chain.wait_until_forwarding(timeout_s, still_starting)

    def describe(self) -> TestbedDocument:
        return self.chain.describe()


def _remove_path(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
