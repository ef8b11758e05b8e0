"""The live view's running figures as the programs write them: lowtail-gen's and
lowtail-cap's --live-json lines, each program on its own second."""

from __future__ import annotations

import json
from pathlib import Path

from lowtail.experiment.live import LiveFeed


def _append(path: Path, doc: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(doc) + "\n")


def test_sent_and_received_are_counted_at_one_moment(tmp_path: Path) -> None:
    """The generator's line from 0.8 s, the timestamper's from 1.0 s: sent and received both
    come from the timestamper's line, so received is never above sent (a user saw
    "80,001 of 180,000 sent, 99,577 received")."""
    gen, cap = tmp_path / "gen.jsonl", tmp_path / "cap.jsonl"
    feed = LiveFeed(gen, cap)
    _append(gen, {"elapsed_ns": 800_000_000, "planned": 180_000, "sent": 80_001, "late_bursts": 0})
    first = feed.poll()
    assert first is not None and first.sent == 80_001 and first.received is None  # the timestamper has not said
    _append(cap, {"elapsed_ns": 1_000_000_000, "pre_frames": 99_601, "post_frames": 99_577, "lost": 0})
    sample = feed.poll()
    assert sample is not None and (sample.sent, sample.received, sample.planned) == (99_601, 99_577, 180_000)
    assert sample.received <= sample.sent


def test_a_line_not_of_its_program_s_shape_is_skipped(tmp_path: Path) -> None:
    """Each line is read as its program's line type: one that is not JSON, not an object or
    has a count that is no number is skipped (the view goes on with the next), never a crash
    of the run it watches."""
    gen, cap = tmp_path / "gen.jsonl", tmp_path / "cap.jsonl"
    feed = LiveFeed(gen, cap)
    with gen.open("a") as f:
        f.write('{"elapsed_ns": 1000000000, "sent": "many"}\n[1, 2]\nnot json\n')
    assert feed.poll() is None
    _append(gen, {"elapsed_ns": 2_000_000_000, "sent": 200})
    _append(cap, {"pre_frames": 190, "post_frames": 180, "latency_ns": {"samples": 180, "p99": 900, "max": 1200}})
    sample = feed.poll()
    assert sample is not None
    assert (sample.elapsed_s, sample.sent, sample.received, sample.p99_ns, sample.max_ns) == (2.0, 190, 180, 900, 1200)
