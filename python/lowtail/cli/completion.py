"""`lowtail completion bash|zsh|fish`: the shell's completion script for lowtail.

The script calls lowtail back with `_LOWTAIL_COMPLETE` set whenever Tab is pressed;
Click (under Typer) answers from the commands' own options and arguments, so what is
completed is always what the installed lowtail accepts. Typer's own
`--install-completion` guesses the shell and edits start-up files; printing the script
(as gh and ripgrep do) lets the user choose where it goes, and costs the other commands
nothing at start-up."""

from __future__ import annotations

from enum import Enum

import typer

from lowtail.cli._app import app

# The variable the completion scripts set when they ask lowtail for completions.
REQUEST_VARIABLE = "_LOWTAIL_COMPLETE"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def prepare() -> None:
    """Answer a completion request the way the scripts of `lowtail completion` ask it
    (Typer's completion classes), before the app runs."""
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: Shell) -> str:
    """The completion script of `shell` for the command `lowtail`."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="lowtail", complete_var=REQUEST_VARIABLE, shell=shell.value)


@app.command(
    help="Print the shell completion script for bash, zsh or fish. Load it in the current shell: "
    "`source <(lowtail completion bash)` (zsh: the same with zsh; fish: `lowtail completion fish | source`); "
    "for good: `lowtail completion bash > ~/.local/share/bash-completion/completions/lowtail`, "
    "`lowtail completion fish > ~/.config/fish/completions/lowtail.fish`, or in ~/.zshrc "
    "`source <(lowtail completion zsh)` after compinit (`make install` installs bash's and fish's)."
)
def completion(shell: Shell = typer.Argument(..., help="bash, zsh or fish.")) -> None:
    """`lowtail completion`."""
    print(script(shell))
