"""A stored run explained and the explanation stored: its matched series, its trace
(trace.parquet), its interrupt and steal-time samples read, `analysis.explain` run, the
interrupts read at their sampling resolution and their coincidence with the largest latencies
worked out, everything kept in the store (store/explain.py) for the report, `compare` and
`lowtail explain --json` to read.

Every run is explained right after it is stored (experiment/runner.py); an imported one the
first time it is asked for. `lowtail explain RUN` then answers from the store; it works the
explanation out again only when none is stored or the stored one was made by another version
of the method (`analysis.VERSION`). With `--above` another tail than the run's own is
explained on request and not stored: every surface shows the run's one explanation.

The database is held only to read and to write: the inputs are read in one short visit
(`read_inputs`), the database let go while the files are read and the explanation is worked
out (`compute`), and the result written in one transaction — a `compare` or a `show` started
meanwhile does not wait for it.

A stored file that is not what the run wrote — a trace or series that is a directory, a FIFO,
a device, or a file damaged or replaced — ends the command with one line naming the file and
what is wrong (a path that is not a regular file: exit 2; a damaged file: exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lowtail.analyze.document import ChainDocument
from lowtail.core.errors import Failure, UserError
from lowtail.core.files import special_kind
from lowtail.experiment.document import ExperimentHost, ExperimentRow, RunRow, TrafficDocument
from lowtail.explain.analysis import RunFacts, explain
from lowtail.explain.coincidence import SPIKES, coincidence_doc, run_cpus
from lowtail.explain.cores import Core
from lowtail.explain.document import CoincidenceDoc, ExplainDocument, ExplainTrace, SampledDoc, UnseenDoc
from lowtail.explain.hops import hops_of_tail
from lowtail.explain.packets import Packets
from lowtail.explain.sampled import dut_cpus_of, period_of, recording_facts, sampled_doc
from lowtail.host.plan import remedy_here, stored_plan
from lowtail.host.steal import STEAL_SOURCE
from lowtail.store import runs as runstore
from lowtail.store.analyses import worst_events
from lowtail.store.chains import run_chain
from lowtail.store.db import Store
from lowtail.store.errors import DamagedDatabase
from lowtail.store.explain import run_trace, save_explanation
from lowtail.store.host import run_interrupts
from lowtail.testbed.document import DutOptions, options_from_json
from lowtail.trace import timeline
from lowtail.trace.document import RoleDoc, TraceDocument
from lowtail.trace.own import task_ids
from lowtail.verdict import judge as verdicts

_SERIES_COLUMNS = ["id", "pre_ts_ns", "post_ts_ns", "latency_ns"]
Samples = list[tuple[int, int, str, int, int]]


@dataclass
class ExplainInputs:
    """What explaining a run needs from the database, read in one visit."""

    run: RunRow
    facts: RunFacts
    trace: TraceDocument
    series: str
    # The interrupt samples by source ("host", "guest"), the times of the largest latencies.
    samples: dict[str, Samples] = field(default_factory=dict)
    spikes: list[int] = field(default_factory=list)
    # The experiment's host metadata: the one core plan the remedies name cores from.
    host: ExperimentHost = field(default_factory=ExperimentHost)
    # A chain run's hops (analyze/hops.py): its tail is split by hop.
    chain: ChainDocument | None = None


def explain_run(store: Store, run_id: int, above: int | Fraction | None = None) -> ExplainDocument:
    """Explain one stored run's tail; the run's own tail (no `above`) is stored, replacing an
    earlier explanation. The database is let go while the explanation is worked out."""
    inputs = read_inputs(store, run_id)
    store.release()
    doc = compute(inputs, above)
    if above is None:
        save_explanation(store, doc)
    return doc


def read_inputs(store: Store, run_id: int) -> ExplainInputs:
    """Everything `compute` needs from the database (no file is read here)."""
    found = runstore.select_runs(store, run_ids=[run_id])
    if not found:
        raise UserError(f"{store.path}: no run with id {run_id}")
    run = found[0]
    series = run.get("series_path")
    if not series:
        raise UserError(f"run {run_id} has no matched series to explain (it was not analysed)")
    trace = run_trace(store, run_id) or TraceDocument()
    experiment = runstore.experiment(store, experiment_id_of(run))
    samples = {source: s for source in ("host", "guest") if (s := run_interrupts(store, run_id, source))}
    worst = [] if run["analysis_id"] is None else worst_events(store, run["analysis_id"])
    facts = _facts(run, experiment, trace, run_interrupts(store, run_id, STEAL_SOURCE))
    facts.steal_period_ns = period_of(samples.get("host") or [])
    return ExplainInputs(
        run=run,
        facts=facts,
        trace=trace,
        series=str(series),
        samples=samples,
        spikes=[t for t, _, _ in sorted(worst, key=lambda w: -w[1])[:SPIKES]],
        host=experiment["host"],
        chain=run_chain(store, run_id),
    )


def compute(inputs: ExplainInputs, above: int | Fraction | None = None) -> ExplainDocument:
    """The explanation of a run from its inputs and its files (no database)."""
    run, facts, trace = inputs.run, inputs.facts, inputs.trace
    packets = _packets(Path(inputs.series), facts.run_id)
    intervals, coverage, trace_summary, recorded = _trace(trace)
    if recorded is not None:
        _with_recording(facts, trace, recorded)
    if intervals is None:
        facts.no_trace = trace_summary.get("reason") or "the run was recorded without one"
    else:
        facts.untraced = list(trace.get("untraced") or [])
    vm = vm_exits(facts.virtualization, intervals is not None)
    if vm.get("vm_exits") is False and intervals is not None:
        facts.vm_exits_unseen = str(vm["vm_exits_reason"])
    doc = explain(packets, facts, intervals, coverage, above)
    _remedies_on_the_core_plan(doc, run, inputs.host)
    doc["trace"] = trace_summary | vm
    doc["interrupts"] = _sampled(inputs, packets, doc)
    if intervals is None:
        doc["unseen"] += _only_sampled(doc["interrupts"], doc.get("unexplained_share", 0.0))
    doc["interrupt_coincidence"] = _coincidence(inputs)
    if inputs.chain is not None:
        hops = hops_of_tail(inputs.chain, Path(inputs.series), doc["tail"]["threshold_ns"])
        if hops is not None:
            doc["hops"] = hops
    return doc


def run_id_of(run: RunRow) -> int:
    """A stored run's id (a plain analysis selected as a run has none, and is never explained)."""
    assert run["run_id"] is not None, "a stored run has an id"
    return run["run_id"]


