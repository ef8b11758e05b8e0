"""How commands talk: results on stdout (a table, or one JSON document with --json),
messages on stderr, progress bars only on a terminal; an error is one line on stderr and,
with --json, also one JSON document on stdout."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from lowtail.core import terminal


class TerminalConsole(Console):
    """A rich console that writes no control character of its text (terminal.escape on every
    segment of text; rich's own styles, cursor moves and links are not text and stay): a name
    from a bundle or the database cannot clear the screen or set the title, whichever table or
    message prints it."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_escaped(segment) for segment in buffer)


def _escaped(segment: Segment) -> Segment:
    text, style, control = segment
    if control is not None or not text:
        return segment
    return Segment(terminal.escape(text, keep_newlines=True), style, control)


out = TerminalConsole(highlight=False, soft_wrap=True)
err = TerminalConsole(stderr=True, highlight=False, soft_wrap=True)

# Exit codes the commands choose themselves; errors carry theirs (errors.UserError 2,
# Failure 1, Interrupted 130) and typer exits 2 on a usage error.
EXIT_OK = 0
EXIT_PARTIAL = 3  # a result, but not a whole or trustworthy one (partial input, invalid runs)
EXIT_VERDICT_FAILED = 4  # `--strict`: a verdict is FAIL (`host audit --strict`: a check failed)
EXIT_UNDECIDED = 5  # `--strict`: no verdict is FAIL, but one is not PASS (inconclusive, invalid)
EXIT_BUG = 70  # an internal error (EX_SOFTWARE): a bug, not the user's doing


# Piped output (make run, logs) is not cut to 80 columns unless COLUMNS says so: the table
# is the result.
PIPED_WIDTH = 160


def table_console() -> Console:
    """Where a command prints its result table: the terminal at its width, or for a pipe a
    console COLUMNS wide (`COLUMNS=80 lowtail compare 3 > table.txt`), else PIPED_WIDTH."""
    if out.is_terminal:
        return out
    columns = os.environ.get("COLUMNS", "")
    return TerminalConsole(highlight=False, width=int(columns) if columns.isdigit() else PIPED_WIDTH)


def print_json(doc: Any) -> None:
    """One JSON document on stdout, on one line."""
    sys.stdout.write(json.dumps(doc, default=str) + "\n")
    sys.stdout.flush()


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line asked for JSON (an error then is a JSON document too)."""
    return "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]


_ended = False  # `fail` said how the command ended


def ended() -> bool:
    """Whether the command's last line (its error or "interrupted") was printed."""
    return _ended


def fail(message: str, exit_code: int, json_doc: bool, kind: str | None = "error") -> NoReturn:
    """End the command: `lowtail: error: MESSAGE` on stderr (`kind` None: no label) and,
    when --json was asked for, `{"error": MESSAGE, "exit_code": N}` on stdout, so that a
    script reading stdout sees the failure too."""
    global _ended
    # One line, whatever the message quotes from data (a key, a file's text): control
    # characters written as escapes.
    err.print(f"lowtail: {kind + ': ' if kind else ''}{terminal.shown(message)}", markup=False, highlight=False)
    _ended = True
    if json_doc:
        print_json({"error": message, "exit_code": exit_code})
    sys.exit(exit_code)


def warn(message: str) -> None:
    # The message is text, not markup: "[trust] max_stall" must not vanish as a style tag; and
    # one line, whatever it quotes from data (control characters written as escapes).
    err.print(f"[yellow]warning:[/yellow] {escape(terminal.shown(message))}", markup=True, highlight=False)


def note(message: str) -> None:
    err.print(message, markup=False)


def strict_exit(code: int, statuses: Iterable[str], strict: bool, json_out: bool) -> int:
    """The exit code of a command that judged verdicts. Without `--strict`, `code` (0, or 3
    for a partial result): a verdict is a result, FAIL included. With it (a CI gate): 4 when
    any verdict is FAIL; else 3 when the result is partial; else 5 when one is not PASS
    (inconclusive: the runs cannot show it yet; invalid); else 0. Calibration floors are
    not verdicts. The last line on stderr says why a gate closed."""
    if not strict:
        return code
    from lowtail.verdict.device import FAIL, PASS, combined_status

    status = combined_status(statuses)
    if status == FAIL:
        gated = EXIT_VERDICT_FAILED
    elif code != EXIT_OK or status == PASS:
        gated = code
    else:
        gated = EXIT_UNDECIDED
    if gated != code and not json_out:
        note(f"--strict: the verdict is {status}: exit {gated}")
    return gated


@contextmanager
def byte_progress(description: str, enabled: bool = True) -> Iterator[Any]:
    """Yields a callback(done, total) that drives a progress bar of bytes on a terminal,
    or a no-op when stderr is not one."""

    def columns() -> list[Any]:  # rich.progress is imported only when a bar is drawn
        from rich.progress import DownloadColumn, TimeRemainingColumn, TransferSpeedColumn

        return [
            "[progress.description]{task.description}",
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        ]

    with _progress(description, enabled, columns) as update:
        yield update


@contextmanager
def count_progress(description: str, unit: str, enabled: bool = True) -> Iterator[Any]:
    """Yields a callback(done, total) that drives a progress bar counting `unit`s (rows,
    runs) on a terminal, or a no-op when stderr is not one."""

    def columns() -> list[Any]:
        from rich.progress import MofNCompleteColumn, TimeElapsedColumn

        return [f"[progress.description]{description}", MofNCompleteColumn(), unit, TimeElapsedColumn()]

    with _progress(description, enabled, columns) as update:
        yield update


@contextmanager
def _progress(description: str, enabled: bool, columns: Any) -> Iterator[Any]:
    """A transient rich progress bar on stderr with a bar after the first of `columns()`;
    a no-op callback when stderr is not a terminal."""
    if not (enabled and err.is_terminal):
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, Progress

    first, *rest = columns()
    with Progress(first, BarColumn(), *rest, console=err, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        yield update
