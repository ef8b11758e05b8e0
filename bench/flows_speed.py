"""What telling flows apart costs `lowtail analyze`, side by side in one run: the same pair
analysed with `--flow-key none` (no per-packet flow work at all) and with the default
`5tuple`, for a pair of one flow (the headline case: per-flow work must not slow it
measurably) and a pair of 64 flows (every packet a hash lookup and its flow's own exact
histogram). Whole processes, interleaved, best of `--rounds`; the ratios are the result.

    .venv/bin/python bench/flows_speed.py [--packets 2000000] [--rounds 5]

Targets: one flow within 1.05× of `--flow-key none`; 64 flows within 1.5×."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOWTAIL = [sys.executable, "-m", "lowtail"]
TARGETS = {1: 1.05, 64: 1.5}


def best_of(rounds: int, commands: dict[str, list[str]], cwd: Path) -> dict[str, float]:
    """The least wall time of each command over `rounds` interleaved repetitions."""
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(rounds):
        for name, args in commands.items():
            started = time.monotonic()
            subprocess.run([*LOWTAIL, *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL)
            best[name] = min(best[name], time.monotonic() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="lowtail-flows-bench-") as tmp:
        work = Path(tmp)
        for flows in TARGETS:
            pre, post = work / f"f{flows}-pre.pcap", work / f"f{flows}-post.pcap"
            subprocess.run(
                [*LOWTAIL, "synth", pre, post, "--packets", str(args.packets), "--rate", "100kpps",
                 "--set", f"flows={flows}", "--set", "loss=0.001"],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            common = ["analyze", str(pre), str(post), "--no-store"]
            best = best_of(args.rounds, {"none": [*common, "--flow-key", "none"], "5tuple": [*common]}, work)
            results[flows] = {**best, "ratio": best["5tuple"] / best["none"], "target": TARGETS[flows]}
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for flows, r in results.items():
            verdict = "ok" if r["ratio"] <= r["target"] else "over target"
            print(
                f"{flows:>3} flow(s): --flow-key none {r['none']:.3f} s, 5tuple {r['5tuple']:.3f} s, "
                f"ratio {r['ratio']:.3f} (target ≤ {r['target']}) {verdict}"
            )
    return 0 if all(r["ratio"] <= r["target"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
