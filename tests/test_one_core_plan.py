"""One core plan for a host and an experiment (host/plan.py): the cores a run's programs get
and the boot-time split they ask for, read alike by the testbed, `host plan`, `host audit`,
`tune` (its dry run) and the remedies `explain` gives.

Before: on a 2-core host `host plan` and `host audit` said `isolcpus=1 irqaffinity=0` while
`tune` on the default experiment proposed `isolcpus=0 … irqaffinity=1`; the testbed put the
DuT, the timestamper and housekeeping on CPU 0 and nothing said so. Now the plan says which
roles share a core and why, once."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "compare"))
from compare_support import analysed, trace_and_explain  # noqa: E402

from lowtail.experiment import spec  # noqa: E402
from lowtail.experiment.hostinfo import host_metadata  # noqa: E402
from lowtail.host.facts import Host  # noqa: E402
from lowtail.host.plan import plan_for_roles, role_cores, sharing  # noqa: E402
from lowtail.host.sysroot import SysRoot  # noqa: E402
from lowtail.store import open_store  # noqa: E402
from lowtail.store import runs as runstore  # noqa: E402
from lowtail.testbed.cores import CoreRoles  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]
EXPERIMENT = """
[experiment]
name = "plan"
duration = "1s"
repetitions = 3
calibrate = false
[traffic]
rates = ["5kpps"]
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
"""


def lowtail(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, Path, int, dict]:
    """The experiment file, and a stored measurement of it on this host (its runs carry the
    testbed's core plan, as `lowtail run` stores them) with one run explained: a task
    preempting the DuT while its slowest packets were in flight."""
    tmp = tmp_path_factory.mktemp("plan")
    toml = tmp / "plan.toml"
    toml.write_text(EXPERIMENT)
    exp = spec.load(toml)
    roles = CoreRoles.for_host(exp.cores)
    db = tmp / "p.duckdb"
    with open_store(db) as store:
        eid = runstore.create_experiment(store, exp.name, exp.as_json(), exp.spec_hash, host_metadata(roles), str(tmp))
        run_ids = []
        for repetition in (0, 1):
            doc, opts = analysed(
                tmp, f"r{repetition}", packets=20_000, seed=repetition + 1, spike_probability=0.002, spike_ns=60_000
            )
            row = {
                "label": f"r{repetition}",
                "experiment_id": eid,
                "combination_key": f"r{repetition}",
                "dut_name": "fwd",
                "dut_kind": "lowtail-fwd",
                "dut_config": {},
                "calibration": False,
                "rate_pps": 5_000,
                "frame_size": 64,
                "burst": 1,
                "repetition": repetition,
                "duration_ns": 10**9,
                "warmup_ns": 0,
                "started_at": datetime.now(),
                "finished_at": datetime.now(),
                "series_path": doc["export_path"],
                "valid": True,
                "invalid_reasons": [],
                "generator": {"kept_up": True},
                "capture": {"interfaces": []},
                "containment": {"mode": "bare"},
                "energy": None,
                "dut_stats": {},
                "capture_paths": [],
                "traffic": {"flows": 1, "core_plan": roles.as_dict()},
            }
            run_ids.append(runstore.save_run(store, row, doc, opts))
        explained = trace_and_explain(store, run_ids[0], tmp, spike_ns=30_000)
    return tmp, toml, eid, explained


def _cores(plan: dict) -> tuple[list[int], list[int]]:
    return list(plan["isolated"]), list(plan["housekeeping"])


def test_host_plan_audit_tune_and_explain_name_the_same_cores(measured):
    tmp, toml, eid, explained = measured
    planned = lowtail(tmp, "host", "plan", "--experiment", str(toml), "--json")
    assert planned.returncode == 0, planned.stderr
    audited = lowtail(tmp, "host", "audit", "--experiment", str(toml), "--json")
    assert audited.returncode in (0, 4), audited.stderr
    tuned = lowtail(tmp, "tune", str(toml), "--before", str(eid), "--db", str(tmp / "p.duckdb"), "--json")
    assert tuned.returncode == 0, tuned.stderr
    tune = json.loads(tuned.stdout)
    assert tune["dry_run"] and tune["status"] == "planned"

    plan = _cores(json.loads(planned.stdout)["plan"])
    assert _cores(json.loads(audited.stdout)["plan"]) == plan
    assert _cores(tune["boot"]["plan"]) == plan
    remedies = [c["remedy"] for c in explained["causes"] if c["remedy"].get("plan")]
    assert remedies, explained["causes"]
    for remedy in remedies:
        assert _cores(remedy["plan"]) == plan
        assert all(
            p.split("=")[1] in (",".join(map(str, plan[0])), ",".join(map(str, plan[1])), "poll")
            for p in remedy["plan"]["boot"]
            if "=" in p
        )

    # The plan is the testbed's own: the DuT's cores, and the generator's when it has one to itself.
    roles = CoreRoles.for_host(spec.load(toml).cores)
    alone = roles.generator not in {*roles.dut, roles.housekeeping, roles.capture}
    assert plan[0] == sorted(({*roles.dut} | ({roles.generator} if alone else set())) - {roles.housekeeping})
    # tune moves tasks off the plan's isolated cores only, never onto them.
    for change in tune["changes"]:
        for step in change.get("changes") or []:
            if step.get("kind") == "affinity":
                assert not set(map(int, step["written"].split(","))) & set(plan[0]), step


def test_a_small_host_says_once_which_roles_share_a_core_and_why(tmp_path):
    """Two CPUs: the DuT and the timestamper share CPU 0, the generator and housekeeping CPU 1;
    the DuT's CPU 0 is isolated, and the plan says why, once."""
    roles = role_cores([0, 1])
    plan = plan_for_roles(roles, [0, 1])
    assert (plan.isolated, plan.housekeeping) == ((0,), (1,))
    assert plan.shared.startswith("2 CPUs cannot give each role of a run a core of its own: ")
    assert "the DuT and the timestamper share CPU 0; the generator and housekeeping share CPU 1" in plan.shared
    assert "measurement artefact" in plan.shared
    # Four CPUs: every role has its own; the generator's and the DuT's are isolated; nothing shares.
    four = plan_for_roles(role_cores([0, 1, 2, 3]), [0, 1, 2, 3])
    assert (four.isolated, four.housekeeping, four.shared) == ((1, 3), (0, 2), "")
    assert sharing(role_cores([0, 1, 2, 3]), [0, 1, 2, 3]) == ""
    if len(Host(SysRoot("/")).cpus_online) == 2:
        done = lowtail(tmp_path, "host", "plan")
        said = done.stdout + done.stderr
        assert done.returncode == 0 and said.count("cannot give each role of a run a core of its own") == 1, said


def test_explain_names_the_shared_core_in_the_remedy_on_a_small_host(measured):
    """The remedy for a task that took the DuT's core, on a host whose plan cannot isolate the
    DuT's core: its boot parameters with this host's cores, and why the DuT's core stays a
    housekeeping one."""
    _, _, _, explained = measured
    preempted = next(c for c in explained["causes"] if c["kind"] == "preemption")
    remedy = preempted["remedy"]
    isolated = ",".join(map(str, remedy["plan"]["isolated"]))
    assert f"isolcpus={isolated}" in remedy["action"]
    roles = CoreRoles.for_host(None)
    if set(roles.dut) & {roles.housekeeping}:  # a host too small to isolate the DuT's core
        assert "cannot give each role of a run a core of its own" in remedy["action"]


def test_tune_moves_no_task_onto_another_roles_core():
    """A task explain caught preempting the DuT on a core the plan keeps for housekeeping
    (a DuT that [cores] put on CPU 0 beside housekeeping): tune proposes no move of it (it
    would go to the generator's isolated core), and moving the others off the isolated core
    is a guideline, not that preemption's remedy."""
    import subprocess as sp

    from lowtail.host.plan import CorePlan
    from lowtail.tune.proposals import GUIDELINE, propose

    plan = CorePlan((0,), (1,), "a 2-CPU host's plan")
    hog = sp.Popen(["sleep", "60"])
    try:
        cause = {
            "kind": "preemption",
            "role": "dut",
            "cpu": 0,
            "share": 0.6,
            "evidence": {"pid": hog.pid, "what": "hog"},
        }
        proposals = {p.id: p for p in propose(SysRoot("/"), plan, [cause])}
        assert f"move-pid-{hog.pid}" not in proposals
        if "other-tasks" in proposals:
            assert proposals["other-tasks"].cause == GUIDELINE
            for change in proposals["other-tasks"].changes:
                assert "1" not in change.written.split(","), change
    finally:
        hog.kill()
        hog.wait()
