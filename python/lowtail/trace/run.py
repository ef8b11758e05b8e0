"""The kernel trace of one run: started on the roles' cores once the DuT and the
timestamper are up, stopped after the drain, parsed into the run's `trace.parquet`.

A run records on this host when its DuT, generator or timestamper run here (the
namespaces and interfaces testbeds, the controller's roles of a hosts testbed); roles on
other hosts are not traced (`TraceDocument.untraced` says which). Where tracefs cannot be
used the run goes on without a trace, and the document says why: what explains the run
then falls back to the /proc/interrupts samples taken anyway.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from lowtail.testbed.cores import CoreRoles
from lowtail.trace import timeline
from lowtail.trace.tracefs import LocalShell, Recorder, TraceUnavailable, buffer_kb_for

TRACE_FILE = "trace.parquet"
# The testbed's program names (testbed.spawn's first argument) and the role each plays.
_PROGRAM_ROLES = {
    "generator": "generator",
    "capture": "timestamper",
    "capture-pre": "timestamper",
    "capture-post": "timestamper",
}


class RoleDoc(TypedDict):
    """A role's cores and the tasks that are its own (by pid and by command name)."""

    cpus: list[int]
    pids: list[int]
    comms: list[str]


class TraceDocument(TypedDict, total=False):
    """What a run stores of its trace: how it was recorded (`method` "tracefs", or "none"
    with `reason`), the file, the roles, and the recording's facts (timeline.TraceInfo)."""

    method: str
    reason: str
    path: str
    roles: dict[str, RoleDoc]
    untraced: list[str]
    info: dict[str, Any]
    parse_s: float


@dataclass
class RunTracer:
    """A recording in progress and the roles it will be read against."""

    recorder: Recorder | None
    roles: dict[str, RoleDoc]
    reason: str = ""
    untraced: list[str] = field(default_factory=list)

    def stop(self, testbed: Any, run_dir: Path) -> TraceDocument:
        """Stop the recording, name each role's own tasks, write `trace.parquet`; the document stored with the run."""
        if self.recorder is None:
            return TraceDocument(method="none", reason=self.reason, roles=self.roles, untraced=self.untraced)
        _own_tasks(testbed, self.roles)
        try:
            recording = self.recorder.stop(run_dir)
        except TraceUnavailable as e:
            return TraceDocument(method="none", reason=str(e), roles=self.roles, untraced=self.untraced)
        import time

        t0 = time.perf_counter()
        try:
            table, info = timeline.build(recording)
        except ValueError as e:
            return TraceDocument(method="none", reason=f"the trace could not be read: {e}", roles=self.roles)
        path = run_dir / TRACE_FILE
        timeline.write(table, info, path)
        return TraceDocument(
            method="tracefs",
            path=str(path),
            roles=self.roles,
            untraced=self.untraced,
            info=asdict(info),
            parse_s=round(time.perf_counter() - t0, 3),
        )

    def abandon(self) -> None:
        """Remove the instance without reading it (the run failed)."""
        if self.recorder is not None:
            try:
                self.recorder.remove()
            except TraceUnavailable:
                pass


def role_cores(plan: CoreRoles, dut_cpus: list[int] | None) -> dict[str, RoleDoc]:
    """Each role's cores from the run's core plan (the DuT's own, where it names them)."""
    return {
        "dut": RoleDoc(cpus=sorted(dut_cpus or plan.dut), pids=[], comms=[]),
        "generator": RoleDoc(cpus=[plan.generator], pids=[], comms=["lowtail-gen"]),
        "timestamper": RoleDoc(cpus=[plan.capture], pids=[], comms=["lowtail-cap"]),
    }


def start_run_trace(
    testbed: Any,
    plan: CoreRoles,
    dut: Any,
    duration_s: float,
    rate_pps: float,
    enabled: bool = True,
) -> RunTracer:
    """Start recording the roles' cores on this host, or say why not."""
    cpus = (dut.containment or {}).get("cpus") if dut is not None else None
    roles = role_cores(plan, cpus if isinstance(cpus, list) else None)
    local = {
        "generator": testbed.generator.site.local,
        "timestamper": testbed.pre.site.local,
        "dut": testbed.dut_site.local,
    }
    untraced = [role for role, here in local.items() if not here]
    for role in untraced:
        roles.pop(role)
    if not enabled:
        return RunTracer(None, roles, "tracing is off for this experiment ([trace] enabled = false)", untraced)
    if not roles:
        return RunTracer(None, roles, "no role of this run runs on this host", untraced)
    if os.geteuid() != 0:
        return RunTracer(None, roles, "tracing the kernel needs root", untraced)
    registry = getattr(testbed, "registry", None)
    if registry is None:
        return RunTracer(None, roles, "this testbed keeps no registry to undo a trace instance with", untraced)
    recorder = Recorder(
        LocalShell(),
        testbed.tag if hasattr(testbed, "tag") else registry.tag,
        sorted({c for r in roles.values() for c in r["cpus"]}),
        buffer_kb_for(duration_s, rate_pps),
        register_undo=lambda argv: registry.add("undo", argv),
        vm=getattr(dut, "virtualization", None) == "kvm",
    )
    try:
        recorder.start()
    except TraceUnavailable as e:
        return RunTracer(None, roles, f"{e}; interrupts were sampled from /proc instead", untraced)
    return RunTracer(recorder, roles, "", untraced)


def _own_tasks(testbed: Any, roles: dict[str, RoleDoc]) -> None:
    """Each role's programs on this testbed: their pids, every thread of those still running, their command names."""
    for program in getattr(testbed, "programs", []):
        name = getattr(program, "name", "")
        role = _PROGRAM_ROLES.get(name) or ("dut" if name.startswith("dut-") else None)
        if role is None or role not in roles:
            continue
        pid = int(program.pid)
        doc = roles[role]
        doc["pids"] = sorted(set(doc["pids"]) | {pid} | set(_threads(pid)))
        comm = _comm(pid)
        if comm and comm not in doc["comms"]:
            doc["comms"].append(comm)


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
