"""Result files (a report, a plot, an .hgrm distribution) are written whole or not at all,
into a directory that already exists, and a file that cannot be written is said in one line.

A result goes to a hidden temporary file beside its target (`.NAME.partial`) and is
renamed into place once complete; on any failure or interruption the temporary file is
removed, so neither a 0-byte nor a half-written file stays. An operating-system error
becomes lowtail's: a full disk is the machine's state (`Failure`, exit 1), a path that
cannot be written — a directory, a read-only place, a name too long — the user's to change
(`UserError`, exit 2). lowtail creates no directory the user did not ask for: a mistyped
`--report /nonexistent/r.html` run as root would otherwise leave a new tree behind.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from lowtail.errors import DiskFull, Failure, UserError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


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
    if not _is_dir(path.parent):
        why = "does not exist" if not path.parent.exists() else "is not a directory"
        where = " ".join(str(part) for part in (what, path) if part)
        raise UserError(f"{where}: the directory {path.parent} {why} (lowtail does not create it)")
    if _is_dir(path):
        raise os_error(OSError(errno.EISDIR, os.strerror(errno.EISDIR)), path, what)
    tmp = partial_path(path)
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as e:
        _discard(tmp)
        raise os_error(e, path, what) from None
    except BaseException:
        _discard(tmp)
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


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a name too long to create was never made
