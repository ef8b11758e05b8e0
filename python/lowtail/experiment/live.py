"""The running figures of a run in progress, as its programs write them: lowtail-gen's
and lowtail-cap's `--live-json` files get one JSON line a second each (frames sent and
the pacing error; frames captured, matched by id as they are written, lost, and an HDR
histogram's p99 and maximum latency). Nothing here analyses a capture: the exact figures
come from the analysis after the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import msgspec


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


class GeneratorLine(msgspec.Struct):
    """A line of lowtail-gen's --live-json (crates/lowtail-net gen/main.rs, `LiveWriter`): the
    keys the live view shows (the others are left unread)."""

    elapsed_ns: int = 0
    planned: int | None = None
    sent: int | None = None
    late_bursts: int | None = None
    interval_pacing_error_max_ns: int | None = None


class LiveLatency(msgspec.Struct):
    """The running latency of lowtail-cap's line: its HDR histogram's p99 and maximum."""

    p99: int | None = None
    max: int | None = None


class CaptureLine(msgspec.Struct):
    """A line of lowtail-cap's --live-json (crates/lowtail-net cap/matcher.rs, `summary`)."""

    pre_frames: int | None = None
    post_frames: int | None = None
    lost: int | None = None
    latency_ns: LiveLatency | None = None


Line = TypeVar("Line", GeneratorLine, CaptureLine)


class JsonLinesTail(Generic[Line]):
    """The complete lines a program has appended to a file since the last read, each read
    as the program's line type."""

    def __init__(self, path: Path, line: type[Line]):
        self.path = path
        self.line: type[Line] = line
        self.offset = 0
        self.partial = b""

    def read(self) -> list[Line]:
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
                docs.append(msgspec.json.decode(line, type=self.line))
            except msgspec.DecodeError:
                continue  # a view, not a result: a damaged line (or one of another shape) is skipped
        return docs


class LiveFeed:
    """The generator's and the timestamper's running figures, merged."""

    def __init__(self, generator: Path, capture: Path):
        self.generator = JsonLinesTail(generator, GeneratorLine)
        self.capture = JsonLinesTail(capture, CaptureLine)
        self.gen = GeneratorLine()
        self.cap = CaptureLine()

    def poll(self) -> LiveSample | None:
        """The latest figures when either program wrote a line since the last poll."""
        gen, cap = self.generator.read(), self.capture.read()
        if not gen and not cap:
            return None
        self.gen = gen[-1] if gen else self.gen
        self.cap = cap[-1] if cap else self.cap
        latency = self.cap.latency_ns or LiveLatency()
        # Sent and received from one line of the timestamper, counted at one moment (the frames
        # it saw before the DuT and after it): the generator's own count is from its own second,
        # up to a second apart, which showed more received than sent.
        sent = self.cap.pre_frames if self.cap.pre_frames is not None else self.gen.sent
        return LiveSample(
            elapsed_s=self.gen.elapsed_ns / 1e9,
            planned=self.gen.planned,
            sent=sent,
            late_bursts=self.gen.late_bursts,
            pacing_error_max_ns=self.gen.interval_pacing_error_max_ns,
            received=self.cap.post_frames,
            lost=self.cap.lost,
            p99_ns=latency.p99,
            max_ns=latency.max,
        )
