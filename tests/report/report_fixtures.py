"""Stored data and documents the report tests draw: an analysis shorter than a second, an
experiment (wire, a passing DuT, a lossy one, an invalid one, a rate sweep with its knee,
interrupt samples), and a comparison document shaped as `lowtail compare --json` with
per-configuration curves, built from simulated repetitions."""

from __future__ import annotations

import json
import sys
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np

from lowtail import _native, percentiles
from lowtail.analysis import AnalyzeOptions, analyze_pair
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.store.analyses import save_analysis
from lowtail.store.host import save_run_interrupts
from lowtail.store.models import save_model
from lowtail.verdict import Verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiment"))
from test_store_and_report import run_row  # noqa: E402

Sample = namedtuple("Sample", "t_ns cpu kind delta interval_ns")


def synthetic(tmp_path: Path, name: str, latency_ns: int, packets: int = 5_000, rate: float = 10_000.0, **extra):
    """A synthetic capture pair analysed (its series exported), with the options used."""
    pre, post = tmp_path / f"{name}-pre.pcap", tmp_path / f"{name}-post.pcap"
    spec = {"packets": packets, "rate_pps": rate, "base_latency_ns": latency_ns, "jitter_ns": latency_ns // 4}
    _native.synth_pair(str(pre), str(post), json.dumps({**spec, "seed": 7, **extra}))
    options = AnalyzeOptions(trim_ns=0, export=str(tmp_path / f"{name}.parquet"))
    return analyze_pair(pre, post, options), options.to_dict()


def short_analysis(tmp_path: Path) -> tuple[Path, int]:
    """A database with one analysis of 0.4 s of traffic (one partial second of rates)."""
    db = tmp_path / "analysis.duckdb"
    doc, opts = synthetic(tmp_path, "short", 20_000, packets=4_000)
    with open_store(db) as store:
        aid = save_analysis(store, doc, opts, label="short")
    return db, aid


def experiment(tmp_path: Path) -> tuple[Path, int]:
    """An experiment with a wire run, a DuT swept over three rates (knee stored), a lossy
    DuT and an invalid run; interrupt samples on one run."""
    db = tmp_path / "experiment.duckdb"
    with open_store(db) as store:
        eid = runstore.create_experiment(
            store,
            "browser",
            {"verdict": {"budget": "200us", "percentile": 99.9}},
            "h-browser",
            {"kernel": "k", "core_plan": {"generator": 1}, "command": ["lowtail", "run"]},
            str(tmp_path),
        )
        wire, opts = synthetic(tmp_path, "wire", 3_000)
        runstore.save_run(store, run_row(eid, "wire", "wire"), wire, opts)
        fwd_runs = []
        for rate, latency in ((10_000, 30_000), (20_000, 45_000), (40_000, 400_000)):
            doc, _ = synthetic(tmp_path, f"fwd{rate}", latency, rate=float(rate))
            row = run_row(eid, "fwd", "lowtail-fwd", rate=rate)
            row["dut_config"] = {"batch": 1}
            fwd_runs.append(runstore.save_run(store, row, doc, opts))
        lossy, _ = synthetic(tmp_path, "lossy", 40_000, loss=0.01)
        runstore.save_run(store, run_row(eid, "lossy", "custom"), lossy, opts)
        broken, _ = synthetic(tmp_path, "broken", 40_000)
        runstore.save_run(store, run_row(eid, "broken", "bridge", valid=False), broken, opts)
        knee = {
            "dut": "fwd",
            "knee_pps": 40_000,
            "r_max_pps": 35_000,
            "rates": [
                {
                    "rate_pps": r["rate_pps"],
                    "loss": 0.0,
                    "overloaded": r["rate_pps"] == 40_000,
                    "reasons": ["the median grew 10×"] if r["rate_pps"] == 40_000 else [],
                    **{f"{k}_ns": r["figures"]["latency_ns"][k] for k in ("p50", "p99", "p99_999", "max")},
                }
                for r in runstore.runs(store, eid)
                if r["dut_name"] == "fwd"
            ],
        }
        save_model(store, "knee", {"experiment": eid}, knee, experiment_id=eid, dut_name="fwd")
        run = runstore.run_figures(store, fwd_runs[0])
        start = run["start_ts_ns"]
        samples = [
            Sample(start + (i + 1) * 100_000_000, 0, kind, delta, 100_000_000)
            for i in range(5)
            for kind, delta in (("LOC", 25), ("RES", 1 + i % 2), ("NET_RX", 3 * i))
        ]
        save_run_interrupts(store, fwd_runs[0], samples)
    return db, eid


# The percentiles of the fixture's curves: four per halving of 1 − p, down to 1/20,000.
CURVE_PS = sorted({1 - 0.5 ** (k / 4) for k in range(0, 4 * 14)})


def _curve(samples: np.ndarray) -> list[tuple[float, float]]:
    """(p, ns) at CURVE_PS, exact nearest rank over the samples."""
    ordered = np.sort(samples)
    n = len(ordered)
    return [(p, float(ordered[max(0, int(np.ceil(p * n)) - 1)])) for p in CURVE_PS]


def comparison_document(seed: int = 3) -> dict[str, Any]:
    """A comparison of three DuTs, bare and in a container, three repetitions each, as
    `lowtail compare --json` prints it with the page's curves."""
    rng = np.random.default_rng(seed)
    verdict = Verdict(99.99, 250_000, 0)
    configurations = []
    for dut, base in (("kernel-mirred", 8_000), ("bridge", 14_000), ("lowtail-fwd", 20_000)):
        for containment, factor in (("bare", 1.0), ("container", 1.4)):
            reps = [base * factor * (1 + rng.lognormal(0, 0.6, 20_000)) for _ in range(3)]
            pooled = np.concatenate(reps)
            figures = {
                k: float(np.sort(pooled)[max(0, int(np.ceil(percentiles.fraction(k) * len(pooled))) - 1)])
                for k in percentiles.figure_keys()
                if k != percentiles.MIN
            }
            per_rep = [_curve(r) for r in reps]
            curve = _curve(pooled)
            band = [(p, min(c[i][1] for c in per_rep), max(c[i][1] for c in per_rep)) for i, (p, _) in enumerate(curve)]
            run_ids = [len(configurations) * 3 + i + 1 for i in range(3)]
            worst_rep = max(range(3), key=lambda i: reps[i].max())
            value = figures[verdict.key]
            status = "PASS" if value < verdict.budget_ns else "FAIL"
            configurations.append(
                {
                    "key": {"dut": dut, "containment": containment},
                    "runs": run_ids,
                    "repetitions": 3,
                    "sent": len(pooled),
                    "lost": 0,
                    "loss_ratio": 0.0,
                    "latency_ns": figures,
                    "spread": {
                        k: [float(np.quantile(r, percentiles.fraction(k), method="inverted_cdf")) for r in reps]
                        for k in figures
                    },
                    "interval_ns": {k: [0.97 * v, 1.03 * v] if k != "p99_999" else None for k, v in figures.items()},
                    "worst_repetition": run_ids[worst_rep],
                    "verdict": {"status": status, "label": status, "reason": f"99.99 % is {value / 1e3:.1f} µs"},
                    "floor_ns": {k: 3_000.0 for k in figures},
                    "curve": curve,
                    "band": band,
                    "floor_curve": [(p, 2_500 + 1_000 * p) for p, _ in curve],
                    "cdf": [
                        (float(v), (i + 1) / 200) for i, v in enumerate(np.quantile(pooled, np.linspace(0.005, 1, 200)))
                    ],
                    "worst": sorted(
                        (int(t), float(v)) for t, v in zip(rng.uniform(0, 2e9, 200), np.sort(reps[worst_rep])[-200:])
                    ),
                    "start_ts_ns": 0,
                }
            )
    for c in configurations:
        c["spread"] = {k: [min(v), max(v)] for k, v in c["spread"].items()}
    return {
        "budget": {"percentile": 99.99, "budget_ns": 250_000, "max_loss": 0},
        "by": ["dut", "containment"],
        "configurations": configurations,
        "differences": [
            {
                "a": {"dut": "kernel-mirred", "containment": "bare"},
                "b": {"dut": "lowtail-fwd", "containment": "bare"},
                "percentile": "p99_99",
                "difference_ns": 12_000,
                "resolvable": True,
                "text": "kernel-mirred · bare is lower than lowtail-fwd · bare at p99.99 by 12 µs "
                "(intervals do not overlap)",
            }
        ],
        "latency_vs_rate": [
            {
                "label": dut,
                "knee_pps": knee,
                "r_max_pps": r_max,
                "points": [
                    {
                        "rate_pps": rate,
                        "latency_ns": {"p50": base * (1 + rate / knee), "p99_99": 8 * base * (1 + (rate / knee) ** 3)},
                        "overloaded": rate >= knee,
                    }
                    for rate in (10_000, 50_000, 100_000, 150_000)
                ],
            }
            for dut, base, knee, r_max in (
                ("kernel-mirred", 8_000, 150_000, 160_000),
                ("lowtail-fwd", 20_000, 100_000, 95_000),
            )
        ],
        "evt": [
            {"key": c["key"], "runs": 3, "fitted": 3, "bounded": i % 3, "mean_exceedances": 0.7 + 0.2 * i}
            for i, c in enumerate(configurations)
        ],
    }
