"""The guest image's parts that need no VM: the initramfs writer (read back by busybox's
cpio, as the kernel's unpacker would), module load order, the VM kind's options."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lowtail.core.errors import Failure
from lowtail.testbed.duts import KINDS
from lowtail.testbed.duts.vm import VirtualMachine
from lowtail.testbed.vm.cpio import CpioWriter
from lowtail.testbed.vm.kmod import load_order

busybox = shutil.which("busybox", path="/usr/bin:/bin")


@pytest.mark.skipif(busybox is None, reason="busybox is not installed (Debian package busybox-static)")
def test_the_initramfs_reads_back_with_every_entry(tmp_path):
    archive = tmp_path / "initrd.cpio"
    with open(archive, "wb") as f:
        w = CpioWriter(f)
        w.file("init", b"#!/bin/sh\necho hi\n", 0o755)
        w.file("usr/lib/x.so", bytes(range(256)) * 3 + b"odd")  # a length that needs padding
        w.symlink("bin/sh", "busybox")
        w.directory("proc")
        w.close()
    listing = subprocess.run([busybox, "cpio", "-t"], stdin=open(archive, "rb"), capture_output=True, text=True)
    assert sorted(listing.stdout.split()) == sorted(["init", "usr", "usr/lib", "usr/lib/x.so", "bin", "bin/sh", "proc"])
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run([busybox, "cpio", "-i", "-d"], stdin=open(archive, "rb"), cwd=out, check=True, capture_output=True)
    assert (out / "init").read_bytes() == b"#!/bin/sh\necho hi\n" and (out / "init").stat().st_mode & 0o111
    assert (out / "usr/lib/x.so").read_bytes() == bytes(range(256)) * 3 + b"odd"
    assert (out / "bin/sh").is_symlink() and str((out / "bin/sh").readlink()) == "busybox"


def test_modules_load_after_their_dependencies_and_built_in_ones_are_skipped():
    depends = {
        "virtio_net": ["net_failover", "virtio"],
        "net_failover": ["failover"],
        "failover": [],
        "virtio": [],
        "bridge": ["stp", "llc"],
        "stp": ["llc"],
        "llc": [],
    }
    order = load_order(["virtio_net", "bridge"], depends, builtin={"virtio"})
    assert order == ["failover", "net_failover", "virtio_net", "llc", "stp", "bridge"]
    with pytest.raises(Failure, match="no module ghost .needed by bridge"):
        load_order(["bridge"], depends | {"bridge": ["ghost"]}, builtin=set())


def test_vm_options_are_checked_and_sweep():
    configs = KINDS["vm"].expand({"guest_kernel": ["vanilla", "rt"], "guest_forwarder": "lowtail-fwd"})
    assert [(c.guest_kernel, c.guest_forwarder) for c in configs] == [
        ("vanilla", "lowtail-fwd"),
        ("rt", "lowtail-fwd"),
    ]
    for bad, reason in [
        ({"guest_kernel": "/no/such/vmlinuz"}, "guest_kernel"),
        ({"guest_forwarder": "snort"}, "must be one of mirred, bridge, lowtail-fwd"),
        ({"guest_cmdline": "lowtail.fwd=bridge"}, "must not set lowtail"),
        ({"vcpus": 0}, "vcpus"),
        ({"guest_interrupts": "yes"}, "true or false"),
    ]:
        with pytest.raises(ValueError, match=reason):
            KINDS["vm"].expand(bad)


def test_the_guest_forwarder_sleeps_unless_the_guest_isolates_its_vcpu():
    def vm(**options) -> VirtualMachine:
        return VirtualMachine("v", KINDS["vm"].expand(options)[0])

    assert vm().guest_spin_us() == 10
    assert vm(vcpus=2, guest_cmdline="isolcpus=1 nohz_full=1").guest_spin_us() is None
    assert vm(vcpus=2, guest_cmdline="isolcpus=domain,managed_irq,1").guest_spin_us() is None
    assert vm(vcpus=2, guest_cmdline="isolcpus=0").guest_spin_us() == 10  # not the forwarder's vCPU
    assert vm(vcpus=2, guest_cmdline="isolcpus=1", spin_us=50).guest_spin_us() == 50
    line = vm(vcpus=2, guest_cmdline="isolcpus=1 idle=poll").guest_cmdline(("52:54:00:00:00:01", "52:54:00:00:00:02"))
    assert line.endswith("isolcpus=1 idle=poll") and "lowtail.fwd_cpu=1" in line and "lowtail.spin_us= " in line


def test_the_guest_init_script_is_valid_shell():
    script = Path(__file__).parents[2] / "python/lowtail/testbed/vm/guest-init.sh"
    done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_starved_guests_first_table_after_the_traffic_still_covers_it(monkeypatch):
    """What failed on CI: an emulated real-time guest sent no interrupt table while the traffic
    flowed (1 s); the table after it covers the window and its interrupts are the run's."""
    from lowtail.testbed.vm import qemu

    def table(loc: int) -> list[str]:
        return ["@irq", "           CPU0       CPU1", f"LOC:   {loc}   {loc}   Local timer interrupts", "@end"]

    arrivals = iter([0, 5_000_000_000, 10_000_000_000])  # the host's clock as each table arrives
    monkeypatch.setattr(qemu.time, "time_ns", lambda: next(arrivals))
    channel = qemu.GuestChannel(Path("/nonexistent"))
    channel._handle([*table(100), *table(600), *table(700)])
    assert channel.tables == 3
    covering = channel.samples_between(1_000_000_000, 2_000_000_000)
    assert {(s.kind, s.delta, s.t_ns) for s in covering} == {("LOC", 500, 5_000_000_000)}
    assert channel.samples_between(11_000_000_000, 12_000_000_000) == []


