"""What a host is, read through a SysRoot: boot parameters, CPUs, kernel build, IRQs,
processes, NICs. Each fact is read once and cached; the audit, the planner and `apply`
all look at the host through this class."""

from __future__ import annotations

import gzip
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from lowtail.core.errors import UserError
from lowtail.host.interrupts import InterruptTable, parse_interrupts
from lowtail.host.settings import selected_word
from lowtail.host.sysroot import SysRoot, cpumask_to_cpus, parse_cpulist

_CPU_RANGE = re.compile(r"^\d+(-\d+)?$")


@dataclass(frozen=True)
class Irq:
    number: int
    name: str
    affinity: tuple[int, ...]  # smp_affinity_list: where it may run


@dataclass(frozen=True)
class Nic:
    name: str
    numa_node: int | None  # None: the platform does not say (-1) or a single node


@dataclass(frozen=True)
class IdleState:
    cpu: int
    index: int
    name: str
    latency_us: int
    disabled: bool


def parse_cmdline(text: str) -> dict[str, str | None]:
    """Kernel parameters, name → value (None for a bare flag); the kernel treats "-" and
    "_" in names alike; a later repeat wins; arguments after "--" belong to init."""
    params: dict[str, str | None] = {}
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    for w in words:
        if w == "--":
            break
        name, eq, value = w.partition("=")
        params[name.replace("-", "_")] = value if eq else None
    return params


def split_isolcpus(value: str) -> tuple[list[str], list[int]]:
    """isolcpus=[flags,]cpulist → (flags, cpus); flags are nohz, domain, managed_irq."""
    flags, ranges = [], []
    for tok in value.split(","):
        tok = tok.strip()
        if _CPU_RANGE.match(tok):
            ranges.append(tok)
        elif tok:
            flags.append(tok)
    return flags, parse_cpulist(",".join(ranges), "isolcpus") if ranges else []


def param_cpus(params: dict[str, str | None], name: str, present: Iterable[int]) -> list[int] | None:
    """The CPUs a cpulist parameter of a command line names (isolcpus without its flags,
    "all" as the CPUs present); None if absent."""
    if name not in params:
        return None
    value = params[name] or ""
    if name == "isolcpus":
        return split_isolcpus(value)[1]
    if value.strip() == "all":
        return list(present)
    try:
        return parse_cpulist(value, name)
    except UserError:
        return []


