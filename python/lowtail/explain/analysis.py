"""Why the tail is what it is: a run's tail packets matched against what ran on each
role's core while each was in flight, and against what the packets themselves show;
causes ranked by the share of tail packets each explains and the latency it added.

The kinds (docs/explain.md says how each is detected):

    preemption          another task took the DuT's core (evidence: the task)
    interrupt           a hardware interrupt or an IPI vector on the DuT's core
    softirq             softirq work on the DuT's core
    aliasing            a periodic interrupt beating with the constant-rate traffic
    generator_stall     the generator's core was taken, or it left packets late: a
                        measurement artefact, not the DuT
    timestamper_stall   the same on the timestamper's own core: a measurement artefact
    shared_core         the testbed's own generator or timestamper took the DuT's core,
                        which the core plan gives them too: the measurement's layout, not
                        the DuT (a measurement artefact)
    hypervisor          the hypervisor took a role's CPU (steal time) while packets nothing
                        else explains flew: a measurement artefact (explain/steal.py)
    lowtail_process     one of lowtail's own processes (the command, its interrupt sampler,
                        a helper: trace/own.py) took the DuT's core: the measurement, not
                        another task (a measurement artefact)
    overload            offered rate at or above the DuT's R_max: a standing queue
    batching            packets held until the rest of their batch was processed
    virtualization      the VM DuT's vCPU threads preempted on the host, or its exits

A suspect becomes a cause only when it explains more tail packets than it would by chance
(the same windows moved elsewhere in the run, or its delay's distribution over all packets)
by a margin (`significant`), and at least `CAUSE_FLOOR` of them; each tail packet is then
given to one cause (`_attribute`). What no cause takes is the unexplained share.

The evidence adds up by construction: the delay a cause accounts for in a packet is at most
the packet's latency above the run's floor (its lowest latency: no packet was faster, so no
packet was delayed by more), however long the event itself ran; a packet delayed by several
overlapping events belongs to the cause with the largest such delay (on a tie, the one whose
event held its window longer, then the first ranked); each cause keeps a whole number of tail
packets, its share is that number over the tail's, and the unexplained share is the packets
no cause keeps over the same — so the shares and the unexplained share add up to 1, and every
surface shows these stored numbers.

A role's cores are (host, cpu) pairs (`cores.Core`): a run traced on several hosts keeps
each host's CPUs apart. On another host's cores a packet's window is widened by that
host's clock uncertainty (`RunFacts.widen_ns`): its events are placed on the packets' clock
only within its markers' `date` bracket, and the hosts' clocks are assumed synchronised.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pyarrow as pa

from lowtail.core.units import format_ns, format_rate
from lowtail.explain import packets as pk
from lowtail.explain.asked import VERSION, rule_of
from lowtail.explain.candidates import CAUSE_FLOOR, Candidate, by_chance, chance_seed
from lowtail.explain.cores import (
    Core,
    Suspect,
    TraceView,
    descendants,
    restricted,
    subset,
    suspects,
    task_label,
    waiting,
)
from lowtail.explain.document import CauseDoc, Evidence, ExplainDocument, Tail
from lowtail.explain.steal import hypervisor_candidate
from lowtail.explain.unseen import Unseeable, unseen_entries
from lowtail.explain.words import OWN_PROCESS, headline
from lowtail.host.remedies import remedy_for
from lowtail.models.aliasing import beat
from lowtail.testbed.document import DutCounters, DutOptions, LowtailFwdOptions, TestpmdOptions, VmOptions
from lowtail.trace.document import RoleDoc, UntracedDoc

ROLES = ("dut", "generator", "timestamper", "host", "lowtail")
EVIDENCE_EVENTS = 5


@dataclass
class RunFacts:
    """What the analysis needs of a stored run besides its packets and trace."""

    run_id: int
    rate_pps: float
    burst: int
    dut_kind: str
    dut_config: DutOptions | None  # None: a run of a kind lowtail did not start (imported, a plain analysis)
    dut_stats: DutCounters
    virtualization: str | None
    budget_ns: int | None
    budget_failed: bool
    roles: dict[str, RoleDoc]
    trace_reason: str = ""
    notes: list[str] = field(default_factory=list)
    # Per host: how much a packet's window on its cores is widened (its clock's uncertainty).
    widen_ns: dict[str, int] = field(default_factory=dict)
    # The run's steal-time samples (t_ns, cpu, kind, delta_ns, interval_ns): host/steal.py.
    steal: list[tuple[int, int, str, int, int]] = field(default_factory=list)
    # The roles on this host, whose CPUs the steal samples are of (None: every role).
    steal_roles: list[str] | None = None
    # How often the sampler read steal (the interrupt samples' period); 0: from the steal rows.
    steal_period_ns: int = 0
    # lowtail's own tasks (pids and thread ids) per host during the run (trace/own.py); None
    # for a run recorded before they were (then only the roles' programs are known as such).
    own_tasks: dict[str, set[int]] | None = None
    # What could not be seen, besides steal: roles whose cores were not traced ({role, host,
    # reason}), why there is no trace at all, why a VM's exits cannot be in it.
    untraced: list[UntracedDoc] = field(default_factory=list)
    no_trace: str | None = None
    vm_exits_unseen: str | None = None


def tail_threshold(p: pk.Packets, facts: RunFacts, above: int | Fraction | None) -> Tail:
    """The latency above which packets are the tail: `above` (a latency, or a percentile),
    else the budget when the run fails it, else p99.9."""
    if isinstance(above, Fraction):
        return Tail(threshold_ns=p.percentile(above), packets=0, rule=rule_of(above))
    if isinstance(above, int):
        return Tail(threshold_ns=above, packets=0, rule=rule_of(above))
    if facts.budget_ns is not None and facts.budget_failed:
        return Tail(threshold_ns=facts.budget_ns, packets=0, rule=f"above the budget, {format_ns(facts.budget_ns)}")
    return Tail(threshold_ns=p.percentile(pk.DEFAULT_TAIL), packets=0, rule="above p99.9")


@dataclass
class Attribution:
    """Which cause each tail packet was given, and the delay it accounts for there: what the
    document's shares count (its `causes` index, -1 for none; the bounded delay, 0 for none)."""

    packet_id: np.ndarray
    latency_ns: np.ndarray
    floor_ns: int
    cause: np.ndarray
    delay_ns: np.ndarray


