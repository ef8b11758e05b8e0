"""A chain's hops joined by packet id, and its tail split by hop, on series with known truths:
each packet's timestamps on every link made up, so every hop's latency, the end-to-end one and
the hop that delays the tail packets are known before lowtail reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail.analyze.document import ChainDocument, HopDocument
from lowtail.analyze.hops import ONE_CLOCK, hops_between, join_by_id
from lowtail.core.series import write_series
from lowtail.explain.hops import hops_of_tail


def _links(rng: np.random.Generator, n: int, hops: int, slow_hop: int, tail_every: int) -> np.ndarray:
    """Every packet's timestamp on each of hops + 1 links: each hop 10 µs ± 1 µs, and on
    `slow_hop` (from 0) every `tail_every`-th packet 500 µs more."""
    per_hop = rng.integers(9_000, 11_000, size=(hops, n))
    per_hop[slow_hop, ::tail_every] += 500_000
    start = np.arange(n, dtype=np.int64) * 100_000
    return np.vstack([start, start + np.cumsum(per_hop, axis=0)])


def _write(tmp_path: Path, links: np.ndarray, ids: np.ndarray, keep: list[np.ndarray]) -> tuple[Path, list[Path]]:
    """The end-to-end series and each hop's, each of the packets in its `keep` mask, the
    hops' rows shuffled (a hop may reorder)."""
    end_to_end = tmp_path / "series.parquet"
    write_series(end_to_end, ids[keep[0]], links[0][keep[0]], links[-1][keep[0]])
    hop_paths = []
    rng = np.random.default_rng(7)
    for i in range(len(links) - 1):
        order = rng.permutation(np.flatnonzero(keep[i + 1]))
        path = tmp_path / f"hop{i + 1}.series.parquet"
        write_series(path, ids[order], links[i][order], links[i + 1][order])
        hop_paths.append(path)
    return end_to_end, hop_paths


def _chain(hop_paths: list[Path]) -> ChainDocument:
    hops = [
        HopDocument(
            hop=i,
            name=f"h{i}",
            kind="lowtail-fwd",
            captures=[],
            sent=0,
            received=0,
            lost=0,
            latency_ns=None,
            share=None,
            series_path=str(p),
        )
        for i, p in enumerate(hop_paths, 1)
    ]
    return ChainDocument(hops=hops, clock=ONE_CLOCK, packets_compared=0, sum_mismatch_ns=None, warnings=[])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 400),
    hops=st.integers(2, 5),
    seed=st.integers(0, 2**32 - 1),
    lost=st.floats(0, 0.3),
)
def test_the_hops_of_every_packet_seen_on_every_link_add_up_exactly(tmp_path_factory, n, hops, seed, lost):
    rng = np.random.default_rng(seed)
    links = _links(rng, n, hops, slow_hop=0, tail_every=7)
    ids = rng.permutation(10 * n)[:n].astype(np.int64)
    # Each series misses some packets (lost or trimmed on that hop).
    keep = [rng.random(n) >= lost for _ in range(hops + 1)]
    end_to_end, hop_paths = _write(tmp_path_factory.mktemp("s"), links, ids, keep)
    joined = join_by_id([end_to_end, *hop_paths])
    everywhere = np.logical_and.reduce(keep)
    assert joined.shape == (hops + 1, int(everywhere.sum()))
    # In the end-to-end series' order, each row the hop's true latency.
    assert (joined[0] == (links[-1] - links[0])[everywhere]).all()
    for i in range(hops):
        assert (joined[i + 1] == (links[i + 1] - links[i])[everywhere]).all()
    assert (joined[1:].sum(axis=0) == joined[0]).all()


