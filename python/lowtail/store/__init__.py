"""The results database: every analysis, run and model lands here, and every report
reads from here. DuckDB, embedded, one file (default ./lowtail.duckdb).

All SQL of lowtail lives in this package. Its API is module functions that take the open
`Store` first (`analyses.save_analysis(store, doc)`, `runs.experiment(store, id)`), one
module per family of tables; `Store` itself is only the connection and its transactions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The database a command uses when not given --db: the one place that names it.
DEFAULT_DB = Path("lowtail.duckdb")

__all__ = ["DEFAULT_DB", "Store", "open_store"]


def __getattr__(name: str) -> Any:
    # Store and open_store import DuckDB (~0.15 s): command modules import DEFAULT_DB at
    # start-up, and only the commands that open the database pay for DuckDB.
    if name in ("Store", "open_store"):
        from lowtail.store import db

        return getattr(db, name)
    raise AttributeError(f"module 'lowtail.store' has no attribute {name!r}")
