"""The testbed with real namespaces, veth links, qdiscs, bridges, cgroups and processes:
every DuT kind forwards, containment confines, and nothing is left behind."""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tb_helpers import needs_dpdk, needs_kind, needs_root, resources_of

from lowtail.core.errors import Failure
from lowtail.core.processes import is_alive
from lowtail.host.sysroot import parse_cpulist
from lowtail.testbed import duts
from lowtail.testbed.containment import cpuset_hierarchy
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import DutOptions
from lowtail.testbed.duts import options_from_json
from lowtail.testbed.duts.testpmd import DpdkTestpmd, parse_testpmd_totals
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.process import time_limit
from lowtail.testbed.registry import Registry, find_leftovers, list_netns, remove_leftover
from lowtail.testbed.topology import NamespacesTestbed as SoftTestbed

pytestmark = [needs_root, pytest.mark.root]

PLAN = CoreRoles.for_host()
MIRRED_SETUP = [
    "tc qdisc add dev {in} ingress",
    "tc filter add dev {in} parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev {out}",
]


def custom(command=None, setup=(), containment="bare", cpus=None, ready_timeout=5_000_000_000):
    return {
        "command": command,
        "setup": list(setup),
        "ready_timeout": ready_timeout,
        "containment": containment,
        "cpus": cpus,
    }


def make_dut(kind, name, options):
    """The DuT of a kind with these options (the rest their defaults)."""
    return duts.make_dut(kind, name, options if isinstance(options, DutOptions) else options_from_json(kind, options))


def forwards(tb: SoftTestbed, dut, timeout: float = 10.0) -> bool:
    took = wait_forwarding(
        tb.lg_ns, tb.tx, tb.rx, tb.macs[tb.tx], tb.macs[tb.rx], timeout, still_starting=lambda: dut.failure() is None
    )
    return took is not None


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert resources_of(os.getpid()) == []


@pytest.mark.parametrize(
    "kind, options",
    [
        ("wire", {}),
        ("kernel-mirred", {}),
        ("bridge", {}),
        ("custom", custom(setup=MIRRED_SETUP)),
    ],
)
def test_kernel_duts_forward_and_vanish(tmp_path, kind, options):
    with SoftTestbed(tmp_path, wire=kind == "wire") as tb:
        dut = make_dut(kind, "x", options)
        dut.start(tb, PLAN)
        assert set(tb.namespaces) <= set(list_netns())
        assert forwards(tb, dut)
        assert dut.failure() is None
    assert not set(tb.namespaces) & set(list_netns())


def test_a_dut_that_forwards_nothing_is_told_apart(tmp_path):
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("custom", "x", custom(setup=["true"]))
        dut.start(tb, PLAN)
        assert not forwards(tb, dut, timeout=0.5)


def test_custom_command_runs_with_interfaces_substituted_and_its_crash_is_seen(tmp_path):
    script = " ; ".join(MIRRED_SETUP) + " ; sleep 0.6 ; exit 3"
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("custom", "x", custom(command=f"sh -c '{script}'"))
        dut.start(tb, PLAN)
        assert forwards(tb, dut)
        deadline = time.monotonic() + 5
        while dut.failure() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert dut.failure() is not None and "exited with code 3" in dut.failure()


@pytest.mark.skipif(cpuset_hierarchy() is None, reason="no cgroup cpuset controller on this host")
def test_container_confines_the_dut_to_its_cores_and_the_cgroup_goes_away(tmp_path):
    core = CoreRoles.available()[-1]
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut(
            "custom",
            "x",
            custom(
                command="sh -c " + repr(" ; ".join(MIRRED_SETUP) + " ; exec sleep 60"),
                containment="container",
                cpus=[core],
            ),
        )
        dut.start(tb, PLAN)
        assert forwards(tb, dut)
        pid = dut.program.pid
        cgroup = Path(dut.containment["cgroup"])
        assert cgroup.is_dir()
        assert str(pid) in (cgroup / "cgroup.procs").read_text().split()
        status = Path(f"/proc/{pid}/status").read_text()
        allowed = status.split("Cpus_allowed_list:")[1].split()[0]
        assert set(parse_cpulist(allowed)) == {core}
    assert not cgroup.exists()


