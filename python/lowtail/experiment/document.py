"""A stored run as the store hands it back, and the traffic it was measured with.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from lowtail.analyze.document import StoredFigures
from lowtail.host.document import CgroupCpuset, EnergyReading, HostStateDocument, RoleHost
from lowtail.testbed.document import (
    CaptureStatistics,
    Containment,
    CorePlanDocument,
    DutCounters,
    DutOptions,
    GeneratorStatistics,
    TestbedDocument,
)

# -- a stored run (`store.runs.runs`, `select_runs`, `calibration_runs`) -------------------------


class RunRow(TypedDict, total=False):
    """A stored run as the store returns it: its `runs` columns (`store.records.RunRecord`,
    JSON decoded), its headline figures from its analysis (and the latency columns
    `lat_<figure>_ns`, one per figure of `store.db.LATENCY_FIGURES`, read through a Mapping),
    and the derived axis columns of its experiment's host. A plain analysis selected as a run
    (`store.records.analysis_as_run`) has the same keys, with no run."""

    run_id: int | None
    experiment_id: int | None
    combination_key: str
    dut_name: str
    dut_kind: str
    # The DuT kind's own options and what it measured and how it was contained: open maps,
    # each DuT kind's (testbed/duts) with its own keys.
    dut_config: DutOptions
    calibration: bool
    rate_pps: int
    frame_size: int | None
    burst: int | None
    repetition: int
    duration_ns: int | None
    warmup_ns: int
    started_at: Any
    finished_at: Any
    analysis_id: int | None
    series_path: str | None
    valid: bool
    invalid_reasons: list[str]
    degraded_reasons: list[str]
    generator: GeneratorStatistics
    capture: CaptureStatistics
    containment: Containment
    virtualization: str | None
    testbed: TestbedDocument | None
    energy: EnergyReading | None
    dut_stats: DutCounters | None
    capture_paths: list[str]
    traffic: TrafficDocument
    sent: int | None
    received: int | None
    lost: int | None
    duplicates: int | None
    reordered: int | None
    partial: bool | None
    warnings: list[str] | None
    figures: StoredFigures | None
    start_ts_ns: int | None
    lat_min_ns: int | None
    lat_mean_ns: float | None
    lat_stddev_ns: float | None
    lat_p50_ns: int | None
    lat_p90_ns: int | None
    lat_p99_ns: int | None
    lat_p99_9_ns: int | None
    lat_p99_99_ns: int | None
    lat_p99_999_ns: int | None
    lat_p99_9999_ns: int | None
    lat_max_ns: int | None
    kernel: str | None
    hostname: str | None
    host_state: HostStateDocument | None  # the host's tuning when the run started (host/state.py)


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


# -- a stored experiment (`store.runs.experiment`) -----------------------------------------------


# The experiment file as read, stored with the experiment: its TOML tables as the user wrote them
# (experiment/spec.py reads each table into its own options when it reads the file; the stored
# copy is what the file said, and a reader asks it only for a table it owns, as the verdict's).
ExperimentFile = dict[str, Any]


class ExperimentHost(TypedDict, total=False):
    """The host an experiment was measured on, as stored with it: a measured experiment's
    `HostMetadata` (host/document.py), an imported one's what its directory and axes say of
    where the captures came from."""

    hostname: str | None
    kernel: str | None
    kernel_version: str
    kernel_cmdline: str | None
    cpu_model: str
    cpus_online: int | None
    cpus_available: list[int]
    core_plan: dict[str, int | list[int]]  # role → its core(s): a measured experiment's CorePlanDocument
    cgroup_cpuset: CgroupCpuset | None
    lowtail_version: str
    python: str
    command: list[str]
    testbed: str
    roles: dict[str, RoleHost]
    imported_from: str  # an imported experiment's capture directory
    axes: dict[str, object]  # the axes its import spec gives every pair


class ExperimentStatus(TypedDict):
    """Where an experiment stands (`store.runs.latest_experiment`): what resuming it needs."""

    experiment_id: int
    name: str
    status: str
    data_dir: str | None


class ExperimentRow(TypedDict):
    """One stored experiment as the store hands it back (its JSON columns read back). `spec`
    is the experiment file as read (its tables, each its own section's keys), `host` the host
    metadata stored with it (host/document.py's HostMetadata; an imported experiment's has
    the keys its importer gave), `origin` where a bundle brought it from."""

    experiment_id: int
    name: str
    created_at: datetime
    spec: ExperimentFile
    spec_hash: str
    host: ExperimentHost
    status: str
    finished_at: datetime | None
    data_dir: str | None
    calibration_experiment_id: int | None
    origin: dict[str, Any] | None
