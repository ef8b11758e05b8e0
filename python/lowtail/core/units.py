"""Durations and rates as people write them, and durations, rates, counts, shares and
p-values as people read them: every formatter of figures lives here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from lowtail.core.errors import UserError

# -- the one grammar of durations and rates (`lowtail help units`) ---------------------------------
#
# A number written in ASCII digits (a point and an exponent allowed, no sign) and its unit, a
# space between them allowed: durations `350us`, `0.35ms`, `10s`; packet rates `50kpps`, `50k`,
# `800pps`; interrupt rates `250Hz`, `1.5kHz`. A bare number is refused wherever a duration or
# a rate is meant ("350" was once read as 350 s in one place and 350 ns in another); only a
# bare 0 is taken, as zero in any unit. A key or option whose name ends in its unit
# (`work_ns`, `spin_us`, `rate_pps`) takes a plain whole number in that unit: the name carries it.

_NUMBER = r"(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_DURATION = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>ns|us|µs|μs|ms|s|min|h)?\s*$")
_SCALE_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # MICRO SIGN
    "μs": 1_000,  # GREEK SMALL LETTER MU, as pasted from many documents
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# A packet rate's unit: a prefix (k, M, G), "pps", or both ("50k", "800pps", "1.2Mpps").
_RATE = re.compile(rf"^\s*{_NUMBER}\s*(?P<prefix>[kKmMgG]?)(?P<pps>pps|PPS)?\s*$")
_RATE_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
# An interrupt rate's unit: Hz or kHz.
_FREQUENCY = re.compile(rf"^\s*{_NUMBER}\s*(?P<prefix>[kK]?)(?:Hz|hz|HZ)\s*$")

# The examples every message about a unit shows, and where the grammar is written down.
DURATION_FORMS = "350us, 0.35ms, 10s"
RATE_FORMS = "50kpps, 50k, 800pps"
FREQUENCY_FORMS = "250Hz, 1.5kHz"
UNITS_TOPIC = "lowtail help units"

# The longest duration lowtail takes: nanoseconds are 64-bit signed integers (≈ 292 years).
MAX_DURATION_NS = 2**63 - 1
# The highest rate lowtail takes: far above any link (a 1.6 Tb/s link carries 2.4 Gpps).
MAX_RATE_PPS = 10**12
# The highest interrupt rate lowtail takes (a timer at 1 GHz would leave a core no time).
MAX_FREQUENCY_HZ = 10**9


class UnitError(UserError):
    """A duration or rate lowtail cannot read (exit 2): the message names the field first."""


def _where(what: str) -> str:
    return f"{what}: " if what else ""


def _exact(number: str) -> Fraction:
    """The number as written, exactly (a float would turn 4503599.627370397 s into one
    nanosecond less); an exponent too large to hold is refused by the caller's bound."""
    mantissa, _, exponent = number.lower().partition("e")
    if exponent and abs(int(exponent)) > 400:  # far beyond any bound: not worth the arithmetic
        return Fraction(10**400) if int(exponent) > 0 else Fraction(0)
    return Fraction(number)


def _is_zero(value: object) -> bool:
    """A bare 0 ("0", 0, "0.0"): zero needs no unit."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value == 0
    return isinstance(value, str) and re.fullmatch(r"\s*0*\.?0*\s*", value) is not None and "0" in value


def _bare(value: object, what: str, kind: str, forms: str) -> UnitError:
    shown = value if isinstance(value, str) else repr(value)
    return UnitError(f"{_where(what)}{shown!s} has no unit: write a {kind} with its unit, e.g. {forms} ({UNITS_TOPIC})")


def _unreadable(value: object, what: str, kind: str, forms: str) -> UnitError:
    return UnitError(f"{_where(what)}cannot read {value!r} as a {kind} (e.g. {forms}; {UNITS_TOPIC})")


def _text(value: object, what: str, kind: str, forms: str) -> str:
    """The text of a value that must carry a unit: a number (a TOML integer, a Python float)
    is a bare number, anything else but a string is no duration or rate at all."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _unreadable(value, what, kind, forms)
    if not isinstance(value, str):
        raise _bare(value, what, kind, forms)
    return value