def experiment_id_of(run: RunRow) -> int:
    """A stored run's experiment."""
    assert run["experiment_id"] is not None, "a stored run belongs to an experiment"
    return run["experiment_id"]


def _packets(path: Path, run_id: int) -> Packets:
    """The run's matched series, or one line on what is wrong with its file."""
    kind = special_kind(path)
    if kind is not None:
        raise UserError(f"{path}: run {run_id}'s matched series is {kind}, not a regular file")
    if not path.exists():
        raise UserError(f"run {run_id} has no matched series to explain ({path} is gone)")
    try:
        table = pq.ParquetFile(path).read(columns=_SERIES_COLUMNS)
        return packets_of(table)
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()
        raise Failure(
            f"{path}: run {run_id}'s matched series is damaged ({first[0][:200] if first else type(e).__name__}); "
            f"analyse its captures again, or import the run again"
        ) from None


def _trace(
    trace: TraceDocument,
) -> tuple[Any, dict[Core, tuple[int | None, int | None]], ExplainTrace, timeline.TraceFacts | None]:
    """The trace's intervals (None without a trace), each (host, cpu) core's coverage, its
    summary (with the roles no host's trace covers), and its recordings' facts."""
    summary: ExplainTrace = {
        "method": trace.get("method", "none"),
        "reason": trace.get("reason"),
        "untraced": [*(trace.get("untraced") or [])],
    }
    path = trace.get("path")
    if trace.get("method") != "tracefs" or not path or not Path(path).exists():
        if trace.get("method") == "tracefs":
            summary["reason"] = f"the trace file {path} is gone"
            summary["method"] = "none"
        return None, {}, summary, None
    try:
        intervals, info = timeline.read_checked(Path(path))
    except timeline.NotRegularFile as e:
        raise UserError(f"{path}: the run's trace {e}") from None
    except ValueError as e:
        raise Failure(
            f"{path}: the run's trace is damaged: it {e}; remove the file to explain the run without it"
        ) from None
    summary["path"] = path
    summary["events"] = info.events
    summary["raw_bytes"] = info.raw_bytes
    summary["bytes_per_s"] = round(info.raw_bytes / (info.duration_ns / 1e9), 1) if info.duration_ns else None
    summary["intervals"] = intervals.num_rows
    hosts = info.summary()
    summary["cpus"], summary["truncated_cpus"] = hosts["cpus"], hosts["truncated_cpus"]
    summary["clock"], summary["hosts"] = hosts["clock"], hosts["hosts"]
    return intervals, info.coverage(), summary, info


