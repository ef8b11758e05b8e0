"""What was measured around a run's captures by the testbed: the programs' statistics, the testbed's sites, points and clocks, the core plan.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict

import msgspec

from lowtail.core.units import format_duration_setting

# A DuT kind's open maps, documented free-form: each kind (testbed/duts) owns its keys. Its
# options as stored (`dut_config`): the JSON object of its kind's typed options
# (`options_json` below), read back typed by `options_from_json` (the store, below the kinds,
# keeps the object; an imported run's are the axes its file names gave, free-form). How it was
# contained (`containment`: "mode" and the kind's facts, e.g. `container.RecordedNamespaces`);
# what it counted of itself (`dut_stats`: e.g. `duts.suricata.SuricataCounters` and its rule
# set's `RuleSetRecord`, a guest's forwarder's counters). The store keeps and hands them back
# as they are; their readers outside the testbed (explain, models, compare, the pages) read
# the keys of the kinds they know.
StoredDutOptions = dict[str, Any]  # free-form: any kind's options, as JSON (above)
Containment = dict[str, Any]  # free-form: "mode" and the kind's own facts (above)
DutCounters = dict[str, Any]  # free-form: the kind's own counters, as it keeps them (above)


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


def core_plan_words(plan: Mapping[str, object]) -> str:
    """A stored core plan in words: "housekeeping 1, generator 1, capture 0, DuT 2, 3" (pages
    printed the stored mapping: "{'housekeeping': 1, …, 'dut': [0]}", "dut [0]")."""
    names = {"dut": "DuT"}
    return ", ".join(
        f"{names.get(role, role)} {', '.join(map(str, cores)) if isinstance(cores, list) else cores}"
        for role, cores in plan.items()
    )


# -- a DuT's options, typed per kind (`[[dut]]`, `runs.dut_config`) ------------------------------
# Each kind's checked configuration is a struct whose fields are its options with their
# defaults (the one place a default is declared; the kind's `Option` table in testbed/duts
# holds each option's help and check). The experiment file is read into it, the testbed's DuT
# reads it, the store keeps it as the JSON object of its fields (`options_json`: the shape
# runs have always stored) and `options_from_json` reads a stored one back. The kind is the
# union's tag, stored beside the options (`runs.dut_kind`), not inside them.

# What `rules` may name besides a number of generated rules and a file.
NO_RULES, DEFAULT_RULES = "none", "default"
# Memory a contained DuT gets reserved, MiB.
DEFAULT_MEMORY_RESERVATION_MIB = 256


class DutOptions(msgspec.Struct, frozen=True, kw_only=True):
    """A kind's checked configuration (each kind's struct below adds its options). A field
    whose value is `msgspec.UNSET` is left out of the stored JSON: an option a configuration
    leaves out, so that the keys of runs stored before it existed stay the same."""

    def dut_cpus(self) -> list[int] | None:
        """The host cores the user gave the DuT (`cpus`), None for the core plan's."""
        return None

    def contained(self) -> bool:
        """Whether the DuT's process runs in a container (`containment = "container"`)."""
        return False


class NoOptions(DutOptions, frozen=True, kw_only=True):
    """A kind without options (kernel-mirred, bridge; calibration's wire)."""


class RuleFile(msgspec.Struct, frozen=True):
    """A user's rules file as a configuration holds it: its resolved path and the SHA-256 of
    its content when the experiment file was read."""

    path: str
    sha256: str


# What `rules` holds: a number of generated rules, a word (NO_RULES, DEFAULT_RULES), or a file.
RulesValue = int | str | RuleFile


class ProcessOptions(DutOptions, frozen=True, kw_only=True):
    """The options of a kind that runs a process: how it is contained and pinned."""

    containment: str = "bare"
    cpus: list[int] | None = None
    memory_reservation: int = DEFAULT_MEMORY_RESERVATION_MIB

    def dut_cpus(self) -> list[int] | None:
        return self.cpus

    def contained(self) -> bool:
        return self.containment == "container"


class LowtailFwdOptions(ProcessOptions, frozen=True, kw_only=True):
    work_ns: int = 0  # work_ns, batch, spin_us: also the VM guest's forwarder's (VmOptions)
    batch: int = 1
    spin_us: int | None = None  # None: by the core it runs on (testbed/duts/lowtail_fwd.py)
    batch_timeout_us: int | None = None


class TestpmdOptions(ProcessOptions, frozen=True, kw_only=True):
    burst: int = 32
    mbufs: int = 16384
    ring_frames: int = 4096


class OvsOptions(ProcessOptions, frozen=True, kw_only=True):
    flows: list[str] = []


class CustomOptions(ProcessOptions, frozen=True, kw_only=True):
    command: str | None = None
    setup: list[str] = []
    teardown: list[str] | msgspec.UnsetType = msgspec.UNSET  # left out when empty
    ready_timeout: str = "10s"

    @property
    def teardown_commands(self) -> list[str]:
        return self.teardown or []


class NftablesOptions(DutOptions, frozen=True, kw_only=True):
    rules: RulesValue = 1
    rule_kind: str = "ports"
    port: int = 53
    ruleset: str | None = None


