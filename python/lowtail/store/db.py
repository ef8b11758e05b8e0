"""Open the database, create what is missing, and the transaction every write runs in.

The queries themselves are module functions beside this one, one module per family of
tables (`analyses`, `runs`, `host`, `models`), each taking the open `Store` first."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from lowtail.errors import UserError
from lowtail.percentiles import KEYS


def _schema_statements() -> list[str]:
    """Every schema file in order; each is idempotent (CREATE ... IF NOT EXISTS)."""
    folder = resources.files("lowtail.store").joinpath("schema")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [f.read_text() for f in files]


class Store:
    """A results database. Writes happen in one transaction each: a failure leaves what
    was stored before untouched."""

    def __init__(self, path: str | Path, read_only: bool = False):
        self.path = Path(path)
        self._tx_depth = 0
        if read_only and not self.path.exists():
            raise UserError(f"{self.path}: no such database (run an analysis first, or pass --db)")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as e:
            raise UserError(f"{self.path}: cannot open the database: {str(e).splitlines()[0]}") from None
        except duckdb.Error as e:
            raise UserError(f"{self.path}: not a lowtail database ({str(e).splitlines()[0]})") from None
        if not read_only:
            for sql in _schema_statements():
                self.con.execute(sql)

    def close(self) -> None:
        """Close the connection (a `with` block does it)."""
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self) -> _Transaction:
        """A transaction; nested ones join the outermost (one commit for the whole write)."""
        return _Transaction(self)


class _Transaction:
    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> None:
        if self.store._tx_depth == 0:
            self.store.con.execute("BEGIN TRANSACTION")
        self.store._tx_depth += 1

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.store._tx_depth -= 1
        if self.store._tx_depth == 0:
            self.store.con.execute("ROLLBACK" if exc_type else "COMMIT")


# -- helpers of the query modules -------------------------------------------------------------

# The headline latency figures an analysis row holds as columns, in the order of its schema.
LATENCY_FIGURES = ("min", "mean", "stddev", *KEYS, "max")


def latency_column(figure: str) -> str:
    """The analyses column of a latency figure: "p99_999" → "lat_p99_999_ns"."""
    return f"lat_{figure}_ns"


def latency_columns(alias: str = "", figures: tuple[str, ...] = LATENCY_FIGURES) -> str:
    """A SELECT list of latency columns ("a.lat_min_ns, a.lat_mean_ns, ..."), in schema order."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + latency_column(f) for f in figures)


def rows_as_dicts(cur: Any) -> list[dict[str, Any]]:
    """Every row of an executed cursor as a column → value dict."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def row_as_dict(cur: Any) -> dict[str, Any] | None:
    """The next row of an executed cursor as a column → value dict; None when there is none."""
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def newest_id(store: Store, table: str, id_column: str) -> int | None:
    """The highest id of a table (what 'latest' means); None when it is empty."""
    (found,) = store.con.execute(f"SELECT max({id_column}) FROM {table}").fetchone()
    return found


def stored_id(store: Store, ident: int | str, table: str, id_column: str, what: str, hint: str) -> int:
    """The id a user named: a number, or 'latest' (the newest row). Anything else, or a
    number that names no row, is a UserError saying so (`what`: "analysis"; `hint`: the
    command that lists or makes them)."""
    if ident == "latest":
        found = newest_id(store, table, id_column)
        if found is None:
            raise UserError(f"{store.path}: holds no {what} yet ({hint})")
        return found
    try:
        number = int(ident)
    except ValueError:
        raise UserError(f"{ident!r} is not an id: a whole number, or 'latest' ({hint})") from None
    if store.con.execute(f"SELECT 1 FROM {table} WHERE {id_column} = ?", [number]).fetchone() is None:
        raise UserError(f"{store.path}: none of its {what} has id {number} ({hint})")
    return number
