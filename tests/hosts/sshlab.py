"""A lab of SSH hosts on this machine: one network namespace per host, each with its own
OpenSSH server (Debian's sshd) on a management link to the root namespace, keys made for
the lab, and the data-plane wiring of a LoadGen → DuT → timestamper testbed between them:

    lg ns:  g0 ──────────────── veth ───────────────► d0  (dut ns)
            g0's egress mirrored (tc) to m0 ── veth ─► t0  (ts ns: the PRE tap)
    dut ns: d1 ──────────────── veth ───────────────► t1  (ts ns: the POST point)

The lab plays the user's machines; lowtail reaches them only by SSH. Everything the lab
makes carries its tag and is removed by `close()`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import time_limit_of  # noqa: E402

SSHD = "/usr/sbin/sshd"


def sh(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def keygen(path: Path) -> str:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lowtail-lab", "-f", str(path))
    return path.with_suffix(".pub").read_text().strip()


class Host:
    def __init__(self, lab: Lab, role: str, index: int):
        self.lab = lab
        self.role = role
        self.netns = f"{lab.tag}-{role}"
        self.address = f"10.{lab.net[0]}.{lab.net[1]}.{4 * index + 2}"
        self.root_address = f"10.{lab.net[0]}.{lab.net[1]}.{4 * index + 1}"
        self.root_link = f"{lab.tag}{index}"
        self.workdir = lab.dir / f"{role}-host"
        self.sshd: subprocess.Popen | None = None

    @property
    def destination(self) -> str:
        return f"root@{self.address}"

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def commands(self) -> list[str]:
        """The command names of the processes running in this host's namespace."""
        names = []
        for pid in self.pids():
            try:
                names.append(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
        return names

    def time_limits(self) -> dict[str, str | None]:
        """The time limit in the environment of each process of this host, by command name."""
        limits = {}
        for pid in self.pids():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            limits[comm] = time_limit_of(pid)
        return limits

    def start_sshd(
        self, privileged: bool = True, authorized_key: str | None = None, drop: str = "-net_raw,-net_admin"
    ) -> None:
        conf = self.lab.dir / f"sshd-{self.role}.conf"
        keys = self.lab.dir / f"authorized-{self.role}"
        keys.write_text((authorized_key or self.lab.client_key) + "\n")
        conf.write_text(
            f"ListenAddress {self.address}\nHostKey {self.lab.host_key_path}\nAuthorizedKeysFile {keys}\n"
            f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"StrictModes no\nUsePAM no\nPidFile none\nLogLevel ERROR\n"
        )
        argv = ["ip", "netns", "exec", self.netns]
        if not privileged:
            # root, but without some capabilities (`drop`): by default those a testbed role
            # needs (as in a locked-down container)
            argv += ["setpriv", "--bounding-set", drop, "--"]
        argv += [SSHD, "-D", "-e", "-f", str(conf)]
        log = open(self.lab.dir / f"sshd-{self.role}.log", "ab")
        self.sshd = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done = subprocess.run(
                ["ip", "netns", "exec", self.netns, "ss", "-Hltn", f"src {self.address}"],
                capture_output=True,
                text=True,
            )
            if ":22" in done.stdout:
                return
            if self.sshd.poll() is not None:
                raise RuntimeError(
                    f"sshd of {self.role} exited: {(self.lab.dir / f'sshd-{self.role}.log').read_text()}"
                )
            time.sleep(0.05)
        raise RuntimeError(f"sshd of {self.role} did not listen")

    def kill_sshd(self) -> None:
        """Kill this host's sshd processes (the listener and every connection's), nothing else."""
        for pid in self.pids():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        if self.sshd is not None:
            self.sshd.wait(10)


class Lab:
    def __init__(self, tmp: Path):
        self.tag = f"h{os.getpid() % 100000}{secrets.token_hex(1)}"
        self.net = (100 + secrets.randbelow(100), secrets.randbelow(256))
        self.dir = tmp / "lab"
        self.dir.mkdir(parents=True)
        self.hosts: dict[str, Host] = {}
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        self.client_key = keygen(self.dir / "id")
        self.identity = self.dir / "id"
        self.host_key_path = self.dir / "host_key"
        self.host_key = keygen(self.host_key_path)
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("")

    def add(self, role: str) -> Host:
        host = Host(self, role, len(self.hosts))
        self.hosts[role] = host
        sh("ip", "netns", "add", host.netns)
        sh("ip", "link", "add", host.root_link, "type", "veth", "peer", "name", "mgmt", "netns", host.netns)
        sh("ip", "addr", "add", f"{host.root_address}/30", "dev", host.root_link)
        sh("ip", "link", "set", host.root_link, "up")
        for argv in (
            ["ip", "addr", "add", f"{host.address}/30", "dev", "mgmt"],
            ["ip", "link", "set", "mgmt", "up"],
            ["ip", "link", "set", "lo", "up"],
            ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        ):
            sh("ip", "netns", "exec", host.netns, *argv)
        with self.known_hosts.open("a") as f:
            f.write(f"{host.address} {self.host_key}\n")
        host.workdir.mkdir()
        return host

    def link(self, a: Host, a_name: str, b: Host, b_name: str) -> None:
        sh("ip", "link", "add", a_name, "netns", a.netns, "type", "veth", "peer", "name", b_name, "netns", b.netns)
        for host, name in ((a, a_name), (b, b_name)):
            sh("ip", "-n", host.netns, "link", "set", name, "up")

    def three_hosts(self) -> tuple[Host, Host, Host]:
        """LoadGen, DuT and timestamper, wired as the module says."""
        lg, dut, ts = self.add("lg"), self.add("dut"), self.add("ts")
        self.link(lg, "g0", dut, "d0")
        self.link(dut, "d1", ts, "t1")
        self.link(lg, "m0", ts, "t0")
        for argv in (
            ["tc", "qdisc", "add", "dev", "g0", "clsact"],
            ["tc", "filter", "add", "dev", "g0", "egress", "protocol", "all", "u32", "match", "u32", "0", "0"]
            + ["action", "mirred", "egress", "mirror", "dev", "m0"],
        ):
            sh("ip", "netns", "exec", lg.netns, *argv)
        return lg, dut, ts

    def close(self) -> None:
        for host in self.hosts.values():
            for pid in host.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if host.sshd is not None:
                host.sshd.wait(10)
            subprocess.run(["ip", "netns", "delete", host.netns], capture_output=True)
            subprocess.run(["ip", "link", "delete", host.root_link], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def testbed_toml(self, lg: Host, dut: Host | None, ts: Host, identity: Path | None = None) -> str:
        text = f"""
[testbed]
kind = "hosts"
identity = "{identity or self.identity}"
known_hosts = "{self.known_hosts}"
connect_timeout = "3s"
settle = "300ms"
[testbed.loadgen]
ssh = "{lg.destination}"
interface = "g0"
workdir = "{lg.workdir}"
[testbed.timestamper]
ssh = "{ts.destination}"
pre = "t0"
post = "t1"
workdir = "{ts.workdir}"
"""
        if dut is not None:
            text += f'[testbed.dut]\nssh = "{dut.destination}"\nworkdir = "{dut.workdir}"\n'
        return text
