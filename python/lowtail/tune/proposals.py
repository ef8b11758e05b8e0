"""What `lowtail tune` proposes: the run-time remedies that fit what `explain` found in the
measured tail, each as host/apply.py changes with the cause it targets, then the studies'
general run-time guidelines not in place yet (no cause of their own: they are measured like
the others and kept only when they help).

The remedies are host/remedies.py's entries (one table for `host plan`, `explain` and
`tune`); the changes are host/apply.py's (`planned_changes` for the guidelines, task
affinities for the tasks explain named), so every change here has its undo.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lowtail.core.errors import UserError
from lowtail.host.apply import Change, planned_changes, read_setting, task_start
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan
from lowtail.host.remedies import REMEDIES, Remedy
from lowtail.host.state import kernel_thread
from lowtail.host.sysroot import SysRoot, format_cpulist, parse_cpulist

# A cause of no particular packet: a guideline of the studies.
GUIDELINE = "guideline (no cause of its own in the measured tail)"


@dataclass
class Proposal:
    """One change `tune` may try: an id (`--only`), the remedy it is, the cause it targets,
    and the host/apply.py changes that make it."""

    id: str
    remedy: Remedy
    cause: str
    changes: list[Change] = field(default_factory=list)
    summary: str = ""  # what it changes in words, when listing every change would be too long

    @property
    def setting(self) -> str:
        """What it changes, in words."""
        return self.summary or "; ".join(c.setting for c in self.changes)


def propose(root: SysRoot, plan: CorePlan, causes: Sequence[Mapping[str, Any]]) -> list[Proposal]:
    """The run-time changes worth trying on this host for these causes (explain's, of the
    runs measured before): targeted ones first, then the guidelines; only what is not in
    place already."""
    host = Host(root)
    out = _move_tasks(root, plan, causes) + _move_other_tasks(root, plan, causes) + _move_irqs(host, plan, causes)
    out += _guidelines(host, plan)
    return [p for p in out if p.changes]


def _share(c: Mapping[str, Any]) -> str:
    return f"{100 * float(c.get('share') or 0):.0f} % of the tail"


def _move_tasks(root: SysRoot, plan: CorePlan, causes: Iterable[Mapping[str, Any]]) -> list[Proposal]:
    """Tasks explain found taking a DuT core (preemption) moved to the housekeeping cores."""
    out: dict[int, Proposal] = {}
    for c in causes:
        pid = (c.get("evidence") or {}).get("pid")
        if c.get("kind") != "preemption" or not isinstance(pid, int) or pid in out:
            continue
        if c.get("cpu") not in plan.isolated:
            # The DuT's core is a housekeeping core of this host's plan (a host too small to
            # isolate it, `plan.shared` says why): moving the task would only send it to an
            # isolated core, another role's.
            continue
        what = (c.get("evidence") or {}).get("what", f"pid {pid}")
        proposal = Proposal(
            f"move-pid-{pid}",
            REMEDIES["move-tasks-off-dut-cores"],
            f"preemption on CPU {c.get('cpu')}: {what}, {_share(c)}",
        )
        proposal.changes = _thread_moves(root, plan, pid, what.split(" (", 1)[0])
        out[pid] = proposal
    return list(out.values())


def _move_other_tasks(root: SysRoot, plan: CorePlan, causes: Iterable[Mapping[str, Any]]) -> list[Proposal]:
    """Every user task allowed on a core the one core plan isolates (the DuT's; on a host too
    small to isolate it, the generator's) moved off it: each thread to its other CPUs, or
    to the housekeeping cores when it has none (a task pinned there on purpose included: that
    is what isolating the core means). Not tune's own process (the runs' core plan is read
    from the measuring process's CPUs) and not the kernel's threads. Each move is optional: a
    task that ends before it is moved is skipped, never a failed trial."""
    # Only a preemption on a core this moves tasks off is its cause (on a host whose DuT shares
    # a housekeeping core, a preemption there is not one this can remedy).
    preempting = [
        c for c in causes if c.get("kind") == "preemption" and c.get("role") == "dut" and c.get("cpu") in plan.isolated
    ]
    if preempting:
        first = preempting[0]
        what = (first.get("evidence") or {}).get("what", "another task")
        cause = f"preemption on CPU {first.get('cpu')}: {what}, {_share(first)}"
    else:
        cause = GUIDELINE
    proposal = Proposal("other-tasks", REMEDIES["move-tasks-off-dut-cores"], cause)
    mine = os.getpid()
    for pid_text in sorted((p for p in root.listdir("proc") if p.isdigit()), key=int):
        pid = int(pid_text)
        if pid == mine or kernel_thread(root, pid):  # the kernel's threads: isolcpus at boot
            continue
        comm = (root.read(f"proc/{pid}/comm") or "").strip() or f"pid {pid}"
        proposal.changes += _thread_moves(root, plan, pid, comm, optional=True)
    tasks = len({c.path.split("/")[1] for c in proposal.changes})  # proc/PID/task/TID
    cores = format_cpulist(sorted(plan.isolated))
    proposal.summary = (
        f"CPUs of every other task allowed on CPU {cores} ({tasks} tasks, {len(proposal.changes)} threads): "
        "their other CPUs, else the housekeeping cores"
    )
    return [proposal]


def _thread_moves(root: SysRoot, plan: CorePlan, pid: int, name: str, optional: bool = False) -> list[Change]:
    """The affinity changes that take each thread of `pid` off the DuT's cores."""
    out: list[Change] = []
    for tid in sorted(root.listdir(f"proc/{pid}/task"), key=lambda t: int(t) if t.isdigit() else -1):
        if not tid.isdigit():
            continue
        rel = f"proc/{pid}/task/{tid}"
        probe = Change("", rel, "", None, None, kind="affinity", task_start=task_start(root, rel), optional=optional)
        now = read_setting(root, probe)
        if now is None or not set(parse_cpulist(now)) & set(plan.isolated):
            continue
        target = sorted(set(parse_cpulist(now)) - set(plan.isolated)) or list(plan.housekeeping)
        probe.setting = f"CPUs of {name} (pid {pid}, thread {tid})"
        probe.written, probe.before, probe.restore = format_cpulist(target), now, now
        probe.compare = "cpulist"
        out.append(probe)
    return out


def _move_irqs(host: Host, plan: CorePlan, causes: Iterable[Mapping[str, Any]]) -> list[Proposal]:
    """Device interrupts explain found on a DuT core sent to the housekeeping cores."""
    named = [c for c in causes if c.get("kind") == "interrupt" and c.get("role") == "dut"]
    if not named:
        return []
    changes = [c for c in planned_changes(host, plan, cpuset=None) if c.path.startswith("proc/irq/")]
    first = named[0]
    cause = f"interrupts on CPU {first.get('cpu')}: {(first.get('evidence') or {}).get('what', '')}, {_share(first)}"
    return [Proposal("irq-affinity", REMEDIES["irqs-off-dut-cores"], cause, changes)]


# The guidelines, by the host/apply.py setting names they group.
_GUIDELINES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("vm.stat_interval", "vmstat-interval", ("vm.stat_interval",)),
    ("timer_migration", "timer-migration", ("kernel.timer_migration",)),
    ("thp", "no-transparent-huge-pages", ("transparent huge pages", "KSM")),
    ("governor", "performance-governor", ("frequency governor", "idle state")),
)


def _guidelines(host: Host, plan: CorePlan) -> list[Proposal]:
    planned = planned_changes(host, plan, cpuset=None)
    out = []
    for pid, remedy, words in _GUIDELINES:
        changes = [c for c in planned if any(w in c.setting for w in words)]
        out.append(Proposal(pid, REMEDIES[remedy], GUIDELINE, changes))
    return out


def check_ids(ids: Sequence[str]) -> None:
    """Refuse `--only` ids that no proposal can have, before anything is measured."""
    known = {g[0] for g in _GUIDELINES} | {"irq-affinity", "other-tasks"}
    bad = [i for i in ids if i not in known and not re.fullmatch(r"move-pid-[0-9]+", i)]
    if bad:
        raise UserError(
            f"--only {', '.join(bad)}: not a change tune proposes (ids: move-pid-PID, {', '.join(sorted(known))}; "
            "a dry run lists this host's)"
        )


def select(proposals: list[Proposal], only: Sequence[str] | None) -> list[Proposal]:
    """The proposals `--only` names (all when it names none); an unknown id is refused by the caller."""
    if not only:
        return proposals
    return [p for p in proposals if p.id in only]
