"""The generalized Pareto distribution (GPD) of exceedances y = x − u > 0:

    F(y) = 1 − (1 + ξ·y/σ)^(−1/ξ)      (ξ ≠ 0),      1 − exp(−y/σ)      (ξ = 0)

fitted by maximum likelihood, with Wald intervals from the observed information.

The likelihood is maximised over one variable: for θ = ξ/σ the best ξ is
mean(log(1 + θ·y)) in closed form (Grimshaw 1993), so a scan over θ followed by a
bounded Brent search finds the global maximum without a starting guess. When the
likelihood keeps rising towards ξ = −1 (a sharp cut-off at the largest value: the
maximum-likelihood estimate does not exist) or towards an unbounded ξ, the fit is
reported as not converged instead of returning a boundary value."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

_XI_ZERO = 1e-9


@dataclass(frozen=True)
class GpdFit:
    sigma: float
    xi: float
    n: int
    log_likelihood: float
    converged: bool
    message: str = ""
    # Covariance of (sigma, xi) from the observed information; None when singular.
    cov: tuple[tuple[float, float], tuple[float, float]] | None = None

    def se(self) -> tuple[float, float] | None:
        if self.cov is None:
            return None
        return math.sqrt(self.cov[0][0]), math.sqrt(self.cov[1][1])


def log_likelihood(y: np.ndarray, sigma: float, xi: float) -> float:
    """Log-likelihood of exceedances `y` under a GPD(σ, ξ); −inf outside its support."""
    if sigma <= 0:
        return -math.inf
    if abs(xi) < _XI_ZERO:
        return -len(y) * math.log(sigma) - float(np.sum(y)) / sigma
    z = 1.0 + xi * y / sigma
    if np.any(z <= 0):
        return -math.inf
    return -len(y) * math.log(sigma) - (1.0 + 1.0 / xi) * float(np.sum(np.log(z)))


def _profile(y: np.ndarray, theta: float) -> float:
    """Log-likelihood maximised over ξ for a fixed θ = ξ/σ."""
    n = len(y)
    if abs(theta) < 1e-300:
        return -n * math.log(float(np.mean(y))) - n
    xi = float(np.mean(np.log1p(theta * y)))
    if xi == 0.0 or xi / theta <= 0:
        return -n * math.log(float(np.mean(y))) - n
    return -n * math.log(xi / theta) - n * (1.0 + xi)


def _profile_many(y: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    """`_profile` at many θ at once, in slices that keep the work matrix near 4 M cells."""
    n = len(y)
    out = np.empty(len(thetas))
    step = max(1, 4_000_000 // n)
    for i in range(0, len(thetas), step):
        t = thetas[i : i + step]
        xi = np.log1p(np.outer(t, y)).mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = -n * np.log(xi / t) - n * (1.0 + xi)
        exponential = (t == 0) | (xi == 0) | ~(xi / np.where(t == 0, 1, t) > 0)
        out[i : i + step] = np.where(exponential, -n * math.log(float(np.mean(y))) - n, ll)
    return out


def fit(y: np.ndarray) -> GpdFit:
    """Maximum-likelihood GPD fit of positive exceedances `y`."""
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    if n < 3 or not np.all(np.isfinite(y)) or np.any(y <= 0):
        return GpdFit(math.nan, math.nan, n, math.nan, False, "needs at least 3 positive, finite exceedances")
    y_max = float(np.max(y))
    if float(np.min(y)) == y_max:
        return GpdFit(math.nan, math.nan, n, math.nan, False, "all exceedances are equal: no tail shape to fit")
    # s = θ·y_max lies in (−1, ∞); scan it on a grid dense near −1 and across decades above 0.
    # The likelihood always grows without bound as s → −1 (ξ → −∞, the density piles up at
    # the largest value), so the estimate is the best interior local maximum with ξ > −1.
    negative = -(1.0 - np.logspace(-8, 0, 40, endpoint=False))
    grid = np.concatenate([negative, [-1e-6, 0.0, 1e-6], np.logspace(-4, 6, 40)])
    values = _profile_many(_scan_sample(y), grid / y_max)
    candidates = []
    for i in range(1, len(grid) - 1):
        if values[i] >= values[i - 1] and values[i] >= values[i + 1] and np.isfinite(values[i]):
            lo, hi = grid[max(i - 2, 0)], grid[min(i + 2, len(grid) - 1)]
            res = optimize.minimize_scalar(
                lambda s: -_profile(y, s / y_max),
                bounds=(lo, hi),
                method="bounded",
                options={"xatol": 1e-10 * max(1e-6, hi - lo)},
            )
            s = float(res.x)
            sigma, xi = _parameters(y, s / y_max)
            if xi > -1.0:
                candidates.append((log_likelihood(y, sigma, xi), sigma, xi))
    if not candidates:
        rising = "ξ = −1 (a sharp cut-off at the largest value)" if values[0] > values[-1] else "ever heavier tails"
        return GpdFit(
            math.nan,
            math.nan,
            n,
            math.nan,
            False,
            f"the likelihood has no maximum: it keeps rising towards {rising}; try another threshold or more data",
        )
    ll, sigma, xi = max(candidates)
    return GpdFit(sigma, xi, n, ll, True, _regularity_note(xi), _covariance(y, sigma, xi))


def _scan_sample(y: np.ndarray, size: int = 20_000) -> np.ndarray:
    """Evenly spaced order statistics (always including the largest) for the coarse scan:
    it only has to bracket the maximum, which is then refined on all the data."""
    if len(y) <= size:
        return y
    ordered = np.sort(y)
    return ordered[np.linspace(0, len(y) - 1, size).round().astype(np.int64)]


def _parameters(y: np.ndarray, theta: float) -> tuple[float, float]:
    """(σ, ξ) at the profile point θ = ξ/σ."""
    if abs(theta) < 1e-300:
        return float(np.mean(y)), 0.0
    xi = float(np.mean(np.log1p(theta * y)))
    return (xi / theta if xi != 0.0 else float(np.mean(y))), xi


def _regularity_note(xi: float) -> str:
    if xi < -0.5:
        return "ξ < −0.5: maximum-likelihood intervals are unreliable there (the likelihood is not regular)"
    return ""


def _covariance(y: np.ndarray, sigma: float, xi: float) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Inverse of the observed information, by central differences of the log-likelihood."""
    hs, hx = 1e-4 * sigma, 1e-4

    def f(s: float, x: float) -> float:
        return log_likelihood(y, s, x)

    f0 = f(sigma, xi)
    fss = (f(sigma + hs, xi) - 2 * f0 + f(sigma - hs, xi)) / hs**2
    fxx = (f(sigma, xi + hx) - 2 * f0 + f(sigma, xi - hx)) / hx**2
    fsx = (f(sigma + hs, xi + hx) - f(sigma + hs, xi - hx) - f(sigma - hs, xi + hx) + f(sigma - hs, xi - hx)) / (
        4 * hs * hx
    )
    info = -np.array([[fss, fsx], [fsx, fxx]])
    if not np.all(np.isfinite(info)) or np.linalg.det(info) <= 0 or info[0, 0] <= 0:
        return None
    cov = np.linalg.inv(info)
    return ((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1])))


