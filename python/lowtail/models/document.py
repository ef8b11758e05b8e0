"""Each model's result as stored and printed (overload, knee, EVT, aliasing, simulate).

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict

from lowtail.analyze.document import LatencyFigures

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
    # Runs at this rate the host could not measure as asked: their overload may be the
    # measurement's (absent in documents stored before it was kept).
    degraded_runs: NotRequired[list[int]]


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


class EvtThreshold(TypedDict):
    """One candidate threshold of an EVT model and its GPD fit (`models.evt.ThresholdFit`)."""

    percentile: float
    threshold_ns: int
    exceedances: int
    converged: bool
    sigma_ns: float | None
    xi: float | None
    sigma_ci_ns: list[float] | None
    xi_ci: list[float] | None
    js_divergence: float | None
    note: str


class ReturnLevel(TypedDict):
    """The latency exceeded once in `packets` packets on average, and its interval."""

    packets: float
    level_ns: float | None
    ci_ns: list[float] | None


class HorizonLevel(ReturnLevel):
    """A return level over a span of time at the series' rate (a day, a year)."""

    seconds: float


class ValidationCheck(TypedDict):
    """A return level checked on the held-out part: the exceedances expected and counted."""

    return_period: float
    return_level_ns: float | None
    expected: float
    exceedances: int
    exceedance_samples: int


class EvtValidation(TypedDict):
    """The held-out part against the model: the return level of its own length (one
    exceedance expected), each of `checks`, and its largest value."""

    samples: int
    return_period: float
    return_level_ns: float | None
    expected: float
    exceedances: int
    exceedance_samples: int
    decluster_packets: int
    first_exceedance_rows: list[int]
    max_ns: int | None
    checks: list[ValidationCheck]


class EvtStationarity(TypedDict):
    """ADF and KPSS on the fit part's block maxima (`adf_p` None: not tested, `note` says why)."""

    series: str
    blocks: int
    block_packets: int
    kpss_p_bound: NotRequired[str | None]  # "lower"/"upper": KPSS's p-value beyond statsmodels' table
    adf_p: float | None
    kpss_p: float | None
    verdict: str
    note: NotRequired[str]


class EvtPlot(TypedDict):
    """What the return-level and QQ plots draw: [return period, latency ns] of the fit and
    validation parts, the model's curve [period, level, lower, upper], QQ [model, data]."""

    empirical_fit: list[list[float]]
    empirical_validation: list[list[float]]
    curve: list[list[float | None]]
    qq: list[list[float]]


class EvtOptionsDocument(TypedDict):
    """`models.evt.EvtOptions` as JSON (exact quantiles as their nearest floats)."""

    fit_fraction: float
    thresholds: list[float]
    min_exceedances: int
    js_bins: int
    confidence: float
    return_periods: list[int]
    stationarity_blocks: int
    decluster_packets: int


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
    thresholds: list[EvtThreshold]
    return_levels_ns: dict[str, float | None]
    return_levels: dict[str, ReturnLevel]  # by return period in packets
    horizons: dict[str, HorizonLevel]  # "hour", "day", "year", …
    validation: EvtValidation
    stationarity: EvtStationarity
    plot: EvtPlot
    partial: bool
    partial_reasons: list[str]
    options: EvtOptionsDocument
    warnings: list[str]
    credible: bool
    source: NotRequired[str]  # what the series is (a run, an analysis, a file)
    model_id: NotRequired[int]
    # The largest latency of the series, where it lies above the upper end of a tail fitted as
    # bounded: the model is refuted, `bounded` false and no upper end stated.
    refuted_by_ns: NotRequired[int]


class FlowTailDocument(TypedDict):
    """One flow's tail model and its check (models/flow_evt.py): its packets and how many the
    model was fitted on, the threshold and its exceedances, the GPD's ξ (with its Wald
    interval) and σ, each predicted percentile beside the one observed in all its packets, the
    level checked on the held-out packets with the count expected and observed there, the
    binomial test's p-value, and the verdict: verified, contradicted, or unsupported (the data
    cannot support a tail model; `reason` says why)."""

    flow: int
    # The flow as its analysis names it ("10.0.0.1:49152 > 10.0.0.2:53"), when the series is a
    # stored run's or analysis's.
    key: NotRequired[str]
    packets: int
    fit_packets: int
    threshold_ns: int | None
    exceedances: int
    xi: float | None
    xi_ci: list[float] | None
    sigma_ns: float | None
    predicted_ns: dict[str, float | None]
    observed_ns: dict[str, int]
    check_level_ns: float | None
    expected: float | None
    observed: int | None
    p_value: float | None
    status: str
    reason: str


def flow_name(flow: FlowTailDocument) -> str:
    """A flow as tables name it: its key when the series is a stored analysis's, else its
    index in the series ("flow 3")."""
    return flow.get("key") or f"flow {flow['flow']}"


class FlowTailsDocument(TypedDict):
    """Every flow's tail of a series (`lowtail model flows --json`)."""

    series: str
    options: dict[str, float | int]
    flows: list[FlowTailDocument]
    verified: int
    contradicted: int
    unsupported: int
    source: NotRequired[str]
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


class InterruptKindRate(TypedDict):
    """An interrupt kind on a run's DuT CPU and its rate."""

    kind: str
    rate_hz: float


class InterruptCompanion(InterruptKindRate):
    """A kind that comes with every `every`-th tick of the timer."""

    every: int


class InterruptCycleDoc(TypedDict):
    """The interrupt cycle on a run's DuT CPU from its interrupt samples (models/aliasing.py):
    the timer, the kinds that come with every k-th tick, and the ticks' cycle with durations."""

    source: str  # "guest" or "host": whose samples
    cpu: int
    period_ns: int  # the samples' period
    span_ns: int  # the time they cover
    base: str  # the timer's kind ("LOC")
    base_rate_hz: float
    companions: list[InterruptCompanion]  # kinds that come with every `every`-th tick
    others: list[InterruptKindRate]  # kinds that keep no step with the timer
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
