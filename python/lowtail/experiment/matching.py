"""The packets an IPS rule matches (`[traffic] match_share`), told apart from the rest by id.

The generator marks a share of its packets, chosen by packet id (`_native.match_marked`, the
frame crate's `MatchShare`), with bytes a rule of lowtail's generated Suricata rule sets
matches. Which packets were marked is thus known from the ids alone: the matched series gives
the ids that arrived, the generator's id range the ids sent. From them a run knows

- how many marked packets were sent, arrived and were lost, and the same of the others;
- which losses the filter intended: a marked packet a `drop` rule removed is the function
  working, not loss — the verdict's `max_loss` counts only the rest (`unintended_loss`);
- the latency of marked packets (inspected, alerted on) beside the others', and whether they
  differ (`latency_difference`: called from the run's time blocks, not from the pooled
  packets, whose latencies are correlated in time);
- whether the DuT's own counters agree: alerts (and, with `drop`, packets blocked) equal to
  the marked packets the generator sent, and no marked packet through a `drop` rule.

The PRE capture holds the generator's packets in id order, so the packets after the warm-up
trim are the ids from `first_id + trimmed_pre` on, `sent` of them: exact whenever PRE holds
every packet sent (else the run says why the split is not known)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.analyze.document import AnalysisDocument
from lowtail.compare.intervals import DEFAULT_LEVEL
from lowtail.core import percentiles, series
from lowtail.core.confidence import rank_interval
from lowtail.core.units import format_count
from lowtail.experiment.document import MatchDifference, MatchingDocument, MatchLatency
from lowtail.testbed.document import DutCounters, GeneratorStatistics
from lowtail.testbed.duts.suricata import marker_rule_action

# The figures of each side of the split (exact nearest rank, as every headline figure).
_SPLIT_FIGURES = (("p50", 50), ("p99", 99), ("p99_9", 99.9))

# The run is cut into this many blocks of equal time; in each, both kinds of packets met the
# same conditions (the same queue, the same stalls), so a block's difference is the rule's
# work alone, and blocks far apart in time are close to independent.
DIFFERENCE_BLOCKS = 20
# A block resolves a percentile when each kind has this many packets above it there.
_ABOVE_PER_BLOCK = 5
# The fewest resolved blocks from which the median block difference is bounded.
_MIN_BLOCKS = 10


def account(
    share: float,
    generator: GeneratorStatistics,
    analysis: AnalysisDocument,
    dut_stats: DutCounters,
) -> tuple[MatchingDocument | None, list[str]]:
    """The matching document of a run, and why it cannot be made (one reason) when PRE does
    not hold the generator's packets in one unbroken range of ids."""
    first_id, attempted = int(generator.get("first_id") or 0), int(generator.get("attempted") or 0)
    trimmed, sent = int(analysis["trimmed_pre"]), int(analysis["sent"])
    if trimmed + sent != attempted or analysis["pre_duplicates"] or not analysis.get("export_path"):
        return None, [
            f"the packets the IPS rule matches cannot be told apart from the rest: PRE holds "
            f"{format_count(trimmed + sent)} packets of the {format_count(attempted)} the generator sent"
        ]
    ids, pre_ts, latencies = _arrived(Path(str(analysis["export_path"])))
    import numpy as np

    marked = np.frombuffer(_native.match_marked(ids, share), dtype=np.uint8).astype(bool)
    matched_sent = _native.match_count(first_id + trimmed, sent, share)
    matched_arrived = int(marked.sum())
    matched_lost = matched_sent - matched_arrived
    action = marker_rule_action(dut_stats)
    intended = matched_lost if action == "drop" else 0
    counters = dut_stats.get("suricata") or {}
    doc = MatchingDocument(
        share=share,
        action=action,
        generated=_native.match_count(first_id, attempted, share),
        matched_sent=matched_sent,
        matched_arrived=matched_arrived,
        matched_lost=matched_lost,
        unmatched_sent=sent - matched_sent,
        unmatched_lost=int(analysis["lost"]) - matched_lost,
        intended_drops=intended,
        unintended_loss=int(analysis["lost"]) - intended,
        dut_alerts=counters.get("alerts"),
        dut_blocked=counters.get("blocked"),
        latency_ns={"matched": _latency(latencies[marked]), "unmatched": _latency(latencies[~marked])},
        difference=[latency_difference(pre_ts, latencies, marked, key) for key in percentiles.MATCHING_PERCENTILES],
    )
    return doc, []


