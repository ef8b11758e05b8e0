"""A chain run's hops in the database (schema/021_chains.sql): the chain's document, and each
hop's figures as rows (`run_hops`) for SQL and the Python API."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lowtail.analyze.document import ChainDocument
from lowtail.store.codec import RUN_CHAIN
from lowtail.store.db import Store, rows_as_dicts


def save_run_chain(store: Store, run_id: int, document: ChainDocument) -> None:
    """Store (or replace) a run's chain document and its hops' rows."""
    with store.transaction():
        store.con.execute("DELETE FROM run_hops WHERE run_id = ?", [run_id])
        store.con.execute("DELETE FROM run_chains WHERE run_id = ?", [run_id])
        store.con.execute(
            "INSERT INTO run_chains (run_id, hops, packets_compared, sum_mismatch_ns, clock_bound_ns, document) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                run_id,
                len(document["hops"]),
                document["packets_compared"],
                document["sum_mismatch_ns"],
                document["clock"]["bound_ns"],
                RUN_CHAIN.encode(document),
            ],
        )
        rows = []
        for hop in document["hops"]:
            latency = hop["latency_ns"] or {}
            rows.append(
                [
                    run_id,
                    hop["hop"],
                    hop["name"],
                    hop["kind"],
                    hop["sent"],
                    hop["received"],
                    hop["lost"],
                    *(_ns(latency.get(k)) for k in ("p50", "p99", "p99_9", "max")),
                    latency.get("mean"),
                    hop["share"],
                    hop["series_path"],
                ]
            )
        if rows:
            store.con.executemany(f"INSERT INTO run_hops VALUES ({', '.join('?' * len(rows[0]))})", rows)


def _ns(value: float | None) -> int | None:
    return None if value is None else int(value)


def run_chain(store: Store, run_id: int) -> ChainDocument | None:
    """A run's chain document, None for a run that is not a chain's."""
    row = store.con.execute("SELECT document FROM run_chains WHERE run_id = ?", [run_id]).fetchone()
    if row is None:
        return None
    return RUN_CHAIN.decode(store, row[0], f"run {run_id}")


def run_chains(store: Store, run_ids: Iterable[int | None]) -> dict[int, ChainDocument]:
    """The chain documents of those of these runs that are a chain's, by run (ids of runs not
    stored, None, are skipped)."""
    ids = sorted({i for i in run_ids if i is not None})
    if not ids:
        return {}
    found = store.con.execute(
        f"SELECT run_id, document FROM run_chains WHERE run_id IN ({', '.join('?' * len(ids))})", ids
    ).fetchall()
    return {int(run_id): RUN_CHAIN.decode(store, document, f"run {run_id}") for run_id, document in found}


def every_hop(store: Store) -> list[dict[str, Any]]:
    """Every stored chain run's hops in one list (the Python API's `hops()`), in run and hop
    order: the `run_hops` row (latency columns `lat_<figure>_ns`) with the run's experiment."""
    return rows_as_dicts(
        store.con.execute(
            "SELECT r.experiment_id, h.* FROM run_hops h JOIN runs r USING (run_id) ORDER BY h.run_id, h.hop"
        )
    )
