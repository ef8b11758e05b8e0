"""A sweep on other hosts: one SSH connection per host for the whole sweep, and a testbed
for each run.

Before the first run every host is reached, its facts read (stored with the experiment),
its roles checked (the login's capabilities, the interfaces each role names, lowtail's work
directory) and lowtail's native programs copied there — once per version: a host that has
them (same build, by hash) keeps them. Each run then gets a directory on every host it
uses, held by a keeper leash that removes it when the run ends (after the captures came
back, compressed as the timestamper wrote them) or when lowtail or its connection is lost.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lowtail.core.binaries import find_binary
from lowtail.core.errors import Failure, UserError
from lowtail.core.processes import process_start_time
from lowtail.core.version import __version__
from lowtail.host.document import RoleHost
from lowtail.testbed.cores import CoreChoices, CoreRoles
from lowtail.testbed.document import TestbedDocument
from lowtail.testbed.hosts import facts as hostfacts
from lowtail.testbed.hosts.remote import Heartbeat, RemoteProgram, RemoteSite
from lowtail.testbed.hosts.ssh import SshHost, last_line
from lowtail.testbed.registry import OwnedProcess, Registry, new_tag
from lowtail.testbed.sites import Point
from lowtail.testbed.system import tool
from lowtail.testbed.topology import NamespacesTestbed
from lowtail.testbed.wiring import Hosts

# The native programs a host may run: its roles' and the leash that holds them.
PROGRAMS = ("lowtail-gen", "lowtail-cap", "lowtail-fwd", "lowtail-leash")


class HostsSession:
    """The sweep's connections to its hosts, their facts and lowtail's programs on them."""

    def __init__(self, wiring: Hosts, log: Callable[[str], None] = lambda message: None):
        self.wiring = wiring
        self.log = log
        self.connections: dict[str, SshHost] = {}
        self.facts: dict[str, hostfacts.HostFacts] = {}
        self.bindirs: dict[str, str] = {}
        self.registry: Registry | None = None
        self.heartbeat: Heartbeat | None = None
        self.control_dir: Path | None = None
        self.checked: list[tuple[str, ...] | None] | None = None

    # -- life cycle -----------------------------------------------------------------------------

    def __enter__(self) -> HostsSession:
        self.registry = Registry.for_this_process(new_tag())
        try:
            # Control sockets need a short path (108 bytes at most).
            self.control_dir = Path(tempfile.mkdtemp(prefix="lowtail-ssh-"))
            self.registry.add("paths", str(self.control_dir))
            # Every host at once: the masters from this thread (they live as long as it), their
            # short commands from a pool.
            for index, destination in enumerate(self.wiring.hosts):
                host = SshHost(
                    destination,
                    self.wiring.ssh,
                    self.control_dir / f"{index}.sock",
                    self.control_dir / f"{index}.log",
                )
                self.connections[destination] = host
                self.log(f"connecting to {destination}")
                host.start()
                assert host.master is not None
                self.registry.add(
                    "processes", OwnedProcess(host.master.pid, process_start_time(host.master.pid), "ssh")
                )
            for host in self.connections.values():
                host.wait_connected()
            self.facts = dict(
                zip(
                    self.connections,
                    _each(
                        lambda d: hostfacts.read_facts(
                            self.connections[d], self.wiring.workdir(d), self._interfaces_on(d)
                        ),
                        list(self.connections),
                    ),
                )
            )
            self.heartbeat = Heartbeat()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection (leashes still out there stop themselves) and forget them."""
        if self.heartbeat is not None:
            self.heartbeat.close()
            self.heartbeat = None
        for host in self.connections.values():
            host.close()
        if self.control_dir is not None:
            shutil.rmtree(self.control_dir, ignore_errors=True)
        if self.registry is not None:
            self.registry.forget()
            self.registry = None

    # -- roles ----------------------------------------------------------------------------------

    def roles(self, dut_interfaces: tuple[str, ...] | None = None) -> list[tuple[str, str, dict[str, str]]]:
        """(role, host, its interfaces with what each is for) of every role of the wiring."""
        w = self.wiring
        roles = [("the generator", w.generator.host, {w.generator.interface: "the generator's"})]
        if w.pre.host == w.post.host:
            roles.append(
                (
                    "the timestamper",
                    w.pre.host,
                    {w.pre.interface: "the timestamper's PRE point", w.post.interface: "the timestamper's POST point"},
                )
            )
        else:
            roles.append(("the timestamper", w.pre.host, {w.pre.interface: "the timestamper's PRE point"}))
            roles.append(("the timestamper", w.post.host, {w.post.interface: "the timestamper's POST point"}))
        if w.dut_host:
            named = dict(zip(dut_interfaces or (), ("the DuT's in", "the DuT's out")))
            roles.append(("the DuT", w.dut_host, named))
        return roles

    def _interfaces_on(self, destination: str, extra: tuple[str, ...] = ()) -> list[str]:
        names = [name for _, host, interfaces in self.roles() if host == destination for name in interfaces]
        return list(dict.fromkeys(names + list(extra)))

    def check(self, dut_interfaces: list[tuple[str, ...] | None]) -> None:
        """Every host can play its roles (or one line per reason it cannot), then lowtail's
        programs are on every host (once a session: checking again changes nothing)."""
        if self.checked == dut_interfaces:
            return
        w = self.wiring
        if w.dut_host:
            extra = tuple(name for pair in dut_interfaces if pair for name in pair)
            self.facts[w.dut_host] = hostfacts.read_facts(
                self.connections[w.dut_host], w.workdir(w.dut_host), self._interfaces_on(w.dut_host, extra)
            )
        elif any(dut_interfaces):
            raise UserError("a DuT that lowtail sets up needs [testbed.dut] with the host it runs on (ssh = ...)")
        problems: list[str] = []
        for pair in dut_interfaces or [None]:
            for role, host, interfaces in self.roles(pair):
                problems += hostfacts.check_role(self.connections[host], self.facts[host], role, interfaces)
        if problems:
            raise UserError("; ".join(dict.fromkeys(problems)))
        if w.dut_host:
            hostfacts.require_tools(self.connections[w.dut_host], self.facts[w.dut_host], ("ip", "tc", "taskset"))
        self.bindirs = dict(
            zip(
                self.connections,
                _each(lambda d: self._install(self.connections[d], w.workdir(d)), list(self.connections)),
            )
        )
        self.checked = list(dut_interfaces)

    def _install(self, host: SshHost, workdir: str) -> str:
        """lowtail's programs on `host` (copied unless this very build is there); their directory."""
        paths = [find_binary(name) for name in PROGRAMS]
        digest = hashlib.sha256()
        for p in paths:
            digest.update(p.read_bytes())
        bindir = f"{workdir}/bin-{__version__}-{digest.hexdigest()[:12]}"
        leash = f"{bindir}/lowtail-leash"
        if host.run(f"{shlex.quote(leash)} --version", what="checking lowtail's programs", check=False).returncode == 0:
            return bindir
        self.log(f"copying lowtail's programs to {host.label}:{bindir}")
        assert self.registry is not None
        # Two hosts may share a file system (NFS): each copies to its own partial directory.
        own = hashlib.sha1(host.destination.encode()).hexdigest()[:6]
        partial = shlex.quote(f"{bindir}.partial-{self.registry.tag}-{own}")
        # One tar stream (dereferenced: the venv may hold links) and one command to check the
        # copy runs there and to move it in place; a concurrent copy that won leaves ours unused.
        members = [arg for p in paths for arg in ("-C", str(p.parent), p.name)]
        pack = subprocess.Popen([tool("tar", "tar"), "-ch", *members], stdout=subprocess.PIPE)
        try:
            assert pack.stdout is not None
            done = host.run(
                f"rm -rf {partial} && mkdir -p {partial} && tar -x -C {partial}",
                what="copying lowtail's programs",
                stdin=pack.stdout,
                check=False,
            )
        finally:
            pack.wait()
        if done.returncode != 0:
            host.run(f"rm -rf {partial}", what="removing a partial copy", check=False)
            said = done.stderr.decode(errors="replace")
            full = [line.strip() for line in said.splitlines() if "No space left" in line]
            reason = (full or [last_line(said) or f"exit code {done.returncode}"])[0]
            if full:
                raise Failure(
                    f"host {host.label}: disk full while copying lowtail's programs to {workdir} ({reason}): "
                    f"free space there, or set workdir in [testbed]"
                )
            raise Failure(f"host {host.label}: copying lowtail's programs to {workdir} failed: {reason}")
        works = host.run(
            f"{partial}/lowtail-leash --version >/dev/null && {{ mv -T {partial} {shlex.quote(bindir)} 2>/dev/null "
            f"|| rm -rf {partial}; }}",
            what="installing lowtail's programs",
            check=False,
        )
        if works.returncode != 0:
            host.run(f"rm -rf {partial}", what="removing a copy that does not run", check=False)
            raise UserError(
                f"host {host.label} cannot run the lowtail programs built here "
                f"({last_line(works.stderr) or works.returncode}): build lowtail on a host with the same (or an "
                f"older) C library"
            )
        return bindir

    def plan(self, cores: CoreChoices) -> CoreRoles:
        """Each program's core on its own host: the generator's on the LoadGen host's plan,
        the timestamper's on the timestamper host's, the DuT's on the DuT host's."""
        w = self.wiring

        def on(host: str) -> CoreRoles:
            available = hostfacts.cpus(self.facts[host])
            for key, value in cores.items():
                for core in value if isinstance(value, list) else [value]:
                    if core not in available:
                        raise UserError(f"[cores] {key}: core {core} is not one host {host} offers ({available})")
            return CoreRoles.for_cpus(available, cores)

        ts = on(w.pre.host)
        return CoreRoles(
            housekeeping=ts.housekeeping,
            generator=on(w.generator.host).generator,
            capture=ts.capture,
            dut=on(w.dut_host).dut if w.dut_host else [],
        )

    def hosts(self) -> dict[str, RoleHost]:
        """Every role's host as stored with the experiment."""
        w = self.wiring
        roles = {"loadgen": w.generator.host, "timestamper": w.pre.host}
        if w.post.host != w.pre.host:
            roles["timestamper_post"] = w.post.host
        if w.dut_host:
            roles["dut"] = w.dut_host
        return {role: RoleHost(ssh=host, **hostfacts.summary(self.facts[host])) for role, host in roles.items()}

    def check_disk(self, need_bytes: int) -> None:
        """A Failure when a timestamper host has not `need_bytes` free in its work directory."""
        for destination in dict.fromkeys([self.wiring.pre.host, self.wiring.post.host]):
            workdir = self.wiring.workdir(destination)
            done = self.connections[destination].run(
                f"df -Pk {shlex.quote(workdir)} | awk 'NR==2 {{print $4}}'", what="reading free disk space"
            )
            free = int(done.stdout.decode().strip() or 0) << 10
            if free < need_bytes:
                raise Failure(
                    f"not enough disk space on host {destination} in {workdir} for the next run: it needs about "
                    f"{need_bytes >> 20} MiB and {free >> 20} MiB are free; free some space there (or set workdir in "
                    f"[testbed]) and run the same command again to resume (finished runs are kept)"
                )

    def testbed(
        self,
        run_dir: Path,
        wire: bool,
        dut_interfaces: tuple[str, ...] | None,
        hops: list[tuple[str, ...] | None] | None = None,
    ) -> HostsTestbed:
        """A fresh testbed on the hosts for one run (one DuT: chains run on namespaces)."""
        return HostsTestbed(run_dir, self, dut_interfaces)


