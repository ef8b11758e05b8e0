"""Files a command writes where the user said (`--report`, `--plot`): written whole or not
at all, into a directory that already exists. lowtail never creates directories the user
did not ask for (a mistyped `--report /nonexistent/r.html` run as root would otherwise
leave a new tree behind), and a failed write leaves neither a 0-byte file nor a hidden
temporary one."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from lowtail.errors import Failure, UserError


def write_atomically(path: str | Path, write: Callable[[Path], None], what: str = "output") -> Path:
    """Call `write(tmp)` to fill a temporary file beside `path`, then rename it to `path`.
    A missing or non-directory parent is the user's mistake (UserError, nothing created);
    a full disk is a Failure; any other OSError a UserError naming the file. The temporary
    file is removed on every failure."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        why = "does not exist" if not parent.exists() else "is not a directory"
        raise UserError(f"cannot write the {what} {path}: the directory {parent} {why} (lowtail does not create it)")
    if path.is_dir():
        raise UserError(f"cannot write the {what} {path}: it is a directory")
    tmp = path.with_name(f".{path.name}.partial")
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise Failure(f"cannot write the {what} {path}: disk full (nothing was written)") from e
        raise UserError(f"cannot write the {what} {path}: {e.strerror or e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