def explain(
    p: pk.Packets,
    facts: RunFacts,
    intervals: pa.Table | None,
    coverage: dict[Core, tuple[int | None, int | None]],
    above: int | Fraction | None = None,
) -> ExplainDocument:
    """The causes of a run's tail (see the module's docstring)."""
    return attributed(p, facts, intervals, coverage, above)[0]


def attributed(
    p: pk.Packets,
    facts: RunFacts,
    intervals: pa.Table | None,
    coverage: dict[Core, tuple[int | None, int | None]],
    above: int | Fraction | None = None,
) -> tuple[ExplainDocument, Attribution]:
    """The explanation, and the attribution of each tail packet it counts."""
    doc = ExplainDocument(run=facts.run_id, version=VERSION, notes=list(facts.notes), partial=False)
    none = Attribution(*(np.zeros(0, dtype=np.int64),) * 2, 0, *(np.zeros(0, dtype=np.int64),) * 2)
    if len(p) == 0:
        doc["tail"] = Tail(threshold_ns=0, packets=0, rule="no packets")
        return _without_causes(doc, facts), none
    tail = tail_threshold(p, facts, above)
    in_tail = p.latency_ns > tail["threshold_ns"]
    tail["packets"] = int(in_tail.sum())
    floor = int(p.latency_ns.min())
    median = p.percentile(Fraction(1, 2))
    tail["floor_ns"], tail["median_ns"] = floor, median
    doc["tail"] = tail
    if not in_tail.any():
        return _without_causes(doc, facts), dataclasses.replace(none, floor_ns=floor)
    excess = np.maximum(1, p.latency_ns[in_tail] - median)
    # No packet was delayed by more than its latency above the fastest packet's.
    room = p.latency_ns[in_tail] - floor
    late_all = pk.lateness(p, facts.rate_pps, facts.burst)
    bunched, due_since = pk.bunching(p, late_all)
    trace = TraceView.of(intervals) if intervals is not None else None
    candidates = _packet_candidates(p, facts, in_tail, excess, late_all, bunched, trace)
    if trace is not None:
        candidates += _core_candidates(p, facts, in_tail, excess, due_since, trace, coverage)
        uncovered = _uncovered(p, in_tail, facts, coverage)
        if uncovered:
            doc["partial"] = True
            doc["notes"].append(
                f"{uncovered:,} tail packets fall after a core's trace ended (its buffer was full): "
                f"they cannot be explained by what ran there"
            )
    # What nothing else explains may be the hypervisor's: time it took no trace records.
    taken = np.zeros(excess.size, dtype=bool)
    for c in candidates:
        if c.significant(excess):
            taken |= c.hits(excess)
    here = _steal_roles(facts)
    hypervisor = (
        None
        if here is None
        else hypervisor_candidate(p, facts.steal, here, in_tail, excess, due_since, taken, facts.steal_period_ns)
    )
    if hypervisor is not None:
        candidates.append(hypervisor)
    for c in candidates:
        c.bound(room)
    causes, owner, delay = _attribute(candidates, excess, p, in_tail, facts.rate_pps)
    unexplained = owner < 0
    doc["causes"] = causes
    doc["unexplained_packets"] = int(unexplained.sum())
    doc["unexplained_share"] = doc["unexplained_packets"] / tail["packets"]
    doc["headline"] = headline(causes)
    window = (due_since[in_tail], p.post_ns[in_tail])
    doc["unseen"] = unseen_entries(_unseeable(facts), here, window, excess, unexplained, tail["packets"])
    return doc, Attribution(p.id[in_tail], p.latency_ns[in_tail], floor, owner, delay)


