"""The JSON documents that cross stages, typed once: what an analysis returns, what a
comparison and its verdicts are. Each is printed by `--json`, stored as JSON and read back,
so a `TypedDict` types it at no cost at run time and with no change to its shape; they live
here, at the bottom of the layering (this module imports only `measurement_documents`, the
documents of what was measured around the captures), so that the
stage that makes a document, the store that keeps it and the report and the Python API that
read it back name the same type. Records, options and requests inside the program are
frozen dataclasses beside their owner instead (`store.records.RunRecord`,
`verdict.VerdictRequest`, `compare.comparison.CompareOptions`, each model's options).

Figures keyed by a percentile ("p99_999") are plain mappings: their keys come from the
native analysis's list (`percentiles.KEYS`), not from a fixed set of names."""

from __future__ import annotations

from typing import Any, NotRequired, Required, TypedDict

from lowtail.measurement_documents import (
    CaptureStatistics,
    EnergyReading,
    GeneratorStatistics,
    HistogramBin,
    TestbedDocument,
    TrafficDocument,
)

# -- an analysis (`lowtail analyze --json`, stored by store/analyses.py) ----------------------


class AnalyzeOptionsDocument(TypedDict):
    """The options an analysis ran with, as the native `AnalyzeOptions.to_dict()` gives them
    and the store keeps them beside the analysis (and a campaign beside its pairs)."""

    id_format: str
    id_offset: int
    id_width: int
    id_endian: str
    udp_port: int | None
    moonsniff_records: bool
    trim_ns: int
    max_latency_ns: int
    worst: int
    histogram_bins: int
    # Where the matched series went; a campaign's options leave it out (each pair's series
    # has its own path, and the path is no part of what makes a pair the same pair).
    export: NotRequired[str | None]


# A distribution's figures by name ("min", "mean", "stddev", "p50", …, "p99_9999", "max",
# "samples"): a mapping, as its percentile keys come from the native analysis's list; a
# figure is None when nothing was matched.
LatencyFigures = dict[str, float | None]


class PercentileRow(TypedDict):
    """One row of the latency's percentile distribution (HdrHistogram's iteration)."""

    value_ns: int
    percentile: float
    total_count: int


class WorstPacket(TypedDict):
    """One of the slowest packets: its latency, when it was sent, its id."""

    latency_ns: int
    pre_ts_ns: int
    id: int


class CaptureSide(TypedDict):
    """What was read of one capture (PRE or POST)."""

    path: str
    format: str
    compression: str
    bytes: int
    frames: int
    with_id: int
    not_udp: int
    too_short: int
    snapped: int
    snaplen: int
    first_ts_ns: int | None
    last_ts_ns: int | None
    backwards: int
    per_second: list[int]  # frames in each second from the first


class IntervalDoc(TypedDict):
    """A percentile's interval (`compare.intervals.PercentileInterval`) as stored (analysis figures, comparison documents)."""

    value_ns: int | None
    lower_ns: int | None
    upper_ns: int | None
    lower_rank: int
    upper_rank: int
    resolvable: bool
    dispersion: float | None
    blocks: int
    packets_needed: int | None
    why: str | None


class BoundsDoc(TypedDict):
    """Every headline percentile of some packets with its two-sided interval and its
    one-sided bounds (what a verdict judges), the dispersion each allows for, and the
    exceedance ladder: the `intervals` of an analysis document and of a configuration."""

    level: float
    confidence: float
    samples: int
    blocks: int
    block_ns: int | None
    percentiles: dict[str, IntervalDoc]
    bounds: dict[str, IntervalDoc]
    above: list[list[int]]
    # [budget_ns, packets at or above it], exactly, for the budgets judged when the document
    # was made (older documents lack it: their advice reads the ladder, approximately).
    reach: NotRequired[list[list[int]]]


