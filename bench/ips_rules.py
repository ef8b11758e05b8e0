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

from lowtail.core.units import format_ns, format_rate

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
        f"[traffic]\nrates = {json.dumps([f'{r}pps' for r in rates])}\nudp_dst_port = 53\n\n{duts}"
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
    ap.add_argument("--keep", type=Path, help="keep the experiment's database and data in this directory")
    args = ap.parse_args()
    rule_sets = [r.strip() for r in args.rules.split(",") if r.strip()]
    rates = sorted(int(r) for r in args.rates.split(","))
    if os.geteuid() != 0:
        sys.exit("the IPS benchmark builds network namespaces: run it as root")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lowtail-bench-ips-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
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
                "why": (r.get("invalid_reasons") or [""])[0],
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
    lowest = {r["dut"]: r for r in runs if r["rate_pps"] == rates[0]}
    baseline = lowest.get("rules-none")
    models = []
    for rules in rule_sets:
        dut = f"rules-{rules}"
        entry: dict[str, Any] = {"rules": rules, "fell_behind_pps": _fell_behind(runs, dut)}
        app = lowest.get(dut)
        if rules != "none" and baseline is not None and app is not None and app["valid"]:
            # The studies' median (p50), and the least latency: the uncontended path, which
            # a shared host's queueing does not inflate.
            for statistic in ("p50", "min"):
                said = lowtail(
                    "model", "overload", "--baseline-run", str(baseline["run_id"]), "--app-run",
                    str(app["run_id"]), "--statistic", statistic, "--no-store", "--db", db, "--json",
                    cwd=work, refused_ok=True,
                )  # fmt: skip
                # Refused: the filter's figure was not above the forwarder's (no cost resolvable).
                overload = json.loads(said) if said else {}
                entry[statistic] = {k: overload.get(k) for k in ("t_cpu_ns", "r_max_pps")} | {"unresolved": not said}
        said = lowtail("model", "knee", "latest", "--dut", dut, "--db", db, "--json", cwd=work, refused_ok=True)
        if said is None:  # no valid run of this DuT: Suricata fell behind at every rate
            entry |= {"knee_pps": rates[0], "last_ok_pps": None, "all_invalid": True}
        else:
            knees = json.loads(said)
            knee = knees[0] if isinstance(knees, list) and knees else knees
            entry |= {"knee_pps": knee.get("knee_pps"), "last_ok_pps": knee.get("last_ok_pps")}
        models.append(entry)
    return models


def _fell_behind(runs: list[dict[str, Any]], dut: str) -> int | None:
    """The lowest rate at which Suricata's own counters say it fell behind (kernel drops, or
    fewer frames seen than sent): the knee as the IPS itself shows it."""
    for r in sorted((r for r in runs if r["dut"] == dut), key=lambda r: r["rate_pps"]):
        counted = (r.get("dut_stats") or {}).get("suricata") or {}
        if counted.get("kernel_drops") or counted.get("udp", 0) < (r.get("generator") or {}).get("sent", 0):
            return int(r["rate_pps"])
    return None


def _print(rows: list[dict[str, Any]], models: list[dict[str, Any]], load: float, duration: str) -> None:
    print(
        f"Suricata IPS: rule sets × rates ({duration} per run) · load average {load:.1f} on {os.cpu_count()} cores"
        + (" (busy machine: figures are noisy)" if load > 1.0 else "")
    )
    print(f"{'rules':>8} {'rate':>10} {'p50':>11} {'p99.9':>11} {'loss':>8}  note")
    for r in rows:
        loss = "–" if r["loss"] is None else f"{100 * r['loss']:.2f} %"
        note = (
            "" if r["valid"] else "invalid (Suricata fell behind)" if r["kernel_drops"] else f"invalid: {r['why'][:60]}"
        )
        p50 = "–" if r["p50_ns"] is None else format_ns(r["p50_ns"])
        p999 = "–" if r["p99_9_ns"] is None else format_ns(r["p99_9_ns"])
        print(f"{r['rules']:>8} {format_rate(r['rate_pps']):>10} {p50:>11} {p999:>11} {loss:>8}  {note}")
    print()
    print(
        f"{'rules':>8} {'t_CPU (p50)':>12} {'R_max (p50)':>12} {'t_CPU (min)':>12} {'R_max (min)':>12} "
        f"{'knee (model knee)':>18} {'fell behind at':>15}"
    )
    for m in models:
        cells = []
        for statistic in ("p50", "min"):
            fit = m.get(statistic) or {}
            if m["rules"] == "none":
                cells += ["baseline", "–"]
            elif not fit:
                cells += ["overloaded", "–"]
            elif fit.get("unresolved"):
                cells += ["≤ 0 (noise)", "–"]
            else:
                cells += [format_ns(fit["t_cpu_ns"]), format_rate(fit["r_max_pps"])]
        if m.get("all_invalid"):
            knee = f"≤ {format_rate(m['knee_pps'])} (all invalid)"
        elif m.get("knee_pps"):
            knee = format_rate(m["knee_pps"])
        else:
            knee = f"none ≤ {format_rate(m['last_ok_pps'])}" if m.get("last_ok_pps") else "–"
        behind = format_rate(m["fell_behind_pps"]) if m.get("fell_behind_pps") else "never"
        print(f"{m['rules']:>8} " + " ".join(f"{c:>12}" for c in cells) + f" {knee:>18} {behind:>15}")


if __name__ == "__main__":
    main()
