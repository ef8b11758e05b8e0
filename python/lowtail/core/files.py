"""Result files (a report, a plot, an .hgrm distribution, a bundle, a synthetic capture) are
written whole or not at all, into a directory that already exists, only as regular files, and
a file that cannot be written is said in one line; files a user hands lowtail to read are
read under limits.

A result goes to a hidden temporary file beside its target (`.NAME.partial`) and is
renamed into place once complete; on any failure or interruption the temporary file is
removed, so neither a 0-byte nor a half-written file stays. An operating-system error
becomes lowtail's: a full disk is the machine's state (`Failure`, exit 1), a path that
cannot be written — a directory, a read-only place, a name too long — the user's to change
(`UserError`, exit 2). lowtail creates no directory the user did not ask for: a mistyped
`--report /nonexistent/r.html` run as root would otherwise leave a new tree behind.

An output is a regular file or nothing yet: a path that names a device, a FIFO, a socket or a
directory is refused before anything is written (renaming a finished report over
`/dev/null` would replace the system's device with a file, as root); so is a lowtail database
or a capture (`report 1 -o t.duckdb --db t.duckdb` replaced the database with its page), and
two outputs of one command that name one file.

An input (an experiment file, an import spec) is a regular file or a FIFO (`<(…)`), read up to
a limit; a FIFO nobody writes to is waited for `FIFO_WRITER_WAIT_S`, as the capture readers do,
and devices, sockets and directories are refused without reading a byte.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lowtail.core.errors import DiskFull, Failure, UserError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# How long an input that is a FIFO is waited for a writer (the capture readers' wait).
FIFO_WRITER_WAIT_S = 10.0
_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def cache_dir() -> Path:
    """Where lowtail keeps what it can make again (guest kernels and images, the store's
    template database): $LOWTAIL_CACHE_DIR, else the XDG cache."""
    if os.environ.get("LOWTAIL_CACHE_DIR"):
        return Path(os.environ["LOWTAIL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lowtail"


def special_kind(path: str | Path) -> str | None:
    """What `path` is when it is not a regular file ("a character device", "a FIFO" …);
    None for a regular file (a link to one too) or a path that does not exist yet."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


# A DuckDB database file's magic and where it stands (the store reads its header by it).
DUCKDB_MAGIC_AT, DUCKDB_MAGIC = 8, b"DUCK"
# What a result is never written over, by the file's first bytes: a mistyped `-o` that names
# the database (`report 1 -o t.duckdb --db t.duckdb`) or a capture would replace it whole.
_KEPT_FILES = (
    (DUCKDB_MAGIC_AT, DUCKDB_MAGIC, "a lowtail database (DuckDB)"),
    (0, b"\xd4\xc3\xb2\xa1", "a capture (pcap)"),
    (0, b"\xa1\xb2\xc3\xd4", "a capture (pcap)"),
    (0, b"\x4d\x3c\xb2\xa1", "a capture (pcap)"),
    (0, b"\xa1\xb2\x3c\x4d", "a capture (pcap)"),
    (0, b"\x0a\x0d\x0d\x0a", "a capture (pcapng)"),
)


def kept_kind(path: str | Path) -> str | None:
    """What an existing file is, when it is one a result must not replace (a database, a
    capture); None for anything else, or no file."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    return next((kind for at, magic, kind in _KEPT_FILES if head[at : at + len(magic)] == magic), None)


def check_output(path: str | Path, what: str = "", over_captures: bool = False) -> Path:
    """`path` as an output: a regular file to replace or a new name in a directory that
    exists; UserError (2) when it names a device, FIFO, socket or directory, a lowtail
    database or (unless `over_captures`: `synth` writes captures) a capture, or its directory
    is missing (lowtail creates none), or no file can be created in it."""
    path = Path(path)
    where = " ".join(str(part) for part in (what, path) if part)
    kind = special_kind(path)
    if kind is not None:
        hint = "give a file name" if kind == "a directory" else "lowtail writes results only as regular files"
        raise UserError(f"{where}: is {kind}; {hint}")
    kept = kept_kind(path) if path.exists() else None
    if kept is not None and not (over_captures and kept.startswith("a capture")):
        raise UserError(f"{where}: is {kept}; lowtail does not write a result over it: give another file name")
    if not _is_dir(path.parent):
        why = "does not exist" if not path.parent.exists() else "is not a directory"
        raise UserError(f"{where}: the directory {path.parent} {why} (lowtail does not create it)")
    check_writable(path.parent, where)
    return path


def check_writable(directory: Path, where: str) -> None:
    """UserError when no file can be created in `directory` — a read-only mount, no
    permission, a pseudo file system such as /proc, no inode left: said before any work and
    naming the output, not when a writer's temporary file fails at the end."""
    probe = directory / f".lowtail-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # a probe of this thread left by a crash: the directory takes files
        return
    except OSError as e:
        raise UserError(f"{where}: cannot write in {directory} ({e.strerror or e})") from None
    os.close(fd)
    probe.unlink(missing_ok=True)


