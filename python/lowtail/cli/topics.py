"""`lowtail help [TOPIC]`: short pages on the ideas behind the figures (budget, floor,
trim, percentiles, units, database), and every command's help by its name."""

from __future__ import annotations

from importlib import resources

import typer

from lowtail.cli._app import app
from lowtail.cli._output import out
from lowtail.core.errors import UserError

_PAGES = "help"  # python/lowtail/cli/help/<topic>.md


def topics() -> dict[str, str]:
    """Every topic with its one-line summary (the page's title line)."""
    found = {}
    for page in sorted(resources.files("lowtail.cli").joinpath(_PAGES).iterdir(), key=lambda p: p.name):
        if page.name.endswith(".md"):
            title = page.read_text().splitlines()[0].lstrip("# ")
            found[page.name[:-3]] = title.partition(" — ")[2] or title
    return found


def page(topic: str) -> str:
    """The text of one topic's page."""
    return resources.files("lowtail.cli").joinpath(_PAGES, f"{topic}.md").read_text()


@app.command(
    "help",
    help="Explain an idea behind lowtail's figures (budget, floor, trim, percentiles, units, database), "
    "or show a command's help (`lowtail help run` is `lowtail run --help`). Without TOPIC, list the topics.",
)
def help_(
    topic: list[str] = typer.Argument(
        None, help="A topic, or a command (with its subcommand).", autocompletion=lambda: [*topics(), *_commands()]
    ),
) -> None:
    """`lowtail help`."""
    known = topics()
    if not topic:
        out.print("Topics (lowtail help TOPIC):", markup=False)
        width = max(map(len, known))
        for name, summary in known.items():
            out.print(f"  {name:<{width}}  {summary}", markup=False)
        out.print("\nCommands: lowtail --help; each command: lowtail help COMMAND.", markup=False)
        return
    if len(topic) == 1 and topic[0] in known:
        text = page(topic[0])
        if out.is_terminal:
            from rich.markdown import Markdown

            out.print(Markdown(text))
        else:
            out.file.write(text)
        return
    _command_help(topic, known)


def _commands() -> list[str]:
    """The top-level commands, for completing `lowtail help`."""
    import click

    command = typer.main.get_command(app)
    return command.list_commands(click.Context(command)) if isinstance(command, click.Group) else []


def _command_help(words: list[str], known: dict[str, str]) -> None:
    """`lowtail WORDS --help`, or a one-line error naming the topics."""
    import click

    command = typer.main.get_command(app)
    ctx = click.Context(command, info_name="lowtail", **command.context_settings)
    for word in words:
        sub = command.get_command(ctx, word) if isinstance(command, click.Group) else None
        if sub is None:
            raise UserError(
                f"no help topic or command {' '.join(words)!r} (topics: {', '.join(known)}; commands: lowtail --help)"
            )
        ctx = click.Context(sub, info_name=word, parent=ctx)
        command = sub
    out.file.write(command.get_help(ctx) + "\n")
