"""Core plans and the kernel command line that implements one.

A core plan splits the CPUs in two: housekeeping cores run the operating system, IRQs and
everything else; isolated cores run only the device under test (Commun. Mag. 2020, Fig. 2; JNSM 2023, Fig. 2).
There is one plan for a host and an experiment: the cores its run's programs get
(`role_cores`, which testbed.cores.CoreRoles holds) and the split they ask for
(`plan_for_roles`), read by the testbed, `host plan`, `host audit`, `tune` and `explain`'s
remedies alike, so none advises another isolation for the same host.
The boot parameters follow the URLLC studies' tables (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lowtail.core.errors import UserError
from lowtail.explain.document import RemedyDoc
from lowtail.host.document import CorePlanSplit, GuestCmdlineDocument, KernelCmdlineDocument
from lowtail.host.facts import Host, param_cpus, parse_cmdline
from lowtail.host.remedies import BOOT_PARAMETERS
from lowtail.host.sysroot import format_cpulist, parse_cpulist
from lowtail.testbed.document import CorePlanDocument


@dataclass(frozen=True)
class CorePlan:
    """The boot-time split of a host's CPUs into housekeeping and isolated ones, `source`
    saying where it came from, `shared` (a host too small for every role of a run to have a
    core of its own) which roles share a core and why, said once by whatever shows the plan."""

    housekeeping: tuple[int, ...]
    isolated: tuple[int, ...]
    source: str  # where the plan came from, for messages
    shared: str = ""

    def to_json(self) -> CorePlanSplit:
        return {
            "housekeeping": list(self.housekeeping),
            "isolated": list(self.isolated),
            "source": self.source,
            "shared": self.shared,
        }

    def __str__(self) -> str:
        return f"housekeeping {format_cpulist(self.housekeeping)}, isolated {format_cpulist(self.isolated)}"


# -- the one core plan: which core each program of a run gets, and the split it asks for ------------

# The roles of a run (testbed.cores.CoreRoles) in words, as the plan names them.
_ROLE_NAMES = {
    "dut": "the DuT",
    "generator": "the generator",
    "capture": "the timestamper",
    "housekeeping": "housekeeping",
}


def role_cores(cpus: Sequence[int], chosen: Mapping[str, object] | None = None) -> CorePlanDocument:
    """The core each program of a run gets on a host whose usable cores are `cpus`
    (ascending), with the user's [cores] choices on top: with 4 cores or more every role has
    its own; with 3 the timestamper shares housekeeping's; with 2 the DuT keeps one (with the
    timestamper, whose stamps the kernel takes as packets arrive: its program only drains
    the rings) and the generator shares the other with housekeeping, so the DuT's core is
    the one isolated and what `tune` moves off it has somewhere to go; with 1 everything
    shares it. The testbed's `CoreRoles` holds this plan for a run."""
    if len(cpus) >= 4:
        plan = CorePlanDocument(housekeeping=cpus[0], generator=cpus[1], capture=cpus[2], dut=[cpus[3]])
    elif len(cpus) == 3:
        plan = CorePlanDocument(housekeeping=cpus[0], generator=cpus[1], capture=cpus[0], dut=[cpus[2]])
    elif len(cpus) == 2:
        plan = CorePlanDocument(housekeeping=cpus[1], generator=cpus[1], capture=cpus[0], dut=[cpus[0]])
    else:
        plan = CorePlanDocument(housekeeping=cpus[0], generator=cpus[0], capture=cpus[0], dut=[cpus[0]])
    return _with_choices(plan, chosen or {})


def _with_choices(plan: CorePlanDocument, chosen: Mapping[str, object]) -> CorePlanDocument:
    """The plan with the user's [cores] choices on top: experiment/spec.py checked each (a core
    number, the DuT's a list of them); a role the file leaves out keeps the plan's core."""

    def core(role: str, planned: int) -> int:
        value = chosen.get(role)
        return value if isinstance(value, int) else planned

    dut = chosen.get("dut")
    return CorePlanDocument(
        housekeeping=core("housekeeping", plan["housekeeping"]),
        generator=core("generator", plan["generator"]),
        capture=core("capture", plan["capture"]),
        dut=[int(c) for c in dut] if isinstance(dut, list) else plan["dut"],
    )


