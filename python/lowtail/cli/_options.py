"""Options several commands share, declared once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from lowtail.core.errors import UserError
from lowtail.core.labels import label_problem
from lowtail.core.units import UNIT_KINDS, parse_rate_exact
from lowtail.store import DB_ENV

if TYPE_CHECKING:
    from lowtail.verdict.judge import VerdictRequest


DB_HELP = "Results database."


def db_info(help: str = DB_HELP) -> Any:
    """The `--db` option: the results database every command shares, $LOWTAIL_DB or
    ./lowtail.duckdb unless given. Inside `Annotated`, where a typer.Option takes no default
    (its first argument would be read as the option's name): the default follows `=` in the
    signature, as in `db: Db = DEFAULT_DB`."""
    return typer.Option(envvar=DB_ENV, show_envvar=True, help=help)


Db = Annotated[Path, db_info()]


class UnitType(click.ParamType[Any]):
    """An option that takes a duration, a packet rate or an interrupt rate as people write
    them, with the unit (`units.UNIT_KINDS`: "350us", "50kpps", "250Hz"; `lowtail help
    units`), converted by the one reader of its kind (nanoseconds, packets or events per
    second); with `many`, a comma-separated list of them. A bare number, or anything the
    reader refuses, is a usage error naming the option (exit 2). Every option of this type
    is found by tests/test_units.py, which walks the command tree."""

    def __init__(self, kind: str, many: bool = False, whole: bool = True) -> None:
        self.kind = kind
        self.many = many
        self.name = f"{kind}s" if many else kind
        self.reader, self.writer, self.forms = UNIT_KINDS[kind]
        if not whole:  # a rate of a model, not rounded to whole packets
            self.reader = parse_rate_exact

    def bare_examples(self, number: str) -> list[str]:
        """Values that hold `number` where a unit is needed: what the option must refuse."""
        return [number, f"{self.writer(1_000)},{number}"] if self.many else [number]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default, already converted
        try:
            if self.many:
                items = [v for v in value.split(",") if v.strip()]
                if not items:
                    raise UserError(f"a list such as {self.writer(1_000)},{self.writer(2_000)}")
                return [self.reader(v) for v in items]
            return self.reader(value)
        except UserError as e:
            self.fail(str(e), param, ctx)


class SpecType(click.ParamType[Any]):
    """An option whose value is a small spec with durations or rates inside it
    ("exp:20us", "250Hz:5.5us,8.2us"): read by `reader` (its module's parser, which reads
    each number through core/units.py), a bare number in it a usage error naming the option.
    `bare` are values with a number where a unit is needed, which tests must see refused."""

    name = "spec"

    def __init__(self, reader: Callable[[str], Any], bare: tuple[str, ...]) -> None:
        self.reader = reader
        self.bare = bare

    def bare_examples(self, number: str) -> list[str]:
        return [b.replace("N", number) for b in self.bare]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.reader(value)
        except UserError as e:
            self.fail(str(e), param, ctx)


class LabelType(click.ParamType[str]):
    """A name for a stored result (`--label`), as core/labels.py allows it."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        problem = label_problem(text)
        if problem is not None:
            self.fail(problem, param, ctx)
        return text


def label_info(help: str) -> Any:
    """The `--label` option of a command that stores a result (`LabelType`), for
    `Annotated[str | None, label_info(...)] = None`."""
    return typer.Option("--label", click_type=LabelType(), help=help)


def unit_info(name: str, kind: str, default: Any, help: str, many: bool = False, whole: bool = True) -> Any:
    """An option `name` taking a duration, rate or interrupt rate with its unit (`UnitType`;
    with `many`, a comma-separated list), for `Annotated[int | None, unit_info(...)] = default`:
    typer takes the default from the signature, so `default` here only shows it in the help,
    as people write it (give both)."""
    help = _with_default(kind, default, help, many)
    return typer.Option(name, click_type=UnitType(kind, many, whole), show_default=False, help=help)


def duration_info(name: str, default_ns: int | None, help: str) -> Any:
    """`unit_info` of a duration (nanoseconds to the command)."""
    return unit_info(name, "duration", default_ns, help)


def _with_default(kind: str, default: Any, help: str, many: bool) -> str:
    """The help with the default written as people write it; click would show a string default
    in parentheses."""
    _, writer, _ = UNIT_KINDS[kind]
    if default is not None and "[default" not in help:
        help += f" [default: {','.join(map(writer, default)) if many else writer(default)}]"
    return help


def verdict_request(
    budget_ns: int | None,
    percentile: str | None = None,
    max_loss: int | None = None,
    confidence: str | None = None,
) -> VerdictRequest:
    """The verdict the options --budget (read by its `UnitType`), --percentile, --max-loss
    and --confidence ask for, as `VerdictRequest.parse` reads the same typed words."""
    from lowtail.verdict.judge import VerdictRequest

    request = VerdictRequest.parse(None, percentile, max_loss, confidence)
    return dataclasses.replace(request, budget_ns=budget_ns) if budget_ns is not None else request


# A CI gate on a command's verdicts (cli/_output.strict_exit owns the codes).
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Exit 4 when a verdict is FAIL, 5 when one is not decided (inconclusive, invalid), 3 for a "
        "partial result, 0 only when every verdict is PASS: a gate for CI.",
    ),
]
