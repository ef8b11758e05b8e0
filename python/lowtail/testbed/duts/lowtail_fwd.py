"""`kind = "lowtail-fwd"`: lowtail's userspace forwarder (AF_PACKET rings, synthetic
per-packet work, batches; busy-polling only where a core is its own)."""

from __future__ import annotations

import dataclasses

from lowtail.core.binaries import find_binary
from lowtail.testbed.cores import DUT_RT_PRIORITY, CoreRoles, isolated_cpus
from lowtail.testbed.document import LowtailFwdOptions
from lowtail.testbed.duts.base import ALL_TESTBEDS, Dut
from lowtail.testbed.duts.options import PROCESS_OPTIONS, IntOption, Option
from lowtail.testbed.protocol import Testbed, dut_ports

# lowtail-fwd's own options, declared once: the forwarder on a host (`LowtailFwd`) and
# inside a VM guest (`duts.vm.VirtualMachine`, as `guest_options`).
FORWARDER_OPTIONS: dict[str, Option] = {
    "work_ns": IntOption(help="synthetic per-packet work, in nanoseconds"),
    "batch": IntOption(minimum=1, help="packets held until the whole batch is processed"),
    "spin_us": IntOption(
        help="busy-poll this long after the last packet, then sleep until the "
        "next [default: never sleep on an isolated core of its own, "
        "10 µs elsewhere]",
    ),
}


# Only on a host: the guest's forwarder is started without it (duts/vm.py).
BATCH_TIMEOUT_OPTION = IntOption(
    minimum=1,
    help="wait up to this long (µs) after a batch's first packet for the batch to fill "
    "[default: take what is waiting, never wait]",
)


def guest_options(options: dict[str, Option]) -> dict[str, Option]:
    """Options of a program inside a VM guest, their help saying so."""
    return {name: dataclasses.replace(o, help=f"lowtail-fwd in the guest: {o.help}") for name, o in options.items()}


class LowtailFwd(Dut[LowtailFwdOptions]):
    kind = "lowtail-fwd"
    Options = LowtailFwdOptions
    testbeds = ALL_TESTBEDS
    options = {**FORWARDER_OPTIONS, "batch_timeout_us": BATCH_TIMEOUT_OPTION, **PROCESS_OPTIONS}
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
        if self.config.spin_us is not None:
            return self.config.spin_us
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
        dut_in, dut_out = dut_ports(tb)
        argv = [
            tb.dut_binary("lowtail-fwd"),
            "--in",
            dut_in,
            "--out",
            dut_out,
            "--work-ns",
            str(self.config.work_ns),
            "--batch",
            str(self.config.batch),
            "--cpu",
            str(self._cores(plan)[0]),
            "--rt-priority",
            str(DUT_RT_PRIORITY),
            "--stats-json",
            str(stats),
        ]
        if self.config.batch_timeout_us is not None:
            argv += ["--batch-timeout-us", str(self.config.batch_timeout_us)]
        spin = self.spin_us(plan, tb.dut_isolated_cpus())
        if spin is not None:
            argv += ["--spin-us", str(spin)]
        self._spawn(tb, plan, argv, stats, pin_with_taskset=False)
        self.containment["cpus"] = (
            self._cores(plan)[:1] if self.containment["mode"] == "bare" else self.containment["cpus"]
        )
