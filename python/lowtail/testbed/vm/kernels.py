"""Guest kernels: Debian's kernel packages (`vanilla` → linux-image-amd64's image, `rt` →
linux-image-rt-amd64's PREEMPT_RT image) or a vmlinuz the user names.

A package is fetched with `apt-get download` (Debian's archive is the only network the
guest build uses), kept in the cache, and only what a guest needs is taken out of it: the
vmlinuz, the modules of a few directories (virtio, traffic control, bridging) and every
module's dependencies (read from the modules themselves: the package ships no modules.dep).
No root filesystem is installed or needed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from lowtail.core.errors import Failure, UserError
from lowtail.testbed.vm.kmod import modinfo, module_name

# What `guest_kernel` may name besides a path: the Debian metapackage that points at the
# current image of each flavour.
FLAVOURS = {"vanilla": "linux-image-amd64", "rt": "linux-image-rt-amd64"}

# The module directories a guest may need (virtio devices, tc ingress/mirred, the bridge):
# only these are taken out of the ~400 MB package, and every module's dependencies.
MODULE_DIRS = (
    "kernel/drivers/virtio/",
    "kernel/drivers/net/",
    "kernel/drivers/char/",
    "kernel/net/core/",
    "kernel/net/sched/",
    "kernel/net/bridge/",
    "kernel/net/802/",
    "kernel/net/llc/",
)
# Bumped when what is extracted changes: older extractions are then made again.
_EXTRACT_FORMAT = 1

Progress = Callable[[str], None]


class KernelDescription(TypedDict):
    """A guest kernel as its image records it (and a VM run its `containment.guest_kernel`)."""

    choice: str  # vanilla | rt | a path
    release: str
    package: str | None
    version: str | None


@dataclass(frozen=True)
class GuestKernel:
    """A kernel ready to go into an image: its vmlinuz, modules by name, and identity."""

    choice: str  # vanilla | rt | a path
    identity: str  # package_version, or the path and its content hash: part of the image key
    release: str  # what `uname -r` says in the guest
    vmlinuz: Path
    modules: dict[str, Path]
    depends: dict[str, list[str]]
    builtin: frozenset[str]
    package: str | None = None
    version: str | None = None

    def describe(self) -> KernelDescription:
        return {"choice": self.choice, "release": self.release, "package": self.package, "version": self.version}


def _apt(*argv: str, what: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=600)
    except FileNotFoundError:
        raise UserError(f"{what}: `{argv[0]}` is missing (a Debian host is needed for Debian guest kernels)") from None
    if done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise Failure(f"{what}: {detail[-1] if detail else f'exit code {done.returncode}'}")
    return done.stdout


def resolve_package(flavour: str) -> tuple[str, str]:
    """(versioned image package, version) the flavour's metapackage depends on now, as the
    host's apt lists say: linux-image-amd64 → (linux-image-6.1.0-56-amd64, 6.1.192-2)."""
    meta = FLAVOURS[flavour]
    text = _apt("apt-cache", "depends", meta, what=f"resolving {meta}")
    found = re.findall(r"^\s*Depends:\s*(linux-image-\S+)", text, re.MULTILINE)
    if not found:
        raise UserError(
            f"apt knows no package {meta} (the guest kernel of guest_kernel = {flavour!r}): "
            f"run `apt-get update` first, or name a vmlinuz file instead"
        )
    package = found[0]
    show = _apt("apt-cache", "show", "--no-all-versions", package, what=f"reading {package}")
    version = re.search(r"^Version:\s*(\S+)", show, re.MULTILINE)
    if not version:
        raise UserError(f"apt knows no version of {package}: run `apt-get update` first")
    return package, version.group(1)


def _apt_lists_stamp() -> float:
    """When apt's package lists last changed (an `apt-get update`)."""
    lists = Path("/var/lib/apt/lists")
    try:
        return max((p.stat().st_mtime for p in lists.iterdir()), default=0.0)
    except OSError:
        return 0.0


