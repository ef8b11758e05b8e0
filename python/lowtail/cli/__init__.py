"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import os
import sys

import click

from lowtail import signals
from lowtail.cli import analyze as _analyze  # noqa: F401  (registers commands)
from lowtail.cli import bundle as _bundle  # noqa: F401
from lowtail.cli import campaign as _campaign  # noqa: F401
from lowtail.cli import compare as _compare  # noqa: F401
from lowtail.cli import completion as _completion
from lowtail.cli import db as _db  # noqa: F401
from lowtail.cli import host as _host  # noqa: F401
from lowtail.cli import import_captures as _import_captures  # noqa: F401
from lowtail.cli import model as _model  # noqa: F401
from lowtail.cli import noise as _noise  # noqa: F401
from lowtail.cli import report as _report  # noqa: F401
from lowtail.cli import run as _run  # noqa: F401
from lowtail.cli import synth as _synth  # noqa: F401
from lowtail.cli import testbed as _testbed  # noqa: F401
from lowtail.cli import topics as _topics  # noqa: F401
from lowtail.cli import vm as _vm  # noqa: F401
from lowtail.cli._app import app
from lowtail.cli._output import EXIT_BUG, fail, wants_json
from lowtail.errors import Failure, Interrupted, UserError
from lowtail.files import os_error

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer parses; lowtail's own errors, usage errors and signals end here as one line
    on stderr and their exit code (with --json, as a JSON document on stdout too). SIGTERM
    and SIGHUP stop a command as Ctrl-C does."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    json_doc = wants_json(sys.argv[1:] if argv is None else argv)
    if _completion.REQUEST_VARIABLE in os.environ:
        _completion.prepare()
    with signals.stop_on_signals(until_exit=argv is None):  # until the last line is printed
        try:
            code = app(args=argv, prog_name="lowtail", standalone_mode=False)
        except click.UsageError as e:
            if isinstance(e, click.exceptions.NoArgsIsHelpError):
                e.show()
                sys.exit(e.exit_code)
            fail(f"{e.format_message().rstrip('.')}{_help_hint(e)}", e.exit_code, json_doc)
        except click.ClickException as e:
            fail(e.format_message(), e.exit_code, json_doc)
        except (UserError, Failure, Interrupted) as e:
            if debug:
                raise
            fail(str(e), e.exit_code, json_doc, kind=None if isinstance(e, Interrupted) else "error")
        except OSError as e:  # a file or the machine's state (a full disk, a name too long)
            if debug:
                raise
            error = os_error(e)
            fail(str(error), error.exit_code, json_doc)
        except (KeyboardInterrupt, click.Abort):
            fail("interrupted", Interrupted.exit_code, json_doc, kind=None)
        except Exception as e:  # a bug, not a user mistake: still one line unless debugging
            if signals.stop_signal() is not None:  # a library's own error for the interruption
                fail(f"interrupted ({type(e).__name__}: {_first_line(e)})", Interrupted.exit_code, json_doc, kind=None)
            if debug:
                raise
            fail(
                f"{type(e).__name__}: {_first_line(e)} (LOWTAIL_DEBUG=1 shows a traceback)",
                EXIT_BUG,
                json_doc,
                kind="internal error",
            )
        if code == Interrupted.exit_code and signals.stop_signal() is not None:
            # Typer turned the KeyboardInterrupt into this exit code, silently.
            fail("interrupted", Interrupted.exit_code, json_doc, kind=None)
    sys.exit(code or 0)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def _help_hint(e: click.UsageError) -> str:
    return f" ({e.ctx.command_path} -h shows the usage)" if e.ctx is not None else ""
