"""A chain of DuTs (`chain = ["fw", "ips", "fwd"]` in an experiment file): each hop a DuT of
its own kind, with its own options, cores and containment, started in its own namespace of
the chain's testbed (`NamespacesTestbed(hops=N)`, `hop(i)`) in the order traffic passes
them. It is one DuT to the run — ready when traffic gets through all of them, failed when any
hop fails — and keeps each hop's own facts (statistics, containment) under its name.

Not a kind a [[dut]] table may name: a chain is made of [[dut]] tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from lowtail.host.interrupts import InterruptSample
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import CHAIN, ChainOptions, Containment, DutCounters, DutOptions
from lowtail.testbed.duts.base import Dut, DutFacts
from lowtail.testbed.protocol import Testbed

__all__ = ["CHAIN", "Chain"]  # CHAIN: the kind of a configuration that is a chain of DuTs


class Chain(Dut[ChainOptions]):
    kind: ClassVar[str] = CHAIN
    Options = ChainOptions

    def __init__(self, name: str, config: ChainOptions, make: Callable[[str, str, DutOptions], Dut[Any]]):
        """`make(kind, name, options)` makes each hop's DuT (duts.make_dut)."""
        super().__init__(name, config)
        self.hops: list[Dut[Any]] = [make(h.kind, h.name, h.options) for h in config.hops]
        # The slowest hop's start-up decides how long the chain may take to forward.
        self.ready_timeout_s = sum(h.ready_timeout_s for h in self.hops)

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        hop = getattr(tb, "hop", None)
        assert hop is not None, "a chain runs on a namespaces testbed of its hops"
        for index, dut in enumerate(self.hops):
            dut.start(hop(index, dut.name), plan)
        self.containment = self._containment()

    def _containment(self) -> Containment:
        """The chain's containment: every hop's (by name), and the cores they use together,
        which the run's trace records as the DuT's."""
        cpus = sorted({c for h in self.hops for c in (h.containment.get("cpus") or [])})
        return {"mode": CHAIN, "cpus": cpus or None, "hops": {h.name: h.containment for h in self.hops}}

    def failure(self) -> str | None:
        return next((f for f in (h.failure() for h in self.hops) if f), None)

    def stop(self) -> DutCounters:
        """Stop the hops, last first (the traffic's way back); each one's statistics by name."""
        return {h.name: h.stop() for h in reversed(self.hops)}

    def facts(self, statistics: DutCounters, frames_sent: int | None) -> DutFacts:
        """Each hop's facts under its name; every hop's reasons to distrust the run, named."""
        per_hop = [(h, h.facts(statistics.get(h.name) or {}, frames_sent)) for h in self.hops]
        virtualization = next((f["virtualization"] for _, f in per_hop if f["virtualization"]), None)
        return DutFacts(
            statistics={h.name: f["statistics"] for h, f in per_hop},
            containment=self._containment(),
            virtualization=virtualization,
            invalid_reasons=[f"hop {h.name}: {r}" for h, f in per_hop for r in f["invalid_reasons"]],
        )

    def guest_interrupts(self, start_ns: int, end_ns: int) -> list[InterruptSample]:
        return [i for h in self.hops for i in h.guest_interrupts(start_ns, end_ns)]

    def busy_polls(self, plan: CoreRoles, isolated: set[int] | None = None) -> bool:
        return any(h.busy_polls(plan, isolated) for h in self.hops)

    def check_plan(self, plan: CoreRoles, isolated: set[int] | None = None) -> None:
        for h in self.hops:
            h.check_plan(plan, isolated)

    def core_plan_warnings(self, plan: CoreRoles, isolated: set[int] | None = None) -> list[str]:
        return [f"hop {h.name}: {w}" for h in self.hops for w in h.core_plan_warnings(plan, isolated)]
