"""`[testbed] kind = "hosts"` against real OpenSSH servers: three hosts (LoadGen, DuT,
timestamper), each an sshd in its own network namespace with keys the test made (sshlab.py).
Every SSH path runs for real: connecting, copying lowtail's programs, starting and stopping
roles, fetching captures, a refused key, an unreachable host, a login without the
capabilities a role needs, a full disk, and a connection lost in the middle of a run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
sys.path.insert(0, str(Path(__file__).parents[1] / "experiment"))
from sshlab import Lab  # noqa: E402
from tb_helpers import needs_root  # noqa: E402
from test_run import needs_programs, trusted  # noqa: E402

from lowtail.trace.run import POST_UNTRACED  # noqa: E402

needs_sshd = pytest.mark.skipif(
    not Path("/usr/sbin/sshd").exists() or shutil.which("ssh") is None,
    reason="needs OpenSSH (Debian packages openssh-server, openssh-client)",
)
pytestmark = [needs_root, needs_programs, needs_sshd, pytest.mark.root]

LOWTAIL = [sys.executable, "-m", "lowtail"]


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path)
    yield lab
    lab.close()


def write(tmp_path: Path, testbed: str, duts: str, rates=(5000,), duration="1s") -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(f"""
[experiment]
name = "three hosts"
duration = "{duration}"
warmup = "200ms"
[traffic]
rates = {[f"{r}pps" for r in rates]}
{testbed}
{duts}
""")
    return path


def lowtail(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


def local_ssh(lab: Lab) -> list[str]:
    """ssh clients on this host that talk to the lab's hosts."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode(errors="replace")
        if argv and argv[0].endswith(b"ssh") and any(h.address in text for h in lab.hosts.values()):
            found.append(text)
    return found


def nothing_left(lab: Lab) -> None:
    """Only sshd runs on the hosts, only lowtail's programs stay in their work directories,
    and no ssh client of lowtail's is left here."""
    for host in lab.hosts.values():
        assert set(host.commands()) <= {"sshd"}, (host.role, host.commands())
        left = [p.name for p in host.workdir.iterdir() if not p.name.startswith("bin-")]
        assert left == [], (host.role, left)
    assert local_ssh(lab) == []


MIRRED_AND_FWD = """
[[dut]]
name = "mirred"
kind = "kernel-mirred"
interfaces = ["d0", "d1"]
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
interfaces = ["d0", "d1"]
"""


@pytest.mark.slow
def test_a_sweep_on_three_hosts_is_measured_stored_reported_and_leaves_nothing(tmp_path, lab):
    lg, dut, ts = lab.three_hosts()
    for host in (lg, dut, ts):
        host.start_sshd()
    toml = write(tmp_path, lab.testbed_toml(lg, dut, ts), MIRRED_AND_FWD)
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    runs = json.loads(done.stdout)
    assert [r["dut"] for r in runs] == ["mirred", "fwd"]
    for r in runs:
        assert trusted(r), r["invalid_reasons"]
        assert r["received"] > 0 and r["lost"] <= r["sent"] // 100, r
        assert r["generator"]["sent"] == round(r["rate_pps"] * 1.2)
        tb = r["testbed"]
        assert (tb["kind"], tb["generator"]["host"], tb["pre"]["host"], tb["dut"]["host"]) == (
            "hosts",
            lg.destination,
            ts.destination,
            dut.destination,
        )
        assert tb["clocks"]["same"] is True and "one timestamper on" in tb["clocks"]["why"]
        assert {i["iface"] for i in r["capture"]["interfaces"]} == {"t0", "t1"}
        assert r["dut_stats"].get("forwarded", 1) > 0  # lowtail-fwd's own counters came back
    # The captures came back (compressed, as the timestamper wrote them) beside the series.
    for run_dir in sorted((tmp_path / "lowtail-data").glob("experiment-1/0*")):
        assert {"pre.pcap.zst", "post.pcap.zst", "series.parquet"} <= {p.name for p in run_dir.iterdir()}
    listed = lowtail(tmp_path, "experiment", "report", "latest", "--db", "t.duckdb", "-o", "r.html")
    assert listed.returncode == 0, listed.stderr
    page = (tmp_path / "r.html").read_text()
    assert "dut host" in page and dut.destination in page and "one clock" in page
    nothing_left(lab)


@pytest.mark.slow
def test_pre_and_post_stamped_on_two_hosts_record_both_clocks(tmp_path, lab):
    """POST stamped on the DuT host's out interface, PRE on the timestamper's tap: two
    timestamper processes, each side's clock recorded. The DuT is external: the lab's own mirred."""
    lg, dut, ts = lab.three_hosts()
    for host in (lg, dut, ts):
        host.start_sshd()
    for argv in (
        ["tc", "qdisc", "add", "dev", "d0", "ingress"],
        ["tc", "filter", "add", "dev", "d0", "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0"]
        + ["action", "mirred", "egress", "redirect", "dev", "d1"],
    ):
        subprocess.run(["ip", "netns", "exec", dut.netns, *argv], check=True)
    testbed = lab.testbed_toml(lg, None, ts).replace('post = "t1"', f'post = "d1"\npost_ssh = "{dut.destination}"')
    testbed = testbed.replace(f'workdir = "{ts.workdir}"', f'workdir = "{ts.workdir}"')
    toml = write(tmp_path, testbed, '[[dut]]\nname = "box"\nkind = "external"\n')
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    (run,) = json.loads(done.stdout)
    assert trusted(run) and run["received"] > 0
    clocks = run["testbed"]["clocks"]
    assert (clocks["pre"]["host"], clocks["post"]["host"]) == (ts.destination, dut.destination)
    assert clocks["pre"]["process"] != clocks["post"]["process"]
    # The lab's hosts share this machine's kernel: one boot id, one clock, and it says why.
    assert clocks["same"] is True and "same boot id" in clocks["why"]
    assert [len(t["interfaces"]) for t in run["capture"]["timestampers"]] == [1, 1]
    # The external DuT is on no host of the testbed: its cores are not traced, the others' are.
    import duckdb

    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        (document,) = con.execute("SELECT document FROM run_traces").fetchone()
    trace = json.loads(document)
    assert trace["method"] == "tracefs" and set(trace["roles"]) == {"generator", "timestamper"}, trace
    assert trace["untraced"] == [
        {"role": "dut", "host": "", "reason": "the DuT runs on no host of the testbed"},
        # POST is stamped on the DuT's host: explain traces the PRE timestamper's core only, and says so.
        {"role": "post timestamper", "host": dut.destination, "reason": POST_UNTRACED},
    ]
    nothing_left(lab)