class AnalysisDocument(TypedDict):
    """The figures of one analysed capture pair, as the native analysis writes them (JSON).
    `latency_ns` maps each figure ("min", "p99_999", …, "samples") to its value (None when
    nothing was matched); the bulky parts are lists of rows the store keeps in tables."""

    sent: int
    received: int
    lost: int
    duplicates: int
    reordered: int
    foreign: int
    negative: int
    unmatched: int
    pre_duplicates: int
    trimmed_pre: int
    trimmed_post: int
    trim_ns: int
    horizon_ns: int
    start_ts_ns: int | None
    duration_ns: int | None
    latency_ns: LatencyFigures | None
    percentiles: list[PercentileRow]
    hgrm: str
    latency_histogram: list[HistogramBin]
    jitter_pre_histogram: list[HistogramBin]
    jitter_post_histogram: list[HistogramBin]
    worst: list[WorstPacket]
    pre: CaptureSide
    post: CaptureSide
    warnings: list[str]
    partial: bool
    export_path: str | None
    export_rows: int
    elapsed_s: float
    # Each headline percentile's interval and one-sided bounds (`compare.intervals.
    # bounds_document`), None without latencies; the summary the statistics pool (a native
    # `SeriesSummary`, stored as bytes, never printed).
    intervals: NotRequired[BoundsDoc | None]
    summary: NotRequired[Any]
    # `analyze --rate`: the rate the traffic was configured at; `analyze --budget`: its verdict.
    nominal_rate_pps: NotRequired[float]
    verdict: NotRequired[JudgementDocument]
    analysis_id: NotRequired[int]  # once stored
    # What `lowtail analyze --json` adds beside the figures: the page it wrote, and the error
    # of an analysis it could not store (with its exit code).
    report: NotRequired[str]
    error: NotRequired[str]
    exit_code: NotRequired[int]
    # How many worst events the analysis kept (stored) when the printout carries fewer.
    worst_kept: NotRequired[int]


class StoredFigures(TypedDict, total=False):
    """An analysis's figures as the store keeps them (`analyses.figures`): the document
    without its bulky parts (kept in tables) and its capture sides. `total=False`: analyses
    stored by older versions lack the newer figures."""

    sent: int
    received: int
    lost: int
    duplicates: int
    reordered: int
    foreign: int
    negative: int
    unmatched: int
    pre_duplicates: int
    trimmed_pre: int
    trimmed_post: int
    trim_ns: int
    horizon_ns: int
    start_ts_ns: int | None
    duration_ns: int | None
    latency_ns: LatencyFigures | None
    warnings: list[str]
    partial: bool
    export_path: str | None
    export_rows: int
    elapsed_s: float


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
    dut_config: dict[str, Any]
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
    containment: dict[str, Any]
    virtualization: str | None
    testbed: TestbedDocument | None
    energy: EnergyReading | None
    dut_stats: dict[str, Any] | None
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


# -- a verdict (`verdict.Judgement.as_dict`) and a comparison (`lowtail compare --json`) -------


class JudgementDocument(TypedDict):
    """One run or configuration judged against a budget."""

    status: str
    cause: str | None
    label: str
    reason: str
    percentile: str  # the judged percentile's key, "p99_999"
    value_ns: int | None
    budget_ns: int | None
    samples: int | None
    packets_needed: int | None
    lost: int | None
    max_loss: int | None
    degraded: list[str]
    # The confidence of the judged one-sided bounds, and the bounds (None: not bounded there).
    confidence: float | None
    lower_ns: int | None
    upper_ns: int | None
    # Inconclusive: about how many more packets would decide it, and how long they take.
    more_packets: int | None
    more_seconds: float | None
    budget: NotRequired[str]  # the budget in words (a comparison's configuration, analyze --budget)


class DeviceConfigurationVerdict(TypedDict):
    """One configuration of a device, as its device's verdict lists it."""

    label: str  # what tells it from the device's others ("50 kpps")
    status: str
    verdict: str  # the judgement's short form ("FAIL: latency", "PASS, degraded")


