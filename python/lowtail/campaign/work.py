"""What a Dask worker runs for one pair: the native analyzer on paths it can read. It
returns the figures and where the matched series lies; it never touches the store."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lowtail.analyze.pair import AnalysisDocument, analyze_options, analyze_pair
from lowtail.core.errors import Failure, UserError

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalyzeOptionsDocument


@dataclass
class PairTask:
    """One pair to analyse: plain values, so that it pickles to any worker."""

    name: str
    pre: str
    post: str
    key: str
    options: AnalyzeOptionsDocument  # without an export path: `series` is this pair's
    series: str | None


@dataclass
class PairOutcome:
    """The figures (or the error) of one pair, and the worker that computed them."""

    key: str
    worker: str
    doc: AnalysisDocument | None = None
    error: str | None = None


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return socket.gethostname()


def analyze_task(task: PairTask) -> PairOutcome:
    """Analyse one pair where this worker runs. Bad captures are an outcome with an error
    (retrying them elsewhere would fail the same way); only a lost worker makes Dask retry."""
    worker = _worker_address()
    if task.series:
        directory = Path(task.series).parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # on another host than the one that checked it, or since then
            why = f"the series directory {directory}: cannot create it on {worker} ({e.strerror or e})"
            return PairOutcome(key=task.key, worker=worker, error=why)
    try:
        doc = analyze_pair(task.pre, task.post, analyze_options(**task.options, export=task.series or None))
    except (UserError, Failure) as e:
        return PairOutcome(key=task.key, worker=worker, error=str(e))
    return PairOutcome(key=task.key, worker=worker, doc=doc)
