"""What an analysis of a capture pair returns and stores: its figures, intervals and bounds.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

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
