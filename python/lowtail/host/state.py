"""The host-state fingerprint: the settings that decide a tail, read when a run starts.

Two runs of one DuT on one host can differ only in how the host was tuned (`lowtail tune`
applies a change between them), so every run stores the settings in force — the kernel
command line, the isolated / nohz_full / rcu_nocbs CPUs, which IRQs may fire on the roles'
cores, which other real-time tasks may run there, cpuset partitions, the frequency governor
and idle states of the roles' cores, THP, KSM, RT throttling, the vmstat interval, timer
migration, the workqueue CPU mask and the kernel's flavour — and a short id of them
(`host_state` in a run's `--json`, `compare --by host_state`).

Every value is text as read through `SysRoot` (one owner of every /proc and /sys read), so
a copied sysroot fingerprints like the live host. Tasks are named by name and priority, not
pid, so that restarting a daemon is not a change of state; lowtail's own testbed programs
and kernel threads (the kernel's flavour covers them) are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from lowtail.host import settings as host_settings
from lowtail.host.document import HostStateDocument
from lowtail.host.facts import Host
from lowtail.host.sysroot import SysRoot, format_cpulist, parse_cpulist

# lowtail's own programs: a run's measurement, never the host's state.
OWN_PROGRAMS = ("lowtail-gen", "lowtail-cap", "lowtail-fwd", "lowtail-leash", "lowtail-noise")
# The sysctls and files of one setting each, with their kind (host/settings.py: the reader
# apply, undo and tune use too), recorded in that kind's own form.
_FILES = {
    "vm.stat_interval": ("proc/sys/vm/stat_interval", "int"),
    "kernel.timer_migration": ("proc/sys/kernel/timer_migration", "int"),
    "kernel.sched_rt_runtime_us": ("proc/sys/kernel/sched_rt_runtime_us", "int"),
    "kernel.sched_rt_period_us": ("proc/sys/kernel/sched_rt_period_us", "int"),
    "workqueue cpumask": ("sys/devices/virtual/workqueue/cpumask", "mask"),
    "default IRQ affinity": ("proc/irq/default_smp_affinity", "mask"),
    "KSM": ("sys/kernel/mm/ksm/run", "int"),
    "transparent huge pages": ("sys/kernel/mm/transparent_hugepage/enabled", "selected"),
    "transparent huge pages defrag": ("sys/kernel/mm/transparent_hugepage/defrag", "selected"),
}
ID_LENGTH = 10


def read_host_state(root: SysRoot, cores: Iterable[int]) -> HostStateDocument:
    """The fingerprint of the host's tuning for a run whose roles use `cores`."""
    host = Host(root)
    cores = sorted(set(cores))
    settings: dict[str, str] = {"kernel command line": host.cmdline, "kernel": _flavour(host)}
    settings["isolated CPUs"] = format_cpulist(host.isolated_in_effect) or "none"
    nohz = host.nohz_full_in_effect
    settings["nohz_full CPUs"] = "none" if not nohz else format_cpulist(nohz)
    settings["rcu_nocbs CPUs"] = _param_cpus(host, "rcu_nocbs")
    for name, (rel, kind) in _FILES.items():
        text = host_settings.read(root, rel)
        if text is not None:
            settings[name] = host_settings.restore_text(kind, text)
    settings["cpuset partitions"] = _partitions(host)
    threads = realtime_threads(root)  # one pass over /proc for every core
    for cpu in cores:
        governor, _ = host.cpufreq(cpu)
        if governor is not None:
            settings[f"CPU {cpu} governor"] = governor
        states = host.idle_states(cpu)
        if states:
            settings[f"CPU {cpu} idle states disabled"] = ",".join(s.name for s in states if s.disabled) or "none"
        settings[f"CPU {cpu} IRQs"] = ",".join(str(i.number) for i in host.irqs if cpu in i.affinity) or "none"
        on_cpu = sorted({label for label, allowed in threads if cpu in allowed})
        settings[f"CPU {cpu} real-time tasks"] = ",".join(on_cpu) or "none"
    return HostStateDocument(id=state_id(settings), settings=settings)


