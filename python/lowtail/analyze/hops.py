"""A chain's hops: each hop's DuT between two captured links, analysed as any capture pair,
and the check that they add up.

A chain of N DuTs is captured on N + 1 links — PRE (into the first DuT), link1 … link(N-1)
(where each DuT's frames leave it for the next), POST (out of the last) — by one timestamper.
Hop i is the pair (link i-1, link i): its latency is the time from leaving the previous DuT
(or the generator) to leaving this one, so a packet's hop latencies telescope to its
end-to-end latency, POST − PRE, exactly when one clock stamped every link. The packets seen
on every link are joined by id and the largest difference is stored (`sum_mismatch_ns`),
to be read against the clock's bound (0 ns for one clock): the check that the chain's
captures are what they claim.

Each hop's share is its mean latency over those packets divided by the chain's mean: the
shares add up to 1. Which hop makes the *tail* is `explain`'s question (explain/hops.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lowtail.analyze.document import ChainClock, ChainDocument, HopDocument
from lowtail.analyze.pair import analyze_options, analyze_pair
from lowtail.core.series import ID, LATENCY, read_columns

ONE_CLOCK = ChainClock(
    one_clock=True,
    bound_ns=0,
    why="one timestamper stamped every link with this host's kernel clock: a packet's hop latencies add up "
    "to its end-to-end latency exactly",
)


@dataclass(frozen=True)
class Hop:
    """One hop to analyse: its DuT's name and kind, the captures on either side (named)."""

    name: str
    kind: str
    before: tuple[str, Path]
    after: tuple[str, Path]


def hops_between(names: Sequence[tuple[str, str]], captures: Sequence[tuple[str, Path]]) -> list[Hop]:
    """The hops of a chain whose DuTs are `names` ((name, kind) in order) and whose links
    were captured as `captures` ((side, path): pre, link1 …, post, one more than the DuTs)."""
    if len(captures) != len(names) + 1:
        raise ValueError(f"a chain of {len(names)} DuTs has {len(names) + 1} captured links, not {len(captures)}")
    return [Hop(n, k, captures[i], captures[i + 1]) for i, (n, k) in enumerate(names)]


def analyze_chain(
    hops: Sequence[Hop], end_to_end_series: Path | None, run_dir: Path, trim_ns: int, udp_port: int
) -> ChainDocument:
    """Each hop analysed (its matched series written beside the run's as hopN.series.parquet)
    and the packet-by-packet check against the end-to-end series."""
    documents: list[HopDocument] = []
    series: list[Path | None] = []
    for number, hop in enumerate(hops, 1):
        export = run_dir / f"hop{number}.series.parquet"
        options = analyze_options(trim_ns=trim_ns, udp_port=udp_port, export=export)
        analysis = analyze_pair(hop.before[1], hop.after[1], options)
        path = analysis.get("export_path")
        series.append(Path(path) if path else None)
        documents.append(
            HopDocument(
                hop=number,
                name=hop.name,
                kind=hop.kind,
                captures=[hop.before[0], hop.after[0]],
                sent=analysis["sent"],
                received=analysis["received"],
                lost=analysis["lost"],
                latency_ns=analysis["latency_ns"],
                share=None,
                series_path=path,
            )
        )
    warnings: list[str] = []
    compared, mismatch = 0, None
    if end_to_end_series is None or any(s is None for s in series):
        warnings.append("a hop or the chain matched no packets: its hops cannot be added up")
    else:
        joined = join_by_id([end_to_end_series, *(s for s in series if s is not None)])
        compared = len(joined[0])
        if compared:
            end_to_end, per_hop = joined[0], joined[1:]
            mismatch = int(np.max(np.abs(np.sum(per_hop, axis=0) - end_to_end)))
            total = float(np.sum(end_to_end))
            for doc, latencies in zip(documents, per_hop, strict=True):
                doc["share"] = float(np.sum(latencies)) / total if total else None
        else:
            warnings.append("no packet was seen on every link: the hops cannot be added up")
    return ChainDocument(
        hops=documents, clock=ONE_CLOCK, packets_compared=compared, sum_mismatch_ns=mismatch, warnings=warnings
    )


def join_by_id(paths: Sequence[Path]) -> np.ndarray:
    """The latencies of the packets present in every series, one row per series, columns in
    the order of the first series' ids (a packet's id appears once in a matched series)."""
    first_ids, first_latencies = read_columns(paths[0], (ID, LATENCY))
    keep = np.ones(len(first_ids), dtype=bool)
    others = []
    for path in paths[1:]:
        ids, latencies = read_columns(path, (ID, LATENCY))
        order = np.argsort(ids, kind="stable")
        ids, latencies = ids[order], latencies[order]
        at = np.searchsorted(ids, first_ids)
        found = at < len(ids)
        found[found] = ids[at[found]] == first_ids[found]
        keep &= found
        others.append((at, latencies))
    rows = [first_latencies[keep]] + [latencies[at[keep]] for at, latencies in others]
    return np.vstack(rows) if rows[0].size else np.empty((len(paths), 0), dtype=np.int64)