class DeviceVerdictDocument(TypedDict):
    """A device's verdict over its configurations (device_verdict.py): PASS only if every
    configuration passes, FAIL if any fails, else inconclusive with what is missing."""

    device: str
    kind: str
    status: str
    summary: str
    missing: list[str]
    degraded: int  # configurations judged on degraded runs
    configurations: list[DeviceConfigurationVerdict]


class BudgetDocument(TypedDict):
    """The budget every configuration of a comparison is judged against."""

    percentile: float
    key: str
    budget_ns: int
    max_loss: int
    text: str


class ConfigurationDocument(TypedDict):
    """One configuration of a comparison: its runs pooled, judged, beside its floor."""

    index: int
    label: str
    key: dict[str, Any]  # axis name → value
    key_text: dict[str, str]  # axis name → as shown
    runs: list[int]
    analyses: list[int]
    experiments: list[int]
    repetitions: int
    sent: int
    lost: int
    loss_ratio: float | None
    latency_ns: dict[str, int | None] | None  # figure → pooled nearest-rank value, and samples
    intervals: dict[str, IntervalDoc] | None
    spread: dict[str, dict[str, int | None]]
    per_run: list[dict[str, Any]]
    worst_repetition: int | None
    verdict: JudgementDocument
    floor: dict[str, Any] | None
    invalid_runs: list[dict[str, Any]]
    degraded: list[str]
    emulated: bool  # a run under QEMU's emulator (TCG): never the basis of a called difference
    partial_reasons: list[str]


class CauseSummary(TypedDict):
    """One cause of a configuration's tail, over its explained runs."""

    kind: str
    role: str
    what: str | None
    # The tail packets it keeps over all the tail packets of the configuration's explained runs
    # (with one run: that run's stored share, the same number).
    share: float
    runs: int  # how many of the runs name it


class ConfigurationCauses(TypedDict):
    """The stored explanations of a configuration's runs: `compare`'s causes column."""

    index: int
    label: str
    explained_runs: int
    causes: list[CauseSummary]
    headline: str | None  # "run N: " and that run's own headline (its shares are that run's)


class ComparisonDocument(TypedDict):
    """A comparison of stored runs, as `lowtail compare --json` prints it and the store keeps it."""

    comparison_id: int | None
    selection: list[str]
    by: list[str]
    axes: list[dict[str, str]]
    level: float
    verdict: BudgetDocument | None
    configurations: list[ConfigurationDocument]
    differences: list[dict[str, Any]]
    not_resolvable: list[dict[str, Any]]
    difference_family: dict[str, Any]  # how many comparisons, at what level, by which procedure
    evt: list[dict[str, Any]]
    rates: list[dict[str, Any]]
    left_out: list[dict[str, Any]]
    causes: NotRequired[list[ConfigurationCauses]]
    notes: list[str]
    partial: bool
    partial_reasons: list[str]
    emulated_runs: list[int]
    # Where two configurations' host-state fingerprints differ (host/state.py): each pair's
    # indices and the settings that differ, {name: [a's value, b's value]}.
    host_state_differences: NotRequired[list[dict[str, Any]]]


# -- a qualification record (`lowtail certify --json`) ------------------------------------------


class CertifiedDevice(TypedDict):
    """What a qualification record says the device was: its name and kind, every option it
    was configured with (the stored values, and as shown: durations with their units, a rule
    set with the hash of its rules), how it was contained and on which cores, the kernel it
    ran on (and a VM's guest kernel)."""

    name: str
    kind: str
    options: dict[str, Any]  # the kind's options as stored with its runs
    options_shown: dict[str, str]
    rule_sets: list[dict[str, Any]]  # what its runs recorded of their rules (count or files, sha256)
    containment: str
    cores: str
    kernel: str | None
    guest_kernel: str | None


class CertifiedTraffic(TypedDict):
    """The traffic a configuration was measured with."""

    rate_pps: int | None
    frame_size: int | None
    burst: int | None
    flows: int | None
    duration_ns: int | None  # measured per run, after the warm-up
    warmup_ns: int | None
    repetitions: int
    runs: int  # how many runs, a count (`runs` of the configuration lists their ids)


