"""The VM DuT on a real testbed: QEMU's vCPU threads pinned where QMP says they are, its
other threads kept to the emulator cores, real-time while it forwards, and gone with the
testbed; and where the emulator threads go on hosts of other sizes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tb_helpers import needs_kind, needs_root, resources_of, tagged_processes

from lowtail.host.sysroot import parse_cpulist
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import KINDS, make_dut
from lowtail.testbed.duts.vm import emulator_cores
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.topology import NamespacesTestbed as SoftTestbed


def _allowed(tid: int) -> set[int]:
    status = Path(f"/proc/{tid}/status").read_text()
    return set(parse_cpulist(status.split("Cpus_allowed_list:")[1].split()[0]))


@pytest.mark.root
@pytest.mark.slow
@needs_root
@needs_kind("vm", "no VM DuT here: ")
def test_vcpu_threads_are_pinned_the_rest_kept_apart_and_qemu_goes_with_the_testbed(tmp_path):
    plan = CoreRoles.for_host()
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("vm", "v", KINDS["vm"].expand({})[0])
        dut.start(tb, plan)
        took = wait_forwarding(
            tb.lg_ns, tb.tx, tb.rx, tb.macs[tb.tx], tb.macs[tb.rx], 60, still_starting=lambda: dut.failure() is None
        )
        assert took is not None, dut.failure()
        c = dut.containment
        pid = dut.program.pid
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        assert set(c["vcpu_threads"]) == {0}  # one vCPU by default
        names = {t: Path(f"/proc/{pid}/task/{t}/comm").read_text().strip() for t in threads}
        vcpu_tids = {t for t, name in names.items() if name.startswith("CPU ")}  # debug-threads=on names them
        assert vcpu_tids, names
        for t in threads:
            expected = set(c["cpus"]) if t in vcpu_tids else set(c["emulator_cpus"])
            assert _allowed(t) == expected, (names[t], _allowed(t), expected)
            assert os.sched_getscheduler(t) == os.SCHED_FIFO, names[t]
        assert c["emulator_cpus"] == emulator_cores(plan, c["cpus"])
        assert Path(f"/run/lowtail/{tb.tag}/qmp.sock").exists()
        stats = dut.stop()
        assert stats["forwarder"] == "mirred" and stats["out_tx_packets"] >= 1
        assert not dut.program.running()
    assert tagged_processes(tb.tag) == [] and resources_of(os.getpid()) == []


def test_emulator_threads_keep_off_the_vcpu_cores_where_the_host_has_cores_left():
    four = CoreRoles(housekeeping=0, generator=1, capture=2, dut=[3])
    assert emulator_cores(four, [3], available=[0, 1, 2, 3]) == [0]
    assert emulator_cores(four, [0], available=[0, 1, 2, 3]) == [2, 3]  # the generator's core is not one
    two = CoreRoles(housekeeping=0, generator=1, capture=0, dut=[0])
    # Two cores: the generator has one, the vCPU the other; nothing is left for the rest.
    assert emulator_cores(two, [0], available=[0, 1]) == [0]