def state_id(settings: Mapping[str, str]) -> str:
    """A short id of the settings: equal settings, equal ids."""
    text = json.dumps(dict(settings), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


def differing(a: Mapping[str, str], b: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """The settings two fingerprints disagree on: name → (a's value, b's value)."""
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _flavour(host: Host) -> str:
    return f"{host.release} ({'PREEMPT_RT' if host.preempt_rt else 'not real-time'})"


def _param_cpus(host: Host, name: str) -> str:
    cpus = host.param_cpus(name)
    return "none" if not cpus else format_cpulist(cpus)


def _partitions(host: Host) -> str:
    """The cpusets that take CPUs out of the scheduler's balancing (cgroup v2 partitions,
    v1 exclusive sets), as name:cpus."""
    mount = host.cpuset_mount
    if mount is None:
        return "none"
    version, base = mount
    found = []
    for name in sorted(host.root.listdir(base)):
        d = f"{base}/{name}"
        cpus = host.root.read(f"{d}/cpuset.cpus")
        if cpus is None:
            continue
        marker = host.root.read(f"{d}/cpuset.cpus.partition" if version == "v2" else f"{d}/cpuset.cpu_exclusive")
        if marker is not None and marker.strip() not in ("member", "0", ""):
            found.append(f"{name}:{cpus.strip()}")
    return ",".join(found) or "none"


def task_status(root: SysRoot, pid: int, tid: int) -> dict[str, str] | None:
    """A thread's /proc status fields (None: gone)."""
    text = root.read(f"proc/{pid}/task/{tid}/status")
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def task_policy(root: SysRoot, pid: int, tid: int) -> tuple[int, int] | None:
    """A thread's (scheduling policy, real-time priority) from its stat (None: gone)."""
    stat = root.read(f"proc/{pid}/task/{tid}/stat")
    if stat is None:
        return None
    rest = stat.rpartition(")")[2].split()
    try:
        # Fields after the name start at 3 (state): rt_priority is field 40, policy 41.
        return int(rest[41 - 3]), int(rest[40 - 3])
    except (IndexError, ValueError):
        return None


def realtime_threads(root: SysRoot) -> list[tuple[str, set[int]]]:
    """The real-time user threads of the host, as ("name:priority", allowed CPUs) (kernel
    threads and lowtail's own programs left out)."""
    found = []
    for pid in root.listdir("proc"):
        if not pid.isdigit() or kernel_thread(root, int(pid)):
            continue
        for tid in root.listdir(f"proc/{pid}/task"):
            if tid.isdigit() and (thread := _realtime_thread(root, int(pid), int(tid))) is not None:
                found.append(thread)
    return found


def _realtime_thread(root: SysRoot, pid: int, tid: int) -> tuple[str, set[int]] | None:
    policy = task_policy(root, pid, tid)
    if policy is None or policy[0] not in (1, 2):  # SCHED_FIFO, SCHED_RR
        return None
    status = task_status(root, pid, tid)
    if status is None or "Cpus_allowed_list" not in status or status.get("Name", "").startswith(OWN_PROGRAMS):
        return None
    return f"{status.get('Name', '?')}:{policy[1]}", set(parse_cpulist(status["Cpus_allowed_list"]))


# PF_KTHREAD in a task's flags: the kernel's own threads (per-CPU workers, ksoftirqd, ...).
_PF_KTHREAD = 0x00200000


def kernel_thread(root: SysRoot, pid: int) -> bool:
    """Is this one of the kernel's own threads? (PF_KTHREAD in /proc stat's flags, field 9;
    a task that is gone counts as one: there is nothing of it to read or move.)"""
    stat = root.read(f"proc/{pid}/stat")
    if stat is None:
        return True
    rest = stat.rpartition(")")[2].split()  # rest[0] is field 3 (state): the flags are rest[6]
    return len(rest) > 6 and rest[6].isdigit() and bool(int(rest[6]) & _PF_KTHREAD)


def affinity_of(root: SysRoot, pid: int, tid: int) -> list[int] | None:
    """A thread's allowed CPUs (None: gone)."""
    status = task_status(root, pid, tid)
    if status is None or "Cpus_allowed_list" not in status:
        return None
    return parse_cpulist(status["Cpus_allowed_list"])
