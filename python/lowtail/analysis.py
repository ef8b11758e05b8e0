"""Analyse a PRE/POST capture pair with the native pipeline.

The work runs in a worker thread (the native code releases the GIL), so the main
thread stays free to draw a progress bar and to turn Ctrl-C into a clean cancel.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail.errors import Failure, Interrupted, UserError


@dataclass
class AnalyzeOptions:
    """How to find ids and what to compute. `None` means the native default."""

    id_offset: int | None = None
    id_width: int | None = None
    id_endian: str | None = None
    id_format: str | None = None
    udp_port: int | None = None
    moonsniff_records: bool = False
    trim_ns: int = 1_000_000_000
    horizon_ns: int = 10_000_000_000
    worst: int = 5000
    histogram_bins: int = 100
    export: str | None = None

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})


ProgressCallback = Callable[[int, int], None]


def analyze_pair(
    pre: str | Path,
    post: str | Path,
    options: AnalyzeOptions | None = None,
    on_progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Run one analysis; returns the figures (see `lowtail analyze --json`)."""
    options = options or AnalyzeOptions()
    for name, path in (("PRE", pre), ("POST", post)):
        if not Path(path).exists():
            raise UserError(f"{name} capture {path}: no such file")
    try:
        analyzer = _native.Analyzer(str(pre), str(post), options.to_json())
    except _native.LowtailError as e:
        raise UserError(str(e)) from None
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["json"] = analyzer.run()
        except _native.LowtailError as e:
            outcome["error"] = str(e)

    worker = threading.Thread(target=work, name="lowtail-analyze", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
            if on_progress:
                on_progress(*analyzer.progress())
    except KeyboardInterrupt:
        analyzer.cancel()
        worker.join()
        raise Interrupted("interrupted: analysis cancelled, nothing stored") from None
    if "error" in outcome:
        message = outcome["error"]
        raise (Failure if "carries a packet id" in message or "trim removes" in message else UserError)(message)
    return json.loads(outcome["json"])
