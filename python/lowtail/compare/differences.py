"""Whether two configurations differ at a percentile, by how much, and how sure.

The unit is the repetition: runs of one configuration differ from each other by more than
their packets' sampling error (a reboot, a core placement, a clock phase), so a difference
is judged against the run-to-run variation the repetitions show, never against the
packets alone. Per repetition, the percentile's exact value; on the log scale (latencies
vary by factors), the two configurations' means compared by Student's t with the pooled
variance and n_a + n_b − 2 degrees of freedom (a test whose false-call rate is its level
when the log percentile varies normally between runs; bench/stated_confidence.py measures it with
run-to-run variation at 2 and 3 repetitions). Each difference carries its effect size: the
ratio of the configurations' geometric means with its confidence interval.

Many comparisons are made at once (every pair of configurations at every headline
percentile): Holm's step-down procedure over all of them holds the chance of any false call
at the level. A percentile is judged only where every repetition's packets bound it; a
configuration with one repetition measures no run-to-run variation, and nothing is called
against it. Degraded runs, and an emulated (TCG) configuration against one that is not,
are compared and shown, never called: their latencies are not the device's."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from lowtail.compare.document import (
    DEGRADED,
    EMULATED,
    FEW_REPETITIONS,
    NO_LATENCY,
    NOT_SIGNIFICANT,
    RESOLUTION,
    UNBOUNDED,
    DifferenceDoc,
    DifferenceFamily,
    PairJudgement,
)
from lowtail.core import percentiles
from lowtail.core.units import format_ns

# The percentiles a difference is judged at: the headline ones from the median to the tail.
JUDGED = ("p50", "p99", "p99_9", "p99_99", "p99_999")
# The fewest repetitions per configuration a difference is called from. Two repetitions
# cannot show whether run-to-run variation is continuous: a device placed on one of two cores
# runs at one of two levels, and 2 + 2 repetitions that happen to fall on opposite levels
# look like a difference far beyond their spread (13 % of A/A pairs called; issue 35).
FEWEST_REPETITIONS = 3


@dataclass(frozen=True)
class Side:
    """One configuration at one percentile: each repetition's value (None where a run has
    none), whether each repetition's packets bound it, and what marks the configuration."""

    label: str
    values: list[int | None]
    bounded: list[bool]
    pooled_ns: int | None
    degraded: bool
    emulated: bool
    # Each repetition's interval of the percentile ([lower, upper], None where not stored):
    # its own sampling error, which run-to-run variation cannot be smaller than.
    spans: list[list[int | None] | None] = field(default_factory=list)

    @property
    def logs(self) -> list[float]:
        """The repetitions' values on the log scale (1 ns at least)."""
        return [math.log(max(v, 1)) for v in self.values if v is not None]

    def sampling_variances(self, level: float) -> list[float]:
        """Each repetition's sampling variance of its log value, from its interval at `level`
        (half its log width over the normal quantile), where one is stored."""
        from statistics import NormalDist

        z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)
        out = []
        for span in self.spans:
            if span and span[0] is not None and span[1] is not None:
                out.append(((math.log(max(span[1], 1)) - math.log(max(span[0], 1))) / (2.0 * z)) ** 2)
        return out


def side(configuration: Mapping[str, Any], key: str) -> Side:
    """A configuration of a comparison document at percentile `key`."""
    runs = configuration.get("per_run") or []
    return Side(
        label=configuration["label"],
        values=[(r.get("latency_ns") or {}).get(key) for r in runs],
        bounded=[bool((r.get("resolvable") or {}).get(key)) for r in runs],
        pooled_ns=(configuration.get("latency_ns") or {}).get(key),
        degraded=bool(configuration.get("degraded")),
        emulated=bool(configuration.get("emulated")),
        spans=[(r.get("intervals") or {}).get(key) for r in runs],
    )


def resolution_ns(values: Sequence[int]) -> int:
    """The timestamps' resolution the values show: their greatest common divisor (1 ns for
    nanosecond captures, 1,000 for microsecond ones, more for coarse NIC stamps)."""
    found = 0
    for v in values:
        found = math.gcd(found, abs(int(v)))
        if found == 1:
            break
    return max(found, 1)


@dataclass(frozen=True)
class Test:
    """Student's t on two configurations' log values."""

    ratio: float  # b's geometric mean over a's
    lower: float  # the ratio's confidence interval
    upper: float
    p_value: float
    df: int