class CertifiedBounds(TypedDict):
    """The judged percentile's one-sided bounds exactly as the verdict used them."""

    confidence: float | None
    lower_ns: int | None
    upper_ns: int | None
    text: str  # in words, never a dash beside a number: "at least 990.771 µs; not bounded from above …"


class CertifiedConfiguration(TypedDict):
    """One configuration as a qualification record states it."""

    label: str
    configuration: dict[str, str]  # axis → value as shown
    device: CertifiedDevice
    traffic: CertifiedTraffic
    runs: list[int]
    analyses: list[int]
    repetitions: int
    packets: int
    sent: int
    lost: int
    loss_ratio: float | None
    percentile: str  # the judged percentile's key
    value_ns: int | None
    interval: IntervalDoc | None  # its two-sided interval at the record's level
    bounds: CertifiedBounds
    verdict: JudgementDocument
    floor_ns: int | None  # the floor's value at the judged percentile
    degraded: list[str]
    emulated: bool
    invalid_runs: list[dict[str, Any]]
    hosts: list[dict[str, Any]]  # each experiment's host fingerprint (kernel, CPU, command line, …)
    data: list[dict[str, Any]]  # each analysis's captures (path, bytes, frames), when and by which lowtail


class CertificateDocument(TypedDict):
    """A qualification record: the configurations of a selection, judged, with what they rest on."""

    lowtail_version: str
    created_at: str
    selection: list[str]
    selected: str  # what the selection came to, in words: "6 runs of experiment 3"
    comparison_id: int | None
    level: float
    budget: str | None  # the budget every configuration was judged against, in words (None: each its own)
    devices: list[DeviceVerdictDocument]  # each device's verdict over its configurations
    configurations: list[CertifiedConfiguration]
    notes: list[str]
    partial: bool
    partial_reasons: list[str]


# -- model results (`lowtail model CMD --json`, stored by store/models.py) -----------------------


class InterruptLoadDocument(TypedDict):
    """An interrupt kind hitting the processing core (`models.overload.InterruptLoad`)."""

    rate_hz: float
    duration_ns: float
    kind: str


class OverloadDocument(TypedDict):
    """R_max = (1 s − d_Σ)/t_CPU and the figures behind it (`models/overload.py`)."""

    t_transfer_ns: float
    t_e2e_ns: float
    t_cpu_ns: float
    d_sum_ns_per_s: float
    interrupt_share: float
    r_max_pps: float
    interrupts: list[InterruptLoadDocument]
    statistic: NotRequired[str | None]  # of the stored runs the medians came from
    model_id: NotRequired[int]  # once stored


class KneeRate(TypedDict):
    """One rate of a sweep: the worst of its runs, whether it is overloaded, and why."""

    rate_pps: float
    runs: list[int | None]
    loss: float
    p50_ns: int | None
    p99_ns: int | None
    p99_999_ns: int | None
    max_ns: int | None
    overloaded: bool
    reasons: list[str]


class KneeCriteria(TypedDict):
    """When a rate is overloaded: its loss over `loss_limit`, or its p99 over `growth_limit`
    times the lowest rate's."""

    loss_limit: float
    growth_limit: float


class KneeDocument(TypedDict):
    """The knee of one DuT's rate sweep (`models/knee.py`)."""

    knee_pps: float | None
    last_ok_pps: float | None
    reference_p99_ns: NotRequired[int | None]
    rates: list[KneeRate]
    criteria: KneeCriteria
    experiment_id: NotRequired[int]
    dut: NotRequired[str]
    r_max_pps: NotRequired[float | None]
    r_max_model_id: NotRequired[int | None]
    model_id: NotRequired[int]


