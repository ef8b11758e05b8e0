"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Any

import typer

from lowtail.store import DB_ENV, DEFAULT_DB


def db_option(help: str = "Results database.") -> Any:
    """The `--db` option: the results database every command shares, $LOWTAIL_DB or
    ./lowtail.duckdb unless given."""
    return typer.Option(DEFAULT_DB, envvar=DB_ENV, show_envvar=True, help=help)
