"""What is asked of an explanation: the tail (`--above`: a percentile or a latency, and its
rule in words) and the version of the method an answer must be of to be given from the store."""

from __future__ import annotations

from fractions import Fraction

from lowtail.core.errors import UserError
from lowtail.core.units import format_ns

# Bumped whenever what an explanation holds or how it is worked out changes: a stored
# explanation of another version is worked out again when it is asked for.
VERSION = 3  # 3: a chain's hops count the tail as the explanation does (above its threshold)


def rule_of(above: int | Fraction) -> str:
    """The tail's rule as `--above` names it ("above p99.9", "above 500.000 µs")."""
    if isinstance(above, Fraction):
        return f"above p{float(above) * 100:g}"
    return f"above {format_ns(above)}"


def tail_words(rule: str, threshold_ns: int) -> str:
    """The tail's rule as shown, with its latency where the rule names a percentile only:
    "above p99.9 (1.240 ms)", "above the budget, 1.000 ms", "above 500.000 µs"."""
    return f"{rule} ({format_ns(threshold_ns)})" if rule.startswith("above p") else rule


def latency_above(text: str) -> int | Fraction:
    """`--above`'s value: a percentile ("p99", "p99.99", "99.9%") or a latency ("500us")."""
    from lowtail.core.percentiles import quantile_of_percent
    from lowtail.core.units import parse_duration_ns

    t = text.strip()
    if t[:1] in ("p", "P") or t.endswith("%"):
        try:
            q = quantile_of_percent(t.lstrip("pP").rstrip("%").strip())
        except (ValueError, ZeroDivisionError):
            q = Fraction(-1)
        if not 0 < q < 1:
            raise UserError(f"--above {text!r}: a percentile is between 0 and 100 (p99.9)")
        return q
    try:
        return int(parse_duration_ns(t))
    except UserError:
        raise UserError(f"--above {text!r}: give a percentile (p99.9) or a latency (500us)") from None
