"""Which hop of a chain makes its tail: the tail packets' latency split by hop.

Every tail packet of a chain run (end-to-end latency at or above the explanation's threshold)
was seen on every link, so its latency is the sum of its hop latencies (analyze/hops.py). What
a hop *adds* to a tail packet is its latency there above that hop's own median: a hop that is
slow for every packet (a long rule list) adds little to the tail, a hop that delays some
packets (a busy core, a queue) adds much. Each hop's share is its part of the latency the tail
packets carry above the hops' medians, counting only hops that added (the shares add up to 1);
the hop with the largest share is named the tail's hop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lowtail.analyze.document import ChainDocument
from lowtail.analyze.hops import join_by_id
from lowtail.core.units import format_ns, format_percent
from lowtail.explain.document import HopsDoc, HopShareDoc


def hops_of_tail(chain: ChainDocument, end_to_end_series: Path, threshold_ns: int) -> HopsDoc | None:
    """The tail above `threshold_ns` split by hop; None when a hop has no series to read."""
    paths = [h["series_path"] for h in chain["hops"]]
    if any(p is None for p in paths):
        return None
    joined = join_by_id([end_to_end_series, *(Path(p) for p in paths if p is not None)])
    end_to_end, per_hop = joined[0], joined[1:]
    tail = end_to_end >= threshold_ns
    count = int(np.count_nonzero(tail))
    shares: list[HopShareDoc] = []
    for hop, latencies in zip(chain["hops"], per_hop, strict=True):
        median = _median(latencies)
        tail_mean = float(np.mean(latencies[tail])) if count else 0.0
        shares.append(
            HopShareDoc(
                hop=hop["hop"],
                name=hop["name"],
                kind=hop["kind"],
                median_ns=median,
                tail_mean_ns=tail_mean,
                added_ns=tail_mean - median if count else 0.0,
                share=0.0,
            )
        )
    added = sum(max(s["added_ns"], 0.0) for s in shares)
    for s in shares:
        s["share"] = max(s["added_ns"], 0.0) / added if added > 0 else 0.0
    top = max(shares, key=lambda s: s["share"]) if added > 0 else None
    return HopsDoc(
        threshold_ns=threshold_ns,
        tail_packets=count,
        hops=shares,
        tail_hop=top["name"] if top else None,
        said=_said(top, count),
    )


def _median(latencies: np.ndarray) -> int:
    """The nearest-rank median (the headline figures' definition), 0 of no packets."""
    if not latencies.size:
        return 0
    rank = -(-latencies.size // 2)  # ⌈n/2⌉
    return int(np.partition(latencies, rank - 1)[rank - 1])


def _said(top: HopShareDoc | None, count: int) -> str:
    if top is None:
        return f"no hop adds latency to the {count:,} tail packets beyond its median"
    return (
        f"hop {top['hop']} ({top['name']}, {top['kind']}) makes the tail: {format_percent(top['share'])} of what the "
        f"{count:,} tail packets carry above the hops' medians (it adds {format_ns(round(top['added_ns']))} on average)"
    )
