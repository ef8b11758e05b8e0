"""Whether two configurations differ at a tail percentile beyond what these runs can tell
apart, and how to say it.

Two configurations differ at p99.9/p99.99/p99.999 only when (1) the data bound the
percentile of both (their order-statistic intervals are finite), (2) the intervals do not
overlap, (3) neither do the per-repetition values (run-to-run variation), and (4) the
difference of the pooled values is larger than the noise floor's own spread at that
percentile (the calibration's repetitions, where there are several). Otherwise the pair
is "not resolvable with these runs", with the first reason that applies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lowtail import percentiles
from lowtail.units import format_count, format_ns

# The percentiles a difference is judged at: the tail the budgets are about.
TAIL = ("p99_9", "p99_99", "p99_999")
# Why a pair is not resolvable (`reason` of an unresolved pair), in the order checked.
NO_LATENCY, UNBOUNDED, INTERVALS, REPETITIONS, FLOOR = "no latency", "unbounded", "intervals", "repetitions", "floor"


@dataclass(frozen=True)
class Side:
    """One configuration at one percentile: its pooled value, interval and spread over
    repetitions, and its floor's spread (None when unknown)."""

    label: str
    value_ns: int | None
    interval: dict[str, Any] | None
    spread: dict[str, int | None] | None
    repetitions: int
    samples: int
    floor_width_ns: int | None


def side(configuration: Mapping[str, Any], key: str) -> Side:
    """A configuration of a comparison document at percentile `key`."""
    floor = configuration.get("floor") or {}
    return Side(
        label=configuration["label"],
        value_ns=(configuration.get("latency_ns") or {}).get(key),
        interval=(configuration.get("intervals") or {}).get(key),
        spread=(configuration.get("spread") or {}).get(key),
        repetitions=configuration["repetitions"],
        samples=(configuration.get("latency_ns") or {}).get("samples") or 0,
        floor_width_ns=((floor.get("spread") or {}).get(key) or {}).get("width_ns"),
    )


def judge(a: Side, b: Side, key: str) -> dict[str, Any]:
    """The verdict on a pair at one percentile: `resolved`, `lower` and `higher` (labels),
    `difference_ns`, and `text`, the sentence a person reads."""
    short = percentiles.by_key(key).short
    base = {"a": a.label, "b": b.label, "percentile": key}
    for s in (a, b):
        if s.value_ns is None or not s.interval:
            return base | _unresolved(a, b, short, NO_LATENCY, f"{s.label} has no latency to compare")
        if not s.interval["resolvable"]:
            return base | _unresolved(
                a,
                b,
                short,
                UNBOUNDED,
                f"the {format_count(s.samples)} packets of {s.label} do not bound its {short} "
                f"(that takes {format_count(s.interval['packets_needed'])})",
            )
    lo, hi = (a, b) if a.value_ns <= b.value_ns else (b, a)
    difference = hi.value_ns - lo.value_ns
    if lo.interval["upper_ns"] >= hi.interval["lower_ns"]:
        return base | _unresolved(
            a, b, short, INTERVALS, f"intervals overlap ({_range(a.interval)} and {_range(b.interval)})", difference
        )
    if _known(lo.spread, "max") and _known(hi.spread, "min") and lo.spread["max"] >= hi.spread["min"]:
        return base | _unresolved(
            a,
            b,
            short,
            REPETITIONS,
            f"repetitions overlap ({_span(a.spread['min'], a.spread['max'])} and "
            f"{_span(b.spread['min'], b.spread['max'])})",
            difference,
        )
    widths = [w for w in (a.floor_width_ns, b.floor_width_ns) if w is not None]
    if widths and difference <= max(widths):
        return base | _unresolved(
            a,
            b,
            short,
            FLOOR,
            f"{format_ns(difference, 1)} is within the floor's own spread ({format_ns(max(widths), 1)})",
            difference,
        )
    single = [s.label for s in (a, b) if s.repetitions < 2]
    return base | {
        "resolved": True,
        "lower": lo.label,
        "higher": hi.label,
        "difference_ns": difference,
        "reason": None,
        "text": f"{lo.label} is lower than {hi.label} at {short} by {format_ns(difference, 1)} (intervals do not overlap)",
        "note": f"one repetition of {' and '.join(single)}: run-to-run variation not measured" if single else None,
    }


def _unresolved(a: Side, b: Side, short: str, reason: str, why: str, difference: int | None = None) -> dict[str, Any]:
    return {
        "resolved": False,
        "lower": None,
        "higher": None,
        "difference_ns": difference,
        "reason": reason,
        "text": f"{a.label} and {b.label} at {short}: not resolvable with these runs: {why}",
        "why": why,
        "note": None,
    }


def _known(spread: dict[str, int | None] | None, key: str) -> bool:
    return bool(spread) and spread.get(key) is not None


def _range(interval: dict[str, Any]) -> str:
    return _span(interval["lower_ns"], interval["upper_ns"])


def _span(lo: int, hi: int) -> str:
    return f"{format_ns(lo, 1)}–{format_ns(hi, 1)}"


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The axes on which two configurations differ: a pair that differs on one only
    isolates its effect."""
    return [name for name in a["key"] if a["key"].get(name) != b["key"].get(name)]


def differences(
    configurations: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every pair of configurations at every tail percentile: (the resolved differences,
    the pairs not resolvable with these runs), in configuration and percentile order."""
    resolved: list[dict[str, Any]] = []
    unresolved: list[dict[str, Any]] = []
    judged = [c for c in configurations if c.get("latency_ns")]
    for i, a in enumerate(judged):
        for b in judged[i + 1 :]:
            for key in TAIL:
                verdict = judge(side(a, key), side(b, key), key)
                verdict |= {"a_index": a["index"], "b_index": b["index"], "axes_differing": _differing(a, b)}
                (resolved if verdict["resolved"] else unresolved).append(verdict)
    return resolved, unresolved
