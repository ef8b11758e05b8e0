"""What the packets themselves show, without a trace: which are the tail, which left the
generator late, which waited in a standing queue, which waited for the rest of a batch.

Each feature is a per-packet delay (ns) and the same rule decides, for every kind of
cause, whether it explains a tail packet: the delay it accounts for is at least
`EXPLAINS_FRACTION` of the packet's excess over the median latency (and at least
`MIN_DELAY_NS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from lowtail import _native

# A cause explains a tail packet when it accounts for at least this share of the packet's
# latency above the median (a 2 µs tick does not explain a packet 1.5 ms late).
EXPLAINS_FRACTION = 0.25
MIN_DELAY_NS = 500
# A packet left the generator late when it did so by more than this (busy-waiting pacing
# is on time within microseconds; a stall is tens of microseconds or more).
LATE_NS = 20_000
# How many packets ahead of a packet a generator's bunching is looked for (a deeper queue
# is the DuT's own: overload or a preemption).
BUNCH_AHEAD = 256
# Packets that leave the DuT within this of each other left together (one batch).
BATCH_GAP_NS = 5_000
# A standing queue: the smallest latency of the packets around a tail packet (this many on
# each side, in sending order) is at least this share of its own.
BACKLOG_NEIGHBOURS = 25
BACKLOG_SHARE = 0.5
DEFAULT_TAIL = Fraction(999, 1000)


@dataclass
class Packets:
    """A run's matched packets, in sending order."""

    id: np.ndarray
    pre_ns: np.ndarray
    post_ns: np.ndarray
    latency_ns: np.ndarray

    @classmethod
    def of(cls, id_: np.ndarray, pre: np.ndarray, post: np.ndarray, latency: np.ndarray) -> Packets:
        order = np.argsort(pre, kind="stable")
        return cls(
            id_[order].astype(np.int64),
            pre[order].astype(np.int64),
            post[order].astype(np.int64),
            latency[order].astype(np.int64),
        )

    def __len__(self) -> int:
        return int(self.latency_ns.size)

    def percentile(self, q: Fraction) -> int:
        """The nearest-rank percentile (exact, as every lowtail figure)."""
        rank = _native.nearest_rank(q, len(self))
        return int(np.partition(self.latency_ns, rank - 1)[rank - 1])


