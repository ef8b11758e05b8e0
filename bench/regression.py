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

`--lowtail PATH` gates another build's command (default: the one beside this Python);
`--against PATH` measures a second build (e.g. the base tree's) in the same rounds,
interleaved, and prints its times and ratios beside: a before/after on one loaded host.
Only `--lowtail`'s ratios are gated.

    .venv/bin/python bench/regression.py [--quick] [--rounds 3] [--workdir DIR]
                                         [--lowtail PATH] [--against PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
    # The `--against` build's time in the same rounds (None: not asked for).
    against_s: float | None = None

    @property
    def ratio(self) -> float:
        return self.lowtail_s / self.cat_s

    @property
    def against_ratio(self) -> float | None:
        return None if self.against_s is None else self.against_s / self.cat_s

    @property
    def met(self) -> bool:
        return self.ratio <= self.limit


def default_lowtail() -> list[str]:
    beside = Path(sys.executable).parent / "lowtail"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "lowtail"]


@dataclass(frozen=True)
class Builds:
    """The command gated and, optionally, a second one measured beside it."""

    lowtail: list[str]
    against: list[str] | None = None

    def contestants(self, argv_of: Callable[[list[str]], list[str]]) -> dict[str, list[str]]:
        """Each build's command line (`argv_of` adds the arguments to its command)."""
        named = {"lowtail": argv_of(self.lowtail)}
        if self.against is not None:
            named["against"] = argv_of(self.against)
        return named


def timed(argv: list[str], cwd: Path) -> float:
    """Wall seconds of one whole process; exits with its error when it fails."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 3):
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return seconds


def synth(lowtail: list[str], here: Path, name: str, packets: int, seed: int) -> list[str]:
    pre, post = f"{name}-pre.pcap", f"{name}-post.pcap"
    argv = [*lowtail, "synth", pre, post, "--packets", str(packets), "--rate", f"{RATE}pps"]
    argv += ["--seed", str(seed), "--format", "pcap-ns"]
    for key, value in MODEL.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    timed(argv, here)
    return [pre, post]


def best_of(rounds: int, contestants: dict[str, list[str]], here: Path, fresh_db: bool = False) -> dict[str, float]:
    """Each contestant's best wall time over `rounds` interleaved runs (`fresh_db`: each
    analysis into a new database, as a first analysis is)."""
    best = dict.fromkeys(contestants, float("inf"))
    for _ in range(rounds):
        for name, argv in contestants.items():
            if fresh_db:
                for path in here.glob("gate.duckdb*"):
                    path.unlink()
            best[name] = min(best[name], timed(argv, here))
    return best


def analyze_row(builds: Builds, here: Path, name: str, packets: int, rounds: int, limit: float) -> Row:
    files = synth(builds.lowtail, here, name, packets, seed=1)
    cat = ["cat", *files]
    timed(cat, here)  # into the page cache
    analyses = builds.contestants(lambda lowtail: [*lowtail, "analyze", *files, "--db", "gate.duckdb"])
    t = best_of(rounds, {"cat": cat, **analyses}, here, fresh_db=True)
    for path in [*files, *here.glob("gate.duckdb*")]:
        (here / path).unlink()
    return Row(f"analyze {name}", t["lowtail"], t["cat"], limit, t.get("against"))


def compare_row(builds: Builds, here: Path, packets: int, rounds: int, limit: float) -> Row:
    files = []
    for seed in (1, 2, 3):
        pair = synth(builds.lowtail, here, f"rep{seed}", packets, seed)
        files += pair
        # Each build compares repetitions it stored itself.
        for who, lowtail in builds.contestants(lambda lowtail: lowtail).items():
            timed([*lowtail, "analyze", *pair, "--db", f"reps-{who}.duckdb", "--trim", "0"], here)
    cat = ["cat", *files]
    timed(cat, here)
    selection = ["analysis:1", "analysis:2", "analysis:3"]
    compares = {
        who: [*lowtail, "compare", *selection, "--db", f"reps-{who}.duckdb", "--json"]
        for who, lowtail in builds.contestants(lambda lowtail: lowtail).items()
    }
    t = best_of(rounds, {"cat": cat, **compares}, here)
    return Row("compare 3 × 5M", t["lowtail"], t["cat"], limit, t.get("against"))


def render(rows: list[Row]) -> str:
    against = any(r.against_s is not None for r in rows)
    head = f"  {'':18}{'lowtail':>10}{'cat':>10}{'ratio':>9}{'limit':>8}  met"
    lines = [head + (f"  {'against':>10}{'ratio':>9}" if against else "")]
    for r in rows:
        met = "yes" if r.met else "NO "
        line = f"  {r.name:18}{r.lowtail_s:>9.3f}s{r.cat_s:>9.3f}s{r.ratio:>8.2f}×{r.limit:>7.1f}×  {met}"
        if r.against_s is not None and r.against_ratio is not None:
            line += f"  {r.against_s:>9.3f}s{r.against_ratio:>8.2f}×"
        lines.append(line.rstrip())
    return "\n".join(lines)


def command_path(text: str) -> list[str]:
    """A lowtail command given on the command line: an executable file."""
    path = Path(text)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise argparse.ArgumentTypeError(f"{text}: not an executable file (a lowtail command, e.g. .venv/bin/lowtail)")
    return [str(path.resolve())]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the 2M pair alone, against the loaded-host limit")
    p.add_argument("--rounds", type=int, default=3, help="interleaved runs of each contestant (best taken)")
    p.add_argument("--workdir", type=Path, default=None, help="where the captures go [a new directory in /tmp]")
    p.add_argument(
        "--lowtail", type=command_path, default=None, help="the lowtail command gated [the one beside this Python]"
    )
    p.add_argument(
        "--against", type=command_path, default=None, help="another lowtail measured beside it (not gated), e.g. main's"
    )
    a = p.parse_args(argv)
    builds = Builds(a.lowtail or default_lowtail(), a.against)
    limits = QUICK_LIMITS if a.quick else FULL_LIMITS
    with tempfile.TemporaryDirectory(prefix="lowtail-gate-", dir=a.workdir) as folder:
        here = Path(folder)
        rows = [analyze_row(builds, here, "2M", 2_000_000, a.rounds, limits["analyze 2M"])]
        if not a.quick:
            rows.append(analyze_row(builds, here, "20M", 20_000_000, max(2, a.rounds - 1), limits["analyze 20M"]))
            rows.append(compare_row(builds, here, 5_000_000, a.rounds, limits["compare 3 × 5M"]))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"speed gate ({'quick' if a.quick else 'full'}): best of {a.rounds}, whole processes; load average {load}")
    print(f"  lowtail: {' '.join(builds.lowtail)}")
    if builds.against is not None:
        print(f"  against: {' '.join(builds.against)}")
    print(render(rows))
    failed = [r.name for r in rows if not r.met]
    if failed:
        print(f"FAILED: {', '.join(failed)} past the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
