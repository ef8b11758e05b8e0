"""The kernel trace of the roles on other hosts (`lowtail explain` on a `hosts` testbed),
against real OpenSSH servers (sshlab.py): each host's roles' cores traced through its SSH
connection, the recordings merged into the run's one trace.parquet with a host column, a
host where tracing is refused leaving the run going (that host's roles listed as untraced),
and a real-time task on the remote DuT's core found as preemption on that host.

The lab's hosts share this machine's kernel (one CPU 0 for all of them, one tracefs): each
host's recording gets an instance of its own, set up one host after the other.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "explain"))
from sshlab import Lab  # noqa: E402
from test_hosts import LOWTAIL, lowtail, needs_programs, needs_root, needs_sshd, nothing_left, write  # noqa: E402
from test_injected import HOG, HOG_BUSY_S, hog  # noqa: E402

from lowtail.testbed.cores import CoreRoles  # noqa: E402

pytestmark = [
    needs_root,
    needs_programs,
    needs_sshd,
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.host,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores: the generator's apart"),
]

FWD = '[[dut]]\nname = "fwd"\nkind = "lowtail-fwd"\ninterfaces = ["d0", "d1"]\nwork_ns = 0\n'
# The lab's hosts share this machine's cores, so each host's plan is this machine's: the DuT's
# core is the timestamper's too (as on any 2-core host), on the DuT host and the timestamper
# host alike.
PLAN = CoreRoles.for_host()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("trace-lab"))
    try:
        lg, dut, _ = lab.three_hosts()
        lg.start_sshd()
        dut.start_sshd()
        yield lab
    finally:
        lab.close()


def _ts_sshd(lab: Lab, drop: str | None) -> None:
    """(Re)start the timestamper host's sshd: a full root login, or root without `drop`'s capabilities."""
    ts = lab.hosts["ts"]
    if ts.sshd is not None:
        ts.kill_sshd()
    ts.start_sshd(privileged=drop is None, drop=drop or "")


def _instances() -> set[str]:
    """The trace instances a hosts testbed's run makes (lowtail-<tag>h<index>): others (a
    test of another testbed at the same time) are not this module's."""
    return {p.name for p in Path("/sys/kernel/tracing/instances").iterdir() if re.fullmatch(r"lowtail-.*h\d+", p.name)}