def plan_for_roles(
    roles: Mapping[str, Any],
    cpus: Sequence[int],
    booted: Sequence[int] | None = None,
    source: str = "the run's core plan",
) -> CorePlan:
    """The boot-time split a run's roles ask for on a host with these CPUs: isolated are the
    DuT's cores (what must not be interrupted) and the generator's when it has one to itself
    (it busy-waits), housekeeping every other — unless the host already isolates cores at
    boot (`booted`: isolcpus or nohz_full), which is then the plan in effect. `host plan`,
    `host audit`, `tune` and `explain`'s remedies all take their cores from here."""
    shared = sharing(roles, cpus)
    if booted:
        isolated = set(booted) & set(cpus)
        return CorePlan(tuple(sorted(set(cpus) - isolated)), tuple(sorted(isolated)), "boot command line", shared)
    dut = set(map(int, roles.get("dut") or []))
    generator = int(roles["generator"])
    alone = generator not in dut | {int(roles["housekeeping"]), int(roles["capture"])}
    isolated = (dut | ({generator} if alone else set())) - {int(roles["housekeeping"])}
    return CorePlan(tuple(sorted(set(cpus) - isolated)), tuple(sorted(isolated)), source, shared)


def sharing(roles: Mapping[str, Any], cpus: Sequence[int]) -> str:
    """Which roles of a run share a core, and why, in one sentence ("" when each has its own):
    what a plan on a small host says once."""
    on: dict[int, list[str]] = {}
    for role in ("dut", "generator", "capture", "housekeeping"):
        value = roles.get(role)
        for core in value if isinstance(value, list) else [value]:
            if core is not None:
                on.setdefault(int(core), []).append(_ROLE_NAMES[role])
    crowded = {core: names for core, names in on.items() if len(names) > 1}
    if not crowded:
        return ""
    said = "; ".join(f"{_and(names)} share CPU {core}" for core, names in sorted(crowded.items()))
    alone = sorted(c for c, names in on.items() if len(names) == 1)
    gets = f" ({_and([f'{on[c][0]} has CPU {c} to itself' for c in alone])})" if alone else ""
    return (
        f"{len(cpus)} CPU{'s' if len(cpus) != 1 else ''} cannot give each role of a run a core of its own: {said}"
        f"{gets}; the DuT's cores are isolated (and the generator's when it has one to itself), and the time the "
        "DuT waits for the testbed's programs on its core is the measurement's, not the DuT's (explain calls it "
        "a measurement artefact)"
    )


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def host_roles_plan(host: Host, chosen: Mapping[str, object] | None = None) -> CorePlan:
    """The plan of a run on this host with these [cores] choices: its roles on the host's
    online CPUs, the split they ask for (or the one booted)."""
    cpus = list(host.cpus_online)
    return plan_for_roles(role_cores(cpus, chosen), cpus, booted_isolation(host.params, cpus))


def booted_isolation(params: dict[str, str | None], cpus: Sequence[int]) -> list[int] | None:
    """The CPUs a kernel command line isolates (isolcpus, else nohz_full); None when none."""
    return param_cpus(params, "isolcpus", cpus) or param_cpus(params, "nohz_full", cpus)


def stored_plan(roles: Mapping[str, Any], host: Mapping[str, Any]) -> CorePlan:
    """The one plan of a stored run: its roles (its core plan), on the CPUs and the command
    line its experiment stored of the host."""
    cpus = [int(c) for c in host.get("cpus_available") or []] or sorted(
        {int(roles["housekeeping"]), int(roles["generator"]), int(roles["capture"]), *map(int, roles.get("dut") or [])}
    )
    return plan_for_roles(roles, cpus, booted_isolation(parse_cmdline(str(host.get("kernel_cmdline") or "")), cpus))