class EvtDocument(TypedDict):
    """The EVT model of a series' tail (`models/evt.py`): the chosen threshold and its GPD
    fit, every candidate threshold, return levels, validation, stationarity, plot data."""

    input: str
    samples: int
    fit_samples: int
    validation_samples: int
    fit_fraction: float
    fit_end_ns: int | None
    start_ns: int | None
    rate_pps: float | None
    measured_rate_pps: float | None
    confidence: float
    threshold_percentile: float
    threshold_ns: float
    exceedances: int
    zeta: float
    sigma_ns: float
    sigma_ci_ns: list[float] | None
    xi: float
    xi_ci: list[float] | None
    bounded: bool
    endpoint_ns: float | None
    endpoint_ci_ns: list[float] | None
    js_divergence: float | None
    js_binning: str
    note: str
    thresholds: list[dict[str, Any]]
    return_levels_ns: dict[str, float | None]
    return_levels: dict[str, dict[str, Any]]
    horizons: dict[str, dict[str, Any]]
    validation: dict[str, Any]
    stationarity: dict[str, Any]
    plot: dict[str, Any]
    partial: bool
    partial_reasons: list[str]
    options: dict[str, Any]
    warnings: list[str]
    credible: bool
    source: NotRequired[str]  # what the series is (a run, an analysis, a file)
    model_id: NotRequired[int]


class AliasingSpecDocument(TypedDict):
    """The aliasing model's parameters (`models.aliasing.AliasingSpec`, as JSON)."""

    rate_pps: float
    irq_rate_hz: float
    irq_durations_ns: list[float]
    duration_s: float
    base_latency_ns: float
    service_ns: float
    irq_phase_ns: float
    duration_offset: int
    worst: int
    jitter_ns: float
    seed: int


class Beat(TypedDict):
    """The beat between the traffic and the nearest harmonic of the interrupt clock."""

    harmonic: int
    beat_hz: float
    pattern_period_s: float | None  # None when the clocks are locked (no beat)


class AliasingPattern(Beat):
    """The worst events ([time since the first packet ns, latency ns]) the model predicts."""

    spec: AliasingSpecDocument
    packets: int
    packets_delayed: int
    undersampled: bool  # packets further apart than an interrupt lasts
    worst: list[list[float]]


class InterruptClockFit(TypedDict):
    """The interrupt clock, in the capture's clock, that explains a run's delayed packets."""

    irq_rate_hz: float
    offset_ppm: float
    irq_phase_ns: float
    duration_offset: int
    median_error_ns: float
    locked: bool  # the period an exact multiple of the packet spacing
    delayed_packets: int
    rayleigh: float
    # Said when the fitted clock misses the delayed packets by more than half the shortest
    # interrupt (median): those delays are not the periodic interrupt described.
    warning: NotRequired[str | None]


class AliasingMeasurement(TypedDict):
    """A stored run's worst events ([ns since its first packet, latency ns]), rate, span and median."""

    worst: list[list[float]]
    rate_pps: float
    duration_ns: int
    base_latency_ns: float
    analysis_id: int


class InterruptCycleDoc(TypedDict):
    """The interrupt cycle on a run's DuT CPU from its interrupt samples (models/aliasing.py):
    the timer, the kinds that come with every k-th tick, and the ticks' cycle with durations."""

    source: str  # "guest" or "host": whose samples
    cpu: int
    period_ns: int  # the samples' period
    span_ns: int  # the time they cover
    base: str  # the timer's kind ("LOC")
    base_rate_hz: float
    companions: list[dict[str, Any]]  # {kind, rate_hz, every}: one with every `every`-th tick
    others: list[dict[str, Any]]  # {kind, rate_hz}: kinds that keep no step with the timer
    cycle: list[str]  # each tick of the cycle ("LOC", "LOC", "LOC+IWI")
    durations_ns: list[float]  # each tick's duration as modelled
    resolution: str  # what the samples can and cannot say


class AliasingSlopes(TypedDict):
    """The slope of the worst events' lines, measured and as the model draws them (ns/s)."""

    measured_ns_per_s: float | None
    model_ns_per_s: float | None


