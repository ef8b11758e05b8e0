"""The kernel trace of the roles on other hosts (`lowtail explain` on a `hosts` testbed),
against real OpenSSH servers (sshlab.py): each host's roles' cores traced through its SSH
connection, the recordings merged into the run's one trace.parquet with a host column, a
real-time task on the remote DuT's core found as preemption on that host, and a host where
tracing is refused leaving the run going, that host's roles listed as untraced.

The lab's hosts share this machine's kernel (one CPU 0 for all of them, one tracefs): each
host's recording gets an instance of its own, set up one host after the other.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "explain"))
from sshlab import Lab  # noqa: E402
from test_hosts import lowtail, needs_programs, needs_root, needs_sshd, nothing_left, write  # noqa: E402
from test_injected import HOG, HOG_BUSY_S, hog  # noqa: E402

from lowtail.testbed.cores import CoreRoles  # noqa: E402

pytestmark = [needs_root, needs_programs, needs_sshd, pytest.mark.root, pytest.mark.slow]

FWD = '[[dut]]\nname = "fwd"\nkind = "lowtail-fwd"\ninterfaces = ["d0", "d1"]\nwork_ns = 0\n'
# The cores a login on the lab's hosts may use are this machine's: the DuT host's plan is this one's.
PLAN = CoreRoles.for_host()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("trace-lab"))
    try:
        lg, _, ts = lab.three_hosts()
        lg.start_sshd()
        ts.start_sshd()
        yield lab
    finally:
        lab.close()


def _dut_sshd(lab: Lab, drop: str | None) -> None:
    """(Re)start the DuT host's sshd: a full root login, or root without `drop`'s capabilities."""
    dut = lab.hosts["dut"]
    if dut.sshd is not None:
        dut.kill_sshd()
    dut.start_sshd(privileged=drop is None, drop=drop or "")


def _instances() -> set[str]:
    """The trace instances a hosts testbed's run makes (lowtail-<tag>h<index>): others (a
    test of another testbed at the same time) are not this module's."""
    return {p.name for p in Path("/sys/kernel/tracing/instances").iterdir() if re.fullmatch(r"lowtail-.*h\d+", p.name)}


def _run(tmp_path: Path, lab: Lab, rate: int = 20_000, duration: str = "2s") -> tuple[dict, dict]:
    """One run on the lab (the DuT lowtail-fwd on the DuT host), its stored trace document and
    `lowtail explain --json` of it."""
    lg, dut, ts = (lab.hosts[r] for r in ("lg", "dut", "ts"))
    toml = write(tmp_path, lab.testbed_toml(lg, dut, ts), FWD, rates=(rate,), duration=duration)
    done = lowtail(tmp_path, "run", str(toml), "--db", "t.duckdb")
    assert done.returncode in (0, 3), done.stderr
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        (document,) = con.execute("SELECT document FROM run_traces").fetchone()
    done = lowtail(tmp_path, "explain", "latest", "--above", "p99.9", "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    return json.loads(document), json.loads(done.stdout)


def test_a_remote_duts_core_is_traced_and_a_task_there_is_preemption_on_that_host(tmp_path, lab):
    _dut_sshd(lab, None)
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
    assert PLAN.dut[0] in roles["dut"]["cpus"]
    # The DuT's own task, read on its host: lowtail-fwd by name, its pid there.
    assert "lowtail-fwd" in roles["dut"]["comms"] and roles["dut"]["pids"], roles["dut"]
    table = pq.read_table(trace["path"], columns=["host", "cpu", "kind", "name"]).to_pylist()
    assert {r["host"] for r in table} == {lg.destination, dut.destination, ts.destination}
    on_dut = [r for r in table if r["host"] == dut.destination and r["cpu"] == PLAN.dut[0]]
    assert any(r["kind"] == "task" and r["name"] == HOG for r in on_dut)
    assert [h["host"] for h in trace["info"]["hosts"]] == [dut.destination, lg.destination, ts.destination]
    assert all(not h["local"] and h["clock"]["uncertainty_ns"] > 0 for h in trace["info"]["hosts"])
    assert doc["trace"]["method"] == "tracefs" and len(doc["trace"]["hosts"]) == 3
    # What must hold on a busy shared host too: the hog, where it is named, is the DuT's
    # preemption on the DuT's host, never anything on another host.
    named = [c for c in doc["causes"] if HOG in json.dumps(c["evidence"])]
    assert all((c["kind"], c["role"], c["host"]) == ("preemption", "dut", dut.destination) for c in named), named
    duts = [c for c in doc["causes"] if c["role"] == "dut"]
    if not duts:
        pytest.skip(f"this host could not measure the DuT here: {doc['causes'] or doc['unexplained_share']}")
    first = duts[0]
    if not named:
        assert first["added_ns"] >= 0.8 * HOG_BUSY_S * 1e9, doc["causes"]
        pytest.skip(f"a longer disturbance than the hog took the DuT's core: {first['evidence'].get('what')}")
    assert first is named[0] and first["cpu"] == PLAN.dut[0], doc["causes"]
    shown = lowtail(tmp_path, "explain", "latest", "--above", "p99.9", "--db", "t.duckdb")
    assert f"{PLAN.dut[0]} on {dut.destination}" in shown.stdout, shown.stdout
    nothing_left(lab)
    assert _instances() <= before, "a host's trace instance was left"


def test_a_host_that_refuses_tracing_leaves_the_run_going_and_is_listed_untraced(tmp_path, lab):
    """The DuT host's login is root without CAP_SYS_ADMIN: its sshd's mount namespace has no
    tracefs and may not mount one. The run is measured; the other hosts are traced."""
    _dut_sshd(lab, "-sys_admin")
    lg, dut, ts = (lab.hosts[r] for r in ("lg", "dut", "ts"))
    trace, doc = _run(tmp_path, lab, rate=5_000, duration="1s")
    assert trace["method"] == "tracefs", trace
    (untraced,) = trace["untraced"]
    assert (untraced["role"], untraced["host"]) == ("dut", dut.destination)
    assert dut.destination in untraced["reason"] and "tracefs" in untraced["reason"], untraced
    assert [h["host"] for h in trace["info"]["hosts"]] == [lg.destination, ts.destination]
    hosts = set(pq.read_table(trace["path"], columns=["host"]).column("host").to_pylist())
    assert hosts == {lg.destination, ts.destination}
    assert any(f"on {dut.destination} were not traced" in n for n in doc["notes"]), doc["notes"]
    assert not any(c["kind"] == "preemption" and c["host"] == dut.destination for c in doc["causes"])
    nothing_left(lab)
