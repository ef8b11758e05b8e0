"""Each flow's tail, estimated and verified by extreme value theory, after "Flow-level tail
latency estimation and verification based on extreme value theory" (Helm, Wiedner, Carle,
CNSM 2022): the flows of a matched series (its `flow` column) apart, each flow's latencies in
time order split into an estimation part and a held-out part; the estimation part's
exceedances over its threshold percentile fitted by a generalized Pareto distribution
(`gpd.fit`); the fit's prediction checked on the held-out part; and every flow whose data
cannot support a tail model named as such, with the reason.

The check: the level the model says is exceeded `depth` times less often than the threshold
(tail probability ζ/depth, ζ the share of exceedances in the estimation part) is counted in
the held-out packets. Under the model the count is binomial(n_held_out, ζ/depth); a count in
either tail of that distribution beyond the test's level contradicts the model. A flow whose
held-out part expects fewer than `min_expected` such packets cannot be checked at all (the
data cannot support the claim), nor can one with fewer than `min_exceedances` exceedances to
fit, nor one whose fit does not converge. docs/statistics.md says how often a true model is
called contradicted (the test's level, checked by simulation in tests/models/test_flow_evt.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal

import numpy as np
from scipy import stats

from lowtail.core import series
from lowtail.core.errors import UserError
from lowtail.core.percentiles import nearest_rank
from lowtail.core.units import format_counted, format_ns
from lowtail.models import gpd
from lowtail.models.document import FlowTailDocument, FlowTailsDocument
from lowtail.store.analyses import analysis_flows
from lowtail.store.db import Store
from lowtail.store.models import FLOWS, save_model, series_source

FlowTailStatus = Literal["verified", "contradicted", "unsupported"]

# The tail probabilities each flow's model extrapolates to (the percentiles a flow's budget
# is judged at), as keys of the headline percentiles.
PREDICTED = {"p99_9": Fraction(1, 1_000), "p99_99": Fraction(1, 10_000), "p99_999": Fraction(1, 100_000)}


@dataclass(frozen=True)
class FlowEvtOptions:
    """How each flow's tail is fitted and checked."""

    # The first share of each flow's packets (in time order) the model is fitted on.
    fit_fraction: float = 0.5
    # The threshold: this percentile of the estimation part.
    threshold: Fraction = Fraction(99, 100)
    # Fewest exceedances a fit is made from.
    min_exceedances: int = 30
    # The checked level lies this many times deeper in the tail than the threshold.
    depth: int = 10
    # Fewest held-out packets the model must expect above the checked level to check it.
    min_expected: float = 5.0
    # The two-sided binomial test's level: a count outside it contradicts the model.
    level: float = 0.95

    def check(self) -> None:
        if not 0.0 < self.fit_fraction < 1.0:
            raise UserError(f"--fit-fraction must lie between 0 and 100 %, not {self.fit_fraction * 100:g} %")
        if not Fraction(0) < self.threshold < Fraction(1):
            raise UserError("--threshold-percentile must be a percentile between 0 and 100")
        if self.min_exceedances < 3 or self.depth < 2 or not 0.5 <= self.level < 1.0:
            raise UserError("--min-exceedances must be at least 3, the depth at least 2, the level in [50, 100) %")


def _unsupported(doc: FlowTailDocument, reason: str) -> FlowTailDocument:
    doc["status"], doc["reason"] = "unsupported", reason
    return doc


def flow_tail(flow: int, latencies: np.ndarray, opts: FlowEvtOptions | None = None) -> FlowTailDocument:
    """One flow's tail model and its check, from its latencies (ns) in time order."""
    opts = opts or FlowEvtOptions()
    n = len(latencies)
    n_fit = int(n * opts.fit_fraction)
    doc: FlowTailDocument = {
        "flow": flow,
        "packets": n,
        "fit_packets": n_fit,
        "threshold_ns": None,
        "exceedances": 0,
        "xi": None,
        "xi_ci": None,
        "sigma_ns": None,
        "predicted_ns": {},
        "observed_ns": {},
        "check_level_ns": None,
        "expected": None,
        "observed": None,
        "p_value": None,
        "status": "unsupported",
        "reason": "",
    }
    fit_part, held_out = np.sort(latencies[:n_fit]), latencies[n_fit:]
    if n_fit == 0 or len(held_out) == 0:
        return _unsupported(doc, f"{n:,} packets: nothing to fit or nothing held out")
    u = int(fit_part[nearest_rank(opts.threshold, n_fit) - 1])
    y = fit_part[fit_part > u] - u
    doc["threshold_ns"], doc["exceedances"] = u, len(y)
    everything = np.sort(latencies)
    for key, tail in PREDICTED.items():
        doc["observed_ns"][key] = int(everything[nearest_rank(1 - tail, n) - 1])
    if len(y) < opts.min_exceedances:
        return _unsupported(
            doc,
            f"{len(y)} exceedances of the {float(opts.threshold) * 100:g}th percentile, fewer than the "
            f"{opts.min_exceedances} a fit needs ({n:,} packets)",
        )
    fit = gpd.fit(y.astype(np.float64))
    if not fit.converged:
        return _unsupported(doc, f"the GPD fit did not converge: {fit.message}")
    zeta = len(y) / n_fit
    doc["xi"], doc["sigma_ns"] = fit.xi, fit.sigma
    # The profile-likelihood interval, as `model evt` states ξ's (the Wald interval is too
    # narrow on the few hundred exceedances a flow has: docs/statistics.md §4).
    interval = gpd.profile_interval(y.astype(np.float64), fit, opts.level)
    doc["xi_ci"] = list(interval) if interval is not None else None
    for key, tail in PREDICTED.items():
        doc["predicted_ns"][key] = _level(u, zeta, float(tail), fit) if float(tail) < zeta else None
    check_tail = zeta / opts.depth
    expected = len(held_out) * check_tail
    level = _level(u, zeta, check_tail, fit)
    doc["check_level_ns"], doc["expected"] = level, expected
    if expected < opts.min_expected:
        return _unsupported(
            doc,
            f"the held-out {len(held_out):,} packets expect {expected:.2g} above the checked level, fewer "
            f"than the {opts.min_expected:g} a check needs: its tail cannot be verified",
        )
    observed = int(np.count_nonzero(held_out > level))
    binom = stats.binom(len(held_out), check_tail)
    p_value = min(1.0, 2 * min(float(binom.cdf(observed)), float(binom.sf(observed - 1))))
    doc["observed"], doc["p_value"] = observed, p_value
    if p_value < 1 - opts.level:
        doc["status"] = "contradicted"
        doc["reason"] = (
            f"{format_counted(observed, 'held-out packet')} above {format_ns(level)} where the model expects "
            f"{expected:.1f}"
        )
    else:
        doc["status"], doc["reason"] = (
            "verified",
            f"{format_counted(observed, 'held-out packet')} above the level, {expected:.1f} expected",
        )
    return doc