class AliasingDocument(TypedDict):
    """Interrupts against constant-rate traffic (`models/aliasing.py`): the simulated
    pattern, and against a run the fitted interrupt clock, the measurement, the run's own
    interrupt cycle (from its interrupt samples) and the lines' slopes side by side."""

    model: AliasingPattern
    fit: InterruptClockFit | None
    measured: AliasingMeasurement | None
    partial: bool
    model_id: NotRequired[int]
    cycle: NotRequired[InterruptCycleDoc]
    slopes: NotRequired[AliasingSlopes]


class ServiceTime(TypedDict, total=False):
    """How long one packet's work takes in the device model: a `kind` and that kind's
    parameters (constant: ns; exponential: mean_ns; uniform: min_ns, max_ns; normal: mean_ns,
    sd_ns; lognormal: median_ns, sigma). lowtail-sim checks that a kind has its own."""

    kind: Required[str]
    ns: float
    mean_ns: float
    min_ns: float
    max_ns: float
    sd_ns: float
    median_ns: float
    sigma: float


class InterruptSource(TypedDict):
    """Interrupts of the device model: a rate, the durations it cycles through, periodic or
    Poisson, and when the first comes."""

    rate_hz: float
    durations_ns: list[int]
    poisson: bool
    phase_ns: int


class DeviceSpec(TypedDict, total=False):
    """The device model's fields (lowtail-sim; `models.simulate.defaults()` gives each its
    default): a spec names those it sets, lowtail-sim fills the others."""

    packets: int
    rate_pps: float
    arrivals: str  # cbr | poisson
    burst: int
    burst_gap_ns: float
    service: ServiceTime
    batch_overhead_ns: float
    batch: int
    queue_capacity: int  # 0: unbounded
    base_latency_ns: int
    interrupts: list[InterruptSource]
    seed: int


class CasePrediction(TypedDict):
    """What one simulated case predicts: loss, batches, how busy the core was, throughput,
    the exact latency figures and the CDF's steps ([latency_ns, fraction ≤ it]) to plot."""

    offered: int
    delivered: int
    dropped: int
    loss: float
    batches: int
    mean_batch: float
    utilisation: float | None
    throughput_pps: float | None
    latency_ns: LatencyFigures | None
    cdf: list[list[float]]


class SimulateCase(TypedDict):
    """One case of a sweep: the spec simulated (lowtail-sim's, defaults filled) and its prediction."""

    label: str
    spec: DeviceSpec
    base_latency_fitted: bool  # the base latency was fitted at the measured run's median
    result: CasePrediction


class PredictionRow(TypedDict):
    """One figure of a run against the model's prediction."""

    percentile: str  # the figure's key: "p50", "max", …
    measured_ns: float | None
    predicted_ns: float | None
    difference_ns: float | None
    ratio: float | None


class SimulateComparison(TypedDict):
    """The first case against the stored lowtail-fwd run it simulates."""

    run_id: int
    dut: str
    rate_pps: int
    work_ns: float | None
    batch: int
    base_latency_ns: int
    base_latency_source: str
    measured_loss: float | None
    predicted_loss: float
    rows: list[PredictionRow]


class SimulateDocument(TypedDict):
    """The device model's cases (`models/simulate.py`), the first against a run when one was named."""

    cases: list[SimulateCase]
    comparison: SimulateComparison | None
    partial: bool
    model_id: NotRequired[int]


# -- a campaign (`lowtail campaign analyze --json`, stored by store/campaigns.py) ----------------


class CapturePair(TypedDict):
    """One PRE/POST pair of a campaign by name, or a capture without its partner (the missing
    side None); `key` is its identity (both files and the analysis options)."""

    name: str
    pre: str | None
    post: str | None
    key: str


class CampaignPairEntry(TypedDict):
    """A pair of a campaign stored with its analysis (now, or by an earlier run: resumed)."""

    name: str
    pre: str | None
    post: str | None
    analysis_id: int
    sent: int
    lost: int
    latency_ns: LatencyFigures | None
    partial: bool
    series: str | None
    worker: str | None
    resumed: bool


class CampaignFailure(CapturePair):
    """A pair that could not be analysed, and why (the worker None when none was given it)."""

    error: str | None
    worker: str | None


