"""`compare --by hop`: each chain run split into its hops, so that hop is an axis of the
configurations like any other. A hop's row carries the run's configuration and, from the store
(`run_hops` through `store.chains`), the hop's own packets and figures; its distribution is
read from the hop's matched series. A run of one DuT stays one row, of hop "–". The verdict
a hop's configuration shows is the hop against the whole chain's budget: how much of it one
hop alone takes (the chain's own verdict is its end-to-end one, `compare` without `--by hop`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lowtail.compare.pooling import Distribution, read_run
from lowtail.core.errors import UserError
from lowtail.experiment.document import RunRow
from lowtail.store.axes import HOP
from lowtail.store.chains import run_chains
from lowtail.store.db import LATENCY_FIGURES, Store, latency_column

# The run-row key of a hop's matched series (set only on rows split by hop; empty when the hop's
# series was not kept, which `hop_distribution` then says).
HOP_SERIES = "hop_series_path"


def split_by_hop(store: Store, runs: Sequence[RunRow]) -> list[RunRow]:
    """One row per hop of each chain run: the run's configuration with the hop ("1. fw"), its
    packets and figures; any other run stays one row."""
    chains = run_chains(store, [r.get("run_id") for r in runs])
    out: list[RunRow] = []
    for run in runs:
        run_id = run.get("run_id")
        chain = chains.get(run_id) if run_id is not None else None
        if chain is None:
            out.append(run)
            continue
        for hop in chain["hops"]:
            row: dict[str, object] = dict(run)
            latency = hop["latency_ns"] or {}
            row[HOP], row[HOP_SERIES] = f"{hop['hop']}. {hop['name']}", hop["series_path"] or ""
            row["sent"], row["received"], row["lost"] = hop["sent"], hop["received"], hop["lost"]
            row.update({latency_column(k): latency.get(k) for k in LATENCY_FIGURES})
            row["figures"] = {**(run.get("figures") or {}), "latency_ns": latency or None}
            out.append(row)  # type: ignore[arg-type]  # a run row with the hop's figures
    return out


def hop_distribution(run: RunRow, on_rows: Callable[[int], None] | None = None) -> Distribution:
    """The distribution of one hop of a chain run, from the hop's matched series."""
    path = run.get(HOP_SERIES)
    if not path:
        raise UserError("its hop's matched series was not kept: a hop's distribution is read from it")
    return read_run(None, str(path), on_rows)