class Host:
    def __init__(self, root: SysRoot):
        self.root = root

    # -- boot ------------------------------------------------------------------------
    @cached_property
    def cmdline(self) -> str:
        text = self.root.read("proc/cmdline")
        if text is None:
            raise UserError(f"{self.root}: cannot read proc/cmdline")
        return text

    @cached_property
    def params(self) -> dict[str, str | None]:
        return parse_cmdline(self.cmdline)

    def param_cpus(self, name: str) -> list[int] | None:
        """The CPUs a cpulist parameter names (isolcpus without its flags); None if absent."""
        return param_cpus(self.params, name, self.cpus_present)

    # -- CPUs ------------------------------------------------------------------------
    def _cpus(self, which: str) -> tuple[int, ...]:
        text = self.root.read(f"sys/devices/system/cpu/{which}")
        return tuple(parse_cpulist(text, which)) if text else ()

    @cached_property
    def cpus_present(self) -> tuple[int, ...]:
        return self._cpus("present") or self._cpus("possible")

    @cached_property
    def cpus_online(self) -> tuple[int, ...]:
        return self._cpus("online") or self.cpus_present

    @cached_property
    def isolated_in_effect(self) -> tuple[int, ...]:
        return self._cpus("isolated")

    @cached_property
    def nohz_full_in_effect(self) -> tuple[int, ...] | None:
        """None when the kernel has no nohz_full file (built without CONFIG_NO_HZ_FULL)."""
        text = self.root.read("sys/devices/system/cpu/nohz_full")
        if text is None:
            return None
        text = text.strip()
        return tuple(parse_cpulist(text, "nohz_full")) if text and text != "(null)" else ()

    @cached_property
    def cpuinfo(self) -> dict[str, str]:
        """The first processor's block of /proc/cpuinfo."""
        info: dict[str, str] = {}
        for line in (self.root.read("proc/cpuinfo") or "").splitlines():
            if not line.strip():
                if info:
                    break
                continue
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
        return info

    @cached_property
    def vendor(self) -> str:
        return self.cpuinfo.get("vendor_id", "unknown")

    @cached_property
    def cpu_flags(self) -> set[str]:
        return set(self.cpuinfo.get("flags", "").split())

    @cached_property
    def virtual_machine(self) -> bool:
        return "hypervisor" in self.cpu_flags

    def siblings(self, cpu: int) -> tuple[int, ...]:
        text = self.root.read(f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        return tuple(parse_cpulist(text)) if text else (cpu,)

    def idle_states(self, cpu: int) -> list[IdleState]:
        base = f"sys/devices/system/cpu/cpu{cpu}/cpuidle"
        states = []
        for d in self.root.listdir(base):
            if not d.startswith("state"):
                continue
            name = self.root.read(f"{base}/{d}/name") or d
            latency = self.root.read_int(f"{base}/{d}/latency") or 0
            disabled = self.root.read_int(f"{base}/{d}/disable") == 1
            states.append(IdleState(cpu, int(d[5:]), name, latency, disabled))
        return sorted(states, key=lambda s: s.index)

    def cpufreq(self, cpu: int) -> tuple[str | None, str | None]:
        base = f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        return self.root.read(f"{base}/scaling_driver"), self.root.read(f"{base}/scaling_governor")

    # -- kernel ----------------------------------------------------------------------
    @cached_property
    def release(self) -> str:
        return self.root.read("proc/sys/kernel/osrelease") or "unknown"

    @property
    def nohz_full_supported(self) -> bool | None:
        """Whether the kernel can act on nohz_full: its build configuration's CONFIG_NO_HZ_FULL,
        else whether sysfs has the nohz_full file; None when neither can be read."""
        config = self.kernel_config
        if config is not None:
            return config.get("CONFIG_NO_HZ_FULL") == "y"
        return True if self.nohz_full_in_effect is not None else None

    @cached_property
    def version(self) -> str:
        return self.root.read("proc/version") or ""

    @cached_property
    def kernel_config(self) -> dict[str, str] | None:
        """CONFIG_* of the running kernel (/proc/config.gz or /boot/config-<release>)."""
        raw = self.root.read_bytes("proc/config.gz")
        text = None
        if raw is not None:
            try:
                text = gzip.decompress(raw).decode("utf-8", "replace")
            except (OSError, EOFError):
                text = None
        if text is None:
            text = self.root.read(f"boot/config-{self.release}")
        if text is None:
            return None
        config = {}
        for line in text.splitlines():
            if line.startswith("CONFIG_"):
                k, _, v = line.partition("=")
                config[k] = v
        return config

    @cached_property
    def preempt_rt(self) -> bool:
        if self.root.read_int("sys/kernel/realtime") == 1:
            return True
        cfg = self.kernel_config or {}
        return cfg.get("CONFIG_PREEMPT_RT") == "y" or "PREEMPT_RT" in self.version

    # -- IRQs, processes, memory -------------------------------------------------------
    @cached_property
    def interrupts(self) -> InterruptTable | None:
        text = self.root.read("proc/interrupts")
        return parse_interrupts(text) if text else None

    @cached_property
    def irqs(self) -> list[Irq]:
        names = {}
        if self.interrupts:
            for kind in self.interrupts.counts:
                num, sep, name = kind.partition(":")
                if sep and num.isdigit():
                    names[int(num)] = name
        out = []
        for d in self.root.listdir("proc/irq"):
            if not d.isdigit():
                continue
            aff = self.root.read(f"proc/irq/{d}/smp_affinity_list")
            if aff is None:
                mask = self.root.read(f"proc/irq/{d}/smp_affinity")
                if mask is None:
                    continue
                affinity = tuple(cpumask_to_cpus(mask))
            else:
                affinity = tuple(parse_cpulist(aff))
            out.append(Irq(int(d), names.get(int(d), "?"), affinity))
        return sorted(out, key=lambda i: i.number)

    @cached_property
    def default_irq_affinity(self) -> tuple[int, ...] | None:
        mask = self.root.read("proc/irq/default_smp_affinity")
        return tuple(cpumask_to_cpus(mask)) if mask else None

    @cached_property
    def processes(self) -> set[str]:
        names = set()
        for d in self.root.listdir("proc"):
            if d.isdigit():
                comm = self.root.read(f"proc/{d}/comm")
                if comm:
                    names.add(comm)
        return names

    def sysctl(self, name: str) -> str | None:
        return self.root.read("proc/sys/" + name.replace(".", "/"))

    def selected(self, rel: str) -> str | None:
        """The bracketed choice of a file like THP's "always [madvise] never"."""
        text = self.root.read(rel)
        return None if text is None else selected_word(text)

    @cached_property
    def mounts(self) -> list[tuple[str, str, str, set[str]]]:
        """(device, mount point, fs type, options) of proc/mounts."""
        out = []
        for line in (self.root.read("proc/mounts") or "").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                out.append((parts[0], parts[1], parts[2], set(parts[3].split(","))))
        return out

    @cached_property
    def cgroup_layout(self) -> str:
        """ "v2" (unified), "hybrid" (v1 controllers plus a v2 tree) or "v1"; "unknown"."""
        at_root = [fs for _, mp, fs, _ in self.mounts if mp == "/sys/fs/cgroup"]
        if at_root == ["cgroup2"]:
            return "v2"
        has_v1 = any(fs == "cgroup" for _, _, fs, _ in self.mounts)
        has_v2 = any(fs == "cgroup2" for _, _, fs, _ in self.mounts)
        if has_v1:
            return "hybrid" if has_v2 else "v1"
        if self.root.exists("sys/fs/cgroup/cgroup.controllers"):
            return "v2"
        return "unknown"

    @cached_property
    def cpuset_mount(self) -> tuple[str, str] | None:
        """Where cpusets are made: ("v1", path of the cpuset hierarchy) or ("v2", path of the
        unified tree), paths relative to the root; None without cpusets."""
        for _, mp, fs, opts in self.mounts:
            if fs == "cgroup" and "cpuset" in opts:
                return "v1", mp.lstrip("/")
        for _, mp, fs, _ in self.mounts:
            if fs == "cgroup2":
                controllers = (self.root.read(f"{mp.lstrip('/')}/cgroup.controllers") or "").split()
                if "cpuset" in controllers:
                    return "v2", mp.lstrip("/")
        return None

    @cached_property
    def numa_nodes(self) -> dict[int, tuple[int, ...]]:
        nodes = {}
        for d in self.root.listdir("sys/devices/system/node"):
            if d.startswith("node") and d[4:].isdigit():
                text = self.root.read(f"sys/devices/system/node/{d}/cpulist")
                nodes[int(d[4:])] = tuple(parse_cpulist(text)) if text else ()
        return nodes

    @cached_property
    def nics(self) -> list[Nic]:
        """Interfaces backed by a device (not lo, veth, bridges, tunnels)."""
        out = []
        for name in self.root.listdir("sys/class/net"):
            if not self.root.exists(f"sys/class/net/{name}/device"):
                continue
            # A virtio NIC's device is a child of the PCI function that carries numa_node.
            node = (
                self.root.read_int(f"sys/class/net/{name}/device/numa_node")
                if self.root.exists(f"sys/class/net/{name}/device/numa_node")
                else self.root.read_int(f"sys/class/net/{name}/device/../numa_node")
            )
            out.append(Nic(name, node if node is not None and node >= 0 else None))
        return out
