"""The stored explanation answers when it can: a run is explained once (when it is stored, or
the first time it is asked for) and `lowtail explain RUN` then reads the answer from the store
— without loading what works an explanation out (numpy, pyarrow: half a second) unless it
must. A stored explanation answers when it is of this version of the method (`VERSION`) and
of the tail asked for (the run's own, or an `--above` that names the same rule)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from lowtail.errors import UserError
from lowtail.store.explain import explanation
from lowtail.units import format_ns

if TYPE_CHECKING:
    from lowtail.documents import ExplainDocument
    from lowtail.store.db import Store

# Bumped whenever what an explanation holds or how it is worked out changes: a stored
# explanation of another version is worked out again when it is asked for.
VERSION = 2


def rule_of(above: int | Fraction) -> str:
    """The tail's rule as `--above` names it ("above p99.9", "above 500.000 µs")."""
    if isinstance(above, Fraction):
        return f"above p{float(above) * 100:g}"
    return f"above {format_ns(above)}"


def latency_above(text: str) -> int | Fraction:
    """`--above`'s value: a percentile ("p99", "p99.99", "99.9%") or a latency ("500us")."""
    from lowtail.percentiles import quantile_of_percent
    from lowtail.units import parse_duration_ns

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


def stored_or_explained(store: Store, run_id: int, above: int | Fraction | None = None) -> ExplainDocument:
    """A run's explanation: the stored one when it answers the question, else worked out now
    (and stored when it is of the run's own tail)."""
    stored = explanation(store, run_id)
    if stored is not None and stored.get("version") == VERSION:
        if above is None or stored["tail"]["rule"] == rule_of(above):
            return stored
    store.release()  # loading what computes takes half a second: the database is free meanwhile
    from lowtail.explain.run import explain_run

    return explain_run(store, run_id, above)