class CampaignWorker(TypedDict):
    """A Dask worker of a campaign: how many pairs it analysed, and whether it was lost."""

    address: str
    pairs: int
    lost: bool


class CampaignDocument(TypedDict):
    """What `lowtail campaign analyze --json` prints."""

    campaign_id: int
    partial: bool
    stopped: str | None
    pairs: list[CampaignPairEntry]
    failed: list[CampaignFailure]
    workers: list[CampaignWorker]


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


class CauseDoc(TypedDict):
    """One cause as `lowtail explain --json` gives it."""

    kind: str
    role: str
    host: str | None  # the host of the role's core (a run may be traced on several)
    cpu: int | None
    tail_packets: int  # the tail packets this cause keeps
    share: float  # tail_packets over the tail's packets: the one number every surface shows
    added_ns: int
    evidence: dict[str, Any]
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
    trace: dict[str, Any]
    interrupt_coincidence: dict[str, Any]
    interrupts: list[dict[str, Any]]  # the interrupt samples at their resolution (explain/sampled.py)
    notes: list[str]
    partial: bool


class TuneChangeDocument(TypedDict):
    """One change `lowtail tune` proposed, tried, and kept or undid."""

    id: str  # what `--only` names
    setting: str  # what it changes, in words
    cause: str  # the cause in the measured tail it targets (or a guideline)
    remedy: RemedyDoc
    applied: list[str]  # each setting as applied ("vm.stat_interval: 1 → 3600")
    effect: str | None  # the before/after comparison's sentence at the judged percentile (None: not tried)
    improved: bool | None  # a resolvable improvement at the judged percentile
    harmed: list[str]  # the percentiles where it made a resolvable harm
    kept: bool | None  # None: not tried (a dry run, or the session stopped first)
    baseline: int | None  # the kept state measured again, its repetitions interleaved with `after`'s
    after: int | None  # the experiment measured with it applied
    comparison_id: int | None  # the stored comparison of baseline and after
    undo_file: str | None  # what undoes it, while it is kept


class TuneOwnerDocument(TypedDict):
    """The process running a tune session: a session left "running" whose owner is gone was
    killed outright, and the next `tune --yes` undoes the trial it was trying."""

    pid: int
    start: str | None  # /proc stat field 22: a pid used again is another process


class ResolutionDocument(TypedDict):
    """Whether an experiment's repetitions bound a percentile (compare/resolution.py): a
    difference there is judged only where each repetition's packets bound it."""

    percentile: str
    bounded: bool  # every repetition bounds it
    unbounded_runs: list[int]  # the runs whose packets do not
    packets_needed: int | None  # per repetition, at the clustering measured (None: unknown, or bounded)
    seconds_needed: int | None  # the same at the runs' rate
    why: str | None  # one sentence, with what to do; None when bounded


class TuneDocument(TypedDict):
    """What `lowtail tune --json` prints and the store keeps (store/tune.py)."""

    tune_id: int | None
    spec: str  # the experiment file
    before: int  # the experiment measured before any change
    after: int | None  # the experiment that measured the kept set last (None: nothing kept)
    comparison_id: int | None  # the stored comparison of before and the last after (the page's curves)
    percentile: str  # the judged percentile's key
    changes: list[TuneChangeDocument]
    kept: list[str]  # the ids of the changes kept
    undone: list[str]  # the ids of the changes tried and undone
    boot: dict[str, Any]  # the boot-time parameters still worth setting: host/plan.py's kernel_cmdline + why
    dry_run: bool
    status: str  # planned | running | finished | interrupted | failed | killed
    after_reboot: list[dict[str, Any]]  # `tune --after-reboot`: each later measurement against the before
    unseen: list[str]  # what explain could not see in the before runs (why a targeted change may be missing)
    owner: TuneOwnerDocument | None
    trial_undo_file: str | None  # the undo file of the trial in force while it is measured, else None
    resolution: ResolutionDocument | None  # whether the before's repetitions bound the judged percentile
