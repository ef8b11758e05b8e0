"""What `lowtail run` shows while a sweep runs.

On a terminal, a live view: the run in progress with its programs' running figures
(frames sent and received, loss so far, the generator's pacing error, a running p99 and
maximum latency), the sweep's expected end, and below it the table of the runs stored so
far, a row added as each is stored. Off a terminal, one line per stored run on stderr (a
log that is not silent for minutes); with --json, nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from lowtail.cli._output import note, out
from lowtail.core.units import format_count, format_minutes, format_ns, format_rate

if TYPE_CHECKING:
    from lowtail.experiment.runner import StoredRun


class ViewMode(Enum):
    LIVE = "live"  # stdout is a terminal
    LOG = "log"  # one line per stored run on stderr
    QUIET = "quiet"  # --json


def view_mode(json_out: bool) -> ViewMode:
    """The live view on a terminal, a log line per run elsewhere, nothing with --json."""
    if json_out:
        return ViewMode.QUIET
    return ViewMode.LIVE if out.is_terminal else ViewMode.LOG


@dataclass(frozen=True)
class Stored:
    """A run as stored, for the view: the table of every run stored so far and one line
    about the run itself."""

    table: RenderableType
    line: str


# Before the first run ends, how long setting up and analysing a run is taken to add to
# its traffic time (measured here: 1.5-3 s for the kernel's and lowtail's forwarders).
_GUESSED_OVERHEAD_S = 2.5


class SweepView:
    """The sweep's state, updated by the runner's progress callbacks and drawn by rich."""

    def __init__(self, exp: Any, on_stored: Callable[[StoredRun], Stored]):
        self.exp = exp
        self.warmup_s = exp.warmup_ns / 1e9
        self.on_stored = on_stored
        self.index = 0
        self.total = 0
        self.planned: list[Any] = []
        self.combo: Any = None
        self.run_started = 0.0
        self.sample: Any = None
        self.overheads: list[float] = []  # each finished run's wall time beyond its traffic
        self.finished: RenderableType | None = None
        self.last_line = ""

    # -- the runner's callbacks ------------------------------------------------------------

    def plan(self, combos: list[Any]) -> None:
        """The runs the sweep is about to measure, in order."""
        self.planned = combos

    def start(self, i: int, n: int, combo: Any) -> None:
        """A run begins: its testbed is being built."""
        self.index, self.total, self.combo = i, n, combo
        self.run_started = time.monotonic()
        self.sample = None

    def live(self, sample: Any) -> None:
        """The programs' latest running figures."""
        self.sample = sample

    def done(self, i: int, n: int, combo: Any, run: StoredRun) -> None:
        """A run is stored: its row joins the table."""
        self.overheads.append(time.monotonic() - self.run_started - self.traffic_s(combo))
        stored = self.on_stored(run)
        self.finished, self.last_line = stored.table, stored.line
        self.combo, self.sample = None, None

    # -- drawing -----------------------------------------------------------------------------

    def traffic_s(self, combo: Any) -> float:
        """Seconds of traffic in a run of `combo`: warm-up and measured time (its own with
        duration = "auto")."""
        return float(self.exp.warmup_ns + self.exp.measured_ns(combo.traffic)) / 1e9

    def eta_s(self) -> float:
        """Seconds until the sweep ends: each run left, its traffic time plus the mean time
        setting up, draining and analysing took the runs so far."""
        overhead = sum(self.overheads) / len(self.overheads) if self.overheads else _GUESSED_OVERHEAD_S
        left = 0.0
        if self.combo is not None:
            left = max(0.0, self.traffic_s(self.combo) + overhead - (time.monotonic() - self.run_started))
        after = self.planned[len(self.overheads) + (1 if self.combo is not None else 0) :]
        return left + sum(self.traffic_s(c) + overhead for c in after)

    def headline(self) -> Text:
        """ "run 4 of 9 · fwd @ 50 kpps · traffic 3.2 of 6.2 s · sweep ends in about 1 min 10 s"."""
        c = self.combo
        text = Text(f"run {self.index + 1} of {self.total} · ", style="bold")
        text.append(f"{c.dut.name} @ {format_rate(c.traffic.rate_pps)}", style="bold cyan")
        s = self.sample
        if s is None:
            text.append(" · setting up the testbed")
        else:
            phase = " (warm-up)" if s.elapsed_s < self.warmup_s else ""
            text.append(f" · traffic {s.elapsed_s:.0f} of {self.traffic_s(c):.1f} s{phase}")
        text.append(f" · sweep ends in about {format_minutes(self.eta_s())}")
        return text

    def figures(self) -> Table:
        """The running figures of the run in progress, one row."""
        t = Table(box=None, pad_edge=False)
        for col in ("sent", "received", "lost so far", "pacing error (worst, last s)", "p99 so far", "max so far"):
            t.add_column(col, justify="right")
        s = self.sample
        if s is None:
            t.add_row(*["–"] * 6)
            return t
        sent = format_count(s.sent) + (f" of {format_count(s.planned)}" if s.planned else "")
        t.add_row(
            sent,
            format_count(s.received),
            format_count(s.lost),
            format_ns(s.pacing_error_max_ns),
            format_ns(s.p99_ns),
            format_ns(s.max_ns),
        )
        return t

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.combo is not None:
            parts += [self.headline(), self.figures()]
        if self.finished is not None:
            parts += [Text(""), self.finished]
        return Group(*parts)


@contextmanager
def sweep_progress(mode: ViewMode, exp: Any, on_stored: Callable[[StoredRun], Stored]) -> Iterator[Any]:
    """The runner's `Progress` for a sweep of `exp`, drawing the live view (LIVE), logging a
    line per stored run (LOG) or saying nothing (QUIET)."""
    from lowtail.experiment.runner import Progress

    if mode is ViewMode.QUIET:
        yield Progress()
        return
    view = SweepView(exp, on_stored)
    if mode is ViewMode.LOG:

        def logged(i: int, n: int, combo: Any, run: StoredRun) -> None:
            view.done(i, n, combo, run)
            note(f"[{i + 1}/{n}] {view.last_line}")

        yield Progress(on_plan=view.plan, on_start=view.start, on_live=view.live, on_done=logged)
        return
    from rich.live import Live

    # Transient: the final table, printed after, takes its place.
    with Live(view, console=out, refresh_per_second=4, transient=True, redirect_stderr=True):
        yield Progress(on_plan=view.plan, on_start=view.start, on_live=view.live, on_done=view.done)
