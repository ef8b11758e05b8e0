"""Which clocks stamped a run's two sides, and when a clock was stepped during a run: the
rules of lowtail.experiment.clocks on the sides a timestamper records."""

from __future__ import annotations

from lowtail.experiment import clocks

BOOT_A, BOOT_B = "boot-a", "boot-b"


def side(host="ts", boot=BOOT_A, iface="eth1", source="software", phc=None, process="ts/pre+post"):
    return clocks.clock_side(host, boot, iface, {"timestamp_source": source, "phc_index": phc}, process)


def test_one_timestamper_in_software_is_one_clock():
    verdict = clocks.judge(side(), side(iface="eth2"))
    assert verdict["same"] is True and "one timestamper on ts" in verdict["why"]


def test_two_processes_under_one_kernel_share_its_clock_two_hosts_do_not():
    same_kernel = clocks.judge(side(process="ts/pre"), side(host="ts2", process="ts2/post"))
    assert same_kernel["same"] is True and "same boot id" in same_kernel["why"]
    two_hosts = clocks.judge(side(process="ts/pre"), side(host="ts2", boot=BOOT_B, process="ts2/post"))
    assert two_hosts["same"] is False and "two hosts' clocks" in two_hosts["why"]


def test_hardware_stamps_are_one_clock_only_with_one_phc():
    assert clocks.judge(side(source="hardware", phc=0), side(source="hardware", phc=0))["same"] is True
    different = clocks.judge(side(source="hardware", phc=0), side(source="hardware", phc=1, iface="eth2"))
    assert different["same"] is False and "(PHC 1)" in different["why"]


def test_hardware_against_software_or_mixed_is_two_clock_sources():
    assert clocks.judge(side(source="hardware", phc=0), side())["same"] is False
    assert clocks.judge(side(source="mixed", phc=0), side(source="mixed", phc=0))["same"] is False


def test_marks_and_warnings_read_what_is_stored():
    two = {"clocks": clocks.judge(side(source="hardware", phc=0), side())}
    assert clocks.marked("fwd", two) == "fwd [2 clocks]"
    assert clocks.marked("fwd", {"clocks": clocks.judge(side(), side())}) == "fwd"
    assert clocks.marked("fwd", None) == "fwd"  # runs stored before the column
    assert clocks.any_two_clocks([{"testbed": None}, {"testbed": two}])


def test_a_stepped_clock_is_found_slewing_is_not():
    start = (1_000_000_000_000, 5_000_000_000)
    ten_s = 10_000_000_000
    assert not clocks.stepped(start, (start[0] + ten_s, start[1] + ten_s))
    slewed = start[0] + ten_s + 4_000_000  # 400 ppm over 10 s: NTP's slew, no step
    assert not clocks.stepped(start, (slewed, start[1] + ten_s))
    stepped = start[0] + ten_s - 50_000_000  # set back by 50 ms
    assert clocks.stepped(start, (stepped, start[1] + ten_s))
    assert clocks.clock_step_ns(start, (stepped, start[1] + ten_s)) == -50_000_000
