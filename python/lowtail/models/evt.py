"""Extreme-value model of the latency tail (Perf. Eval. 2024, section 6, extended).

The series is split in time: the first `fit_fraction` (20 %) builds the model, the rest
(a four-fold horizon) validates it. Peaks over threshold: for each candidate threshold u
(the 99.5 … 99.999th nearest-rank percentile of the fit part) a generalized Pareto
distribution is fitted to the exceedances by maximum likelihood; the threshold whose
model is closest to its data in Jensen–Shannon divergence is chosen. Return levels

    x_m = u + σ/ξ · ((m·ζ)^ξ − 1),     ζ = (samples above u) / (samples in the fit part)

are the latencies exceeded once in m packets on average. The validation counts how
often the validation part exceeds the level predicted for its own length (expected: once).

Only the tail is ever held in memory: one streaming pass over the Parquet series keeps
the largest values of the fit part, block maxima for the stationarity tests, and counts
validation exceedances as it goes — 170 million samples take seconds and a few MB."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from lowtail.core import percentiles, series
from lowtail.core.errors import Failure, UserError
from lowtail.core.units import format_counted, format_ns, format_ns_interval
from lowtail.models import gpd
from lowtail.models.document import (
    EvtDocument,
    EvtOptionsDocument,
    EvtPlot,
    EvtStationarity,
    EvtThreshold,
    EvtValidation,
    HorizonLevel,
    ReturnLevel,
    ValidationCheck,
)
from lowtail.store.db import Store
from lowtail.store.models import EVT, SeriesSource, save_model, series_source

# Quantiles are exact (Fractions): a threshold is a rank, and a float ranks one too high
# whenever p·n is whole (see lowtail.core.percentiles).
DEFAULT_THRESHOLDS = tuple(percentiles.quantile_of_percent(p) for p in ("99.5", "99.9", "99.95", "99.99", "99.999"))
DEFAULT_RETURN_PERIODS = (10**5, 10**6, 10**7, 10**8, 10**9)
HORIZONS_S = {"1 minute": 60, "1 hour": 3600, "1 day": 86400}
_BATCH_ROWS = 1 << 20
_PLOT_POINTS = 400


@dataclass
class EvtOptions:
    """The model's options. `fit_fraction` and `thresholds` are quantiles and are kept
    exact: floats given here are taken as the decimals they were written as."""

    fit_fraction: Fraction = Fraction(1, 5)
    thresholds: tuple[Fraction, ...] = DEFAULT_THRESHOLDS
    min_exceedances: int = 50
    js_bins: int = 20
    confidence: float = 0.95
    return_periods: tuple[int, ...] = DEFAULT_RETURN_PERIODS
    stationarity_blocks: int = 1000
    # Validation exceedances closer than this many packets are one event (the URLLC studies count
    # bursts: an interrupt that delays ten packets in a row is one exceedance).
    decluster_packets: int = 1

    def __post_init__(self) -> None:
        try:
            self.fit_fraction = percentiles.exact_quantile(self.fit_fraction)
            self.thresholds = tuple(percentiles.exact_quantile(p) for p in self.thresholds)
        except (TypeError, ValueError) as e:
            raise UserError(f"EVT options: {e}") from None

    def check(self) -> None:
        if not 0.0 < self.fit_fraction < 1.0:
            raise UserError(f"--fit-fraction {float(self.fit_fraction):g}: must lie strictly between 0 and 1")
        if not self.thresholds or any(not 0.0 < p < 1.0 for p in self.thresholds):
            raise UserError("--thresholds: percentiles must lie strictly between 0 and 100")
        if self.min_exceedances < 10:
            raise UserError("--min-exceedances: a GPD fit needs at least 10 exceedances")
        if self.js_bins < 2:
            raise UserError("--js-bins: at least 2 bins")
        if not 0.5 <= self.confidence < 1.0:
            raise UserError("--confidence: between 0.5 and 1")
        if self.decluster_packets < 1:
            raise UserError("--decluster: at least 1 packet")


def parse_thresholds(text: str) -> tuple[Fraction, ...]:
    """Candidate thresholds given as percentiles ("99.5,99.9,99.99") as exact quantiles."""
    try:
        values = tuple(percentiles.quantile_of_percent(v.strip()) for v in text.split(",") if v.strip())
    except (ValueError, ZeroDivisionError):
        raise UserError(f"--thresholds {text!r}: expected percentiles like 99.5,99.9,99.99") from None
    return values


# -- reading the series --------------------------------------------------------------


@dataclass
class SeriesInfo:
    path: str
    rows: int
    time_column: str = series.PRE_TS
    value_column: str = series.LATENCY


def open_series(path: str | Path) -> tuple[Any, SeriesInfo]:
    """A Parquet file with the PRE times and latencies of a matched series (what
    `lowtail analyze --export` writes)."""
    pf = series.open_series(path, (series.PRE_TS, series.LATENCY))
    return pf, SeriesInfo(str(Path(path)), pf.metadata.num_rows)


def iter_series(pf: Any, info: SeriesInfo) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(first row index, times, latencies) per batch, checked: no nulls, finite, in time order."""
    row = 0
    last_time = None
    for batch in pf.iter_batches(
        batch_size=_BATCH_ROWS, columns=[info.time_column, info.value_column], use_threads=False
    ):
        cols = []
        for name in (info.time_column, info.value_column):
            col = batch.column(name)
            if col.null_count:
                first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise UserError(f"{info.path}: {name} is empty at row {row + first:,}")
            values = col.to_numpy(zero_copy_only=False)
            if values.dtype.kind == "f":
                bad = ~np.isfinite(values)
                if bad.any():
                    first = int(np.flatnonzero(bad)[0])
                    raise UserError(f"{info.path}: {name} is not finite ({values[first]}) at row {row + first:,}")
            elif values.dtype.kind not in "iu":
                raise UserError(f"{info.path}: {name} must hold numbers, not {values.dtype}")
            cols.append(values)
        times, values = cols
        _check_time_order(info, row, last_time, times)
        if len(times):
            last_time = times[-1]
        yield row, times, values
        row += len(times)


