"""`[testbed] kind = "interfaces"`: lowtail on the user's own wiring. The test plays the
user: it makes veth pairs in this host's namespace (unique names, removed at the end) and
names them in the experiment file; lowtail makes nothing but the DuT's set-up, and takes
that back after every run, after a crash (`lowtail testbed clean`), and never touches the
interfaces otherwise."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "experiment"))
sys.path.insert(0, str(Path(__file__).parent))
from tb_helpers import needs_root, resources_of  # noqa: E402
from test_run import needs_programs, trusted  # noqa: E402

pytestmark = [needs_root, needs_programs, pytest.mark.root]

LOWTAIL = [sys.executable, "-m", "lowtail"]


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


class Wiring:
    """generator ─veth─ dut_in · dut_out ─veth─ post, all in this host's namespace."""

    def __init__(self):
        tag = f"lt{os.getpid() % 100000}i{secrets.token_hex(2)}"
        self.gen, self.dut_in, self.dut_out, self.post = (f"{tag}{c}" for c in "gior")
        for a, b in ((self.gen, self.dut_in), (self.dut_out, self.post)):
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for name in self.names:
            sh("sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1")
            sh("ip", "link", "set", name, "up")

    @property
    def names(self) -> list[str]:
        return [self.gen, self.dut_in, self.dut_out, self.post]

    def qdiscs(self, name: str) -> str:
        return sh("tc", "qdisc", "show", "dev", name)

    def left_behind(self) -> list[str]:
        """DuT set-up still on the interfaces: qdiscs other than the default, a bridge master."""
        found = [f"{n}: {q.strip()}" for n in self.names for q in self.qdiscs(n).splitlines() if "ingress" in q]
        for name in self.names:
            link = json.loads(sh("ip", "-json", "link", "show", name))[0]
            if link.get("master"):
                found.append(f"{name} is a port of {link['master']}")
        return found

    def remove(self) -> None:
        for name in (self.gen, self.dut_out):
            subprocess.run(["ip", "link", "del", name], capture_output=True)


@pytest.fixture
def wiring():
    w = Wiring()
    yield w
    w.remove()


def experiment(tmp_path: Path, w: Wiring, duts: str, testbed: str = "", duration: str = "1s") -> Path:
    path = tmp_path / "ifaces.toml"
    path.write_text(f"""
[experiment]
name = "ifaces"
duration = "{duration}"
warmup = "200ms"
[traffic]
rates = ["5000pps"]
[testbed]
kind = "interfaces"
generator = "{w.gen}"
pre = "{w.gen}"
post = "{w.post}"
{testbed}
{duts}
""")
    return path


def lowtail(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_lowtail_dut_on_named_interfaces_measured_and_taken_back(tmp_path, wiring):
    w = wiring
    toml = experiment(
        tmp_path,
        w,
        f"""
[[dut]]
name = "mirred"
kind = "kernel-mirred"
interfaces = ["{w.dut_in}", "{w.dut_out}"]
[[dut]]
name = "bridge"
kind = "bridge"
interfaces = ["{w.dut_in}", "{w.dut_out}"]
""",
    )
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    runs = json.loads(done.stdout)
    assert [r["dut"] for r in runs] == ["mirred", "bridge"]
    for r in runs:
        assert trusted(r), r["invalid_reasons"]
        assert r["received"] > 0 and r["lost"] <= r["sent"] // 100
        tb = r["testbed"]
        assert tb["kind"] == "interfaces"
        assert (tb["generator"]["interface"], tb["pre"]["interface"], tb["post"]["interface"]) == (
            w.gen,
            w.gen,
            w.post,
        )
        assert tb["dut_interfaces"] == [w.dut_in, w.dut_out]
        # One timestamper process stamped both sides with one clock.
        assert tb["clocks"]["same"] is True and tb["clocks"]["pre"]["timestamp_source"] == "software"
        assert r["calibration_floor"] is None  # lowtail's veth wire is no floor for the user's wiring
    assert w.left_behind() == []
    assert all(json.loads(sh("ip", "-json", "link", "show", n))[0]["operstate"] == "UP" for n in w.names)
    assert resources_of(os.getpid()) == []


def test_an_external_dut_is_measured_as_it_is(tmp_path, wiring):
    """The device outside lowtail's control: here the test's own bridge, which lowtail never touches."""
    w = wiring
    bridge = f"{w.gen[:-1]}b"
    sh("ip", "link", "add", bridge, "type", "bridge")
    try:
        for port in (w.dut_in, w.dut_out):
            sh("ip", "link", "set", port, "master", bridge)
        sh("ip", "link", "set", bridge, "up")
        toml = experiment(
            tmp_path, w, '[[dut]]\nname = "appliance"\nkind = "external"\ndescription = "a bridge"\n', "probe = false"
        )
        done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb", "--json")
        assert done.returncode in (0, 3), done.stderr
        (run,) = json.loads(done.stdout)
        assert run["kind"] == "external" and run["received"] > 0 and trusted(run)
        assert json.loads(sh("ip", "-json", "link", "show", w.dut_in))[0]["master"] == bridge
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


@pytest.mark.parametrize("fault", ["missing", "down", "no-carrier"])
def test_interfaces_that_cannot_serve_are_named_before_anything_starts(tmp_path, wiring, fault):
    w = wiring
    post = w.post
    if fault == "missing":
        post = f"{w.post[:-1]}x"
    elif fault == "down":
        sh("ip", "link", "set", w.post, "down")
    else:
        sh("ip", "link", "set", w.dut_out, "down")  # the POST point's peer: no carrier
    toml = experiment(
        tmp_path, w, f'[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["{w.dut_in}", "{w.dut_out}"]\n'
    )
    toml.write_text(toml.read_text().replace(f'post = "{w.post}"', f'post = "{post}"'))
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb")
    assert done.returncode == 2
    expected = {
        "missing": f"interface {post} (the timestamper's POST point) does not exist",
        "down": f"interface {post} (the timestamper's POST point) is down: bring it up (ip link set {post} up)",
        "no-carrier": f"interface {post} (the timestamper's POST point) has no link",
    }[fault]
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "t.duckdb").exists()


@pytest.mark.leftovers
def test_a_killed_run_leaves_only_what_testbed_clean_takes_back(tmp_path, wiring):
    w = wiring
    toml = experiment(
        tmp_path,
        w,
        f'[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["{w.dut_in}", "{w.dut_out}"]\n',
        duration="60s",
    )
    proc = subprocess.Popen([*LOWTAIL, "run", str(toml), "--db", "t.duckdb"], cwd=tmp_path, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while "ingress" not in w.qdiscs(w.dut_in):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert w.left_behind() != []
    done = lowtail(tmp_path, "testbed", "clean")
    assert done.returncode == 0, done.stderr
    assert f"tc qdisc del dev {w.dut_in} ingress" in done.stderr
    assert w.left_behind() == []
    assert resources_of(proc.pid) == []
