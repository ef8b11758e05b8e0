"""The results database: every analysis, run and model lands here, and every report
reads from here. DuckDB, embedded, one file (default ./lowtail.duckdb)."""

from lowtail.store.db import DEFAULT_DB, Store, open_store

__all__ = ["DEFAULT_DB", "Store", "open_store"]
