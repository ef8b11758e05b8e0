"""Analyse a PRE/POST capture pair with the native pipeline.

The work runs in a worker thread (the native code releases the GIL), so the main
thread stays free to draw a progress bar and to turn Ctrl-C into a clean cancel.

The options are the native `AnalyzeOptions` (their names, defaults and checks live in
Rust); native errors arrive as one exception class per kind and become lowtail's errors
here, by class.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail._native import AnalyzeOptions
from lowtail.analyze.document import AnalysisDocument, CaptureSide
from lowtail.analyze.flows import sums_disagree, with_spread
from lowtail.compare.intervals import DEFAULT_LEVEL, Evidence, bounds_document
from lowtail.core.errors import DiskFull, Failure, Interrupted, UserError
from lowtail.core.files import DISK_FULL, os_error

__all__ = [
    "AnalysisDocument",
    "AnalyzeOptions",
    "CaptureSide",
    "ProgressCallback",
    "analyze_options",
    "analyze_pair",
    "worst_first",
    "lowtail_error",
    "measured_rate",
]

ProgressCallback = Callable[[int, int], None]


CANCELLED = "interrupted: analysis cancelled, nothing stored"


def analyze_options(**options: Any) -> AnalyzeOptions:
    """`AnalyzeOptions(**options)`; a value out of range is a UserError (one too large for
    the native option's integer type too, named by its option)."""
    try:
        return AnalyzeOptions(**options)
    except _native.OptionsError as e:
        raise UserError(str(e)) from e
    except OverflowError:
        for name, value in options.items():
            try:
                AnalyzeOptions(**{name: value})
            except OverflowError:
                raise UserError(f"--{name.replace('_', '-')} must be a smaller number, not {value}") from None
            except _native.OptionsError:
                pass
        raise


SHOWN_WORST = 20
"""Worst events `lowtail analyze` prints unless told more: a summary, not the stored list."""


def worst_first(doc: AnalysisDocument, n: int) -> AnalysisDocument:
    """A copy of the document for printing: its n worst events, worst first, and how many
    the analysis kept (the store keeps them all: the report's scatter and the models read
    them)."""
    shown = doc.copy()
    shown["worst"] = sorted(doc["worst"], key=lambda w: w["latency_ns"], reverse=True)[:n]
    shown["worst_kept"] = len(doc["worst"])
    return shown


def lowtail_error(e: _native.LowtailError) -> Exception:
    """The lowtail error a native one becomes: captures that hold nothing to measure, more
    memory than the host can give, and a full disk, are a Failure, a cancelled analysis is
    Interrupted, everything else (options,
    unreadable captures, an export that cannot be written) a UserError. The native error stays the
    cause, with its `errno` when the operating system said why."""
    if isinstance(e, _native.CancelledError):
        return Interrupted(CANCELLED)
    if getattr(e, "errno", None) in DISK_FULL:
        return DiskFull(f"the disk is full ({e}); nothing of it was kept: free some space and run it again")
    if isinstance(e, (_native.NothingToAnalyzeError, _native.OutOfMemoryError)):
        return Failure(str(e))
    return UserError(str(e))


@dataclass
class _Outcome:
    """What the analysis thread hands back: the figures as JSON, or the native error it raised."""

    json: str | None = None
    error: _native.LowtailError | None = None


def analyze_pair(
    pre: str | Path,
    post: str | Path,
    options: AnalyzeOptions | None = None,
    on_progress: ProgressCallback | None = None,
    while_waiting: Callable[[], object] | None = None,
    confidence: float = DEFAULT_LEVEL,
    budgets: Iterable[int] = (),
) -> AnalysisDocument:
    """Run one analysis; returns the figures (see `lowtail analyze --json`) with every
    headline percentile's interval and one-sided bounds at `confidence` and the packets
    reaching each of `budgets` (`intervals`, see `compare.intervals.bounds_document`), and the latencies' summary under `summary`
    (what storing keeps for pooling; not part of the printed document).

    `while_waiting` runs on this thread once the native analysis has started (its threads
    do not need the interpreter): what the caller needs next, such as importing the store,
    is then done meanwhile. A thread of its own would hold the interpreter while it imports
    and delay the start of the analysis instead."""
    found = []
    for name, path in (("PRE", pre), ("POST", post)):
        try:
            found.append(os.stat(path))
        except FileNotFoundError:
            raise UserError(f"{name} capture {path}: no such file") from None
        except OSError as e:  # a name too long, a path through a file
            raise os_error(e, path, f"{name} capture") from None
    if os.path.samestat(*found):
        # Every packet would be matched with itself: a latency of 0 for all, said as figures.
        raise UserError(
            f"PRE and POST are the same file ({pre}"
            + ("" if str(pre) == str(post) else f" and {post}")
            + "): give the capture taken before the device and the one taken after it"
        )
    analyzer = _native.Analyzer(str(pre), str(post), options)
    outcome = _Outcome()

    def work() -> None:
        try:
            outcome.json = analyzer.run()
        except _native.LowtailError as e:
            outcome.error = e

    worker = threading.Thread(target=work, name="lowtail-analyze", daemon=True)
    try:
        # Started inside the try: a stop signal the moment the thread starts must still cancel
        # it, or it would go on writing the series while the interpreter exits (and leave it
        # half-written, as .NAME.partial).
        worker.start()
        if while_waiting is not None:
            while_waiting()
        while worker.is_alive():
            worker.join(0.1)
            if on_progress:
                on_progress(*analyzer.progress())
    except BaseException as e:  # never leave the native analysis running behind an exiting interpreter
        analyzer.cancel()
        if worker.ident is not None:  # started
            worker.join()
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted(CANCELLED) from None
        raise
    if outcome.error is not None:
        raise lowtail_error(outcome.error) from outcome.error
    doc: AnalysisDocument = json.loads(outcome.json or "")
    # Flows partition the packets: figures that do not add up would be a defect, said aloud.
    disagree = sums_disagree(doc)
    if disagree:
        doc["warnings"].append(f"the flows' figures do not add up to the pooled ones ({disagree}): a defect")
    with_spread(doc)
    summary = analyzer.take_summary()
    doc["summary"] = summary
    has_latencies = summary is not None and summary.count > 0
    doc["intervals"] = (
        bounds_document(Evidence([summary]), confidence=confidence, budgets=budgets)
        if summary and has_latencies
        else None
    )
    return doc


def measured_rate(a: Mapping[str, Any]) -> float | None:
    """The rate an analysis's PRE capture shows (packets over the time they span): a
    measurement, never a configuration."""
    dur = a.get("duration_ns") or 0
    sent: int = a["sent"]
    return (sent - 1) / (dur / 1e9) if dur > 0 and sent > 1 else None
