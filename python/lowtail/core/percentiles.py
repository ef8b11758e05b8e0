"""The headline percentiles: the ones every analysis computes exactly (nearest rank) and
stores as columns, in the order tables show them. The list is the native analysis's own
(`_native.HEADLINE_PERCENTILES`, its one owner); every key ("p99_999"), label ("99.999 %")
and fraction (0.99999) elsewhere in the package comes from here.

A percentile that decides a rank is carried exactly, as a `Fraction` (99.9 % is 999/1000):
a float cannot hold most of them (float("99.9") / 100 is 0.9990000000000001, one rank too
high whenever 0.999·n is whole). Floats are only for drawing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from lowtail import _native
from lowtail._native import HEADLINE_PERCENTILES
from lowtail.core.schema import ascii_digits


def exact_quantile(value: Fraction | int | float | str) -> Fraction:
    """A quantile (0.999) exactly: a float as the decimal it was written as (repr: the
    shortest decimal that reads back as it), a string as its decimal digits. ValueError
    for anything that is not a finite number."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value}")
        return Fraction(repr(value))
    if isinstance(value, str) and not ascii_digits(value.strip(), point=True):
        raise ValueError(f"not a number in ASCII digits: {value!r}")
    return Fraction(value)


def quantile_of_percent(percent: Fraction | int | float | str) -> Fraction:
    """The quantile a percent names, exactly: "99.9" → 999/1000 (also from the float 99.9)."""
    return exact_quantile(percent) / 100


def nearest_rank(q: Fraction | int, n: int) -> int:
    """The 1-based nearest rank of quantile `q` among `n` samples (⌈q·n⌉, clamped to 1…n,
    exact): the native analysis's own, as SQL's percentile_disc defines it."""
    return _native.nearest_rank(q, n)


def percent_label(digits: str) -> str:
    """How a percent written as digits is headed in tables, reports and plot axes: "99.999 %"."""
    return f"{digits} %"


@dataclass(frozen=True)
class Percentile:
    """One headline percentile: its key ("p99_999") and the exact quantile the native
    analysis takes its rank at (99999/100000)."""

    key: str
    quantile: Fraction

    @property
    def fraction(self) -> float:
        """The quantile as the nearest float (0.99999), for plot axes; never for ranks."""
        return float(self.quantile)

    def rank(self, n: int) -> int:
        """Its nearest rank among `n` samples."""
        return nearest_rank(self.quantile, n)

    @property
    def digits(self) -> str:
        """The percent as written, from the key so nothing rounds: "99.999"."""
        return self.key[1:].replace("_", ".")

    @property
    def percent(self) -> float:
        """99.999"""
        return float(self.digits)

    @property
    def label(self) -> str:
        """How tables and reports head it: "99.999 %"."""
        return percent_label(self.digits)

    @property
    def short(self) -> str:
        """The compact column heading of terminal tables: "p99.999"."""
        return "p" + self.digits


HEADLINE: tuple[Percentile, ...] = tuple(Percentile(key, q) for key, q in HEADLINE_PERCENTILES)
KEYS: tuple[str, ...] = tuple(p.key for p in HEADLINE)

# The percentiles at which an IPS's matching packets are compared with the others (the
# rule's work: experiment/matching.py), and which the matching table shows side by side.
MATCHING_PERCENTILES: tuple[str, ...] = ("p50", "p99")

# The extremes shown around the percentiles, with the fraction they stand for.
MIN, MAX = "min", "max"
EXTREME_FRACTIONS = {MIN: 0.0, MAX: 1.0}


def by_key(key: str) -> Percentile:
    """The headline percentile with this key ("p99_999"); KeyError for any other."""
    for p in HEADLINE:
        if p.key == key:
            return p
    raise KeyError(key)


def by_percent(percent: float) -> Percentile | None:
    """The headline percentile at this percent (99.999), or None when it is not one."""
    return next((p for p in HEADLINE if p.percent == percent), None)


def label(key: str) -> str:
    """The heading of a figure: "99.999 %" for a headline key, "min"/"max" as they are."""
    return key if key in EXTREME_FRACTIONS else by_key(key).label


def fraction(key: str) -> float:
    """The rank a figure stands for: 0.99999 for "p99_999", 0 for min, 1 for max."""
    return EXTREME_FRACTIONS[key] if key in EXTREME_FRACTIONS else by_key(key).fraction


def quantile_of_key(key: str) -> Fraction:
    """The exact quantile a figure stands for (what ranks use): 99999/100000 for "p99_999",
    0 for min, 1 for max."""
    return Fraction(int(EXTREME_FRACTIONS[key])) if key in EXTREME_FRACTIONS else by_key(key).quantile


def figure_keys(*keys: str) -> list[str]:
    """Keys of the figures to show, in table order: the given ones, or min, every headline
    percentile and max when none are given."""
    return list(keys) if keys else [MIN, *KEYS, MAX]


def labelled(*keys: str) -> list[tuple[str, str]]:
    """(key, label) pairs for `figure_keys(*keys)`."""
    return [(k, label(k)) for k in figure_keys(*keys)]
