"""Numbers typed on the command line are read as ASCII, for every command at once.

click converts an `int`/`float` option with Python's `int()`/`float()`, which also read
other scripts' digits ("١٢٠" is 120) and digit separators ("1_0" is 10): a typo or a pasted
value would then run with a number the person did not type. Rather than a type on each of
the ~200 options, the command tree is checked once, after Typer has built it: every number
parameter keeps its own conversion (ranges, help text) behind an ASCII check.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import click

# What int()/float() take that a person means: ASCII digits, a sign, a point, an exponent,
# inf/nan spelled out (the options that refuse those say so themselves).
_ASCII_NUMBER = re.compile(
    r"^[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*$|^[+-]?(?:inf|infinity|nan)$", re.I
)


def ascii_numbers_only(command: click.Command) -> click.Command:
    """Put the ASCII check in front of every int/float parameter of `command` and of the
    commands under it; returns `command`."""
    for param in command.params:
        if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
            param.type = _checked(param.type)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            ascii_numbers_only(sub)
    return command


def _checked(number_type: click.ParamType[Any]) -> click.ParamType[Any]:
    checked = copy.copy(number_type)  # click.INT and click.FLOAT are shared instances
    convert: Callable[..., Any] = number_type.convert

    def convert_ascii(value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _ASCII_NUMBER.match(value):
            checked.fail(f"{value!r} is not a number written in ASCII digits", param, ctx)
        return convert(value, param, ctx)

    checked.convert = convert_ascii  # type: ignore[method-assign]
    return checked
