"""The JSON documents that cross stages, typed once: what an analysis returns, what a
comparison and its verdicts are. Each is printed by `--json`, stored as JSON and read back,
so a `TypedDict` types it at no cost at run time and with no change to its shape; they live
here, at the bottom of the layering (this module imports nothing of lowtail), so that the
stage that makes a document, the store that keeps it and the report and the Python API that
read it back name the same type. Records, options and requests inside the program are
frozen dataclasses beside their owner instead (`store.records.RunRecord`,
`verdict.VerdictRequest`, `compare.comparison.CompareOptions`, each model's options).

Figures keyed by a percentile ("p99_999") are plain mappings: their keys come from the
native analysis's list (`percentiles.KEYS`), not from a fixed set of names."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

# -- an analysis (`lowtail analyze --json`, stored by store/analyses.py) ----------------------


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
    per_second: list[Any]


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
    latency_ns: dict[str, Any] | None
    percentiles: list[Any]
    hgrm: str
    latency_histogram: list[Any]
    jitter_pre_histogram: list[Any]
    jitter_post_histogram: list[Any]
    worst: list[Any]
    pre: CaptureSide
    post: CaptureSide
    warnings: list[str]
    partial: bool
    export_path: str | None
    export_rows: int
    elapsed_s: float
    analysis_id: NotRequired[int]  # once stored
    # What `lowtail analyze --json` adds beside the figures: the page it wrote, and the error
    # of an analysis it could not store (with its exit code).
    report: NotRequired[str]
    error: NotRequired[str]
    exit_code: NotRequired[int]


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
    generator: dict[str, Any]
    capture: dict[str, Any]
    containment: dict[str, Any]
    virtualization: str | None
    testbed: dict[str, Any] | None
    energy: dict[str, Any] | None
    dut_stats: dict[str, Any] | None
    capture_paths: list[str]
    traffic: dict[str, Any]
    sent: int | None
    received: int | None
    lost: int | None
    duplicates: int | None
    reordered: int | None
    partial: bool | None
    warnings: list[str] | None
    figures: dict[str, Any] | None
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
    budget: NotRequired[str]  # a comparison's configuration: the budget in words


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
    intervals: dict[str, dict[str, Any]] | None
    spread: dict[str, dict[str, int | None]]
    per_run: list[dict[str, Any]]
    worst_repetition: int | None
    verdict: JudgementDocument
    floor: dict[str, Any] | None
    invalid_runs: list[dict[str, Any]]
    degraded: list[str]
    partial_reasons: list[str]


class CauseSummary(TypedDict):
    """One cause of a configuration's tail, over its explained runs."""

    kind: str
    role: str
    what: str | None
    share: float  # its mean share of the tail packets over the configuration's runs (0 where absent)
    runs: int  # how many of the runs name it


class ConfigurationCauses(TypedDict):
    """The stored explanations of a configuration's runs: `compare`'s causes column."""

    index: int
    label: str
    explained_runs: int
    causes: list[CauseSummary]
    headline: str | None


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
    evt: list[dict[str, Any]]
    rates: list[dict[str, Any]]
    left_out: list[dict[str, Any]]
    causes: NotRequired[list[ConfigurationCauses]]
    notes: list[str]
    partial: bool
    partial_reasons: list[str]
    emulated_runs: list[int]


# -- model results (`lowtail model CMD --json`, stored by store/models.py) -----------------------


class OverloadDocument(TypedDict):
    """R_max = (1 s − d_Σ)/t_CPU and the figures behind it (`models/overload.py`)."""

    t_transfer_ns: float
    t_e2e_ns: float
    t_cpu_ns: float
    d_sum_ns_per_s: float
    interrupt_share: float
    r_max_pps: float
    interrupts: list[dict[str, Any]]  # rate_hz, duration_ns, kind
    statistic: NotRequired[str | None]  # of the stored runs the medians came from
    model_id: NotRequired[int]  # once stored


class KneeDocument(TypedDict):
    """The knee of one DuT's rate sweep (`models/knee.py`)."""

    knee_pps: float | None
    last_ok_pps: float | None
    reference_p99_ns: NotRequired[int | None]
    rates: list[dict[str, Any]]  # per rate: the worst of its runs, overloaded and why
    criteria: dict[str, float]
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


class AliasingDocument(TypedDict):
    """Interrupts against constant-rate traffic (`models/aliasing.py`): the simulated
    pattern, and against a run the fitted interrupt clock and the measurement."""

    model: dict[str, Any]
    fit: dict[str, Any] | None
    measured: dict[str, Any] | None
    partial: bool
    model_id: NotRequired[int]


class SimulateDocument(TypedDict):
    """The device model's cases (`models/simulate.py`), the first against a run when one was named."""

    cases: list[dict[str, Any]]
    comparison: dict[str, Any] | None
    partial: bool
    model_id: NotRequired[int]


# -- an explanation (`lowtail explain --json`, stored by store/explain.py) --------------------


class RemedyDoc(TypedDict):
    """A remedy as `lowtail explain --json` gives it."""

    id: str
    action: str
    boot_parameters: list[str]
    source: str


class Tail(TypedDict):
    """The packets counted as the tail: those above threshold_ns, chosen by rule."""

    threshold_ns: int
    packets: int
    rule: str


class CauseDoc(TypedDict):
    """One cause as `lowtail explain --json` gives it."""

    kind: str
    role: str
    cpu: int | None
    share: float
    added_ns: int
    evidence: dict[str, Any]
    remedy: RemedyDoc


class ExplainDocument(TypedDict, total=False):
    """What `lowtail explain --json` prints and the store keeps."""

    run: int
    tail: Tail
    causes: list[CauseDoc]
    unexplained_share: float
    headline: str | None
    trace: dict[str, Any]
    interrupt_coincidence: dict[str, Any]
    notes: list[str]
    partial: bool
