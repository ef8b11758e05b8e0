"""Which cores the testbed's programs share, and what the forwarder does about it."""

from __future__ import annotations

from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import LowtailFwd, options_from_json

FOUR_CORES = CoreRoles(housekeeping=0, generator=1, capture=2, dut=[3])
TWO_CORES = CoreRoles(housekeeping=0, generator=1, capture=0, dut=[0])


def fwd(**options) -> LowtailFwd:
    stored = {"work_ns": 0, "batch": 1, "spin_us": None, "containment": "bare", "cpus": None} | options
    return LowtailFwd("f", options_from_json("lowtail-fwd", stored))


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


def pmd(**options):
    from lowtail.testbed.duts import DpdkTestpmd

    stored = {"burst": 32, "mbufs": 16384, "ring_frames": 4096, "cpus": None} | options
    return DpdkTestpmd("pmd", options_from_json("dpdk-testpmd", stored))


def test_a_dut_that_never_sleeps_is_warned_about_on_a_shared_core_and_scheduled_to_keep_it():
    """testpmd busy-polls: on the timestamper's and housekeeping's core (two cores) the plan
    says so, stored with the run, and runs it at nice -20 so that other tasks take the core
    only in short slices (at nice 0 on a loaded host it lost 52-90 % at 10 kpps)."""
    (warning,) = pmd().core_plan_warnings(TWO_CORES)
    assert "dpdk-testpmd busy-polls on core 0" in warning
    assert "timestamper" in warning and "housekeeping" in warning
    assert pmd().scheduling(TWO_CORES, isolated=set()) == ["nice", "-n", "-20"]
    # A core of its own that the scheduler keeps other tasks off: real-time, no warning.
    assert pmd().core_plan_warnings(FOUR_CORES) == []
    assert pmd().scheduling(FOUR_CORES, isolated={3})[:2] == ["chrt", "-f"]
    # The forwarder sleeps when its core is shared: nothing to warn about.
    assert fwd().core_plan_warnings(TWO_CORES) == []
    assert fwd(spin_us=None).core_plan_warnings(FOUR_CORES, isolated={3}) == []


def test_a_dut_that_never_sleeps_on_the_generators_core_is_refused():
    import pytest

    from lowtail.core.errors import UserError

    with pytest.raises(UserError, match="core 1, the generator's"):
        pmd(cpus=[1]).check_plan(FOUR_CORES)
    pmd().check_plan(TWO_CORES)  # shares with the timestamper: warned, not refused
    fwd(cpus=[1]).check_plan(FOUR_CORES)  # sleeps when idle
