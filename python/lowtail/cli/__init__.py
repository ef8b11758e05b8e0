"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click
import typer

from lowtail.cli._app import app
from lowtail.cli._numbers import ascii_numbers_only
from lowtail.cli._output import EXIT_BUG, fail, wants_json, warn
from lowtail.cli.completion import REQUEST_VARIABLE
from lowtail.core import signals
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.core.files import os_error

# The module that defines each top-level command, in the order `lowtail --help` lists them.
# `lowtail CMD` imports CMD's module alone: importing every module, and Typer building
# every command, took a third of a second before any command ran.
COMMAND_MODULES: dict[str, str] = {
    "analyze": "analyze",
    "export": "bundle",
    "import": "bundle",
    "campaign": "campaign",
    "certify": "certify",
    "compare": "compare",
    "explain": "explain",
    "comparison": "compare",
    "completion": "completion",
    "list": "db",
    "show": "db",
    "recover": "db",
    "host": "host",
    "import-captures": "import_captures",
    "model": "model",
    "noise": "noise",
    "report": "report",
    "run": "run",
    "calibrate": "run",
    "experiment": "run",
    "synth": "synth",
    "testbed": "testbed",
    "tune": "tune",
    "help": "topics",
    "vm": "vm",
}
# Commands that look at all the others (help topics, completion scripts).
_NEEDS_EVERY_COMMAND = {"help", "completion"}


def load_commands(argv: Sequence[str] | None = None) -> None:
    """Register the commands a command line needs: the module of the command it names, or
    every module (no command, `--help`, a mistyped one that click should suggest a name for,
    a completion request)."""
    args = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in args if not a.startswith("-")]
    command = words[0] if words else None
    if command is None and {"--version", "-V"} & set(args) and REQUEST_VARIABLE not in os.environ:
        return  # the version is printed before any command is looked at
    if command in COMMAND_MODULES and command not in _NEEDS_EVERY_COMMAND and REQUEST_VARIABLE not in os.environ:
        modules = [COMMAND_MODULES[command]]
    else:
        modules = list(dict.fromkeys(COMMAND_MODULES.values()))
    for module in modules:
        importlib.import_module(f"lowtail.cli.{module}")


__all__ = ["COMMAND_MODULES", "app", "load_commands", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer parses; lowtail's own errors, usage errors and signals end here as one line
    on stderr and their exit code (with --json, as a JSON document on stdout too). SIGTERM
    and SIGHUP stop a command as Ctrl-C does."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    json_doc = wants_json(sys.argv[1:] if argv is None else argv)
    load_commands(argv)
    if REQUEST_VARIABLE in os.environ:
        from lowtail.cli.completion import prepare

        prepare()
    given = sys.argv[1:] if argv is None else argv
    command = ascii_numbers_only(typer.main.get_command(app))
    with signals.stop_on_signals(until_exit=argv is None):  # until the last line is printed
        try:
            _say_leftovers(given)
            code = command.main(args=argv, prog_name="lowtail", standalone_mode=False)
        except click.UsageError as e:
            if isinstance(e, click.exceptions.NoArgsIsHelpError):
                e.show()
                sys.exit(e.exit_code)
            after = _goes_after_the_command(e, command, given)
            message = f"No such option '{after[0]}' ({after[1]})" if after else e.format_message().rstrip(".")
            fail(f"{message}{'' if after else _help_hint(e)}", e.exit_code, json_doc)
        except click.ClickException as e:
            fail(e.format_message(), e.exit_code, json_doc)
        except (UserError, Failure, Interrupted) as e:
            if debug:
                raise
            fail(str(e), e.exit_code, json_doc, kind=None if isinstance(e, Interrupted) else "error")
        except OSError as e:  # a file or the machine's state (a full disk, a name too long)
            if debug:
                raise
            if e.errno == errno.EBADF:  # no file of the user's nor the machine's: lowtail's own bug
                _internal_error(e, json_doc)
            error = os_error(e)
            fail(str(error), error.exit_code, json_doc)
        except (KeyboardInterrupt, click.Abort):
            fail("interrupted", Interrupted.exit_code, json_doc, kind=None)
        except Exception as e:  # a bug, not a user mistake: still one line unless debugging
            if signals.stop_signal() is not None:  # a library's own error for the interruption
                fail(f"interrupted ({type(e).__name__}: {_first_line(e)})", Interrupted.exit_code, json_doc, kind=None)
            if debug:
                raise
            _internal_error(e, json_doc)
        if code == Interrupted.exit_code and signals.stop_signal() is not None:
            # Typer turned the KeyboardInterrupt into this exit code, silently.
            fail("interrupted", Interrupted.exit_code, json_doc, kind=None)
    sys.exit(code or 0)


# Set to 0 where another's leftovers are not the reader's business (the test suite, which
# shares its host with other runs; the tests of the notices set it to 1).
NOTICES_VARIABLE = "LOWTAIL_LEFTOVER_NOTICES"


def _say_leftovers(argv: Sequence[str]) -> None:
    """Say first what killed commands left on this host (cli/_leftovers.py)."""
    if os.environ.get(NOTICES_VARIABLE, "1") == "0" or REQUEST_VARIABLE in os.environ:
        return
    from lowtail.cli._leftovers import notices

    words = [a for a in argv if not a.startswith("-")]
    for line in notices(words):
        warn(line)


def _internal_error(e: BaseException, json_doc: bool) -> NoReturn:
    """A bug, not a user mistake: one line, exit 70, with the place in lowtail it came from
    (a rare one, seen once on a busy CI host, can then be found without its traceback)."""
    where = _innermost_lowtail_frame(e)
    fail(
        f"{type(e).__name__}: {_first_line(e)} ({f'at {where}; ' if where else ''}LOWTAIL_DEBUG=1 shows a traceback)",
        EXIT_BUG,
        json_doc,
        kind="internal error",
    )


def _innermost_lowtail_frame(e: BaseException) -> str | None:
    """ "lowtail/store/db.py:340 in _check_whole": the last frame of `e`'s traceback in
    lowtail's own code (None when none is)."""
    import traceback
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(package):
            return f"lowtail/{path.relative_to(package).as_posix()}:{frame.lineno} in {frame.name}"
    return None


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _help_hint(e: click.UsageError) -> str:
    return f" ({e.ctx.command_path} -h shows the usage)" if e.ctx is not None else ""


def _goes_after_the_command(e: click.UsageError, top: click.Command, given: Sequence[str]) -> tuple[str, str] | None:
    """A command's option given before the command (`lowtail --db x run`): the option and
    where it goes (None for any other error; click's "did you mean --version?" would point
    elsewhere)."""
    if not isinstance(e, click.NoSuchOption) or e.ctx is None or e.ctx.parent is not None:
        return None
    if not isinstance(top, click.Group):
        return None
    path: list[str] = []  # the command the words name ("experiment list"), as far as they go
    found: click.Command = top
    for word in given:
        if isinstance(found, click.Group) and word in found.commands:
            path.append(word)
            found = found.commands[word]
    if not _has_option(found, e.option_name):
        return None
    if isinstance(found, click.Group):
        path.append("COMMAND")
    where = f"lowtail {' '.join(path)} {e.option_name} …"
    return e.option_name, f"a command's option goes after the command: {where}"


def _has_option(command: click.Command, name: str) -> bool:
    """Whether `command`, or any command of it, takes the option `name`."""
    if any(name in p.opts for p in command.params):
        return True
    return isinstance(command, click.Group) and any(_has_option(c, name) for c in command.commands.values())