def test_a_table_cut_short_by_the_stop_loses_neither_the_statistics_nor_the_stop():
    """What failed on a fresh clone: the guest's sampler was killed inside a table (no
    "@end"), and its @stats and @stopped lines were read as rows of that table: the run's
    statistics were lost and the host waited for a stop it had been told of."""
    from lowtail.testbed.vm import qemu

    channel = qemu.GuestChannel(Path("/nonexistent"))
    cut = ["@irq", "           CPU0", "LOC:   100   Local timer interrupts"]
    whole = ["@irq", "           CPU0", "LOC:   150   Local timer interrupts", "@end"]
    channel._handle(["@ready", *cut, *whole, *cut, '@stats {"forwarder": "mirred", "out_tx_packets": 7}', "@stopped"])
    assert channel.ready.is_set() and channel.stopped.is_set()
    assert channel.stats == {"forwarder": "mirred", "out_tx_packets": 7}
    assert channel.tables == 1  # the whole one; a cut table is no sample


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="QEMU is not installed")
def test_qmp_replies_are_read_by_their_type_from_a_real_qemu(tmp_path):
    """QMP against a real QEMU, paused before it boots anything (no kernel, no root): the
    greeting and events are skipped, `query-cpus-fast` reads as each vCPU's host thread (threads
    of QEMU's process), a command QEMU refuses is its own description, and a reply of another
    shape than lowtail reads is one error naming where."""
    from lowtail.testbed.vm import qemu

    socket_path = tmp_path / "qmp.sock"
    argv = ["qemu-system-x86_64", "-machine", "pc", "-accel", "tcg", "-smp", "2", "-m", "64", "-nodefaults"]
    argv += ["-no-user-config", "-display", "none", "-S", "-qmp", f"unix:{socket_path},server=on,wait=off"]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        qmp = qemu.Qmp(socket_path, alive=lambda: process.poll() is None)
        threads = qemu.vcpu_threads(qmp)
        assert sorted(threads) == [0, 1] and set(threads.values()) <= set(qemu.process_threads(process.pid))
        with pytest.raises(
            Failure, match="QEMU refused no-such-command: The command no-such-command has not been found"
        ):
            qmp.execute("no-such-command")
        with pytest.raises(Failure, match=r"cannot read \(Expected `array`, got `object`.*\): \{\"status\""):
            qmp.query("query-status", list[qemu.CpuInfo])
        qmp.execute("quit")
        qmp.close()
        assert process.wait(10) == 0
    finally:
        process.kill()
        process.wait()


def test_a_guest_report_that_is_no_json_object_is_kept_as_unreadable():
    from lowtail.testbed.vm import qemu

    channel = qemu.GuestChannel(Path("/nonexistent"))
    channel._handle(["@stats [1, 2]"])
    assert channel.stats == {"unreadable": "[1, 2]"}
    channel._handle(['@stats {"forwarder": "bridge"}'])
    assert channel.stats == {"forwarder": "bridge"}


def test_an_image_record_lowtail_cannot_read_means_the_image_is_built_again(tmp_path):
    """`image.json` read back into its type: a record cut short, of another shape (an older
    lowtail's) or missing is no image (`build_image` builds it again), not a KeyError later."""
    import json

    from lowtail.testbed.vm import image

    record = {
        "key": "k",
        "boot_kernel": "vmlinux",
        "kernel": {
            "choice": "vanilla",
            "release": "6.1.0-1-amd64",
            "package": "linux-image-6.1.0-1-amd64",
            "version": "1",
        },
        "kernel_identity": "linux-image-6.1.0-1-amd64_1",
        "modules": ["virtio_net"],
        "programs": {"usr/sbin/tc": "/usr/sbin/tc"},
        "layer": None,
        "size_bytes": 1234,
    }
    assert image._recorded(tmp_path) is None
    (tmp_path / "image.json").write_text(json.dumps(record, indent=1))
    assert image._recorded(tmp_path) == record
    without_kernel = {k: v for k, v in record.items() if k != "boot_kernel"}
    for damaged in ('{"key": "k", "boot', json.dumps({**record, "size_bytes": "big"}), json.dumps(without_kernel)):
        (tmp_path / "image.json").write_text(damaged)
        assert image._recorded(tmp_path) is None