def explains(delay: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """Whether a delay accounts for enough of each packet's excess latency."""
    return delay >= np.maximum(MIN_DELAY_NS, EXPLAINS_FRACTION * excess)


def expected_by_chance(all_delay: np.ndarray, excess: np.ndarray) -> float:
    """How many of these tail packets the delay would explain if it fell on packets
    regardless of their latency: the tail's thresholds against the delay's distribution
    over all packets."""
    if all_delay.size == 0:
        return 0.0
    ordered = np.sort(all_delay)
    thresholds = np.maximum(MIN_DELAY_NS, EXPLAINS_FRACTION * excess)
    at_least = ordered.size - np.searchsorted(ordered, thresholds, side="left")
    return float(np.sum(at_least) / ordered.size)


def lateness(p: Packets, rate_pps: float, burst: int) -> np.ndarray:
    """How late each packet left the generator against its constant-rate schedule (burst
    b due at start + ⌊b·N·10⁹/rate⌋). The schedule's start is the earliest any packet
    could have left (no packet leaves early), followed over the run through the lower
    envelope of the departures, so a slow drift between the generator's clock
    (CLOCK_MONOTONIC) and the capture's (CLOCK_REALTIME) is not read as lateness."""
    if len(p) == 0 or rate_pps <= 0:
        return np.zeros(len(p), dtype=np.int64)
    burst_index = (p.id - p.id.min()) // max(1, burst)
    due = (burst_index * max(1, burst) * 1_000_000_000) // int(round(rate_pps))
    rel = p.pre_ns - due
    chunks = max(1, min(20, len(p) // 200))
    edges = np.linspace(0, len(p), chunks + 1).astype(int)
    xs, ys = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        if b > a:
            k = a + int(np.argmin(rel[a:b]))
            xs.append(float(due[k]))
            ys.append(float(rel[k]))
    if len(xs) >= 3:
        slope, intercept = np.polyfit(xs, ys, 1)
        # The envelope bends down to the earliest departures that lie under the line.
        envelope = intercept + slope * due.astype(float)
        envelope += float(np.min(rel - envelope))
    else:
        envelope = np.full(len(p), float(rel.min()))
    late: np.ndarray = np.maximum(0, rel - envelope).astype(np.int64)
    if burst > 1:
        # A burst's frames leave back to back, each a send time after the one before: the
        # burst is as late as its earliest departure (as the generator's pacing error counts).
        first = np.full(int(burst_index.max()) + 1, np.iinfo(np.int64).max)
        np.minimum.at(first, burst_index, late)
        late = first[burst_index]
    return late


def bunching(p: Packets, late: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a generator's stall did to each packet, and since when. Latency is measured from
    the packet's real departure, so a packet's own lateness adds nothing to it: a stalled
    generator delays packets by sending the overdue ones back to back, and the last of them
    queue at the DuT behind the others. A packet j sent `late_j` late that was still in the
    DuT when packet k arrived held k up to min(late_j, post_j − pre_k) longer than it would
    have had it left on time; the delay is the largest such hold over the (at most
    `BUNCH_AHEAD`) packets ahead of k, and the stall's window opens at the earliest due time
    of those that left late (else at k's own)."""
    n = len(p)
    delay = np.zeros(n, dtype=np.int64)
    since = (p.pre_ns - late).astype(np.int64)
    for d in range(1, min(n, BUNCH_AHEAD + 1)):
        k = np.arange(d, n)
        j = k - d
        overlap = p.post_ns[j] - p.pre_ns[k]
        if not (overlap > 0).any():
            break
        hold = np.minimum(late[j], overlap)
        delay[k] = np.maximum(delay[k], hold)
        bunched = (hold > 0) & (late[j] > LATE_NS)
        since[k[bunched]] = np.minimum(since[k[bunched]], p.pre_ns[j[bunched]] - late[j[bunched]])
    return delay, since


def backlog(p: Packets) -> np.ndarray:
    """The delay a standing queue accounts for: the smallest latency among the neighbours
    of each packet (in sending order) — every packet around it waited at least that long."""
    n = len(p)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    w = BACKLOG_NEIGHBOURS
    padded = np.concatenate([np.full(w, np.iinfo(np.int64).max), p.latency_ns, np.full(w, np.iinfo(np.int64).max)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * w + 1)
    floor = windows.min(axis=1)
    return np.where(floor >= BACKLOG_SHARE * p.latency_ns, floor, 0).astype(np.int64)


def batch_wait(
    p: Packets, t_cpu_ns: float | None = None, timeout_ns: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The delay batching accounts for, and the size of each packet's departure group.
    Packets that left the DuT within `BATCH_GAP_NS` of each other left as one batch, all
    when the last of them was done. A packet of a batch waited for the rest of it twice
    over, and the larger is its hold: for the later ones to arrive (a batcher that fills its
    batch: its latency above the latency of the batch's last arrival), and for the DuT's
    work on the later arrivals taken with it (`t_cpu_ns` each, the DuT's own busy time per
    packet; a batcher that takes what is waiting, as DPDK's rx_burst does and as the
    NOMS 2020 Snort did: "already processed packets are delayed until the batch is fully
    processed"). (In a queue served one by one it is the other way round: the earlier
    packet waits less.)"""
    n = len(p)
    wait = np.zeros(n, dtype=np.int64)
    sizes = np.ones(n, dtype=np.int64)
    if n < 2:
        return wait, sizes
    order = np.argsort(p.post_ns, kind="stable")
    post = p.post_ns[order]
    starts = np.flatnonzero(np.concatenate([[True], np.diff(post) > BATCH_GAP_NS]))
    group = np.repeat(np.arange(starts.size), np.diff(np.concatenate([starts, [n]])))
    group_size = np.bincount(group)
    pre = p.pre_ns[order]
    lat = p.latency_ns[order]
    # The latest arrival of each group and its latency.
    last_pre = np.full(starts.size, np.iinfo(np.int64).min)
    np.maximum.at(last_pre, group, pre)
    is_last = pre == last_pre[group]
    last_lat = np.zeros(starts.size, dtype=np.int64)
    np.maximum.at(last_lat, group[is_last], lat[is_last])
    in_batch = group_size[group] > 1
    held = np.where(in_batch & (pre < last_pre[group]), np.maximum(0, lat - last_lat[group]), 0)
    if t_cpu_ns is not None and t_cpu_ns > 0:
        # Each packet's place in its group by arrival: the packets after it were worked on
        # before the batch left.
        by_arrival = np.lexsort((pre, group))
        rank = np.empty(n, dtype=np.int64)
        rank[by_arrival] = np.arange(n) - starts[group[by_arrival]]
        later = group_size[group] - 1 - rank
        held = np.maximum(held, np.where(in_batch, (later * t_cpu_ns).astype(np.int64), 0))
    if timeout_ns is not None and t_cpu_ns is not None:
        # A batcher with a fill timeout holds a batch that does not fill (a pause in the
        # traffic, its end) until the timeout: all of such a packet's time in the DuT
        # beyond the batch's work, at most the timeout.
        work = (group_size[group] * t_cpu_ns).astype(np.int64)
        held = np.maximum(held, np.clip(lat - work, 0, timeout_ns))
    wait[order] = held
    sizes[order] = group_size[group]
    return wait, sizes