def resolve_plan(
    host: Host,
    housekeeping: str | None = None,
    isolated: str | None = None,
    cores: Mapping[str, object] | None = None,
) -> CorePlan:
    """The plan from the options, else the one plan of a run on this host (`host_roles_plan`,
    with an experiment's [cores] `cores`): the boot command line's isolation when the host
    has one, else what the run's roles ask for."""
    present = set(host.cpus_present)
    if not present:
        raise UserError(f"{host.root}: lists no CPUs (sys/devices/system/cpu/present is missing or empty)")
    hk = set(parse_cpulist(housekeeping, "--housekeeping")) if housekeeping is not None else None
    iso = set(parse_cpulist(isolated, "--isolated")) if isolated is not None else None
    source, shared = "options", ""
    if hk is None and iso is None:
        planned = host_roles_plan(host, cores)
        hk, iso, source, shared = set(planned.housekeeping), set(planned.isolated), planned.source, planned.shared
    for name, cpus in (("--housekeeping", hk), ("--isolated", iso)):
        missing = sorted(set(cpus or ()) - present)
        if missing:
            raise UserError(
                f"{name}: CPU {format_cpulist(missing)} does not exist on {host.root} "
                f"(its CPUs are {format_cpulist(present)})"
            )
    if hk is None:
        assert iso is not None  # both missing took the branch above
        hk = present - iso
    if iso is None:
        iso = present - hk
    if hk & iso:
        raise UserError(f"CPU {format_cpulist(hk & iso)} cannot be both housekeeping and isolated")
    if not hk:
        raise UserError(
            "the core plan leaves no housekeeping CPU: the operating system needs at least one "
            f"(this host has CPUs {format_cpulist(present)})"
        )
    if not iso:
        raise UserError(
            f"the core plan isolates no CPU (this host has CPUs {format_cpulist(present)}; "
            "name the DuT cores with --isolated)"
        )
    return CorePlan(tuple(sorted(hk)), tuple(sorted(iso)), source, shared)


@dataclass(frozen=True)
class BootParam:
    name: str
    value: str | None
    purpose: str
    source: str  # which paper's table asks for it (docs/papers.md)

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


def boot_params(plan: CorePlan, vendor: str) -> list[BootParam]:
    """The URLLC studies' latency-optimised boot parameters for a core plan, each with its
    purpose and source from the remedies table (host/remedies.py). The intel_* ones only on
    Intel CPUs (Perf. Eval. 2024, §3: not available on AMD)."""
    iso, hk = format_cpulist(plan.isolated), format_cpulist(plan.housekeeping)
    values: list[tuple[str, str | None]] = [
        ("isolcpus", iso),
        ("nohz_full", iso),
        ("rcu_nocbs", iso),
        ("rcu_nocb_poll", None),
        ("irqaffinity", hk),
        ("idle", "poll"),
    ]
    if vendor == "GenuineIntel":
        values += [("intel_idle.max_cstate", "0"), ("intel_pstate", "disable")]
    values += [
        ("tsc", "reliable"),
        ("mce", "ignore_ce"),
        ("audit", "0"),
        ("nmi_watchdog", "0"),
        ("skew_tick", "1"),
        ("nosoftlockup", None),
        ("nosmt", None),
    ]
    return [
        BootParam(name, value, BOOT_PARAMETERS[name].purpose, BOOT_PARAMETERS[name].source) for name, value in values
    ]


# Boot parameters that concern the physical machine, not a guest's virtual CPUs.
_HOST_ONLY = {"nosmt", "intel_idle.max_cstate", "intel_pstate"}


def guest_cmdline(vcpus: int) -> GuestCmdlineDocument:
    """The same latency-optimised parameters for a VM DuT's guest kernel with `vcpus`
    virtual CPUs: vCPU 0 for housekeeping, the others isolated (lowtail-fwd runs on the
    last); what the experiment file's `guest_cmdline` takes."""
    if vcpus < 2:
        raise UserError(
            f"--guest-vcpus {vcpus}: a guest needs at least 2 vCPUs for a core plan (one for housekeeping, "
            "the others isolated); set vcpus = 2 or more for the VM DuT"
        )
    plan = CorePlan((0,), tuple(range(1, vcpus)), f"a guest with {vcpus} vCPUs")
    params = [p for p in boot_params(plan, "guest") if p.name not in _HOST_ONLY]
    cmdline = " ".join(str(p) for p in params)
    return {
        "plan": plan.to_json(),
        "params": [
            {"name": p.name, "value": p.value, "text": str(p), "purpose": p.purpose, "source": p.source} for p in params
        ],
        "cmdline": cmdline,
        "experiment_file": f'vcpus = {vcpus}\nguest_cmdline = "{cmdline}"',
    }


# Parameters GRUB writes itself, or that name this boot only; never carried over.
_NOT_CARRIED = {"BOOT_IMAGE", "root", "ro", "rw", "initrd"}
_GRUB_LINE = re.compile(r"^\s*GRUB_CMDLINE_LINUX_DEFAULT=(.*)$", re.MULTILINE)


