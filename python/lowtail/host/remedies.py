"""The remedies of the URLLC studies, one table: what removes a cause of tail latency,
in the host plan's terms (boot parameters, isolation, affinity, the run's own set-up),
with the study it comes from.

`host plan` builds its boot parameters from `BOOT_PARAMETERS`; `lowtail explain` gives
each cause the remedy `remedy_for` picks from `REMEDIES`; the later `tune` command applies
the same entries. A remedy names the boot parameters it needs by their names here, so a
purpose or a source is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowtail.explain.document import RemedyDoc

T1, T2 = "JNSM 2023, Table 1", "Perf. Eval. 2024, Table 2"
BOTH = f"{T1}; {T2}"


@dataclass(frozen=True)
class BootParameterFacts:
    """Why a boot parameter is in the plan, and which study's table asks for it."""

    purpose: str
    source: str


# Every boot parameter of the host plan (host/plan.py decides values and which apply).
BOOT_PARAMETERS: dict[str, BootParameterFacts] = {
    "isolcpus": BootParameterFacts("keep the scheduler's other tasks off the DuT cores", T1),
    "nohz_full": BootParameterFacts("no timer tick on a core running one task", T1),
    "rcu_nocbs": BootParameterFacts("RCU callbacks run on housekeeping cores", BOTH),
    "rcu_nocb_poll": BootParameterFacts("RCU callback threads poll instead of being woken", BOTH),
    "irqaffinity": BootParameterFacts("device interrupts on housekeeping cores", BOTH),
    "idle": BootParameterFacts("cores never enter a sleep state", BOTH),
    "intel_idle.max_cstate": BootParameterFacts("no deep C-states", T1),
    "intel_pstate": BootParameterFacts("no P-state driver changing the frequency", T1),
    "tsc": BootParameterFacts("no periodic TSC verification", BOTH),
    "mce": BootParameterFacts("no handling of corrected machine-check errors", BOTH),
    "audit": BootParameterFacts("no audit subsystem", BOTH),
    "nmi_watchdog": BootParameterFacts("no NMI watchdog", BOTH),
    "skew_tick": BootParameterFacts("ticks of different cores at different times", BOTH),
    "nosoftlockup": BootParameterFacts("no soft-lockup detector and its backtraces", BOTH),
    "nosmt": BootParameterFacts("no hyper-threads sharing a core with the DuT", T2),
}


@dataclass(frozen=True)
class Remedy:
    """What removes a cause: the action in words, the boot parameters it needs (names of
    `BOOT_PARAMETERS`), and the study that found it."""

    id: str
    action: str
    boot_parameters: tuple[str, ...]
    source: str

    def doc(self) -> RemedyDoc:
        return RemedyDoc(id=self.id, action=self.action, boot_parameters=list(self.boot_parameters), source=self.source)