def _each(work: Any, items: list[Any]) -> list[Any]:
    """`work` on every item at once (threads: it waits on SSH); results in order, the first
    error (in order) raised once all are done."""
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(work, item) for item in items]
    for f in futures:
        error = f.exception()
        if error is not None:
            raise error
    return [f.result() for f in futures]


class HostsTestbed(NamespacesTestbed):
    """One run's testbed on the session's hosts: a directory on each, held by a keeper."""

    kind = "hosts"

    def __init__(self, work_dir: Path, session: HostsSession, dut_interfaces: tuple[str, ...] | None):
        super().__init__(work_dir, wire=False)
        self.session = session
        self.wiring = session.wiring
        self.lg_ns = None
        self.dut_ns = None
        self.dut_in, self.dut_out = dut_interfaces or (None, None)
        self.dut_interfaces = dut_interfaces
        self.sites: dict[str, RemoteSite] = {}
        assert session.heartbeat is not None
        self.heartbeat = session.heartbeat

    def _build(self) -> None:
        keepers = []
        for destination, host in self.session.connections.items():
            host.require_alive()
            run_dir = f"{self.wiring.workdir(destination)}/run-{self.tag}"
            site = RemoteSite(host, self.session.facts[destination], self.session.bindirs[destination], run_dir, self)
            # Its keeper makes the directory, and removes it when the run ends, whatever ends it.
            keepers.append(
                site.keep(
                    f"keeper-{len(self.sites)}",
                    undo=[["rm", "-rf", run_dir]],
                    prelude=f"mkdir -p {shlex.quote(run_dir)}",
                )
            )
            self.sites[destination] = site
        for keeper in keepers:  # started together: one round trip for all hosts
            keeper.wait_started()

    def adopt(self, program: RemoteProgram) -> RemoteProgram:
        """A program on a host, stopped with the testbed (its local ssh client registered)."""
        self.programs.append(program)  # type: ignore[arg-type]
        assert self.registry is not None
        self.registry.add("processes", OwnedProcess(program.pid, process_start_time(program.pid), program.name))
        return program

    @property
    def namespaces(self) -> list[str]:
        return []

    def _point(self, destination: str, interface: str) -> Point:
        mac = self.session.facts[destination].interfaces.get(interface, {}).get("address", "")
        return Point(self.sites[destination], interface, None, mac)

    @property
    def generator(self) -> Point:
        return self._point(self.wiring.generator.host, self.wiring.generator.interface)

    @property
    def pre(self) -> Point:
        return self._point(self.wiring.pre.host, self.wiring.pre.interface)

    @property
    def post(self) -> Point:
        return self._point(self.wiring.post.host, self.wiring.post.interface)

    @property
    def dst_mac(self) -> str:
        return self.wiring.dst_mac or self.post.mac

    @property
    def dut_site(self) -> RemoteSite:  # type: ignore[override]
        return self.sites[self.wiring.dut_host or self.wiring.generator.host]

    @property
    def dut_host_named(self) -> bool:
        """Whether the DuT runs on a host of the testbed (`[testbed.dut]`), not only outside it:
        an external DuT's cores are on no host lowtail reaches, and are not traced."""
        return self.wiring.dut_host is not None

    def dut_run(self, argv: list[str], what: str, undo: list[str] | None = None) -> None:
        if undo:
            self.dut_undo(undo)
        self.dut_site.host.run(shlex.join(argv), what=what)

    def dut_undo(self, argv: list[str]) -> None:
        self.dut_site.keep(f"undo-{len(self.programs)}", undo=[argv]).wait_started()

    def dut_binary(self, name: str) -> str:
        return self.dut_site.binary(name)

    def dut_path(self, name: str) -> str:  # type: ignore[override]
        return self.dut_site.path(name)

    def dut_link_name(self, prefix: str) -> str:
        return f"lt{prefix}{self.tag[-4:]}"

    def dut_isolated_cpus(self) -> set[int] | None:
        return self.dut_site.isolated_cpus()

    def spawn(  # type: ignore[override]
        self,
        name: str,
        ns: str | None,
        argv: list[str],
        stats: Path | str | None = None,
        cpus: list[int] | None = None,
        cgroup: Any = None,
        container: bool = False,
    ) -> RemoteProgram:
        """The DuT's program, on the DuT's host."""
        if cgroup is not None or container:
            raise UserError("containment on another host is not supported (only bare)")
        if cpus:
            argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
        return self.dut_site.spawn(name, argv, stats=str(stats) if stats else None)

    def wait_until_forwarding(
        self, timeout_s: float, still_starting: Callable[[], bool] = lambda: True
    ) -> float | None:
        """No probe reaches across hosts: the DuT gets the settle time, and fails the run if it
        stops meanwhile (one that forwards nothing shows as loss)."""
        import time

        deadline = time.monotonic() + self.wiring.settle_ns / 1e9
        while time.monotonic() < deadline:
            if not still_starting():
                return None
            time.sleep(0.05)
        return self.wiring.settle_ns / 1e9

    def describe(self) -> TestbedDocument:
        return {
            "kind": self.kind,
            "generator": self.generator.describe(),
            "pre": self.pre.describe(),
            "post": self.post.describe(),
            "dut": {"host": self.wiring.dut_host, "interfaces": list(self.dut_interfaces or [])},
            "dst_mac": self.dst_mac,
        }
