"""The kernel trace of one run: started on the roles' cores once the DuT and the
timestamper are up, stopped after the drain, parsed into the run's `trace.parquet`.

A run records on every host that carries a role: this one (the namespaces and interfaces
testbeds, and any local role) with a `LocalShell`, each other host of a `hosts` testbed
over its SSH connection (the site's `trace_shell`). One instance per host, set up one host
after the other, each on that host's roles' CPUs (the host's own core plan); each removal
registered before the instance exists (this host: the testbed's registry; another host: a
keeper leash there) so it happens however the run ends. The hosts' recordings are merged
into one file with a `host` column (trace/timeline.py). Where tracefs cannot be used on a
host the run goes on without that host's trace, and `TraceDocument.untraced` says which
roles, where and why; what explains the run then falls back to the /proc/interrupts
samples for them.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lowtail.trace import timeline
from lowtail.trace.document import POST_UNTRACED, OwnProcessDoc, RoleDoc, TraceDocument, UntracedDoc
from lowtail.trace.own import merged, own_processes
from lowtail.trace.protocol import CorePlan, RemoteTracedSite, TracedDut, TracedSite, TracedTestbed
from lowtail.trace.tracefs import LocalShell, Recorder, Shell, TraceUnavailable, buffer_kb_for

TRACE_FILE = "trace.parquet"
# The testbed's program names (testbed.spawn's first argument) and the role each plays.
_PROGRAM_ROLES = {
    "generator": "generator",
    "capture": "timestamper",
    "capture-pre": "timestamper",
    "capture-post": "timestamper",
}


@dataclass
class HostRecording:
    """One host's recording in progress, and the roles it holds."""

    recorder: Recorder
    roles: list[str]

    @property
    def shell(self) -> Shell:
        return self.recorder.shell


@dataclass
class RunTracer:
    """The recordings in progress (one per traced host) and the roles they will be read against."""

    recordings: list[HostRecording]
    roles: dict[str, RoleDoc]
    reason: str = ""
    untraced: list[UntracedDoc] = field(default_factory=list)
    # lowtail's own process tree as the trace started (read again before it stops).
    own: list[OwnProcessDoc] = field(default_factory=own_processes)

    def stop(self, testbed: TracedTestbed, run_dir: Path) -> TraceDocument:
        """Stop every recording, name each role's own tasks, write `trace.parquet` (all hosts'
        rows, each with its host); the document stored with the run."""
        self.own = merged(self.own, own_processes())
        if not self.recordings:
            return self._none(self.reason)
        _own_tasks(testbed, self.roles, {r.shell.label: r.shell for r in self.recordings})
        t0 = time.perf_counter()
        parts = []
        for r in self.recordings:  # one host after the other, as they were set up
            try:
                parts.append(timeline.build(r.recorder.stop(run_dir), local=r.shell.local))
            except TraceUnavailable as e:
                self._lost(r, str(e))
            except ValueError as e:
                self._lost(r, f"the trace of {r.shell.label} could not be read: {e}")
        if not parts:
            return self._none("; ".join(dict.fromkeys(u["reason"] for u in self.untraced)))
        table, facts = timeline.merge(parts)
        path = run_dir / TRACE_FILE
        timeline.write(table, facts, path)
        return TraceDocument(
            method="tracefs",
            path=str(path),
            roles=self.roles,
            untraced=self.untraced,
            info=asdict(facts),
            parse_s=round(time.perf_counter() - t0, 3),
            own_processes=self.own,
        )

    def _none(self, reason: str) -> TraceDocument:
        return TraceDocument(
            method="none", reason=reason, roles=self.roles, untraced=self.untraced, own_processes=self.own
        )

    def _lost(self, r: HostRecording, reason: str) -> None:
        self.untraced += [UntracedDoc(role=role, host=r.shell.label, reason=reason) for role in r.roles]

    def abandon(self) -> None:
        """Remove the instances without reading them (the run failed)."""
        for r in self.recordings:
            try:
                r.recorder.remove()
            except TraceUnavailable:
                pass


def role_cores(plan: CorePlan, dut_cpus: list[int] | None, hosts: dict[str, str]) -> dict[str, RoleDoc]:
    """Each role's host and cores from the run's core plan (the DuT's own, where it names
    them): a `hosts` testbed's plan holds each role's core on that role's host."""
    return {
        "dut": RoleDoc(host=hosts["dut"], cpus=sorted(dut_cpus or plan.dut), pids=[], comms=[]),
        "generator": RoleDoc(host=hosts["generator"], cpus=[plan.generator], pids=[], comms=["lowtail-gen"]),
        "timestamper": RoleDoc(host=hosts["timestamper"], cpus=[plan.capture], pids=[], comms=["lowtail-cap"]),
    }


