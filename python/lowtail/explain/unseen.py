"""What an explanation could not see, as part of its answer: each thing that may have delayed
tail packets where no trace records it, with the share of the tail it could hold — the tail
packets no cause explains that it could have delayed.

    hypervisor   steal time on a role's CPU (this machine is a VM): the hypervisor ran
                 something else there, seen only as a count per sample (~100 ms) in whole
                 ticks of the kernel's USER_HZ — its resolution is said with it
    untraced     a role whose cores were not traced (another host, tracing refused)
    no_trace     the run has no kernel trace at all (no tracefs, tracing off, lost)
    vm_exits     a VM DuT under QEMU's emulator (TCG): its exits are invisible to the host's
                 kernel

The hypervisor is a cause of its own kind: it never carries a process's name (no task inside
the machine ran; the vCPU did not run at all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lowtail.core.units import format_ns
from lowtail.explain import packets as pk
from lowtail.explain.document import UnseenDoc
from lowtail.explain.steal import role_cpus, steal_of, steal_resolution, tick_ns
from lowtail.trace.document import RoleDoc, UntracedDoc

Samples = Sequence[tuple[int, int, str, int, int]]


@dataclass
class Unseeable:
    """What a run's facts say may have happened where no trace looks: the steal samples (and how
    often they were taken), roles whose cores were not traced ({role, host, reason}), why there
    is no trace at all, why a VM's exits cannot be in it."""

    steal: Samples = ()
    steal_period_ns: int = 0
    untraced: list[UntracedDoc] = field(default_factory=list)
    no_trace: str | None = None
    vm_exits: str | None = None


def unseen_entries(
    facts: Unseeable,
    steal_roles: dict[str, RoleDoc] | None,
    window: tuple[np.ndarray, np.ndarray],
    excess: np.ndarray,
    unexplained: np.ndarray,
    tail_packets: int,
) -> list[UnseenDoc]:
    """What could not be seen in this run (see the module's docstring); `window` is each tail
    packet's [due, POST), `unexplained` which of them no cause keeps."""
    left = float(unexplained.sum()) / tail_packets if tail_packets else 0.0
    out = _hypervisor(facts.steal, facts.steal_period_ns, steal_roles, window, excess, unexplained, tail_packets)
    if facts.no_trace is not None:
        out.append(
            UnseenDoc(
                kind="no_trace",
                what=f"no kernel trace ({facts.no_trace}): what ran on the roles' cores is not among the causes, "
                "which come from the packets, the interrupt samples and the steal time alone",
                role=None,
                host=None,
                cpu=None,
                share=left,
            )
        )
    else:
        for u in facts.untraced:
            where = f" on {u['host']}" if u.get("host") else ""
            out.append(
                UnseenDoc(
                    kind="untraced",
                    what=f"the {u['role']}'s cores{where} were not traced ({u['reason']}): what ran there is not "
                    "among the causes",
                    role=str(u["role"]),
                    host=str(u.get("host") or "") or None,
                    cpu=None,
                    share=left,
                )
            )
    if facts.vm_exits is not None:
        out.append(
            UnseenDoc(
                kind="vm_exits",
                what=f"VM exits are not visible: {facts.vm_exits}",
                role="host",
                host=None,
                cpu=None,
                share=left,
            )
        )
    return out


def _hypervisor(
    samples: Samples,
    period_ns: int,
    roles: dict[str, RoleDoc] | None,
    window: tuple[np.ndarray, np.ndarray],
    excess: np.ndarray,
    unexplained: np.ndarray,
    tail_packets: int,
) -> list[UnseenDoc]:
    """One entry per role CPU the hypervisor stole time from during the run: how much, at what
    resolution, and the share of the tail it could hold (the unexplained tail packets its steal
    could have delayed enough to explain)."""
    if roles is None or not samples:
        return []
    owner = role_cpus(roles)
    cpus = set(owner) or {int(s[1]) for s in samples}
    tick = tick_ns()
    out = []
    for steal in steal_of(samples, cpus):
        # The sampler's period (its samples with steal are often its late ones: the hypervisor
        # held its thread too), else what the rows with steal say.
        interval = period_ns or int(np.median(steal.end - steal.start))
        could = pk.explains(steal.delay(*window), excess) & unexplained if tail_packets else unexplained
        whose = f" (the {owner[steal.cpu]}'s)" if steal.cpu in owner else ""
        out.append(
            UnseenDoc(
                kind="hypervisor",
                what=f"the hypervisor: {format_ns(int(steal.stolen.sum()))} of steal on CPU {steal.cpu}{whose} in "
                f"{steal.start.size} of its samples; inside this machine no task ran then, so no trace records when",
                role="host",
                host=None,
                cpu=steal.cpu,
                share=float(could.sum()) / tail_packets if tail_packets else 0.0,
                resolution=steal_resolution(interval, tick),
                sampling_interval_ns=interval,
                tick_ns=tick,
                steal_ns=int(steal.stolen.sum()),
            )
        )
    return out
