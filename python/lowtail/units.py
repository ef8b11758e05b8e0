"""Durations and rates as people write them, and nanoseconds as people read them."""

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
    if pps >= 1e6:
        return f"{pps / 1e6:.3g} Mpps"
    if pps >= 1e3:
        return f"{pps / 1e3:.3g} kpps"
    return f"{pps:.3g} pps"
