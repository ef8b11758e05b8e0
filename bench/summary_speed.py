"""What the honest intervals cost: pooling from the stored summaries against pooling from
the exported series (how `compare` pooled before the summaries), and `analyze` keeping its
summary against `analyze --no-series`, measured side by side in one run.

1. `lowtail compare analysis:1 analysis:2 analysis:3` over three repetitions of a synthetic
   pair, once in a database whose analyses keep their summaries (the default) and once in a
   database of the same captures analysed with `--no-series --export` (series only):
   wall and CPU time, peak memory. Targets (issue: one verdict a customer can sign): within
   3x the series-pooling time and under 1 GiB.
2. `lowtail analyze` of one pair with its summary against `--no-series`: target within 1.3x.

    .venv/bin/python bench/summary_speed.py [--packets 5000000] [--analyze-packets 20000000] [--rounds 3]

Every figure is the median of `--rounds` interleaved runs; the host is shared, so compare
the ratios printed on one line, not the times across runs of this script."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOWTAIL = [sys.executable, "-m", "lowtail"]
# `compare` of three 5M-packet repetitions, whole process (issue 34).
COMPARE_TARGET_S = 0.7


def timed(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + sys) and peak RSS in kB of this one child."""
    started = time.monotonic()
    child = subprocess.Popen([*LOWTAIL, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    if code not in (0, 3):
        err = child.stderr.read().decode() if child.stderr else ""
        sys.exit(f"lowtail {' '.join(args)}: exit {code}: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def lowtail(args: list[str], cwd: Path) -> None:
    done = subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"lowtail {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")


def pair(here: Path, name: str, packets: int, seed: int) -> tuple[str, str]:
    pre, post = f"{name}-pre.pcap.zst", f"{name}-post.pcap.zst"
    lowtail(
        [
            "synth",
            pre,
            post,
            "--packets",
            str(packets),
            "--rate",
            "1Mpps",
            "--seed",
            str(seed),
            "--compression",
            "zstd",
        ],
        here,
    )
    return pre, post


def median_row(samples: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    return (
        statistics.median(s[0] for s in samples),
        statistics.median(s[1] for s in samples),
        max(s[2] for s in samples),
    )


def compare_pooling(here: Path, packets: int, rounds: int) -> None:
    pairs = [pair(here, f"rep{i}", packets, seed=i + 1) for i in range(3)]
    for pre, post in pairs:
        lowtail(["analyze", pre, post, "--db", "summaries.duckdb", "--label", "rep", "--trim", "0"], here)
        series = f"{pre.split('-')[0]}.parquet"
        lowtail(
            [
                "analyze",
                pre,
                post,
                "--db",
                "series.duckdb",
                "--label",
                "rep",
                "--trim",
                "0",
                "--no-series",
                "--export",
                series,
            ],
            here,
        )
    selection = ["analysis:1", "analysis:2", "analysis:3"]
    by_summary, by_series = [], []
    for _ in range(rounds):
        by_series.append(timed(["compare", *selection, "--db", "series.duckdb", "--json"], here))
        by_summary.append(timed(["compare", *selection, "--db", "summaries.duckdb", "--json"], here))
    s_wall, s_cpu, s_rss = median_row(by_series)
    m_wall, m_cpu, m_rss = median_row(by_summary)
    print(f"compare of 3 x {packets:,} packets (median of {rounds}):")
    print(f"  {'pooled from':<22}{'wall':>9}{'CPU':>9}{'peak RSS':>12}")
    print(f"  {'exported series':<22}{s_wall:>8.2f}s{s_cpu:>8.2f}s{s_rss / 1024:>9.0f} MB")
    print(f"  {'stored summaries':<22}{m_wall:>8.2f}s{m_cpu:>8.2f}s{m_rss / 1024:>9.0f} MB")
    print(f"  ratio (summaries / series): wall {m_wall / s_wall:.2f}x, CPU {m_cpu / s_cpu:.2f}x (target: within 3x)")
    met = "yes" if m_wall <= COMPARE_TARGET_S else "NO"
    print(f"  compare from stored summaries: {m_wall:.2f} s wall (target: within {COMPARE_TARGET_S} s) met: {met}")


def analyze_keeping(here: Path, packets: int, rounds: int) -> None:
    pre, post = pair(here, "big", packets, seed=99)
    kept, dropped = [], []
    for i in range(rounds):
        dropped.append(timed(["analyze", pre, post, "--db", f"n{i}.duckdb", "--trim", "0", "--no-series"], here))
        kept.append(timed(["analyze", pre, post, "--db", f"k{i}.duckdb", "--trim", "0"], here))
    k_wall, k_cpu, k_rss = median_row(kept)
    d_wall, d_cpu, d_rss = median_row(dropped)
    print(f"analyze of {packets:,} packets (median of {rounds}):")
    print(f"  {'':<22}{'wall':>9}{'CPU':>9}{'peak RSS':>12}")
    print(f"  {'--no-series':<22}{d_wall:>8.2f}s{d_cpu:>8.2f}s{d_rss / 1024:>9.0f} MB")
    print(f"  {'summary kept':<22}{k_wall:>8.2f}s{k_cpu:>8.2f}s{k_rss / 1024:>9.0f} MB")
    print(f"  ratio (kept / --no-series): wall {k_wall / d_wall:.2f}x, CPU {k_cpu / d_cpu:.2f}x (target: within 1.3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=5_000_000, help="packets per repetition for compare")
    parser.add_argument("--analyze-packets", type=int, default=20_000_000, help="packets of the analyze pair")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lowtail-summary-speed-") as folder:
        here = Path(folder)
        compare_pooling(here, args.packets, args.rounds)
        analyze_keeping(here, args.analyze_packets, args.rounds)


if __name__ == "__main__":
    main()
