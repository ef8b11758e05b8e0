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

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.compare.intervals import Evidence, bounds_document
from lowtail.compare.page import Drawn
from lowtail.core import percentiles
from lowtail.core.units import format_rate
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.store.analyses import save_analysis
from lowtail.store.host import save_run_interrupts
from lowtail.store.models import KNEE, save_model
from lowtail.verdict.judge import Verdict

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
            "last_ok_pps": 20_000,
            "r_max_pps": 35_000,
            "criteria": {"loss_limit": 0.01, "growth_limit": 3.0},
            "rates": [
                {
                    "rate_pps": r["rate_pps"],
                    "runs": [r["run_id"]],
                    "loss": 0.0,
                    "overloaded": r["rate_pps"] == 40_000,
                    "reasons": ["the median grew 10×"] if r["rate_pps"] == 40_000 else [],
                    **{f"{k}_ns": r["figures"]["latency_ns"][k] for k in ("p50", "p99", "p99_999", "max")},
                }
                for r in runstore.runs(store, eid)
                if r["dut_name"] == "fwd"
            ],
        }
        save_model(store, KNEE, {"experiment": eid}, knee, experiment_id=eid, dut_name="fwd")
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


def _figures(samples: np.ndarray, keys: list[str]) -> dict[str, int]:
    """Nearest-rank figures in whole nanoseconds, as `lowtail compare` pools them."""
    ordered = np.sort(samples)
    n = len(ordered)
    out = {k: int(ordered[max(0, int(np.ceil(percentiles.fraction(k) * n)) - 1)]) for k in keys}
    return out | {"max": int(ordered[-1]), "samples": n}


def _interval(value: int, resolvable: bool) -> dict[str, Any]:
    """A percentile's interval as `compare` stores it: ±3 % where resolvable, else unbounded above."""
    ranks = {"lower_rank": 1, "upper_rank": 2, "dispersion": 1.0, "blocks": 20, "why": None}
    if resolvable:
        bounds = {"lower_ns": int(0.97 * value), "upper_ns": int(1.03 * value), "packets_needed": None}
    else:
        bounds = {"lower_ns": value, "upper_ns": None, "packets_needed": 1_000_000}
    return {"value_ns": value, "resolvable": resolvable} | ranks | bounds


_DEGRADED_WHY = "a side has degraded runs (generator stalled 2.6 ms): shown, never called"


