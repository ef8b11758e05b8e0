"""Durations and rates as people write them, and durations, rates, counts, shares and
p-values as people read them: every formatter of figures lives here."""

from __future__ import annotations

import math
import re

from lowtail.errors import UserError

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$")
_SCALE_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}


# The longest duration lowtail takes: nanoseconds are 64-bit signed integers (≈ 292 years).
MAX_DURATION_NS = 2**63 - 1


def parse_duration_ns(text: str | int | float, default_unit: str = "s", what: str = "") -> int:
    """'5s', '250ms', '3.1us', '1e-3' (seconds by default) -> integer nanoseconds; a value
    that is not a finite duration lowtail can hold (inf, nan, 1e300) is a UserError, whose
    message starts with `what` (the option, say)."""
    if isinstance(text, (int, float)):
        value, unit = float(text), default_unit
    else:
        m = _DURATION.match(str(text))
        if not m:
            raise UserError(f"cannot read {text!r} as a duration (examples: 5s, 250ms, 3.1us, 800ns)")
        value, unit = float(m.group(1)), m.group(2) or default_unit
    ns = value * _SCALE_NS[unit]
    if not math.isfinite(ns) or abs(ns) > MAX_DURATION_NS:
        raise UserError(
            f"{what + ' ' if what else ''}{text}: not a duration lowtail can hold (finite, at most about 292 years)"
        )
    return round(ns)


_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgG]?)\s*(?:pps|p/s)?\s*$")
_RATE_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


# The highest rate lowtail takes: far above any link (a 1.6 Tb/s link carries 2.4 Gpps).
MAX_RATE_PPS = 10**12


def parse_rate_pps(text: str | int | float) -> int:
    """'50000', '50k', '50kpps', '1.5M', '2e5' -> packets per second (whole packets, 0 to
    MAX_RATE_PPS); ASCII digits only ("²" is no number here)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise UserError(f"cannot read {text!r} as a rate (a number of packets per second)")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(text)  # [0-9]: ASCII digits only
        if not m:
            raise UserError(f"cannot read {text!r} as a rate (examples: 50000, 50k, 50kpps, 1.5M packets per second)")
        value = float(m.group(1)) * _RATE_SCALE[m.group(2).lower()]
    if not (math.isfinite(value) and 0 <= value <= MAX_RATE_PPS):
        raise UserError(f"{text}: not a rate lowtail takes (0 to {MAX_RATE_PPS:.0e} packets per second)")
    return round(value)


def format_ns(ns: float | int | None, digits: int = 3) -> str:
    """Nanoseconds in the unit that reads best, always with the unit."""
    if ns is None:
        return "–"
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f} ns" if float(ns).is_integer() else f"{ns:.1f} ns"
    if a < 1_000_000:
        return f"{ns / 1e3:.{digits}f} µs"
    if a < 1_000_000_000:
        return f"{ns / 1e6:.{digits}f} ms"
    return f"{ns / 1e9:.{digits}f} s"


def format_minutes(seconds: float) -> str:
    """A wait as people say it: "45 s", "2 min 05 s", "1 h 02 min"."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def format_rate(pps: float) -> str:
    """Packets per second with the prefix that reads best ("87.5 kpps")."""
    if pps >= 1e6:
        return f"{pps / 1e6:.3g} Mpps"
    if pps >= 1e3:
        return f"{pps / 1e3:.3g} kpps"
    return f"{pps:.3g} pps"


def format_ns_per_s(ns_per_s: float | None) -> str:
    """CPU time lost per second ("12.3 µs/s"); "–" when unknown."""
    return "–" if ns_per_s is None else f"{ns_per_s / 1e3:,.1f} µs/s"


def format_count(n: int | None) -> str:
    """A count with thousands separators; "–" when unknown."""
    return "–" if n is None else f"{n:,}"


def format_counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the number it takes: "1 experiment", "30 runs", "3 analyses"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def format_percent(fraction: float, spec: str = ".3g") -> str:
    """A share (0.0123) as people read it ("1.23 %")."""
    return f"{100 * fraction:{spec}} %"


def format_share(part: int, whole: int, spec: str = ".4g") -> str:
    """`part` as a percentage of `whole`; "–" when there is no whole."""
    return f"{100.0 * part / whole:{spec}} %" if whole else "–"


def format_ns_interval(interval: list[float] | tuple[float, float] | None) -> str:
    """A confidence interval of durations ("3.100 µs … 4.200 µs"); "–" when there is none."""
    return "–" if not interval else f"{format_ns(interval[0])} … {format_ns(interval[1])}"


def format_p_value(p: float | None, bound: str | None = None) -> str:
    """A test's p-value; `bound` "lower"/"upper" when the test only bounds it (KPSS's table)."""
    if p is None:
        return "–"
    return {"lower": "≥ ", "upper": "≤ "}.get(bound or "", "") + f"{p:.3g}"


def format_ns_tick(ns: float, digits: int = 3) -> str:
    """A round duration as an axis labels it: "10 µs", "2.5 ms", "500 ns", "0" (with up
    to `digits` significant digits)."""
    if ns == 0:
        return "0"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.{digits}g} {unit}"
    return f"{ns:.{digits}g} ns"


def format_ns_range(lo: float | None, hi: float | None) -> str:
    """A range of durations in the unit of its upper end: "16.015–16.078 µs"."""
    if lo is None or hi is None:
        return "–"
    unit = format_ns(hi).split()[-1]
    scale = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}[unit]
    return f"{lo / scale:.3f}–{hi / scale:.3f} {unit}"


def format_count_tick(n: float) -> str:
    """A round count as an axis labels it: "100", "5,000", "10 k", "1 M"."""
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= 10 * scale or (abs(n) >= scale and n % scale == 0):
            return f"{n / scale:.3g} {suffix}"
    return f"{n:,.3g}" if abs(n) < 1000 else f"{n:,.0f}"


def format_rate_tick(pps: float) -> str:
    """A round packet rate as an axis labels it: "50 kpps", "0"."""
    return "0" if pps == 0 else format_rate(pps)
