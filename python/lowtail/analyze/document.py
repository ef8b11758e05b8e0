"""What an analysis of a capture pair returns and stores: its figures, intervals and bounds.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    # Each flow's figures (analyses made before flows were told apart lack it); the printout
    # adds how far they lie apart and lists them worst first.
    flows: NotRequired[FlowsDocument]
    flow_spread: NotRequired[FlowSpreadDocument]


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
