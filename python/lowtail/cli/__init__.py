"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import os
import sys

import click

from lowtail import signals
from lowtail.cli import analyze as _analyze  # noqa: F401  (registers commands)
from lowtail.cli import db as _db  # noqa: F401
from lowtail.cli import host as _host  # noqa: F401
from lowtail.cli import model as _model  # noqa: F401
from lowtail.cli import noise as _noise  # noqa: F401
from lowtail.cli import report as _report  # noqa: F401
from lowtail.cli import run as _run  # noqa: F401
from lowtail.cli import synth as _synth  # noqa: F401
from lowtail.cli import testbed as _testbed  # noqa: F401
from lowtail.cli import vm as _vm  # noqa: F401
from lowtail.cli._app import app
from lowtail.cli._output import EXIT_BUG, err
from lowtail.errors import Failure, Interrupted, UserError
from lowtail.files import os_error

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer parses; lowtail's own errors, usage errors and signals end here as one line
    on stderr and their exit code. SIGTERM and SIGHUP stop a command as Ctrl-C does."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    with signals.stop_on_signals(until_exit=argv is None):  # until the last line is printed
        try:
            code = app(args=argv, prog_name="lowtail", standalone_mode=False)
        except click.UsageError as e:
            if isinstance(e, click.exceptions.NoArgsIsHelpError):
                e.show()
                sys.exit(e.exit_code)
            _one_line(f"error: {e.format_message().rstrip('.')}{_help_hint(e)}")
            sys.exit(e.exit_code)
        except click.ClickException as e:
            _one_line(f"error: {e.format_message()}")
            sys.exit(e.exit_code)
        except (UserError, Failure, Interrupted) as e:
            if debug:
                raise
            _one_line(f"{'error: ' if not isinstance(e, Interrupted) else ''}{e}")
            sys.exit(e.exit_code)
        except OSError as e:  # a file or the machine's state (a full disk, a name too long)
            if debug:
                raise
            error = os_error(e)
            _one_line(f"error: {error}")
            sys.exit(error.exit_code)
        except (KeyboardInterrupt, click.Abort):
            _one_line("interrupted")
            sys.exit(Interrupted.exit_code)
        except Exception as e:  # a bug, not a user mistake: still one line unless debugging
            if signals.stop_signal() is not None:  # a library's own error for the interruption
                _one_line(f"interrupted ({type(e).__name__}: {_first_line(e)})")
                sys.exit(Interrupted.exit_code)
            if debug:
                raise
            _one_line(f"internal error: {type(e).__name__}: {_first_line(e)} (LOWTAIL_DEBUG=1 shows a traceback)")
            sys.exit(EXIT_BUG)
        if code == Interrupted.exit_code and signals.stop_signal() is not None:
            _one_line("interrupted")  # Typer turned the KeyboardInterrupt into this exit code, silently
    sys.exit(code or 0)


def _one_line(message: str) -> None:
    err.print(f"lowtail: {message}", markup=False, highlight=False)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _help_hint(e: click.UsageError) -> str:
    return f" ({e.ctx.command_path} -h shows the usage)" if e.ctx is not None else ""