def parse_duration_ns(value: object, what: str = "") -> int:
    """A duration as people write it, with its unit ('350us', '0.35ms', '10s', '2 min';
    a bare 0 is zero) -> integer nanoseconds. A bare number, a value that is no duration or
    one lowtail cannot hold (1e300s) is a UnitError whose message starts with `what` (the
    option or key)."""
    if _is_zero(value):
        return 0
    text = _text(value, what, "duration", DURATION_FORMS)
    m = _DURATION.match(text)
    if m is None:
        raise _unreadable(value, what, "duration", DURATION_FORMS)
    if m.group("unit") is None:
        raise _bare(text.strip(), what, "duration", DURATION_FORMS)
    ns = _exact(m.group("number")) * _SCALE_NS[m.group("unit")]
    if ns > MAX_DURATION_NS:
        raise UnitError(f"{_where(what)}{text}: not a duration lowtail can hold (at most about 292 years)")
    return round(ns)


def parse_rate_pps(value: object, what: str = "") -> int:
    """A packet rate as people write it, with its unit ('50kpps', '50k', '1.2M', '800pps';
    a bare 0 is zero) -> whole packets per second, 0 to MAX_RATE_PPS: the one reader of a
    rate, for options, experiment files, import specs and selections. A bare number ("50000")
    or anything else ("fast", "inf") is a UnitError whose message starts with `what`."""
    return round(_rate(value, what))


def parse_rate_exact(value: object, what: str = "") -> float:
    """The same rate, not rounded to whole packets: what a model of traffic takes
    (`synth --rate 10000.5pps`, a beat against an interrupt clock)."""
    return float(_rate(value, what))


def _rate(value: object, what: str) -> Fraction:
    if _is_zero(value):
        return Fraction(0)
    text = _text(value, what, "rate", RATE_FORMS)
    m = _RATE.match(text)
    if m is None:
        raise _unreadable(value, what, "rate", RATE_FORMS)
    if not m.group("prefix") and not m.group("pps"):
        raise _bare(text.strip(), what, "rate", RATE_FORMS)
    pps = _exact(m.group("number")) * _RATE_SCALE[m.group("prefix").lower()]
    if pps > MAX_RATE_PPS:
        raise UnitError(f"{_where(what)}{text}: not a rate lowtail takes (0 to {MAX_RATE_PPS:.0e} packets per second)")
    return pps


def parse_frequency_hz(value: object, what: str = "") -> float:
    """An interrupt rate with its unit ('250Hz', '166.7Hz', '1.5kHz'; a bare 0 is zero) ->
    events per second. A bare number is a UnitError whose message starts with `what`."""
    if _is_zero(value):
        return 0.0
    text = _text(value, what, "rate of events", FREQUENCY_FORMS)
    m = _FREQUENCY.match(text)
    if m is None:
        if re.fullmatch(rf"\s*{_NUMBER}\s*", text):
            raise _bare(text.strip(), what, "rate of events", FREQUENCY_FORMS)
        raise _unreadable(value, what, "rate of events", FREQUENCY_FORMS)
    hz = _exact(m.group("number")) * (1_000 if m.group("prefix") else 1)
    if hz > MAX_FREQUENCY_HZ:
        raise UnitError(f"{_where(what)}{text}: not a rate of events lowtail takes (0 to 1 GHz)")
    return float(hz)


