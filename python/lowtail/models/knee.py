"""The knee of a rate sweep: the first rate at which the device is overloaded.

The URLLC studies call a run overloaded when it loses packets noticeably or its latency grows
by orders of magnitude (NOMS 2020, Table II: 3.3 % loss and a thousandfold median at the first
overloaded rate, while a short loss burst at start-up alone is not overload). Here a
rate is overloaded when any valid run at it loses more than `loss_limit` of its packets
or has a 99th percentile more than `growth_limit` times that of the lowest rate."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from lowtail.core.errors import UserError
from lowtail.models.document import KneeCriteria, KneeDocument, KneeRate
from lowtail.store.db import Store
from lowtail.store.models import KNEE, OVERLOAD, latest_model, save_model, sweep_points
from lowtail.store.runs import experiment as experiment_of
from lowtail.store.runs import latest_swept_experiment


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep, with the figures the knee needs."""

    run_id: int | None
    rate_pps: float
    sent: int
    lost: int
    p50_ns: int | None
    p99_ns: int | None
    p99_999_ns: int | None
    max_ns: int | None
    degraded: bool = False  # the host could not measure the run as asked

    @property
    def loss(self) -> float:
        """The share of sent packets lost (everything, when nothing was sent)."""
        return self.lost / self.sent if self.sent else 1.0


def find_knee(points: Iterable[SweepPoint], loss_limit: float = 0.01, growth_limit: float = 10.0) -> KneeDocument:
    """Per rate, the worst of its runs and whether it is overloaded (and why); the knee is
    the first overloaded rate, `last_ok_pps` the last rate before it that is not."""
    by_rate: dict[float, list[SweepPoint]] = defaultdict(list)
    for p in points:
        by_rate[p.rate_pps].append(p)
    if not by_rate:
        return {"knee_pps": None, "last_ok_pps": None, "rates": [], "criteria": _criteria(loss_limit, growth_limit)}
    rates = sorted(by_rate)
    reference = [p.p99_ns for p in by_rate[rates[0]] if p.p99_ns]
    reference_p99 = min(reference) if reference else None
    rows: list[KneeRate] = []
    knee, last_ok = None, None
    for rate in rates:
        runs = by_rate[rate]
        reasons = sorted({r for p in runs for r in _overload_reasons(p, reference_p99, loss_limit, growth_limit)})
        rows.append(
            {
                "rate_pps": rate,
                "runs": [p.run_id for p in runs],
                "loss": max(p.loss for p in runs),
                "p50_ns": _worst(p.p50_ns for p in runs),
                "p99_ns": _worst(p.p99_ns for p in runs),
                "p99_999_ns": _worst(p.p99_999_ns for p in runs),
                "max_ns": _worst(p.max_ns for p in runs),
                "overloaded": bool(reasons),
                "reasons": reasons,
                "degraded_runs": [p.run_id for p in runs if p.degraded and p.run_id is not None],
            }
        )
        if reasons and knee is None:
            knee = rate
        elif not reasons and knee is None:
            last_ok = rate
    return {
        "knee_pps": knee,
        "last_ok_pps": last_ok,
        "reference_p99_ns": reference_p99,
        "rates": rows,
        "criteria": _criteria(loss_limit, growth_limit),
    }


def _criteria(loss_limit: float, growth_limit: float) -> KneeCriteria:
    return {"loss_limit": loss_limit, "growth_limit": growth_limit}


def _worst(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _overload_reasons(p: SweepPoint, reference_p99: int | None, loss_limit: float, growth_limit: float) -> list[str]:
    reasons = []
    if p.loss > loss_limit:
        reasons.append(f"loss {100 * p.loss:.3g} % > {100 * loss_limit:.3g} %")
    if p.p99_ns is None:
        reasons.append("no latency measured")
    elif reference_p99 and p.p99_ns > growth_limit * reference_p99:
        reasons.append(f"p99 {p.p99_ns / reference_p99:,.0f}× the lowest rate's")
    return reasons


# -- the knee of a stored sweep --------------------------------------------------------------


def sweep_knees(
    store: Store,
    experiment_id: int,
    dut_name: str | None = None,
    loss_limit_percent: float = 1.0,
    growth_limit: float = 10.0,
    r_max: float | None = None,
    *,
    save: bool = True,
    min_rates: int = 1,
) -> list[KneeDocument]:
    """The knee of each DuT's sweep in a stored experiment (DuTs swept over fewer than
    `min_rates` rates are left out), with the predicted R_max beside it: `r_max`, else the
    latest stored overload model of that experiment and DuT. Stored as `knee` model results
    when `save` (each document then carries its `model_id`). Raises UserError when the
    experiment has no valid analysed runs."""
    docs = []
    for name, rows in sweep_points(store, experiment_id, dut_name).items():
        points = [SweepPoint(**row) for row in rows]
        if len({p.rate_pps for p in points}) < min_rates:
            continue
        doc = find_knee(points, loss_limit_percent / 100.0, growth_limit)
        doc["experiment_id"], doc["dut"], doc["r_max_pps"], doc["r_max_model_id"] = experiment_id, name, r_max, None
        if r_max is None:
            overload = latest_model(store, OVERLOAD, experiment_id=experiment_id, dut_name=name)
            if overload:
                doc["r_max_pps"], doc["r_max_model_id"] = overload["result"]["r_max_pps"], overload["model_id"]
        if save:
            doc["model_id"] = save_model(
                store,
                KNEE,
                {"loss_limit": loss_limit_percent, "growth": growth_limit, "r_max": r_max},
                doc,
                experiment_id=experiment_id,
                dut_name=name,
                source=f"experiment {experiment_id}",
            )
        docs.append(doc)
    return docs


@dataclass(frozen=True)
class KneeOptions:
    """Which stored sweep, and when a rate counts as overloaded."""

    experiment: int | str = "latest"  # an id, or the newest experiment with a valid run of a DuT
    dut: str | None = None  # one DuT of it [default: each]
    loss_limit_percent: float = 1.0  # loss above this is overload
    growth: float = 10.0  # ... and so is a p99 above this multiple of the lowest rate's
    r_max: float | None = None  # the predicted R_max [default: the latest stored overload model]


@dataclass(frozen=True)
class Knees:
    """The knees of one experiment's sweeps: one document per DuT."""

    experiment_id: int
    documents: list[KneeDocument]


def knee_and_store(store: Store, opts: KneeOptions, *, save: bool = True) -> Knees:
    """The knee of each DuT's sweep in the experiment `opts` names (`sweep_knees`), stored
    as `knee` model results when `save` (each document then carries its `model_id`)."""
    if opts.experiment == "latest":
        experiment = latest_swept_experiment(store)
    else:
        experiment = int(experiment_of(store, opts.experiment)["experiment_id"])
    docs = sweep_knees(store, experiment, opts.dut, opts.loss_limit_percent, opts.growth, opts.r_max, save=save)
    return Knees(experiment, docs)


def store_sweep_knees(store: Store, experiment_id: int) -> None:
    """The model step after a sweep: the knee of every DuT swept over two rates or more,
    with the default criteria, stored for the experiment's report to draw. Nothing when no
    run of the experiment was analysed."""
    try:
        sweep_knees(store, experiment_id, min_rates=2)
    except UserError:
        pass
