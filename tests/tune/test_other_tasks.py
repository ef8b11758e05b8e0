"""tune's `other-tasks` on the live /proc: every user task allowed on the DuT's core is moved
off it — a free task to its other CPUs, a task pinned there to the housekeeping cores — while
the kernel's threads and tune's own process stay; a task that ends between the proposal and
the apply is skipped (not a failed trial); undo gives each thread its CPUs back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402

from lowtail.host.apply import apply_changes, undo  # noqa: E402
from lowtail.host.plan import CorePlan  # noqa: E402
from lowtail.host.state import kernel_thread  # noqa: E402
from lowtail.host.sysroot import SysRoot, format_cpulist  # noqa: E402
from lowtail.tune.proposals import GUIDELINE, propose  # noqa: E402

pytestmark = [needs_root, pytest.mark.root, pytest.mark.host]

CPUS = sorted(os.sched_getaffinity(0))
if len(CPUS) < 2:
    pytest.skip("one CPU: there is no other core to move a task to", allow_module_level=True)
PLAN = CorePlan((CPUS[0],), (CPUS[-1],), "the test's plan")


def sleeper(cpus: set[int] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(["sleep", "300"])
    if cpus is not None:
        os.sched_setaffinity(proc.pid, cpus)
    return proc


@pytest.fixture
def sleepers():
    free, pinned = sleeper(), sleeper({PLAN.isolated[0]})
    try:
        yield free, pinned
    finally:
        for p in (free, pinned):
            p.kill()
            p.wait()


def other_tasks(root: SysRoot):
    return next(p for p in propose(root, PLAN, []) if p.id == "other-tasks")


def moved_pids(proposal) -> set[int]:
    return {int(c.path.split("/")[1]) for c in proposal.changes}


def test_every_user_task_on_the_duts_core_is_proposed_but_not_the_kernels_nor_tunes_own(sleepers):
    free, pinned = sleepers
    proposal = other_tasks(SysRoot.open(None))
    pids = moved_pids(proposal)
    assert {free.pid, pinned.pid} <= pids
    assert os.getpid() not in pids
    assert not [p for p in pids if kernel_thread(SysRoot.open(None), p) and p not in (free.pid, pinned.pid)]
    assert proposal.cause == GUIDELINE  # explain named no preempting task
    assert proposal.remedy.id == "move-tasks-off-dut-cores"
    assert all(c.optional and c.kind == "affinity" for c in proposal.changes)
    written = {int(c.path.split("/")[1]): c.written for c in proposal.changes}
    assert written[free.pid] == format_cpulist(sorted(set(CPUS) - set(PLAN.isolated)))  # its other CPUs
    assert written[pinned.pid] == str(PLAN.housekeeping[0])  # it had no other CPU
    assert "tasks" in proposal.setting and "threads" in proposal.setting  # one line, not hundreds


def test_a_preemption_explain_found_is_the_cause_named():
    cause = {"kind": "preemption", "role": "dut", "cpu": PLAN.isolated[0], "share": 0.8,
             "evidence": {"what": "hog (pid 4242, SCHED_FIFO 60)"}}  # fmt: skip
    proposal = next(p for p in propose(SysRoot.open(None), PLAN, [cause]) if p.id == "other-tasks")
    assert proposal.cause == f"preemption on CPU {PLAN.isolated[0]}: hog (pid 4242, SCHED_FIFO 60), 80 % of the tail"


def test_applied_then_undone_each_thread_has_its_cpus_back_and_an_ended_task_is_skipped(sleepers, tmp_path):
    free, pinned = sleepers
    ending = sleeper({PLAN.isolated[0]})
    init_before = os.sched_getaffinity(1)
    root = SysRoot.open(None)
    proposal = other_tasks(root)
    ending.kill()
    ending.wait()
    time.sleep(0.05)
    undo_file = tmp_path / "other.undo.json"
    try:
        changes = apply_changes(root, proposal.changes, PLAN, undo_file)
        assert os.sched_getaffinity(pinned.pid) == set(PLAN.housekeeping)
        assert PLAN.isolated[0] not in os.sched_getaffinity(free.pid)
        assert os.sched_getaffinity(0) == set(CPUS)  # the proposing process stayed
        gone = [c for c in changes if int(c.path.split("/")[1]) == ending.pid]
        assert gone and all(c.status == "refused" and c.note == "the task had ended" for c in gone)
    finally:
        undo(undo_file, force=True)
    assert os.sched_getaffinity(pinned.pid) == {PLAN.isolated[0]}
    assert os.sched_getaffinity(free.pid) == set(CPUS)
    assert os.sched_getaffinity(1) == init_before
