"""What an analysis of a capture pair returns and stores: its figures, intervals and bounds.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from statistics import median_low
from typing import Any, NotRequired, TypedDict

from lowtail.testbed.document import HistogramBin
from lowtail.verdict.document import JudgementDocument

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
    # What told PRE's flows apart ("5tuple", "src-port", "none"); analyses stored before
    # flows were told apart lack it.
    flow_key: NotRequired[str]
    # Where the matched series went; a campaign's options leave it out (each pair's series
    # has its own path, and the path is no part of what makes a pair the same pair).
    export: NotRequired[str | None]


# A distribution's figures by name ("min", "mean", "stddev", "p50", …, "p99_9999", "max",
# "samples"): a mapping, as its percentile keys come from the native analysis's list; a
# figure is None when nothing was matched. Whole nanoseconds are ints, the mean and spread
# floats: `int | float`, so that the store's codec reads each back as it was written.
LatencyFigures = dict[str, int | float | None]


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


class StoredCaptureSide(TypedDict):
    """What was read of one capture (PRE or POST), as the store keeps it (`analyses.inputs`):
    the capture side without its frames per second (kept in a table)."""

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


class CaptureSide(StoredCaptureSide):
    """What was read of one capture (PRE or POST)."""

    per_second: list[int]  # frames in each second from the first


class AnalysisInputs(TypedDict):
    """What identifies an analysis's data (`analyses.inputs`): its captures as read."""

    pre: StoredCaptureSide
    post: StoredCaptureSide


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


class FlowDocument(TypedDict):
    """One flow of an analysis (the native analysis's `FlowFigures`): its index (the matched
    series' `flow` column), how a person reads it, its packets (summed over the flows, exactly
    the analysis's) and the latency figures of its received packets (None when none arrived)."""

    flow: int
    key: str
    sent: int
    received: int
    lost: int
    negative: int
    latency_ns: LatencyFigures | None


class FlowsDocument(TypedDict):
    """An analysis's flows: the key that told them apart, whether they outgrew what an
    analysis tells apart (the last flow then holds the rest), each flow in order of its first
    packet."""

    key: str
    overflowed: bool
    flows: list[FlowDocument]


class FlowSpreadDocument(TypedDict):
    """How far the flows of one analysis lie apart (analyze/flows.py): at the ranking
    percentile, the least, median and greatest flow's value, and the largest and smallest
    loss share; None where no flow has latencies."""

    flows: int
    percentile: str
    least_ns: int | None
    median_ns: int | None
    greatest_ns: int | None
    worst_max_ns: int | None
    least_loss: float
    greatest_loss: float


# What ranks an analysis's flows: the tail percentile a flow of a few thousand packets still
# resolves (a flow of a 64-flow run at 100 kpps has ~1,500 packets a second), then the worst
# case. Ranking and spread live beside the types: the terminal, `--json` and the pages read them.
RANKED_BY = "p99_9"


def _rank_value(flow: FlowDocument) -> tuple[int, int, float]:
    """A flow's badness: its ranking percentile, its worst case, its loss share (a flow
    whose packets all went missing is worst of all)."""
    lat = flow["latency_ns"]
    share = flow["lost"] / flow["sent"] if flow["sent"] else 0.0
    if not lat:
        return (2**63 - 1, 2**63 - 1, share)
    return (int(lat.get(RANKED_BY) or 0), int(lat.get("max") or 0), share)


def flows_worst_first(flows: Iterable[FlowDocument]) -> list[FlowDocument]:
    """The flows, worst first (by `RANKED_BY`, then the worst case, then loss), ties in
    flow order."""
    return sorted(flows, key=lambda f: (tuple(-v for v in _rank_value(f)), f["flow"]))


def flow_spread(flows: Sequence[FlowDocument]) -> FlowSpreadDocument:
    """How far the flows lie apart at `RANKED_BY`, in worst case and in loss."""
    values = sorted(int(f["latency_ns"][RANKED_BY] or 0) for f in flows if f["latency_ns"])
    maxima = [int(f["latency_ns"]["max"] or 0) for f in flows if f["latency_ns"]]
    shares = [f["lost"] / f["sent"] for f in flows if f["sent"]] or [0.0]
    return {
        "flows": len(flows),
        "percentile": RANKED_BY,
        "least_ns": values[0] if values else None,
        "median_ns": median_low(values) if values else None,
        "greatest_ns": values[-1] if values else None,
        "worst_max_ns": max(maxima) if maxima else None,
        "least_loss": min(shares),
        "greatest_loss": max(shares),
    }


class AnalysisFigures(TypedDict):
    """The figures of one analysed capture pair: an analysis document without its bulky parts
    (lists of rows the store keeps in tables) and its capture sides — what the store keeps as
    `analyses.figures` (`StoredFigures`) and hands back with every run. `latency_ns` maps each
    figure ("min", "p99_999", …, "samples") to its value (None when nothing was matched).
    Analyses stored before a figure existed read it as zero, or none where it may be none
    (the store's codec, store/codec.py)."""

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
    # Each headline percentile's interval and one-sided bounds (`compare.intervals.
    # bounds_document`), None without latencies.
    intervals: NotRequired[BoundsDoc | None]
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


# An analysis's figures as the store keeps them: the one definition above.
StoredFigures = AnalysisFigures