_REMEDIES = (
    Remedy(
        "isolate-dut-cores",
        "isolate the DuT's cores from the scheduler and keep every other task off them (isolcpus, a cpuset of "
        "its own; `lowtail host plan` writes the line), so no task can take the core while packets wait",
        ("isolcpus", "nohz_full"),
        f"Commun. Mag. 2020, §V (guidelines i-ii); {T1}",
    ),
    Remedy(
        "no-tick",
        "stop the periodic timer tick on the DuT's cores (nohz_full, with isolcpus; one runnable task per core)",
        ("nohz_full", "isolcpus", "skew_tick"),
        f"Commun. Mag. 2020, §V-B; {T1}",
    ),
    Remedy(
        "irq-work",
        "move the work that raises IRQ-work interrupts off the DuT's cores (nohz_full, rcu_nocbs; no perf or "
        "printk on them)",
        ("nohz_full", "rcu_nocbs"),
        T1,
    ),
    Remedy(
        "tlb-shootdowns",
        "keep other threads of the DuT's processes and everything that maps or unmaps memory off the DuT's "
        "cores (isolcpus; no transparent huge pages or KSM remapping there): each TLB shootdown stops every "
        "core the address space runs on",
        ("isolcpus",),
        "JNSM 2023, §5 (TLB shootdowns on the DuT core)",
    ),
    Remedy(
        "device-irq-affinity",
        "send device interrupts to housekeeping cores (irqaffinity at boot, /proc/irq/N/smp_affinity at run "
        "time; stop irqbalance)",
        ("irqaffinity",),
        BOTH,
    ),
    Remedy(
        "rcu-offload",
        "run RCU callbacks on housekeeping cores (rcu_nocbs, rcu_nocb_poll)",
        ("rcu_nocbs", "rcu_nocb_poll"),
        BOTH,
    ),
    Remedy(
        "softirq-affinity",
        "keep other traffic's packet processing off the DuT's cores (irqaffinity for the NICs' queues, RPS "
        "masks without the DuT's cores)",
        ("irqaffinity",),
        BOTH,
    ),
    Remedy(
        "reschedule",
        "leave the DuT alone on its core (isolcpus): rescheduling IPIs wake other tasks there",
        ("isolcpus",),
        T1,
    ),
    Remedy(
        "measure-again-quieter",
        "measure again on a quieter host: give the generator and the timestamper isolated cores of their own "
        "(isolcpus; [cores] in the experiment file), stop other load, or lower the rate — these packets were "
        "delayed by the measurement, not by the DuT",
        ("isolcpus",),
        "JNSM 2023, §4 (the measurement's own noise floor)",
    ),
    Remedy(
        "own-core-per-role",
        "give the DuT cores of its own, apart from the generator's and the timestamper's ([cores] in the "
        "experiment file, on a host with enough cores): these packets waited for the measurement's own programs "
        "on the core they share with the DuT, not for anything of the DuT",
        ("isolcpus",),
        "JNSM 2023, §4 (the measurement's own noise floor)",
    ),
    Remedy(
        "lowtail-off-dut-cores",
        "keep lowtail's own processes (the command, its interrupt sampler, the helpers it starts) off the DuT's "
        "cores: give the run a housekeeping core apart from the DuT's ([cores] housekeeping, on a host with enough "
        "cores); these packets waited for the measurement's own processes, not for anything of the DuT",
        ("isolcpus",),
        "JNSM 2023, §4 (the measurement's own noise floor), §6 (its interrupt monitor on the DuT's core)",
    ),
    Remedy(
        "dedicated-vcpus",
        "measure again on dedicated vCPUs or on bare metal: this machine is a virtual machine whose hypervisor "
        "ran something else on its CPUs while these packets were in flight (steal time in /proc/stat), which "
        "nothing inside the machine can prevent or trace — ask for vCPUs pinned to host cores of their own "
        "(no overcommit), or measure on a host of your own; these packets were delayed by the measurement's "
        "host, not by the DuT",
        (),
        "JNSM 2023, §4 (the measurement's own noise floor), §6 (virtualization)",
    ),
    Remedy(
        "below-r-max",
        "offer less than the DuT's R_max, or give it faster cores or less work per packet: above R_max the "
        "queue grows without bound",
        (),
        "NOMS 2020, §VI (the overload model, Tables IV-V)",
    ),
    Remedy(
        "smaller-batches",
        "use smaller batches (batch = 1) or a batch timeout: the first packet of a batch waits for the whole "
        "batch to be processed",
        (),
        "NOMS 2020, §V-B; Commun. Mag. 2020, §IV (batch sizes)",
    ),
    Remedy(
        "aliasing",
        "remove the periodic interrupt from the DuT's cores (nohz_full for the tick): its beat with the "
        "traffic makes the sawtooth lines of the worst events",
        ("nohz_full", "isolcpus"),
        "Commun. Mag. 2020, §V-B; NOMS 2020, §V-C",
    ),
    # The run-time remedies `lowtail tune` applies (through host/apply.py, each with its undo).
    Remedy(
        "move-tasks-off-dut-cores",
        "move the tasks that took the DuT's core to housekeeping cores (their CPU affinity, now; isolcpus at "
        "boot keeps every other task off)",
        ("isolcpus",),
        f"Commun. Mag. 2020, §V (guidelines i-ii); {T1}",
    ),
    Remedy(
        "irqs-off-dut-cores",
        "send the interrupts that fire on the DuT's cores to housekeeping cores (/proc/irq/N/smp_affinity_list "
        "now, irqaffinity at boot)",
        ("irqaffinity",),
        BOTH,
    ),
    Remedy(
        "vmstat-interval",
        "update the VM statistics once an hour (vm.stat_interval = 3600): its work item runs on every core every second",
        (),
        "JNSM 2023, §4.1",
    ),
    Remedy(
        "timer-migration",
        "keep timers on the core that set them (kernel.timer_migration = 0)",
        (),
        T1,
    ),
    Remedy(
        "no-transparent-huge-pages",
        "no transparent huge pages or KSM (their compaction and merging remap memory: TLB shootdowns on every "
        "core of the address space)",
        (),
        "JNSM 2023, §6; Perf. Eval. 2024, §5",
    ),
    Remedy(
        "performance-governor",
        "run the DuT's cores at full frequency (the performance governor) and out of deep idle states",
        ("idle", "intel_idle.max_cstate", "intel_pstate"),
        BOTH,
    ),
    Remedy(
        "pin-vcpus",
        "pin the VM's vCPU threads to isolated host cores of their own, real-time, with the emulator's "
        "threads on housekeeping cores; isolate the guest's cores too (`host plan --guest-vcpus`)",
        ("isolcpus", "nohz_full", "rcu_nocbs"),
        f"JNSM 2023, §6 (virtualization); {T2}",
    ),
)
REMEDIES: dict[str, Remedy] = {r.id: r for r in _REMEDIES}

# The remedy of each interrupt vector the traces name.
_VECTOR_REMEDIES = {
    "local_timer": "no-tick",
    "irq_work": "irq-work",
    "call_function": "tlb-shootdowns",
    "call_function_single": "tlb-shootdowns",
    "reschedule": "reschedule",
}
_SOFTIRQ_REMEDIES = {"RCU": "rcu-offload", "TIMER": "no-tick", "HRTIMER": "no-tick", "SCHED": "isolate-dut-cores"}
_KIND_REMEDIES = {
    "preemption": "isolate-dut-cores",
    "generator_stall": "measure-again-quieter",
    "timestamper_stall": "measure-again-quieter",
    "shared_core": "own-core-per-role",
    "lowtail_process": "lowtail-off-dut-cores",
    "hypervisor": "dedicated-vcpus",
    "overload": "below-r-max",
    "batching": "smaller-batches",
    "aliasing": "aliasing",
    "virtualization": "pin-vcpus",
    "softirq": "softirq-affinity",
    "interrupt": "device-irq-affinity",
}


def remedy_for(kind: str, name: str = "") -> Remedy:
    """The remedy of a cause of this kind (`lowtail explain`'s kinds), given what it names
    (a vector, a softirq, an IRQ)."""
    base = name.split(" ", 1)[0]
    if kind in ("interrupt", "aliasing") and base in _VECTOR_REMEDIES:
        return REMEDIES["aliasing" if kind == "aliasing" else _VECTOR_REMEDIES[base]]
    if kind == "softirq" and base in _SOFTIRQ_REMEDIES:
        return REMEDIES[_SOFTIRQ_REMEDIES[base]]
    return REMEDIES[_KIND_REMEDIES[kind]]
