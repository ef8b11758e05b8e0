"""The `lowtail` Typer application; command modules attach themselves to it."""

import re

import click
import typer
from typer.core import TyperGroup

# `lowtail --help` lists the commands by the workflow a newcomer follows, in this order;
# a command must be placed here (tests/test_cli_manners.py checks none is left over).
HELP_PANELS: dict[str, tuple[str, ...]] = {
    "Measure": ("run", "calibrate", "noise", "synth"),
    "Analyse": ("analyze", "report", "list", "show"),
    "Compare": ("compare", "certify", "comparison", "experiment"),
    "Explain": ("explain", "help"),
    "Tune": ("tune", "model"),
    "Host": ("host", "testbed", "vm", "completion"),
    "Data": ("import-captures", "campaign", "export", "import", "recover"),
}
OTHER_PANEL = "Other commands"


class WorkflowGroup(TyperGroup):
    """The top-level group: its commands listed in HELP_PANELS' sections. Typer draws its own
    help panels only with rich markup, which would read "[trust]" in a help text as a style."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = {
            name: cmd for name in self.list_commands(ctx) if (cmd := self.get_command(ctx, name)) and not cmd.hidden
        }
        if not commands:
            return
        placed: set[str] = set()
        for panel, names in [*HELP_PANELS.items(), (OTHER_PANEL, tuple(commands))]:
            rows = [(n, summary(commands[n])) for n in names if n in commands and n not in placed]
            placed.update(n for n, _ in rows)
            if rows:
                with formatter.section(panel):
                    formatter.write_dl(rows)


def summary(command: click.Command) -> str:
    """A command's line in `lowtail --help`: its help's first sentence up to its colon (what
    the command does; the rest is its own --help), whole — click cut each at 45 characters,
    mid-sentence ("every combination of the...")."""
    if command.short_help:
        return command.short_help
    text = " ".join((command.help or "").split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".")
    head = first.split(": ", 1)[0]
    return head if len(head.split()) >= 3 else first  # "Campaigns: many pairs …" stays whole


app = typer.Typer(
    cls=WorkflowGroup,
    name="lowtail",
    help="Measure, explain and predict the tail latency of packet-processing network functions. "
    "`lowtail help` explains the ideas behind the figures.",
    no_args_is_help=True,
    add_completion=False,  # `lowtail completion SHELL` prints the script instead
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    suggest_commands=False,  # click suggests a mistyped command already: once is enough
)


def version_text() -> str:
    """What `lowtail --version` prints: the version and build of the native module (the
    native programs' --version print the same), and where it and Python are."""
    import platform

    from lowtail import _native

    return (
        f"lowtail {_native.LONG_VERSION}\n"
        f"native module: {_native.__file__}\n"
        f"python: {platform.python_version()} ({platform.python_implementation()})"
    )


def _print_version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and build, and exit."
    ),
) -> None:
    """The options before any command."""
