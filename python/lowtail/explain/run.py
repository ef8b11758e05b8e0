"""A stored run explained and the explanation stored: its matched series, its trace
(trace.parquet), its interrupt and steal-time samples read, `analysis.explain` run, the interrupt
coincidence worked out, everything kept in the store (store/explain.py) for the report,
`compare` and `lowtail explain --json` to read.

Every run is explained right after it is stored (experiment/runner.py); `lowtail explain
RUN` explains it again (with `--above`, against another threshold).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from lowtail import verdict as verdicts
from lowtail.documents import ExplainDocument
from lowtail.errors import UserError
from lowtail.explain.analysis import RunFacts, explain
from lowtail.explain.coincidence import SPIKES, coincidence_doc, run_cpus
from lowtail.explain.cores import Core
from lowtail.explain.packets import Packets
from lowtail.host.plan import remedy_here, stored_plan
from lowtail.host.steal import STEAL_SOURCE
from lowtail.store import runs as runstore
from lowtail.store.analyses import worst_events
from lowtail.store.db import Store
from lowtail.store.explain import run_trace, save_explanation
from lowtail.store.host import run_interrupts
from lowtail.trace import timeline

_SERIES_COLUMNS = ["id", "pre_ts_ns", "post_ts_ns", "latency_ns"]


def explain_run(store: Store, run_id: int, above: int | Fraction | None = None) -> ExplainDocument:
    """Explain one stored run's tail and store the explanation (replacing an earlier one)."""
    found = runstore.select_runs(store, run_ids=[run_id])
    if not found:
        raise UserError(f"{store.path}: no run with id {run_id}")
    run = found[0]
    series = run.get("series_path")
    if not series or not Path(series).exists():
        raise UserError(
            f"run {run_id} has no matched series to explain"
            + (f" ({series} is gone)" if series else " (it was not analysed)")
        )
    table = pq.read_table(series, columns=_SERIES_COLUMNS)
    packets = Packets.of(*(table.column(c).to_numpy() for c in _SERIES_COLUMNS))
    trace = run_trace(store, run_id) or {}
    intervals, coverage, trace_summary, trace_facts = _trace(trace)
    facts = _facts(store, run, trace, trace_facts)
    if intervals is None:
        facts.notes.append(
            "no kernel trace: "
            + (trace.get("reason") or "the run was recorded without one")
            + "; causes come from the packets, the /proc/interrupts samples and the steal time alone"
        )
    if intervals is not None:
        for u in trace.get("untraced") or []:
            if isinstance(u, dict):  # (a run stored before hosts were traced lists role names)
                where = f" on {u['host']}" if u["host"] else ""
                facts.notes.append(
                    f"the {u['role']}'s cores{where} were not traced ({u['reason']}): what ran there is not among "
                    f"the causes"
                )
    doc = explain(packets, facts, intervals, coverage, above)
    _remedies_on_the_core_plan(doc, store, run)
    doc["trace"] = trace_summary | vm_exits(facts.virtualization, intervals is not None)
    if doc["trace"].get("vm_exits") is False:
        doc["notes"].append(f"VM exits are not visible: {doc['trace']['vm_exits_reason']}")
    doc["interrupt_coincidence"] = _coincidence(store, run)
    with store.transaction():
        save_explanation(store, dict(doc))
    return doc


def _trace(
    trace: dict[str, Any],
) -> tuple[Any, dict[Core, tuple[int | None, int | None]], dict[str, Any], timeline.TraceFacts | None]:
    """The trace's intervals (None without a trace), each (host, cpu) core's coverage, its
    summary (with the roles no host's trace covers), and its recordings' facts."""
    summary: dict[str, Any] = {
        "method": trace.get("method", "none"),
        "reason": trace.get("reason"),
        "untraced": trace.get("untraced") or [],
    }
    path = trace.get("path")
    if trace.get("method") != "tracefs" or not path or not Path(path).exists():
        if trace.get("method") == "tracefs":
            summary["reason"] = f"the trace file {path} is gone"
            summary["method"] = "none"
        return None, {}, summary, None
    intervals, info = timeline.read(Path(path))
    summary.update(
        path=path,
        events=info.events,
        raw_bytes=info.raw_bytes,
        bytes_per_s=round(info.raw_bytes / (info.duration_ns / 1e9), 1) if info.duration_ns else None,
        intervals=intervals.num_rows,
        **info.summary(),
    )
    return intervals, info.coverage(), summary, info


def vm_exits(virtualization: str | None, traced: bool) -> dict[str, Any]:
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


