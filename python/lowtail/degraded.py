"""Degraded runs said once: one line per kind of problem over an experiment's runs ("3 of 9
runs degraded: generator stalled 1.17–2.6 ms (runs 3, 5, 7)"), for the end of `lowtail run`
and the top of the experiment page; each run's own reason stays in its row of the table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lowtail.units import format_ns, format_ns_range

# The generator's two reasons (experiment/measure.generator_stalled), each with the figure
# of the run's generator statistics it is about.
_GENERATOR_KINDS = (("generator stalled", "max"), ("generator late", "p99"))


def _kind(reason: str) -> tuple[str, str | None]:
    """The kind of a degraded reason and the pacing figure that measures it (None: the kind
    is the whole text, as a core plan's warning is)."""
    for kind, figure in _GENERATOR_KINDS:
        if reason.startswith(kind):
            return kind, figure
    return reason, None


def degraded_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per kind of reason the valid runs were degraded for, with how many runs, the
    range of the generator's pacing figure where it is the reason, and which runs."""
    measured = [r for r in rows if r.get("valid", True)]
    groups: dict[str, tuple[str | None, list[Mapping[str, Any]]]] = {}
    for r in measured:
        for reason in r.get("degraded_reasons") or ():
            kind, figure = _kind(reason)
            runs = groups.setdefault(kind, (figure, []))[1]
            if r not in runs:
                runs.append(r)
    lines = []
    for kind, (figure, runs) in groups.items():
        values = [
            v
            for r in runs
            if isinstance(v := ((r.get("generator") or {}).get("pacing_error_ns") or {}).get(figure or ""), int)
        ]
        lo, hi = (min(values), max(values)) if values else (None, None)
        size = "" if lo is None else f" {format_ns(lo)}" if lo == hi else f" {format_ns_range(lo, hi)}"
        ids = ", ".join(str(r["run_id"]) for r in runs)
        lines.append(
            f"{len(runs)} of {len(measured)} runs degraded: {kind}{size} (run{'s' if len(runs) > 1 else ''} {ids})"
        )
    return lines
