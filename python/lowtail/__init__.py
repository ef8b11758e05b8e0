"""lowtail: prove that a network function keeps its tail latency inside a budget.

From Python: `db = lowtail.open("lowtail.duckdb")` (see lowtail.api and docs/python-api.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lowtail.api import Database
    from lowtail.store import DbPath

__all__ = ["open"]


def open(path: DbPath = None) -> Database:  # noqa: A001  (lowtail.open, as sqlite3.connect)
    """The lowtail results database at `path` (None: $LOWTAIL_DB, else ./lowtail.duckdb, as
    for every command): its runs, analyses, latencies, comparisons and models
    (lowtail.api.Database). Nothing heavier than this is imported until used."""
    from lowtail.api import Database

    return Database(path)


def __getattr__(name: str) -> str:
    # The version comes from the native module (built from the same Cargo version);
    # importlib.metadata would cost ~80 ms on every start of the command.
    if name == "__version__":
        from lowtail._native import __version__

        return __version__
    raise AttributeError(f"module 'lowtail' has no attribute {name!r}")
