"""The documents of what was measured around a run's captures, typed once: the native
programs' statistics (what lowtail-gen and lowtail-cap write with --stats-json), the testbed
and the clocks a run was measured on, the energy the host used, and the noise probe of a
host's cores (`lowtail noise --json`). Like `documents` (which types the analysis, run,
comparison and model documents and builds on this module), these are `TypedDict`s: they are
JSON written by one module, stored, and read by others, and typing them changes nothing at
run time. This module imports nothing of lowtail."""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict


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
    udp_dst_port: int
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
    last_on_time_ns: int
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
    dst_mac: str
    clocks: ClockJudgement
    axes: dict[str, object]  # an imported run: axis → value, as its spec's pattern read them
    # An imported run's interrupt recordings by source ("guest", "host"): what was read of each
    # (experiment/irq_recordings.py's facts, the file, the DuT's CPU in it).
    interrupts: dict[str, dict[str, object]]


# -- energy and the noise probe (`lowtail noise --json`, stored by store/host.py) -----


class EnergyReading(TypedDict):
    """What the RAPL counters say of a stretch of time (`host.energy.EnergyMeter`): joules
    per domain ("package-0", "package-0/dram", …), their total and mean power, or why not."""

    available: bool
    joules: float | None
    mean_w: float | None
    domains: dict[str, float]  # domain → joules; the domains are the host's own
    duration_ns: int
    reason: str | None


class NoiseGap(TypedDict):
    """One of the largest gaps of a probed core: when it began and how long it was."""

    t_ns: int
    gap_ns: int


class InterruptKindLoad(TypedDict):
    """One interrupt kind on a probed core: how many, how often, and the typical time each took."""

    count: int
    rate_hz: float
    typical_ns: float | None  # None where the attribution could not time this kind
    description: str


class NoiseAttribution(TypedDict):
    """How the probe's gaps were attributed to interrupt kinds, and how much of them it explains."""

    method: str
    intervals: int
    explained_share: float
    long_gaps: int  # gaps too long to be interrupt handlers: only counted
    long_gap_total_ns: int


class NoiseCore(TypedDict):
    """One probed core: its gaps' figures, histogram, largest gaps and interrupt profile."""

    cpu: int
    gaps: int
    rate_hz: float
    max_ns: int | None
    p50_ns: int | None
    p90_ns: int | None
    p99_ns: int | None
    p99_9_ns: int | None
    noise_ns_per_s: float
    gap_total_ns: int
    loops: int
    min_loop_ns: int | None
    dropped: int
    start_ns: int
    duration_ns: int
    histogram: list[HistogramBin]
    largest: list[NoiseGap]
    interrupts: dict[str, InterruptKindLoad] | None  # kind ("LOC", "TLB", …) → its load; None: not sampled
    d_sum_ns_per_s: NotRequired[float]  # with interrupts: Σ rate × typical duration
    attribution: NotRequired[NoiseAttribution]


class SamplerCost(TypedDict):
    """What the interrupt sampler's reads of /proc/interrupts cost its own core."""

    reads: int
    read_cpu_median_ns: int | None
    read_cpu_max_ns: int | None


class NoiseHost(TypedDict):
    """The probed host: kernel, boot command line, CPU model."""

    kernel: str
    cmdline: str
    cpu_model: str | None


class NoiseDocument(TypedDict):
    """A noise probe of some cores (`host/noise.py`), as `lowtail noise --json` prints it."""

    cpus: list[int]
    threshold_ns: int
    duration_ns: int
    housekeeping_cpu: int | None
    interrupts_sampled: bool
    sample_interval_ns: int | None
    sampler: SamplerCost | None
    fifo: int | None
    energy: EnergyReading
    host: NoiseHost
    cores: list[NoiseCore]
    noise_run_id: NotRequired[int]  # once stored


# -- the traffic of a run (`runs.traffic`) -------------------------------------------------------


class TrafficDocument(TypedDict, total=False):
    """What a run's traffic was beside its rate, frame size and burst (its own columns): a
    measured run's flows, port, planned frames and core plan; an imported run's whether its
    rate was given (a pattern's or the spec's `rate`) and the rate its PRE capture shows."""

    flows: int
    udp_dst_port: int
    frames_planned: int
    core_plan: CorePlanDocument
    rate_given: bool
    measured_rate_pps: float | None


# -- the hosts an experiment ran on (`experiments.host`) -----------------------------------------


class CorePlanDocument(TypedDict):
    """The core each program of a run got (`testbed.cores.CoreRoles`)."""

    housekeeping: int
    generator: int
    capture: int
    dut: list[int]


class CgroupCpuset(TypedDict):
    """The cpuset controller's hierarchy: cgroup v1 or v2, and where it is mounted."""

    version: int
    root: str


class HostSummary(TypedDict):
    """Another host's facts as stored with an experiment (`testbed.hosts.facts.summary`)."""

    hostname: str | None
    boot_id: str | None
    kernel: str | None
    kernel_version: str | None
    kernel_cmdline: str | None
    cpu_model: str | None
    user: str | None
    cpus_online: int
    cpus_available: list[int]
    isolated: str
    interfaces: dict[str, dict[str, str]]  # name → its /sys/class/net files read
    ptp_clocks: dict[str, str]
    time_daemons: list[str]
    ptp_port_state: str | None


class RoleHost(HostSummary):
    """The host of one role of a testbed of hosts, and how it was reached."""

    ssh: str


class HostMetadata(TypedDict):
    """The host an experiment runs on, stored with it (`experiment.hostinfo.host_metadata`):
    kernel, boot parameters, CPU, the cores of each role, lowtail's version and the command;
    with a testbed of hosts, each role's host too."""

    hostname: str
    kernel: str
    kernel_version: str
    kernel_cmdline: str | None
    cpu_model: str
    cpus_online: int | None
    cpus_available: list[int]
    core_plan: CorePlanDocument
    cgroup_cpuset: CgroupCpuset | None
    lowtail_version: str
    python: str
    command: list[str]
    testbed: NotRequired[str]  # its kind
    roles: NotRequired[dict[str, RoleHost]]  # role → its host, when not all on this one


class HostStateDocument(TypedDict):
    """The host-state fingerprint of a run (host/state.py): the settings that decide a tail
    as read when the run started, and a short id of them (equal settings, equal ids)."""

    id: str
    settings: dict[str, str]  # an open map: the setting's name → its value as read
