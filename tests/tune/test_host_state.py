"""The host-state fingerprint (host/state.py) and the run-time remedies tune adds to host
apply (a task's CPUs, with its exact undo). Fixture sysroots and a child process of the test:
nothing else on the live host is touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from host_fixtures import make_sysroot  # noqa: E402
from lowtail.host.apply import Change, apply_changes, read_setting, task_start, undo  # noqa: E402
from lowtail.host.plan import CorePlan  # noqa: E402
from lowtail.host.state import differing, read_host_state  # noqa: E402
from lowtail.host.sysroot import SysRoot  # noqa: E402
from lowtail.store.records import HOST_STATE_AXIS  # noqa: E402


def test_tuned_and_untuned_hosts_differ_in_the_settings_that_decide_the_tail(tmp_path):
    untuned = SysRoot.open(make_sysroot(tmp_path / "u", tuned=False))
    tuned = SysRoot.open(make_sysroot(tmp_path / "t", tuned=True))
    a, b = read_host_state(untuned, [0, 1]), read_host_state(tuned, [0, 1])
    assert a["id"] != b["id"] and len(a["id"]) == 10
    diff = differing(a["settings"], b["settings"])
    assert {"kernel command line", "isolated CPUs", "nohz_full CPUs", "rcu_nocbs CPUs"} <= set(diff)
    assert diff["rcu_nocbs CPUs"] == ("none", "1-3")
    # Read again: the same id (nothing changed), and the axis reads it from a run row.
    assert read_host_state(untuned, [0, 1]) == a
    assert HOST_STATE_AXIS.value({"host_state": a}) == a["id"]


def test_one_sysctl_written_changes_exactly_that_setting(tmp_path):
    root_dir = make_sysroot(tmp_path / "u", tuned=False)
    root = SysRoot.open(root_dir)
    before = read_host_state(root, [1])
    (root_dir / "proc/sys/vm/stat_interval").write_text("3600\n")
    after = read_host_state(root, [1])
    assert differing(before["settings"], after["settings"]) == {"vm.stat_interval": ("1", "3600")}


@pytest.mark.skipif(os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2, reason="needs root and 2 CPUs")
def test_a_tasks_cpus_move_and_undo_restores_them_exactly(tmp_path):
    """tune's move of a task off the DuT's core: applied through host apply (undo file
    first), read back, undone to the exact CPUs it had; a task that has ended is left alone."""
    cpus = sorted(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.sched_setaffinity(child.pid, {cpus[0]})
        time.sleep(0.1)
        root = SysRoot.open(None)
        rel = f"proc/{child.pid}/task/{child.pid}"
        ch = Change("CPUs of the child", rel, str(cpus[1]), str(cpus[0]), str(cpus[0]), compare="cpulist",
                    kind="affinity", task_start=task_start(root, rel))  # fmt: skip
        plan = CorePlan((cpus[1],), (cpus[0],), "test")
        apply_changes(root, [ch], plan, tmp_path / "u.json")
        assert os.sched_getaffinity(child.pid) == {cpus[1]} and read_setting(root, ch) == str(cpus[1])
        undo(tmp_path / "u.json")
        assert os.sched_getaffinity(child.pid) == {cpus[0]}
        # Applied again, then the task ends: undo has nothing left to restore and says nothing is wrong.
        ch.status, ch.after = "planned", None
        apply_changes(root, [ch], plan, tmp_path / "v.json")
        child.kill()
        child.wait()
        undo(tmp_path / "v.json")
        assert not (tmp_path / "v.json").exists()
    finally:
        child.kill()
        child.wait()


def test_an_undo_file_naming_another_tasks_path_shape_is_refused(tmp_path):
    """An affinity change must name a thread's /proc directory: anything else is not apply's."""
    import json

    from lowtail.core.errors import UserError

    root_dir = make_sysroot(tmp_path / "u", tuned=False)
    doc = {
        "format": "lowtail-host-undo/1",
        "state": "applied",
        "sysroot": str(root_dir.resolve()),
        "plan": {},
        "changes": [
            {"setting": "x", "path": "proc/sys/kernel/core_pattern", "written": "1", "before": "0",
             "restore": "0", "kind": "affinity", "status": "applied"}
        ],
    }  # fmt: skip
    (tmp_path / "u.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match="not a setting"):
        undo(tmp_path / "u.json")


def test_tune_proposes_for_the_causes_explain_found_then_the_guidelines(tmp_path):
    """On an untuned fixture host: interrupts on the DuT's core → their IRQs sent to the
    housekeeping core (the cause named); then the guidelines not in place, each a remedies-table
    entry with its study; a preempting task that no longer exists is proposed nothing."""
    from lowtail.tune.proposals import GUIDELINE, propose

    root = SysRoot.open(make_sysroot(tmp_path / "u", tuned=False))
    plan = CorePlan((0,), (1, 2, 3), "test")
    causes = [
        {"kind": "interrupt", "role": "dut", "cpu": 1, "share": 0.4, "evidence": {"what": "eth0-TxRx-0"}},
        {"kind": "preemption", "role": "dut", "cpu": 1, "share": 0.3, "evidence": {"what": "gone", "pid": 4_000_000}},
    ]
    proposals = propose(root, plan, causes)
    ids = [p.id for p in proposals]
    assert ids[0] == "irq-affinity" and not any(i.startswith("move-pid") for i in ids)
    irq = proposals[0]
    assert irq.cause.startswith("interrupts on CPU 1: eth0-TxRx-0, 40 %")
    assert irq.changes and all(c.path.startswith("proc/irq/") and c.written in ("0", "1") for c in irq.changes)
    guidelines = [p for p in proposals if p.cause == GUIDELINE]
    assert {p.id for p in guidelines} >= {"vm.stat_interval", "thp"}
    assert all(p.remedy.source and p.changes for p in proposals)
    # Without causes, only the guidelines.
    assert all(p.cause == GUIDELINE for p in propose(root, plan, []))


@pytest.mark.parametrize(
    ("toml", "args", "message"),
    [
        (
            "[experiment]\nname = 'x'\nrepetitions = 3\n[traffic]\nrates = ['1000pps']\n",
            ["--only", "bogus"],
            "--only bogus: not a change tune proposes",
        ),
        ("[experiment]\nname = 'x'\n[traffic]\nrates = ['1000pps']\n", [], "set `repetitions = 3` or more"),
        # Two were taken, and no trial of two could ever be kept: compare calls nothing on fewer than 3.
        (
            "[experiment]\nname = 'x'\nrepetitions = 2\n[traffic]\nrates = ['1000pps']\n",
            [],
            "set `repetitions = 3` or more",
        ),
    ],
)
def test_bad_input_to_tune_is_one_line_and_exit_2_before_anything_is_measured(tmp_path, toml, args, message):
    import json

    (tmp_path / "t.toml").write_text(toml)
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "tune", str(tmp_path / "t.toml"), "--db", str(tmp_path / "t.duckdb"),
         "--json", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and json.loads(done.stdout)["exit_code"] == 2
    assert [line for line in done.stderr.splitlines() if line] == [
        f"lowtail: error: {json.loads(done.stdout)['error']}"
    ]
    assert message in done.stderr
    assert not (tmp_path / "t.duckdb").exists()  # nothing measured, nothing stored
