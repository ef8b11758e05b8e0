"""The guest image of a VM DuT: a kernel and an initramfs holding busybox, `tc`, lowtail-fwd,
the C library they run on, the kernel modules the guest needs and lowtail's init script.

Built once per set of inputs and cached: the image's key hashes the kernel (package and
version, or the vmlinuz's content), every file that goes into the initramfs and the list of
modules. A run's own settings (forwarder, work, batch, boot parameters) reach the guest on
its kernel command line, never inside the image, so every run of a kernel shares one image.

    image = build_image("vanilla", progress=print)   # cached after the first time
    image.kernel, image.initrd
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypedDict

import msgspec

from lowtail.core.binaries import find_binary
from lowtail.core.errors import Failure, UserError
from lowtail.core.files import cache_dir
from lowtail.testbed.system import tool
from lowtail.testbed.vm.cpio import CpioWriter
from lowtail.testbed.vm.kernels import GuestKernel, KernelDescription, guest_kernel
from lowtail.testbed.vm.kmod import load_order

# The modules every guest loads (whatever its forwarder: the forwarder is chosen at boot):
# the PCI transport, the NICs, the control port, tc ingress + matchall + mirred, the bridge.
GUEST_MODULES = (
    "virtio_pci",
    "virtio_net",
    "virtio_console",
    "sch_ingress",
    "cls_matchall",
    "act_mirred",
    "bridge",
)
_XEN_ELFNOTE_PHYS32_ENTRY = 18
# Bumped when the layout of the image changes in a way its inputs do not show.
IMAGE_FORMAT = 1

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageLayer:
    """What a guest needs beyond the forwarders every image holds, when an experiment asks
    for it (the Suricata IPS: its program, libraries, configuration and rule set): programs
    (guest path → host file; their libraries come along, as `ldd` lists them) and data files
    (guest path → content). `name` tells layers apart in the cache: images of one kernel
    with another layer (another rule set) are kept, older ones of the same layer pruned."""

    name: str
    programs: dict[str, Path]
    data: dict[str, bytes]


class ImageInfo(TypedDict):
    """What an image's directory records of it (`image.json`)."""

    key: str
    boot_kernel: str  # the file QEMU boots, in the image's directory
    kernel: KernelDescription
    kernel_identity: str  # which kernel: images of the same one (and layer) replace each other
    modules: list[str]  # in the order the guest loads them
    programs: dict[str, str]  # guest path → the host file it was copied from
    layer: str | None
    size_bytes: int  # of the initramfs


@dataclass(frozen=True)
class GuestImage:
    key: str
    directory: Path
    kernel: Path  # what QEMU boots: an uncompressed vmlinux with a PVH entry, or the vmlinuz
    initrd: Path
    info: ImageInfo

    @property
    def kernel_release(self) -> str:
        return str(self.info["kernel"]["release"])


@contextmanager
def cache_locked(cache: Path) -> Iterator[None]:
    """One build at a time per cache (two runs starting together share one download)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_libraries(program: Path) -> list[Path]:
    """The loader and the libraries `ldd` says a dynamically linked program needs."""
    done = subprocess.run([tool("ldd", "libc-bin"), str(program)], capture_output=True, text=True)
    if done.returncode != 0 or "not a dynamic executable" in done.stdout + done.stderr:
        return []
    libs = []
    for line in done.stdout.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            libs.append(Path(m.group(1)))
    return libs


def _guest_programs() -> dict[str, Path]:
    """Guest path → host file of every program the guest runs besides busybox."""
    return {
        "usr/bin/lowtail-fwd": find_binary("lowtail-fwd"),
        "usr/sbin/tc": Path(tool("tc")),
        "usr/sbin/ip": Path(tool("ip")),
    }


def busybox() -> Path:
    """The static busybox every guest's init runs on; UserError naming its package when missing."""
    path = shutil.which("busybox", path="/usr/bin:/bin")
    if path is None:
        raise UserError("a VM DuT's guest needs busybox: install the Debian package busybox-static")
    return Path(path)


