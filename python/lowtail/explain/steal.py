"""The hypervisor as a cause: on a virtual machine, the hypervisor runs something else on a
vCPU now and then, and no ftrace event inside the guest records it — the vCPU simply did not
run. Its only trace is the CPU's steal time (host/steal.py), which every run samples with its
interrupts (every ~100 ms, in 10 ms ticks).

Tail packets that nothing else explains, and that were in flight during a sampling interval in
which a role's CPU had steal, are the `hypervisor` cause's: role "host", a measurement artefact
like the generator's stall (this machine could not measure what was asked; the DuT is not to
blame). In each interval the steal could have delayed a packet by at most the time the packet
was in flight inside it, and at most the steal of the interval; the same rule as every other
cause then decides whether that explains the packet, and the same chance test
(explain/candidates.py: the windows moved elsewhere in the run) whether the steal explains more
of the tail than it would anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lowtail.core.units import format_ns
from lowtail.explain import packets as pk
from lowtail.explain.candidates import Candidate, by_chance, chance_seed
from lowtail.explain.document import Evidence
from lowtail.explain.words import HYPERVISOR
from lowtail.host.steal import user_hz
from lowtail.trace.document import RoleDoc

# How many of the intervals with steal around tail packets the evidence lists.
EVIDENCE_INTERVALS = 5


@dataclass
class Steal:
    """One CPU's sampling intervals (start, end] in which the hypervisor stole time from it,
    in time order, and how much it stole in each (ns)."""

    cpu: int
    start: np.ndarray
    end: np.ndarray
    stolen: np.ndarray

    def delay(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """For each window [a, b): the most the steal could have delayed it — in each interval
        it overlaps, the overlap, at most the interval's steal."""
        out = np.zeros(a.shape, dtype=np.int64)
        if self.start.size == 0:
            return out
        first = np.searchsorted(self.end, a, side="right")
        past = np.searchsorted(self.start, b, side="left")
        for k in range(int((past - first).max(initial=0))):
            i = first + k
            inside = i < past
            j = np.minimum(i, self.start.size - 1)
            overlap = np.minimum(self.end[j], b) - np.maximum(self.start[j], a)
            out += np.where(inside, np.clip(overlap, 0, self.stolen[j]), 0)
        return out


def steal_resolution(interval_ns: int, tick_ns: int) -> str:
    """What steal samples can resolve, in words."""
    return (
        f"steal is sampled every {format_ns(interval_ns)} and counted in whole ticks of {format_ns(tick_ns)} "
        f"(USER_HZ): a sample says how much the hypervisor took in its interval, not when — a steal shorter than "
        f"a tick may show in a later interval"
    )


def tick_ns() -> int:
    """The kernel's USER_HZ tick, the unit /proc/stat counts steal in."""
    return 1_000_000_000 // user_hz()


def steal_of(samples: Sequence[tuple[int, int, str, int, int]], cpus: set[int]) -> list[Steal]:
    """The steal of these CPUs from a run's stored steal samples (t_ns, cpu, kind, delta_ns,
    interval_ns): each sample covers (t_ns − interval_ns, t_ns]."""
    out = []
    for cpu in sorted(cpus):
        rows = sorted((s[0], s[4], s[3]) for s in samples if s[1] == cpu and s[3] > 0)
        if not rows:
            continue
        end = np.array([r[0] for r in rows], dtype=np.int64)
        start = end - np.array([r[1] for r in rows], dtype=np.int64)
        out.append(Steal(cpu, start, end, np.array([r[2] for r in rows], dtype=np.int64)))
    return out


def role_cpus(roles: Mapping[str, RoleDoc]) -> dict[int, str]:
    """Whose each measured core is: the DuT's first, then the generator's, then the timestamper's."""
    owner: dict[int, str] = {}
    for role in ("dut", "generator", "timestamper"):
        for cpu in roles[role]["cpus"] if role in roles else []:
            owner.setdefault(int(cpu), role)
    return owner


