"""The discrete-event device model (crate lowtail-sim) seen from Python: specs from
command-line words, exact percentiles of the predicted latencies, and the comparison
with a measured run, percentile by percentile."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TypedDict

import numpy as np

from lowtail import _native
from lowtail.analyze.document import LatencyFigures
from lowtail.core import percentiles, series
from lowtail.core.errors import Failure, UserError
from lowtail.core.units import format_rate, parse_duration_ns, parse_frequency_hz
from lowtail.experiment.document import RunRow
from lowtail.models.document import (
    CasePrediction,
    DeviceSpec,
    InterruptSource,
    PredictionRow,
    ServiceTime,
    SimulateCase,
    SimulateComparison,
    SimulateDocument,
)
from lowtail.store.db import Store, latency_figures_of
from lowtail.store.models import SIMULATE, ModelLinks, save_model
from lowtail.store.runs import run_figures, run_latency

_DROPPED = np.iinfo(np.int64).min


def defaults() -> DeviceSpec:
    """The device model's fields and their defaults, from lowtail-sim."""
    found: DeviceSpec = json.loads(_native.simulate_defaults())
    return found


class _Summary(TypedDict):
    """What lowtail-sim says of one simulation besides the packets' times."""

    spec: DeviceSpec  # with every default filled
    offered: int
    dropped: int
    batches: int
    span_ns: int
    work_ns: int


@dataclass
class Outcome:
    spec: DeviceSpec
    summary: _Summary
    arrival_ns: np.ndarray
    departure_ns: np.ndarray

    @property
    def delivered(self) -> np.ndarray:
        return np.asarray(self.departure_ns != _DROPPED)

    def latencies(self) -> np.ndarray:
        ok = self.delivered
        return np.asarray(self.departure_ns[ok] - self.arrival_ns[ok])


def run(spec: DeviceSpec) -> Outcome:
    """Simulate one spec: every packet's arrival and departure (dropped packets marked)."""
    try:
        summary_json, arrivals, departures = _native.simulate_device(json.dumps(spec))
    except _native.LowtailError as e:
        raise UserError(str(e)) from None
    summary: _Summary = json.loads(summary_json)
    return Outcome(
        summary["spec"], summary, np.frombuffer(arrivals, dtype=np.int64), np.frombuffer(departures, dtype=np.int64)
    )


def nearest_rank(sorted_values: np.ndarray, q: Fraction) -> int:
    """percentile_disc: the value at the native nearest rank of the exact quantile `q`,
    ⌈q·n⌉ clamped to 1…n."""
    return int(sorted_values[percentiles.nearest_rank(q, len(sorted_values)) - 1])


def latency_figures(latencies: np.ndarray) -> LatencyFigures | None:
    """The `latency_ns` block of an analysis, computed the same way (exact nearest rank)."""
    if not len(latencies):
        return None
    s = np.sort(latencies)
    out: LatencyFigures = {"samples": len(s), "min": int(s[0]), "max": int(s[-1]), "mean": float(s.mean())}
    for p in percentiles.HEADLINE:
        out[p.key] = nearest_rank(s, p.quantile)
    return out


