"""A comparison of stored configurations and a certificate, as stored and printed.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict

from lowtail.analyze.document import IntervalDoc
from lowtail.experiment.document import ExperimentHost
from lowtail.testbed.document import StoredDutOptions
from lowtail.verdict.document import BudgetDocument, DeviceVerdictDocument, JudgementDocument

# Nearest-rank figures of some packets, whole nanoseconds ("p99_9", "max", and "samples"),
# None where there are none (`compare.pooling.Distribution.figures`).
PooledFigures = dict[str, int | None]

# Why a pair of configurations is not called at a percentile (a `PairJudgement`'s `reason`),
# in the order compare/differences.py checks them.
NO_LATENCY = "no latency"
UNBOUNDED = "unbounded"
FEW_REPETITIONS = "repetitions"
RESOLUTION = "resolution"
EMULATED = "emulated"
DEGRADED = "degraded"
NOT_SIGNIFICANT = "not significant"

# A configuration's value on each axis that makes it (axis name → value): each axis's own
# kind of value (a count, a name, a DuT option, which may be a table).
AxisValues = dict[str, object]


class RepetitionDoc(TypedDict):
    """One repetition of a configuration (its run, or a plain analysis): its figures, whether
    each is resolvable, its own intervals and its verdict in short."""

    resolvable: dict[str, bool]
    intervals: dict[str, list[int | None] | None]  # figure → [lower_ns, upper_ns]
    run_id: int | None
    analysis_id: int
    experiment_id: int | None
    repetition: int
    sent: int | None
    lost: int | None
    latency_ns: PooledFigures
    verdict: str
    degraded: list[str]


class FloorDoc(TypedDict):
    """A configuration's floor: the calibration runs of the same traffic, pooled, and their spread."""

    runs: list[int]
    experiments: list[int]
    repetitions: int
    latency_ns: PooledFigures
    spread: dict[str, dict[str, int | float | None]]  # figure → min, max, width_ns
    text: str


class RunWhy(TypedDict):
    """A run a comparison left out, and why (its invalid reasons, or the one reason)."""

    run_id: int | None
    reasons: NotRequired[list[str]]
    why: NotRequired[str]


class ConfigurationDocument(TypedDict):
    """One configuration of a comparison: its runs pooled, judged, beside its floor."""

    index: int
    label: str
    key: AxisValues
    key_text: dict[str, str]  # axis name → as shown
    runs: list[int]
    analyses: list[int]
    experiments: list[int]
    repetitions: int
    sent: int
    lost: int
    loss_ratio: float | None
    # Of `lost`, the packets an IPS's drop rule meant to remove (`[traffic] match_share`): not
    # loss to the verdict. Comparisons stored before lack it.
    intended_drops: NotRequired[int]
    latency_ns: dict[str, int | None] | None  # figure → pooled nearest-rank value, and samples
    intervals: dict[str, IntervalDoc] | None
    spread: dict[str, dict[str, int | float | None]]  # figure → its min and max over the repetitions
    per_run: list[RepetitionDoc]
    worst_repetition: int | None
    verdict: JudgementDocument
    floor: FloorDoc | None
    invalid_runs: list[RunWhy]
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


class PairJudgement(TypedDict):
    """One pair of configurations at one percentile (compare/differences.py): called
    (`resolved`: which is `lower`, by what ratio and interval, in `text`) or not, with the
    `reason` and `why`; the test's figures when a test could be made. As judged before the
    family's correction, which makes it a `DifferenceDoc`."""

    a: str
    b: str
    percentile: str
    resolved: bool
    ratio: NotRequired[float]  # b's geometric mean over a's
    ratio_lower: NotRequired[float]
    ratio_upper: NotRequired[float]
    p_value: NotRequired[float]
    df: NotRequired[int]
    repetitions: NotRequired[list[int]]  # [a's, b's]
    difference_ns: int | None
    lower: str | None
    higher: str | None
    reason: str | None
    why: str | None
    text: str
    note: str | None


class DifferenceDoc(PairJudgement):
    """A pair's judgement as `compare` gives it: with the pair's indices among the
    configurations and the axes on which they differ."""

    a_index: int
    b_index: int
    axes_differing: list[str]


class DifferenceFamily(TypedDict):
    """The family the differences were called in: how many comparisons, at what level, by
    which procedure, at which percentiles."""

    comparisons: int
    level: float
    procedure: str
    percentiles: list[str]


class EvtMissing(TypedDict):
    """A run of a configuration without a tail model, and why."""

    run_id: int
    why: str


class EvtRunsRow(TypedDict):
    """One configuration's EVT over its runs (compare/evt_runs.py): how many of its
    repetitions' tail models are bounded, their mean validation exceedances (1 expected) and ξ."""

    configuration: int
    label: str
    repetitions: int
    models: int
    model_ids: list[int]
    bounded: int
    bounded_share: float | None
    mean_exceedances: float | None
    expected_exceedances: float
    mean_xi: float | None
    not_credible: int
    missing: list[EvtMissing]


class RatePoint(TypedDict):
    """One configuration of a rate series: its one rate and what it measured there."""

    configuration: int
    rate_pps: int
    sent: int
    lost: int
    loss_ratio: float | None
    latency_ns: dict[str, int | None]
    verdict: str


