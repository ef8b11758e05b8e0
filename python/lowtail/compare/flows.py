"""`compare --by flow`: each run split into its flows, so that flow is an axis of the
configurations like any other. A flow's row carries the run's configuration and, from the
store (`analysis_flows`), the flow's own packets and figures; its distribution is read from
the run's matched series (its `flow` column), each series once for all its flows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lowtail.compare.parts import part_row
from lowtail.compare.pooling import Distribution
from lowtail.core import series
from lowtail.core.errors import UserError
from lowtail.experiment.document import RunRow
from lowtail.store import analyses as analysisstore
from lowtail.store.db import Store


def split_by_flow(store: Store, runs: Sequence[RunRow]) -> list[RunRow]:
    """One row per flow of each run (a run analysed before flows were told apart stays one
    row, of flow "–"): the run's configuration with the flow's label, packets and figures."""
    out: list[RunRow] = []
    for run in runs:
        aid = run.get("analysis_id")
        flows = analysisstore.analysis_flows(store, aid) if aid is not None else None
        if not flows:
            out.append(run)
            continue
        for flow in flows["flows"]:
            row = part_row(run, flow["sent"], flow["received"], flow["lost"], flow["latency_ns"])
            row["flow"], row["flow_index"] = flow["key"], flow["flow"]
            out.append(row)
    return out


class FlowDistributions:
    """The distribution of one flow of a run, from its matched series (each series read
    once, for all its flows)."""

    def __init__(self, on_rows: Callable[[int], None] | None = None):
        self.on_rows = on_rows
        self._by_series: dict[str, dict[int, Any]] = {}

    def __call__(self, run: RunRow) -> Distribution:
        path = run.get("series_path")
        if not path:
            raise UserError("its matched series was not kept: a flow's distribution is read from it")
        if path not in self._by_series:
            self._by_series[path] = series.flow_summaries(path)
            if self.on_rows:
                self.on_rows(sum(s.count for s in self._by_series[path].values()))
        summary = self._by_series[path].get(run["flow_index"])
        if summary is None:
            return Distribution()
        return Distribution.of(summary)