def grub_base(host: Host) -> tuple[list[str], str]:
    """The parameters to keep: GRUB_CMDLINE_LINUX_DEFAULT of etc/default/grub if there is
    one, else the running command line without what GRUB adds; and where they came from."""
    grub = host.root.read("etc/default/grub")
    m = _GRUB_LINE.search(grub or "")
    if m:
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            words = [m.group(1).strip("\"'")]
        return " ".join(words).split(), "etc/default/grub"
    words = []
    for w in host.cmdline.split():
        if w == "--":
            break
        if w.partition("=")[0] not in _NOT_CARRIED:
            words.append(w)
    return words, "proc/cmdline"


def kernel_cmdline(host: Host, plan: CorePlan) -> KernelCmdlineDocument:
    """The plan's parameters, and the GRUB line that keeps everything else the host has."""
    params = boot_params(plan, host.vendor)
    ours = {p.name.replace("-", "_") for p in params}  # replaced on the host's line, or dropped
    # A kernel built without CONFIG_NO_HZ_FULL ignores nohz_full (host audit says so): it is
    # not recommended there, and the note says what would make it count.
    unsupported = [p for p in params if p.name == "nohz_full"] if host.nohz_full_supported is False else []
    params = [p for p in params if p not in unsupported]
    base, base_from = grub_base(host)
    kept = [w for w in base if w.partition("=")[0].replace("-", "_") not in ours]
    # The URLLC studies' tables misspell rcu_nocb_poll as rcu_nocbs_poll; the kernel ignores that.
    kept = [w for w in kept if w.partition("=")[0] != "rcu_nocbs_poll"]
    added = " ".join(str(p) for p in params)
    grub_value = " ".join(kept + [added]).strip()
    return {
        "plan": plan.to_json(),
        "params": [
            {"name": p.name, "value": p.value, "text": str(p), "purpose": p.purpose, "source": p.source} for p in params
        ],
        "cmdline": added,
        "kept": kept,
        "kept_from": base_from,
        "grub": f'GRUB_CMDLINE_LINUX_DEFAULT="{grub_value}"',
        "grub_steps": [
            "edit /etc/default/grub: replace the GRUB_CMDLINE_LINUX_DEFAULT line with the one above",
            "update-grub   (Fedora/RHEL: grub2-mkconfig -o /boot/grub2/grub.cfg)",
            "reboot, then check with `lowtail host audit`",
        ],
        "vendor": host.vendor,
        "notes": (
            []
            if host.vendor == "GenuineIntel"
            else [f"CPU vendor {host.vendor}: intel_idle.max_cstate and intel_pstate left out (Intel only)"]
        )
        + [
            f"{p} left out: this kernel is built without CONFIG_NO_HZ_FULL and would ignore it (host audit's "
            "'Kernel built for nohz_full'); boot a kernel built with it and add it"
            for p in unsupported
        ]
        + [
            "idle=poll keeps idle cores busy: the URLLC studies measured 48 % more power at idle (Commun. Mag. 2020, §VI)"
        ],
    }


def remedy_here(remedy: RemedyDoc, plan: CorePlan, dut_cores: Sequence[int]) -> RemedyDoc:
    """A remedy (`lowtail explain`'s) with the cores of this host's one plan: the boot
    parameters it needs with the plan's values ("isolcpus=1"), the plan's cores, and — where
    the DuT's cores cannot be isolated on this host — which roles share them and why."""
    params = [str(p) for p in boot_params(plan, "any") if p.name in remedy["boot_parameters"]]
    apart = not set(dut_cores) & set(plan.isolated)
    said = []
    if params:
        said.append(
            f"this host's core plan: {' '.join(params)} (isolated CPU {format_cpulist(plan.isolated)}, "
            f"housekeeping CPU {format_cpulist(plan.housekeeping)})"
        )
    if plan.shared and (apart and params or remedy["id"] == "own-core-per-role"):
        said.append(plan.shared)
    return {
        **remedy,
        "action": remedy["action"] + "".join(f"; {s}" for s in said),
        "plan": {"housekeeping": list(plan.housekeeping), "isolated": list(plan.isolated), "boot": params},
    }
