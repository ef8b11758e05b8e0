"""Runs' kernel traces and explanations in the database (schema/017_explain.sql): how each
run's trace was recorded and where its intervals are, and what `lowtail explain` concluded
(the document, and its causes as rows)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from lowtail.core.terminal import shown
from lowtail.explain.document import ExplainDocument
from lowtail.store.codec import EXPLANATION, RUN_TRACE
from lowtail.store.db import Store, as_id
from lowtail.store.runs import missing_ids
from lowtail.trace.document import TraceDocument


class StoredCause(TypedDict):
    """One of a run's stored causes (`run_causes`), as `compare` and the pages read them."""

    rank: int
    kind: str
    role: str
    cpu: int | None
    share: float
    added_ns: int
    what: str | None


def save_run_trace(store: Store, run_id: int, document: TraceDocument) -> None:
    """Store (or replace) a run's trace document."""
    info = document.get("info") or {}
    raw_bytes = info.get("raw_bytes")
    with store.transaction():
        store.con.execute("DELETE FROM run_traces WHERE run_id = ?", [run_id])
        store.con.execute(
            "INSERT INTO run_traces (run_id, method, reason, path, raw_bytes, document) VALUES (?, ?, ?, ?, ?, ?)",
            [
                run_id,
                document.get("method", "none"),
                document.get("reason") or None,
                document.get("path"),
                raw_bytes if isinstance(raw_bytes, int) else None,
                RUN_TRACE.encode(document),
            ],
        )


def run_trace(store: Store, run_id: int) -> TraceDocument | None:
    """A run's trace document, None when the run has none stored."""
    row = store.con.execute("SELECT document FROM run_traces WHERE run_id = ?", [run_id]).fetchone()
    return RUN_TRACE.decode(store, row[0], f"run {run_id}") if row else None


def save_explanation(store: Store, document: ExplainDocument) -> None:
    """Store a run's explanation, replacing an earlier one, with its causes in rank order."""
    run_id = document["run"]
    with store.transaction():
        store.con.execute("DELETE FROM run_causes WHERE run_id = ?", [run_id])
        store.con.execute("DELETE FROM run_explanations WHERE run_id = ?", [run_id])
        store.con.execute(
            "INSERT INTO run_explanations (run_id, threshold_ns, tail_packets, unexplained_share, headline, document) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                run_id,
                document["tail"]["threshold_ns"],
                document["tail"]["packets"],
                document["unexplained_share"],
                document.get("headline"),
                EXPLANATION.encode(document),
            ],
        )
        causes = document.get("causes") or []
        if causes:
            store.con.executemany(
                "INSERT INTO run_causes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    [run_id, rank, c["kind"], c["role"], c["cpu"], c["share"], c["added_ns"], c["evidence"].get("what")]
                    for rank, c in enumerate(causes, 1)
                ],
            )


def explanation(store: Store, run_id: int) -> ExplainDocument | None:
    """A run's stored explanation document, None when it was never explained."""
    row = store.con.execute("SELECT document FROM run_explanations WHERE run_id = ?", [run_id]).fetchone()
    if row is None:
        return None
    return EXPLANATION.decode(store, row[0], f"run {run_id}")


def causes_of(store: Store, run_ids: Iterable[int]) -> dict[int, list[StoredCause]]:
    """The stored causes of these runs, in rank order, by run (runs never explained are absent)."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = store.con.execute(
        "SELECT run_id, rank, kind, role, cpu, share, added_ns, what FROM run_causes "
        "WHERE run_id IN (SELECT unnest(?::BIGINT[])) ORDER BY run_id, rank",
        [ids],
    ).fetchall()
    out: dict[int, list[StoredCause]] = {}
    for run_id, rank, kind, role, cpu, share, added_ns, what in rows:
        out.setdefault(run_id, []).append(
            StoredCause(rank=rank, kind=kind, role=role, cpu=cpu, share=share, added_ns=added_ns, what=what)
        )
    return out


def tail_packets(store: Store, run_ids: Iterable[int]) -> dict[int, int]:
    """The tail packets of each of these runs that has a stored explanation."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = store.con.execute(
        "SELECT run_id, tail_packets FROM run_explanations WHERE run_id IN (SELECT unnest(?::BIGINT[]))", [ids]
    ).fetchall()
    return {r: int(n) for r, n in rows}


def headlines(store: Store, run_ids: Iterable[int]) -> dict[int, str]:
    """The headline of each of these runs that has one (the host could not measure what was asked)."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = store.con.execute(
        "SELECT run_id, headline FROM run_explanations WHERE headline IS NOT NULL "
        "AND run_id IN (SELECT unnest(?::BIGINT[])) ORDER BY run_id",
        [ids],
    ).fetchall()
    return {run_id: text for run_id, text in rows}


def run_id_of(store: Store, text: str) -> int:
    """A run named on the command line: its id, or 'latest' (the newest stored run)."""
    from lowtail.core.errors import UserError

    if text == "latest":
        row = store.con.execute("SELECT max(run_id) FROM runs").fetchone()
        if row is None or row[0] is None:
            raise UserError(f"{store.path}: no runs stored yet (`lowtail run` makes some)")
        return int(row[0])
    run_id = as_id(text)
    if run_id is None:
        raise UserError(f"{shown(repr(text))} is not a run id (a number in ASCII digits, or 'latest')")
    found = store.con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if not found or not found[0]:
        why = ""
        if not missing_ids(store, "analyses", "analysis_id", [run_id]):  # `explain 1` after `analyze`
            why = f" (analysis {run_id} is of captures alone: explain reads the kernel trace `lowtail run` records)"
        raise UserError(f"{store.path}: no run with id {run_id}{why}")
    return run_id
