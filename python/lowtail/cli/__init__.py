"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import os
import sys

from lowtail.cli import analyze as _analyze  # noqa: F401  (registers commands)
from lowtail.cli import campaign as _campaign  # noqa: F401
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

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer handles usage errors (exit 2) and --help; lowtail's own errors end here."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    try:
        app(args=argv, prog_name="lowtail")
    except (UserError, Failure, Interrupted) as e:
        if debug:
            raise
        err.print(f"lowtail: {'error: ' if not isinstance(e, Interrupted) else ''}{e}", markup=False, highlight=False)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("lowtail: interrupted", markup=False)
        sys.exit(Interrupted.exit_code)
    except Exception as e:  # a bug, not a user mistake: still one line unless debugging
        if debug:
            raise
        err.print(
            f"lowtail: internal error: {type(e).__name__}: {e} (LOWTAIL_DEBUG=1 shows a traceback)",
            markup=False,
            highlight=False,
        )
        sys.exit(EXIT_BUG)