def t_two_sided(t: float, df: int) -> float:
    """P(|T| ≥ |t|) for Student's T with `df` (an integer) degrees of freedom, exactly: the
    finite series in θ = atan(t/√df) (Abramowitz & Stegun 26.7.3–4), so that a comparison
    needs no scipy (whose import costs a `compare` most of a second)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):
                term *= c2 * (k - 1) / k
                total += term
        inside = 2.0 / math.pi * (theta + s * total)
    else:
        term = total = 1.0
        for k in range(2, df - 1, 2):
            term *= c2 * (k - 1) / k
            total += term
        inside = s * total
    return min(1.0, max(0.0, 1.0 - inside))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile at p > 0.5 with `df` degrees of freedom: `t_two_sided` inverted
    by bisection (to 1e-12 of the probability)."""
    target = 2.0 * (1.0 - p)
    lo, hi = 0.0, 1.0
    while t_two_sided(hi, df) > target:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return (lo + hi) / 2.0


def t_test(a: list[float], b: list[float], level: float, floor: float = 0.0) -> Test | None:
    """The pooled-variance t-test of b − a on log values; None without a degree of freedom,
    or when the repetitions show no variation at all (ties: then there is nothing to judge a
    difference against — never p = 0). `floor` is the least variance a repetition's log
    value has (its sampling error, its rounding to the timestamps' resolution): repetitions
    that tie do not make run-to-run variation smaller than that."""
    df = len(a) + len(b) - 2
    if len(a) < 1 or len(b) < 1 or df < 1:
        return None
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    squares = sum((x - mean_a) ** 2 for x in a) + sum((x - mean_b) ** 2 for x in b)
    variance = max(squares / df, floor)
    se = math.sqrt(variance * (1 / len(a) + 1 / len(b)))
    diff = mean_b - mean_a
    if se == 0.0:
        return None
    p = t_two_sided(diff / se, df)
    half = t_quantile(1.0 - (1.0 - level) / 2.0, df) * se
    return Test(math.exp(diff), math.exp(diff - half), math.exp(diff + half), p, df)


def holm(p_values: list[float], level: float) -> list[bool]:
    """Holm's step-down: which of these hypotheses are rejected with the chance of any false
    rejection at most `level`."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for step, i in enumerate(order):
        if p_values[i] > level / (len(p_values) - step):
            break
        rejected[i] = True
    return rejected


def _ratio_text(t: Test, a: str, b: str, level: float) -> str:
    return f"{b} is {t.ratio:.3g}× {a} ({100 * level:g} % interval {t.lower:.3g}×–{t.upper:.3g}×)"


class _TestFigures(TypedDict):
    ratio: float
    ratio_lower: float
    ratio_upper: float
    p_value: float
    df: int
    repetitions: list[int]
    difference_ns: int | None


def judge(a: Side, b: Side, key: str, level: float) -> PairJudgement:
    """One pair at one percentile, before the family's correction: the test (when one can
    be made) and, when the pair cannot be called whatever the test says, why."""
    short = percentiles.by_key(key).short
    base = _Pair(a, b, key, short)
    for s in (a, b):
        if s.pooled_ns is None or not s.logs:
            return base.not_called(NO_LATENCY, f"{s.label} has no latency to compare")
    unbounded = [s.label for s in (a, b) if not all(s.bounded)]
    if unbounded:
        return base.not_called(
            UNBOUNDED, f"the packets of a repetition of {' and '.join(unbounded)} do not bound its {short}"
        )
    if min(len(a.logs), len(b.logs)) < 2:
        single = [s.label for s in (a, b) if len(s.logs) < 2]
        return base.not_called(
            FEW_REPETITIONS, f"one repetition of {' and '.join(single)}: run-to-run variation not measured"
        )
    if min(len(a.logs), len(b.logs)) < FEWEST_REPETITIONS:
        few = [s.label for s in (a, b) if len(s.logs) < FEWEST_REPETITIONS]
        return base.not_called(
            FEW_REPETITIONS,
            f"not enough repetitions: {' and '.join(few)} has 2, which cannot show whether run-to-run variation "
            f"is continuous or comes in levels (one core placement or another); at least {FEWEST_REPETITIONS} are needed",
        )
    values = [v for s in (a, b) for v in s.values if v is not None]
    step = resolution_ns(values + [e for s in (a, b) for span in s.spans if span for e in span if e is not None])
    geometric = [math.exp(sum(s.logs) / len(s.logs)) for s in (a, b)]
    if abs(geometric[1] - geometric[0]) <= step * (1 + 1e-9):  # within rounding of the step
        return base.not_called(
            RESOLUTION,
            f"the repetitions differ by {format_ns(abs(geometric[1] - geometric[0]), 1)}, within the timestamps' "
            f"resolution ({format_ns(step)}): not resolvable",
        )
    test = t_test(a.logs, b.logs, level, _variance_floor(a, b, level, step))
    if test is None:
        return base.not_called(
            RESOLUTION, "every repetition ties at one value on both sides: no variation to judge against"
        )
    if a.emulated != b.emulated:
        emulated = a.label if a.emulated else b.label
        return base.not_called(EMULATED, f"{emulated} ran under QEMU's emulator (TCG) and the other did not", test)
    degraded = [s.label for s in (a, b) if s.degraded]
    if degraded:
        return base.not_called(
            DEGRADED,
            f"runs of {' and '.join(degraded)} are degraded: shown, not the basis of a call",
            test,
        )
    return base.not_called(
        NOT_SIGNIFICANT,
        f"not beyond run-to-run variation: {_ratio_text(test, a.label, b.label, level)}",
        test,
    )


def _variance_floor(a: Side, b: Side, level: float, step: int) -> float:
    """The least variance of a repetition's log value: the mean of the repetitions' own
    sampling variances (from their intervals), and at least that of rounding to the
    timestamps' resolution (uniform over one step: step²/12, on the log scale)."""
    sampling = a.sampling_variances(level) + b.sampling_variances(level)
    smallest = min(v for s in (a, b) for v in s.values if v is not None)
    rounding = (step / max(smallest, 1)) ** 2 / 12.0
    return max(sum(sampling) / len(sampling) if sampling else 0.0, rounding)