@pytest.mark.parametrize("slow_hop", [0, 1, 2])
def test_the_hop_that_delays_the_tail_is_named(tmp_path, slow_hop):
    rng = np.random.default_rng(slow_hop)
    n = 5_000
    links = _links(rng, n, 3, slow_hop=slow_hop, tail_every=100)
    ids = np.arange(n, dtype=np.int64)
    end_to_end, hop_paths = _write(tmp_path, links, ids, [np.ones(n, dtype=bool)] * 4)
    doc = hops_of_tail(_chain(hop_paths), end_to_end, threshold_ns=400_000)
    assert doc is not None
    assert doc["tail_packets"] == 50
    assert doc["tail_hop"] == f"h{slow_hop + 1}"
    shares = [h["share"] for h in doc["hops"]]
    assert sum(shares) == pytest.approx(1.0)
    assert shares[slow_hop] > 0.99
    slow = doc["hops"][slow_hop]
    assert 9_000 <= slow["median_ns"] <= 11_000
    assert slow["added_ns"] == pytest.approx(500_000, abs=2_000)
    assert doc["said"].startswith(f"hop {slow_hop + 1} (h{slow_hop + 1}, lowtail-fwd) makes the tail")


def test_a_long_stall_on_a_few_packets_does_not_outweigh_the_hop_that_delays_most_of_the_tail(tmp_path):
    """What failed on CI: the first hop queues every burst (a shaper: each packet up to 1.7 ms),
    the second stalls once for 50 ms on 200 packets; the tail (above 1 ms) is mostly the
    first hop's, though the stall's mean added latency is larger."""
    rng = np.random.default_rng(3)
    n = 10_000
    per_hop = rng.integers(9_000, 11_000, size=(3, n))
    per_hop[0] += (np.arange(n) % 16) * 110_000  # the burst's k-th packet waits k frames
    per_hop[1, 5_000:5_200] += np.linspace(50_000_000, 0, 200).astype(np.int64)
    start = np.arange(n, dtype=np.int64) * 200_000
    links = np.vstack([start, start + np.cumsum(per_hop, axis=0)])
    end_to_end, hop_paths = _write(tmp_path, links, np.arange(n, dtype=np.int64), [np.ones(n, dtype=bool)] * 4)
    doc = hops_of_tail(_chain(hop_paths), end_to_end, threshold_ns=1_000_000)
    assert doc is not None
    first, stalled, _ = doc["hops"]
    assert stalled["added_ns"] > first["added_ns"]  # by the mean, the stall would be named
    assert doc["tail_hop"] == "h1" and first["share"] > 0.9
    assert first["made_late"] + stalled["made_late"] + doc["hops"][2]["made_late"] == doc["tail_packets"]
    assert doc["said"].startswith("hop 1 (h1, lowtail-fwd) makes the tail: it adds the most to ")


def test_a_chain_has_one_more_captured_link_than_duts():
    hops = hops_between([("fw", "nftables"), ("fwd", "lowtail-fwd")], [(s, Path(s)) for s in ("pre", "link1", "post")])
    assert [(h.name, h.before[0], h.after[0]) for h in hops] == [("fw", "pre", "link1"), ("fwd", "link1", "post")]
    with pytest.raises(ValueError, match="has 3 captured links, not 2"):
        hops_between([("fw", "nftables"), ("fwd", "lowtail-fwd")], [(s, Path(s)) for s in ("pre", "post")])


def test_the_hops_count_the_tail_as_the_explanation_does(tmp_path):
    """Run 4 of the chain example: "199 tail packets, above p99.9" beside "hop 2 … adds the most
    to 200 of the 200 tail packets": the packet at the threshold itself was the hops' only."""
    rng = np.random.default_rng(5)
    n = 2_000
    links = _links(rng, n, 2, slow_hop=1, tail_every=100)
    end_to_end, hop_paths = _write(tmp_path, links, np.arange(n, dtype=np.int64), [np.ones(n, dtype=bool)] * 3)
    latencies = np.sort(links[-1] - links[0])
    threshold = int(latencies[-15])  # a packet's own latency: the explanation's tail is above it
    doc = hops_of_tail(_chain(hop_paths), end_to_end, threshold_ns=threshold)
    assert doc is not None and doc["tail_packets"] == int((latencies > threshold).sum()) == 14
