#!/usr/bin/env python3
"""The cost of an IPS's rules: Suricata inline over a sweep of rule sets × rates.

One experiment file, run by the real command (`lowtail run`) on lowtail's namespace testbed:
Suricata 7 as a plain forwarder (rules "none": the baseline, measured in the same run) and
as filters with Debian's rules ("default") and with 1,000 and 10,000 generated rules that
the test traffic meets (duts/suricata.py, `generate_rules`), at each rate. Per rule set and
rate: the median and p99.9 latency and the loss. Per filter, the overload model of NOMS
2020 (`lowtail model overload`): t_CPU = the filter's median minus the forwarder's at the
lowest rate, R_max = (1 s − d_Σ) / t_CPU (d_Σ = 0: no interrupt profile is taken here),
beside the knee `lowtail model knee` finds in the measured sweep (the first overloaded rate:
loss above 1 %, or a p99 ten times the lowest rate's).

The machine is shared: the DuT's core also serves the timestamper and whatever else runs,
so medians include queueing and figures are noisy; the load average is printed first.
Needs root (network namespaces). `--help` lists the settings; BENCH_IPS_* variables set them
for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lowtail.units import format_ns, format_rate

LOWTAIL = [sys.executable, "-m", "lowtail"]
RULE_SETS = ("none", "default", "1000", "10000")
RATES = (10_000, 20_000, 50_000, 100_000)


def _env_list(name: str, default: tuple[Any, ...]) -> list[str]:
    return (os.environ.get(name) or ",".join(map(str, default))).split(",")


def experiment_text(rule_sets: list[str], rates: list[int], duration: str) -> str:
    """One DuT per rule set (its own name: the knee is found per DuT), every rate."""
    duts = "".join(
        f'[[dut]]\nname = "rules-{r}"\nkind = "suricata"\nrules = {r if r.isdigit() else json.dumps(r)}\n\n'
        for r in rule_sets
    )
    return (
        f'[experiment]\nname = "ips-rules"\nduration = "{duration}"\nwarmup = "500ms"\ncalibrate = false\n\n'
        f"[traffic]\nrates = {rates}\nudp_dst_port = 53\n\n{duts}"
    )


def lowtail(*args: str, cwd: Path, refused_ok: bool = False) -> str | None:
    """The command's standard output; None when it refused its input (exit 2) and `refused_ok`."""
    done = subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if refused_ok and done.returncode == 2:
        return None
    if done.returncode not in (0, 3):
        sys.exit(f"lowtail {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rules", default=",".join(_env_list("BENCH_IPS_RULES", RULE_SETS)), help="rule sets [none,default,1000,10000]"
    )
    ap.add_argument(
        "--rates", default=",".join(_env_list("BENCH_IPS_RATES", RATES)), help="rates, pps [10000,20000,50000,100000]"
    )
    ap.add_argument("--duration", default=os.environ.get("BENCH_IPS_DURATION", "2s"), help="measured time per run [2s]")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = ap.parse_args()
    rule_sets = [r.strip() for r in args.rules.split(",") if r.strip()]
    rates = sorted(int(r) for r in args.rates.split(","))
    if os.geteuid() != 0:
        sys.exit("the IPS benchmark builds network namespaces: run it as root")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lowtail-bench-ips-") as tmp:
        work = Path(tmp)
        (work / "ips.toml").write_text(experiment_text(rule_sets, rates, args.duration))
        db = str(work / "ips.duckdb")
        runs = json.loads(lowtail("run", "ips.toml", "--db", db, "--json", cwd=work) or "[]")
        rows = _rows(runs)
        models = _models(runs, rule_sets, rates, db, work)
    if args.json:
        print(json.dumps({"load_average": load, "runs": rows, "models": models}, indent=1))
        return
    _print(rows, models, load, args.duration)