def hypervisor_candidate(
    p: pk.Packets,
    samples: Sequence[tuple[int, int, str, int, int]],
    roles: dict[str, RoleDoc],
    in_tail: np.ndarray,
    excess: np.ndarray,
    due_since: np.ndarray,
    taken: np.ndarray,
    period_ns: int = 0,
) -> Candidate | None:
    """The hypervisor as a candidate cause of the tail packets `taken` leaves (those no other
    significant cause explains); None when no role's CPU had steal. A packet's window opens
    when it was due (`due_since`: the generator's stall counts from then) and closes at POST."""
    owner = role_cpus(roles)
    # A run whose roles are unknown: the steal of every CPU sampled.
    cpus = set(owner) or {int(s[1]) for s in samples}
    steals = steal_of(samples, cpus)
    if not steals:
        return None
    a, b = due_since[in_tail], p.post_ns[in_tail]

    def delay_of(wa: np.ndarray, wb: np.ndarray) -> np.ndarray:
        most = np.max(np.stack([s.delay(wa, wb) for s in steals]), axis=0)
        return np.where(taken, 0, most)

    delay = delay_of(a, b)
    span = (int(p.pre_ns[0]), int(p.post_ns[-1]))
    expected = by_chance(delay_of, a, b, span, chance_seed(p), excess)
    hit = pk.explains(delay, excess)
    # The CPU whose steal explains most of the tail packets (the DuT's first on a tie).
    per_cpu = [int((pk.explains(s.delay(a, b), excess) & hit).sum()) for s in steals]
    top = steals[int(np.argmax(per_cpu))]
    return Candidate(
        HYPERVISOR,
        "host",
        top.cpu,
        f"steal time on CPU {','.join(str(s.cpu) for s in steals)}",
        delay,
        expected,
        _evidence(steals, owner, a[hit], b[hit], period_ns),
        windows=(a, b),
        event_in=lambda wa, wb: _largest_steal(steals, wa, wb),
    )


def _largest_steal(steals: list[Steal], a: int, b: int) -> Evidence | None:
    """The sampling interval with the most steal among those the window [a, b) flew in."""
    found = [
        (int(s.stolen[i]), int(s.start[i]), int(s.end[i]), s.cpu)
        for s in steals
        for i in np.flatnonzero((s.start < b) & (s.end > a))
    ]
    if not found:
        return None
    stolen, start, end, cpu = max(found, key=lambda f: (f[0], -f[1]))
    return {
        "start_ns": start,
        "duration_ns": stolen,
        # Read as "<what> ran <duration>": the hypervisor ran something else this long.
        "what": f"the hypervisor (steal on CPU {cpu} in its {format_ns(end - start)} sample)",
    }


def _evidence(steals: list[Steal], owner: dict[int, str], a: np.ndarray, b: np.ndarray, period_ns: int) -> Evidence:
    """What the hypervisor took, per CPU, and the intervals with steal the tail packets flew in."""
    cpus = ", ".join(f"CPU {s.cpu}" + (f" ({owner[s.cpu]})" if s.cpu in owner else "") for s in steals)
    total = {str(s.cpu): int(s.stolen.sum()) for s in steals}
    interval = period_ns or int(np.median(np.concatenate([s.end - s.start for s in steals])))
    around = []
    for s in steals:
        holds = [i for i in range(s.start.size) if bool(np.any((a < s.end[i]) & (b > s.start[i])))]
        around += [
            {"cpu": s.cpu, "start_ns": int(s.start[i]), "end_ns": int(s.end[i]), "steal_ns": int(s.stolen[i])}
            for i in holds
        ]
    around.sort(key=lambda r: (-r["steal_ns"], r["start_ns"]))
    return {
        "what": f"the hypervisor ran something else on {cpus} (steal time) while these packets were in flight; "
        f"no trace inside this machine records it",
        "steal_ns_by_cpu": total,
        "intervals_with_steal": int(sum(s.start.size for s in steals)),
        "sampling_interval_ns": interval,
        "tick_ns": tick_ns(),
        "resolution": steal_resolution(interval, tick_ns()),
        "intervals": around[:EVIDENCE_INTERVALS],
    }