def _profile_xi(y: np.ndarray, xi: float) -> float:
    """The log-likelihood at shape ξ, maximised over σ (σ > −ξ·max(y) when ξ < 0)."""
    least = max(0.0, -xi * float(np.max(y))) * (1.0 + 1e-12)
    mean = float(np.mean(y))
    lo, hi = math.log(max(least, mean * 1e-6)), math.log(mean * 1e3 + least)
    res = optimize.minimize_scalar(lambda ls: -log_likelihood(y, math.exp(ls), xi), bounds=(lo, hi), method="bounded")
    return -float(res.fun)


def profile_interval(y: np.ndarray, fit: GpdFit, level: float) -> tuple[float, float] | None:
    """ξ's profile-likelihood interval at `level`: the shapes whose likelihood, maximised over
    σ, lies within χ²₁(level)/2 of the maximum (Coles, *An Introduction to Statistical
    Modeling of Extreme Values*, §2.6.6). Unlike the Wald interval it is as asymmetric as the
    likelihood, which it is for the few hundred exceedances a tail has; the Wald interval
    claimed a bounded tail on an exponential one 5 times as often as it states. None when
    the fit did not converge."""
    if not fit.converged:
        return None
    y = np.asarray(y, dtype=np.float64)
    drop = float(stats.chi2.ppf(level, 1)) / 2.0
    target = fit.log_likelihood - drop

    def below(xi: float) -> float:
        return _profile_xi(y, xi) - target

    ends = []
    for direction in (-1.0, 1.0):
        step, inner = 0.05, fit.xi
        outer = fit.xi + direction * step
        while below(outer) > 0.0:
            inner, step = outer, step * 2.0
            outer = fit.xi + direction * step
            if abs(outer - fit.xi) > 20.0:
                return None  # no end on this side: the shape is not bounded by these data
        ends.append(float(optimize.brentq(below, min(inner, outer), max(inner, outer), xtol=1e-6)))
    return ends[0], ends[1]


def quantile(p: np.ndarray | float, sigma: float, xi: float) -> np.ndarray:
    """Exceedance y with F(y) = p."""
    p = np.asarray(p, dtype=np.float64)
    if abs(xi) < _XI_ZERO:
        return np.asarray(-sigma * np.log1p(-p))
    return np.asarray(sigma / xi * (np.power(1.0 - p, -xi) - 1.0))


def cdf(y: np.ndarray, sigma: float, xi: float) -> np.ndarray:
    """The GPD(σ, ξ) distribution function at `y`."""
    return np.asarray(stats.genpareto.cdf(y, xi, loc=0.0, scale=sigma))


def sample(n: int, sigma: float, xi: float, rng: np.random.Generator) -> np.ndarray:
    """`n` draws from a GPD(σ, ξ), by inverting its distribution function."""
    return quantile(rng.random(n), sigma, xi)


def js_divergence(y: np.ndarray, sigma: float, xi: float, bins: int) -> float:
    """Jensen–Shannon divergence (base 2, 0…1) between the exceedances and the model,
    over `bins` bins of equal probability under the model: edges at the model quantiles
    k/bins, the last bin open to the model's upper end. Every model bin holds 1/bins, so
    no bin is empty on the model side and each carries the same weight."""
    edges = quantile(np.arange(1, bins) / bins, sigma, xi)
    counts = np.bincount(np.searchsorted(edges, y, side="right"), minlength=bins).astype(np.float64)
    p = counts / counts.sum()
    q = np.full(bins, 1.0 / bins)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log2(p / m), 0.0).sum()
    kl_q = (q * np.log2(q / m)).sum()
    return float((kl_p + kl_q) / 2)