def format_duration_setting(ns: int) -> str:
    """A duration as the grammar writes it, exactly, in whole units where it can ("350us",
    "2500us", "3min", "1500ns", "0"): what a setting is shown as (--help defaults, a DuT's
    options on a page or a certificate), so that what is shown can be typed back and means
    the same."""
    if ns == 0:
        return "0"
    for unit, scale in (("h", 3_600_000_000_000), ("min", 60_000_000_000), ("s", 10**9), ("ms", 10**6), ("us", 1_000)):
        if ns % scale == 0:
            return f"{ns // scale}{unit}"
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 1_000)):
        if abs(ns) >= scale:
            whole, rest = divmod(ns, scale)
            return f"{whole}.{str(rest).rjust(len(str(scale)) - 1, '0').rstrip('0')}{unit}"
    return f"{ns}ns"


def format_rate_setting(pps: float) -> str:
    """A packet rate as the grammar writes it, exactly ("50kpps", "1.2Mpps", "800pps",
    "10000.5pps")."""
    if pps == 0:
        return "0"
    if not float(pps).is_integer():
        return f"{pps!r}pps"
    pps = int(pps)
    for prefix, scale in (("M", 10**6), ("k", 10**3)):
        if pps >= scale:
            whole, rest = divmod(pps, scale)
            tail = f".{str(rest).rjust(len(str(scale)) - 1, '0').rstrip('0')}" if rest else ""
            return f"{whole}{tail}{prefix}pps"
    return f"{pps}pps"


def format_frequency_setting(hz: float) -> str:
    """An interrupt rate as the grammar writes it, exactly ("250Hz", "166.7Hz")."""
    if hz == 0:
        return "0"
    return f"{int(hz)}Hz" if float(hz).is_integer() else f"{hz!r}Hz"


# Each kind of value a person types with its unit: its reader and its exact writer. The
# command line's option types and the files' field types name their kind here, and a test
# walks every declaration through these.
UNIT_KINDS = {
    "duration": (parse_duration_ns, format_duration_setting, DURATION_FORMS),
    "rate": (parse_rate_pps, format_rate_setting, RATE_FORMS),
    "frequency": (parse_frequency_hz, format_frequency_setting, FREQUENCY_FORMS),
}


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


def format_seconds(seconds: float) -> str:
    """A time to measure as people read it: "0.2 s", "3.2 s", "2 min 05 s"."""
    return f"{seconds:.1f} s" if seconds < 60 else format_minutes(seconds)


def format_rate(pps: float) -> str:
    """Packets per second with the prefix that reads best ("87.5 kpps")."""
    if pps >= 1e6:
        return f"{pps / 1e6:.3g} Mpps"
    if pps >= 1e3:
        return f"{pps / 1e3:.3g} kpps"
    return f"{pps:.3g} pps"


def format_hz(hz: float, digits: int = 4) -> str:
    """An event rate (interrupts) with the prefix that reads best, to `digits` significant
    digits: "250 Hz", "645.1 Hz", "18.33 kHz", "0.5439 Hz"."""
    for prefix, scale in (("M", 1e6), ("k", 1e3)):
        if abs(hz) >= scale:
            return f"{hz / scale:.{digits}g} {prefix}Hz"
    return f"{hz:.{digits}g} Hz" if abs(hz) >= 1e-3 or hz == 0 else f"{hz:.{max(digits - 3, 1)}e} Hz"


def format_ns_per_s(ns_per_s: float | None) -> str:
    """CPU time lost per second ("12.3 µs/s"); "–" when unknown."""
    return "–" if ns_per_s is None else f"{ns_per_s / 1e3:,.1f} µs/s"


def format_count(n: int | None) -> str:
    """A count with thousands separators; "–" when unknown."""
    return "–" if n is None else f"{n:,}"


def format_counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the number it takes: "1 experiment", "30 runs", "3 analyses"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def format_named(ids: Sequence[int], noun: str, plural: str | None = None) -> str:
    """Ids with their noun in the number it takes: "experiment 3", "analyses 1, 2", "no run"."""
    if not ids:
        return f"no {noun}"
    return f"{noun if len(ids) == 1 else plural or noun + 's'} {', '.join(map(str, ids))}"


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