def _check_time_order(info: SeriesInfo, row: int, last_time: Any, times: np.ndarray) -> None:
    if not len(times):
        return
    if last_time is not None and times[0] < last_time:
        raise UserError(_order_message(info, row, last_time, times[0]))
    back = np.flatnonzero(times[1:] < times[:-1])
    if len(back):
        i = int(back[0])
        raise UserError(_order_message(info, row + i + 1, times[i], times[i + 1]))


def _order_message(info: SeriesInfo, row: int, before: Any, after: Any) -> str:
    return (
        f"{info.path}: not in time order at row {row:,} ({info.time_column} goes back from {before} to {after}); "
        f"the model splits the series in time: sort it by {info.time_column} first"
    )


# -- streaming accumulators ------------------------------------------------------------


class TopValues:
    """The k largest values seen (as a multiset), in memory proportional to k."""

    def __init__(self, k: int):
        self.k = max(1, k)
        self.parts: list[np.ndarray] = []
        self.size = 0
        self.cutoff: Any = None

    def add(self, values: np.ndarray) -> None:
        if self.cutoff is not None:
            values = values[values > self.cutoff]
        if not len(values):
            return
        self.parts.append(np.array(values, copy=True))
        self.size += len(values)
        if self.size > 2 * self.k:
            self._prune()

    def _prune(self) -> None:
        merged = np.concatenate(self.parts)
        if len(merged) > self.k:
            merged = np.partition(merged, len(merged) - self.k)[len(merged) - self.k :]
            self.cutoff = merged.min()
        self.parts, self.size = [merged], len(merged)

    def descending(self) -> np.ndarray:
        if self.parts:
            self._prune()
        return np.sort(self.parts[0])[::-1] if self.parts else np.empty(0)