def test_bare_dut_is_pinned_with_taskset(tmp_path):
    core = CoreRoles.available()[0]
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("custom", "x", custom(command="sleep 60", setup=MIRRED_SETUP, cpus=[core]))
        dut.start(tb, PLAN)
        assert forwards(tb, dut)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # taskset pins, then execs sleep
            status = Path(f"/proc/{dut.program.pid}/status").read_text()
            if "sleep" in status.split("\n")[0]:
                break
            time.sleep(0.02)
        assert set(parse_cpulist(status.split("Cpus_allowed_list:")[1].split()[0])) == {core}
        assert dut.containment == {"mode": "bare", "cpus": [core]}


@needs_dpdk
def test_dpdk_testpmd_forwards_over_af_packet(tmp_path):
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("dpdk-testpmd", "pmd", DpdkTestpmd.expand({})[0])
        dut.start(tb, PLAN)
        assert Path(f"/var/run/dpdk/{tb.tag}").exists() or dut.failure() is None
        assert forwards(tb, dut, timeout=60), dut.program.log_tail(5)
        totals = dut.stop()
    assert totals["rx_packets"] >= 1 and totals["tx_packets"] >= 1
    assert not Path(f"/var/run/dpdk/{tb.tag}").exists()


def test_testpmd_totals_are_read_from_its_last_block():
    log = textwrap.dedent("""\
        ---------------------- Forward statistics for port 0  ----------------------
        RX-packets: 7              RX-dropped: 0             RX-total: 7
        +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
        RX-packets: 1000           RX-dropped: 3             RX-total: 1003
        TX-packets: 997            TX-dropped: 1             TX-total: 998
        """)
    assert parse_testpmd_totals(log) == {"rx_packets": 1000, "rx_dropped": 3, "tx_packets": 997, "tx_dropped": 1}


def test_errors_during_setup_remove_what_was_made(tmp_path):
    with pytest.raises(Failure, match="setup"), SoftTestbed(tmp_path) as tb:
        make_dut("custom", "x", custom(setup=["tc qdisc add dev nosuchdev ingress"])).start(tb, PLAN)
    assert not set(tb.namespaces) & set(list_netns())


def test_a_namespace_mounted_twice_is_deleted_by_a_second_try_and_one_that_stays_is_said(tmp_path, monkeypatch):
    """`ip netns delete` failing was not looked at: the name stayed, the teardown said nothing
    and forgot the testbed (a fresh clone's double Ctrl-C left a generator's namespace so). The
    deletion is now checked and tried again; what still stays fails the teardown, named, and
    the testbed's state is kept for `lowtail testbed clean`."""
    # A name bound over itself: the first `ip netns delete` detaches a mount and cannot unlink
    # the name, "Device or resource busy"; the second removes it.
    with SoftTestbed(tmp_path / "a") as tb:
        subprocess.run(["mount", "--bind", f"/run/netns/{tb.lg_ns}", f"/run/netns/{tb.lg_ns}"], check=True)
        failed_once = subprocess.run(["ip", "netns", "delete", tb.lg_ns], capture_output=True, text=True)
        assert "busy" in failed_once.stderr and tb.lg_ns in list_netns(), failed_once.stderr
        subprocess.run(["mount", "--bind", f"/run/netns/{tb.lg_ns}", f"/run/netns/{tb.lg_ns}"], check=True)
    assert tb.lg_ns not in list_netns()

    # A name no try removes (a directory in the namespace's place, with a file in it).
    tb = SoftTestbed(tmp_path / "b")
    tb.__enter__()
    state, stuck = tb.registry.file, Path("/run/netns") / tb.lg_ns
    subprocess.run(["ip", "netns", "delete", tb.lg_ns], check=True)
    stuck.mkdir()
    (stuck / "x").touch()
    try:
        with pytest.raises(Failure) as failed:
            tb.close()
        said = str(failed.value)
        assert f"testbed {tb.tag} not fully removed" in said and "`lowtail testbed clean` removes the rest" in said
        assert f"network namespace {tb.lg_ns} is still there after 3 deletions" in said, said
        assert state.exists() and Registry.load(state).netns == [tb.lg_ns]  # the others went
        # The clean-up of a dead owner's testbed says the same and keeps its state.
        (left,) = [entry for entry in find_leftovers_of_any_owner(monkeypatch) if entry.tag == tb.tag]
        with pytest.raises(Failure, match=f"testbed {tb.tag} not fully removed: network namespace"):
            remove_leftover(left)
        assert state.exists()
    finally:
        (stuck / "x").unlink()
        stuck.rmdir()
    remove_leftover(left)
    assert not state.exists()
    tb.registry = None


