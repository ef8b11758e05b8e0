"""Which hop of a chain makes its tail: the tail packets' latency split by hop.

Every tail packet of a chain run (end-to-end latency above the explanation's threshold, the
tail the explanation counts) was seen on every link, so its latency is the sum of its hop
latencies (analyze/hops.py). What
a hop *adds* to a tail packet is its latency there above that hop's own median: a hop that is
slow for every packet (a long rule list) adds little to the tail, a hop that delays some
packets (a busy core, a queue) adds much. Each tail packet is laid at the door of the hop that
added the most to it; a hop's share is the part of the tail packets it made late (the shares of
the packets some hop delayed add up to 1), and the hop with the largest share is named the tail's
hop. Counted by packet, as explain ranks its causes, not by latency: a single stall of many
milliseconds on one hop (a VM's steal, a container's scheduler) delays a few hundred packets by
much, and in a mean it would outweigh the hop that makes most packets miss the budget.
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
    tail = end_to_end > threshold_ns  # the explanation's own rule (explain/analysis.py): one tail, one count
    count = int(np.count_nonzero(tail))
    medians = [_median(latencies) for latencies in per_hop]
    tail_means = [float(np.mean(latencies[tail])) if count else 0.0 for latencies in per_hop]
    made_late = _made_late(per_hop[:, tail], medians)
    delayed = sum(made_late)
    shares = [
        HopShareDoc(
            hop=hop["hop"],
            name=hop["name"],
            kind=hop["kind"],
            median_ns=median,
            tail_mean_ns=mean,
            added_ns=mean - median if count else 0.0,
            made_late=late,
            share=late / delayed if delayed else 0.0,
        )
        for hop, median, mean, late in zip(chain["hops"], medians, tail_means, made_late, strict=True)
    ]
    top = max(shares, key=lambda s: (s["share"], s["added_ns"])) if delayed else None
    return HopsDoc(
        threshold_ns=threshold_ns,
        tail_packets=count,
        hops=shares,
        tail_hop=top["name"] if top else None,
        said=_said(top, count),
    )


def _made_late(tail_latencies: np.ndarray, medians: list[int]) -> list[int]:
    """For each hop, the tail packets it added the most to above its median (none of a packet
    no hop delayed); rows are hops, columns the tail packets."""
    if not tail_latencies.size:
        return [0] * len(medians)
    above = tail_latencies - np.asarray(medians, dtype=np.int64)[:, None]
    worst = np.argmax(above, axis=0)
    delayed = above.max(axis=0) > 0
    return [int(n) for n in np.bincount(worst[delayed], minlength=len(medians))]


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
        f"hop {top['hop']} ({top['name']}, {top['kind']}) makes the tail: it adds the most to {top['made_late']:,} of "
        f"the {count:,} tail packets ({format_percent(top['share'])}), {format_ns(round(top['added_ns']))} above its "
        "median on average"
    )
