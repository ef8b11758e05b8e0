"""The speed gate: `lowtail analyze` and `lowtail compare` against `cat` of the same files,
measured side by side in one run, as ratios; exits 1 when a ratio is past its limit.

Three measurements (whole processes, interleaved, best of --rounds each):

  * a 2M-packet pair (the benchmark's pair: 100 kpps, pcap-ns, bench/analyze_vs_postgres.py's
    model): `lowtail analyze PRE POST --db TMP` (default options, stored) against
    `cat PRE POST > /dev/null` with both files in the page cache;
  * a 20M-packet pair, the same way;
  * `lowtail compare analysis:1 analysis:2 analysis:3` over three stored 5M-packet
    repetitions against `cat` of their six files.

A ratio compares work on one host at one moment, so it holds on a loaded machine better than
a time does; the limits are those a quiet 2-core machine meets with room (docs: issue 34's
targets are 2× the read for the 20M pair and 0.7 s for the compare). `--quick` measures the 2M
pair alone against a wide limit that holds on a loaded host: what `make test` runs
(tests/bench/test_regression.py), so that a regression of 3× the analysis time cannot land.

    .venv/bin/python bench/regression.py [--quick] [--rounds 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The device every speed figure is measured on (bench/analyze_vs_postgres.py's too): a little
# of everything, so that every figure is non-trivial; at 100 kpps.
MODEL = {
    "loss": 0.001,
    "loss_burst": 3,
    "duplicate": 0.0005,
    "reorder": 0.0002,
    "irq_period_ns": 4_000_000,
    "irq_durations_ns": [5500, 8200],
    "spike_probability": 0.00001,
    "spike_ns": 150_000,
}
RATE = 100_000

# Limits on lowtail's time over cat's. The full gate's are a quiet 2-core machine's targets:
# the 2M pair's is start-up-bound (cat of it takes ~40 ms, Python's start-up alone ~60 ms);
# the 20M pair is the judged 2× the read.
FULL_LIMITS = {"analyze 2M": 8.0, "analyze 20M": 2.0, "compare 3 × 5M": 2.5}
# The quick gate's: wide, so that it holds on a loaded host (14–24× measured here with three
# other engineers' builds running, load average 4–6 on 2 cores), and still fails an analysis
# three times as slow (45–50× there).
QUICK_LIMITS = {"analyze 2M": 30.0}


@dataclass
class Row:
    name: str
    lowtail_s: float
    cat_s: float
    limit: float

    @property
    def ratio(self) -> float:
        return self.lowtail_s / self.cat_s

    @property
    def met(self) -> bool:
        return self.ratio <= self.limit


def lowtail_command() -> list[str]:
    beside = Path(sys.executable).parent / "lowtail"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "lowtail"]


def timed(argv: list[str], cwd: Path) -> float:
    """Wall seconds of one whole process; exits with its error when it fails."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 3):
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return seconds


def synth(here: Path, name: str, packets: int, seed: int) -> list[str]:
    pre, post = f"{name}-pre.pcap", f"{name}-post.pcap"
    argv = [*lowtail_command(), "synth", pre, post, "--packets", str(packets), "--rate", f"{RATE}pps"]
    argv += ["--seed", str(seed), "--format", "pcap-ns"]
    for key, value in MODEL.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    timed(argv, here)
    return [pre, post]


def best_of(
    rounds: int, contestants: dict[str, list[str]], here: Path, before: list[str] | None = None
) -> dict[str, float]:
    """Each contestant's best wall time over `rounds` interleaved runs (`before`, untimed,
    ahead of each round: a fresh database)."""
    best = dict.fromkeys(contestants, float("inf"))
    for _ in range(rounds):
        for name, argv in contestants.items():
            if before and name == "lowtail":
                for path in here.glob("gate.duckdb*"):
                    path.unlink()
            best[name] = min(best[name], timed(argv, here))
    return best


def analyze_row(here: Path, name: str, packets: int, rounds: int, limit: float) -> Row:
    files = synth(here, name, packets, seed=1)
    cat = ["cat", *files]
    timed(cat, here)  # into the page cache
    t = best_of(
        rounds, {"cat": cat, "lowtail": [*lowtail_command(), "analyze", *files, "--db", "gate.duckdb"]}, here, []
    )
    for path in [*files, *here.glob("gate.duckdb*")]:
        (here / path).unlink()
    return Row(f"analyze {name}", t["lowtail"], t["cat"], limit)


def compare_row(here: Path, packets: int, rounds: int, limit: float) -> Row:
    files = []
    for seed in (1, 2, 3):
        pair = synth(here, f"rep{seed}", packets, seed)
        files += pair
        timed([*lowtail_command(), "analyze", *pair, "--db", "reps.duckdb", "--trim", "0"], here)
    cat = ["cat", *files]
    timed(cat, here)
    selection = ["analysis:1", "analysis:2", "analysis:3"]
    compare = [*lowtail_command(), "compare", *selection, "--db", "reps.duckdb", "--json"]
    t = best_of(rounds, {"cat": cat, "lowtail": compare}, here)
    return Row("compare 3 × 5M", t["lowtail"], t["cat"], limit)


def render(rows: list[Row]) -> str:
    lines = [f"  {'':18}{'lowtail':>10}{'cat':>10}{'ratio':>9}{'limit':>8}  met"]
    for r in rows:
        met = "yes" if r.met else "NO"
        lines.append(f"  {r.name:18}{r.lowtail_s:>9.3f}s{r.cat_s:>9.3f}s{r.ratio:>8.2f}×{r.limit:>7.1f}×  {met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the 2M pair alone, against the loaded-host limit")
    p.add_argument("--rounds", type=int, default=3, help="interleaved runs of each contestant (best taken)")
    p.add_argument("--workdir", type=Path, default=None, help="where the captures go [a new directory in /tmp]")
    a = p.parse_args(argv)
    limits = QUICK_LIMITS if a.quick else FULL_LIMITS
    with tempfile.TemporaryDirectory(prefix="lowtail-gate-", dir=a.workdir) as folder:
        here = Path(folder)
        rows = [analyze_row(here, "2M", 2_000_000, a.rounds, limits["analyze 2M"])]
        if not a.quick:
            rows.append(analyze_row(here, "20M", 20_000_000, max(2, a.rounds - 1), limits["analyze 20M"]))
            rows.append(compare_row(here, 5_000_000, a.rounds, limits["compare 3 × 5M"]))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"speed gate ({'quick' if a.quick else 'full'}): best of {a.rounds}, whole processes; load average {load}")
    print(render(rows))
    failed = [r.name for r in rows if not r.met]
    if failed:
        print(f"FAILED: {', '.join(failed)} past the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