def _test_doc(test: Test, a: Side, b: Side) -> _TestFigures:
    return {
        "ratio": test.ratio,
        "ratio_lower": test.lower,
        "ratio_upper": test.upper,
        "p_value": test.p_value,
        "df": test.df,
        "repetitions": [len(a.logs), len(b.logs)],
        "difference_ns": (b.pooled_ns or 0) - (a.pooled_ns or 0),
    }


@dataclass(frozen=True)
class _Pair:
    """The pair being judged at one percentile (`short`: the percentile as words name it)."""

    a: Side
    b: Side
    key: str
    short: str

    def not_called(self, reason: str, why: str, test: Test | None = None) -> PairJudgement:
        """The pair not called, and why (with the test's figures when one was made)."""
        a, b, text = self.a, self.b, f"{self.a.label} and {self.b.label} at {self.short}: not called: {why}"
        if test is None:
            return {
                "a": a.label,
                "b": b.label,
                "percentile": self.key,
                "resolved": False,
                "lower": None,
                "higher": None,
                "reason": reason,
                "why": why,
                "text": text,
                "note": None,
                "difference_ns": None,
            }
        return {
            "a": a.label,
            "b": b.label,
            "percentile": self.key,
            "resolved": False,
            **_test_doc(test, a, b),
            "lower": None,
            "higher": None,
            "reason": reason,
            "why": why,
            "text": text,
            "note": None,
        }


def _called(d: DifferenceDoc, level: float, family: int) -> DifferenceDoc:
    """A pair the family's correction calls different: the sentence that says so."""
    short = percentiles.by_key(d["percentile"]).short
    lo, hi = (d["a"], d["b"]) if d["ratio"] >= 1 else (d["b"], d["a"])
    ratio, lower, upper = (
        (d["ratio"], d["ratio_lower"], d["ratio_upper"])
        if d["ratio"] >= 1
        else (1 / d["ratio"], 1 / d["ratio_upper"], 1 / d["ratio_lower"])
    )
    n_a, n_b = d["repetitions"]
    assert d["difference_ns"] is not None  # a tested pair has its difference
    return {
        **d,
        "resolved": True,
        "lower": lo,
        "higher": hi,
        "reason": None,
        "why": None,
        "text": (
            f"{lo} is lower than {hi} at {short} by {format_ns(abs(d['difference_ns']), 1)}: {hi} is {ratio:.3g}× "
            f"{lo} ({100 * level:g} % interval {lower:.3g}×–{upper:.3g}×; {n_a} and {n_b} repetitions, "
            f"p = {d['p_value']:.2g}, Holm over {family} comparisons)"
        ),
    }


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The axes on which two configurations differ: a pair that differs on one only
    isolates its effect."""
    return [name for name in a["key"] if a["key"].get(name) != b["key"].get(name)]


def differences(
    configurations: Sequence[Mapping[str, Any]], level: float, keys: tuple[str, ...] = JUDGED
) -> tuple[list[DifferenceDoc], list[DifferenceDoc], DifferenceFamily]:
    """Every pair of configurations at every judged percentile: (the differences called,
    the pairs not called with why, the family: its size, level and procedure)."""
    judged = [c for c in configurations if c.get("latency_ns")]
    pairs: list[DifferenceDoc] = []
    for i, a in enumerate(judged):
        for b in judged[i + 1 :]:
            for key in keys:
                d = judge(side(a, key), side(b, key), key, level)
                pairs.append({**d, "a_index": a["index"], "b_index": b["index"], "axes_differing": _differing(a, b)})
    family = [d for d in pairs if d["reason"] == NOT_SIGNIFICANT]
    for d, rejected in zip(family, holm([d["p_value"] for d in family], 1.0 - level)):
        if rejected:
            d.update(_called(d, level, len(family)))
    called = [d for d in pairs if d["resolved"]]
    return (
        called,
        [d for d in pairs if not d["resolved"]],
        {"comparisons": len(family), "level": level, "procedure": "Holm", "percentiles": list(keys)},
    )