def _without_causes(doc: ExplainDocument, facts: RunFacts) -> ExplainDocument:
    """A run with no tail to explain: no cause, nothing unexplained; what could not be seen still said."""
    doc["causes"], doc["unexplained_packets"], doc["unexplained_share"], doc["headline"] = [], 0, 0.0, None
    empty = np.zeros(0, dtype=np.int64)
    doc["unseen"] = unseen_entries(_unseeable(facts), _steal_roles(facts), (empty, empty), empty, empty.astype(bool), 0)
    return doc


def _unseeable(facts: RunFacts) -> Unseeable:
    return Unseeable(facts.steal, facts.steal_period_ns, facts.untraced, facts.no_trace, facts.vm_exits_unseen)


def _steal_roles(facts: RunFacts) -> dict[str, RoleDoc] | None:
    """The roles whose CPUs the steal samples are of (this host's); None when every role is on
    another host, whose steal this host's samples are not."""
    here = {r: d for r, d in facts.roles.items() if facts.steal_roles is None or r in facts.steal_roles}
    return None if facts.roles and not here else here


# -- candidates from the packets alone ------------------------------------------------------------


def _packet_candidates(
    p: pk.Packets,
    facts: RunFacts,
    in_tail: np.ndarray,
    excess: np.ndarray,
    late_all: np.ndarray,
    bunched: np.ndarray,
    trace: TraceView | None,
) -> list[Candidate]:
    out = []
    gen_cpu = _first_cpu(facts, "generator")
    out.append(
        Candidate(
            "generator_stall",
            "generator",
            gen_cpu,
            "late departures",
            bunched[in_tail],
            pk.expected_by_chance(bunched, excess),
            {
                "what": "the generator left these packets late against its constant-rate schedule",
                "late_packets": int((late_all > pk.LATE_NS).sum()),
                "largest_lateness_ns": int(late_all.max()) if late_all.size else 0,
            },
            host=_host(facts, "generator"),
        )
    )
    r_max, overload_evidence = _overload(p, facts, trace)
    if overload_evidence is not None:
        out.append(
            Candidate(
                "overload",
                "dut",
                _first_cpu(facts, "dut"),
                "standing queue",
                pk.backlog(p)[in_tail],
                None,
                overload_evidence,
                host=_host(facts, "dut"),
            )
        )
    batch = _batch_size(facts)
    if batch > 1:
        timeout_us = facts.dut_config.batch_timeout_us if isinstance(facts.dut_config, LowtailFwdOptions) else None
        timeout_ns = timeout_us * 1000 if timeout_us is not None else None
        wait, sizes = pk.batch_wait(p, _t_cpu_ns(facts), timeout_ns)
        out.append(
            Candidate(
                "batching",
                "dut",
                _first_cpu(facts, "dut"),
                f"batches of up to {batch}",
                wait[in_tail],
                None,
                {
                    "what": f"packets held until their batch (up to {batch}) was processed",
                    "batch": batch,
                    "largest_departure_group": int(sizes.max()),
                    "tail_groups_median": int(np.median(sizes[in_tail])),
                },
                host=_host(facts, "dut"),
            )
        )
    return out