def find_leftovers_of_any_owner(monkeypatch):
    """The leftovers this host has, the live owners' (this test's) included."""
    from lowtail.testbed import registry

    with monkeypatch.context() as m:
        m.setattr(registry, "is_alive", lambda pid, start: False)
        return find_leftovers()


def test_lowtail_programs_stop_by_themselves_at_their_time_limit(tmp_path):
    """A lowtail that hangs, alive, kept its forwarder and timestamper spinning at real-time
    priority for as long as it hung (a double Ctrl-C once did, for good): they die with
    lowtail, not with a lowtail that is stuck. Started under a time limit they stop by
    themselves when it runs out, as SIGTERM would stop them, their statistics written."""
    from lowtail.core.binaries import find_binary

    with SoftTestbed(tmp_path) as tb:
        with time_limit(2):
            dut = make_dut("lowtail-fwd", "f", {})
            dut.start(tb, PLAN)
            stats = tmp_path / "cap.json"
            argv = [str(find_binary("lowtail-cap")), "--iface", tb.rx, "--out", str(tmp_path / "rx.pcap")]
            cap = tb.spawn("cap", tb.lg_ns, [*argv, "--stats-json", str(stats)], stats=stats)
        started = time.monotonic()
        assert dut.program.wait(30) is not None and cap.wait(30) is not None
        took = time.monotonic() - started
        assert 1.5 < took < 30, took
        assert not dut.program.stop_signal and not cap.stop_signal  # nobody asked them
        assert dut.program.statistics()["stopped_by"] == "time limit"
        assert cap.statistics()["stopped_by"] == "time limit"
        assert cap.returncode() == 0 and dut.program.returncode() == 0


# Takes SIGALRM as QEMU does (blocked, read through a signalfd and dropped) and spins.
_SPINS_DEAF_TO_SIGALRM = "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\nwhile True: pass"


def _ended_unasked(program, within_s: float) -> tuple[int, float]:
    """How `program` ended without being asked to, and after how long (fails if it runs on)."""
    started = time.monotonic()
    code = program.wait(within_s)
    assert code is not None, f"{program.name} still running after {within_s} s"
    assert not program.stop_signal  # nobody asked it
    return code, time.monotonic() - started


@needs_dpdk
def test_a_program_that_does_not_know_the_time_limit_is_ended_by_the_kernel_at_it(tmp_path):
    """testpmd busy-polls at its own priority and reads no LOWTAIL_TIME_LIMIT: in a lowtail
    that hangs it spun on. The limit is a timer that survives its exec: SIGALRM ends it."""
    with SoftTestbed(tmp_path) as tb:
        with time_limit(2):
            dut = make_dut("dpdk-testpmd", "pmd", DpdkTestpmd.expand({})[0])
            dut.start(tb, PLAN)
        code, took = _ended_unasked(dut.program, 30)
        assert code == -signal.SIGALRM and 1.5 < took < 30, (code, took, dut.program.log_tail(3))


def test_a_program_deaf_to_the_time_limit_that_spins_is_killed_for_its_cpu_time(tmp_path):
    """A program that blocks SIGALRM (QEMU does) yet spins is killed by the kernel once it
    has used the limit's seconds of CPU time for every core of the host: the most a run
    within its limit could use."""
    cores = os.cpu_count() or 1
    with SoftTestbed(tmp_path) as tb:
        before = _cpu_seconds_of_children()
        with time_limit(1):
            spinner = tb.spawn("spinner", tb.lg_ns, [sys.executable, "-c", _SPINS_DEAF_TO_SIGALRM])
        code, _ = _ended_unasked(spinner, 30 + 10 * cores)
        cpu_s = _cpu_seconds_of_children() - before
    assert code == -signal.SIGKILL
    assert cpu_s >= cores - 0.5, cpu_s  # killed for its CPU time, not at the timer's second


