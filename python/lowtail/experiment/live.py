"""The running figures of a run in progress, as its programs write them: lowtail-gen's
and lowtail-cap's `--live-json` files get one JSON line a second each (frames sent and
the pacing error; frames captured, matched by id as they are written, lost, and an HDR
histogram's p99 and maximum latency). Nothing here analyses a capture: the exact figures
come from the analysis after the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LiveSample:
    """Where a run stands, from its programs' latest lines (None: not said yet)."""

    elapsed_s: float  # of traffic, by the generator's clock
    planned: int | None = None
    sent: int | None = None
    late_bursts: int | None = None
    pacing_error_max_ns: int | None = None  # the worst burst of the generator's last second
    received: int | None = None  # copies captured after the DuT
    lost: int | None = None  # frames with no copy a second after they left
    p99_ns: int | None = None  # running, over the run so far (warm-up included)
    max_ns: int | None = None


class JsonLinesTail:
    """The complete lines a program has appended to a file since the last read."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self) -> list[dict[str, Any]]:
        """New whole lines, parsed; a line still being written waits for the next read."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        docs = []
        for line in lines:
            try:
                docs.append(json.loads(line))
            except ValueError:
                continue  # a view, not a result: a damaged line is skipped
        return docs


class LiveFeed:
    """The generator's and the timestamper's running figures, merged."""

    def __init__(self, generator: Path, capture: Path):
        self.generator = JsonLinesTail(generator)
        self.capture = JsonLinesTail(capture)
        self.gen: dict[str, Any] = {}
        self.cap: dict[str, Any] = {}

    def poll(self) -> LiveSample | None:
        """The latest figures when either program wrote a line since the last poll."""
        gen, cap = self.generator.read(), self.capture.read()
        if not gen and not cap:
            return None
        self.gen = gen[-1] if gen else self.gen
        self.cap = cap[-1] if cap else self.cap
        latency = self.cap.get("latency_ns") or {}
        # Sent and received from one line of the timestamper, counted at one moment (the frames
        # it saw before the DuT and after it): the generator's own count is from its own second,
        # up to a second apart, which showed more received than sent.
        sent = self.cap.get("pre_frames", self.gen.get("sent"))
        return LiveSample(
            elapsed_s=self.gen.get("elapsed_ns", 0) / 1e9,
            planned=self.gen.get("planned"),
            sent=sent,
            late_bursts=self.gen.get("late_bursts"),
            pacing_error_max_ns=self.gen.get("interval_pacing_error_max_ns"),
            received=self.cap.get("post_frames"),
            lost=self.cap.get("lost"),
            p99_ns=latency.get("p99"),
            max_ns=latency.get("max"),
        )