def start_run_trace(
    testbed: TracedTestbed,
    plan: CorePlan,
    dut: TracedDut | None,
    duration_s: float,
    rate_pps: float,
    enabled: bool = True,
) -> RunTracer:
    """Start recording the roles' cores on every host that carries one, or say why not."""
    cpus = (dut.containment or {}).get("cpus") if dut is not None else None
    sites = {"dut": testbed.dut_site, "generator": testbed.generator.site, "timestamper": testbed.pre.site}
    roles = role_cores(plan, cpus if isinstance(cpus, list) else None, {r: s.label for r, s in sites.items()})
    untraced: list[UntracedDoc] = []
    if not testbed.dut_host_named:
        roles.pop("dut")
        untraced.append(UntracedDoc(role="dut", host="", reason="the DuT runs on no host of the testbed"))
    post = testbed.post.site
    if post is not testbed.pre.site:
        # explain's timestamper role is the PRE capture's core; a stall of a POST capture on a
        # host of its own would show as tail no trace explains, so the run says it was not seen.
        untraced.append(UntracedDoc(role="post timestamper", host=post.label, reason=POST_UNTRACED))
    if not enabled:
        return _none(roles, "tracing is off for this experiment ([trace] enabled = false)", untraced)
    by_host: dict[str, list[str]] = {}
    for role, doc in roles.items():
        by_host.setdefault(doc["host"], []).append(role)
    buffer_kb = buffer_kb_for(duration_s, rate_pps)
    vm = dut is not None and dut.virtualization == "kvm"
    recordings: list[HostRecording] = []
    # One host after the other: never two instances set up at once (see tracefs.LOCK_FILE).
    for index, (host, names) in enumerate(by_host.items()):
        try:
            recorder = _recorder(
                testbed,
                sites[names[0]],
                index,
                sorted({c for n in names for c in roles[n]["cpus"]}),
                buffer_kb,
                vm and "dut" in names,
            )
            recorder.start()
        except TraceUnavailable as e:
            reason = f"{e}; interrupts were sampled from /proc instead" if sites[names[0]].local else str(e)
            untraced += [UntracedDoc(role=n, host=host, reason=reason) for n in names]
            continue
        recordings.append(HostRecording(recorder, names))
    reason = "" if recordings else "; ".join(dict.fromkeys(u["reason"] for u in untraced))
    return RunTracer(recordings, roles, reason, untraced)


def _none(roles: dict[str, RoleDoc], reason: str, untraced: list[UntracedDoc]) -> RunTracer:
    every = untraced + [UntracedDoc(role=r, host=d["host"], reason=reason) for r, d in roles.items()]
    return RunTracer([], roles, reason, every)


def _recorder(
    testbed: TracedTestbed, site: TracedSite, index: int, cpus: list[int], buffer_kb: int, vm: bool
) -> Recorder:
    """A recorder on `site`'s host whose instance's removal is registered to happen however
    the run ends: this host's in the testbed's registry, another's by a keeper leash there."""
    registry = testbed.registry
    if registry is None:
        raise TraceUnavailable("this testbed keeps no registry to undo a trace instance with")
    tag = testbed.tag
    if site.local:
        if os.geteuid() != 0:
            raise TraceUnavailable("tracing the kernel needs root")
        return Recorder(
            LocalShell(site.label), tag, cpus, buffer_kb, register_undo=lambda argv: registry.add("undo", argv), vm=vm
        )
    if not isinstance(site, RemoteTracedSite):
        raise TraceUnavailable(f"{site.label}: lowtail reaches no shell there to trace with")
    remote: RemoteTracedSite = site

    def keep(argv: list[str]) -> None:
        from lowtail.core.errors import Failure

        try:
            remote.keep(f"trace-keeper-{index}", undo=[argv]).wait_started()
        except Failure as e:
            raise TraceUnavailable(f"holding the trace instance's removal on {remote.label}: {e}") from None

    # Hosts may share a kernel (containers, the tests' namespaces): each its own instance.
    return Recorder(remote.trace_shell(), f"{tag}h{index}", cpus, buffer_kb, register_undo=keep, vm=vm)


def _own_tasks(testbed: TracedTestbed, roles: dict[str, RoleDoc], shells: dict[str, Shell]) -> None:
    """Each role's programs on this testbed: their pids, every thread of those still running,
    their command names — read on the host each runs on (another host's pids are its own)."""
    for program in testbed.programs:
        name = program.name
        role = _PROGRAM_ROLES.get(name) or ("dut" if name.startswith("dut-") else None)
        if role is None or role not in roles:
            continue
        doc = roles[role]
        host = program.host
        if host is not None:  # a program on another host: its pid there, as its leash said
            pid = program.remote_pid
            shell = shells.get(host.label)
            if pid is None or shell is None or host.label != doc["host"]:
                continue
            threads, comm = _remote_task(shell, int(pid))
        else:
            pid = int(program.pid)
            threads, comm = _threads(pid), _comm(pid)
        doc["pids"] = sorted(set(doc["pids"]) | {int(pid)} | set(threads))
        if comm and comm not in doc["comms"]:
            doc["comms"].append(comm)


def _remote_task(shell: Shell, pid: int) -> tuple[list[int], str | None]:
    """A task's threads and command name on another host (nothing when it ended)."""
    try:
        out = shell.run(f"ls /proc/{pid}/task && echo comm $(cat /proc/{pid}/comm)", "reading a role's threads")
    except TraceUnavailable:
        return [], None
    lines = out.splitlines()
    said = [line[5:].strip() for line in lines if line.startswith("comm ")]
    return [int(line) for line in lines if line.strip().isdigit()], (said[0] or None) if said else None


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