def _resolve_remembered(cache: Path, flavour: str) -> tuple[str, str]:
    """`resolve_package`, remembered until apt's lists change: asking apt costs a second or
    two of CPU, on every run that starts a VM."""
    memo = cache / "apt-resolution.json"
    stamp = _apt_lists_stamp()
    try:
        doc = json.loads(memo.read_text())
    except (OSError, ValueError):
        doc = {}
    known = doc.get(flavour)
    if known and known.get("lists") == stamp:
        return known["package"], known["version"]
    package, version = resolve_package(flavour)
    doc[flavour] = {"lists": stamp, "package": package, "version": version}
    tmp = memo.with_suffix(f".{os.getpid()}")
    tmp.write_text(json.dumps(doc))
    tmp.replace(memo)
    return package, version


def _deb_name(package: str, version: str) -> str:
    return f"{package}_{version.replace(':', '%3a')}_amd64.deb"


def _cached_package(debs: Path, flavour: str) -> tuple[str, str] | None:
    """The newest downloaded image package of a flavour, for hosts whose apt lists are gone."""
    suffix = "-rt-amd64" if flavour == "rt" else "-amd64"
    best = None
    for deb in sorted(debs.glob("linux-image-*_amd64.deb")):
        package, version, _ = deb.name.split("_")
        if package.endswith(suffix) and (flavour == "rt" or not package.endswith("-rt-amd64")):
            best = (package, version.replace("%3a", ":"))
    return best