def _run(tmp_path: Path, lab: Lab, rate: int = 20_000, duration: str = "2s") -> tuple[dict, dict]:
    """One run on the lab (the DuT lowtail-fwd on the DuT host), its stored trace document and
    `lowtail explain --json` of it (the tail: above 500 µs, which the hog's 1.5 ms reaches;
    p99.9 on a busy shared host is a compiler's longer stall of some role)."""
    lg, dut, ts = (lab.hosts[r] for r in ("lg", "dut", "ts"))
    toml = write(tmp_path, lab.testbed_toml(lg, dut, ts), FWD, rates=(rate,), duration=duration)
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb")
    assert done.returncode in (0, 3), done.stderr
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        (document,) = con.execute("SELECT document FROM run_traces").fetchone()
    done = lowtail(tmp_path, "explain", "latest", "--above", "500us", "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    return json.loads(document), json.loads(done.stdout)


def test_every_hosts_roles_are_traced_into_one_file_with_a_host_column(tmp_path, lab):
    """A hog on the DuT's core is in the DuT host's rows; in the lab the timestamper host's
    CPU 0 is that same core, so the hog may be named there too, but nowhere else."""
    _ts_sshd(lab, None)
    lg, dut, ts = (lab.hosts[r] for r in ("lg", "dut", "ts"))
    before = _instances()
    with hog(PLAN.dut[0]):
        trace, doc = _run(tmp_path, lab)
    assert trace["method"] == "tracefs", trace
    assert trace["untraced"] == []
    roles = trace["roles"]
    assert {r: d["host"] for r, d in roles.items()} == {
        "dut": dut.destination,
        "generator": lg.destination,
        "timestamper": ts.destination,
    }
    assert roles["dut"]["cpus"] == PLAN.dut and roles["generator"]["cpus"] == [PLAN.generator]
    # The DuT's own task, read on its host: lowtail-fwd by name, its pid there.
    assert "lowtail-fwd" in roles["dut"]["comms"] and roles["dut"]["pids"], roles["dut"]
    table = pq.read_table(trace["path"], columns=["host", "cpu", "kind", "name"]).to_pylist()
    assert {r["host"] for r in table} == {lg.destination, dut.destination, ts.destination}
    assert {r["cpu"] for r in table if r["host"] == lg.destination and r["kind"] == "task"} == {PLAN.generator}
    on_dut = [r for r in table if r["host"] == dut.destination and r["cpu"] == PLAN.dut[0]]
    assert any(r["kind"] == "task" and r["name"] == HOG for r in on_dut)
    assert [h["host"] for h in trace["info"]["hosts"]] == [dut.destination, lg.destination, ts.destination]
    assert all(not h["local"] and h["clock"]["uncertainty_ns"] > 0 for h in trace["info"]["hosts"])
    assert doc["trace"]["method"] == "tracefs" and len(doc["trace"]["hosts"]) == 3
    named = {(c["kind"], c["host"], c["cpu"]) for c in doc["causes"] if HOG in json.dumps(c["evidence"])}
    assert named <= {("preemption", dut.destination, PLAN.dut[0]), ("timestamper_stall", ts.destination, PLAN.capture)}
    nothing_left(lab)
    assert _instances() <= before, "a host's trace instance was left"


def test_a_host_refusing_tracing_is_untraced_and_a_hog_on_the_remote_duts_core_is_its_preemption(tmp_path, lab):
    """The timestamper host's login is root without CAP_SYS_ADMIN: its sshd's mount namespace
    has no tracefs and may not mount one. The run is measured; the DuT's and the generator's
    hosts are traced, and the hog on the DuT's core is the DuT's preemption, on its host."""
    _ts_sshd(lab, "-sys_admin")
    lg, dut, ts = (lab.hosts[r] for r in ("lg", "dut", "ts"))
    with hog(PLAN.dut[0]):
        trace, doc = _run(tmp_path, lab)
    assert trace["method"] == "tracefs", trace
    (untraced,) = trace["untraced"]
    assert (untraced["role"], untraced["host"]) == ("timestamper", ts.destination)
    assert ts.destination in untraced["reason"] and "tracefs" in untraced["reason"], untraced
    assert [h["host"] for h in trace["info"]["hosts"]] == [dut.destination, lg.destination]
    hosts = set(pq.read_table(trace["path"], columns=["host"]).column("host").to_pylist())
    assert hosts == {dut.destination, lg.destination}
    assert any(
        u["kind"] == "untraced" and f"on {ts.destination} were not traced" in u["what"] for u in doc["unseen"]
    ), doc["unseen"]
    assert not any(c["host"] == ts.destination and c["kind"] == "timestamper_stall" for c in doc["causes"])
    nothing_left(lab)
    # What must hold on a busy shared host too: the hog, where it is named, is the DuT's
    # preemption on the DuT's host.
    named = [c for c in doc["causes"] if HOG in json.dumps(c["evidence"])]
    assert all((c["kind"], c["role"], c["host"]) == ("preemption", "dut", dut.destination) for c in named), named
    duts = [c for c in doc["causes"] if c["role"] == "dut"]
    if not duts:
        pytest.skip(f"this host could not measure the DuT here: {[c['evidence']['what'] for c in doc['causes']]}")
    first = duts[0]
    if not named:
        assert first["added_ns"] >= 0.8 * HOG_BUSY_S * 1e9, doc["causes"]
        pytest.skip(f"a longer disturbance than the hog took the DuT's core: {first['evidence'].get('what')}")
    # Found, on the DuT's core of its host (not necessarily first: in the lab the timestamper's
    # own program, on another host, shares that physical core and may preempt the DuT too).
    assert named[0]["cpu"] == PLAN.dut[0] and named[0]["share"] >= 0.05, doc["causes"]
    # The terminal names the core with its host (wide enough not to fold the table).
    shown = subprocess.run(
        [*LOWTAIL, "explain", "latest", "--above", "500us", "--db", "t.duckdb"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert f"{PLAN.dut[0]} on {dut.destination}" in shown.stdout, shown.stdout
