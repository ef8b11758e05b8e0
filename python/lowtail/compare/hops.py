"""`compare --by hop`: each chain run split into its hops, so that hop is an axis of the
configurations like any other. A hop's row carries the run's configuration and, from the store
(`run_hops` through `store.chains`), the hop's own packets and figures; its distribution is
read from the hop's matched series. A run of one DuT stays one row, of hop "–". The verdict
a hop's configuration shows is the hop against the whole chain's budget: how much of it one
hop alone takes (the chain's own verdict is its end-to-end one, `compare` without `--by hop`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lowtail.compare.parts import part_row
from lowtail.compare.pooling import Distribution, read_run
from lowtail.core.errors import UserError
from lowtail.experiment.document import RunRow
from lowtail.store.chains import run_chains
from lowtail.store.db import Store


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
            row = part_row(run, hop["sent"], hop["received"], hop["lost"], hop["latency_ns"])
            row["hop"], row["hop_series_path"] = f"{hop['hop']}. {hop['name']}", hop["series_path"] or ""
            out.append(row)
    return out


def hop_distribution(run: RunRow, on_rows: Callable[[int], None] | None = None) -> Distribution:
    """The distribution of one hop of a chain run, from the hop's matched series."""
    path = run.get("hop_series_path")
    if not path:
        raise UserError("its hop's matched series was not kept: a hop's distribution is read from it")
    return read_run(None, str(path), on_rows)
