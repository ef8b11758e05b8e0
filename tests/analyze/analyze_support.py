"""Shared helpers of the `lowtail analyze` tests: synthetic pairs with their ground
truth, the figures that truth implies (computed here with numpy, independently of the
Rust pipeline), and the command line run as a user runs it."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
import traceback
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.cli import main

# (key, exact quantile): a percentile that decides a rank is never a float
PERCENTILES = [
    ("p50", Fraction("0.5")),
    ("p90", Fraction("0.9")),
    ("p99", Fraction("0.99")),
    ("p99_9", Fraction("0.999")),
    ("p99_99", Fraction("0.9999")),
    ("p99_999", Fraction("0.99999")),
    ("p99_9999", Fraction("0.999999")),
]
COUNTS = ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative")


@dataclass
class Pair:
    pre: Path
    post: Path
    truth: Path
    summary: dict[str, Any]
    spec: dict[str, Any]


def synth(directory: Path, name: str = "pair", suffix: str = ".pcap", **spec: Any) -> Pair:
    """A synthetic capture pair with its per-packet truth (lowtail's model device)."""
    pre, post, truth = (
        directory / f"{name}-pre{suffix}",
        directory / f"{name}-post{suffix}",
        directory / f"{name}-truth.parquet",
    )
    summary = json.loads(_native.synth_pair(str(pre), str(post), json.dumps(spec), str(truth)))
    return Pair(pre, post, truth, summary, spec)


def nearest_rank(sorted_values: np.ndarray, q: Fraction) -> int:
    """percentile_disc: the value at 1-based rank ⌈q·n⌉ (at least 1), in exact arithmetic."""
    n = len(sorted_values)
    rank = min(max(math.ceil(q * n), 1), n)
    return int(sorted_values[rank - 1])


def latency_summary(latencies: np.ndarray) -> dict[str, Any] | None:
    if len(latencies) == 0:
        return None
    s = np.sort(latencies)
    out: dict[str, Any] = {"min": int(s[0]), "max": int(s[-1]), "mean": float(s.mean())}
    for key, q in PERCENTILES:
        out[key] = nearest_rank(s, q)
    return out


def rfc4737_reordered(pre_positions_in_arrival_order: np.ndarray) -> int:
    """Arrivals whose sequence number is below 1 + the highest seen before them."""
    s = np.asarray(pre_positions_in_arrival_order, dtype=np.int64)
    if len(s) < 2:
        return 0
    highest_before = np.maximum.accumulate(s)[:-1]
    return int(np.count_nonzero(s[1:] < highest_before))


@dataclass
class Expected:
    counts: dict[str, int]
    latency: dict[str, Any] | None
    series: dict[str, np.ndarray]  # the matched series in PRE order (what --export writes)
    start_ns: int


def expected_from_truth(pair: Pair, trim_ns: int = 1_000_000_000, lost_ids: set[int] = frozenset()) -> Expected:
    """Every figure `lowtail analyze` must report, from the generator's ground truth.

    lost_ids: packets the truth says arrived but whose POST record was destroyed
    (a truncated capture)."""
    t = pq.read_table(pair.truth)
    ids = t.column("id").to_numpy()
    pre = t.column("pre_ts_ns").to_numpy()
    post_col = t.column("post_ts_ns")
    arrived = ~np.asarray(post_col.is_null().to_numpy(zero_copy_only=False))
    post = post_col.fill_null(0).to_numpy()
    copies = t.column("copies").to_numpy().astype(np.int64)
    if lost_ids:
        gone = np.isin(ids, np.array(sorted(lost_ids), dtype=ids.dtype))
        arrived &= ~gone
        copies = np.where(gone, 0, copies)
    start = int(pre[0])
    kept = pre >= start + trim_ns
    received = kept & arrived
    negative = received & (post < pre)
    good = received & ~negative
    seq = np.arange(len(ids))
    # arrival order in POST: by timestamp, ties in the order the generator wrote them (by sequence)
    r_idx = seq[received]
    order = np.lexsort((r_idx, post[received]))
    counts = {
        "sent": int(kept.sum()),
        "received": int(received.sum()),
        "lost": int((kept & ~arrived).sum()),
        "duplicates": int((copies[received] - 1).sum()),
        "reordered": rfc4737_reordered(r_idx[order]),
        "foreign": int(pair.summary["foreign_pre"] + pair.summary["foreign_post"]),
        "negative": int(negative.sum()),
    }
    lat = (post - pre)[good]
    flow = t.column("flow").to_numpy()  # round robin: the order flows first appear in PRE
    series = {"id": ids[good], "pre_ts_ns": pre[good], "post_ts_ns": post[good], "latency_ns": lat, "flow": flow[good]}
    return Expected(counts, latency_summary(lat), series, start)


def assert_figures(doc: dict[str, Any], want: Expected) -> None:
    """Counts and latency figures of an analysis document equal the expected ones."""
    got_counts = {k: doc[k] for k in COUNTS}
    assert got_counts == want.counts
    if want.latency is None:
        assert doc["latency_ns"] is None
        return
    lat = doc["latency_ns"]
    for key in ("min", "max") + tuple(k for k, _ in PERCENTILES):
        assert lat[key] == want.latency[key], key
        assert isinstance(lat[key], int), key
    assert lat["mean"] == pytest.approx(want.latency["mean"], rel=1e-9, abs=1e-6)


def analyze(pre: Path, post: Path, **options: Any) -> dict[str, Any]:
    """The analysis API (the same document `lowtail analyze --json` prints)."""
    return analyze_pair(pre, post, AnalyzeOptions(**options))


def run_cli(*args: Any, cwd: Path | None = None, process: bool = False) -> subprocess.CompletedProcess:
    """`lowtail ARGS...`: through `lowtail.cli.main` (the entry point, with its error
    handling and exit codes) in this process, or as a separate process with
    process=True. In-process runs save the interpreter start-up, seconds per call."""
    argv = [str(a) for a in args]
    if process:
        return subprocess.run(
            [sys.executable, "-m", "lowtail", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
        )
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.chdir(cwd or Path.cwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # what would be a traceback in a real run
            traceback.print_exc()
            code = 99
    return subprocess.CompletedProcess(["lowtail", *argv], code, out.getvalue(), err.getvalue())


def assert_clean_failure(proc: subprocess.CompletedProcess, exit_code: int, *needles: str) -> str:
    """A user-facing failure: the given exit code, one line on stderr saying why, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == exit_code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle.lower() in lines[0].lower(), (needle, lines[0])
    return lines[0]
