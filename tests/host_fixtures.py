"""Fixture sysroots for the host tests: a directory tree shaped like /proc and /sys of a
4-CPU Intel server, either left as installed ("untuned") or tuned as the URLLC studies tune
theirs ("tuned"). Nothing here touches the live host."""

from __future__ import annotations

import gzip
from pathlib import Path

TUNED_CMDLINE = (
    "BOOT_IMAGE=/vmlinuz-6.1.0-rt root=/dev/sda1 ro quiet isolcpus=domain,managed_irq,1-3 "
    "nohz_full=1-3 rcu_nocbs=1-3 rcu_nocb_poll irqaffinity=0 idle=poll intel_idle.max_cstate=0 "
    "intel_pstate=disable tsc=reliable mce=ignore_ce audit=0 nmi_watchdog=0 skew_tick=1 nosoftlockup nosmt"
)
# What a distribution installs, plus two mistakes: isolation of one core only, nohz_full on
# a kernel without CONFIG_NO_HZ_FULL, and the URLLC studies' misspelling of rcu_nocb_poll.
UNTUNED_CMDLINE = "BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/sda1 ro quiet isolcpus=1 nohz_full=1-3 rcu_nocbs_poll"

IRQS = {  # irq: (chip, hwirq, device)
    0: ("IO-APIC", "2-edge", "timer"),
    8: ("IO-APIC", "8-edge", "rtc0"),
    24: ("PCI-MSI-0000:03:00.0", "0-edge", "eth0-TxRx-0"),
    25: ("PCI-MSI-0000:03:00.0", "1-edge", "eth0-TxRx-1"),
    26: ("PCI-MSI-0000:00:17.0", "0-edge", "nvme0q0"),
}


