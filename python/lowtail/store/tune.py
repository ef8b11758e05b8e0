"""`lowtail tune` sessions (019_host_state.sql): the document `tune --json` prints, kept as
the session goes (each change's decision stored before the next is tried), so an interrupted
session says what it kept and `tune --after-reboot ID` finds its before."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from lowtail.core.errors import UserError
from lowtail.store.db import Store

if TYPE_CHECKING:
    from lowtail.tune.document import TuneDocument


def create_session(store: Store, document: TuneDocument) -> int:
    """A new session; its id."""
    with store.transaction():
        (tid,) = store.con.execute("SELECT nextval('tune_session_ids')").fetchone()
        store.con.execute(
            "INSERT INTO tune_sessions (tune_id, spec_path, before_experiment, status, document) VALUES (?, ?, ?, ?, ?)",
            [tid, document["spec"], document["before"], document["status"], json.dumps({**document, "tune_id": tid})],
        )
    return int(tid)


def save_session(store: Store, document: TuneDocument) -> None:
    """The session's document as it stands now."""
    with store.transaction():
        store.con.execute(
            "UPDATE tune_sessions SET status = ?, document = ? WHERE tune_id = ?",
            [document["status"], json.dumps(document), document["tune_id"]],
        )


def session(store: Store, tune_id: int) -> TuneDocument:
    """A stored session (UserError naming the ones there are when it is not one)."""
    row = store.con.execute("SELECT document FROM tune_sessions WHERE tune_id = ?", [tune_id]).fetchone()
    if row is None:
        ids = [r[0] for r in store.con.execute("SELECT tune_id FROM tune_sessions ORDER BY tune_id").fetchall()]
        known = ", ".join(map(str, ids)) if ids else "none yet"
        raise UserError(f"no tune session {tune_id} in this database (sessions: {known})")
    return cast("TuneDocument", json.loads(row[0]))


def sessions(store: Store) -> list[dict[str, Any]]:
    """Every session, newest first: id, when, the experiment file, before, status."""
    rows = store.con.execute(
        "SELECT tune_id, created_at, spec_path, before_experiment, status FROM tune_sessions ORDER BY tune_id DESC"
    ).fetchall()
    return [dict(zip(("tune_id", "created_at", "spec", "before", "status"), r)) for r in rows]
