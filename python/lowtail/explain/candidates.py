"""A cause before it is judged: per tail packet, the delay it accounts for, and how many
tail packets it would explain by chance. Every kind of cause (explain/analysis.py's from the
packets and the trace, explain/steal.py's from the hypervisor's steal time) is judged by the
one rule here (`Candidate.significant`), with chance worked out the one way (`by_chance`):
the same windows moved elsewhere in the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lowtail.explain import packets as pk
from lowtail.explain.cores import Suspect, shifted_windows
from lowtail.explain.document import Evidence

# A cause is named only when it explains at least this share of the tail packets.
CAUSE_FLOOR = 0.05
# ... and only when it explains at least this many times the tail packets it would by chance.
MIN_LIFT = 1.5


@dataclass
class Candidate:
    kind: str
    role: str
    cpu: int | None
    name: str
    delay: np.ndarray  # per tail packet: the delay this cause accounts for
    expected: float | None  # tail packets it would explain by chance; None: a condition of the run
    evidence: Evidence
    suspect: Suspect | None = None
    windows: tuple[np.ndarray, np.ndarray] | None = None
    # What delayed the packet in flight in [a, b), for a cause that is no traced suspect
    # (start_ns, duration_ns, what: the evidence's event), or None.
    event_in: Callable[[int, int], Evidence | None] | None = None
    # The host of the core `cpu` is on (a run may be traced on several), None for no core's.
    host: str | None = None
    # The delay before `bound`: how long the cause held the packet's window (the tie-break).
    raw_delay: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.raw_delay = self.delay

    def bound(self, room: np.ndarray) -> None:
        """No more delay in a packet than its latency above the floor (`room`): an event may run
        longer than the packet was late, and only the part that delayed the packet is its."""
        self.delay = np.minimum(self.raw_delay, room)

    def hits(self, excess: np.ndarray) -> np.ndarray:
        return pk.explains(self.delay, excess)

    def significant(self, excess: np.ndarray) -> bool:
        n = int(self.hits(excess).sum())
        if n == 0:
            return False
        if self.expected is None:
            return n >= CAUSE_FLOOR * excess.size
        margin = max(2.0, 3.0 * math.sqrt(self.expected))
        # Beyond chance by a margin, and markedly more often than chance: with many tail
        # packets a feature nearly every packet has (a generator late all run long on a busy
        # host) clears the margin while saying nothing about which packets are the tail.
        return (
            n >= self.expected + margin
            and n >= MIN_LIFT * self.expected
            and (n - self.expected) >= CAUSE_FLOOR * excess.size
        )


def by_chance(
    delay_of: Callable[[np.ndarray, np.ndarray], np.ndarray],
    a: np.ndarray,
    b: np.ndarray,
    span: tuple[int, int],
    seed: int,
    excess: np.ndarray,
) -> float:
    """How many tail packets a cause would explain by chance: the mean, over the windows
    [a, b) moved by `shifted_windows`, of the packets its delay in the moved windows explains."""
    return float(np.mean([pk.explains(delay_of(sa, sb), excess).sum() for sa, sb in shifted_windows(a, b, span, seed)]))


def chance_seed(p: pk.Packets) -> int:
    """The seed of the moved windows: the packets', not the run's id, so the same run explains
    the same in any database (an imported run keeps its explanation, tests/compare/test_bundle.py)."""
    return int(p.pre_ns[0]) & 0xFFFF_FFFF