def cdf_points(latencies: np.ndarray, points: int = 600) -> list[list[float]]:
    """(latency_ns, fraction ≤ it) at the steps of the empirical CDF, thinned for plotting
    but keeping every jump the staircase shows."""
    if not len(latencies):
        return []
    values, counts = np.unique(latencies, return_counts=True)
    cum = np.cumsum(counts) / len(latencies)
    if len(values) > points:
        keep = np.unique(
            np.r_[np.linspace(0, len(values) - 1, points).round().astype(np.int64), np.argsort(counts)[-points // 4 :]]
        )
        values, cum = values[keep], cum[keep]
    return [[int(v), float(c)] for v, c in zip(values, cum)]


def summarize(o: Outcome) -> CasePrediction:
    """What a case predicts: loss, batches, utilisation, throughput, exact latency
    figures and the CDF for the staircase plot."""
    lat = o.latencies()
    offered = len(o.arrival_ns)
    span_s = o.summary["span_ns"] / 1e9 if o.summary["span_ns"] > 0 else math.nan
    return {
        "offered": offered,
        "delivered": int(len(lat)),
        "dropped": o.summary["dropped"],
        "loss": o.summary["dropped"] / offered if offered else 0.0,
        "batches": o.summary["batches"],
        "mean_batch": len(lat) / o.summary["batches"] if o.summary["batches"] else 0.0,
        "utilisation": o.summary["work_ns"] / o.summary["span_ns"] if o.summary["span_ns"] > 0 else None,
        "throughput_pps": len(lat) / span_s if span_s == span_s else None,
        "latency_ns": latency_figures(lat),
        "cdf": cdf_points(lat),
    }


# -- specs from words --------------------------------------------------------------------


def parse_service(text: str) -> ServiceTime:
    """const:20us · exp:20us · uniform:10us:30us · normal:20us:2us · lognormal:20us:0.3 · or a
    duration alone (20us). Every duration carries its unit (core/units.py)."""
    parts = text.split(":")
    kind = parts[0].strip().lower()

    def ns(part: str) -> int:
        return parse_duration_ns(part, what=repr(text))

    if len(parts) == 1:
        return {"kind": "constant", "ns": ns(text)}
    if kind in ("const", "constant") and len(parts) == 2:
        return {"kind": "constant", "ns": ns(parts[1])}
    if kind in ("exp", "exponential") and len(parts) == 2:
        return {"kind": "exponential", "mean_ns": ns(parts[1])}
    if kind == "uniform" and len(parts) == 3:
        return {"kind": "uniform", "min_ns": ns(parts[1]), "max_ns": ns(parts[2])}
    if kind == "normal" and len(parts) == 3:
        return {"kind": "normal", "mean_ns": ns(parts[1]), "sd_ns": ns(parts[2])}
    if kind == "lognormal" and len(parts) == 3:
        try:
            sigma = float(parts[2]) if _ascii_number(parts[2]) else math.nan
        except ValueError:
            sigma = math.nan
        if math.isfinite(sigma):
            return {"kind": "lognormal", "median_ns": ns(parts[1]), "sigma": sigma}
    raise UserError(
        f"{text!r}: expected a duration (20us) or const:20us, exp:20us, uniform:10us:30us, "
        "normal:20us:2us, lognormal:20us:0.3"
    )


_IRQ = re.compile(r"^\s*(?P<poisson>poisson@)?(?P<rate>[^:@]+?)\s*:\s*(?P<durs>[^@]+?)(?:@(?P<phase>.+))?$")


def parse_irq(text: str) -> InterruptSource:
    """250Hz:5.5us,8.2us (the interrupt rate, durations cycled) · poisson@1kHz:2us ·
    250Hz:5us@1ms (the first one at 1 ms). Every rate and duration carries its unit."""
    m = _IRQ.match(text)
    if not m:
        raise UserError(f"{text!r}: expected RATE:DURATION[,DURATION...][@PHASE], e.g. 250Hz:5.5us,8.2us")
    what = repr(text)
    durations = [parse_duration_ns(d, what=what) for d in m.group("durs").split(",") if d.strip()]
    return {
        "rate_hz": parse_frequency_hz(m.group("rate"), what=what),
        "durations_ns": durations,
        "poisson": bool(m.group("poisson")),
        "phase_ns": parse_duration_ns(m.group("phase"), what=what) if m.group("phase") else 0,
    }


def _ascii_number(text: str) -> bool:
    if not text.strip().isascii() or "_" in text:
        raise ValueError(text)
    return True


def int_list(text: str, what: str) -> list[int]:
    """A number or a comma-separated list of positive numbers (`what` names the option)."""
    try:
        # float() alone would read other scripts' digits ("٥٠٠٠") and "1_0"
        values = [int(float(v)) for v in text.split(",") if v.strip() and _ascii_number(v)]
    except ValueError:
        raise UserError(f"{what} {text!r}: expected a number or a comma-separated list") from None
    if not values or min(values) <= 0:
        raise UserError(f"{what} {text!r}: values must be positive")
    return values


def sweep_axes(
    rates: Sequence[float] | None, bursts: str | None, batches: str | None
) -> tuple[tuple[float, ...] | None, tuple[int, ...] | None, tuple[int, ...] | None]:
    """`SimulateOptions`' rates, bursts and batches from what `model simulate` was given:
    its --rate values (each above zero), its --burst and --batch lists (`int_list`); None
    (the base's or the run's) where nothing or an empty list was given."""
    if rates is not None and min(rates) <= 0:
        raise UserError("--rate: rates must be above zero")
    return (
        tuple(float(r) for r in rates) if rates else None,
        tuple(int_list(bursts, "--burst")) if bursts else None,
        tuple(int_list(batches, "--batch")) if batches else None,
    )


# -- against a measured run ------------------------------------------------------------


def spec_for_run(run: RunRow, overhead_ns: float, packets: int | None, seed: int) -> DeviceSpec:
    """The simulation of a stored lowtail-fwd run: its rate, burst, work_ns and batch."""
    config = run["dut_config"] or {}
    if run["dut_kind"] != "lowtail-fwd" and "work_ns" not in config:
        raise UserError(
            f"run {run['run_id']} is a {run['dut_kind']} run: the device model needs a lowtail-fwd run "
            "(its work_ns and batch), or give the model yourself without --run"
        )
    work = float(config.get("work_ns", 0))
    sent = int(run["sent"] or 0)
    return {
        "packets": int(packets or min(max(sent, 1), 2_000_000)),
        "rate_pps": float(run["rate_pps"]),
        "burst": int(run["burst"] or 1),
        "service": {"kind": "constant", "ns": work + overhead_ns},
        "batch": int(config.get("batch", 1)),
        "seed": seed,
    }


def spec_of_stored_run(
    store: Store, run_id: int, overhead_ns: float, packets: int | None, seed: int, baseline_run: int | None = None
) -> tuple[RunRow, DeviceSpec]:
    """A stored lowtail-fwd run (`run_figures`) and the spec that simulates it
    (`spec_for_run`), with the base latency from `baseline_run`'s median when given."""
    measured_run = run_figures(store, run_id)
    if measured_run["lat_p50_ns"] is None:
        raise UserError(f"run {run_id} has no measured latency to compare with")
    spec = spec_for_run(measured_run, overhead_ns, packets, seed)
    if baseline_run is not None:
        spec["base_latency_ns"] = run_latency(store, baseline_run)
    return measured_run, spec


def compare(measured: LatencyFigures, predicted: LatencyFigures | None) -> list[PredictionRow]:
    """Percentile by percentile: measured, predicted, difference and ratio."""
    rows: list[PredictionRow] = []
    for key in percentiles.figure_keys():
        m, p = measured.get(key), (predicted or {}).get(key)
        rows.append(
            {
                "percentile": key,
                "measured_ns": m,
                "predicted_ns": p,
                "difference_ns": (p - m) if m is not None and p is not None else None,
                "ratio": (p / m) if m and p is not None else None,
            }
        )
    return rows


# -- a sweep of cases --------------------------------------------------------------------


def simulate_cases(
    base: DeviceSpec,
    rates: list[float],
    bursts: list[int],
    batches: list[int],
    duration_ns: int | None = None,
    packets: int | None = None,
    measured_run: RunRow | None = None,
    export: Path | None = None,
) -> list[SimulateCase]:
    """Every combination of rate, burst and batch simulated on top of the `base` spec, each
    for `duration_ns` of traffic or `packets` packets (else the spec's). Compared with a
    measured run and given no base latency, the base latency (the one free parameter: wire,
    NIC, both directions) is fitted at the run's median. `export` gets the first case's
    series in the matched-series format."""
    # With a measured run, and no base latency given, the base latency is fitted at its median.
    fit_at_ns = measured_run["lat_p50_ns"] if measured_run is not None and "base_latency_ns" not in base else None
    cases: list[SimulateCase] = []
    for r, b, bt in itertools.product(rates, bursts, batches):
        spec: DeviceSpec = {**base, "rate_pps": r, "burst": b, "batch": bt}
        if duration_ns is not None:
            spec["packets"] = max(1, int(r * duration_ns / 1e9))
        elif packets is not None:
            spec["packets"] = packets
        outcome = run(spec)
        fitted_base = None
        if fit_at_ns is not None:
            simulated = latency_figures(outcome.latencies())
            if simulated is None:
                raise Failure("the model delivered no packet: there is no median to fit the base latency at")
            median = simulated["p50"]
            assert median is not None  # every figure is set once a packet was delivered
            fitted_base = int(fit_at_ns) - int(median)
            spec["base_latency_ns"] = fitted_base
            outcome = run(spec)
        label_parts = [
            f"{format_rate(r)}" if len(rates) > 1 else "",
            f"burst {b}" if len(bursts) > 1 else "",
            f"batch {bt}" if len(batches) > 1 else "",
        ]
        cases.append(
            {
                "label": ", ".join(p for p in label_parts if p) or "model",
                "spec": outcome.spec,
                "base_latency_fitted": fitted_base is not None,
                "result": summarize(outcome),
            }
        )
        if export is not None and len(cases) == 1:
            ok = outcome.delivered
            series.write_series(export, np.flatnonzero(ok), outcome.arrival_ns[ok], outcome.departure_ns[ok])
    return cases


def comparison(
    run_id: int, measured_run: RunRow, cases: list[SimulateCase], baseline_run: int | None
) -> SimulateComparison:
    """The first case against the measured run (`run_figures`), percentile by percentile,
    with the loss of both."""
    measured = latency_figures_of(measured_run, percentiles.figure_keys())
    first = cases[0]["result"]
    config = measured_run["dut_config"] or {}
    return {
        "run_id": run_id,
        "dut": measured_run["dut_name"],
        "rate_pps": measured_run["rate_pps"],
        "work_ns": config.get("work_ns"),
        "batch": config.get("batch", 1),
        "base_latency_ns": cases[0]["spec"]["base_latency_ns"],
        "base_latency_source": (
            "fitted at the median"
            if cases[0]["base_latency_fitted"]
            else f"median of run {baseline_run}"
            if baseline_run is not None
            else "given"
        ),
        "measured_loss": (measured_run["lost"] or 0) / measured_run["sent"] if measured_run["sent"] else None,
        "predicted_loss": first["loss"],
        "rows": compare(measured, first["latency_ns"]),
    }


# `model simulate`'s per-packet CPU time unless given (or the --spec file's).
DEFAULT_SERVICE = "2us"


def device_spec(
    spec_file: Path | None,
    *,
    arrivals: str,
    burst_gap_ns: float,
    seed: int,
    batch_overhead_ns: float,
    queue_capacity: int,
    service: ServiceTime | None = None,
    interrupts: list[InterruptSource] | None = None,
    base_latency_ns: int | None = None,
) -> DeviceSpec:
    """The device model `model simulate` runs: a JSON spec file's fields (when given) with
    the options over them; the service time is the file's, else DEFAULT_SERVICE unless given.
    UserError naming the option for arrivals other than cbr or poisson, or a file that is
    not JSON."""
    if arrivals not in ("cbr", "poisson"):
        raise UserError(f"--arrivals {arrivals!r}: cbr or poisson")
    base: DeviceSpec = {}
    if spec_file:
        try:
            base = json.loads(spec_file.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"--spec {spec_file}: cannot read it as JSON ({e})") from None
    base.update({"arrivals": arrivals, "burst_gap_ns": burst_gap_ns, "seed": seed})
    base.update({"batch_overhead_ns": batch_overhead_ns, "queue_capacity": queue_capacity})
    if service is not None or not spec_file:
        base["service"] = service if service is not None else parse_service(DEFAULT_SERVICE)
    if interrupts:
        base["interrupts"] = list(interrupts)
    if base_latency_ns is not None:
        base["base_latency_ns"] = base_latency_ns
    return base


@dataclass(frozen=True)
class SimulateOptions:
    """The device model to simulate and the cases to sweep: `base` holds the model's fields
    (`defaults()` lists them) over lowtail-sim's defaults; each of `rates`, `bursts` and
    `batches` left None takes the base's (or the run's) value. With `run`, a stored
    lowtail-fwd run is simulated (its rate, burst, work_ns and batch) and compared with
    what was measured; `export` gets the first case's series (.parquet or .csv)."""

    base: DeviceSpec = field(default_factory=lambda: DeviceSpec())
    rates: tuple[float, ...] | None = None
    bursts: tuple[int, ...] | None = None
    batches: tuple[int, ...] | None = None
    duration_ns: int | None = None  # simulated time per case (else `packets`, else the spec's)
    packets: int | None = None
    run: int | None = None
    overhead_ns: float = 0.0  # with `run`: the forwarder's per-packet cost besides work_ns
    baseline_run: int | None = None  # with `run`: the base latency from this run's median
    export: Path | None = None


def simulate_and_store(
    store: Store | None, opts: SimulateOptions, *, save: bool = True, label: str | None = None
) -> SimulateDocument:
    """Every case of `opts` simulated (`simulate_cases`), the first compared with its run
    when it names one, stored as a `simulate` model result when `save` (the document then
    carries its `model_id`)."""
    if opts.export is not None:
        series.check_export_path(opts.export)
    base: DeviceSpec = {**opts.base}
    measured_run = None
    if opts.run is not None:
        if store is None:
            raise UserError("--run needs the database (--db)")
        measured_run, for_run = spec_of_stored_run(
            store, opts.run, opts.overhead_ns, opts.packets, int(base.get("seed", 1)), opts.baseline_run
        )
        base.update(for_run)
    rates = list(opts.rates) if opts.rates else [float(base.get("rate_pps", 10_000.0))]
    bursts = list(opts.bursts) if opts.bursts else [int(base.get("burst", 1))]
    batches = list(opts.batches) if opts.batches else [int(base.get("batch", 1))]
    cases = simulate_cases(
        base,
        rates,
        bursts,
        batches,
        opts.duration_ns,
        opts.packets,
        measured_run,
        series.parquet_path_for(opts.export) if opts.export else None,
    )
    if opts.export is not None:
        series.finish_export(opts.export)
    doc: SimulateDocument = {"cases": cases, "comparison": None, "partial": False}
    keys: ModelLinks = {}
    if measured_run is not None and opts.run is not None:
        doc["comparison"] = comparison(opts.run, measured_run, cases, opts.baseline_run)
        keys = {
            "run_id": opts.run,
            "analysis_id": measured_run["analysis_id"],
            "experiment_id": measured_run["experiment_id"],
            "dut_name": measured_run["dut_name"],
            "source": f"run {opts.run}",
        }
    if save:
        if store is None:
            raise UserError("storing the model needs the database (--db)")
        inputs = {
            "base": base,
            "rates": rates,
            "bursts": bursts,
            "batches": batches,
            "run": opts.run,
            "baseline_run": opts.baseline_run,
            "overhead_ns": opts.overhead_ns,
        }
        doc["model_id"] = save_model(store, SIMULATE, inputs, doc, label=label, **keys)
    return doc