def _batch_size(facts: RunFacts) -> int:
    """The DuT's batch: its configuration's, or the largest batch it reports having taken."""
    configured = _configured_batch(facts.dut_config)
    taken = (facts.dut_stats.get("batch_size") or {}).get("max") if isinstance(facts.dut_stats, dict) else None
    if isinstance(taken, (int, float)) and taken <= 1:
        return 1
    return configured


def _configured_batch(options: DutOptions | None) -> int:
    """The packets a DuT's configuration takes at once: lowtail-fwd's (on a host or in a
    guest) batch, testpmd's burst; 1 for a kind that forwards packet by packet."""
    if isinstance(options, (LowtailFwdOptions, VmOptions)):
        return options.batch
    if isinstance(options, TestpmdOptions):
        return options.burst
    return 1


def _t_cpu_ns(facts: RunFacts) -> float | None:
    """The DuT's own busy time per packet (its statistics: busy fraction × duration / received)."""
    stats = facts.dut_stats if isinstance(facts.dut_stats, dict) else {}
    received, busy, duration = stats.get("received"), stats.get("busy_fraction"), stats.get("duration_ns")
    if isinstance(received, int) and received > 0 and isinstance(busy, (int, float)) and isinstance(duration, int):
        return float(busy * duration / received)
    return None


def _overload(p: pk.Packets, facts: RunFacts, trace: TraceView | None) -> tuple[float | None, Evidence | None]:
    """R_max of the DuT (NOMS 2020: (1 s − d_Σ) / t_CPU, t_CPU from the DuT's own busy time per
    packet, d_Σ the interrupt time per second on its core from the trace) and, when the offered
    rate reaches it or a standing queue holds most packets, the evidence of overload."""
    stats = facts.dut_stats if isinstance(facts.dut_stats, dict) else {}
    r_max = None
    t_cpu = _t_cpu_ns(facts)
    if t_cpu is not None and t_cpu > 0:
        r_max = max(0.0, (1e9 - _interrupt_ns_per_s(trace, facts)) / t_cpu)
    queued = pk.backlog(p)
    standing = float(np.mean(queued > 0))
    dropped = stats.get("dropped") if isinstance(stats.get("dropped"), int) else 0
    over = (r_max is not None and facts.rate_pps >= 0.95 * r_max) or (
        r_max is None and standing >= 0.5 and p.percentile(Fraction(1, 2)) >= 10 * p.percentile(Fraction(1, 100))
    )
    if not over:
        return r_max, None
    evidence: Evidence = {
        "what": f"offered {format_rate(facts.rate_pps)}"
        + (f" against an R_max of {format_rate(r_max)}" if r_max is not None else " into a queue that never emptied"),
        "rate_pps": facts.rate_pps,
        "r_max_pps": round(r_max, 1) if r_max is not None else None,
        "t_cpu_ns": round(t_cpu, 1) if t_cpu is not None else None,
        "standing_queue_share": round(standing, 4),
        "dut_dropped": dropped,
    }
    return r_max, evidence


