"""Which cores the testbed's programs share, and what the forwarder does about it."""

from __future__ import annotations

from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import LowtailFwd

FOUR_CORES = CoreRoles(housekeeping=0, generator=1, capture=2, dut=[3])
TWO_CORES = CoreRoles(housekeeping=0, generator=1, capture=0, dut=[0])


def fwd(**options) -> LowtailFwd:
    return LowtailFwd("f", {"work_ns": 0, "batch": 1, "spin_us": None, "containment": "bare", "cpus": None} | options)


def test_a_forwarder_busy_polls_only_on_an_isolated_core_of_its_own():
    assert not FOUR_CORES.shared(FOUR_CORES.dut)
    assert fwd().spin_us(FOUR_CORES, isolated={3}) is None
    # Not isolated: ordinary tasks may queue there, and a real-time task that never sleeps
    # is then throttled for 50 ms at a time.
    assert fwd().spin_us(FOUR_CORES, isolated=set()) == LowtailFwd.SHARED_CORE_SPIN_US
    assert TWO_CORES.shared(TWO_CORES.dut)
    assert fwd().spin_us(TWO_CORES, isolated={0}) == LowtailFwd.SHARED_CORE_SPIN_US
    # Placed by the user on the generator's core: shared too.
    assert fwd(cpus=[1]).spin_us(FOUR_CORES, isolated={1, 2, 3}) == LowtailFwd.SHARED_CORE_SPIN_US


def test_the_users_spin_time_wins():
    assert fwd(spin_us=0).spin_us(FOUR_CORES, isolated={3}) == 0
    assert fwd(spin_us=200).spin_us(TWO_CORES, isolated=set()) == 200


def test_the_generator_runs_real_time_only_on_a_core_the_scheduler_keeps_free():
    assert FOUR_CORES.generator_realtime(isolated={1, 2, 3})
    assert not FOUR_CORES.generator_realtime(isolated={2, 3})
    assert not TWO_CORES.generator_realtime(isolated=set())
    assert FOUR_CORES.generator_scheduling(isolated={1}) == ["--rt-priority", "40"]
    assert TWO_CORES.generator_scheduling(isolated=set()) == ["--nice", "-20"]