def _level(u: int, zeta: float, tail: float, fit: gpd.GpdFit) -> float:
    """The latency the model says is exceeded with probability `tail` (< zeta)."""
    return float(u + gpd.quantile(1.0 - tail / zeta, fit.sigma, fit.xi))


def _read_flows(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The flow and latency columns of a series file, in its (PRE) order."""
    pf = series.open_series(path, (series.FLOW, series.LATENCY), gone="the matched series is gone")
    table = pf.read(columns=[series.FLOW, series.LATENCY], use_threads=False)
    flows = table.column(series.FLOW).to_numpy().astype(np.int64)
    latencies = table.column(series.LATENCY).to_numpy().astype(np.int64)
    return flows, latencies


def flow_tails(path: str | Path, opts: FlowEvtOptions | None = None) -> FlowTailsDocument:
    """Every flow's tail model and check, from a matched series with a `flow` column; the
    flows the data cannot support are named with their reasons."""
    opts = opts or FlowEvtOptions()
    opts.check()
    flows, latencies = _read_flows(path)
    order = np.argsort(flows, kind="stable")  # each flow's packets stay in time order
    ids, starts = np.unique(flows[order], return_index=True)
    bounds = [*starts[1:], len(order)]
    out = [flow_tail(int(f), latencies[order[a:b]], opts) for f, a, b in zip(ids, starts, bounds)]
    counts = {s: sum(1 for d in out if d["status"] == s) for s in ("verified", "contradicted", "unsupported")}
    return {
        "series": str(path),
        "options": {
            "fit_fraction": opts.fit_fraction,
            "threshold": float(opts.threshold),
            "min_exceedances": opts.min_exceedances,
            "depth": opts.depth,
            "min_expected": opts.min_expected,
            "level": opts.level,
        },
        "flows": out,
        "verified": counts["verified"],
        "contradicted": counts["contradicted"],
        "unsupported": counts["unsupported"],
    }


def flow_tails_and_store(
    store: Store | None,
    source: str,
    opts: FlowEvtOptions | None = None,
    *,
    save: bool = True,
    label: str | None = None,
) -> FlowTailsDocument:
    """The flows' tails of `source` — a Parquet series, a run id or analysis:ID — stored as a
    `flows` model result linked to its run or analysis when `save`."""
    src = series_source(store, source)
    doc = flow_tails(src.path, opts)
    doc["source"] = src.label
    stored_flows = analysis_flows(store, src.analysis_id) if store is not None and src.analysis_id else None
    names = {f["flow"]: f["key"] for f in stored_flows["flows"]} if stored_flows else {}
    for f in doc["flows"]:
        if f["flow"] in names:
            f["key"] = names[f["flow"]]
    if save:
        if store is None:
            raise UserError("storing the model needs the database (--db)")
        doc["model_id"] = save_model(
            store,
            FLOWS,
            {"input": source, "series": src.path, **doc["options"]},
            doc,
            label=label,
            run_id=src.run_id,
            analysis_id=src.analysis_id,
            source=src.label,
        )
    return doc


def worst_predicted(doc: FlowTailsDocument, key: str = "p99_99") -> list[FlowTailDocument]:
    """The flows whose model was verified, worst predicted `key` first (math.inf-free)."""
    verified = [f for f in doc["flows"] if f["status"] == "verified" and f["predicted_ns"].get(key) is not None]
    return sorted(verified, key=lambda f: -float(f["predicted_ns"][key] or -math.inf))
