"""A run's row split into one of its parts — a flow (`compare --by flow`, compare/flows.py) or
a hop of a chain (`compare --by hop`, compare/hops.py): the run's configuration with the part's
own packets and latency figures, so that the part is an axis of the configurations like any
other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lowtail.experiment.document import RunRow
from lowtail.store.db import latency_columns_of


def part_row(
    run: RunRow, sent: int | None, received: int | None, lost: int | None, latency: Mapping[str, Any] | None
) -> RunRow:
    """`run`'s row with one part's packets and figures in place of the run's (its latency
    columns, and `figures.latency_ns`, which the part's distribution and verdict read)."""
    row: RunRow = {**run, **latency_columns_of(latency or {})}
    row["sent"], row["received"], row["lost"] = sent, received, lost
    figures = run.get("figures")
    if figures is not None:
        row["figures"] = {**figures, "latency_ns": dict(latency) if latency else None}
    return row