def interrupts_text(cpus: int = 4, loc: int = 250_000, tlb: int = 1_200, device: int = 5_000) -> str:
    lines = ["     " + "".join(f"      CPU{c}" for c in range(cpus))]
    for irq, (chip, hw, dev) in IRQS.items():
        counts = "".join(f" {device + irq * (c + 1):>10}" for c in range(cpus))
        lines.append(f"{irq:>4}:{counts}  {chip}  {hw}      {dev}")
    for code, desc, base in (
        ("NMI", "Non-maskable interrupts", 10),
        ("LOC", "Local timer interrupts", loc),
        ("IWI", "IRQ work interrupts", loc // 2),
        ("RES", "Rescheduling interrupts", 300),
        ("CAL", "Function call interrupts", 900),
        ("TLB", "TLB shootdowns", tlb),
    ):
        counts = "".join(f" {base + c:>10}" for c in range(cpus))
        lines.append(f"{code:>4}:{counts}   {desc}")
    lines.append(" ERR:          0")
    lines.append(" MIS:          0")
    return "\n".join(lines) + "\n"


def _w(root: Path, rel: str, text: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text if text.endswith("\n") or text == "" else text + "\n")


def make_sysroot(root: Path, tuned: bool, vendor: str = "GenuineIntel", cpus: int = 4) -> Path:
    """Write a fixture sysroot under `root` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    w = lambda rel, text: _w(root, rel, text)  # noqa: E731
    cpu_range = f"0-{cpus - 1}"
    w("proc/cmdline", TUNED_CMDLINE if tuned else UNTUNED_CMDLINE)
    release = "6.1.0-rt-amd64" if tuned else "6.1.0-amd64"
    w("proc/sys/kernel/osrelease", release)
    w("proc/version", f"Linux version {release} (debian) #1 SMP {'PREEMPT_RT' if tuned else 'PREEMPT_DYNAMIC'}")
    flags = "fpu vme de pse tsc msr pae mce cx8 apic constant_tsc nonstop_tsc rdt_a cat_l3 cdp_l3"
    blocks = [
        f"processor\t: {c}\nvendor_id\t: {vendor}\nmodel name\t: Fixture Xeon\nflags\t\t: {flags}\n"
        for c in range(cpus)
    ]
    w("proc/cpuinfo", "\n".join(blocks))
    config = ["CONFIG_NO_HZ_COMMON=y", "CONFIG_RCU_NOCB_CPU=y", "CONFIG_HZ=250"]
    config += (
        ["CONFIG_PREEMPT_RT=y", "CONFIG_NO_HZ_FULL=y"]
        if tuned
        else [
            "CONFIG_PREEMPT_DYNAMIC=y",
            "CONFIG_PREEMPT_VOLUNTARY=y",
            "# CONFIG_NO_HZ_FULL is not set",
            "CONFIG_NO_HZ_IDLE=y",
        ]
    )
    w("proc/config.gz", gzip.compress(("\n".join(config) + "\n").encode()))
    if tuned:
        w("sys/kernel/realtime", "1")
    w("proc/interrupts", interrupts_text(cpus))
    hk = "0"
    for irq in IRQS:
        aff = hk if tuned else cpu_range
        w(f"proc/irq/{irq}/smp_affinity_list", aff)
        w(f"proc/irq/{irq}/smp_affinity", "1" if tuned else format((1 << cpus) - 1, "x"))
    w("proc/irq/default_smp_affinity", "1" if tuned else format((1 << cpus) - 1, "x"))
    procs = ["systemd", "sshd", "cron"] + ([] if tuned else ["irqbalance"])
    for pid, name in enumerate(procs, start=1):
        w(f"proc/{pid}/comm", name)
    if tuned:
        mounts = ["cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0"]
        w("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids")
        w("sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids")
        (root / "sys/fs/resctrl/info").mkdir(parents=True, exist_ok=True)
    else:
        mounts = [
            "tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0",
            "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0",
            "cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,nodev,noexec,relatime,cpuset 0 0",
        ]
        w("sys/fs/cgroup/cpuset/cpuset.cpus", cpu_range)
        w("sys/fs/cgroup/cpuset/cpuset.mems", "0-1")
    w("proc/mounts", "\n".join(["proc /proc proc rw 0 0", "sysfs /sys sysfs rw 0 0"] + mounts))
    w("proc/sys/vm/stat_interval", "3600" if tuned else "1")
    w("proc/sys/kernel/timer_migration", "0" if tuned else "1")
    w("proc/sys/kernel/nmi_watchdog", "0" if tuned else "1")
    w("proc/sys/kernel/soft_watchdog", "0" if tuned else "1")
    w("proc/sys/kernel/watchdog", "0" if tuned else "1")
    base = "sys/devices/system/cpu"
    for f in ("present", "possible", "online"):
        w(f"{base}/{f}", cpu_range)
    w(f"{base}/isolated", "1-3" if tuned else "")
    if tuned:
        w(f"{base}/nohz_full", "1-3")
    w(f"{base}/smt/active", "0" if tuned else "1")
    w(f"{base}/smt/control", "forceoff" if tuned else "on")
    w(f"{base}/cpuidle/current_driver", "none" if tuned else "intel_idle")
    for c in range(cpus):
        sib = str(c) if tuned else ",".join(str(s) for s in sorted({c, c ^ 2}))
        w(f"{base}/cpu{c}/topology/thread_siblings_list", sib)
        if not tuned:
            for i, (name, latency) in enumerate((("POLL", 0), ("C1", 2), ("C6", 133))):
                w(f"{base}/cpu{c}/cpuidle/state{i}/name", name)
                w(f"{base}/cpu{c}/cpuidle/state{i}/latency", str(latency))
                w(f"{base}/cpu{c}/cpuidle/state{i}/disable", "0")
        w(f"{base}/cpu{c}/cpufreq/scaling_driver", "acpi-cpufreq" if tuned else "intel_pstate")
        w(f"{base}/cpu{c}/cpufreq/scaling_governor", "performance" if tuned else "powersave")
        w(f"{base}/cpu{c}/cpufreq/scaling_available_governors", "performance powersave")
    w("sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]" if tuned else "[always] madvise never")
    w(
        "sys/kernel/mm/transparent_hugepage/defrag",
        "always defer defer+madvise madvise [never]" if tuned else "always defer defer+madvise [madvise] never",
    )
    w("sys/kernel/mm/ksm/run", "0" if tuned else "1")
    w("sys/devices/system/node/node0/cpulist", cpu_range)
    w("sys/devices/system/node/node1/cpulist", "")
    w("sys/class/net/eth0/device/numa_node", "0" if tuned else "1")
    (root / "sys/class/net/lo").mkdir(parents=True, exist_ok=True)
    w("sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc" if tuned else "hpet")
    w("etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""')
    return root


def file_states(root: Path) -> dict[str, str]:
    """Every file's text under a sysroot (for before/after comparisons)."""
    return {str(p.relative_to(root)): p.read_bytes().decode("latin-1") for p in sorted(root.rglob("*")) if p.is_file()}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run `lowtail ARGV` in-process through main() (exit codes and one-line errors as a
    user sees them); returns (exit code, stdout, stderr)."""
    import pytest

    from lowtail.cli import main

    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    captured = capsys.readouterr()
    return e.value.code or 0, captured.out, captured.err