def comparison_document(seed: int = 3) -> tuple[dict[str, Any], Drawn]:
    """A comparison of three DuTs, bare and in a container, three repetitions each, and a
    rate sweep of one of them, shaped as `lowtail compare --json` prints it and what the
    store keeps for its page (per configuration index: curves, CDF points, worst events)."""
    rng = np.random.default_rng(seed)
    verdict = Verdict(99.99, 250_000, 0)
    keys = ["p50", "p99", "p99_9", "p99_99", "p99_999"]
    configurations: list[dict[str, Any]] = []
    drawn = Drawn({}, {}, {})
    cases = [
        (dut, base, containment, factor, 10_000)
        for dut, base in (("kernel-mirred", 8_000), ("bridge", 14_000), ("lowtail-fwd", 20_000))
        for containment, factor in (("bare", 1.0), ("container", 1.4))
    ]
    cases += [("lowtail-fwd", 20_000 * (1 + rate / 60_000) ** 2, "bare", 1.0, rate) for rate in (40_000, 80_000)]
    for index, (dut, base, containment, factor, rate) in enumerate(cases):
        reps = [base * factor * (1 + rng.lognormal(0, 0.6, 20_000)) for _ in range(3)]
        pooled = np.concatenate(reps)
        figures = _figures(pooled, keys)
        per_rep = [_figures(r, keys) for r in reps]
        run_ids = [index * 3 + i + 1 for i in range(3)]
        worst = max(range(3), key=lambda i: per_rep[i]["p99_99"])
        # Judged as a stored run is: on the one-sided bounds of its packets (a packet every
        # 100 µs, time blocks as an analysis keeps them).
        summary = _native.SeriesSummary()
        summary.record(np.arange(len(pooled), dtype=np.int64) * 100_000, pooled.astype(np.int64))
        judgement = verdict.judge_figures(
            len(pooled),
            round(figures[verdict.key]),
            0,
            len(pooled),
            intervals=bounds_document(Evidence([summary]), [verdict.key], confidence=verdict.confidence),
        )
        label = f"{dut} · {containment} · {format_rate(rate)}"
        configurations.append(
            {
                "index": index,
                "label": label,
                "key": {"dut": dut, "containment": containment, "rate": rate},
                "key_text": {"dut": dut, "containment": containment, "rate": format_rate(rate)},
                "runs": run_ids,
                "repetitions": 3,
                "sent": len(pooled),
                "lost": 0,
                "loss_ratio": 0.0,
                "latency_ns": figures,
                "intervals": {k: _interval(figures[k], resolvable=k != "p99_999") for k in keys},
                "spread": {
                    k: {"min": min(r[k] for r in per_rep), "max": max(r[k] for r in per_rep)} for k in [*keys, "max"]
                },
                "worst_repetition": run_ids[worst],
                "verdict": judgement.as_dict() | {"budget": verdict.describe()},
                "floor": {
                    "runs": [1, 2, 3],
                    "experiments": [1],
                    "repetitions": 3,
                    "latency_ns": {k: 3_000 for k in [*keys, "max"]},
                    "spread": {},
                    "text": "calibration runs 1, 2, 3 of experiment 1",
                },
                "invalid_runs": [],
                "degraded": ["generator stalled 2.6 ms"] if index == 5 else [],
                # Two of configuration 5's three runs degraded (its reasons above).
                "per_run": [
                    {
                        "resolvable": {k: k != "p99_999" for k in keys},
                        "intervals": {k: None for k in keys},
                        "run_id": run_id,
                        "analysis_id": run_id,
                        "experiment_id": 1,
                        "repetition": i,
                        "sent": len(reps[i]),
                        "lost": 0,
                        "latency_ns": per_rep[i],
                        "verdict": "PASS",
                        "degraded": ["generator stalled 2.6 ms"] if index == 5 and i != 1 else [],
                    }
                    for i, run_id in enumerate(run_ids)
                ],
                "analyses": run_ids,
                "experiments": [1],
                "emulated": False,
                "partial_reasons": [],
            }
        )
        grid = CURVE_PS
        rep_curves = [_curve(r) for r in reps]
        drawn.curves[index] = {
            "pooled": _curve(pooled),
            "band": [
                (p, min(c[i][1] for c in rep_curves), max(c[i][1] for c in rep_curves)) for i, p in enumerate(grid)
            ],
            "floor": [(p, 2_500 + 1_000 * p) for p in grid],
        }
        drawn.cdf[index] = [
            (k / 200, float(np.sort(pooled)[max(0, int(np.ceil(k / 200 * len(pooled))) - 1)])) for k in range(1, 201)
        ]
        drawn.worst[index] = [
            {"run_id": run_ids[i], "analysis_id": run_ids[i], "t_ns": int(t), "latency_ns": int(v)}
            for i in range(3)
            for t, v in zip(sorted(rng.uniform(0, 2e9, 100)), rng.permutation(np.sort(reps[i])[-100:]))
        ]
    sweep = [c for c in configurations if c["key"]["dut"] == "lowtail-fwd" and c["key"]["containment"] == "bare"]
    doc = {
        "comparison_id": 1,
        "selection": ["1", "2"],
        "by": ["dut", "containment", "rate"],
        "axes": [
            {"name": "dut", "label": "DuT"},
            {"name": "containment", "label": "containment"},
            {"name": "rate", "label": "rate"},
        ],
        "level": 0.95,
        "verdict": {
            "percentile": 99.99,
            "key": "p99_99",
            "budget_ns": 250_000,
            "max_loss": 0,
            "text": verdict.describe(),
        },
        "configurations": configurations,
        "differences": [
            {
                "a": "kernel-mirred · bare",
                "b": "lowtail-fwd · bare",
                "percentile": "p99_99",
                "resolved": True,
                "difference_ns": 120_000,
                "lower": "kernel-mirred · bare",
                "higher": "lowtail-fwd · bare",
                "reason": None,
                "why": None,
                "a_index": 1,
                "b_index": 2,
                "axes_differing": ["dut"],
                "note": None,
                "text": "kernel-mirred · bare is lower than lowtail-fwd · bare at p99.99 by 120 µs (intervals do not overlap)",
            },
            {
                "a": "kernel-mirred · bare",
                "b": "bridge · container",
                "percentile": "p99_9",
                "resolved": True,
                "difference_ns": 80_000,
                "lower": "kernel-mirred · bare",
                "higher": "bridge · container",
                "reason": None,
                "why": None,
                "a_index": 1,
                "b_index": 3,
                "axes_differing": ["dut", "containment"],
                "note": None,
                "text": "kernel-mirred · bare is lower than bridge · container at p99.9 by 80 µs (intervals do not overlap)",
            },
        ],
        "not_resolvable": [
            {
                "a": a,
                "b": b,
                "percentile": key,
                "resolved": False,
                "difference_ns": None,
                "lower": None,
                "higher": None,
                "a_index": 0,
                "b_index": 1,
                "axes_differing": ["dut"],
                "reason": reason,
                "why": why,
                "text": f"{a} and {b} at {key}: not called: {why}",
                "note": None,
            }
            for a, b, key, reason, why in (
                ("bridge · bare", "lowtail-fwd · bare", "p99_999", "degraded", _DEGRADED_WHY),
                ("kernel-mirred · bare", "lowtail-fwd · bare", "p99_999", "degraded", _DEGRADED_WHY),
                ("kernel-mirred · bare", "lowtail-fwd · bare", "p99_99", "degraded", _DEGRADED_WHY),
                ("bridge · bare", "kernel-mirred · bare", "p99", "not significant", "within run-to-run variation"),
            )
        ],
        "evt": [
            {
                "configuration": c["index"],
                "label": c["label"],
                "repetitions": 3,
                "models": 3,
                "model_ids": [3 * c["index"] + i + 1 for i in range(3)],
                "bounded": c["index"] % 3,
                "bounded_share": (c["index"] % 3) / 3,
                "mean_exceedances": 0.7 + 0.2 * c["index"],
                "expected_exceedances": 1.0,
                "mean_xi": -0.1,
                "not_credible": 0,
                "missing": [],
            }
            for c in configurations
        ],
        "rates": [
            {
                "label": "lowtail-fwd · bare",
                "key": {"dut": "lowtail-fwd", "containment": "bare"},
                "points": [
                    {
                        "configuration": c["index"],
                        "rate_pps": c["key"]["rate"],
                        "sent": c["sent"],
                        "lost": c["lost"],
                        "loss_ratio": c["loss_ratio"],
                        "latency_ns": c["latency_ns"],
                        "verdict": c["verdict"]["status"],
                    }
                    for c in sweep
                ],
                "knees": [
                    {
                        "experiment_id": 2,
                        "dut": "lowtail-fwd",
                        "model_id": 1,
                        "knee_pps": 80_000,
                        "last_ok_pps": 70_000,
                        "r_max_pps": 75_000,
                        "other_runs": [],
                    }
                ],
            }
        ],
        "difference_family": {"comparisons": 1, "level": 0.95, "procedure": "Holm", "percentiles": ["p99_99"]},
        "left_out": [],
        "notes": [],
        "partial": False,
        "partial_reasons": [],
        "emulated_runs": [],
    }
    return doc, drawn
