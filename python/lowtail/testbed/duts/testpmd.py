"""`kind = "dpdk-testpmd"`: DPDK's testpmd in io mode over the af_packet driver."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.testbed.cores import BUSY_WAIT_NICE, DUT_RT_PRIORITY, CoreRoles
from lowtail.testbed.document import DutCounters, TestpmdOptions
from lowtail.testbed.duts.base import Dut
from lowtail.testbed.duts.options import PROCESS_OPTIONS, IntOption
from lowtail.testbed.protocol import Testbed, dut_ports


class DpdkTestpmd(Dut[TestpmdOptions]):
    kind = "dpdk-testpmd"
    Options = TestpmdOptions
    ready_timeout_s = 30.0
    options = {
        "burst": IntOption(minimum=1, help="testpmd's packets per burst"),
        "mbufs": IntOption(minimum=1024, help="mbufs in the pool (memory without hugepages is scarce)"),
        "ring_frames": IntOption(
            minimum=64,
            help="frames in each af_packet ring (DPDK's default, 512, is 51 ms at 10 kpps: less than a "
            "busy host keeps the poller off a shared core; each frame takes 2 KiB of kernel memory)",
        ),
        **PROCESS_OPTIONS,
    }

    @classmethod
    def check_available(cls) -> None:
        _testpmd()

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
        testpmd = _testpmd()
        dut_in, dut_out = dut_ports(tb)
        ring = f"framecnt={self.config.ring_frames},framesz={self.RING_FRAME_BYTES},blocksz=4096"
        argv = [
            *self.scheduling(plan),
            testpmd,
            "--no-huge",
            "--no-pci",
            "-m",
            "256",
            f"--file-prefix={tb.tag}",
            "--lcores",
            lcores,
            f"--vdev=net_af_packet0,iface={dut_in},{ring}",
            f"--vdev=net_af_packet1,iface={dut_out},{ring}",
            "--",
            "--forward-mode=io",
            "--auto-start",
            "--no-lsc-interrupt",
            f"--burst={self.config.burst}",
            f"--total-num-mbufs={self.config.mbufs}",
            # Without -i testpmd waits for Enter, or with a stats period for a signal.
            "--stats-period=86400",
        ]
        self._spawn(tb, plan, argv, pin_with_taskset=False)
        self.containment["lcores"] = lcores
        self.containment["scheduling"] = " ".join(argv[: argv.index(testpmd)])

    def stop(self) -> DutCounters:
        super().stop()
        return parse_testpmd_totals(self.started.log.read_text(errors="replace"))


def _testpmd() -> str:
    """The dpdk-testpmd program; UserError when DPDK is not installed."""
    found = shutil.which("dpdk-testpmd")
    if not found:
        raise UserError(
            "the dpdk-testpmd DuT needs DPDK, which is not installed: install the Debian "
            "package dpdk-dev (apt-get install dpdk-dev), or remove this DuT from the experiment"
        )
    return found


def parse_testpmd_totals(log: str) -> dict[str, int]:
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