def _facts(
    store: Store, run: Mapping[str, Any], trace: dict[str, Any], recorded: timeline.TraceFacts | None
) -> RunFacts:
    experiment = runstore.experiment(store, run["experiment_id"])
    verdict = verdicts.stored_verdict(experiment["spec"])
    judgement = verdict.judge(run)
    roles = trace.get("roles") or _roles_from_plan(run)
    if recorded is not None and len(recorded.hosts) == 1:
        # Roles stored before they had hosts were all on the one host traced.
        roles = {r: {"host": recorded.hosts[0].host} | doc for r, doc in roles.items()}
    return RunFacts(
        run_id=int(run["run_id"]),
        rate_pps=float(run["rate_pps"]),
        burst=int(run["burst"] or 1),
        dut_kind=str(run["dut_kind"]),
        dut_config=run.get("dut_config") or {},
        dut_stats=run.get("dut_stats") or {},
        virtualization=run.get("virtualization"),
        budget_ns=None if run["calibration"] else verdict.budget_ns,
        budget_failed=judgement.status is verdicts.Status.FAIL and judgement.cause is verdicts.Cause.LATENCY,
        roles=roles,
        widen_ns=recorded.widening_ns() if recorded is not None else {},
        steal=run_interrupts(store, int(run["run_id"]), STEAL_SOURCE),
        steal_roles=_steal_roles(experiment, roles, recorded),
    )


def _steal_roles(
    experiment: Mapping[str, Any], roles: Mapping[str, Mapping[str, Any]], recorded: timeline.TraceFacts | None
) -> list[str]:
    """The roles whose cores are this host's, where the steal samples were read: another
    host's CPU 1 is not this machine's CPU 1."""
    if recorded is not None:
        here = {h.host for h in recorded.hosts if h.local}
        return [r for r, doc in roles.items() if doc.get("host") in here]
    hosts_testbed = ((experiment.get("spec") or {}).get("testbed") or {}).get("kind") == "hosts"
    return [] if hosts_testbed else list(roles)  # untraced on a hosts testbed: whose is unknown


def _remedies_on_the_core_plan(doc: ExplainDocument, store: Store, run: Mapping[str, Any]) -> None:
    """Each remedy with the cores of the run's host's one core plan (host/plan.py), the ones
    `host plan`, `host audit` and `tune` name: its boot parameters with their values, and on a
    host too small to isolate the DuT's cores, which roles share them and why."""
    roles = (run.get("traffic") or {}).get("core_plan")
    if not roles or run.get("experiment_id") is None:
        return
    plan = stored_plan(roles, runstore.experiment(store, run["experiment_id"]).get("host") or {})
    dut = (run.get("containment") or {}).get("cpus") or roles.get("dut") or []
    for cause in doc["causes"]:
        cause["remedy"] = remedy_here(cause["remedy"], plan, dut)


def _roles_from_plan(run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The roles' cores from the run's stored core plan (a run recorded without a trace)."""
    plan = (run.get("traffic") or {}).get("core_plan") or {}
    if not plan:
        return {}
    dut = (run.get("containment") or {}).get("cpus") or plan.get("dut") or []
    return {
        "dut": {"cpus": list(dut), "pids": [], "comms": []},
        "generator": {"cpus": [plan["generator"]], "pids": [], "comms": ["lowtail-gen"]},
        "timestamper": {"cpus": [plan["capture"]], "pids": [], "comms": ["lowtail-cap"]},
    }


def _coincidence(store: Store, run: Mapping[str, Any]) -> dict[str, Any]:
    """Which sampled interrupt kinds coincide with the run's largest latencies, per source."""
    out: dict[str, Any] = {}
    worst = [] if run["analysis_id"] is None else worst_events(store, run["analysis_id"])
    spikes = [t for t, _, _ in sorted(worst, key=lambda w: -w[1])[:SPIKES]]
    for source in ("host", "guest"):
        samples = run_interrupts(store, run["run_id"], source)
        if not samples:
            continue
        if source == "guest":
            cpus, text = None, "the guest's vCPUs"
        else:
            cpus, text = run_cpus(run)
        out[source] = coincidence_doc(spikes, samples, cpus, text)
    return out


def latency_above(text: str) -> int | Fraction:
    """`--above`'s value: a percentile ("p99", "p99.99", "99.9%") or a latency ("500us")."""
    from lowtail.percentiles import quantile_of_percent
    from lowtail.units import parse_duration_ns

    t = text.strip()
    if t[:1] in ("p", "P") or t.endswith("%"):
        try:
            q = quantile_of_percent(t.lstrip("pP").rstrip("%").strip())
        except (ValueError, ZeroDivisionError):
            q = Fraction(-1)
        if not 0 < q < 1:
            raise UserError(f"--above {text!r}: a percentile is between 0 and 100 (p99.9)")
        return q
    try:
        return int(parse_duration_ns(t))
    except UserError:
        raise UserError(f"--above {text!r}: give a percentile (p99.9) or a latency (500us)") from None


def packets_of(table: Any) -> Packets:
    """The packets of a series table (the columns of `_SERIES_COLUMNS`)."""
    return Packets.of(*(np.asarray(table.column(c).to_numpy()) for c in _SERIES_COLUMNS))