# CPU time for QEMU (TCG) to boot the guest kernel to its panic: 4.3 s measured here.
_QEMU_TO_PANIC_CPU_S = 10


@needs_kind("vm", "no QEMU here: ")
def test_qemu_whose_guest_spins_is_killed_for_its_cpu_time_under_the_time_limit(tmp_path):
    """The real case of the test above: QEMU takes no SIGALRM (`kill -ALRM` leaves it
    running), and a guest kernel that panicked with panic=0 keeps its vCPU busy forever."""
    from lowtail.core.files import cache_dir
    from lowtail.testbed.vm.kernels import guest_kernel

    kernel = guest_kernel("vanilla", cache_dir(), lambda message: None).vmlinuz
    console = tmp_path / "console.log"
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-nographic", "-nodefaults", "-no-reboot", "-m", "128"]
    argv += ["-serial", f"file:{console}", "-kernel", str(kernel), "-append", "console=ttyS0 panic=0 quiet"]
    cores = os.cpu_count() or 1
    with SoftTestbed(tmp_path / "tb") as tb:
        with time_limit(math.ceil(_QEMU_TO_PANIC_CPU_S / cores)):
            qemu = tb.spawn("qemu", tb.lg_ns, argv)
        deadline = time.monotonic() + 120
        while "Kernel panic" not in _text(console) and qemu.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Kernel panic" in _text(console), (qemu.exit_message(), _text(console)[-300:])
        os.kill(qemu.pid, signal.SIGALRM)
        time.sleep(0.5)
        assert qemu.running(), qemu.exit_message()
        code, _ = _ended_unasked(qemu, 60 + 10 * cores)
    assert code == -signal.SIGKILL, qemu.exit_message()


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _cpu_seconds_of_children() -> float:
    """CPU time of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_the_registry_knows_everything_before_it_exists(tmp_path):
    with SoftTestbed(tmp_path) as tb:
        state = tb.registry.file
        reg = Registry.load(state)
        assert sorted(reg.netns) == sorted(tb.namespaces)
        assert reg.owner_pid == os.getpid() and reg.owner_alive()
    assert not state.exists()


_ORPHAN = """
import sys, time
from pathlib import Path
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import make_dut, options_from_json
from lowtail.testbed.topology import NamespacesTestbed as SoftTestbed
tb = SoftTestbed(Path(sys.argv[1])).__enter__()
dut = make_dut("custom", "x", options_from_json("custom", {"command": "sleep 300", "setup": [], "ready_timeout": 10**9,
                               "containment": "container", "cpus": [CoreRoles.available()[0]]}))
dut.start(tb, CoreRoles.for_host())
print(tb.tag, dut.program.pid, flush=True)
time.sleep(300)
"""


@pytest.mark.leftovers
@pytest.mark.skipif(cpuset_hierarchy() is None, reason="no cgroup cpuset controller on this host")
def test_clean_removes_what_killed_runs_left_and_only_that(tmp_path):
    with SoftTestbed(tmp_path / "live") as live:
        killed = subprocess.Popen(
            [sys.executable, "-c", _ORPHAN, str(tmp_path / "dead")], stdout=subprocess.PIPE, text=True
        )
        tag, dut_pid = killed.stdout.readline().split()
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        left = resources_of(killed.pid)
        assert any(x.endswith("-dut") for x in left) and any("lowtail-" in x for x in left)
        # The DuT died with the process that started it (however that one ended); its
        # namespaces and cgroups are left for `clean`.
        deadline = time.monotonic() + 10
        while is_alive(int(dut_pid), None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not is_alive(int(dut_pid), None)
        leftovers = {x.tag: x for x in find_leftovers()}
        assert tag in leftovers and live.tag not in leftovers
        remove_leftover(leftovers[tag])
        assert resources_of(killed.pid) == []
        assert not is_alive(int(dut_pid), None)
        assert set(live.namespaces) <= set(list_netns())
