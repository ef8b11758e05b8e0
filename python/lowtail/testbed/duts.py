"""Devices under test, one class per kind. Each sets itself up between the testbed's
`dut_in` (traffic arrives) and `dut_out` (traffic leaves) — in0 and out0 of the DuT
namespace, or the interfaces a DuT names on real wiring — says whether it has crashed,
and hands back its own statistics when stopped. Kinds that run on real wiring set
themselves up through the testbed (`dut_run`, `dut_binary`, `dut_path`), which runs the
commands where the DuT is (a namespace, this host, another host) and undoes them after.

    kernel-mirred   tc: a u32 classifier matching everything + mirred redirect in0 → out0
    bridge          a Linux bridge with in0 and out0 as ports
    lowtail-fwd     lowtail's userspace forwarder (busy-polling, per-packet work, batches)
    dpdk-testpmd    DPDK's testpmd in io mode over the af_packet driver
    custom          any command, with {in}, {out}, {netns}, {cpus} substituted
    external        (real wiring) a device outside lowtail's control: nothing to start
    wire            (calibration) no device: the testbed is a plain veth wire
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lowtail.binaries import find_binary
from lowtail.errors import UserError
from lowtail.testbed.container import DEFAULT_MEMORY_RESERVATION_MIB, recorded_namespaces
from lowtail.testbed.containment import MODES, format_cpu_list
from lowtail.testbed.cores import BUSY_WAIT_NICE, DUT_RT_PRIORITY, CoreRoles, isolated_cpus
from lowtail.testbed.process import Program
from lowtail.testbed.system import tc
from lowtail.testbed.topology import Testbed
from lowtail.units import parse_duration_ns


@dataclass(frozen=True)
class Option:
    """One option a DuT kind accepts in the experiment file."""

    type: str  # int | str | text | bool | choice | cpus | containment | duration | commands
    default: Any = None
    minimum: int = 0
    help: str = ""
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        """The value, normalised; ValueError with a readable reason otherwise."""
        if self.type == "int":
            if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
                raise ValueError(f"must be a whole number ≥ {self.minimum}, not {value!r}")
            return value
        if self.type == "str":
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"must be a non-empty string, not {value!r}")
            return value
        if self.type == "text":  # may be empty
            if not isinstance(value, str):
                raise ValueError(f"must be a string, not {value!r}")
            return value.strip()
        if self.type == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false, not {value!r}")
            return value
        if self.type == "choice":
            if value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}, not {value!r}")
            return value
        if self.type == "cpus":
            if not (isinstance(value, list) and value and all(isinstance(c, int) and c >= 0 for c in value)):
                raise ValueError(f"must be a list of core numbers such as [1] or [2, 3], not {value!r}")
            return sorted(set(value))
        if self.type == "containment":
            if value not in MODES:
                raise ValueError(f"must be one of {', '.join(MODES)}, not {value!r}")
            return value
        if self.type == "duration":
            try:
                return parse_duration_ns(value)
            except UserError as e:
                raise ValueError(str(e)) from None
        if self.type == "commands":
            if not (isinstance(value, list) and all(isinstance(c, str) and c.strip() for c in value)):
                raise ValueError(f"must be a list of command strings, not {value!r}")
            return value
        raise AssertionError(self.type)


PROCESS_OPTIONS = {
    "containment": Option(
        "containment",
        "bare",
        help="bare (an ordinary process) or container (own PID, mount and UTS namespaces, an exclusive "
        "cpuset, reserved memory)",
    ),
    "cpus": Option("cpus", None, help="cores the DuT runs on [default: the core plan's DuT cores]"),
    "memory_reservation": Option(
        "int", DEFAULT_MEMORY_RESERVATION_MIB, help="container: memory reserved for the DuT, MiB"
    ),
}


ALL_TESTBEDS = ("namespaces", "interfaces", "hosts")


class Dut:
    kind: ClassVar[str]
    options: ClassVar[dict[str, Option]] = {}
    # The testbed kinds (testbed/wiring.py) this DuT can be set up on.
    testbeds: ClassVar[tuple[str, ...]] = ("namespaces",)
    ready_timeout_s: float = 10.0
    # kvm | tcg for a DuT that is a virtual machine (set when it starts), None otherwise.
    virtualization: str | None = None

    def __init__(self, name: str, config: dict[str, Any]):
        self.name = name
        self.config = config
        self.program: Program | None = None
        self.containment: dict[str, Any] = {"mode": "bare"}

    @classmethod
    def expand(cls, raw: dict[str, Any]) -> list[dict[str, Any]]:
        """The configurations a `[[dut]]` table stands for: a list where one value is
        expected sweeps over its values (lists of lists for list-valued options).
        ValueError names an unknown option or a bad value."""
        axes = []
        for key, value in raw.items():
            opt = cls.options.get(key)
            if opt is None:
                known = ", ".join(cls.options) or "none: it runs inside the kernel"
                raise ValueError(f"unknown option {key!r} for kind {cls.kind} (its options: {known})")
            list_valued = opt.type in ("cpus", "commands")
            sweep = isinstance(value, list) and (not list_valued or (value and all(isinstance(v, list) for v in value)))
            points = value if sweep else [value]
            if not points:
                raise ValueError(f"option {key!r}: an empty list sweeps over nothing")
            checked = []
            for v in points:
                try:
                    checked.append(opt.check(v))
                except ValueError as e:
                    raise ValueError(f"option {key!r} {e}") from None
            axes.append((key, checked))
        configs: list[dict[str, Any]] = [{}]
        for key, values in axes:
            configs = [c | {key: v} for c in configs for v in values]
        return [cls.validate({k: opt.default for k, opt in cls.options.items()} | c) for c in configs]

    @classmethod
    def validate(cls, config: dict[str, Any]) -> dict[str, Any]:
        """Check one complete configuration (defaults filled in)."""
        return config

    @classmethod
    def check_available(cls) -> None:
        """UserError when what this kind needs is not installed."""

    @classmethod
    def prepare(cls, config: dict[str, Any], log: Callable[[str], None]) -> None:
        """Slow one-time work for a configuration (building a guest image), done before the
        sweep starts; `log` says what is being done."""

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        raise NotImplementedError

    def failure(self) -> str | None:
        """Why the DuT is no longer forwarding, when its process ended by itself."""
        if self.program is not None and self.program.died():
            return f"the DuT {self.name} ({self.kind}): {self.program.exit_message()}"
        return None

    def stop(self) -> dict[str, Any]:
        """Stop the DuT; its own statistics (empty when it keeps none)."""
        if self.program is None:
            return {}
        self.program.stop()
        return self.program.statistics() or {}

    def guest_interrupts(self, start_ns: int, end_ns: int) -> list[Any]:
        """Interrupt samples from inside the DuT (a VM's guest) in a time window, if it has any."""
        return []

    # -- the core plan -------------------------------------------------------------------------

    def busy_polls(self, plan: CoreRoles, isolated: set[int] | None = None) -> bool:
        """Whether the DuT's program polls without ever sleeping on these cores."""
        return False

    def check_plan(self, plan: CoreRoles, isolated: set[int] | None = None) -> None:
        """UserError for a core plan that defeats the measurement: a DuT that never sleeps
        on the generator's core (each would take the core from the other: neither the
        offered traffic nor the DuT would be what is measured)."""
        cores = self._cores(plan)
        if self.busy_polls(plan, isolated) and plan.generator in cores and len(CoreRoles.available()) > 1:
            raise UserError(
                f"DuT {self.name} ({self.kind}) busy-polls and would run on core {plan.generator}, the "
                f"generator's: each would take the core from the other; give it other cores (cpus = [...]) "
                f"or move the generator ([cores] generator = ...)"
            )

    def core_plan_warnings(self, plan: CoreRoles, isolated: set[int] | None = None) -> list[str]:
        """What the plan does to the measurement, stored with the run: a DuT that never
        sleeps on a core the testbed's own programs use."""
        if not self.busy_polls(plan, isolated):
            return []
        warnings = []
        for core in self._cores(plan):
            roles = plan.roles_on(core)
            if roles:
                warnings.append(
                    f"core plan: {self.kind} busy-polls on core {core}, which {' and '.join(roles)} also "
                    f"use{'' if len(roles) > 1 else 's'} ({len(CoreRoles.available())} cores available): it runs "
                    f"at nice {BUSY_WAIT_NICE} and its latencies include the slices they take"
                )
        return warnings

    # -- helpers for DuTs that run a process ----------------------------------------------------

    def _cores(self, plan: CoreRoles) -> list[int]:
        return self.config.get("cpus") or plan.dut

    def _spawn(
        self, tb: Testbed, plan: CoreRoles, argv: list[str], stats: Path | None = None, pin_with_taskset: bool = True
    ) -> Program:
        cores = self._cores(plan)
        if self.config.get("containment") == "container":
            reservation = self.config.get("memory_reservation", DEFAULT_MEMORY_RESERVATION_MIB)
            cgroups, applied = tb.container_cgroups(cores, reservation << 20)
            self.program = tb.spawn(f"dut-{self.name}", tb.dut_ns, argv, stats=stats, cgroup=cgroups, container=True)
            self.containment = {
                "mode": "container",
                "cpus": cores,
                "cgroup": str(cgroups[0]),
                **applied,
                "namespaces": recorded_namespaces(self.program.pid),
            }
            return self.program
        self.containment = {"mode": "bare", "cpus": cores if pin_with_taskset else None}
        self.program = tb.spawn(
            f"dut-{self.name}", tb.dut_ns, argv, stats=stats, cpus=cores if pin_with_taskset else None
        )
        return self.program


class Wire(Dut):
    """Calibration: no DuT at all."""

    kind = "wire"

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        assert tb.wire


class External(Dut):
    """A DuT on the user's wiring that lowtail neither starts nor stops (a switch, an
    appliance, a program the user runs): the run measures whatever it does."""

    kind = "external"
    testbeds = ("interfaces", "hosts")
    options = {"description": Option("text", "", help="what the device is, for the record")}

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        pass


class KernelMirred(Dut):
    kind = "kernel-mirred"
    testbeds = ALL_TESTBEDS

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        tb.dut_run(
            ["tc", "qdisc", "add", "dev", tb.dut_in, "ingress"],
            what="adding the ingress qdisc",
            undo=["tc", "qdisc", "del", "dev", tb.dut_in, "ingress"],
        )
        tb.dut_run(
            mirred_filter(tb.dut_in, tb.dut_out), what=f"adding the u32 + mirred redirect {tb.dut_in} → {tb.dut_out}"
        )


def mirred_filter(from_dev: str, to_dev: str) -> list[str]:
    """The tc command that sends every frame arriving on `from_dev` (which has an ingress
    qdisc) out of `to_dev`: a u32 classifier matching everything and a mirred redirect."""
    return [
        "tc",
        "filter",
        "add",
        "dev",
        from_dev,
        "parent",
        "ffff:",
        "protocol",
        "all",
        "u32",
        "match",
        "u32",
        "0",
        "0",
        "action",
        "mirred",
        "egress",
        "redirect",
        "dev",
        to_dev,
    ]


def mirred_redirect(ns: str, from_dev: str, to_dev: str) -> None:
    """Every frame arriving on `from_dev` in namespace `ns` leaves on `to_dev`."""
    tc("-n", ns, "qdisc", "add", "dev", from_dev, "ingress", what="adding the ingress qdisc")
    tc("-n", ns, *mirred_filter(from_dev, to_dev)[1:], what=f"adding the u32 + mirred redirect {from_dev} → {to_dev}")


class Bridge(Dut):
    kind = "bridge"
    testbeds = ALL_TESTBEDS

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        bridge = tb.dut_link_name("br")
        tb.dut_run(
            ["ip", "link", "add", bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"],
            what="creating the bridge",
            undo=["ip", "link", "del", bridge],
        )
        for port in (tb.dut_in, tb.dut_out):
            tb.dut_run(["ip", "link", "set", port, "master", bridge], what=f"adding {port} to the bridge")
        tb.dut_run(["ip", "link", "set", bridge, "up"], what="bringing the bridge up")


# lowtail-fwd's own options, declared once: the forwarder on a host (`LowtailFwd`) and
# inside a VM guest (`vm.dut.VirtualMachine`, as `guest_options`).
FORWARDER_OPTIONS = {
    "work_ns": Option("int", 0, help="synthetic per-packet work, in nanoseconds"),
    "batch": Option("int", 1, minimum=1, help="packets held until the whole batch is processed"),
    "spin_us": Option(
        "int",
        None,
        help="busy-poll this long after the last packet, then sleep until the "
        "next [default: never sleep on an isolated core of its own, "
        "10 µs elsewhere]",
    ),
}


def guest_options(options: dict[str, Option]) -> dict[str, Option]:
    """Options of a program inside a VM guest, their help saying so."""
    return {name: dataclasses.replace(o, help=f"lowtail-fwd in the guest: {o.help}") for name, o in options.items()}


class LowtailFwd(Dut):
    kind = "lowtail-fwd"
    testbeds = ALL_TESTBEDS
    options = {**FORWARDER_OPTIONS, **PROCESS_OPTIONS}
    # Measured on the 2-vCPU VM, work_ns 2000, batch 1, sharing core 0 with the timestamper:
    # sleeping after 10 µs without frames gave p50 11 µs at 50 kpps and ~20 µs at 10 kpps
    # (a wake-up from another core costs ~15 µs here), where never sleeping gave 1.6-3.8 ms
    # (ordinary scheduling) or a 30-50 ms p99 (real-time, throttled by the kernel).
    SHARED_CORE_SPIN_US = 10

    def spin_us(self, plan: CoreRoles, isolated: set[int] | None = None) -> int | None:
        """How long the forwarder busy-polls before it sleeps; None: it never sleeps. Only
        on a core of its own that the scheduler keeps other tasks off (isolcpus): a
        real-time task that never sleeps on any other core is throttled by the kernel in
        50 ms pieces as soon as an ordinary task waits for that core."""
        if self.config.get("spin_us") is not None:
            return int(self.config["spin_us"])
        core = self._cores(plan)[0]
        if isolated is None:
            isolated = isolated_cpus()
        return None if core in isolated and not plan.shared([core]) else self.SHARED_CORE_SPIN_US

    def busy_polls(self, plan: CoreRoles, isolated: set[int] | None = None) -> bool:
        return self.spin_us(plan, isolated) is None

    @classmethod
    def check_available(cls) -> None:
        find_binary("lowtail-fwd")

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        stats = tb.dut_path("fwd.json")
        argv = [
            tb.dut_binary("lowtail-fwd"),
            "--in",
            tb.dut_in,
            "--out",
            tb.dut_out,
            "--work-ns",
            str(self.config["work_ns"]),
            "--batch",
            str(self.config["batch"]),
            "--cpu",
            str(self._cores(plan)[0]),
            "--rt-priority",
            str(DUT_RT_PRIORITY),
            "--stats-json",
            str(stats),
        ]
        spin = self.spin_us(plan, tb.dut_isolated_cpus())
        if spin is not None:
            argv += ["--spin-us", str(spin)]
        self._spawn(tb, plan, argv, stats, pin_with_taskset=False)
        self.containment["cpus"] = (
            self._cores(plan)[:1] if self.containment["mode"] == "bare" else self.containment["cpus"]
        )


class DpdkTestpmd(Dut):
    kind = "dpdk-testpmd"
    ready_timeout_s = 30.0
    options = {
        "burst": Option("int", 32, minimum=1, help="testpmd's packets per burst"),
        "mbufs": Option("int", 16384, minimum=1024, help="mbufs in the pool (memory without hugepages is scarce)"),
        "ring_frames": Option(
            "int",
            4096,
            minimum=64,
            help="frames in each af_packet ring (DPDK's default, 512, is 51 ms at 10 kpps: less than a "
            "busy host keeps the poller off a shared core; each frame takes 2 KiB of kernel memory)",
        ),
        **PROCESS_OPTIONS,
    }

    @classmethod
    def check_available(cls) -> None:
        if not shutil.which("dpdk-testpmd"):
            raise UserError(
                "the dpdk-testpmd DuT needs DPDK, which is not installed: install the Debian "
                "package dpdk-dev (apt-get install dpdk-dev), or remove this DuT from the experiment"
            )

    # The frame size of its af_packet rings: the largest frame (1518 B) and the ring's header.
    RING_FRAME_BYTES = 2048

    def busy_polls(self, plan: CoreRoles, isolated: set[int] | None = None) -> bool:
        return True  # the forwarding lcore polls its ports without end

    def scheduling(self, plan: CoreRoles, isolated: set[int] | None = None) -> list[str]:
        """The command that starts testpmd with its scheduling: real-time on cores of its
        own, else an ordinary task at nice -20. Measured on the 2-core VM at load 12,
        10 kpps for 2 s, its lcores on the timestamper's core: at nice 0 it lost 88-90 %
        (p50 0.33 s: the poller got a small share of the core and its 512-frame rings
        overflowed, counted by neither testpmd nor the interfaces), at nice -20 14 %, with
        4096-frame rings at nice 0 3.5 % (p50 1.1 s), both: none (p50 5-9 ms, the
        generator itself off its core 80 % of the time)."""
        if plan.dedicated(self._cores(plan), isolated):
            return ["chrt", "-f", str(DUT_RT_PRIORITY)]
        return ["nice", "-n", str(BUSY_WAIT_NICE)]

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        cores = self._cores(plan)
        # The main lcore only waits; the forwarding lcore busy-polls. One core serves both.
        lcores = f"0@{cores[0]},1@{cores[-1]}"
        tb.own_path(Path("/var/run/dpdk") / tb.tag)
        ring = f"framecnt={self.config['ring_frames']},framesz={self.RING_FRAME_BYTES},blocksz=4096"
        argv = [
            *self.scheduling(plan),
            shutil.which("dpdk-testpmd"),
            "--no-huge",
            "--no-pci",
            "-m",
            "256",
            f"--file-prefix={tb.tag}",
            "--lcores",
            lcores,
            f"--vdev=net_af_packet0,iface={tb.dut_in},{ring}",
            f"--vdev=net_af_packet1,iface={tb.dut_out},{ring}",
            "--",
            "--forward-mode=io",
            "--auto-start",
            "--no-lsc-interrupt",
            f"--burst={self.config['burst']}",
            f"--total-num-mbufs={self.config['mbufs']}",
            # Without -i testpmd waits for Enter, or with a stats period for a signal.
            "--stats-period=86400",
        ]
        self._spawn(tb, plan, argv, pin_with_taskset=False)
        self.containment["lcores"] = lcores
        self.containment["scheduling"] = " ".join(argv[: argv.index(shutil.which("dpdk-testpmd"))])

    def stop(self) -> dict[str, Any]:
        super().stop()
        return parse_testpmd_totals(self.program.log.read_text(errors="replace"))


def parse_testpmd_totals(log: str) -> dict[str, Any]:
    """The 'Accumulated forward statistics for all ports' testpmd prints when it stops."""
    block = log.rpartition("Accumulated forward statistics")[2]
    figures = {
        k.lower().replace("-", "_"): int(v)
        for k, v in re.findall(
            r"(RX-packets|RX-dropped|TX-packets|"
            r"TX-dropped): *(\d+)",
            block,
        )
    }
    return figures


class Custom(Dut):
    kind = "custom"
    testbeds = ALL_TESTBEDS
    options = {
        "command": Option(
            "str", None, help="a long-running program: the DuT ({in}, {out}, {netns}, {cpus} are substituted)"
        ),
        "setup": Option("commands", [], help="one-shot commands run in the DuT namespace first, e.g. tc or nft"),
        "teardown": Option(
            "commands",
            [],
            help="commands that undo `setup` on real wiring, run when the run ends however it ends "
            "(a namespace testbed needs none: its namespace goes)",
        ),
        "ready_timeout": Option("duration", 10_000_000_000, help="how long the DuT may take to forward"),
        **PROCESS_OPTIONS,
    }
    PLACEHOLDERS = ("in", "out", "netns", "cpus")

    @classmethod
    def validate(cls, config: dict[str, Any]) -> dict[str, Any]:
        if not config["teardown"]:
            # Left out when empty: the combination keys of custom DuTs stored before it existed stay the same.
            config.pop("teardown")
        if not config["command"] and not config["setup"]:
            raise ValueError("a custom DuT needs `command` (a program) or `setup` (commands), or both")
        for text in [config["command"] or ""] + config["setup"] + config.get("teardown", []):
            for _, field_name, _, _ in string.Formatter().parse(text):
                if field_name is not None and field_name not in cls.PLACEHOLDERS:
                    raise ValueError(
                        f"unknown placeholder {{{field_name}}} in {text!r} "
                        f"(known: {', '.join('{' + p + '}' for p in cls.PLACEHOLDERS)})"
                    )
        return config

    @property
    def ready_timeout_s(self) -> float:  # type: ignore[override]
        return float(self.config["ready_timeout"]) / 1e9

    def _expand(self, template: str, tb: Testbed, plan: CoreRoles) -> list[str]:
        return shlex.split(
            template.format(
                **{
                    "in": tb.dut_in,
                    "out": tb.dut_out,
                    "netns": tb.dut_ns or "",
                    "cpus": format_cpu_list(self._cores(plan)),
                }
            )
        )

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        for template in self.config.get("teardown", []):
            tb.dut_undo(self._expand(template, tb, plan))
        for template in self.config["setup"]:
            argv = self._expand(template, tb, plan)
            tb.dut_run(argv, what=f"DuT {self.name}: setup `{' '.join(argv)}`")
        if self.config["command"]:
            self._spawn(tb, plan, self._expand(self.config["command"], tb, plan))
