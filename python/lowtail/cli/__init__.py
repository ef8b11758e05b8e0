"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import os
import sys

from lowtail.cli import analyze as _analyze  # noqa: F401  (registers commands)
from lowtail.cli import bundle as _bundle  # noqa: F401
from lowtail.cli import compare as _compare  # noqa: F401
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
from lowtail.cli._output import EXIT_BUG, err, print_json
from lowtail.errors import Failure, Interrupted, UserError

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer handles usage errors (exit 2) and --help; lowtail's own errors end here: one
    line on stderr, and with --json also one JSON document on stdout (`{"error": ...}`), so
    a program reading the output always gets a document."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    json_out = "--json" in (sys.argv[1:] if argv is None else argv)
    try:
        app(args=argv, prog_name="lowtail")
    except (UserError, Failure, Interrupted) as e:
        if debug:
            raise
        err.print(f"lowtail: {'error: ' if not isinstance(e, Interrupted) else ''}{e}", markup=False, highlight=False)
        _fail(json_out, str(e), type(e).__name__, e.exit_code)
    except KeyboardInterrupt:
        err.print("lowtail: interrupted", markup=False)
        _fail(json_out, "interrupted", "Interrupted", Interrupted.exit_code)
    except Exception as e:  # a bug, not a user mistake: still one line unless debugging
        if debug:
            raise
        err.print(
            f"lowtail: internal error: {type(e).__name__}: {e} (LOWTAIL_DEBUG=1 shows a traceback)",
            markup=False,
            highlight=False,
        )
        _fail(json_out, f"internal error: {type(e).__name__}: {e}", "InternalError", EXIT_BUG)


def _fail(json_out: bool, message: str, kind: str, code: int) -> None:
    if json_out:
        print_json({"error": {"message": message, "kind": kind, "exit_code": code}})
    sys.exit(code)
