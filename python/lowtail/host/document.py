"""What was measured of the host around a run: energy, the noise probe, the host's metadata and state.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from lowtail.testbed.document import CorePlanDocument, HistogramBin

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


class ProbeCore(TypedDict):
    """One probed core as lowtail-noise prints it (crates/lowtail-noise `CoreSummary`)."""

    cpu: int
    start_ns: int
    duration_ns: int
    threshold_ns: int
    loops: int
    min_loop_ns: int
    gaps: int
    dropped: int
    rate_hz: float
    noise_ns_per_s: float
    gap_total_ns: int
    max_ns: int
    p50_ns: int | None
    p90_ns: int | None
    p99_ns: int | None
    p99_9_ns: int | None
    histogram: list[HistogramBin]
    largest: list[NoiseGap]


class ProbeInterrupts(TypedDict):
    """/proc/interrupts as the probe read it just before (or after) its loops, and when."""

    t_ns: int
    text: str


class ProbeOutput(TypedDict):
    """What lowtail-noise prints (host/noise.py reads it into a `NoiseDocument`): its cores, and
    /proc/interrupts around them when it was asked to read it."""

    threshold_ns: int
    requested_duration_ns: int
    interrupts_before: ProbeInterrupts | None
    interrupts_after: ProbeInterrupts | None
    cores: list[ProbeCore]


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


class InterruptProfileRow(TypedDict):
    """One interrupt kind on one CPU of a stored noise run (`store.host.interrupt_profile`):
    how often it fired and how long it typically took."""

    cpu: int
    kind: str
    description: str
    count: int
    rate_hz: float
    typical_ns: float | None  # None when the gaps could not be attributed


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


# Readable names for the architecture's rows (x86 and arm64); other rows keep the text
# the kernel prints after the counters.
KIND_NAMES = {
    "LOC": "local timer",
    "IWI": "IRQ work",
    "TLB": "TLB shootdowns",
    "CAL": "function call IPIs",
    "RES": "rescheduling IPIs",
    "NMI": "non-maskable",
    "PMI": "performance monitoring",
    "SPU": "spurious",
    "MCE": "machine check exceptions",
    "MCP": "machine check polls",
    "THR": "threshold APIC",
    "DFR": "deferred error APIC",
    "TRM": "thermal events",
    "HYP": "hypervisor callbacks",
    "IPI0": "rescheduling IPIs",
    "IPI1": "function call IPIs",
}


class StoredNoiseCore(TypedDict):
    """One probed core as the store hands it back (`store.host.noise_run`: a `noise_cores`
    row with its histogram bins (lo_ns, hi_ns, count), largest gaps (t_ns, gap_ns) and
    interrupt profile)."""

    noise_run_id: int
    cpu: int
    start_ns: int
    duration_ns: int
    loops: int
    min_loop_ns: int
    gaps: int
    rate_hz: float
    noise_ns_per_s: float
    max_ns: int
    p50_ns: int | None
    p90_ns: int | None
    p99_ns: int | None
    p99_9_ns: int | None
    d_sum_ns_per_s: float | None
    attribution: NoiseAttribution | None
    histogram: list[tuple[int, int, int]]
    largest: list[tuple[int, int]]
    interrupts: list[InterruptProfileRow]


class StoredNoiseRun(TypedDict):
    """A stored noise probe as the store hands it back (`store.host.noise_run`: its
    `noise_runs` row, JSON read back, and its cores)."""

    noise_run_id: int
    created_at: datetime
    label: str | None
    host: NoiseHost | None
    cpus: list[int] | None
    housekeeping_cpu: int | None
    duration_ns: int
    threshold_ns: int
    sample_interval_ns: int | None
    sampler: SamplerCost | None
    energy: EnergyReading | None
    cores: list[StoredNoiseCore]


def describe_energy(energy: Mapping[str, Any] | None) -> str:
    """One line for tables: "12.3 J, 24.6 W mean" or "not available (why)"."""
    if not energy or not energy.get("available"):
        reason = (energy or {}).get("reason")
        return f"not available ({reason})" if reason else "not available"
    return f"{energy['joules']:.3g} J, {energy['mean_w']:.3g} W mean"


# -- the boot-time core plan and its parameters (host/plan.py), the audit (host/audit.py) --------


class CorePlanSplit(TypedDict):
    """A host's boot-time split of its CPUs (`host.plan.CorePlan`, as JSON)."""

    housekeeping: list[int]
    isolated: list[int]
    source: str  # where the plan came from
    shared: str  # which roles share a core on a host too small, and why ("" when none do)


class BootParamDocument(TypedDict):
    """One latency-optimised boot parameter: its name and value, as written, why, and which
    paper's table asks for it."""

    name: str
    value: str | None
    text: str
    purpose: str
    source: str


class GuestCmdlineDocument(TypedDict):
    """A VM DuT's guest kernel parameters (`lowtail host plan --guest-vcpus`)."""

    plan: CorePlanSplit
    params: list[BootParamDocument]
    cmdline: str
    experiment_file: str  # the lines of the experiment file that carry it


class KernelCmdlineDocument(TypedDict):
    """The plan's boot parameters and the GRUB line that keeps everything else the host has."""

    plan: CorePlanSplit
    params: list[BootParamDocument]
    cmdline: str
    kept: list[str]  # the host's own parameters carried over
    kept_from: str  # etc/default/grub or proc/cmdline
    grub: str
    grub_steps: list[str]
    vendor: str
    notes: list[str]


class AuditCheckDocument(TypedDict):
    """One audit check's outcome (`host.audit.Check`, what each check returns)."""

    id: str
    title: str
    category: str  # boot | runtime | kernel | hardware
    status: str
    observed: str
    expected: str
    why: str
    remedy: str


class AuditScore(TypedDict):
    """The share of applicable checks passed (a warning counting half) and the counts."""

    score: int
    passed: int
    warned: int
    failed: int
    skipped: int
    applicable: int


class AuditDocument(TypedDict):
    """What `lowtail host audit --json` prints and the database stores."""

    host: str
    sysroot: str | None
    kernel: str
    cmdline: str
    plan: CorePlanSplit
    summary: AuditScore
    checks: list[AuditCheckDocument]
    unreadable: list[str]
    audit_id: NotRequired[int]  # once stored
