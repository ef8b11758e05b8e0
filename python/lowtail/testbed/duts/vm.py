"""`kind = "vm"`: a QEMU virtual machine forwarding between two virtio-net NICs.

    in0 ──tc mirred──► tap vm-in ══ virtio-net ══► guest: mirred | bridge | lowtail-fwd
    out0 ◄──tc mirred── tap vm-out ◄══ virtio-net ══╝

QEMU runs inside the DuT namespace and creates its two tap devices there; tc mirred
redirects (the kernel-mirred DuT's mechanism) join them to in0 and out0. Mirred rather than
a bridge per side: one redirect per frame, no MAC learning or flooding, nothing a bridge's
own timers or netfilter hooks add — what is measured is the VM, and the host's share of it is
the part kernel-mirred already measures alone.

The vCPU threads are pinned to host cores (the DuT's cores of the core plan, or `cpus`),
found through QMP before the guest runs; QEMU's other threads (main loop, I/O) are kept on
other cores where the host has any left, which the run records.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from lowtail.core.errors import Failure, UserError
from lowtail.core.files import cache_dir
from lowtail.host.facts import split_isolcpus
from lowtail.host.interrupts import DEFAULT_INTERVAL_S, InterruptSample
from lowtail.testbed.cores import DUT_RT_PRIORITY, CoreRoles, housekeeping_cores
from lowtail.testbed.document import DutCounters, DutOptions, SuricataOptions, VmOptions
from lowtail.testbed.duts.base import Dut
from lowtail.testbed.duts.kernel_mirred import mirred_redirect
from lowtail.testbed.duts.lowtail_fwd import FORWARDER_OPTIONS, LowtailFwd, guest_options
from lowtail.testbed.duts.options import (
    BoolOption,
    ChoiceOption,
    CpusOption,
    DurationOption,
    IntOption,
    StrOption,
    TextOption,
)
from lowtail.testbed.duts.suricata import (
    GUEST_MEMORY_MIB,
    RuleSetRecord,
    Suricata,
    check_port,
    check_rule_set,
    from_guest,
    guest_layer,
)
from lowtail.testbed.duts.suricata import invalid_reasons as suricata_invalid_reasons
from lowtail.testbed.process import make_realtime
from lowtail.testbed.protocol import Testbed, dut_namespace, dut_ports
from lowtail.testbed.system import ip, names_file
from lowtail.testbed.vm.image import GuestImage, ImageLayer, build_image, check_image_tools
from lowtail.testbed.vm.kernels import FLAVOURS
from lowtail.testbed.vm.qemu import (
    GUEST_BASE_CMDLINE,
    Acceleration,
    GuestChannel,
    Nic,
    Qmp,
    probe_acceleration,
    process_threads,
    qemu_argv,
    qemu_binary,
    vcpu_threads,
)

GUEST_FORWARDERS = ("mirred", "bridge", "lowtail-fwd", "suricata")
# The options of the Suricata IPS, the same objects as the suricata kind's: in a guest it
# takes the same rule sets and actions. Left out of other forwarders' configurations.
IPS_OPTIONS = ("rules", "action", "port")
TAP_IN, TAP_OUT = "vm-in", "vm-out"
# How long the guest may take to stop its forwarder and report (seconds, TCG on a busy host:
# Suricata's exit, its final statistics written, took past 30 s under an emulated guest while
# the host's other core ran a second test suite; waiting costs only where the guest is slow).
STOP_TIMEOUT_S = 60.0


class VirtualMachine(Dut[VmOptions]):
    kind = "vm"
    Options = VmOptions
    options = {
        "guest_kernel": StrOption(
            help="vanilla (Debian's linux-image-amd64), rt (linux-image-rt-amd64: PREEMPT_RT) or a vmlinuz file",
        ),
        "guest_forwarder": ChoiceOption(
            choices=GUEST_FORWARDERS,
            help="what forwards inside the guest: tc mirred, a bridge, lowtail-fwd, or the Suricata IPS (rules, "
            "action and port as the suricata kind's)",
        ),
        **{name: Suricata.options[name] for name in IPS_OPTIONS},
        **guest_options(FORWARDER_OPTIONS),
        "guest_cmdline": TextOption(help="boot parameters for the guest kernel (isolcpus=1 nohz_full=1 rcu_nocbs=1 …)"),
        "vcpus": IntOption(minimum=1, help="virtual CPUs; lowtail-fwd runs on the last one"),
        "memory": IntOption(minimum=64, help="guest memory, MiB"),
        "cpus": CpusOption(help="host cores for the vCPU threads, in turn [default: the plan's DuT cores]"),
        "accel": ChoiceOption(choices=("auto", "kvm", "tcg"), help="KVM or TCG (auto: KVM if a guest boots under it)"),
        "guest_interrupts": BoolOption(help="sample the guest's /proc/interrupts (every 100 ms)"),
        "ready_timeout": DurationOption(help="how long the guest may take to boot and forward"),
    }

    def __init__(self, name: str, config: VmOptions):
        super().__init__(name, config)
        self.channel: GuestChannel | None = None
        self.acceleration: Acceleration | None = None
        self.ips_rules: RuleSetRecord | None = None  # a guest IPS's rule set, as its runs record it

    @classmethod
    def validate(cls, config: DutOptions) -> DutOptions:
        assert isinstance(config, VmOptions)
        choice = config.guest_kernel
        if choice not in FLAVOURS and not names_file(choice):
            raise ValueError(
                f"option 'guest_kernel' must be {' or '.join(FLAVOURS)} or an existing vmlinuz file, not {choice!r}"
            )
        if "lowtail." in config.guest_cmdline:
            raise ValueError("option 'guest_cmdline' must not set lowtail.* parameters: the run sets them")
        ips = SuricataOptions()  # the IPS's defaults
        if config.guest_forwarder == "suricata":
            if config.memory < GUEST_MEMORY_MIB:
                raise ValueError(
                    f"a guest running Suricata needs memory ≥ {GUEST_MEMORY_MIB} (MiB): the program, its libraries "
                    f"and its flow tables live in the guest's RAM; set memory = {GUEST_MEMORY_MIB}"
                )
            given = {name: getattr(config, name) for name in IPS_OPTIONS if getattr(config, name) is not msgspec.UNSET}
            config = msgspec.structs.replace(config, **({name: getattr(ips, name) for name in IPS_OPTIONS} | given))
            check_port(config.ips()[2])
            return config
        for name in IPS_OPTIONS:
            # Not the IPS: its options would only change the stored configuration's key.
            if getattr(config, name) not in (msgspec.UNSET, getattr(ips, name)):
                raise ValueError(f'option {name!r} is the Suricata IPS\'s: it needs guest_forwarder = "suricata"')
        return msgspec.structs.replace(config, rules=msgspec.UNSET, action=msgspec.UNSET, port=msgspec.UNSET)

    @classmethod
    def check_available(cls) -> None:
        qemu_binary()
        check_image_tools()
        if not Path("/dev/net/tun").exists():
            raise UserError("a VM DuT needs /dev/net/tun (the tun driver) for its tap devices")

    @classmethod
    def prepare(cls, config: DutOptions, log: Callable[[str], None]) -> None:
        """Build (or find) the guest image and learn the acceleration before the sweep (and
        check a guest IPS's rule set as the bare one's is)."""
        assert isinstance(config, VmOptions)
        if config.guest_forwarder == "suricata":
            check_rule_set(*config.ips(), DurationOption.seconds(config.ready_timeout), log)
        image = build_image(config.guest_kernel, progress=log, layer=cls._layer(config)[0])
        if config.accel == "auto":
            probe_acceleration(image.kernel, image.initrd, cache_dir(), log)

    @property
    def ready_timeout_s(self) -> float:  # type: ignore[override]
        return DurationOption.seconds(self.config.ready_timeout)

    @classmethod
    def _layer(cls, config: VmOptions) -> tuple[ImageLayer | None, RuleSetRecord | None]:
        """The guest image's Suricata layer (and what a run records of its rules), if the
        guest runs the IPS: its workers on the forwarding vCPU, the rest on vCPU 0."""
        if config.guest_forwarder != "suricata":
            return None, None
        return guest_layer(*config.ips(), worker_cpu=config.vcpus - 1, management_cpu=0)

    def _acceleration(self, image: GuestImage) -> Acceleration:
        if self.config.accel == "auto":
            return probe_acceleration(image.kernel, image.initrd, cache_dir(), lambda message: None)
        return Acceleration(self.config.accel, "chosen in the experiment file")

    def guest_spin_us(self) -> int | None:
        """lowtail-fwd's busy-poll time in the guest, by the host forwarder's rule: never
        sleep only on a vCPU of its own that the guest's scheduler keeps free (isolcpus)."""
        if self.config.spin_us is not None:
            return self.config.spin_us
        fwd_vcpu = self.config.vcpus - 1
        isolated: set[int] = set()
        for param in self.config.guest_cmdline.split():
            if param.startswith("isolcpus="):
                isolated |= set(split_isolcpus(param.partition("=")[2])[1])
        alone = self.config.vcpus > 1 and fwd_vcpu in isolated
        return None if alone else LowtailFwd.SHARED_CORE_SPIN_US

    def guest_cmdline(self, macs: tuple[str, str]) -> str:
        c = self.config
        spin = self.guest_spin_us()
        interval_ms = round(DEFAULT_INTERVAL_S * 1000) if c.guest_interrupts else 0
        params = {
            "fwd": c.guest_forwarder,
            "in": macs[0],
            "out": macs[1],
            "work_ns": c.work_ns,
            "batch": c.batch,
            "spin_us": "" if spin is None else spin,
            "fwd_cpu": c.vcpus - 1,
            "hk_cpu": 0,
            "rt_priority": DUT_RT_PRIORITY,
            "irq_ms": interval_ms,
        }
        ours = " ".join(f"lowtail.{k}={v}" for k, v in params.items())
        return f"{GUEST_BASE_CMDLINE} {ours} {c.guest_cmdline}".strip()

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        layer, self.ips_rules = self._layer(self.config)
        image = build_image(self.config.guest_kernel, layer=layer)
        self.acceleration = self._acceleration(image)
        self.virtualization = self.acceleration.name
        sockets = Path("/run/lowtail") / tb.tag  # short: unix socket paths are limited to 107 bytes
        tb.own_path(sockets)
        sockets.mkdir(parents=True, exist_ok=True)
        mac_in, mac_out = ("52:54:00:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(3)) for _ in range(2))
        macs = (mac_in, mac_out)
        vcpu_cores = self._cores(plan)
        emulator = emulator_cores(plan, vcpu_cores)
        argv = qemu_argv(
            name=f"lowtail-{tb.tag}",
            accel=self.acceleration,
            kernel=image.kernel,
            initrd=image.initrd,
            vcpus=self.config.vcpus,
            memory_mib=self.config.memory,
            cmdline=self.guest_cmdline(macs),
            nics=[Nic(TAP_IN, macs[0]), Nic(TAP_OUT, macs[1])],
            console_log=tb.work_dir / "guest-console.log",
            qmp_socket=sockets / "qmp.sock",
            control_socket=sockets / "control.sock",
        )
        ns, (dut_in, dut_out) = dut_namespace(tb), dut_ports(tb)
        program = self.program = tb.spawn(f"dut-{self.name}", ns, argv, cpus=emulator)
        qmp = Qmp(sockets / "qmp.sock", timeout_s=30.0, alive=program.running)
        try:
            pinned = self._pin_vcpus(qmp, vcpu_cores)
            for tap in (TAP_IN, TAP_OUT):
                ip("-n", ns, "link", "set", tap, "up", what=f"bringing the VM's tap {tap} up")
            mirred_redirect(ns, dut_in, TAP_IN)
            mirred_redirect(ns, TAP_OUT, dut_out)
            channel = self.channel = GuestChannel(sockets / "control.sock")
            channel.connect(10.0, alive=program.running)
            qmp.execute("cont")
        finally:
            qmp.close()
        self.containment = {
            "mode": "vm",
            "virtualization": self.acceleration.name,
            "acceleration_reason": self.acceleration.reason,
            "vcpus": self.config.vcpus,
            "vcpu_threads": pinned,
            "cpus": sorted(set(pinned.values())),
            "emulator_cpus": emulator,
            "emulator_shares_vcpu_cores": bool(set(emulator) & set(vcpu_cores)),
            "guest_kernel": image.info["kernel"],
            "image": image.key,
        }
        self._wait_ready(channel)
        self.containment["scheduling"] = self._realtime()

    def _realtime(self) -> str:
        """QEMU's threads to SCHED_FIFO at the DuT's priority, as lowtail-fwd runs, once the
        guest has booted (a booting emulated guest is busy for seconds and would starve the
        core's other tasks). They sleep while the guest idles, so they take the core only
        for the work the traffic brings. Measured here (TCG, a host shared with compiling
        engineers): as ordinary threads the guest got its turn every few tens of ms and fell
        behind even 500 pps (p50 0.8 s, growing); under SCHED_FIFO 45 it forwarded 20 kpps
        without loss, p50 2.4 ms."""
        pid = self.started.pid
        # QEMU's threads winding down under SCHED_FIFO on one core starve each other: a
        # powered-off guest's QEMU took 20 s to exit. Ordinary again before it stops.
        self.started.before_stop = lambda: make_realtime(pid, None)
        return make_realtime(pid, DUT_RT_PRIORITY)

    def _pin_vcpus(self, qmp: Qmp, cores: list[int]) -> dict[int, int]:
        """Each vCPU thread to a host core (in turn over `cores`); vCPU index → core."""
        threads = vcpu_threads(qmp)
        pid = self.started.pid
        unknown = [t for t in threads.values() if t not in process_threads(pid)]
        if unknown:
            raise Failure(f"QEMU's vCPU threads {unknown} are not threads of its process {pid}")
        pinned = {}
        for index, tid in sorted(threads.items()):
            core = cores[index % len(cores)]
            os.sched_setaffinity(tid, {core})
            pinned[index] = core
        return pinned

    def _wait_ready(self, channel: GuestChannel) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while not channel.ready.wait(0.1):
            if not self.started.running() or time.monotonic() > deadline:
                break
        # The caller's forwarding probe says what went wrong when the guest never got ready.

    def failure(self) -> str | None:
        if self.channel is not None and self.channel.error:
            return f"the DuT {self.name} (vm): the guest says: {self.channel.error}"
        if self.program is not None and self.program.died():
            console = _tail(self.program.log.parent / "guest-console.log")
            return f"the DuT {self.name} (vm): {self.program.exit_message()}" + (
                f"; the guest's console ended with: {console}" if console else ""
            )
        return None

    def stop(self) -> DutCounters:
        """Ask the guest to stop its forwarder and report, then let it power off."""
        if self.program is None:
            return {}
        stats: DutCounters = {}
        if self.channel is not None and self.program.running():
            self.channel.send("stop")
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while not self.channel.stopped.wait(0.05) and self.program.running() and time.monotonic() < deadline:
                pass
            stats = self.channel.stats or {}
            make_realtime(self.program.pid, None)
            self.channel.send("poweroff")
            if self.program.wait(15.0) is None:
                self.program.stop()
        else:
            self.program.stop()
        if self.channel is not None:
            self.channel.close()
            if stats.get("program") == "suricata":
                stats = from_guest(stats, self.config.ips()[1], self.ips_rules)
            stats = stats | {"guest_interrupt_tables": self.channel.tables}
        return stats

    def invalid_reasons(self, statistics: DutCounters, frames_sent: int) -> list[str]:
        if self.config.guest_forwarder != "suricata":
            return []
        return suricata_invalid_reasons(statistics.get("suricata"), frames_sent)

    def guest_interrupts(self, start_ns: int, end_ns: int) -> list[InterruptSample]:
        return self.channel.samples_between(start_ns, end_ns) if self.channel else []


def emulator_cores(plan: CoreRoles, vcpu_cores: list[int], available: list[int] | None = None) -> list[int]:
    """Where QEMU's threads other than the vCPUs go (`cores.housekeeping_cores`)."""
    return housekeeping_cores(plan, vcpu_cores, available)


def _tail(path: Path, lines: int = 2) -> str:
    try:
        text = [t.strip() for t in path.read_text(errors="replace").splitlines() if t.strip()]
    except FileNotFoundError:
        return ""
    return " | ".join(text[-lines:])
