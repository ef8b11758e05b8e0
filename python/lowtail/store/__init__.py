"""The results database: every analysis, run and model lands here, and every report
reads from here. DuckDB, embedded, one file: $LOWTAIL_DB, else ./lowtail.duckdb.

All SQL of lowtail lives in this package. Its API is module functions that take the open
`Store` first (`analyses.save_analysis(store, doc)`, `runs.experiment(store, id)`), one
module per family of tables; `Store` itself is only the connection and its transactions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowtail.core.files import remove_database
from lowtail.store.errors import DamagedDatabase, DatabaseBusy

if TYPE_CHECKING:
    from lowtail.store.db import Store

# The database every command uses when not given --db: the one place that names it and
# the environment variable that moves it. In the working directory, not the home
# directory: `sudo lowtail run` and a user's `lowtail experiment report` then find the
# same file, whatever sudo does with $HOME.
DEFAULT_DB = Path("lowtail.duckdb")
DB_ENV = "LOWTAIL_DB"

# Where a results database is, wherever one is named (the library, the Python API; the
# command line's one `--db` option gives a Path): a path, or None for the default.
DbPath = str | os.PathLike[str] | None

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "DbPath",
    "DamagedDatabase",
    "DatabaseBusy",
    "Store",
    "default_data_dir",
    "default_db",
    "open_store",
    "resolve_db",
]


# DuckDB takes ~0.15 s to import: command modules import DEFAULT_DB at start-up, and only
# the commands that open the database pay for DuckDB (store.db is imported on first use).


def default_db() -> Path:
    """The database a command uses without --db: $LOWTAIL_DB, else ./lowtail.duckdb."""
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def resolve_db(db: DbPath) -> Path:
    """The database `db` names: the path given, else the default (`default_db()`)."""
    return Path(db) if db is not None else default_db()


@contextmanager
def made_whole_or_not_at_all(db: DbPath) -> Iterator[None]:
    """Around a command that may make the database `db` (an import, a recovery): when it
    fails, a database it made is removed again (with DuckDB's write-ahead log), so a bundle
    or a damaged file that cannot be read leaves no empty database behind. One that existed
    before is never touched."""
    path = resolve_db(db)
    made = not path.exists()
    try:
        yield
    except BaseException:
        if made and _holds_nothing(path):
            remove_database(path)
        raise


def _holds_nothing(path: Path) -> bool:
    """Whether a database holds no experiment, run or analysis: only such a one is removed
    (another process may have stored into a database made moments ago; a recovery cut short
    keeps what it copied). Unreadable or busy: kept."""
    from lowtail.store.db import duckdb

    try:
        with duckdb.connect(str(path), read_only=True) as con:
            counts = con.execute(
                "SELECT (SELECT count(*) FROM experiments) + (SELECT count(*) FROM runs) + (SELECT count(*) FROM analyses)"
            ).fetchone()
    except (duckdb.Error, OSError):
        return False
    return counts is not None and counts[0] == 0


def default_data_dir(db: DbPath) -> Path:
    """Where a database's captures and matched series go unless told otherwise: the folder
    lowtail-data beside it (experiments in experiment-<id>, imported bundles in
    import-<bundle>-…)."""
    return resolve_db(db).resolve().parent / "lowtail-data"


def open_store(path: DbPath, read_only: bool = False, create: bool = True) -> Store:
    """The database at `path` (None: the default, `default_db()`); `create=False`: one that
    must already exist (the command reads what is stored in it), else a UserError."""
    from lowtail.store.db import Store

    return Store(resolve_db(path), read_only=read_only, create=create)


def __getattr__(name: str) -> Any:
    if name == "Store":
        from lowtail.store.db import Store

        return Store
    raise AttributeError(f"module 'lowtail.store' has no attribute {name!r}")
