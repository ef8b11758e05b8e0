"""Where the whole-process time of `lowtail analyze PRE POST --db NEW` goes: each part measured
as a process of its own, side by side in one run (interleaved rounds, best of --rounds), wall
and CPU (user + system, all threads), beside `cat` of the same files.

  * cat            — the page-cache read of both files (the speed gate's yardstick);
  * interpreter    — `python -c pass`: Python itself;
  * start-up       — the interpreter importing what `lowtail analyze` imports before it starts
                     the analysis (the command line and the analysis's modules);
  * store stack    — the interpreter importing the store and DuckDB and making a new database
                     (what the command does on its main thread while the analysis runs);
  * native         — the native analysis alone (`_native.Analyzer(PRE, POST).run()`: readers,
                     matching, figures), minus the interpreter and its import;
  * no-store       — `lowtail analyze PRE POST --no-store`: the whole command, nothing stored;
  * stored         — `lowtail analyze PRE POST --db NEW`: what the gate runs.

The parts overlap in the command (the store is opened while the native threads run), so they
do not add up to its wall time; their CPU does, nearly: on a 2-core machine the command cannot
take less wall time than half its CPU time, and a part that runs alone (start-up before the
analysis, storing after it) adds its wall time whole.

    .venv/bin/python bench/analyze_phases.py [--packets 20000000 | --pair PRE POST] [--rounds 3]
                                             [--workdir DIR] [--lowtail PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from regression import command_path, default_lowtail, synth

NATIVE = "from lowtail import _native; import sys; _native.Analyzer(sys.argv[1], sys.argv[2], None).run()"
NATIVE_IMPORT = "from lowtail import _native"
START_UP = "import lowtail.cli, lowtail.cli.analyze"
STORE = (
    "import sys, pathlib, lowtail.store.analyses; from lowtail.store import open_store; "
    "open_store(pathlib.Path(sys.argv[1])).close()"
)


@dataclass
class Timing:
    wall_s: float = float("inf")
    cpu_s: float = float("inf")

    def keep_best(self, wall_s: float, cpu_s: float) -> None:
        self.wall_s = min(self.wall_s, wall_s)
        self.cpu_s = min(self.cpu_s, cpu_s)


def run_once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (children's user + system) of one process; exits on failure."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode not in (0, 3):
        sys.exit(f"{' '.join(argv)}: exit {child.returncode}: {stderr.strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def python_of(lowtail: list[str]) -> str:
    """The interpreter a lowtail command runs in (its script's `#!` line)."""
    if len(lowtail) > 1:  # [python, -m, lowtail]
        return lowtail[0]
    first = Path(lowtail[0]).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def measure(lowtail: list[str], here: Path, files: list[str], rounds: int) -> dict[str, Timing]:
    python = python_of(lowtail)
    fresh = here / "phases.duckdb"
    contestants: dict[str, list[str]] = {
        "cat": ["cat", *files],
        "interpreter": [python, "-c", "pass"],
        "start-up": [python, "-c", START_UP],
        "store stack": [python, "-c", STORE, str(fresh)],
        "native import": [python, "-c", NATIVE_IMPORT],
        "native": [python, "-c", NATIVE, *files],
        "no-store": [*lowtail, "analyze", *files, "--no-store"],
        "stored": [*lowtail, "analyze", *files, "--db", str(fresh)],
    }
    best = {name: Timing() for name in contestants}
    for _ in range(rounds):
        for name, argv in contestants.items():
            for path in here.glob("phases.duckdb*"):
                path.unlink()
            best[name].keep_best(*run_once(argv, here))
    return best


def render(t: dict[str, Timing]) -> str:
    interpreter = t["interpreter"]

    def less(name: str, base: Timing) -> tuple[float, float]:
        return t[name].wall_s - base.wall_s, t[name].cpu_s - base.cpu_s

    rows = [
        ("cat of both files", t["cat"].wall_s, t["cat"].cpu_s),
        ("interpreter", interpreter.wall_s, interpreter.cpu_s),
        ("start-up imports", *less("start-up", interpreter)),
        ("store stack (new db)", *less("store stack", interpreter)),
        ("native analysis", *less("native", t["native import"])),
        ("analyze --no-store", t["no-store"].wall_s, t["no-store"].cpu_s),
        ("analyze --db NEW", t["stored"].wall_s, t["stored"].cpu_s),
        ("  storing (stored − no-store)", *less("stored", t["no-store"])),
    ]
    cat = t["cat"].wall_s
    lines = [f"  {'':32}{'wall':>9}{'× cat':>8}{'cpu':>9}"]
    for name, wall, cpu in rows:
        lines.append(f"  {name:32}{wall:>8.3f}s{wall / cat:>7.2f}×{cpu:>8.3f}s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packets", type=int, default=20_000_000, help="packets of the pair [20,000,000]")
    p.add_argument("--rounds", type=int, default=3, help="interleaved runs of each part (best taken)")
    p.add_argument("--workdir", type=Path, default=None, help="where the captures go [a new directory in /tmp]")
    p.add_argument(
        "--lowtail", type=command_path, default=None, help="the lowtail command [the one beside this Python]"
    )
    p.add_argument(
        "--pair", nargs=2, type=Path, metavar=("PRE", "POST"), help="measure this pair instead of a synthetic one"
    )
    a = p.parse_args(argv)
    lowtail = a.lowtail or default_lowtail()
    with tempfile.TemporaryDirectory(prefix="lowtail-phases-", dir=a.workdir) as folder:
        here = Path(folder)
        if a.pair:
            files = [str(path.resolve()) for path in a.pair]
            what = " and ".join(files)
        else:
            files = synth(lowtail, here, "pair", a.packets, seed=1)
            what = f"a {a.packets:,}-packet pair"
        run_once(["cat", *files], here)  # into the page cache
        timings = measure(lowtail, here, files, a.rounds)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"analyze phases: {what}, best of {a.rounds}; load average {load}")
    print(f"  lowtail: {' '.join(lowtail)}")
    print(render(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