def _rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        lat = r.get("latency_ns") or {}
        counted = (r.get("dut_stats") or {}).get("suricata") or {}
        rows.append(
            {
                "rules": r["dut"].removeprefix("rules-"),
                "run_id": r["run_id"],
                "rate_pps": r["rate_pps"],
                "p50_ns": lat.get("p50"),
                "p99_9_ns": lat.get("p99_9"),
                "loss": r["lost"] / r["sent"] if r["sent"] else None,
                "valid": r["valid"],
                "kernel_drops": counted.get("kernel_drops"),
                "rules_loaded": counted.get("rules_loaded"),
                "start_s": (r.get("dut_stats") or {}).get("start_s"),
            }
        )
    return rows


def _models(
    runs: list[dict[str, Any]], rule_sets: list[str], rates: list[int], db: str, work: Path
) -> list[dict[str, Any]]:
    """Per filter: the overload model from the lowest rate's medians, then the knee of its sweep."""
    lowest = {r["dut"]: r["run_id"] for r in runs if r["rate_pps"] == rates[0]}
    baseline = lowest.get("rules-none")
    models = []
    for rules in rule_sets:
        dut = f"rules-{rules}"
        entry: dict[str, Any] = {"rules": rules}
        if rules != "none" and baseline is not None and dut in lowest:
            said = lowtail(
                "model", "overload", "--baseline-run", str(baseline), "--app-run", str(lowest[dut]),
                "--db", db, "--json", cwd=work, refused_ok=True,
            )  # fmt: skip
            # Refused: the filter's median was not above the forwarder's (no cost resolvable).
            overload = json.loads(said) if said else {"t_cpu_ns": None, "r_max_pps": None, "unresolved": True}
            entry |= {k: overload.get(k) for k in ("t_cpu_ns", "r_max_pps", "unresolved")}
        knees = json.loads(lowtail("model", "knee", "latest", "--dut", dut, "--db", db, "--json", cwd=work) or "[]")
        knee = knees[0] if isinstance(knees, list) and knees else knees
        entry |= {"knee_pps": knee.get("knee_pps"), "last_ok_pps": knee.get("last_ok_pps")}
        models.append(entry)
    return models


def _print(rows: list[dict[str, Any]], models: list[dict[str, Any]], load: float, duration: str) -> None:
    print(
        f"Suricata IPS: rule sets × rates ({duration} per run) · load average {load:.1f} on {os.cpu_count()} cores"
        + (" (busy machine: figures are noisy)" if load > 1.0 else "")
    )
    print(f"{'rules':>8} {'rate':>10} {'p50':>11} {'p99.9':>11} {'loss':>8}  note")
    for r in rows:
        loss = "–" if r["loss"] is None else f"{100 * r['loss']:.2f} %"
        note = "" if r["valid"] else "invalid (Suricata fell behind)" if r["kernel_drops"] else "invalid"
        p50 = "–" if r["p50_ns"] is None else format_ns(r["p50_ns"])
        p999 = "–" if r["p99_9_ns"] is None else format_ns(r["p99_9_ns"])
        print(f"{r['rules']:>8} {format_rate(r['rate_pps']):>10} {p50:>11} {p999:>11} {loss:>8}  {note}")
    print()
    print(f"{'rules':>8} {'t_CPU':>11} {'R_max':>12} {'knee (measured)':>16}")
    for m in models:
        if m["rules"] == "none":
            t_cpu = "baseline"
        elif m.get("t_cpu_ns") is None:
            t_cpu = "≤ 0 (noise)" if m.get("unresolved") else "–"
        else:
            t_cpu = format_ns(m["t_cpu_ns"])
        r_max = "–" if not m.get("r_max_pps") else format_rate(m["r_max_pps"])
        if m.get("knee_pps"):
            knee = format_rate(m["knee_pps"])
        else:
            knee = f"none ≤ {format_rate(m['last_ok_pps'])}" if m.get("last_ok_pps") else "–"
        print(f"{m['rules']:>8} {t_cpu:>11} {r_max:>12} {knee:>16}")


if __name__ == "__main__":
    main()
