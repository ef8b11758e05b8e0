"""`lowtail` command line. `main()` turns every user mistake into one line on stderr
and a meaningful exit code; a traceback appears only with LOWTAIL_DEBUG=1."""

from __future__ import annotations

import os
import sys

from lowtail.cli import analyze as _analyze  # noqa: F401  (registers commands)
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

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Typer handles usage errors (exit 2) and --help; lowtail's own errors end here
    (with --json, as a JSON document on stdout too)."""
    debug = os.environ.get("LOWTAIL_DEBUG") == "1"
    json_doc = wants_json(sys.argv[1:] if argv is None else argv)
    if _completion.REQUEST_VARIABLE in os.environ:
        _completion.prepare()
    try:
        app(args=argv, prog_name="lowtail")
    except (UserError, Failure, Interrupted) as e:
        if debug:
            raise
        fail(str(e), e.exit_code, json_doc, kind=None if isinstance(e, Interrupted) else "error")
    except KeyboardInterrupt:
        fail("interrupted", Interrupted.exit_code, json_doc, kind=None)
    except Exception as e:  # a bug, not a user mistake: still one line unless debugging
        if debug:
            raise
        fail(f"{type(e).__name__}: {e} (LOWTAIL_DEBUG=1 shows a traceback)", EXIT_BUG, json_doc, kind="internal error")