# The parts of an analysis document that are not figures: the store keeps the lists in
# tables, the sides as `inputs`, the summary as bytes.
BULKY_PARTS = (
    "percentiles",
    "latency_histogram",
    "jitter_pre_histogram",
    "jitter_post_histogram",
    "worst",
    "hgrm",
    "flows",
    "flow_spread",
)
NOT_FIGURES = (*BULKY_PARTS, "pre", "post", "summary")


class AnalysisDocument(AnalysisFigures):
    """The figures of one analysed capture pair, as the native analysis writes them (JSON),
    with the bulky parts (lists of rows the store keeps in tables), the capture sides and the
    latencies' summary the statistics pool (a native `SeriesSummary`, stored as bytes, never
    printed)."""

    percentiles: list[PercentileRow]
    hgrm: str
    latency_histogram: list[HistogramBin]
    jitter_pre_histogram: list[HistogramBin]
    jitter_post_histogram: list[HistogramBin]
    worst: list[WorstPacket]
    pre: CaptureSide
    post: CaptureSide
    summary: NotRequired[Any]
    # Each flow's figures (analyses made before flows were told apart lack it); the printout
    # adds how far they lie apart and lists them worst first.
    flows: NotRequired[FlowsDocument]
    flow_spread: NotRequired[FlowSpreadDocument]


# -- a stored analysis (`store.analyses.analysis`) ------------------------------------------------


class LatencyColumns(TypedDict, total=False):
    """The headline latency figures as the `analyses` table holds them, one column
    `lat_<figure>_ns` per figure of `store.db.LATENCY_FIGURES`: the one declaration of them
    for a stored analysis and a stored run (`experiment.document.RunRow`), which both carry
    them (None where the run has no analysis). tests/store/test_codec.py checks it against
    the table."""

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


class StoredAnalysis(LatencyColumns):
    """One stored analysis as the store hands it back: its `analyses` row (the headline
    figures as columns, `lat_<figure>_ns` one per figure of `store.db.LATENCY_FIGURES`), its
    JSON columns read back into their types, and its bulky tables as rows."""

    analysis_id: int
    created_at: datetime
    lowtail_version: str
    label: str | None
    pre_path: str
    post_path: str
    options: AnalyzeOptionsDocument
    sent: int
    received: int
    lost: int
    duplicates: int
    reordered: int
    foreign_frames: int
    negative: int
    unmatched: int
    trim_ns: int
    start_ts_ns: int | None
    duration_ns: int
    partial: bool
    warnings: list[str]
    series_path: str | None
    hgrm: str
    inputs: AnalysisInputs
    figures: AnalysisFigures
    percentiles: list[tuple[float, int, int]]  # (percentile in 0..1, value_ns, total_count)
    histograms: dict[str, list[tuple[int, int, int]]]  # kind → (lo_ns, hi_ns, count)
    worst: list[tuple[int, int, int]]  # (pre_ts_ns, latency_ns, packet_id)
    rates: dict[str, list[int]]  # side → packets in each second
    flows: FlowsDocument | None  # None: stored before flows were told apart


class AnalysisListRow(TypedDict):
    """A stored analysis as `lowtail list` shows it (`store.analyses.list_analyses`; `--json`
    prints these keys in this order)."""

    analysis_id: int
    created_at: datetime
    label: str | None
    sent: int
    received: int
    lost: int
    lat_p50_ns: int | None
    lat_p99_999_ns: int | None
    lat_max_ns: int | None
    partial: bool
    pre_path: str


class AnalysisInputsRow(TypedDict):
    """What identifies a stored analysis's data (`store.analyses.analysis_inputs`)."""

    analysis_id: int
    created_at: datetime
    lowtail_version: str
    inputs: AnalysisInputs


def latency_of(figures: AnalysisFigures | None) -> LatencyFigures:
    """The latency figures of an analysis's figures ({} without figures or latencies: a run
    not analysed, or nothing matched)."""
    return (figures["latency_ns"] if figures else None) or {}


# -- a chain's hops (`chain = [...]`, analyze/hops.py, stored by store/chains.py) ----------------


class HopDocument(TypedDict):
    """One hop of a chain: the analysis of the captures on either side of its DuT (`from`
    and `to`: "pre", "link1" … "post"), as any capture pair's, and its share of the chain's
    latency over the packets seen on every link."""

    hop: int  # 1 for the DuT the traffic meets first
    name: str
    kind: str
    captures: list[str]  # the two sides' names, from and to
    sent: int
    received: int
    lost: int
    latency_ns: LatencyFigures | None
    # Of the chain's mean latency, over the packets every capture saw (the shares add up to 1).
    share: float | None
    series_path: str | None


class ChainClock(TypedDict):
    """What the sum of a packet's hop latencies may differ from its end-to-end latency by:
    0 ns when one timestamper stamped every link with one clock (the differences telescope)."""

    one_clock: bool
    bound_ns: int | None
    why: str


class ChainDocument(TypedDict):
    """A chain run's hops and how they add up: each packet seen on every link has its hop
    latencies summed and compared with its end-to-end (PRE → POST) latency."""

    hops: list[HopDocument]
    clock: ChainClock
    packets_compared: int  # seen on every captured link, after each side's warm-up trim
    sum_mismatch_ns: int | None  # the largest |Σ hops − end to end| over those packets
    warnings: list[str]
