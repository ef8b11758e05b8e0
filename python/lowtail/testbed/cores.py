"""Which core does what during a run: the generator busy-waits and gets a core of its own
wherever possible; the timestamper drains its rings; a busy-polling DuT wants one too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan, plan_for_roles, role_cores
from lowtail.host.sysroot import SysRoot
from lowtail.testbed.document import CorePlanDocument

# SCHED_FIFO priorities of the testbed's programs. lowtail-gen takes 40 by itself when it
# is pinned (and the plan lets it, see `generator_realtime`); a program that sleeps until
# it has work sits above it, so that on a shared core it preempts a busy-waiting one at
# once: the forwarder, and above it the timestamper (which must drain its rings even
# while an overloaded forwarder never sleeps).
GENERATOR_RT_PRIORITY = 40
# A program that busy-waits on a core others use too (the generator, a DuT that polls)
# runs as an ordinary task at this nice level: other tasks get the core in short slices
# only (see `generator_realtime`), where real-time it would be throttled in 50 ms pieces.
BUSY_WAIT_NICE = -20
DUT_RT_PRIORITY = 45
CAPTURE_RT_PRIORITY = 50


# The user's [cores] table: a role ("housekeeping", "generator", "capture", "dut") → its
# core, or its cores for the DuT; CoreRoles checks the names.
CoreChoices = Mapping[str, int | list[int]]


@dataclass(frozen=True)
class CoreRoles:
    """The core each program of a run gets (housekeeping and the interrupt sampler, the
    generator, the timestamper, the DuT), placed by the one core plan (host/plan.py
    `role_cores`). The host's boot-time split into housekeeping and isolated cores that
    these roles ask for is `boot_plan` (`lowtail.host.plan.CorePlan`)."""

    housekeeping: int
    generator: int
    capture: int
    dut: list[int] = field(default_factory=list)

    @classmethod
    def for_host(cls, overrides: CoreChoices | None = None) -> CoreRoles:
        """A plan for the cores this process may use, with the user's choices on top.
        With 4+ cores every role has its own; with 2 the generator has one and the rest
        share the other (the best two cores allow; the report shows the plan)."""
        return cls.for_cpus(sorted(os.sched_getaffinity(0)), overrides)

    @classmethod
    def for_cpus(cls, cpus: list[int], overrides: CoreChoices | None = None) -> CoreRoles:
        """The same plan for a host whose usable cores are `cpus` (another host's): the one
        core plan's roles (host/plan.py `role_cores`, which `host plan`, `host audit`, `tune`
        and `explain` read too)."""
        plan = role_cores(cpus, overrides)
        return cls(plan["housekeeping"], plan["generator"], plan["capture"], list(plan["dut"]))

    def boot_plan(self, cpus: list[int], booted: list[int] | None = None) -> CorePlan:
        """The boot-time split of a host's CPUs these roles ask for (host/plan.py
        `plan_for_roles`), with which roles share a core and why."""
        return plan_for_roles(self.as_dict(), cpus, booted)

    def shared(self, cores: list[int]) -> bool:
        """Whether any of these (DuT) cores also serves the generator, the timestamper or
        housekeeping: a program there must not busy-poll without end."""
        return bool(set(cores) & {self.housekeeping, self.generator, self.capture})

    def roles_on(self, core: int) -> list[str]:
        """The testbed's own roles on a core, in words ("the generator", "the timestamper", "housekeeping")."""
        roles = {"the generator": self.generator, "the timestamper": self.capture, "housekeeping": self.housekeeping}
        return [name for name, c in roles.items() if c == core]

    def dedicated(self, cores: list[int], isolated: set[int] | None = None) -> bool:
        """Whether these (DuT) cores are the DuT's alone: isolated from the scheduler
        (isolcpus) and serving no other role, so a program there may busy-poll real-time."""
        if isolated is None:
            isolated = isolated_cpus()
        return set(cores) <= isolated and not self.shared(cores)

    def generator_realtime(self, isolated: set[int] | None = None) -> bool:
        """Whether the busy-waiting generator should run under SCHED_FIFO: only on a core
        the scheduler keeps other tasks off (isolcpus). Elsewhere ordinary tasks queue on
        its core, and the kernel lends them the core in one piece once a second (RT
        throttling: 50 ms); as an ordinary task at nice -20 the generator keeps almost all
        of the core and loses it only in short time slices. Measured on the 2-vCPU VM
        shared with compiling engineers, 100 kpps through kernel-mirred, 5 s, two rounds:
        SCHED_FIFO p99 pacing error 40-47 ms, longest stall 54-56 ms, 99.4-99.6 % of the
        rate; nice -20: 3.4-5.2 ms, 5-10 ms, 100 %; nice 0: 3.6-12 ms, 6-18 ms, 100 %, but
        off its core 19 % of one run (5 % otherwise), where a busy core can starve it."""
        if isolated is None:
            isolated = isolated_cpus()
        return self.generator in isolated

    def generator_scheduling(self, isolated: set[int] | None = None) -> list[str]:
        """lowtail-gen's scheduling arguments for this plan (see `generator_realtime`)."""
        if self.generator_realtime(isolated):
            return ["--rt-priority", str(GENERATOR_RT_PRIORITY)]
        return ["--nice", str(BUSY_WAIT_NICE)]

    def as_dict(self) -> CorePlanDocument:
        """The roles as stored with a run and its experiment."""
        return {
            "housekeeping": self.housekeeping,
            "generator": self.generator,
            "capture": self.capture,
            "dut": list(self.dut),
        }

    @staticmethod
    def available() -> list[int]:
        """The cores this process may run on."""
        return sorted(os.sched_getaffinity(0))


def housekeeping_cores(plan: CoreRoles, dut_cores: list[int], available: list[int] | None = None) -> list[int]:
    """Where a DuT's threads other than its forwarding ones go (a VM's emulator threads, an
    IPS's management threads): the housekeeping core if it is not a DuT core, else any other
    core but the generator's; on a host with no such core they share the DuT's cores (the
    run records that)."""
    if plan.housekeeping not in dut_cores:
        return [plan.housekeeping]
    available = CoreRoles.available() if available is None else available
    others = [c for c in available if c not in dut_cores and c != plan.generator]
    return others or list(dut_cores)


def isolated_cpus() -> set[int]:
    """The cores the kernel isolates from the scheduler (isolcpus), as it reports them."""
    return set(Host(SysRoot("/")).isolated_in_effect)
