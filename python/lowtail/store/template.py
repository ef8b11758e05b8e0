"""A new database begins as a copy of an empty one that already has the schema.

Running the schema's statements (every table, view and index) cost DuckDB about 0.09 s of
CPU in each new database, a fifth of `lowtail analyze` on a 2-million-packet pair, where the
store is on the critical path. A copy of a database made once with the same statements and
closed (a regular file of about a megabyte) costs a millisecond, and DuckDB opens it as it
would any database.

The template is made in the cache directory (`core.files.cache_dir`) the first time a
database is created, under a name that is a digest of the DuckDB version and every schema
file, so a new lowtail or a new DuckDB makes its own and never copies a stale one; it is
built under a temporary name and renamed into place, so two processes starting together
never copy half a template. It holds no identity: the store gives each copy its own. A
store opening a copy still asks which schema files it has (and applies any it lacks), so a
template that is not what its name says cannot give a database a wrong schema; anywhere
the cache cannot be written, or the copy fails, the database is made with the statements
as before.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from lowtail.core.files import cache_dir, database_files, discard

TEMPLATES = "store-templates"


def template_key(duckdb_version: str, schema_files: list[tuple[str, str]]) -> str:
    """What a template is made of: the DuckDB that wrote it and every schema file."""
    digest = hashlib.sha256(duckdb_version.encode())
    for name, sql in schema_files:
        digest.update(b"\0" + name.encode() + b"\0" + sql.encode())
    return digest.hexdigest()[:24]


def copy_template(target: Path, key: str, make: Callable[[Path], None]) -> bool:
    """Create `target` as a copy of the template named `key` (made first with `make(path)`
    when the cache has none); False, with nothing created, when `target` already exists or
    no template can be had (the caller then makes the database itself)."""
    source = _template(key, make)
    if source is None:
        return False
    # Copied whole under a hidden name, then linked into place: another process making the
    # same database at the same moment sees no file or a whole one (the link fails if the
    # name exists), never one half copied.
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        partial.unlink(missing_ok=True)  # left by a killed process that had this pid
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError:
        # The place cannot be written: DuckDB says why, in the caller's words.
        return False
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        os.link(partial, target)
    except OSError:
        # A full disk, a file system without links, or another process made it meanwhile:
        # DuckDB opens what is there, or makes it.
        return False
    finally:
        _remove([partial])
    return True


def discard_template(key: str) -> None:
    """Remove the template named `key` (it did not open as a database)."""
    _remove([cache_dir() / TEMPLATES / f"{key}.duckdb"])


def _template(key: str, make: Callable[[Path], None]) -> Path | None:
    """The template's path, made now if the cache lacks it; None if it cannot be."""
    folder = cache_dir() / TEMPLATES
    path = folder / f"{key}.duckdb"
    if _regular_file(path):
        return path
    partial = folder / f".{key}.{os.getpid()}.partial"
    leftovers = database_files(partial)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove(leftovers)
        make(partial)
        if leftovers[1].exists():
            raise OSError("the template was not checkpointed")
        os.replace(partial, path)
    except Exception:  # noqa: BLE001 — any failure: the database is made the usual way
        return None
    finally:
        _remove(leftovers)  # whatever ended it (a stop signal too); none once renamed
    _prune(folder, keep=path)
    return path


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        discard(path)


def _regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _prune(folder: Path, keep: Path) -> None:
    """Templates of other versions go once a new one is made (one per lowtail in use would
    pile up over upgrades; a copy being made from one keeps its open file)."""
    _remove(other for other in folder.glob("*.duckdb") if other != keep)