def _image_files(layer: ImageLayer | None = None) -> dict[str, Path]:
    """Guest path → host file: busybox, the programs (the layer's too) and every library they need."""
    files: dict[str, Path] = {}
    programs = {"bin/busybox": busybox(), **_guest_programs(), **(layer.programs if layer else {})}
    for guest_path, host_path in programs.items():
        files[guest_path] = host_path
        for lib in shared_libraries(host_path):
            files[str(lib).lstrip("/")] = lib
    return files


def _init_script() -> bytes:
    return resources.files("lowtail.testbed.vm").joinpath("guest-init.sh").read_bytes()


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def image_key(kernel: GuestKernel, files: dict[str, Path], data: dict[str, bytes] | None = None) -> str:
    """The hash of everything that goes into an image: same inputs, same image."""
    doc = {
        "format": IMAGE_FORMAT,
        "kernel": kernel.identity,
        "modules": GUEST_MODULES,
        "init": hashlib.sha256(_init_script()).hexdigest(),
        "files": {guest: _digest(host) for guest, host in sorted(files.items())},
        **({"data": {guest: hashlib.sha256(b).hexdigest() for guest, b in sorted(data.items())}} if data else {}),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def busybox_applets(busybox: Path) -> list[str]:
    """The commands this busybox provides (each becomes a link to it in the guest)."""
    done = subprocess.run([str(busybox), "--list"], capture_output=True, text=True)
    return done.stdout.split()


def _write_initramfs(
    path: Path, kernel: GuestKernel, files: dict[str, Path], data: dict[str, bytes] | None = None
) -> list[str]:
    """The initramfs; returns the modules in the order the guest loads them."""
    order = load_order(list(GUEST_MODULES), kernel.depends, set(kernel.builtin))
    with open(path, "wb") as f:
        w = CpioWriter(f)
        for d in ("dev", "proc", "sys", "tmp", "etc/lowtail", "sbin", "usr/bin", "usr/sbin"):
            w.directory(d)
        w.char_device("dev/console", 5, 1)
        w.file("init", _init_script(), 0o755)
        for guest_path, host_path in sorted(files.items()):
            w.host_file(guest_path, host_path)
        for guest_path, content in sorted((data or {}).items()):
            w.file(guest_path, content, 0o644)
        for applet in busybox_applets(files["bin/busybox"]):
            if applet != "busybox" and f"usr/sbin/{applet}" not in files:
                w.symlink(f"bin/{applet}", "busybox")
        for name in order:
            w.host_file(f"lib/modules/{name}.ko", kernel.modules[name])
        w.file("etc/lowtail/modules", "\n".join(order).encode() + b"\n")
        w.close()
    return order


def _decompress_payload(vmlinuz: bytes) -> bytes | None:
    """The uncompressed kernel inside a bzImage (xz or gzip payloads), as extract-vmlinux finds it."""
    import gzip
    import io
    import lzma

    decompressors: tuple[tuple[bytes, Callable[[bytes], bytes]], ...] = (
        (b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(b)),
        (b"\x1f\x8b\x08\x00", lambda b: gzip.GzipFile(fileobj=io.BytesIO(b)).read()),
    )
    for magic, decompress in decompressors:
        at = vmlinuz.find(magic)
        while at >= 0:
            try:
                out = decompress(vmlinuz[at:])
            except (lzma.LZMAError, OSError, EOFError):
                out = b""
            if out[:4] == b"\x7fELF":
                return out
            at = vmlinuz.find(magic, at + 1)
    return None


def has_pvh_entry(elf: bytes) -> bool:
    """Whether an ELF kernel has the Xen PVH entry note QEMU boots it through directly."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        return False
    (phoff,) = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        at, end = p_offset, p_offset + p_filesz
        while at + 12 <= end:
            namesz, descsz, note_type = struct.unpack_from("<III", elf, at)
            name = elf[at + 12 : at + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and note_type == _XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            at += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def boot_kernel(vmlinuz: Path, directory: Path) -> Path:
    """What QEMU boots: the uncompressed kernel through its PVH entry when it has one (the
    bzImage's decompressor and the BIOS's real-mode loader cost an emulated guest seconds:
    2.3 s of CPU instead of 5.2 s to reach init under TCG here), else the bzImage itself."""
    elf = _decompress_payload(vmlinuz.read_bytes())
    if elf is not None and has_pvh_entry(elf):
        (directory / "vmlinux").write_bytes(elf)
        return directory / "vmlinux"
    shutil.copyfile(vmlinuz, directory / "vmlinuz")
    return directory / "vmlinuz"


# Images this process has already found: a sweep starts many VMs of the same kernel, and
# asking apt each time costs a second of CPU.
_FOUND: dict[tuple[str, Path, tuple[str, str] | None], GuestImage] = {}


def build_image(
    choice: str, progress: Progress = lambda message: None, cache: Path | None = None, layer: ImageLayer | None = None
) -> GuestImage:
    """The guest image for `guest_kernel = choice` (with `layer`'s files), from the cache or built now."""
    cache = cache or cache_dir()
    layer_id = (layer.name, hashlib.sha256(repr(sorted(layer.data.items())).encode()).hexdigest()) if layer else None
    found = _FOUND.get((choice, cache, layer_id))
    if found is not None and found.initrd.exists():
        return found
    with cache_locked(cache):
        kernel = guest_kernel(choice, cache, progress)
        files = _image_files(layer)
        data = layer.data if layer else {}
        key = image_key(kernel, files, data)
        target = cache / "images" / key
        info = _recorded(target)
        if info is None:
            progress(f"building the guest image for kernel {kernel.release}")
            tmp = target.with_name(f"{key}.partial-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                boot = boot_kernel(kernel.vmlinuz, tmp)
                order = _write_initramfs(tmp / "initrd.cpio", kernel, files, data)
                info = {
                    "key": key,
                    "boot_kernel": boot.name,
                    "kernel": kernel.describe(),
                    "kernel_identity": kernel.identity,
                    "modules": order,
                    "programs": {p: str(files[p]) for p in [*_guest_programs(), *(layer.programs if layer else {})]},
                    "layer": layer.name if layer else None,
                    "size_bytes": (tmp / "initrd.cpio").stat().st_size,
                }
                (tmp / "image.json").write_text(json.dumps(info, indent=1))
                shutil.rmtree(target, ignore_errors=True)
                tmp.rename(target)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _prune(cache / "images", keep=key, kernel=kernel.identity, layer=layer.name if layer else None)
    image = GuestImage(key, target, target / info["boot_kernel"], target / "initrd.cpio", info)
    _FOUND[(choice, cache, layer_id)] = image
    return image


def _recorded(directory: Path) -> ImageInfo | None:
    """An image's record (`image.json`); None when there is none, or none lowtail can read
    (a build cut short, an older lowtail's): the image is then built again."""
    try:
        return msgspec.json.decode((directory / "image.json").read_bytes(), type=ImageInfo)
    except (OSError, msgspec.DecodeError):
        return None


def _prune(images: Path, keep: str, kernel: str, layer: str | None = None) -> None:
    """Older images of the same kernel and layer (a rebuilt forwarder, a new lowtail): never used again."""
    for other in images.iterdir():
        if other.name == keep or ".partial-" in other.name:
            continue
        info = _recorded(other)
        if info is not None and info["kernel_identity"] == kernel and info["layer"] == layer:
            shutil.rmtree(other, ignore_errors=True)


def check_image_tools() -> None:
    """UserError naming the Debian package when something the image needs is missing."""
    busybox()
    tool("tc")
    tool("ldd", "libc-bin")
    if shutil.which("dpkg-deb") is None:
        raise Failure("dpkg-deb is missing: Debian guest kernels are taken out of Debian packages with it")