def check_distinct_outputs(
    outputs: Sequence[tuple[str, str | Path | None]], inputs: Sequence[tuple[str, str | Path]] = ()
) -> None:
    """UserError (2) when two outputs of one command name the same file (`a.pcap ./a.pcap`, a
    link to the other): the second would overwrite the first, or fail half-way; or when an
    output names one of the command's inputs (a report written over the capture it reads)."""
    seen = {os.path.realpath(path): f"{what} {path}, which is read" for what, path in inputs}
    for what, path in outputs:
        if path is None:
            continue
        where = os.path.realpath(path)
        if where in seen:
            raise UserError(f"{what} {path}: the same file as {seen[where]}; give each output a file of its own")
        seen[where] = f"{what} {path}"


def os_error(e: OSError, path: str | Path | None = None, what: str = "") -> Failure | UserError:
    """The lowtail error for an OSError on `path` (default: the error's own file name):
    one line saying which file and why."""
    target = path if path is not None else e.filename
    where = " ".join(str(part) for part in (what, target) if part)
    reason = e.strerror or str(e)
    if e.errno in DISK_FULL:
        return DiskFull(f"{where}: the disk is full ({reason}); nothing was written: free some space and run it again")
    if e.errno == errno.EISDIR or (target is not None and _is_dir(target)):
        return UserError(f"{where}: is a directory; give a file name")
    return UserError(f"{where}: {reason}" if where else reason)


def _is_dir(path: str | Path) -> bool:
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def partial_path(path: Path) -> Path:
    """Where a result is written before it is complete: `.NAME.partial` beside it."""
    return path.with_name(f".{path.name}.partial")


def write_atomically(path: str | Path, write: Callable[[Path], None], what: str = "") -> Path:
    """Call `write(tmp)` to fill `.NAME.partial` beside `path`, then rename it to `path`;
    `what` names the file in an error ("--hgrm", "report"). A missing parent directory is
    the user's mistake (nothing is created); on any failure the temporary file goes."""
    path = Path(path)
    if _is_dir(path):
        raise os_error(OSError(errno.EISDIR, os.strerror(errno.EISDIR)), path, what)
    check_output(path, what)
    tmp = partial_path(path)
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as e:
        discard(tmp)
        raise os_error(e, path, what) from None
    except BaseException:
        discard(tmp)
        raise
    return path


def write_result(path: str | Path, data: str | bytes, what: str = "") -> Path:
    """Write `data` to `path` whole (temporary file, fsync, rename) or not at all."""
    raw = data.encode() if isinstance(data, str) else data

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())

    return write_atomically(path, write, what)


def discard(path: Path) -> None:
    """Remove `path` if it is there; a file that cannot be removed (a name too long to have
    been made, a place that cannot be changed) is left as it is: the caller is tidying up."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def database_files(db: Path) -> tuple[Path, Path]:
    """A DuckDB database file and the write-ahead log DuckDB keeps beside it."""
    return db, db.with_name(db.name + ".wal")


def remove_database(db: Path) -> None:
    """Remove a database a command made, with its write-ahead log; what cannot be removed is
    left (the caller is tidying up after an error it is about to raise)."""
    for made in database_files(db):
        discard(made)


def copy_input(path: str | Path, target: Path, what: str, limit: int) -> None:
    """Copy a FIFO's stream (a writer waited for FIFO_WRITER_WAIT_S) into `target`, at most
    `limit` bytes."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        wait_for_writer(fd, path)
        os.set_blocking(fd, True)
        size = 0
        with open(target, "xb") as out:
            while chunk := os.read(fd, 1 << 20):
                size += len(chunk)
                if size > limit:
                    raise DiskFull(f"{path}: the {what} is larger than the {limit:,} bytes free for it")
                out.write(chunk)
    finally:
        os.close(fd)


def read_input(path: str | Path, what: str, limit: int, fifo: bool = True) -> bytes:
    """The bytes of a file a user hands lowtail: a regular file or (`fifo`) a FIFO (a writer
    waited for FIFO_WRITER_WAIT_S), at most `limit` bytes; UserError naming the file otherwise
    (a device or a refused FIFO without reading a byte)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except OSError as e:
        raise os_error(e, path) from None
    if not (stat.S_ISREG(mode) or (fifo and stat.S_ISFIFO(mode))):
        raise UserError(f"{path}: is {_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a {what}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise os_error(e, path, f"cannot read the {what}") from None
    try:
        if stat.S_IFMT(os.fstat(fd).st_mode) != stat.S_IFMT(mode):  # swapped since it was looked at
            raise UserError(f"{path}: changed while it was opened; not a {what}")
        if stat.S_ISFIFO(mode):
            wait_for_writer(fd, path)
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 16):
            size += len(chunk)
            if size > limit:
                raise UserError(f"{path}: is larger than {limit:,} bytes, more than any {what} lowtail reads")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise os_error(e, path, f"cannot read the {what}") from None
    finally:
        os.close(fd)


def wait_for_writer(fd: int, path: Path) -> None:
    """Until a FIFO's writer has written (or closed): at most FIFO_WRITER_WAIT_S. On Linux a
    FIFO without a writer yet polls as nothing to read, not as hung up."""
    deadline = time.monotonic() + FIFO_WRITER_WAIT_S
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UserError(f"{path}: a FIFO with no writer (waited {FIFO_WRITER_WAIT_S:g} s for one)")
        if poller.poll(min(left, 0.2) * 1000):
            return
