"""Kernel modules of a guest kernel: what each one depends on (its `.modinfo` section,
read from the ELF file itself: a Debian kernel package ships no modules.dep, depmod makes
it at install time) and the order to load a set of them in."""

from __future__ import annotations

import struct

from lowtail.core.errors import Failure


def modinfo(ko: bytes) -> dict[str, str]:
    """The key=value strings of a module's .modinfo section (name, depends, vermagic …)."""
    if ko[:4] != b"\x7fELF" or ko[4] != 2:
        raise Failure("not a 64-bit ELF kernel module")
    endian = "<" if ko[5] == 1 else ">"
    (shoff,) = struct.unpack_from(endian + "Q", ko, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", ko, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from(endian + "IIQQQQ", ko, shoff + i * shentsize)
        return name, offset, size

    _, names_at, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        if ko[names_at + name : ko.index(b"\0", names_at + name)] == b".modinfo":
            out: dict[str, str] = {}
            for item in ko[offset : offset + size].split(b"\0"):
                key, sep, value = item.decode(errors="replace").partition("=")
                if sep:
                    out.setdefault(key, value)
            return out
    return {}


def module_name(filename: str) -> str:
    """'virtio_pci.ko' and 'virtio-pci.ko' both name the module virtio_pci."""
    return filename.rsplit("/", 1)[-1].removesuffix(".ko").replace("-", "_")


def load_order(wanted: list[str], depends: dict[str, list[str]], builtin: set[str]) -> list[str]:
    """Modules to load, dependencies first, so that each `insmod` finds its symbols. Built-in
    ones are skipped; a module neither available nor built in is a Failure."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in seen or name in builtin:
            return
        if name not in depends:
            via = f" (needed by {' → '.join(chain)})" if chain else ""
            raise Failure(f"the guest kernel has no module {name}{via} and does not build it in")
        seen.add(name)
        for dep in depends[name]:
            visit(dep, chain + (name,))
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order
