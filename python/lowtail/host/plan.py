"""Core plans and the kernel command line that implements one.

A core plan splits the CPUs in two: housekeeping cores run the operating system, IRQs and
everything else; isolated cores run only the device under test (Commun. Mag. 2020, Fig. 2; JNSM 2023, Fig. 2).
The boot parameters follow the URLLC studies' tables (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from lowtail.errors import UserError
from lowtail.host.facts import Host
from lowtail.host.remedies import BOOT_PARAMETERS
from lowtail.host.sysroot import format_cpulist, parse_cpulist


@dataclass(frozen=True)
class CorePlan:
    housekeeping: tuple[int, ...]
    isolated: tuple[int, ...]
    source: str  # where the plan came from, for messages

    def to_json(self) -> dict[str, Any]:
        return {"housekeeping": list(self.housekeeping), "isolated": list(self.isolated), "source": self.source}

    def __str__(self) -> str:
        return f"housekeeping {format_cpulist(self.housekeeping)}, isolated {format_cpulist(self.isolated)}"


def resolve_plan(host: Host, housekeeping: str | None = None, isolated: str | None = None) -> CorePlan:
    """The plan from the options, else from the boot command line (isolcpus, then
    nohz_full), else the default: CPU 0 for housekeeping, the others isolated."""
    present = set(host.cpus_present)
    if not present:
        raise UserError(f"{host.root}: lists no CPUs (sys/devices/system/cpu/present is missing or empty)")
    hk = set(parse_cpulist(housekeeping, "--housekeeping")) if housekeeping is not None else None
    iso = set(parse_cpulist(isolated, "--isolated")) if isolated is not None else None
    source = "options"
    if hk is None and iso is None:
        booted = host.param_cpus("isolcpus") or host.param_cpus("nohz_full")
        if booted:
            iso, source = set(booted), "boot command line"
        else:
            iso, source = present - {min(present)}, "default"
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
    return CorePlan(tuple(sorted(hk)), tuple(sorted(iso)), source)


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


def guest_cmdline(vcpus: int) -> dict[str, Any]:
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


def kernel_cmdline(host: Host, plan: CorePlan) -> dict[str, Any]:
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
