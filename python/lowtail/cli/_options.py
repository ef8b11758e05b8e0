"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Any

import typer

from lowtail.store import DEFAULT_DB


def db_option(help: str = "Results database.") -> Any:
    """The `--db` option: the results database, ./lowtail.duckdb unless given."""
    return typer.Option(DEFAULT_DB, help=help)
