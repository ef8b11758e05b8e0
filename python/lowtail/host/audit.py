"""`lowtail host audit`: a host against the URLLC studies' low-latency guidelines.

One small function per check, registered in CHECKS in the order a report lists them.
Each returns a Check: pass, warn or fail (skip when it does not apply to this host), what
was observed, why it matters — the effect in the URLLC studies — and the exact remedy."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable

from lowtail.host.document import AuditCheckDocument, AuditDocument, AuditScore
from lowtail.host.facts import Host, split_isolcpus
from lowtail.host.plan import CorePlan
from lowtail.host.sysroot import format_cpulist

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"


# A check's outcome is its document: what `host audit --json` prints of it.
Check = AuditCheckDocument


CheckFn = Callable[[Host, CorePlan], Check]
# What a check's own function returns: (status, observed, expected, remedy).
Outcome = tuple[str, str, str, str]
CheckBody = Callable[[Host, CorePlan], Outcome]
CHECKS: list[tuple[str, CheckFn]] = []


def check(check_id: str, title: str, category: str, why: str) -> Callable[[CheckBody], CheckFn]:
    """Register a check; the function returns (status, observed, expected, remedy)."""

    def register(fn: CheckBody) -> CheckFn:
        def run(host: Host, plan: CorePlan) -> Check:
            status, observed, expected, remedy = fn(host, plan)
            return Check(
                id=check_id,
                title=title,
                category=category,
                status=status,
                observed=observed,
                expected=expected,
                why=why,
                remedy=remedy if status != PASS else "",
            )

        CHECKS.append((check_id, run))
        return run

    return register


def _cl(cpus: Iterable[int] | None) -> str:
    return format_cpulist(cpus) if cpus else "none"


def _boot(name: str, value: str | None = None) -> str:
    text = name if value is None else f"{name}={value}"
    return f"boot with `{text}` (`lowtail host plan` writes the GRUB line)"


def _observed_param(host: Host, name: str) -> str:
    if name not in host.params:
        return "not on the command line"
    v = host.params[name]
    return name if v is None else f"{name}={v}"


def _cpulist_param(host: Host, plan: CorePlan, name: str, miss_status: str) -> tuple[str, str, str, str]:
    want = set(plan.isolated)
    got = host.param_cpus(name)
    expected = f"{name}={_cl(plan.isolated)}"
    if got is None:
        return miss_status, _observed_param(host, name), expected, _boot(name, _cl(plan.isolated))
    missing = want - set(got)
    if missing:
        return (
            FAIL,
            f"{_observed_param(host, name)} (leaves out DuT core {_cl(missing)})",
            expected,
            _boot(name, _cl(plan.isolated)),
        )
    return PASS, _observed_param(host, name), expected, ""


# -- boot parameters (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2) ----------------------------------------------


@check(
    "isolcpus",
    "DuT cores isolated from the scheduler",
    "boot",
    "Other tasks scheduled on the DuT core preempt it for whole time slices, and the DuT can be "
    "migrated; the URLLC studies isolate the packet-processing cores (JNSM 2023, Table 1; Commun. Mag. 2020, guideline vi).",
)
def _isolcpus(host: Host, plan: CorePlan) -> Outcome:
    status = _cpulist_param(host, plan, "isolcpus", FAIL)
    if status[0] == PASS:
        flags, _ = split_isolcpus(host.params["isolcpus"] or "")
        if flags and "domain" not in flags:
            return (
                WARN,
                f"{_observed_param(host, 'isolcpus')} (flags without 'domain': the scheduler "
                "still balances onto these cores)",
                status[2],
                _boot("isolcpus", "domain," + ",".join(flags) + "," + _cl(plan.isolated)),
            )
    return status


@check(
    "nohz_full",
    "No timer tick on the DuT cores",
    "boot",
    "The local timer interrupt (loc, 250 Hz here by default) preempts the DuT for 5.5-13.6 µs each time "
    "and, against constant-rate traffic, draws the aliasing patterns of Commun. Mag. 2020, §V-B and NOMS 2020, §V-C; "
    "nohz_full stops the tick on a core running a single task (JNSM 2023, Table 1).",
)
def _nohz_full(host: Host, plan: CorePlan) -> Outcome:
    return _cpulist_param(host, plan, "nohz_full", FAIL)


@check(
    "rcu_nocbs",
    "RCU callbacks off the DuT cores",
    "boot",
    "RCU callbacks otherwise run in softirq context on the core that queued them; rcu_nocbs moves them "
    "to kernel threads on housekeeping cores (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2; NOMS 2020, §III-d).",
)
def _rcu_nocbs(host: Host, plan: CorePlan) -> Outcome:
    return _cpulist_param(host, plan, "rcu_nocbs", FAIL)


@check(
    "rcu_nocb_poll",
    "RCU callback threads poll",
    "boot",
    "Without polling, the DuT core wakes the offloaded RCU threads itself; rcu_nocb_poll lets them poll from "
    "housekeeping cores (JNSM 2023, Table 1 and Perf. Eval. 2024, Table 2, which spell it rcu_nocbs_poll — a name the kernel ignores).",
)
def _rcu_nocb_poll(host: Host, plan: CorePlan) -> Outcome:
    if "rcu_nocb_poll" in host.params:
        return PASS, "rcu_nocb_poll", "rcu_nocb_poll", ""
    if "rcu_nocbs_poll" in host.params:
        return (
            WARN,
            "rcu_nocbs_poll (misspelt: the kernel does not know it and ignores it)",
            "rcu_nocb_poll",
            "boot with `rcu_nocb_poll` instead of `rcu_nocbs_poll`",
        )
    return WARN, "not on the command line", "rcu_nocb_poll", _boot("rcu_nocb_poll")


@check(
    "irqaffinity",
    "Default IRQ affinity on housekeeping cores",
    "boot",
    "Device interrupts (NIC queues, disks) preempt whichever core handles them; irqaffinity keeps them on the "
    "housekeeping cores from boot on (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2; Commun. Mag. 2020, §III-a).",
)
def _irqaffinity(host: Host, plan: CorePlan) -> Outcome:
    expected = f"irqaffinity={_cl(plan.housekeeping)}"
    got = host.param_cpus("irqaffinity")
    if got is None:
        return FAIL, "not on the command line", expected, _boot("irqaffinity", _cl(plan.housekeeping))
    on_dut = set(got) & set(plan.isolated)
    if on_dut or not got:
        return (
            FAIL,
            f"{_observed_param(host, 'irqaffinity')} (includes DuT core {_cl(on_dut)})",
            expected,
            _boot("irqaffinity", _cl(plan.housekeeping)),
        )
    return PASS, _observed_param(host, "irqaffinity"), expected, ""


def _flag_check(name: str, value: str | None, expected_text: str | None = None) -> CheckBody:
    def fn(host: Host, plan: CorePlan) -> Outcome:
        want = expected_text or (name if value is None else f"{name}={value}")
        if name in host.params and (value is None or host.params[name] == value):
            return PASS, _observed_param(host, name), want, ""
        return WARN, _observed_param(host, name), want, _boot(name, value)

    return fn


check(
    "idle_poll",
    "Idle loop polls (idle=poll)",
    "boot",
    "Waking a core from a sleep state takes 1-40 µs (NOMS 2020, §III-c; Commun. Mag. 2020, §III-b); idle=poll keeps idle cores "
    "spinning (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2). Price: 48 % more power at idle in the URLLC studies (Commun. Mag. 2020, §VI).",
)(_flag_check("idle", "poll"))


def _intel_only(name: str, value: str) -> CheckBody:
    base = _flag_check(name, value)

    def fn(host: Host, plan: CorePlan) -> Outcome:
        if host.vendor != "GenuineIntel":
            return SKIP, f"CPU vendor {host.vendor}: {name} has no effect", f"{name}={value}", ""
        return base(host, plan)

    return fn


check(
    "intel_idle_max_cstate",
    "Intel C-states limited (intel_idle.max_cstate=0)",
    "boot",
    "Deep C-states add wake-up latency of up to tens of µs (NOMS 2020, §III-c); switching energy saving off improves "
    "latency beyond p99.99 by about 10 µs (JNSM 2023, §4.1).",
)(_intel_only("intel_idle.max_cstate", "0"))

check(
    "intel_pstate",
    "Intel P-state driver disabled",
    "boot",
    "The P-state driver changes the core frequency, delaying a core that is idle or partly loaded "
    "(Perf. Eval. 2024, §3; JNSM 2023, Table 1).",
)(_intel_only("intel_pstate", "disable"))

check(
    "tsc_reliable",
    "TSC trusted (tsc=reliable)",
    "boot",
    "The clocksource watchdog periodically checks the TSC against another clock, interrupting every core; "
    "tsc=reliable stops it on CPUs with an invariant TSC (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2).",
)(_flag_check("tsc", "reliable"))

check(
    "mce_ignore_ce",
    "Corrected machine-check errors ignored",
    "boot",
    "Scanning for and logging corrected machine-check errors caused periodic latency spikes (JNSM 2023, §4.1).",
)(_flag_check("mce", "ignore_ce"))

check(
    "audit_off",
    "Audit subsystem off (audit=0)",
    "boot",
    "The audit subsystem adds work on every core that interrupts programs (JNSM 2023, §4.1; Perf. Eval. 2024, Table 2).",
)(_flag_check("audit", "0"))


@check(
    "nmi_watchdog",
    "NMI watchdog off",
    "boot",
    "The hard-lockup watchdog raises a perf-counter NMI on every core periodically (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2).",
)
def _nmi_watchdog(host: Host, plan: CorePlan) -> Outcome:
    runtime = host.sysctl("kernel.nmi_watchdog")
    if host.params.get("nmi_watchdog") == "0":
        return PASS, "nmi_watchdog=0", "nmi_watchdog=0", ""
    if runtime == "0":
        return (
            PASS,
            f"kernel.nmi_watchdog = 0 (off at run time; {_observed_param(host, 'nmi_watchdog')})",
            "nmi_watchdog=0",
            "",
        )
    observed = f"kernel.nmi_watchdog = {runtime}" if runtime is not None else _observed_param(host, "nmi_watchdog")
    return WARN, observed, "nmi_watchdog=0", _boot("nmi_watchdog", "0") + "; now: sysctl -w kernel.nmi_watchdog=0"


check(
    "skew_tick",
    "Ticks skewed between cores (skew_tick=1)",
    "boot",
    "Ticks on all cores at the same instant contend for the same kernel locks; skew_tick=1 offsets them "
    "(JNSM 2023, Table 1; Perf. Eval. 2024, Table 2).",
)(_flag_check("skew_tick", "1"))


@check(
    "nosoftlockup",
    "Soft-lockup detector off",
    "boot",
    "The soft-lockup detector runs a per-core watchdog and logs backtraces of long-running tasks — a polling "
    "DuT looks like one (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2).",
)
def _nosoftlockup(host: Host, plan: CorePlan) -> Outcome:
    if "nosoftlockup" in host.params:
        return PASS, "nosoftlockup", "nosoftlockup", ""
    soft, watchdog = host.sysctl("kernel.soft_watchdog"), host.sysctl("kernel.watchdog")
    if soft == "0" or watchdog == "0":
        return PASS, f"kernel.soft_watchdog = {soft}, kernel.watchdog = {watchdog}", "nosoftlockup", ""
    observed = "not on the command line" + (f"; kernel.soft_watchdog = {soft}" if soft is not None else "")
    return WARN, observed, "nosoftlockup", _boot("nosoftlockup") + "; now: sysctl -w kernel.soft_watchdog=0"


@check(
    "smt",
    "No hyper-thread sibling beside the DuT",
    "hardware",
    "Hyper-threads of one core share its functional units: work on the sibling slows the DuT (JNSM 2023, §2; NOMS 2020, §III-c); "
    "the URLLC studies disable SMT (Perf. Eval. 2024, Table 2 nosmt; Commun. Mag. 2020, guideline iii).",
)
def _smt(host: Host, plan: CorePlan) -> Outcome:
    active = host.root.read("sys/devices/system/cpu/smt/active")
    control = host.root.read("sys/devices/system/cpu/smt/control")
    shared = {c: s for c in plan.isolated for s in host.siblings(c) if s != c}
    if active == "1" or shared:
        pairs = ", ".join(f"{c}+{s}" for c, s in sorted(shared.items())) or "?"
        return (
            FAIL,
            f"SMT active (control {control}); DuT cores share a physical core: {pairs}",
            "SMT off",
            "add `nosmt` to the kernel command line or disable SMT in the firmware; "
            "now: echo off > /sys/devices/system/cpu/smt/control",
        )
    return PASS, f"SMT not active (control {control or 'unknown'})", "SMT off", ""


# -- run-time settings -------------------------------------------------------------------------


@check(
    "cstates",
    "No deep C-states on the DuT cores",
    "runtime",
    "Leaving a sleep state costs its exit latency, 1-40 µs on Intel CPUs (NOMS 2020, §III-c; Commun. Mag. 2020, §III-b), on the "
    "first packet after an idle moment; the URLLC studies keep cores in their most reactive state (JNSM 2023, §4.1).",
)
def _cstates(host: Host, plan: CorePlan) -> Outcome:
    driver = host.root.read("sys/devices/system/cpu/cpuidle/current_driver")
    if host.params.get("idle") == "poll":
        return PASS, f"idle=poll (idle driver {driver or 'none'})", "no state deeper than polling", ""
    deep = [s for c in plan.isolated for s in host.idle_states(c) if s.latency_us > 0 and not s.disabled]
    if not deep:
        states = host.idle_states(plan.isolated[0])
        desc = ", ".join(f"{s.name} {s.latency_us} µs{' (disabled)' if s.disabled else ''}" for s in states)
        return (
            PASS,
            f"idle driver {driver or 'none'}; " + (desc or "no cpuidle states"),
            "no state deeper than polling",
            "",
        )
    worst = max(deep, key=lambda s: s.latency_us)
    names = sorted({f"{s.name} ({s.latency_us} µs)" for s in deep})
    return (
        FAIL,
        f"idle driver {driver}; enabled on DuT cores: {', '.join(names)}",
        "no state deeper than polling",
        f"boot with idle=poll (Intel: intel_idle.max_cstate=0 processor.max_cstate=1); now: `lowtail host apply` "
        f"disables them (echo 1 > /sys/devices/system/cpu/cpu{worst.cpu}/cpuidle/state{worst.index}/disable)",
    )


@check(
    "cpufreq",
    "Frequency fixed at its maximum",
    "runtime",
    "Frequency scaling lowers the clock of a lightly loaded core and raises it late; disabling it improves "
    "latency beyond p99.99 by about 10 µs (JNSM 2023, §4.1; Perf. Eval. 2024, §3).",
)
def _cpufreq(host: Host, plan: CorePlan) -> Outcome:
    seen = {c: host.cpufreq(c) for c in plan.isolated}
    if all(d is None and g is None for d, g in seen.values()):
        where = "a virtual machine: the hypervisor sets it" if host.virtual_machine else "no cpufreq driver"
        return SKIP, f"frequency not under the kernel's control ({where})", "governor performance", ""
    bad = {c: (d, g) for c, (d, g) in seen.items() if g != "performance"}
    desc = "; ".join(sorted({f"driver {d}, governor {g}" for d, g in seen.values()}))
    if bad:
        return (
            FAIL,
            desc + f" (DuT core {_cl(bad)})",
            "governor performance",
            "now: `lowtail host apply` (echo performance > /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor); "
            "Intel: boot with intel_pstate=disable",
        )
    if any(d == "intel_pstate" for d, _ in seen.values()):
        return (
            WARN,
            desc + " (intel_pstate still manages P-states)",
            "intel_pstate disabled",
            _boot("intel_pstate", "disable"),
        )
    return PASS, desc, "governor performance", ""


@check(
    "thp",
    "Transparent huge pages off",
    "runtime",
    "Compaction and khugepaged remap memory, and every remap flushes the TLBs of all cores the process runs "
    "on: the TLB shootdowns behind the up-to-635 µs spikes of JNSM 2023, §6 and the spikes of Perf. Eval. 2024, §5.",
)
def _thp(host: Host, plan: CorePlan) -> Outcome:
    enabled = host.selected("sys/kernel/mm/transparent_hugepage/enabled")
    defrag = host.selected("sys/kernel/mm/transparent_hugepage/defrag")
    if enabled is None:
        return PASS, "no transparent huge pages in this kernel", "never", ""
    observed = f"enabled [{enabled}], defrag [{defrag}]"
    remedy = (
        "now: `lowtail host apply` (echo never > /sys/kernel/mm/transparent_hugepage/enabled); "
        "at boot: transparent_hugepage=never"
    )
    if enabled == "always":
        return FAIL, observed, "never", remedy
    if enabled == "madvise":
        return WARN, observed + " (only programs that ask get them)", "never", remedy
    return PASS, observed, "never", ""


@check(
    "ksm",
    "Kernel samepage merging off",
    "runtime",
    "KSM scans and merges pages in the background, remapping them: TLB shootdowns on the DuT cores "
    "(JNSM 2023, §6, after Rigtorp).",
)
def _ksm(host: Host, plan: CorePlan) -> Outcome:
    run = host.root.read("sys/kernel/mm/ksm/run")
    if run is None:
        return PASS, "no KSM in this kernel", "run = 0", ""
    if run == "0":
        return PASS, "run = 0", "run = 0", ""
    return FAIL, f"run = {run}", "run = 0", "now: `lowtail host apply` (echo 0 > /sys/kernel/mm/ksm/run)"


@check(
    "vm_stat_interval",
    "vmstat refresh rare (vm.stat_interval)",
    "runtime",
    "Every stat_interval seconds (default 1) a vmstat work item runs on every core; the URLLC studies set 3600 s (JNSM 2023, §4.1).",
)
def _vm_stat_interval(host: Host, plan: CorePlan) -> Outcome:
    value = host.sysctl("vm.stat_interval")
    if value is None:
        return SKIP, "vm.stat_interval not readable", "3600", ""
    try:
        seconds = int(value)
    except ValueError:
        return WARN, f"vm.stat_interval = {value!r}", "3600", "now: sysctl -w vm.stat_interval=3600"
    if seconds >= 3600:
        return PASS, f"{seconds} s", "3600 s", ""
    return WARN, f"{seconds} s", "3600 s", "now: `lowtail host apply` (sysctl -w vm.stat_interval=3600)"


@check(
    "timer_migration",
    "Timer migration off",
    "runtime",
    "With timer migration on, timers set on idle cores may expire on a busy one, the DuT's included; "
    "real-time tuning turns it off (not in the URLLC studies' tables; it removes another source of the interrupts "
    "they trace spikes to).",
)
def _timer_migration(host: Host, plan: CorePlan) -> Outcome:
    value = host.sysctl("kernel.timer_migration")
    if value is None:
        return SKIP, "kernel.timer_migration not present", "0", ""
    if value == "0":
        return PASS, "0", "0", ""
    return WARN, value, "0", "now: `lowtail host apply` (sysctl -w kernel.timer_migration=0)"


@check(
    "irq_affinity",
    "No device IRQ may run on a DuT core",
    "runtime",
    "A device interrupt handled on the DuT core preempts the packet processing (Commun. Mag. 2020, §III-a; NOMS 2020, §III-b); every "
    "IRQ should be confined to housekeeping cores.",
)
def _irq_affinity(host: Host, plan: CorePlan) -> Outcome:
    iso = set(plan.isolated)
    irqs = host.irqs
    if not irqs:
        return SKIP, "no IRQs listed under proc/irq", f"all on {_cl(plan.housekeeping)}", ""
    # The allowed set, not the effective one: the kernel may move an IRQ anywhere it allows.
    exposed = [i for i in irqs if set(i.affinity) & iso]
    handled = {}
    if host.interrupts:
        for kind, per_cpu in host.interrupts.counts.items():
            num = kind.partition(":")[0]
            if num.isdigit():
                n = sum(per_cpu.get(c, 0) for c in iso)
                if n:
                    handled[kind] = n
    default = host.default_irq_affinity
    parts = []
    if exposed:
        listed = ", ".join(f"{i.number} {i.name} ({_cl(i.affinity)})" for i in exposed[:6])
        parts.append(
            f"{len(exposed)} of {len(irqs)} IRQs may run on DuT core {_cl(iso)}: {listed}"
            + (" …" if len(exposed) > 6 else "")
        )
    if default and set(default) & iso:
        parts.append(f"default affinity {_cl(default)}")
    if handled:
        top = sorted(handled.items(), key=lambda kv: -kv[1])[:3]
        parts.append("handled there since boot: " + ", ".join(f"{k} {v:,}" for k, v in top))
    expected = f"every IRQ on {_cl(plan.housekeeping)}"
    if exposed or (default and set(default) & iso):
        return (
            FAIL,
            "; ".join(parts),
            expected,
            f"now: `lowtail host apply` (echo {_cl(plan.housekeeping)} > /proc/irq/N/smp_affinity_list for each); "
            f"at boot: irqaffinity={_cl(plan.housekeeping)}",
        )
    return (
        PASS,
        f"all {len(irqs)} IRQs on {_cl(plan.housekeeping)}" + ("; " + parts[-1] if handled else ""),
        expected,
        "",
    )


@check(
    "irqbalance",
    "irqbalance not running",
    "runtime",
    "irqbalance rewrites IRQ affinities every few seconds and undoes irqaffinity and `lowtail host apply`.",
)
def _irqbalance(host: Host, plan: CorePlan) -> Outcome:
    if "irqbalance" in host.processes:
        return (
            FAIL,
            "irqbalance is running",
            "not running",
            "systemctl disable --now irqbalance (or set IRQBALANCE_BANNED_CPULIST to the DuT cores)",
        )
    seen = f"{len(host.processes)} processes looked at" if host.processes else "no process list readable"
    return PASS, f"not running ({seen})", "not running", ""


@check(
    "isolation_in_effect",
    "Isolation asked for is in effect",
    "kernel",
    "A boot parameter the kernel does not act on gives false confidence: JNSM 2023, §4.1 found nohz_full silently "
    "ignored by Debian's kernels, built without CONFIG_NO_HZ_FULL.",
)
def _isolation_in_effect(host: Host, plan: CorePlan) -> Outcome:
    problems, seen = [], []
    asked_iso = host.param_cpus("isolcpus")
    if asked_iso:
        got = set(host.isolated_in_effect)
        seen.append(f"isolated {_cl(got)}")
        if not set(asked_iso) <= got:
            problems.append(f"isolcpus asks for {_cl(asked_iso)} but sys/devices/system/cpu/isolated is {_cl(got)}")
    asked_nohz = host.param_cpus("nohz_full")
    if asked_nohz:
        got_nohz = host.nohz_full_in_effect
        if got_nohz is None:
            problems.append(
                "nohz_full is on the command line but the kernel has no nohz_full support "
                "(no sys/devices/system/cpu/nohz_full)"
            )
        else:
            seen.append(f"nohz_full {_cl(got_nohz)}")
            if not set(asked_nohz) <= set(got_nohz):
                problems.append(f"nohz_full asks for {_cl(asked_nohz)} but the kernel applies {_cl(got_nohz)}")
    if "rcu_nocbs" in host.params and (host.kernel_config or {}).get("CONFIG_RCU_NOCB_CPU") not in (None, "y"):
        problems.append("rcu_nocbs is on the command line but the kernel lacks CONFIG_RCU_NOCB_CPU")
    if not asked_iso and not asked_nohz and "rcu_nocbs" not in host.params:
        return SKIP, "no isolation asked for on the command line", "what is asked for is applied", ""
    if problems:
        return (
            FAIL,
            "; ".join(problems),
            "what is asked for is applied",
            "boot a kernel built with CONFIG_NO_HZ_FULL=y and CONFIG_RCU_NOCB_CPU=y (JNSM 2023, §4.1), or a PREEMPT_RT kernel; "
            "check the parameters' spelling",
        )
    return PASS, ", ".join(seen) or "as asked", "what is asked for is applied", ""


# -- kernel build ------------------------------------------------------------------------------


@check(
    "kernel_rt",
    "PREEMPT_RT kernel",
    "kernel",
    "The RT kernel bounded the tail: maximum 110-140 µs against 510-1000 µs for vanilla and nohz kernels "
    "(Perf. Eval. 2024, §5), and no 600 µs TLB-shootdown spikes (JNSM 2023, §6); Commun. Mag. 2020, guideline v.",
)
def _kernel_rt(host: Host, plan: CorePlan) -> Outcome:
    cfg = host.kernel_config or {}
    model = next(
        (
            m
            for m in ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT", "PREEMPT_VOLUNTARY", "PREEMPT_NONE")
            if cfg.get(f"CONFIG_{m}") == "y"
        ),
        None,
    )
    observed = f"{host.release}" + (f" ({model})" if model else "")
    if host.preempt_rt:
        return PASS, observed, "PREEMPT_RT", ""
    return (
        WARN,
        observed,
        "PREEMPT_RT",
        "install and boot a PREEMPT_RT kernel (Debian: apt install linux-image-rt-amd64)",
    )


@check(
    "nohz_full_support",
    "Kernel built for nohz_full",
    "kernel",
    "nohz_full only works in a kernel built with CONFIG_NO_HZ_FULL (and CONFIG_RCU_NOCB_CPU for rcu_nocbs); "
    "Debian's vanilla and RT kernels are not (JNSM 2023, §4.1).",
)
def _nohz_full_support(host: Host, plan: CorePlan) -> Outcome:
    cfg = host.kernel_config
    if cfg is None:
        if host.nohz_full_in_effect is not None:
            return PASS, "sys/devices/system/cpu/nohz_full exists", "CONFIG_NO_HZ_FULL=y", ""
        return (
            WARN,
            "kernel configuration not readable (no proc/config.gz, no boot/config-*)",
            "CONFIG_NO_HZ_FULL=y",
            "check the kernel's build configuration for CONFIG_NO_HZ_FULL=y",
        )
    nohz, nocb = cfg.get("CONFIG_NO_HZ_FULL"), cfg.get("CONFIG_RCU_NOCB_CPU")
    observed = f"CONFIG_NO_HZ_FULL={nohz or 'not set'}, CONFIG_RCU_NOCB_CPU={nocb or 'not set'}"
    if nohz == "y" and nocb == "y":
        return PASS, observed, "both =y", ""
    return (
        FAIL,
        observed,
        "both =y",
        "build the kernel with CONFIG_NO_HZ_FULL=y and CONFIG_RCU_NOCB_CPU=y (JNSM 2023, §4.1), or use a PREEMPT_RT kernel",
    )


@check(
    "clocksource",
    "Fast clocksource",
    "kernel",
    "Timestamps are taken all the time (by the DuT, the kernel, lowtail); tsc (or kvm-clock in a VM) is read in "
    "user space in nanoseconds, hpet and acpi_pm cost microseconds per read. The URLLC studies rely on the TSC (JNSM 2023, Table 1).",
)
def _clocksource(host: Host, plan: CorePlan) -> Outcome:
    cs = host.root.read("sys/devices/system/clocksource/clocksource0/current_clocksource")
    if cs is None:
        return SKIP, "clocksource not readable", "tsc", ""
    if cs in ("tsc", "kvm-clock", "arch_sys_counter"):
        return PASS, cs, "tsc", ""
    return (
        FAIL,
        cs,
        "tsc",
        "boot with tsc=reliable clocksource=tsc (invariant-TSC CPUs); "
        "now: echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource",
    )


@check(
    "cgroup_version",
    "cgroup v2",
    "kernel",
    "A cgroup v2 cpuset partition can give the DuT's container cores nothing else runs on — the URLLC studies' container "
    "configuration (Perf. Eval. 2024, §3: reserving cores exclusively, no load balancing).",
)
def _cgroup_version(host: Host, plan: CorePlan) -> Outcome:
    layout = host.cgroup_layout
    if layout == "v2":
        return PASS, "cgroup v2 (unified)", "cgroup v2", ""
    return (
        WARN,
        {
            "hybrid": "hybrid (v1 controllers, v2 tree without them)",
            "v1": "cgroup v1",
            "unknown": "no cgroup mount found",
        }[layout],
        "cgroup v2",
        "boot with systemd.unified_cgroup_hierarchy=1 (cgroup_no_v1=all)",
    )


# -- hardware ----------------------------------------------------------------------------------


@check(
    "nic_numa",
    "NICs on the DuT cores' NUMA node",
    "hardware",
    "A NIC on another socket means every packet crosses the interconnect; pin the NF to cores of the NIC's node "
    "(Commun. Mag. 2020, §III-b).",
)
def _nic_numa(host: Host, plan: CorePlan) -> Outcome:
    nodes = host.numa_nodes
    nics = host.nics
    if not nics:
        return SKIP, "no NIC backed by a device", "same node", ""
    if len(nodes) <= 1:
        return PASS, f"{len(nodes) or 1} NUMA node; NICs {', '.join(n.name for n in nics)}", "same node", ""
    dut_nodes = {n for n, cpus in nodes.items() if set(cpus) & set(plan.isolated)}
    far = [n for n in nics if n.numa_node is not None and n.numa_node not in dut_nodes]
    desc = ", ".join(f"{n.name} node {n.numa_node if n.numa_node is not None else '?'}" for n in nics)
    if far:
        return (
            FAIL,
            f"{desc}; DuT cores on node {_cl(dut_nodes)}",
            "same node",
            f"choose DuT cores on node {far[0].numa_node} (its CPUs: {_cl(nodes.get(far[0].numa_node, ()) if far[0].numa_node is not None else ())}) "
            f"or move the NIC to a slot of node {_cl(dut_nodes)}",
        )
    return PASS, f"{desc}; DuT cores on node {_cl(dut_nodes)}", "same node", ""


@check(
    "resctrl",
    "Cache allocation for the DuT",
    "hardware",
    "The last-level cache is shared: other cores evict the DuT's lines. Intel CAT partitions it (Commun. Mag. 2020, §III-b and "
    "guideline iv; JNSM 2023, §4.1).",
)
def _resctrl(host: Host, plan: CorePlan) -> Outcome:
    flags = host.cpu_flags
    capable = bool(flags & {"cat_l3", "cat_l2", "rdt_a"})
    mounted = host.root.exists("sys/fs/resctrl/info")
    if mounted:
        return (PASS, "resctrl mounted", "the DuT cores own a cache partition", "")
    if capable:
        return (
            WARN,
            "CPU supports cache allocation ("
            + ", ".join(sorted(flags & {"cat_l3", "cat_l2", "rdt_a"}))
            + "); resctrl not mounted",
            "the DuT cores own a cache partition",
            "mount -t resctrl resctrl /sys/fs/resctrl, then give the DuT cores an exclusive L3 mask in a resctrl group",
        )
    return (
        WARN,
        "no cache allocation on this CPU (no cat_l3/rdt_a flag)",
        "the DuT cores own a cache partition",
        "none on this CPU: keep cache-heavy work off the other cores while measuring",
    )


# -- running the audit ---------------------------------------------------------------------------


def run_audit(host: Host, plan: CorePlan, only: set[str] | None = None) -> list[Check]:
    """Every registered check (or those in `only`) against the host and core plan."""
    return [fn(host, plan) for cid, fn in CHECKS if only is None or cid in only]


def score(checks: list[Check]) -> AuditScore:
    """Share of applicable checks passed, a warning counting half: 100 is a host tuned as
    the URLLC studies tune theirs."""
    counts = {s: sum(c["status"] == s for c in checks) for s in (PASS, WARN, FAIL, SKIP)}
    applicable = counts[PASS] + counts[WARN] + counts[FAIL]
    value = round(100 * (counts[PASS] + 0.5 * counts[WARN]) / applicable) if applicable else 100
    return {
        "score": value,
        "passed": counts[PASS],
        "warned": counts[WARN],
        "failed": counts[FAIL],
        "skipped": counts[SKIP],
        "applicable": applicable,
    }


def audit_document(host: Host, plan: CorePlan, checks: list[Check]) -> AuditDocument:
    """What `lowtail host audit --json` prints and the database stores."""
    return {
        "host": socket.gethostname() if host.root.live else str(host.root.root),
        "sysroot": None if host.root.live else str(host.root.root),
        "kernel": host.release,
        "cmdline": host.cmdline,
        "plan": plan.to_json(),
        "summary": score(checks),
        "checks": checks,
        "unreadable": sorted(set(host.root.unreadable)),
    }