def _interrupt_ns_per_s(trace: TraceView | None, facts: RunFacts) -> float:
    """d_Σ: the time per second the DuT's core spent in interrupt handlers, from the trace."""
    if trace is None or trace.rows == 0:
        return 0.0
    cpus = set(_role(facts, "dut").get("cpus") or [])
    start, end = trace.start, trace.end
    chosen = (
        np.isin(trace.cpu, list(cpus))
        & (trace.host.codes == trace.host.code(_host(facts, "dut")))
        & trace.of_kind("vector", "irq")
    )
    if not chosen.any() or not cpus:
        return 0.0
    span = (start.max() - start.min()) / 1e9 or 1.0
    return float((end[chosen] - start[chosen]).sum() / span / len(cpus))


# -- candidates from the trace ----------------------------------------------------------------------


def _role(facts: RunFacts, role: str) -> RoleDoc:
    """A role's cores and own tasks (none for a role the run did not have)."""
    return facts.roles.get(role) or RoleDoc(host="", cpus=[], pids=[], comms=[])


def _first_cpu(facts: RunFacts, role: str) -> int | None:
    cpus = _role(facts, role).get("cpus") or []
    return int(cpus[0]) if cpus else None


def _host(facts: RunFacts, role: str) -> str:
    """The host a role ran on ("" in a run stored before roles had hosts: its one host)."""
    return str(_role(facts, role).get("host") or "")


def _primary_roles(facts: RunFacts) -> dict[Core, str]:
    """Whose each traced core is: the DuT's first, then the generator's, then the timestamper's."""
    owner: dict[Core, str] = {}
    for role in ("dut", "generator", "timestamper"):
        for cpu in _role(facts, role).get("cpus") or []:
            owner.setdefault((_host(facts, role), int(cpu)), role)
    return owner


def _core_candidates(
    p: pk.Packets,
    facts: RunFacts,
    in_tail: np.ndarray,
    excess: np.ndarray,
    due_since: np.ndarray,
    trace: TraceView,
    coverage: dict[Core, tuple[int | None, int | None]],
) -> list[Candidate]:
    owner = _primary_roles(facts)
    own_pids = {core: set(_role(facts, role).get("pids") or []) for core, role in owner.items()}
    own_comms = {core: set(_role(facts, role).get("comms") or []) for core, role in owner.items()}
    out = []
    waits = {
        core: waiting(trace, core, own_pids[core], own_comms[core]) for core, role in owner.items() if role == "dut"
    }
    found = suspects(trace, set(owner), own_pids, own_comms)
    if facts.own_tasks is not None:
        # What lowtail's own processes started during the run is the measurement's too.
        own = {host: descendants(trace, host, tasks) for host, tasks in facts.own_tasks.items()}
        facts = dataclasses.replace(facts, own_tasks=own)
    for s in [part for one in found for part in _lowtail_apart(one, owner[one.core], facts)]:
        role = owner[s.core]
        wait = waits.get(s.core)
        # Another host's events are on the packets' clock within its clock's uncertainty.
        widen = facts.widen_ns.get(s.host, 0)
        pre, post = p.pre_ns[in_tail] - widen, p.post_ns[in_tail] + widen
        if s.kind == "task" and wait is not None:
            # Another task delays the DuT only while the DuT waits for its core.
            s = restricted(s, *wait)
            if s.start.size == 0:
                continue
        # On the generator's core the window opens when the earliest packet still ahead of
        # this one in the DuT was due: what took the core then bunched them (pk.bunching).
        a = due_since[in_tail] - widen if role == "generator" else pre
        delay = s.overlap(a, post)
        first, last = coverage.get(s.core, (None, None))
        span = (first if first is not None else int(p.pre_ns[0]), last if last is not None else int(p.post_ns[-1]))
        chance = by_chance(s.overlap, a, post, span, chance_seed(p), excess)
        kind, out_role = _kind_of(s, role, facts)
        out.append(
            Candidate(
                kind,
                out_role,
                s.cpu,
                _suspect_name(s),
                delay,
                chance,
                _suspect_facts(s),
                suspect=s,
                windows=(a, post),
                host=s.host,
            )
        )
    return out


