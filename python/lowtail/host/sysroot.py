"""Where host settings are read from and written to: the live /proc and /sys, or a copy
of them under another directory (a snapshot from another host, or a test fixture).

Every path is relative to the root ("proc/cmdline"), so the same code audits the live
host and a snapshot. A recording root remembers what it read: `lowtail host snapshot`
runs the audit on the live host and copies exactly those files."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.core.schema import ascii_digits
from lowtail.core.terminal import escape

# No kernel numbers more CPUs (NR_CPUS is at most 8,192): a larger number is a typo, and a
# range up to it would cost memory.
MAX_CPUS = 8192


class SysRoot:
    def __init__(self, root: str | Path = "/", record: bool = False):
        self.root = Path(root)
        self.live = self.root.resolve() == Path("/")
        self.unreadable: list[str] = []
        # For snapshots: file contents as read, and directories seen.
        self.recorded: dict[str, bytes] | None = {} if record else None
        self.recorded_dirs: set[str] | None = set() if record else None

    @classmethod
    def open(cls, root: str | Path | None, record: bool = False) -> SysRoot:
        """The live host (None) or a directory that must hold proc/ and sys/ like one."""
        if root is None:
            return cls("/", record=record)
        root = Path(root)
        if not root.is_dir():
            raise UserError(f"--sysroot {root}: no such directory")
        missing = [p for p in ("proc/cmdline", "sys/devices/system/cpu") if not (root / p).exists()]
        if missing:
            raise UserError(
                f"--sysroot {root} is not a sysroot: it has no {missing[0]} "
                f"(write one with `lowtail host snapshot DIR`)"
            )
        return cls(root, record=record)

    def __str__(self) -> str:
        return "the live host" if self.live else str(self.root)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def read_bytes(self, rel: str) -> bytes | None:
        """The file's contents, or None when it does not exist or cannot be read (the
        latter remembered in `unreadable`, so an audit can say it saw less than all)."""
        try:
            data = self.path(rel).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except PermissionError:
            self.unreadable.append(rel)
            return None
        except OSError:  # e.g. EINVAL/EIO from a sysfs attribute with nothing to say
            return None
        if self.recorded is not None:
            self.recorded[rel] = data
        return data

    def read(self, rel: str) -> str | None:
        """Text of a small /proc or /sys file, stripped; None when absent or unreadable."""
        data = self.read_bytes(rel)
        return None if data is None else data.decode("utf-8", "replace").strip()

    def read_int(self, rel: str) -> int | None:
        text = self.read(rel)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    def exists(self, rel: str) -> bool:
        p = self.path(rel)
        found = p.exists()
        if found and self.recorded_dirs is not None:
            if p.is_dir():
                self.recorded_dirs.add(rel)
            else:
                self.read_bytes(rel)
        return found

    def listdir(self, rel: str) -> list[str]:
        try:
            names = sorted(os.listdir(self.path(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError:
            self.unreadable.append(rel)
            return []
        if self.recorded_dirs is not None:
            self.recorded_dirs.add(rel)
        return names

    def write(self, rel: str, text: str) -> None:
        """One write, as `echo text > file` does — one value per write, newline-terminated
        (sysfs and procfs take it so). Raises OSError; callers turn it into a message. A
        copied sysroot's file is replaced whole (renamed into place), as a kernel setting
        changes at once: a write cut short (SIGKILL) never leaves it empty."""
        line = text if text.endswith("\n") else text + "\n"
        target = self.path(rel)
        if self.live or not target.is_file():
            with open(target, "w") as f:
                f.write(line)
            return
        os.close(os.open(target, os.O_WRONLY))  # may it be written? (EACCES as the kernel's file says)
        partial = self._partial(rel)
        try:
            partial.write_text(line)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)

    def _partial(self, rel: str) -> Path:
        target = self.path(rel)
        return target.with_name(f".{target.name}.lowtail-partial")

    def discard_partials(self, rels: Iterable[str]) -> None:
        """Remove what writes to these files killed between their two steps left (a copied
        sysroot's; `host undo` gives the sysroot back whole)."""
        if self.live:
            return
        for rel in rels:
            self._partial(rel).unlink(missing_ok=True)

    def save_recording(self, dest: Path) -> int:
        """Write what was read under `dest` (a new sysroot); returns the number of files."""
        assert self.recorded is not None and self.recorded_dirs is not None, "not a recording root"
        for rel in sorted(self.recorded_dirs):
            (dest / rel).mkdir(parents=True, exist_ok=True)
        for rel, data in self.recorded.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return len(self.recorded)


def parse_cpulist(text: str, what: str = "CPU list") -> list[int]:
    """The kernel's cpulist format: "0-3,8,10-11" → [0, 1, 2, 3, 8, 10, 11]."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            ends = part.split("-", 1)
            if not all(ascii_digits(x.strip()) for x in ends):
                raise ValueError  # "０" and "1_0" read as numbers by int(): not what was typed
            a, b = int(ends[0]), int(ends[-1])
            if a > b or b >= MAX_CPUS:
                raise ValueError
            cpus.update(range(a, b + 1))
        except ValueError:
            raise UserError(
                f"{what} {escape(repr(text))}: {escape(repr(part))} is not a CPU number or range below {MAX_CPUS:,} "
                "in ASCII digits (examples: 0, 1-3, 1,3)"
            ) from None
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5" (what the kernel writes and accepts)."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def cpumask_to_cpus(mask: str) -> list[int]:
    """A hex cpumask as /proc/irq/*/smp_affinity writes it ("00000000,0000000f")."""
    value = int(mask.replace(",", "").strip() or "0", 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def cpus_to_cpumask(cpus: Iterable[int]) -> str:
    """CPUs as a hex cpumask, as /proc/irq/*/smp_affinity takes it."""
    value = 0
    for c in cpus:
        value |= 1 << c
    return format(value, "x")