def _with_recording(facts: RunFacts, trace: TraceDocument, recorded: timeline.TraceFacts) -> None:
    """What the trace file says of its hosts, in the facts: the roles stored before they had
    hosts (host "", store/codec.py) are the one host's; the steal samples are of this host's
    roles; another host's events are widened by its clock's uncertainty; lowtail's own tasks
    are this host's."""
    if len(recorded.hosts) == 1:
        facts.roles = {r: doc | {"host": doc.get("host") or recorded.hosts[0].host} for r, doc in facts.roles.items()}
    here = {h.host for h in recorded.hosts if h.local}
    facts.steal_roles = [r for r, doc in facts.roles.items() if doc.get("host") in here]
    facts.widen_ns = recorded.widening_ns()
    own = trace.get("own_processes")
    if own is not None:  # a trace stored before lowtail named its own processes has none
        facts.own_tasks = {h: task_ids(own) for h in here}


def vm_exits(virtualization: str | None, traced: bool) -> ExplainTrace:
    """Whether a VM DuT's exits could be in the trace (`kvm_exit`/`kvm_entry`, traced under KVM
    only): said where they cannot, so an emulated run's trace does not read as one without exits."""
    if virtualization is None:
        return {}
    if virtualization != "kvm":
        return {
            "vm_exits": False,
            "vm_exits_reason": f"the VM ran under QEMU's emulator ({virtualization.upper()}), which leaves the "
            f"guest in no VM exits the host's kernel could trace; its vCPU threads' preemption on the host is "
            f"traced as for any task",
        }
    if not traced:
        return {"vm_exits": False, "vm_exits_reason": "the run has no kernel trace"}
    return {"vm_exits": True}


def _dut_options(run: RunRow) -> DutOptions | None:
    """The run's DuT options, typed (None for a kind lowtail did not start); stored options
    that are not of their kind's shape end the command as a damaged database."""
    try:
        return options_from_json(str(run["dut_kind"]), run.get("dut_config") or {})
    except ValueError as e:
        raise DamagedDatabase(
            f"the stored runs.dut_config of run {run_id_of(run)} is damaged ({e}); lowtail leaves it as it is"
        ) from None


def _facts(run: RunRow, experiment: ExperimentRow, trace: TraceDocument, steal: Samples) -> RunFacts:
    verdict = verdicts.stored_verdict(experiment["spec"])
    judgement = verdict.judge(run)
    roles = trace.get("roles") or _roles_from_plan(run)
    testbed = (experiment.get("spec") or {}).get("testbed")
    hosts_testbed = isinstance(testbed, dict) and testbed.get("kind") == "hosts"
    return RunFacts(
        run_id=run_id_of(run),
        rate_pps=float(run["rate_pps"]),
        burst=int(run["burst"] or 1),
        dut_kind=str(run["dut_kind"]),
        dut_config=_dut_options(run),
        dut_stats=run.get("dut_stats") or {},
        virtualization=run.get("virtualization"),
        budget_ns=None if run["calibration"] else verdict.budget_ns,
        budget_failed=judgement.status is verdicts.Status.FAIL and judgement.cause is verdicts.Cause.LATENCY,
        roles=roles,
        steal=steal,
        # Untraced on a hosts testbed: whose CPUs the samples are is unknown (the recording says, when there is one).
        steal_roles=[] if hosts_testbed else list(roles),
    )