def _lowtail_apart(s: Suspect, role: str, facts: RunFacts) -> list[Suspect]:
    """A task suspect on a DuT core split into lowtail's own tasks and the others: one command
    name ("python", "lowtail") may be this run's own process and another's, and only the other
    is a task that preempted the DuT."""
    own = facts.own_tasks.get(s.host) if facts.own_tasks is not None else None
    if s.kind != "task" or role != "dut" or not own:
        return [s]
    mine = np.isin(s.pid, list(own))
    if not mine.any() or mine.all():
        if mine.all():
            s.own = True
        return [s]
    parts = [subset(s, mine), subset(s, ~mine)]
    parts[0].own = True
    return parts


def _kind_of(s: Suspect, role: str, facts: RunFacts) -> tuple[str, str]:
    """The cause kind of a suspect on a core of this role, and the role the cause is given."""
    if role == "generator":
        return "generator_stall", "generator"
    if role == "timestamper":
        return "timestamper_stall", "timestamper"
    if s.kind == "vmexit":
        return "virtualization", "host"
    if s.kind == "task":
        sharing = _testbed_role_of(s, facts)
        if sharing is not None:
            return "shared_core", sharing
        if s.own:
            return OWN_PROCESS, "lowtail"
        return ("virtualization", "host") if facts.virtualization else ("preemption", "dut")
    if s.kind == "softirq":
        return "softirq", "dut"
    return ("aliasing" if s.periodic() is not None else "interrupt"), "dut"


def _testbed_role_of(s: Suspect, facts: RunFacts) -> str | None:
    """The measuring role (generator, timestamper) whose own program a task suspect on the
    DuT's core is, by pid or command name, on the same host; None for any other task."""
    pids = set(np.unique(s.pid).tolist())
    for role in ("timestamper", "generator"):
        own = _role(facts, role)
        if _host(facts, role) != s.host:
            continue  # another host's pids and programs are not this core's
        if s.name in (own.get("comms") or []) or pids & set(own.get("pids") or []):
            return role
    return None


def _suspect_facts(s: Suspect) -> Evidence:
    """What a remedy needs of a suspect besides its name: a task's pid (`lowtail tune` moves it)."""
    if s.kind != "task":
        return {}
    values, counts = np.unique(s.pid, return_counts=True)
    return {"pid": int(values[np.argmax(counts)])}


def _suspect_name(s: Suspect) -> str:
    if s.kind == "task":
        values, counts = np.unique(s.pid, return_counts=True)
        pid = int(values[np.argmax(counts)])
        prio = int(s.prio[np.flatnonzero(s.pid == pid)[0]])
        return task_label(s.name, pid, prio)
    if s.kind == "vector" and any(d == "TLB shootdown" for d in s.detail):
        return f"{s.name} (TLB shootdowns)"
    if s.kind == "vmexit":
        return f"VM exit reason {s.name}"
    if s.kind == "softirq":
        return f"{s.name} softirq"
    return s.name


def _uncovered(
    p: pk.Packets, in_tail: np.ndarray, facts: RunFacts, coverage: dict[Core, tuple[int | None, int | None]]
) -> int:
    """Tail packets in flight after some role core's trace had ended."""
    owned = _primary_roles(facts)
    ends = [last for core, (_, last) in coverage.items() if last is not None and core in owned]
    if not ends:
        return 0
    return int((p.post_ns[in_tail] > min(ends)).sum())


# -- attribution ------------------------------------------------------------------------------------


