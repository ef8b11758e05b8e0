"""What was measured around a run's captures by the testbed: the programs' statistics, the testbed's sites, points and clocks, the core plan.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import Any, Required, TypedDict

# A DuT kind's open maps, documented free-form: each kind (testbed/duts) owns its keys. Its
# options as the experiment file gave them, passed through to the kind (`dut_config`); how it
# was contained (`containment`: "mode" and the kind's facts); what it counted of itself
# (`dut_stats`). The store keeps and hands them back as they are.
DutOptions = dict[str, Any]
Containment = dict[str, Any]
DutCounters = dict[str, Any]


class HistogramBin(TypedDict):
    """One bin of a histogram (latency, or the gaps between packets of PRE or POST)."""

    lo_ns: int
    hi_ns: int
    count: int


# -- what the native programs say of a run (`runs.generator`, `runs.capture`) ------------------
# Each program writes its statistics as JSON (--stats-json); a run stores them as written. They
# are `total=False`: a run whose program wrote nothing stores {}, and readers also read runs
# stored by older versions, so every reader asks for what it needs with .get().


class TimeSummary(TypedDict):
    """A distribution of times (ns) a program measured: lowtail-net's `summary::Summary`."""

    samples: int
    min: int
    mean: float
    p50: int
    p90: int
    p99: int
    p99_9: int
    p99_99: int
    max: int


class CpuWait(TypedDict):
    """Time a program was runnable but off its core, and its share of the run."""

    waited_ns: int
    share: float
    involuntary_switches: int


class DevCounters(TypedDict):
    """An interface's counters over the run (from inside its namespace)."""

    rx_packets: int
    rx_dropped: int
    tx_packets: int
    tx_dropped: int


class GeneratorStatistics(TypedDict, total=False):
    """What lowtail-gen says of its traffic: the plan, what it sent and how close to schedule."""

    program: str
    version: str
    iface: str
    netns: str | None
    rate_pps: int
    burst: int
    frame_size: int
    flows: int
    flow_weights: list[int]  # each flow's weight (--flow-weights); absent when round robin
    udp_dst_port: int
    match_share: float | None  # the share of frames carrying the IPS rule's marker (--match-share)
    tx_method: str
    qdisc_bypass: bool
    cpu: int | None
    scheduling: str
    planned: int
    attempted: int
    sent: int
    send_errors: int
    first_send_error: str | None
    first_id: int
    last_id: int | None
    start_monotonic_ns: int
    start_realtime_ns: int
    planned_duration_ns: int
    duration_ns: int
    achieved_rate_pps: float
    kept_up: bool
    interrupted: bool
    final_lag_ns: int
    last_on_time_ns: int | None  # None when no burst left on time (a rate the generator cannot reach)
    max_lag_ns: int
    late_bursts: int
    bursts: int
    burst_interval_ns: float
    pacing_error_ns: TimeSummary | None  # how late each burst left
    pacing_error_histogram: list[HistogramBin]
    inter_departure_ns: TimeSummary | None
    inter_departure_histogram: list[HistogramBin]
    send_call_ns: TimeSummary | None
    iface_counters: DevCounters | None
    cpu_wait: CpuWait | None


class CaptureInterfaceStatistics(TypedDict, total=False):
    """What lowtail-cap says of one interface it stamped (PRE or POST)."""

    iface: str
    netns: str | None
    out: str
    file_bytes: int
    timestamp_source: str | None  # hardware | software | mixed, as observed per frame
    hardware_timestamps_supported: bool
    phc_index: int | None
    frames: int
    bytes: int
    frames_by_timestamp: dict[str, int]  # hardware, software, ring
    skipped_other_direction: int
    drops: int
    kernel_drops: int  # older versions
    kernel: dict[str, int]  # packets, drops, ring_freezes
    iface_counters: DevCounters | None
    first_ts_ns: int | None
    last_ts_ns: int | None


class CaptureStatistics(TypedDict, total=False):
    """What lowtail-cap says of a run's capture: its interfaces, frames and drops. Two
    timestampers (PRE and POST on different hosts) are merged into one document with
    each kept in full under `timestampers` (`experiment.measure`)."""

    program: str
    version: str
    interfaces: list[CaptureInterfaceStatistics]
    frames: int
    drops: int
    kernel_drops: int  # older versions
    complete: bool
    host_backlog_drops: int | None
    snaplen: int
    timestamps_requested: str
    cpu: int | None
    scheduling: str
    duration_ns: int
    stopped_by: str | None
    timestampers: list[CaptureStatistics]


# -- what a run records of its testbed and clocks (`runs.testbed`) ------------------------------


class TimeSources(TypedDict):
    """What disciplines a host's clocks: its PTP hardware clocks (ptpN → name), the time
    daemons running, and the PTP port state where it was read."""

    clocks: dict[str, str]
    daemons: list[str]
    port_state: str | None


class SiteIdentity(TypedDict):
    """A host a role runs on: its name and boot id (one boot id, one kernel clock)."""

    host: str
    boot_id: str | None
    ptp: TimeSources


class ClockSide(TypedDict):
    """One side's clock (`clocks.clock_side`): where it was stamped and how."""

    host: str
    boot_id: str | None
    interface: str
    timestamp_source: str | None  # hardware | software | mixed, as the timestamper saw it
    phc_index: int | None
    process: str
    ptp: TimeSources | None


class ClockJudgement(TypedDict):
    """Whether PRE and POST read one clock (`clocks.judge`), why, and both sides."""

    same: bool
    why: str
    pre: ClockSide
    post: ClockSide


class PointDocument(TypedDict):
    """An interface a role used (`testbed.sites.Point`): its host, name, namespace and MAC."""

    host: str
    interface: str
    netns: str | None
    mac: str


class DutSide(TypedDict):
    """Where the DuT was, on a testbed of hosts: its host and interfaces."""

    host: str | None
    interfaces: list[str]


class TestbedDocument(TypedDict, total=False):
    """The testbed a run was measured on, as stored with it: its kind and, as far as the kind
    has them, its points, the DuT's side and the clocks of PRE and POST. An imported run's
    records its captures' paths (as `pre` and `post`) and the axes read from their names."""

    kind: Required[str]
    generator: PointDocument
    pre: PointDocument | str
    post: PointDocument | str
    dut: DutSide  # a testbed of hosts
    dut_interfaces: list[str]  # a testbed of this host's interfaces
    vlans: list[int]  # one VLAN id per link over one physical loop (interfaces testbed)
    dst_mac: str
    clocks: ClockJudgement
    axes: dict[str, object]  # an imported run: axis → value, as its spec's pattern read them
    # An imported run's interrupt recordings by source ("guest", "host"): what was read of each
    # (experiment/irq_recordings.py's facts, the file, the DuT's CPU in it).
    interrupts: dict[str, dict[str, object]]


# -- the hosts an experiment ran on (`experiments.host`) -----------------------------------------


class CorePlanDocument(TypedDict):
    """The core each program of a run got (`testbed.cores.CoreRoles`)."""

    housekeeping: int
    generator: int
    capture: int
    dut: list[int]