class RateKnee(TypedDict):
    """A stored knee of a sweep of a rate series (`lowtail model knee`)."""

    experiment_id: int
    dut: str
    model_id: int
    knee_pps: float | None
    last_ok_pps: float | None
    r_max_pps: float | None
    other_runs: list[int]  # runs the knee model read that are not in this series


class RateSeries(TypedDict):
    """Latency against rate: the configurations that differ only in their rate."""

    label: str
    key: AxisValues  # the axes but the rate
    points: list[RatePoint]
    knees: list[RateKnee]


class HostStateDifference(TypedDict):
    """Two configurations (by index; the same twice: runs of one configuration) whose
    host-state fingerprints differ, and the settings that do: {name: [a's value, b's value]}."""

    a_index: int
    b_index: int
    settings: dict[str, list[str | None]]


class ComparisonDocument(TypedDict):
    """A comparison of stored runs, as `lowtail compare --json` prints it and the store keeps it."""

    comparison_id: int | None
    selection: list[str]
    by: list[str]
    axes: list[dict[str, str]]
    level: float
    verdict: BudgetDocument | None
    configurations: list[ConfigurationDocument]
    differences: list[DifferenceDoc]
    not_resolvable: list[DifferenceDoc]
    difference_family: DifferenceFamily
    evt: list[EvtRunsRow]
    rates: list[RateSeries]
    left_out: list[RunWhy]
    causes: NotRequired[list[ConfigurationCauses]]
    notes: list[str]
    partial: bool
    partial_reasons: list[str]
    emulated_runs: list[int]
    # Where two configurations' host-state fingerprints differ (host/state.py): each pair's
    # indices and the settings that differ. Comparisons stored before lack it.
    host_state_differences: NotRequired[list[HostStateDifference]]


class StoredComparison(TypedDict):
    """A stored comparison as the store hands it back (`store.comparisons.comparison`): its
    row, with the selection, the axes and the document read back."""

    comparison_id: int
    created_at: datetime
    lowtail_version: str
    label: str | None
    selection: list[str]
    by_axes: list[str]
    document: ComparisonDocument
    partial: bool


class ComparisonListed(TypedDict):
    """A stored comparison as `lowtail compare list` shows it (`store.comparisons.list_comparisons`):
    its row, with how many configurations its document holds."""

    comparison_id: int
    created_at: datetime
    label: str | None
    selection: list[str]
    by_axes: list[str]
    configurations: int
    partial: bool


class ConfigurationCurves(TypedDict):
    """What a comparison's page draws of one configuration (`store.comparisons.comparison_curves`):
    (percentile, value_ns) of its pooled packets and its floor's, of each repetition by its
    analysis, and the band (percentile, least, greatest) over the repetitions."""

    pooled: list[tuple[float, int]]
    floor: list[tuple[float, int]]
    repetitions: dict[int, list[tuple[float, int]]]
    band: list[tuple[float, int, int]]


class WorstEventRow(TypedDict):
    """One of a repetition's worst events as a comparison stored it (its time from the
    repetition's first packet)."""

    run_id: int | None
    analysis_id: int
    t_ns: int
    latency_ns: int


# -- a qualification record (`lowtail certify --json`) ------------------------------------------


class RuleSetRecord(TypedDict, total=False):
    """What a run recorded of its rules (Suricata, a VM's guest IPS): how many were
    generated (or the file's name), how many files, the port, the hash of the rules loaded."""

    rules: int | str
    files: int
    port: int
    sha256: str


class CaptureIdentity(TypedDict):
    """One capture of an analysis as a reader can find it again."""

    path: str | None
    bytes: int | None
    frames: int | None
    format: str | None


class AnalysisIdentity(TypedDict):
    """One analysis's data as a reader can check it again: its captures, when and by which
    lowtail it was analysed."""

    analysis_id: int
    analysed_at: str
    lowtail_version: str | None
    captures: dict[str, CaptureIdentity]  # "pre", "post"


class CertifiedDevice(TypedDict):
    """What a qualification record says the device was: its name and kind, every option it
    was configured with (the stored values, and as shown: durations with their units, a rule
    set with the hash of its rules), how it was contained and on which cores, the kernel it
    ran on (and a VM's guest kernel)."""

    name: str
    kind: str
    options: StoredDutOptions  # the kind's options as stored with its runs
    options_shown: dict[str, str]
    rule_sets: list[RuleSetRecord]
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
    lost: int  # every packet sent that did not arrive
    intended_drops: int  # of those, what an IPS's drop rule removed as meant: not loss
    loss_ratio: float | None
    percentile: str  # the judged percentile's key
    value_ns: int | None
    interval: IntervalDoc | None  # its two-sided interval at the record's level
    bounds: CertifiedBounds
    verdict: JudgementDocument
    floor_ns: int | None  # the floor's value at the judged percentile
    degraded: list[str]
    emulated: bool
    invalid_runs: list[RunWhy]
    hosts: list[ExperimentHost]  # each experiment's host fingerprint (kernel, CPU, command line, …)
    data: list[AnalysisIdentity]


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
