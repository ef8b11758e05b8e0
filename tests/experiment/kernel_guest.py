"""Run a command on another kernel: a QEMU guest booting Debian's guest kernel with this
host's own file system as its root (read-only over 9p, writes going to memory through an
overlay), for the tests whose kernel feature this host lacks (802.1Q VLANs here: its kernel
has no CONFIG_VLAN_8021Q and cannot load modules).

The guest sees the same paths as the host — the same tree, virtual environment and built
programs — so the command is the very test the host would run. One directory of the host
(`shared`) is mounted read-write at the same path, for what the guest writes back. What the
command printed and its exit status come back over the serial console.

    done = run_on_guest_kernel([sys.executable, "vlan_loop.py", str(tmp_path), "1kpps"], cwd=here, shared=tmp_path)
    done.returncode, done.output, done.kernel_release
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from lowtail.core.files import cache_dir
from lowtail.testbed.vm.cpio import CpioWriter
from lowtail.testbed.vm.image import boot_kernel, busybox, busybox_applets, cache_locked
from lowtail.testbed.vm.kernels import GuestKernel, fetch_package, guest_kernel
from lowtail.testbed.vm.kmod import load_order, module_name
from lowtail.testbed.vm.qemu import GUEST_BASE_CMDLINE, Acceleration, machine_args, qemu_binary

# What the guest loads: the 9p root and its overlay, the VLANs and veth pairs the test makes,
# tc's ingress/u32/mirred (kernel-mirred hops), and the PCI transport.
MODULES = (
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "overlay",
    "veth",
    "8021q",
    "sch_ingress",
    "cls_u32",
    "act_mirred",
)
_STATUS = re.compile(r"^lowtail-guest-status=(\d+)\s*$", re.MULTILINE)
_RELEASE = re.compile(r"^lowtail-guest-kernel=(\S+)\s*$", re.MULTILINE)

INIT = r"""#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /etc/modules); do insmod /lib/modules/$m.ko || echo "cannot load $m"; done
echo "lowtail-guest-kernel=$(uname -r)"
mkdir -p /lower /rw /root
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 host /lower || poweroff -f
mount -t tmpfs -o size=2g tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /root || poweroff -f
for d in proc sys dev; do mount --move /$d /root/$d; done
# A boot's own runtime state, as on any boot (the host's namespaces and testbeds are not the guest's);
# /tmp stays the host's, written in memory: a tree cloned under /tmp must stay visible.
mount -t tmpfs tmpfs /root/run
mount -t cgroup2 none /root/sys/fs/cgroup 2> /dev/null
mkdir -p "/root$(cat /etc/shared)"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 shared "/root$(cat /etc/shared)" || poweroff -f
cp /etc/command /root/run/lowtail-guest-command
chroot /root /bin/sh /run/lowtail-guest-command > /dev/console 2>&1
echo "lowtail-guest-status=$?" > /dev/console
sync
poweroff -f
"""


@dataclass(frozen=True)
class GuestRun:
    returncode: int | None  # None: the guest never said (it crashed or ran out of time)
    output: str  # the console: the kernel's complaints and everything the command printed
    kernel_release: str | None  # what `uname -r` said in the guest
    modules: list[str]  # what the guest loaded, in order


def _modules(kernel: GuestKernel, deb: Path, into: Path) -> dict[str, Path]:
    """Every module the guest loads, dependencies first; those the product's extraction
    leaves in the package (9p, overlay, 8021q, veth) taken out of it into `into` once."""
    order = load_order(list(MODULES), kernel.depends, set(kernel.builtin))
    missing = {name for name in order if name not in kernel.modules and not (into / f"{name}.ko").exists()}
    if missing:
        into.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                name = module_name(member.name)
                if member.isfile() and member.name.endswith(".ko") and name in missing:
                    got = tar.extractfile(member)
                    assert got is not None
                    partial = into / f"{name}.ko.partial"
                    partial.write_bytes(got.read())
                    partial.rename(into / f"{name}.ko")
        proc.stdout.close()
        assert proc.wait() == 0
    return {name: kernel.modules.get(name, into / f"{name}.ko") for name in order}


def _initramfs(path: Path, modules: dict[str, Path], command: str, shared: Path) -> None:
    busybox_path = busybox()
    with open(path, "wb") as f:
        w = CpioWriter(f)
        for d in ("dev", "proc", "sys", "bin", "etc", "lib/modules"):
            w.directory(d)
        w.char_device("dev/console", 5, 1)
        w.file("init", INIT.encode(), 0o755)
        w.host_file("bin/busybox", busybox_path)
        for applet in busybox_applets(busybox_path):
            if applet != "busybox":
                w.symlink(f"bin/{applet}", "busybox")
        for name, ko in modules.items():
            w.host_file(f"lib/modules/{name}.ko", ko)
        w.file("etc/modules", "\n".join(modules).encode() + b"\n")
        w.file("etc/shared", str(shared).encode())
        w.file("etc/command", command.encode(), 0o755)
        w.close()


def run_on_guest_kernel(
    argv: list[str],
    cwd: Path,
    shared: Path,
    timeout_s: float = 900,
    vcpus: int = 2,
    memory_mib: int = 4096,
) -> GuestRun:
    """Run argv in cwd on Debian's guest kernel (root, the host's files); `shared` is written back."""
    cache = cache_dir()
    with cache_locked(cache):  # the VM tests fetch and extract the same kernel, perhaps right now
        kernel = guest_kernel("vanilla", cache, lambda message: None)
        _, _, deb = fetch_package(cache, "vanilla", lambda message: None)
        modules = _modules(kernel, deb, cache / "kernels" / f"{kernel.identity}.test-guest-modules")
    command = f"cd {shlex.quote(str(cwd))} && exec {shlex.join(argv)}\n"
    shared.mkdir(parents=True, exist_ok=True)
    boot = shared / ".guest"
    boot.mkdir(exist_ok=True)
    initrd = boot / "initrd.cpio"
    _initramfs(initrd, modules, command, shared)
    vmlinux = boot_kernel(kernel.vmlinuz, boot)
    console = boot / "console.log"
    argv_qemu = [
        qemu_binary(),
        *Acceleration("tcg", "this host's kernel lacks what the test needs").accel_args(vcpus),
        *machine_args(vmlinux, initrd, vcpus, memory_mib),
        "-append",
        f"{GUEST_BASE_CMDLINE} init=/init",
        "-serial",
        f"file:{console}",
        "-virtfs",
        "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={shared},mount_tag=shared,security_model=none,multidevs=remap",
    ]
    try:
        subprocess.run(argv_qemu, timeout=timeout_s, capture_output=True, check=False)
    except subprocess.TimeoutExpired:
        pass
    output = console.read_text(errors="replace") if console.exists() else ""
    found, release = _STATUS.findall(output), _RELEASE.findall(output)
    return GuestRun(int(found[-1]) if found else None, output, release[0] if release else None, list(modules))