def test_faults_reaching_hosts_are_one_line_each_and_leave_nothing(tmp_path, lab):
    lg, dut, ts = lab.three_hosts()
    lg.start_sshd()
    ts.start_sshd(privileged=False)  # root without CAP_NET_RAW/CAP_NET_ADMIN
    dut.start_sshd(authorized_key=lab.host_key)  # accepts some other key than the lab's
    duts = '[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["d0", "d1"]\n'

    def run(testbed: str, duts: str = duts) -> subprocess.CompletedProcess:
        done = lowtail(tmp_path, "run", str(write(tmp_path, testbed, duts)), "--db", "t.duckdb")
        assert len(done.stderr.strip().splitlines()) <= 4, done.stderr  # progress notes and one error
        return done

    refused = run(lab.testbed_toml(lg, dut, ts))
    assert refused.returncode == 2
    assert f"host {dut.destination} refused the SSH key (" in refused.stderr
    assert "Permission denied (publickey" in refused.stderr

    unreachable = lab.testbed_toml(lg, dut, ts).replace(dut.destination, f"ssh://root@{dut.address}:2")
    done = run(unreachable)
    assert done.returncode == 2 and f"cannot reach host ssh://root@{dut.address}:2: " in done.stderr
    assert "Connection refused" in done.stderr

    unprivileged = run(lab.testbed_toml(lg, None, ts), '[[dut]]\nname = "box"\nkind = "external"\n')
    assert unprivileged.returncode == 2
    assert (
        f"host {ts.destination}: the login (root) lacks CAP_NET_RAW, CAP_NET_ADMIN, which the timestamper needs"
        in unprivileged.stderr
    )
    assert not (tmp_path / "t.duckdb").exists()  # nothing was started, nothing stored
    nothing_left(lab)


def test_a_full_disk_on_a_host_is_said_before_a_run_starts(tmp_path, lab):
    lg, dut, ts = lab.three_hosts()
    small = tmp_path / "small"
    small.mkdir()
    # Mounted before the hosts' sshd start, so that their mount namespaces see it.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "lab-small", str(small)], check=True)
    try:
        for host in (lg, dut, ts):
            host.start_sshd()
        testbed = lab.testbed_toml(lg, dut, ts).replace(f'workdir = "{ts.workdir}"', f'workdir = "{small}"')
        duts = '[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["d0", "d1"]\n'
        done = lowtail(tmp_path, "run", str(write(tmp_path, testbed, duts)), "--db", "t.duckdb")
        assert done.returncode == 1, done.stderr
        assert f"host {ts.destination}: disk full while copying lowtail's programs to {small}" in done.stderr
        assert "No space left on device" in done.stderr
        assert list(small.iterdir()) == []  # the partial copy is gone
        assert f"copying lowtail's programs to {lg.destination}:" in done.stderr
        # Trying again: the hosts that have this build's programs are not copied to again.
        again = lowtail(tmp_path, "run", str(write(tmp_path, testbed, duts)), "--db", "t.duckdb")
        assert again.returncode == 1 and "disk full while copying" in again.stderr
        assert f"copying lowtail's programs to {lg.destination}:" not in again.stderr, again.stderr
    finally:
        subprocess.run(["umount", str(small)], check=True)
    nothing_left(lab)


def test_a_connection_lost_mid_run_stops_the_remote_roles_and_leaves_nothing(tmp_path, lab):
    lg, dut, ts = lab.three_hosts()
    for host in (lg, dut, ts):
        host.start_sshd()
    duts = '[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["d0", "d1"]\n'
    toml = write(tmp_path, lab.testbed_toml(lg, dut, ts), duts, duration="60s")
    proc = subprocess.Popen(
        [*LOWTAIL, "run", str(toml), "--db", "t.duckdb"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while "lowtail-gen" not in lg.commands():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert "lowtail-cap" in ts.commands() and "lowtail-leash" in dut.commands()
    # The run's time limit reaches the programs on other hosts, through their leashes: the
    # heartbeat, from a thread of its own, would beat on for a lowtail that hangs.
    remote = {**lg.time_limits(), **ts.time_limits()}
    assert remote["lowtail-gen"] == remote["lowtail-cap"] == remote["lowtail-leash"] is not None, remote
    ts.kill_sshd()  # the timestamper's host drops off the network
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert f"lost the SSH connection to host {ts.destination}" in stderr.decode()
    # The timestamper's leash saw its session end, stopped lowtail-cap and removed the run's
    # directory; the other hosts were taken down by lowtail as usual.
    deadline = time.monotonic() + 30
    while ts.commands() or list(ts.workdir.glob("run-*")):
        assert time.monotonic() < deadline, (ts.commands(), list(ts.workdir.iterdir()))
        time.sleep(0.1)
    nothing_left(lab)
