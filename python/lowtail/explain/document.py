"""An explanation as stored and printed: the tail, its causes, what could not be seen.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from lowtail.trace.document import ClockFacts, TraceHostSummary, UntracedDoc

# -- an explanation (`lowtail explain --json`, stored by store/explain.py) --------------------


class RemedyPlanDoc(TypedDict):
    """A remedy's cores on the host the run measured: its one core plan (host/plan.py) and the
    remedy's boot parameters with the plan's values ("isolcpus=1")."""

    housekeeping: list[int]
    isolated: list[int]
    boot: list[str]


class RemedyDoc(TypedDict):
    """A remedy as `lowtail explain --json` gives it."""

    id: str
    action: str
    boot_parameters: list[str]
    source: str
    plan: NotRequired[RemedyPlanDoc]  # its cores on the run's host, where the run stored its core plan


class Tail(TypedDict):
    """The packets counted as the tail: those above threshold_ns, chosen by rule; the run's
    floor (its lowest latency: no packet was delayed by more than its latency above it) and
    median (a tail packet's excess is its latency above it)."""

    threshold_ns: int
    packets: int
    rule: str
    floor_ns: NotRequired[int]
    median_ns: NotRequired[int]


# A cause's evidence: free-form, each kind of cause its own keys (`what`, `tail_packets`,
# `explained_by_chance`, `events`, and a task's `pid`, an overload's `r_max_pps`, …).
Evidence = dict[str, Any]


class CauseDoc(TypedDict):
    """One cause as `lowtail explain --json` gives it."""

    kind: str
    role: str
    host: str | None  # the host of the role's core (a run may be traced on several)
    cpu: int | None
    tail_packets: int  # the tail packets this cause keeps
    share: float  # tail_packets over the tail's packets: the one number every surface shows
    added_ns: int
    evidence: Evidence
    remedy: RemedyDoc


class UnseenDoc(TypedDict):
    """Something an explanation could not see (explain/unseen.py), with the share of the tail
    it could hold: the unexplained tail packets it could have delayed."""

    kind: str  # hypervisor | untraced | no_trace | vm_exits | interrupts
    what: str
    role: str | None
    host: str | None
    cpu: int | None
    share: float
    resolution: NotRequired[str]  # how finely it is sampled, where it is (steal, interrupt counts)
    sampling_interval_ns: NotRequired[int]
    tick_ns: NotRequired[int]
    steal_ns: NotRequired[int]


class HopShareDoc(TypedDict):
    """One hop's part in the tail: its median latency over the packets seen on every link,
    its mean over the tail packets, the mean it adds there above its median, the tail packets
    it added the most to, and that count's share of the tail packets some hop delayed."""

    hop: int
    name: str
    kind: str
    median_ns: int
    tail_mean_ns: float
    added_ns: float
    made_late: NotRequired[int]  # absent from explanations stored before the hops were counted by packet
    share: float


class HopsDoc(TypedDict):
    """The tail of a chain run split by hop (`lowtail explain`'s "hops")."""

    threshold_ns: int
    tail_packets: int
    hops: list[HopShareDoc]
    tail_hop: str | None  # the hop with the largest share, None when no hop added any
    said: str


class RateDoc(TypedDict):
    """One kind's rate on one CPU over the recording."""

    cpu: int
    kind: str
    description: str
    count: int
    rate_hz: float


class CorrelationDoc(TypedDict):
    """One kind on one CPU against the tail, period by period."""

    cpu: int
    kind: str
    r: float | None  # None: the count (or the tail) is the same in every period
    p: float | None  # one-sided, circular shifts
    periods: int
    significant: bool


class SampledDoc(TypedDict):
    """A source's interrupt samples as explain reads them (explain/sampled.py; stored in the explanation's `interrupts`)."""

    source: str
    period_ns: int
    periods: int  # sampling periods inside the packets' span
    dut_cpus: list[int] | None
    placed: str | None  # how the samples were placed in time when their file held no time
    rates: list[RateDoc]
    correlation: list[CorrelationDoc]
    resolution: str
    sentences: list[str]


class CoincidenceRow(TypedDict):
    """One interrupt kind against a run's spikes: in how many spikes' sampling intervals it
    incremented, against the share of all intervals in which it did (explain/coincidence.py)."""

    kind: str
    description: str
    spikes_with: int
    spikes: int
    interval_share: float
    count: int


class CoincidenceDoc(TypedDict):
    """One source's coincidence (host or guest) as stored in an explanation."""

    cpus: list[int] | None
    cpus_text: str
    spikes: int
    spike_times_ns: list[int]
    interval_ns: int
    rows: list[CoincidenceRow]
    sentences: list[str]


class ExplainTrace(TypedDict, total=False):
    """What an explanation says of the run's trace (explain/run.py): how it was recorded
    (`method` "tracefs", or "none" with the `reason`), the roles no host's trace covers, and
    with a trace file its size and hosts (`trace.document.TraceSummary`); for a VM DuT whether
    its exits could be in the trace (`vm_exits`, and why not)."""

    method: str
    reason: str | None
    # The roles no host's trace covers: an explanation stored before they had their host and
    # reason (the trace's own older shape, store/codec.py) names each by its role alone.
    untraced: list[UntracedDoc | str]
    path: str
    events: list[str]  # the kernel events recorded
    raw_bytes: int
    bytes_per_s: float | None
    intervals: int
    cpus: list[int]
    truncated_cpus: list[int]
    clock: ClockFacts
    hosts: list[TraceHostSummary]
    vm_exits: bool
    vm_exits_reason: str


class ExplainDocument(TypedDict, total=False):
    """What `lowtail explain --json` prints and the store keeps."""

    run: int
    version: int  # how it was worked out (explain/analysis.py's VERSION)
    tail: Tail
    causes: list[CauseDoc]
    unexplained_packets: int
    unexplained_share: float
    headline: str | None
    unseen: list[UnseenDoc]
    trace: ExplainTrace
    interrupt_coincidence: dict[str, CoincidenceDoc]  # by source: "host", "guest"
    interrupts: list[SampledDoc]  # the interrupt samples at their resolution (explain/sampled.py)
    notes: list[str]
    partial: bool
    hops: HopsDoc  # a chain run's tail split by hop (explain/hops.py)
