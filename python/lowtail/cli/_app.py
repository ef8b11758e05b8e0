"""The `lowtail` Typer application; command modules attach themselves to it."""

import typer

app = typer.Typer(
    name="lowtail",
    help="Measure, explain and predict the tail latency of packet-processing network functions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    suggest_commands=False,  # click suggests a mistyped command already: once is enough
)
