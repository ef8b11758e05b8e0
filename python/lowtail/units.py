"""Durations and rates as people write them, and durations, rates, counts, shares and
p-values as people read them: every formatter of figures lives here."""

from __future__ import annotations

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


def parse_duration_ns(text: str | int | float, default_unit: str = "s") -> int:
    """'5s', '250ms', '3.1us', '1e-3' (seconds by default) -> integer nanoseconds."""
    if isinstance(text, (int, float)):
        return round(float(text) * _SCALE_NS[default_unit])
    m = _DURATION.match(str(text))
    if not m:
        raise UserError(f"cannot read {text!r} as a duration (examples: 5s, 250ms, 3.1us, 800ns)")
    value, unit = float(m.group(1)), m.group(2) or default_unit
    return round(value * _SCALE_NS[unit])


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


def format_us(ns: float | int | None, digits: int = 3) -> str:
    """Nanoseconds as microseconds (the unit tables of latency figures use)."""
    return "–" if ns is None else f"{ns / 1e3:.{digits}f} µs"


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