class BlockMaxima:
    """Maxima of `blocks` consecutive blocks of rows [0, n)."""

    def __init__(self, n: int, blocks: int):
        self.blocks = max(1, min(blocks, n))
        self.size = n // self.blocks
        self.maxima = np.full(self.blocks, np.iinfo(np.int64).min, dtype=np.int64)

    def add(self, first_row: int, values: np.ndarray) -> None:
        ids = np.minimum((first_row + np.arange(len(values))) // self.size, self.blocks - 1)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        block_max = np.maximum.reduceat(values.astype(np.int64, copy=False), starts)
        where = ids[starts]
        self.maxima[where] = np.maximum(self.maxima[where], block_max)


class ExceedanceCounter:
    """Counts values above each level, as samples and as events: an exceedance at most
    `gap` rows after the previous one belongs to its event."""

    def __init__(self, levels: list[float], gap: int):
        self.levels = levels
        self.gap = gap
        self.samples = [0] * len(levels)
        self.events = [0] * len(levels)
        self.last_row = [-(10**18)] * len(levels)
        self.first_rows: list[list[int]] = [[] for _ in levels]

    def add(self, first_row: int, values: np.ndarray) -> None:
        finite = [lv for lv in self.levels if lv is not None and math.isfinite(lv)]
        if not finite:
            return
        # One pass over the batch; the levels are then checked on the few values above the lowest.
        candidates = np.flatnonzero(values > min(finite))
        above = values[candidates]
        for i, level in enumerate(self.levels):
            if level is None or not math.isfinite(level):
                continue
            rows = candidates[above > level] + first_row
            if not len(rows):
                continue
            self.samples[i] += len(rows)
            new_events = rows[np.diff(np.r_[self.last_row[i], rows]) > self.gap]
            self.events[i] += len(new_events)
            if len(self.first_rows[i]) < 100:
                self.first_rows[i].extend(int(r) for r in new_events[: 100 - len(self.first_rows[i])])
            self.last_row[i] = int(rows[-1])


# -- the model -------------------------------------------------------------------------


@dataclass
class ThresholdFit:
    percentile: Fraction
    threshold_ns: int
    exceedances: int
    converged: bool
    sigma_ns: float | None = None
    xi: float | None = None
    sigma_ci: tuple[float, float] | None = None
    xi_ci: tuple[float, float] | None = None
    js_divergence: float | None = None
    note: str = ""
    fit: Any = field(default=None, repr=False)
    data: Any = field(default=None, repr=False)


def return_level(m: float, u: float, zeta: float, sigma: float, xi: float) -> float | None:
    """x_m; None when the period is shorter than one exceedance on average (m·ζ < 1)."""
    mz = m * zeta
    # m = 1/ζ is one exceedance on average, x_m = u: (1/ζ)·ζ may round just below 1.
    if mz < 1.0 - 1e-12:
        return None
    mz = max(mz, 1.0)
    if abs(xi) < 1e-9:
        return u + sigma * math.log(mz)
    return float(u + sigma / xi * (mz**xi - 1.0))


def _return_level_se(m: float, zeta: float, n_fit: int, fit: gpd.GpdFit) -> float | None:
    """Delta-method standard error of x_m, with ζ's binomial variance (Coles 2001, 4.3.3)."""
    if fit.cov is None:
        return None
    sigma, xi = fit.sigma, fit.xi
    mz = m * zeta
    if abs(xi) < 1e-9:
        d_zeta, d_sigma, d_xi = sigma / zeta, math.log(mz), sigma * math.log(mz) ** 2 / 2
    else:
        d_zeta = sigma * m**xi * zeta ** (xi - 1.0)
        d_sigma = (mz**xi - 1.0) / xi
        d_xi = -sigma / xi**2 * (mz**xi - 1.0) + sigma / xi * mz**xi * math.log(mz)
    v = np.array([[zeta * (1 - zeta) / n_fit, 0, 0], [0, *fit.cov[0]], [0, *fit.cov[1]]])
    g = np.array([d_zeta, d_sigma, d_xi])
    var = float(g @ v @ g)
    return math.sqrt(var) if var >= 0 else None


def shown_bounded(xi_ci: tuple[float, float] | list[float] | None) -> bool:
    """Whether the tail is shown to be bounded: ξ's whole confidence interval below 0. A
    negative estimate alone is not (on a true ξ = 0 tail, about half the fits give one)."""
    return xi_ci is not None and xi_ci[1] < 0


def _endpoint(
    u: float, fit: gpd.GpdFit, z: float, xi_ci: tuple[float, float] | None
) -> tuple[float | None, tuple[float, float] | None]:
    """The tail's upper end and its interval, where the tail is shown bounded."""
    if not shown_bounded(xi_ci):
        return None, None
    end = u - fit.sigma / fit.xi
    if fit.cov is None:
        return end, None
    g = np.array([-1.0 / fit.xi, fit.sigma / fit.xi**2])
    se = math.sqrt(max(0.0, float(g @ np.array(fit.cov) @ g)))
    return end, (end - z * se, end + z * se)


def refutes(doc: Mapping[str, Any], observed_max_ns: int) -> bool:
    """Whether the series' largest latency refutes a tail fitted as bounded: it lies above
    the highest upper end the fit allows, its interval's top, else (no interval: a singular
    information matrix) the end itself. Not the fitted end itself: it lies below the true
    one about half the time, and the validation part, four times the fit's, reached past it
    in 8 of 40 GPD(ξ = −0.3) tails of 300,000 packets; past the interval's top in 1 %
    (bench/stated_confidence.py --only evt)."""
    end, ci = doc["endpoint_ns"], doc["endpoint_ci_ns"]
    return end is not None and observed_max_ns > (ci[1] if ci else end)


def _fit_threshold(p: Fraction, top: np.ndarray, n_fit: int, opts: EvtOptions, z: float) -> ThresholdFit:
    rank = percentiles.nearest_rank(p, n_fit)  # exact, as percentile_disc
    u = int(top[n_fit - rank])
    y = (top[top > u] - u).astype(np.float64)
    tf = ThresholdFit(p, u, len(y), False, data=y)
    if len(y) < opts.min_exceedances:
        tf.note = f"{format_counted(len(y), 'sample')} above it, the fit needs {opts.min_exceedances}"
        return tf
    fit = gpd.fit(y)
    tf.fit, tf.note = fit, fit.message
    if not fit.converged:
        return tf
    tf.converged = True
    tf.sigma_ns, tf.xi = fit.sigma, fit.xi
    se = fit.se()
    if se:
        tf.sigma_ci = (fit.sigma - z * se[0], fit.sigma + z * se[0])
    tf.xi_ci = gpd.profile_interval(y, fit, opts.confidence)
    tf.js_divergence = gpd.js_divergence(y, fit.sigma, fit.xi, opts.js_bins)
    return tf


def required_samples(opts: EvtOptions) -> int:
    """Series length at which the lowest threshold has `min_exceedances` in the fit part."""
    p = min(opts.thresholds)
    return math.ceil(opts.min_exceedances / (1 - p) / opts.fit_fraction)


def evt_model(
    path: str | Path,
    opts: EvtOptions | None = None,
    rate_pps: float | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvtDocument:
    """Fit, choose, extrapolate and validate; returns the document `lowtail model evt --json` prints."""
    from scipy import stats as sstats

    opts = opts or EvtOptions()
    opts.check()
    pf, info = open_series(path)
    n = info.rows
    n_fit = int(n * opts.fit_fraction)
    needed = required_samples(opts)
    if n < needed:
        raise UserError(
            f"{info.path}: {n:,} samples are too few: the fit part ({_pct(opts.fit_fraction):g} %) needs "
            f"{opts.min_exceedances} samples above the {_pct(min(opts.thresholds)):g}th percentile, i.e. at least "
            f"{needed:,} samples in all (a longer run, or lower --thresholds / --min-exceedances)"
        )
    z = float(sstats.norm.ppf(0.5 + opts.confidence / 2))
    top = TopValues(math.ceil((1 - min(opts.thresholds)) * n_fit) + 1)
    blocks = BlockMaxima(n_fit, min(opts.stationarity_blocks, n_fit // 20))
    model: _Choice | None = None
    counter: ExceedanceCounter | None = None
    val_top: TopValues | None = None
    first_time = last_time = None
    fit_end_time = None
    for row, times, values in iter_series(pf, info):
        if first_time is None and len(times):
            first_time = int(times[0])
        if len(times):
            last_time = int(times[-1])
        cut = max(0, min(len(values), n_fit - row))
        if cut:
            top.add(values[:cut])
            blocks.add(row, values[:cut])
            if row + cut == n_fit:
                fit_end_time = int(times[cut - 1])
        if row + cut >= n_fit and model is None:
            model = _choose_and_extrapolate(top.descending(), n_fit, n - n_fit, opts, z)
            counter = ExceedanceCounter(model.levels, opts.decluster_packets)
            val_top = TopValues(min(1_000_000, 4 * model.chosen.exceedances + 100))
        if cut < len(values):
            assert counter is not None and val_top is not None  # made once the fit part was read
            counter.add(row + cut - n_fit, values[cut:])
            val_top.add(values[cut:])
        if on_progress:
            on_progress(row + len(values), n)
    assert model is not None and counter is not None and val_top is not None
    span_ns = (last_time - first_time) if first_time is not None and last_time is not None else 0
    measured_rate = (n - 1) / (span_ns / 1e9) if span_ns > 0 else None
    return _document(
        info,
        n,
        n_fit,
        opts,
        model,
        counter,
        val_top,
        blocks,
        rate_pps or measured_rate,
        measured_rate,
        fit_end_time,
        first_time,
    )


def evt_of_source(
    src: SeriesSource,
    opts: EvtOptions | None = None,
    rate_pps: float | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvtDocument:
    """`evt_model` of a series found by `series_source`, named after it, and partial when
    the analysis it comes from is."""
    doc = evt_model(src.path, opts, rate_pps=rate_pps, on_progress=on_progress)
    doc["source"] = src.label
    if src.partial:
        doc["partial"] = True
        doc["partial_reasons"].append("the analysis the series comes from is partial")
    return doc


def evt_and_store(
    store: Store | None,
    source: str,
    opts: EvtOptions | None = None,
    *,
    rate_pps: float | None = None,
    save: bool = True,
    label: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvtDocument:
    """The EVT model of `source` — a Parquet series file, a run id (12, run:12) or
    analysis:ID (`series_source`; a stored one needs `store`) — stored as an `evt` model
    result linked to its run or analysis when `save` (the document then carries its `model_id`)."""
    src = series_source(store, source)
    doc = evt_of_source(src, opts, rate_pps=rate_pps, on_progress=on_progress)
    if save:
        if store is None:
            raise UserError("storing the model needs the database (--db)")
        inputs = {"input": source, "series": src.path, **doc["options"], "rate": rate_pps}
        doc["model_id"] = save_model(
            store, EVT, inputs, doc, label=label, run_id=src.run_id, analysis_id=src.analysis_id, source=src.label
        )
    return doc


@dataclass(frozen=True)
class _Choice:
    """The threshold chosen among the fits of the fit part, what it extrapolates to and what
    the validation part is counted against."""

    fits: list[ThresholdFit]
    chosen: ThresholdFit
    xi_ci: tuple[float, float] | None  # the hull of ξ's intervals over every usable threshold
    zeta: float  # the share of the fit part above the threshold
    levels: list[float]  # the return levels of the validation part's length, /10, /100 (NaN: none)
    periods: list[float]  # those return periods, in packets
    top_max: float | None  # the fit part's largest value
    z: float  # the normal quantile of the confidence


def _choose_and_extrapolate(top: np.ndarray, n_fit: int, n_val: int, opts: EvtOptions, z: float) -> _Choice:
    fits = [_fit_threshold(p, top, n_fit, opts, z) for p in sorted(opts.thresholds)]
    usable = [f for f in fits if f.converged and f.js_divergence is not None]
    if not usable:
        too_few = [f for f in fits if f.exceedances < opts.min_exceedances]
        if len(too_few) == len(fits):
            raise UserError(
                f"too few samples in the tail: {fits[0].note} at the {_pct(fits[0].percentile):g}th "
                f"percentile (a longer run, or --min-exceedances / --thresholds)"
            )
        reasons = "; ".join(f"{_pct(f.percentile):g}th: {f.note}" for f in fits)
        raise Failure(f"the GPD fit did not converge at any threshold ({reasons})")
    chosen = min(usable, key=lambda f: (f.js_divergence, f.percentile))
    # The threshold is chosen from the same data: a bounded tail is claimed only when ξ's
    # interval lies below 0 at every threshold the choice was made among, so the claim does
    # not rest on the threshold whose sample happened to look bounded. The interval shown is
    # their hull (chosen.xi_ci keeps the chosen threshold's own).
    intervals = [f.xi_ci for f in usable]
    hull = (
        (min(i[0] for i in intervals if i), max(i[1] for i in intervals if i)) if intervals and all(intervals) else None
    )
    zeta = chosen.exceedances / n_fit
    assert chosen.sigma_ns is not None and chosen.xi is not None  # a usable fit has both
    levels = [return_level(n_val, chosen.threshold_ns, zeta, chosen.sigma_ns, chosen.xi)]
    levels += [
        return_level(n_val / 10, chosen.threshold_ns, zeta, chosen.sigma_ns, chosen.xi),
        return_level(n_val / 100, chosen.threshold_ns, zeta, chosen.sigma_ns, chosen.xi),
    ]
    return _Choice(
        fits=fits,
        chosen=chosen,
        xi_ci=hull,
        zeta=zeta,
        levels=[lv if lv is not None else math.nan for lv in levels],
        periods=[n_val, n_val / 10, n_val / 100],
        top_max=float(top[0]) if len(top) else None,
        z=z,
    )


def _stationarity(maxima: np.ndarray, block_size: int) -> EvtStationarity:
    """ADF (null: unit root) and KPSS (null: stationary) on the fit part's block maxima."""
    from statsmodels.tools.sm_exceptions import InterpolationWarning
    from statsmodels.tsa.stattools import adfuller, kpss

    series = f"maxima of {len(maxima)} consecutive blocks of {block_size:,} packets in the fit part"
    if len(maxima) < 20 or np.ptp(maxima) == 0:
        return {
            "series": series,
            "blocks": len(maxima),
            "block_packets": block_size,
            "adf_p": None,
            "kpss_p": None,
            "verdict": "not tested",
            "note": "fewer than 20 blocks or constant maxima: the tests need a varying series",
        }
    x = maxima.astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # statsmodels announces a new result type
        adf_p = float(adfuller(x, autolag="AIC")[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InterpolationWarning)
        kpss_p = float(kpss(x, regression="c", nlags="auto")[1])
    caught = [w for w in caught if issubclass(w.category, InterpolationWarning)]
    stationary_adf, stationary_kpss = adf_p < 0.05, kpss_p > 0.05
    verdict = (
        "stationary"
        if stationary_adf and stationary_kpss
        else "not stationary"
        if not stationary_adf and not stationary_kpss
        else "inconclusive"
    )
    return {
        "series": series,
        "blocks": len(maxima),
        "block_packets": block_size,
        # statsmodels reports KPSS p-values only inside its table (0.01 … 0.1).
        "kpss_p_bound": ("lower" if kpss_p >= 0.1 else "upper") if caught else None,
        "adf_p": adf_p,
        "kpss_p": kpss_p,
        "verdict": verdict,
    }


def _downsample_log(xs: np.ndarray, count: int) -> np.ndarray:
    """Indices of about `count` points evenly spaced on a log scale of rank."""
    if len(xs) <= count:
        return np.arange(len(xs))
    return np.unique(np.geomspace(1, len(xs), count).astype(np.int64) - 1)


def _document(
    info: SeriesInfo,
    n: int,
    n_fit: int,
    opts: EvtOptions,
    model: _Choice,
    counter: ExceedanceCounter,
    val_top: TopValues,
    blocks: BlockMaxima,
    rate: float | None,
    measured_rate: float | None,
    fit_end_time: int | None,
    first_time: int | None,
) -> EvtDocument:
    chosen = model.chosen
    fit: gpd.GpdFit = chosen.fit
    top_fit_max = model.top_max
    u, zeta, z, n_val = chosen.threshold_ns, model.zeta, model.z, n - n_fit

    def level_row(m: float) -> ReturnLevel:
        x = return_level(m, u, zeta, fit.sigma, fit.xi)
        se = _return_level_se(m, zeta, n_fit, fit) if x is not None else None
        ci = [x - z * se, x + z * se] if x is not None and se is not None else None
        return {"packets": m, "level_ns": x, "ci_ns": ci}

    return_levels = {str(int(m)): level_row(m) for m in opts.return_periods}
    horizons: dict[str, HorizonLevel] = {}
    if rate:
        for name, seconds in HORIZONS_S.items():
            horizons[name] = {"seconds": seconds, **level_row(rate * seconds)}
    xi_ci = model.xi_ci  # over every threshold the choice was made among
    endpoint, endpoint_ci = _endpoint(u, fit, z, xi_ci)
    checks: list[ValidationCheck] = []
    for i, m in enumerate(model.periods):
        level = model.levels[i]
        checks.append(
            {
                "return_period": m,
                "return_level_ns": level if math.isfinite(level) else None,
                "expected": n_val / m,
                "exceedances": counter.events[i],
                "exceedance_samples": counter.samples[i],
            }
        )
    validation: EvtValidation = {
        "samples": n_val,
        "return_period": n_val,
        "return_level_ns": checks[0]["return_level_ns"],
        "expected": 1.0,
        "exceedances": counter.events[0],
        "exceedance_samples": counter.samples[0],
        "decluster_packets": opts.decluster_packets,
        "first_exceedance_rows": [n_fit + r for r in counter.first_rows[0]],
        "max_ns": int(val_top.descending()[0]) if val_top.size else None,
        "checks": checks,
    }
    stationarity = _stationarity(blocks.maxima, blocks.size)
    partial_reasons = []
    if fit.cov is None:
        partial_reasons.append(
            "the information matrix is singular: σ, the upper end and the return levels have no confidence interval "
            "(ξ's is the profile likelihood's, which needs none)"
        )
    if stationarity["adf_p"] is None:
        partial_reasons.append("stationarity not tested: " + stationarity.get("note", ""))
    doc: EvtDocument = {
        "input": info.path,
        "samples": n,
        "fit_samples": n_fit,
        "validation_samples": n_val,
        "fit_fraction": float(opts.fit_fraction),
        "fit_end_ns": fit_end_time,
        "start_ns": first_time,
        "rate_pps": rate,
        "measured_rate_pps": measured_rate,
        "confidence": opts.confidence,
        "threshold_percentile": _pct(chosen.percentile),
        "threshold_ns": u,
        "exceedances": chosen.exceedances,
        "zeta": zeta,
        "sigma_ns": fit.sigma,
        "sigma_ci_ns": list(chosen.sigma_ci) if chosen.sigma_ci else None,
        "xi": fit.xi,
        "xi_ci": list(xi_ci) if xi_ci else None,
        "bounded": shown_bounded(xi_ci),
        "endpoint_ns": endpoint,
        "endpoint_ci_ns": list(endpoint_ci) if endpoint_ci else None,
        "js_divergence": chosen.js_divergence,
        "js_binning": f"{opts.js_bins} bins of equal probability under each fitted GPD (edges at its k/{opts.js_bins} "
        "quantiles, the last bin open-ended); divergence in bits, 0 = identical",
        "note": fit.message,
        "thresholds": [_threshold_row(f) for f in model.fits],
        "return_levels_ns": {k: v["level_ns"] for k, v in return_levels.items()},
        "return_levels": return_levels,
        "horizons": horizons,
        "validation": validation,
        "stationarity": stationarity,
        "plot": _plot_data(chosen, n_fit, n_val, val_top, fit, u, zeta, z),
        "partial": bool(partial_reasons),
        "partial_reasons": partial_reasons,
        "options": _options_document(opts),
        "warnings": [],
        "credible": True,
    }
    observed = max(int(top_fit_max or 0), int(validation["max_ns"] or 0))
    doc["warnings"] = credibility_warnings(doc, observed)
    if refutes(doc, observed):
        # A bounded tail whose upper end lies below a latency of the same series is refuted
        # by it (the validation part's, as the fit's own lie below its end by construction):
        # not claimed bounded, and no upper end is stated.
        doc["bounded"], doc["endpoint_ns"], doc["endpoint_ci_ns"] = False, None, None
        doc["refuted_by_ns"] = observed
    doc["credible"] = not doc["warnings"]
    return doc


# A return level beyond this many times the largest latency seen is far beyond the data.
FAR_BEYOND_OBSERVED = 100


def credibility_warnings(doc: Mapping[str, Any], observed_max_ns: int) -> list[str]:
    """Why a fitted tail model is not to be believed, in words (empty: nothing found): an
    upper end below a latency the series holds (`refutes`), ξ ≥ 1 (the fitted tail has no
    finite mean) or ξ ≥ 0.5 (no finite variance: the Wald intervals of its return levels
    mean little), intervals that reach below zero latency, and return levels more than
    FAR_BEYOND_OBSERVED times the largest latency seen."""
    xi, found = doc["xi"], []
    if refutes(doc, observed_max_ns):
        end, ci = doc["endpoint_ns"], doc["endpoint_ci_ns"]
        within = f" ({100 * doc['confidence']:g} % interval {format_ns_interval(ci)})" if ci else ""
        found.append(
            f"the fitted tail ends at {format_ns(end)}{within}, yet the series holds {format_ns(observed_max_ns)}: "
            f"its own data refute the model and its return levels; the tail is not shown bounded"
        )
    if xi >= 1:
        found.append(
            f"ξ = {xi:.3f} ≥ 1: the fitted tail has an infinite mean; its return levels grow without bound "
            f"and are not estimates of any latency"
        )
    elif xi >= 0.5:
        found.append(
            f"ξ = {xi:.3f} ≥ 0.5: the fitted tail has an infinite variance; its return levels and their "
            f"intervals are unstable"
        )
    rows = {**{f"{int(float(m)):,} packets": r for m, r in doc["return_levels"].items()}, **doc["horizons"]}
    below = [name for name, r in rows.items() if r.get("ci_ns") and r["ci_ns"][0] < 0]
    if below:
        found.append(
            f"the {100 * doc['confidence']:g} % intervals reach below zero latency ({', '.join(below)}): the "
            f"normal approximation behind them does not hold"
        )
    far = [
        name for name, r in rows.items() if r.get("level_ns") and r["level_ns"] > FAR_BEYOND_OBSERVED * observed_max_ns
    ]
    if far and observed_max_ns > 0:
        found.append(
            f"return levels far beyond anything observed ({', '.join(far)}: more than {FAR_BEYOND_OBSERVED}× the "
            f"largest latency seen, {format_ns(observed_max_ns)})"
        )
    return found


def _pct(p: Fraction) -> float:
    """An exact quantile as a percentage, the float nearest it (999/1000 → 99.9)."""
    return float(100 * p)


def _options_document(opts: EvtOptions) -> EvtOptionsDocument:
    """The options as JSON holds them (in EvtOptions' field order, as stored): exact quantiles
    as their nearest floats, tuples as lists."""
    return {
        "fit_fraction": float(opts.fit_fraction),
        "thresholds": [float(p) for p in opts.thresholds],
        "min_exceedances": opts.min_exceedances,
        "js_bins": opts.js_bins,
        "confidence": opts.confidence,
        "return_periods": list(opts.return_periods),
        "stationarity_blocks": opts.stationarity_blocks,
        "decluster_packets": opts.decluster_packets,
    }


def _threshold_row(f: ThresholdFit) -> EvtThreshold:
    return {
        "percentile": _pct(f.percentile),
        "threshold_ns": f.threshold_ns,
        "exceedances": f.exceedances,
        "converged": f.converged,
        "sigma_ns": f.sigma_ns,
        "xi": f.xi,
        "sigma_ci_ns": list(f.sigma_ci) if f.sigma_ci else None,
        "xi_ci": list(f.xi_ci) if f.xi_ci else None,
        "js_divergence": f.js_divergence,
        "note": f.note,
    }


def _plot_data(
    chosen: ThresholdFit, n_fit: int, n_val: int, val_top: TopValues, fit: gpd.GpdFit, u: int, zeta: float, z: float
) -> EvtPlot:
    """What the return-level and QQ plots need, small enough to store with the result."""
    # Empirical return levels: the k-th largest value recurs every n/k packets.
    emp_fit = []
    exceed = np.sort(chosen.data)[::-1] + u
    for i in _downsample_log(exceed, _PLOT_POINTS):
        emp_fit.append([n_fit / (i + 1), int(exceed[i])])
    emp_val = []
    vt = val_top.descending()
    vt = vt[vt > u]
    for i in _downsample_log(vt, _PLOT_POINTS):
        emp_val.append([n_val / (i + 1), int(vt[i])])
    m_lo = max(1.0 / zeta, 1.0)
    periods = np.geomspace(m_lo, max(1e10, 10 * n_val), 120)
    curve = []
    for m in periods:
        x = return_level(m, u, zeta, fit.sigma, fit.xi)
        assert x is not None  # m ≥ 1/ζ: at least one exceedance on average
        se = _return_level_se(m, zeta, n_fit, fit)
        curve.append([float(m), x, None if se is None else x - z * se, None if se is None else x + z * se])
    # QQ: empirical exceedances against model quantiles at plotting positions i/(n+1).
    y = np.sort(chosen.data)
    idx = np.unique(np.linspace(0, len(y) - 1, min(len(y), _PLOT_POINTS)).round().astype(np.int64))
    model_q = gpd.quantile((idx + 1) / (len(y) + 1), fit.sigma, fit.xi)
    qq = [[float(mq + u), int(y[i] + u)] for mq, i in zip(model_q, idx)]
    return {"empirical_fit": emp_fit, "empirical_validation": emp_val, "curve": curve, "qq": qq}


__all__ = ["EvtOptions", "evt_model", "return_level", "required_samples", "DEFAULT_THRESHOLDS"]