def _attribute(
    candidates: list[Candidate], excess: np.ndarray, p: pk.Packets, in_tail: np.ndarray, rate_pps: float
) -> tuple[list[CauseDoc], np.ndarray, np.ndarray]:
    """Each tail packet given to one significant cause: the one whose delay in it (bounded by
    its latency above the floor) is the largest; on a tie, the one whose event held the
    packet's window longer; then the first. Causes that keep less than `CAUSE_FLOOR` are
    dropped and their packets handed on. The causes in rank order, and per tail packet the
    index of the cause it was given (-1: none) and the delay that cause accounts for in it."""
    live = [c for c in candidates if c.significant(excess)]
    n = excess.size
    explained = np.zeros(n, dtype=bool)
    while live:
        best, explained = _winners(live, excess)
        counts = np.array([int(((best == i) & explained).sum()) for i in range(len(live))])
        keep = counts >= CAUSE_FLOOR * n
        if keep.all():
            break
        live = [c for c, k in zip(live, keep) if k]
    owner = np.full(n, -1, dtype=np.int64)
    delay = np.zeros(n, dtype=np.int64)
    if not live:
        return [], owner, delay
    causes = []
    ids, sent, lat = p.id[in_tail], p.pre_ns[in_tail], p.latency_ns[in_tail]
    for i, c in enumerate(live):
        mine = np.flatnonzero((best == i) & explained)
        causes.append(
            CauseDoc(
                kind=c.kind,
                role=c.role,
                host=c.host,
                cpu=c.cpu,
                tail_packets=int(mine.size),
                share=mine.size / n,
                added_ns=int(np.median(c.delay[mine])),
                evidence=_evidence(c, mine, ids, sent, lat, rate_pps),
                remedy=remedy_for(c.kind, c.name).doc(),
            )
        )
    rank = sorted(range(len(live)), key=lambda i: (-causes[i]["tail_packets"], -causes[i]["added_ns"]))
    for position, i in enumerate(rank):
        mine = (best == i) & explained
        owner[mine] = position
        delay[mine] = live[i].delay[mine]
    return [causes[i] for i in rank], owner, delay


def _winners(live: list[Candidate], excess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per tail packet, the index of the cause it belongs to, and whether any explains it."""
    bounded = np.stack([np.where(c.hits(excess), c.delay, 0) for c in live])
    raw = np.stack([np.where(c.hits(excess), c.raw_delay, 0) for c in live])
    top = bounded.max(axis=0)
    # Among the causes with the largest bounded delay, the one with the largest raw delay;
    # argmax takes the first of equals.
    best = np.argmax(np.where(bounded == top, raw, -1), axis=0)
    return best, top > 0


def _evidence(
    c: Candidate, mine: np.ndarray, ids: np.ndarray, sent: np.ndarray, lat: np.ndarray, rate_pps: float
) -> Evidence:
    """What ran (its name), how many tail packets it explains against chance, and the
    largest cases: each packet beside the event that delayed it."""
    ev: Evidence = {"what": c.name} | c.evidence
    ev["tail_packets"] = int(mine.size)
    ev["explained_by_chance"] = None if c.expected is None else round(c.expected, 2)
    largest = mine[np.argsort(-c.delay[mine], kind="stable")[:EVIDENCE_EVENTS]]
    events = []
    for k in largest:
        item: Evidence = {  # one of the largest cases: the packet, and the event that delayed it
            "packet_id": int(ids[k]),
            "sent_ns": int(sent[k]),
            "latency_ns": int(lat[k]),
            "delay_ns": int(c.delay[k]),
        }
        if c.suspect is not None and c.windows is not None:
            j = c.suspect.largest_in(int(c.windows[0][k]), int(c.windows[1][k]))
            if j is not None:
                item["event"] = {
                    "start_ns": int(c.suspect.start[j]),
                    "duration_ns": int(c.suspect.end[j] - c.suspect.start[j]),
                    "what": task_label(c.suspect.name, int(c.suspect.pid[j]), int(c.suspect.prio[j]))
                    if c.suspect.kind == "task"
                    else c.name,
                }
        elif c.event_in is not None and c.windows is not None:
            found = c.event_in(int(c.windows[0][k]), int(c.windows[1][k]))
            if found is not None:
                item["event"] = found
        events.append(item)
    ev["events"] = events
    if c.suspect is not None:
        durations = c.suspect.end - c.suspect.start
        ev["occurrences"] = int(durations.size)
        ev["median_duration_ns"] = int(np.median(durations)) if durations.size else 0
        period = c.suspect.periodic()
        if period is not None:
            ev["period_ns"] = int(period)
            if c.kind == "aliasing":
                ev["beat"] = beat(rate_pps, 1e9 / period)
    return ev