def latency_difference(
    pre_ts: Any, latencies: Any, marked: Any, key: str, level: float = DEFAULT_LEVEL
) -> MatchDifference:
    """Matching packets against the others at percentile `key`: the run cut into
    DIFFERENCE_BLOCKS blocks of equal time, in each block the percentile of the matching
    packets minus the others' (nearest rank), and the interval at `level` for the median of
    those differences from their order statistics (a sign-test interval: it needs no model of
    the latencies, only blocks whose differences are independent). Called slower or faster
    when the interval leaves out zero; "not resolved" with fewer than _MIN_BLOCKS blocks that
    hold _ABOVE_PER_BLOCK packets of each kind above the percentile."""
    import numpy as np

    diffs = sorted(_block_differences(np.asarray(pre_ts), np.asarray(latencies), np.asarray(marked, bool), key))
    doc = MatchDifference(
        percentile=key, blocks=len(diffs), level=level, median_ns=None, low_ns=None, high_ns=None, called="not resolved"
    )
    ranks = rank_interval(len(diffs), Fraction(1, 2), level)
    if len(diffs) < _MIN_BLOCKS or not ranks.resolvable:
        return doc
    low, high = diffs[ranks.lower - 1], diffs[ranks.upper - 1]
    doc["median_ns"], doc["low_ns"], doc["high_ns"] = int(np.median(diffs)), low, high
    doc["called"] = "slower" if low > 0 else "faster" if high < 0 else "no difference shown"
    return doc


def _block_differences(pre_ts: Any, latencies: Any, marked: Any, key: str) -> list[int]:
    """Each resolved block's percentile `key` of the marked packets minus the others' (ns)."""
    import numpy as np

    if not len(pre_ts):
        return []
    percentile = percentiles.by_key(key)
    edges = np.linspace(pre_ts.min(), pre_ts.max() + 1, DIFFERENCE_BLOCKS + 1)
    block = np.searchsorted(edges, pre_ts, side="right") - 1
    need = math.ceil(_ABOVE_PER_BLOCK / (1 - percentile.quantile))
    out = []
    for b in range(DIFFERENCE_BLOCKS):
        here = block == b
        mine, others = latencies[here & marked], latencies[here & ~marked]
        if len(mine) < need or len(others) < need:
            continue
        out.append(_at(mine, percentile) - _at(others, percentile))
    return out


def _at(values: Any, percentile: percentiles.Percentile) -> int:
    """The percentile of these latencies by nearest rank, as every figure of lowtail's."""
    import numpy as np

    rank = percentile.rank(len(values))
    return int(np.partition(values, rank - 1)[rank - 1])


def disagreements(doc: MatchingDocument) -> tuple[list[str], list[str]]:
    """Where the DuT's own counters disagree with the marked packets: (invalid reasons,
    degraded reasons). A `drop` rule that let marked packets through, or blocked another
    number than were marked, leaves the loss unaccounted: invalid. Alerts that are not one
    per marked packet leave the latencies standing: degraded."""
    invalid: list[str] = []
    degraded: list[str] = []
    action, marked = doc["action"], doc["generated"]
    if action is None:
        return invalid, degraded
    alerts, blocked = doc["dut_alerts"], doc["dut_blocked"]
    if alerts is not None and alerts != marked:
        degraded.append(
            f"Suricata counted {format_count(alerts)} alerts for the {format_count(marked)} packets its rule matches"
        )
    if action == "drop":
        if doc["matched_arrived"]:
            invalid.append(
                f"{format_count(doc['matched_arrived'])} of the {format_count(doc['matched_sent'])} packets the drop "
                f"rule matches came through"
            )
        if blocked is not None and blocked != marked:
            invalid.append(
                f"Suricata blocked {format_count(blocked)} packets where its drop rule matches "
                f"{format_count(marked)}: its drops and the loss cannot be told apart"
            )
    return invalid, degraded


def _arrived(path: Path) -> tuple[Any, Any, Any]:
    """The ids, PRE times and latencies of the packets that arrived (the matched series)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=[series.ID, series.PRE_TS, series.LATENCY])
    return (
        table.column(series.ID).to_numpy(),
        table.column(series.PRE_TS).to_numpy(),
        table.column(series.LATENCY).to_numpy(),
    )


def _latency(latencies: Any) -> MatchLatency:
    """Exact nearest-rank figures of some latencies (None where there are none)."""
    from fractions import Fraction

    import numpy as np

    histogram = _native.ExactHistogram()
    histogram.record(np.ascontiguousarray(latencies, dtype=np.int64))
    values = histogram.quantiles([Fraction(str(p)) / 100 for _, p in _SPLIT_FIGURES])
    quantiles = dict(zip((k for k, _ in _SPLIT_FIGURES), values or (None,) * len(_SPLIT_FIGURES)))
    return MatchLatency(
        samples=histogram.count,
        min=histogram.min(),
        p50=quantiles["p50"],
        p99=quantiles["p99"],
        p99_9=quantiles["p99_9"],
        max=histogram.max(),
    )