def fetch_package(cache: Path, flavour: str, progress: Progress) -> tuple[str, str, Path]:
    """The flavour's image package in the cache, downloaded if missing."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    try:
        package, version = _resolve_remembered(cache, flavour)
    except UserError:
        cached = _cached_package(debs, flavour)
        if cached is None:
            raise
        package, version = cached
    deb = debs / _deb_name(package, version)
    if not deb.exists():
        progress(f"downloading {package} {version} from Debian's archive")
        tmp = debs / f".download-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            # As root, apt would warn that its sandbox user cannot write here: let it be root.
            _apt(
                "apt-get",
                "download",
                "-o",
                "APT::Sandbox::User=root",
                f"{package}={version}",
                what=f"downloading {package}",
                cwd=tmp,
            )
            (got,) = tmp.glob("*.deb")
            got.replace(deb)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return package, version, deb


def _file_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """The contents of a regular file of the archive (what `extractfile` gives for one)."""
    f = tar.extractfile(member)
    if f is None:
        raise Failure(f"{member.name} in the kernel package is not a regular file")
    return f.read()


def extract_package(cache: Path, package: str, version: str, deb: Path, progress: Progress) -> Path:
    """vmlinuz, the modules under MODULE_DIRS and every module's dependencies, taken out of
    the package once (into the cache) by streaming its data archive."""
    target = cache / "kernels" / f"{package}_{version}.v{_EXTRACT_FORMAT}"
    if (target / "kernel.json").exists():
        return target
    progress(f"extracting the kernel and its modules from {deb.name}")
    tmp = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "modules").mkdir(parents=True)
    depends: dict[str, list[str]] = {}
    builtin: list[str] = []
    release = None
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    stream = proc.stdout
    assert stream is not None  # stdout=PIPE always gives one
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if not member.isfile():
                    continue
                if re.fullmatch(r"boot/vmlinuz-.+", name):
                    release = name.removeprefix("boot/vmlinuz-")
                    (tmp / "vmlinuz").write_bytes(_file_bytes(tar, member))
                    continue
                m = re.fullmatch(r"lib/modules/([^/]+)/(.+)", name)
                if not m:
                    continue
                rel_path = m.group(2)
                if rel_path == "modules.builtin":
                    builtin = [module_name(line) for line in _file_bytes(tar, member).decode().split()]
                elif rel_path.endswith(".ko"):
                    data = _file_bytes(tar, member)
                    info = modinfo(data)
                    mod = module_name(rel_path)
                    depends[mod] = [d.replace("-", "_") for d in info.get("depends", "").split(",") if d]
                    if rel_path.startswith(MODULE_DIRS):
                        (tmp / "modules" / f"{mod}.ko").write_bytes(data)
    finally:
        stream.close()
        if proc.wait() != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise Failure(f"{deb}: dpkg-deb could not read the package (exit code {proc.returncode})")
    if release is None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Failure(f"{deb}: holds no boot/vmlinuz-*: not a kernel image package")
    doc = {"package": package, "version": version, "release": release, "depends": depends, "builtin": builtin}
    (tmp / "kernel.json").write_text(json.dumps(doc))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def _from_extraction(choice: str, directory: Path) -> GuestKernel:
    doc = json.loads((directory / "kernel.json").read_text())
    modules = {p.stem: p for p in (directory / "modules").glob("*.ko")}
    return GuestKernel(
        choice=choice,
        identity=f"{doc['package']}_{doc['version']}",
        release=doc["release"],
        vmlinuz=directory / "vmlinuz",
        modules=modules,
        depends=doc["depends"],
        builtin=frozenset(doc["builtin"]),
        package=doc["package"],
        version=doc["version"],
    )


def bzimage_release(vmlinuz: Path) -> str | None:
    """The kernel release a bzImage announces in its setup header (`file` shows the same)."""
    try:
        with open(vmlinuz, "rb") as f:
            head = f.read(0x10000)
    except OSError as e:
        raise UserError(f"guest_kernel {vmlinuz}: cannot read it ({e.strerror})") from None
    if head[0x202:0x206] != b"HdrS":
        raise UserError(f"guest_kernel {vmlinuz}: not an x86 bzImage (a vmlinuz) file")
    offset = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    text = head[offset : offset + 256].split(b"\0")[0].decode(errors="replace")
    return text.split()[0] if text else None


def _from_path(vmlinuz: Path) -> GuestKernel:
    """A user's vmlinuz: modules from the host's /lib/modules/<its release> when there,
    otherwise it must build virtio and the forwarders' parts in."""
    import hashlib

    vmlinuz = vmlinuz.expanduser().resolve()
    release = bzimage_release(vmlinuz) or "unknown"
    digest = hashlib.sha256(vmlinuz.read_bytes()).hexdigest()[:16]
    modules: dict[str, Path] = {}
    depends: dict[str, list[str]] = {}
    builtin: set[str] = set()
    tree = Path("/lib/modules") / release
    if tree.is_dir():
        for ko in tree.rglob("*.ko"):
            mod = module_name(ko.name)
            info = modinfo(ko.read_bytes())
            depends[mod] = [d.replace("-", "_") for d in info.get("depends", "").split(",") if d]
            modules[mod] = ko
        if (tree / "modules.builtin").exists():
            builtin = {module_name(x) for x in (tree / "modules.builtin").read_text().split()}
    else:
        builtin = {"*"}  # no modules to be had: whatever it needs must be built in
    return GuestKernel(
        choice=str(vmlinuz),
        identity=f"{vmlinuz}:{digest}",
        release=release,
        vmlinuz=vmlinuz,
        modules=modules,
        depends=depends,
        builtin=frozenset(builtin),
    )


def guest_kernel(choice: str, cache: Path, progress: Progress) -> GuestKernel:
    """The kernel `guest_kernel = choice` names, fetched and extracted as needed."""
    if choice in FLAVOURS:
        package, version, deb = fetch_package(cache, choice, progress)
        return _from_extraction(choice, extract_package(cache, package, version, deb, progress))
    path = Path(choice)
    if not path.is_file():
        raise UserError(
            f"guest_kernel {choice!r}: neither {' nor '.join(repr(f) for f in FLAVOURS)} nor an existing vmlinuz file"
        )
    return _from_path(path)
