"""The packets an IPS rule matches (`[traffic] match_share`), told apart from the rest by id.

The generator marks a share of its packets, chosen by packet id (`_native.match_marked`, the
frame crate's `MatchShare`), with bytes a rule of lowtail's generated Suricata rule sets
matches. Which packets were marked is thus known from the ids alone: the matched series gives
the ids that arrived, the generator's id range the ids sent. From them a run knows

- how many marked packets were sent, arrived and were lost, and the same of the others;
- which losses the filter intended: a marked packet a `drop` rule removed is the function
  working, not loss — the verdict's `max_loss` counts only the rest (`unintended_loss`);
- the latency of marked packets (inspected, alerted on) beside the others';
- whether the DuT's own counters agree: alerts (and, with `drop`, packets blocked) equal to
  the marked packets the generator sent, and no marked packet through a `drop` rule.

The PRE capture holds the generator's packets in id order, so the packets after the warm-up
trim are the ids from `first_id + trimmed_pre` on, `sent` of them: exact whenever PRE holds
every packet sent (else the run says why the split is not known)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.analyze.document import AnalysisDocument
from lowtail.core import series
from lowtail.core.units import format_count
from lowtail.experiment.document import MatchingDocument, MatchLatency
from lowtail.testbed.document import GeneratorStatistics
from lowtail.testbed.duts.suricata import marker_rule_action

# The figures of each side of the split (exact nearest rank, as every headline figure).
_SPLIT_FIGURES = (("p50", 50), ("p99", 99), ("p99_9", 99.9))


def account(
    share: float,
    generator: GeneratorStatistics,
    analysis: AnalysisDocument,
    dut_stats: dict[str, Any],
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
    ids, latencies = _arrived(Path(str(analysis["export_path"])))
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
    )
    return doc, []


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


def _arrived(path: Path) -> tuple[Any, Any]:
    """The ids and latencies of the packets that arrived (the matched series)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=[series.ID, series.LATENCY])
    return table.column(series.ID).to_numpy(), table.column(series.LATENCY).to_numpy()


def _latency(latencies: Any) -> MatchLatency:
    """Exact nearest-rank figures of some latencies (None where there are none)."""
    from fractions import Fraction

    import numpy as np

    histogram = _native.ExactHistogram()
    histogram.record(np.ascontiguousarray(latencies, dtype=np.int64))  # type: ignore[arg-type]  # an int64 array is a buffer
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