def _remedies_on_the_core_plan(doc: ExplainDocument, run: RunRow, host: ExperimentHost) -> None:
    """Each remedy with the cores of the run's host's one core plan (host/plan.py), the ones
    `host plan`, `host audit` and `tune` name: its boot parameters with their values, and on a
    host too small to isolate the DuT's cores, which roles share them and why."""
    roles = (run.get("traffic") or {}).get("core_plan")
    if not roles or run.get("experiment_id") is None:
        return
    plan = stored_plan(roles, host)
    dut = (run.get("containment") or {}).get("cpus") or roles.get("dut") or []
    for cause in doc["causes"]:
        cause["remedy"] = remedy_here(cause["remedy"], plan, dut)


def _roles_from_plan(run: RunRow) -> dict[str, RoleDoc]:
    """The roles' cores from the run's stored core plan (a run recorded without a trace)."""
    plan = (run.get("traffic") or TrafficDocument()).get("core_plan")
    if not plan:
        return {}
    dut = (run.get("containment") or {}).get("cpus") or plan["dut"] or []
    return {
        "dut": RoleDoc(host="", cpus=list(dut), pids=[], comms=[]),
        "generator": RoleDoc(host="", cpus=[plan["generator"]], pids=[], comms=["lowtail-gen"]),
        "timestamper": RoleDoc(host="", cpus=[plan["capture"]], pids=[], comms=["lowtail-cap"]),
    }


def _sampled(inputs: ExplainInputs, packets: Packets, doc: ExplainDocument) -> list[SampledDoc]:
    """Each source's interrupt samples read against the tail at their own resolution."""
    if len(packets) == 0:
        return []
    tail = packets.pre_ns[packets.latency_ns > doc["tail"]["threshold_ns"]]
    out: list[SampledDoc] = []
    for source, samples in inputs.samples.items():
        facts = recording_facts(inputs.run, source)
        placed = (
            "the recording holds no times: its samples are placed every period from the first packet, so each "
            "count is placed within one period"
            if facts.get("placed_from_ns") is not None
            else None
        )
        cpus = dut_cpus_of(inputs.run, source, inputs.facts.roles)
        found: SampledDoc = sampled_doc(
            source, samples, tail, int(packets.pre_ns[0]), int(packets.pre_ns[-1]), cpus, placed
        )
        out.append(found)
    return out


def _only_sampled(sampled: list[SampledDoc], left: float) -> list[UnseenDoc]:
    """Without a trace the interrupts are seen only as counts per sampling period: what that
    resolution cannot attribute is part of what could not be seen."""
    return [
        UnseenDoc(
            kind="interrupts",
            what=f"the {s['source']}'s interrupts are known only as {s['resolution']}",
            role="dut",
            host=None,
            cpu=None,
            share=left,
            resolution=s["resolution"],
            sampling_interval_ns=int(s["period_ns"]),
        )
        for s in sampled
    ]


def _coincidence(inputs: ExplainInputs) -> dict[str, CoincidenceDoc]:
    """Which sampled interrupt kinds coincide with the run's largest latencies, per source."""
    out: dict[str, CoincidenceDoc] = {}
    for source, samples in inputs.samples.items():
        if source == "guest":
            cpus, text = None, "the guest's vCPUs"
        else:
            cpus, text = run_cpus(inputs.run)
        out[source] = coincidence_doc(inputs.spikes, samples, cpus, text)
    return out


def packets_of(table: Any) -> Packets:
    """The packets of a series table (the columns of `_SERIES_COLUMNS`)."""
    # Array.to_numpy, not ChunkedArray's: that one loads pandas (most of a second).
    return Packets.of(*(table.column(c).combine_chunks().to_numpy(zero_copy_only=False) for c in _SERIES_COLUMNS))
