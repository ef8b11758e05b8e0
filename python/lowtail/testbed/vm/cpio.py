"""The initramfs archive: cpio in the kernel's "newc" format, written directly (no `cpio`
program needed), uncompressed — the guest's kernel then unpacks it without decompressing,
which under an emulator (TCG) saves seconds of every boot."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import BinaryIO

_TRAILER = "TRAILER!!!"


class CpioWriter:
    """Entries appended one by one: directories, files (from bytes or the host), symlinks.

    with open(path, "wb") as f:
        w = CpioWriter(f); w.directory("bin"); w.file("init", script, 0o755); w.close()
    """

    def __init__(self, out: BinaryIO):
        self.out = out
        self.inode = 1
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        name_bytes = name.encode() + b"\0"
        # ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor, namesize, check
        fields = [self.inode, mode, 0, 0, 1, 0, len(data), 0, 0, *rdev, len(name_bytes), 0]
        header = b"070701" + b"".join(f"{v:08x}".encode() for v in fields)
        self.out.write(header + name_bytes + _pad(len(header) + len(name_bytes)))
        self.out.write(data + _pad(len(data)))
        self.inode += 1

    def directory(self, name: str) -> None:
        """A directory and its parents, each once."""
        parts = Path(name).parts
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self.dirs:
                self.dirs.add(d)
                self._entry(d, stat.S_IFDIR | 0o755)

    def _parent(self, name: str) -> None:
        parent = str(Path(name).parent)
        if parent != ".":
            self.directory(parent)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._parent(name)
        self._entry(name, stat.S_IFREG | mode, data)

    def host_file(self, name: str, source: Path) -> None:
        """A copy of a host file, keeping its permission bits."""
        self.file(name, source.read_bytes(), source.stat().st_mode & 0o7777)

    def symlink(self, name: str, target: str) -> None:
        self._parent(name)
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int) -> None:
        """A device node: /dev/console must exist before the guest's init can mount devtmpfs,
        or init starts without a console."""
        self._parent(name)
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def close(self) -> None:
        self._entry(_TRAILER, 0)


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)
