"""The `lowtail` Typer application; command modules attach themselves to it."""

import typer

app = typer.Typer(
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
