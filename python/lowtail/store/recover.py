"""What a damaged database still holds, copied into a new one (`lowtail recover`).

The damaged file is attached read-only and never written. Every table of lowtail's schema
is copied in order, in ranges of rows; a range that cannot be read (it lies in a damaged
block) is halved until what can be read is copied and what cannot is counted as lost. Ids
are kept, and the new database's id sequences continue after the highest copied id, so
runs, analyses and models keep pointing at each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.store import made_whole_or_not_at_all
from lowtail.store.db import Store, duckdb

_CHUNK_ROWS = 4096
_SMALLEST_RANGE = 16  # rows given up together once a range keeps failing
_SEQUENCE = re.compile(r"nextval\('([A-Za-z0-9_]+)'\)")


@dataclass
class TableCopy:
    table: str
    rows: int  # in the damaged file
    copied: int

    @property
    def lost(self) -> int:
        return self.rows - self.copied


def recover(damaged: str | Path, target: str | Path) -> list[TableCopy]:
    """Copy every readable row of `damaged` into the new database `target`; per table, how
    many rows there were and how many were copied."""
    damaged, target = Path(damaged), Path(target)
    if not damaged.is_file():
        raise UserError(f"{damaged}: no such database")
    if target.exists():
        raise UserError(f"{target} exists: give the name of a new database")
    quoted = str(damaged.resolve()).replace("'", "''")
    with made_whole_or_not_at_all(target), Store(target) as new:
        try:
            new.con.raw.execute(f"ATTACH '{quoted}' AS damaged (READ_ONLY)")
        except duckdb.Error as e:
            raise UserError(f"{damaged}: not a database lowtail can read ({str(e).splitlines()[0]})") from None
        # The new database's own list of schema files is not data to copy.
        tables = [
            t
            for (t,) in new.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY table_oid"
            ).fetchall()
            if t != "schema_files"
        ]
        _take_the_damaged_identity(new)
        # Each range is its own transaction: a failed read must not abort what was copied.
        copies = [_copy_table(new, table) for table in tables]
        _continue_sequences(new)
        new.con.execute("DETACH damaged")
    return copies


def _take_the_damaged_identity(store: Store) -> None:
    """The recovered database is the damaged one's data, and its experiments' folders are
    claimed under the damaged one's identity (store/datadir.py): it keeps that identity (the
    copy below brings it), instead of a new one beside it — two rows, read as whichever came
    first. A damaged database without a readable identity leaves the new one."""
    try:
        (readable,) = store.con.raw.execute("SELECT count(*) FROM damaged.database_identity").fetchone()
    except duckdb.Error:
        return
    if readable:
        store.con.execute("DELETE FROM database_identity")


def _columns(store: Store, database: str, table: str) -> list[str]:
    return [
        c
        for (c,) in store.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ? ORDER BY column_index",
            [database, table],
        ).fetchall()
    ]


def _copy_table(store: Store, table: str) -> TableCopy:
    if table not in _tables(store, "damaged"):
        return TableCopy(table, 0, 0)
    (here,) = store.con.execute("SELECT current_database()").fetchone()
    columns = [c for c in _columns(store, here, table) if c in set(_columns(store, "damaged", table))]
    names = ", ".join(f'"{c}"' for c in columns)
    (rows,) = store.con.raw.execute(f'SELECT count(*) FROM damaged."{table}"').fetchone()

    def copy(start: int, end: int) -> int:
        try:
            (inserted,) = store.con.raw.execute(
                f'INSERT INTO "{table}" ({names}) SELECT {names} FROM damaged."{table}" WHERE rowid >= ? AND rowid < ?',
                [start, end],
            ).fetchone()
            return int(inserted)
        except duckdb.Error:
            if end - start <= _SMALLEST_RANGE:
                return 0
            middle = (start + end) // 2
            return copy(start, middle) + copy(middle, end)

    copied = sum(copy(start, start + _CHUNK_ROWS) for start in range(0, rows, _CHUNK_ROWS))
    return TableCopy(table, rows, copied)


def _tables(store: Store, database: str) -> set[str]:
    found = store.con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [database])
    return {t for (t,) in found.fetchall()}


def _continue_sequences(store: Store) -> None:
    """Each id sequence of the new database starts after the highest id copied."""
    for table, column, default in store.con.execute(
        "SELECT table_name, column_name, column_default FROM duckdb_columns() "
        "WHERE database_name = current_database() AND column_default LIKE 'nextval%'"
    ).fetchall():
        m = _SEQUENCE.search(default)
        (highest,) = store.con.execute(f'SELECT coalesce(max("{column}"), 0) FROM "{table}"').fetchone()
        if m and highest:
            store.con.execute(f"SELECT nextval('{m.group(1)}') FROM range(?)", [highest]).fetchall()