class SuricataOptions(ProcessOptions, frozen=True, kw_only=True):
    rules: RulesValue = NO_RULES  # rules, action, port: also the VM guest's IPS's (VmOptions)
    action: str = "alert"
    port: int = 53
    threads: int = 1
    # Rule loading takes seconds (10,000 generated rules: about 10 s here on a busy core).
    ready_timeout: str = "3min"


class VmOptions(DutOptions, frozen=True, kw_only=True):
    guest_kernel: str = "vanilla"
    guest_forwarder: str = "mirred"
    # The guest IPS's, as the suricata kind's: UNSET (left out) unless the guest runs Suricata.
    rules: RulesValue | msgspec.UnsetType = msgspec.UNSET
    action: str | msgspec.UnsetType = msgspec.UNSET
    port: int | msgspec.UnsetType = msgspec.UNSET
    work_ns: int = 0
    batch: int = 1
    spin_us: int | None = None
    guest_cmdline: str = ""
    vcpus: int = 1
    memory: int = 256
    cpus: list[int] | None = None
    accel: str = "auto"
    guest_interrupts: bool = True
    # TCG boots Debian's kernel in about 10 s on an idle core; a shared host takes several times that.
    ready_timeout: str = "3min"

    def dut_cpus(self) -> list[int] | None:
        return self.cpus

    def ips(self) -> tuple[RulesValue, str, int]:
        """The guest IPS's rule set, action and port (a guest that runs Suricata has them)."""
        assert not isinstance(self.rules, msgspec.UnsetType), "a guest IPS has its rules"
        assert not isinstance(self.action, msgspec.UnsetType) and not isinstance(self.port, msgspec.UnsetType)
        return self.rules, self.action, self.port


class ExternalOptions(DutOptions, frozen=True, kw_only=True):
    description: str = ""


class Hop(msgspec.Struct, frozen=True):
    """One DuT of a chain: its name, kind and that kind's options."""

    name: str
    kind: str
    options: DutOptions


class ChainOptions(DutOptions, frozen=True, kw_only=True):
    """A chain's configuration: its hops in the order traffic passes them."""

    hops: list[Hop]


# Every kind's options by its name (`Dut.kind`): the union over kinds, tagged by `runs.dut_kind`.
DUT_OPTIONS: dict[str, type[DutOptions]] = {
    "wire": NoOptions,
    "kernel-mirred": NoOptions,
    "bridge": NoOptions,
    "lowtail-fwd": LowtailFwdOptions,
    "dpdk-testpmd": TestpmdOptions,
    "custom": CustomOptions,
    "nftables": NftablesOptions,
    "ovs": OvsOptions,
    "suricata": SuricataOptions,
    "vm": VmOptions,
    "external": ExternalOptions,
}
CHAIN = "chain"
# Options held as a duration setting ("3min"); an older lowtail stored them in nanoseconds.
_DURATIONS = ("ready_timeout",)


def options_json(options: DutOptions) -> dict[str, object]:
    """A configuration as the JSON object the store keeps and a combination's key hashes:
    its fields by name (UNSET ones left out). Free-form to a reader of the object: any kind's
    keys, JSON values (numbers, strings, lists, a rules file's path and hash)."""
    found = msgspec.to_builtins(options)
    assert isinstance(found, dict), "a struct's builtins are an object"
    return found


def options_from_json(kind: str, stored: Mapping[str, object]) -> DutOptions | None:
    """A run's stored DuT options (`options_json` of what it ran with) read back into its
    kind's struct; None for a kind lowtail does not run (an imported run's options are the
    axes its file names gave, a plain analysis has none: free-form). ValueError when they
    are not of the kind's shape.

    The one place that reads what earlier lowtails stored: an option the kind has gained
    since reads as its default (what the DuT then ran with), a duration stored in nanoseconds
    as the setting it stands for, an option no longer known is left out."""
    if kind == CHAIN:
        hops = stored.get("hops")
        if not isinstance(hops, list):
            raise ValueError("a chain's options have no list of hops")
        return ChainOptions(hops=[_hop(h) for h in hops])
    shape = DUT_OPTIONS.get(kind)
    if shape is None:
        return None
    upgraded = dict(stored)
    for name in _DURATIONS:
        value = upgraded.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            upgraded[name] = format_duration_setting(value)
    try:
        return msgspec.convert(upgraded, shape)
    except msgspec.ValidationError as e:
        raise ValueError(f"the {kind} options are not of their kind's shape: {e}") from None


def _hop(stored: object) -> Hop:
    if not isinstance(stored, dict):
        raise ValueError("a chain's hop has no name and kind")
    kind, name, options = stored.get("kind"), stored.get("name"), stored.get("options") or {}
    if not isinstance(kind, str) or not isinstance(name, str):
        raise ValueError("a chain's hop has no name and kind")
    if not isinstance(options, dict):
        raise ValueError(f"a chain's hop {name!r} has options that are no table")
    typed = options_from_json(kind, options)
    if typed is None:
        raise ValueError(f"a chain's hop is of an unknown kind {kind!r}")
    return Hop(name, kind, typed)
