"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Any

import click
import typer

from lowtail.errors import UserError
from lowtail.store import DB_ENV, DEFAULT_DB
from lowtail.units import parse_duration_ns


def db_option(help: str = "Results database.") -> Any:
    """The `--db` option: the results database every command shares, $LOWTAIL_DB or
    ./lowtail.duckdb unless given."""
    return typer.Option(DEFAULT_DB, envvar=DB_ENV, show_envvar=True, help=help)


class DurationType(click.ParamType[int]):
    """An option's duration as people write it ("500ms", "1.5s"; a plain number in
    `default_unit`), read by units.parse_duration_ns into nanoseconds; a value it cannot
    read is a usage error naming the option."""

    name = "duration"

    def __init__(self, default_unit: str = "s") -> None:
        self.default_unit = default_unit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # already nanoseconds (a default given as such)
        try:
            return parse_duration_ns(str(value), self.default_unit)
        except UserError as e:
            self.fail(str(e), param, ctx)


def duration_option(name: str, default_ns: int, help: str, default_unit: str = "s") -> Any:
    """An option `name` taking a duration (nanoseconds to the command), its default shown as
    people write it."""
    return typer.Option(
        default_ns,
        name,
        click_type=DurationType(default_unit),
        show_default=f"{default_ns / 1e9:g}s",
        help=help,
    )
