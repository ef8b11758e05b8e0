"""`lowtail tune` sessions (019_host_state.sql): the document `tune --json` prints, kept as
the session goes (each change's decision stored before the next is tried), so an interrupted
session says what it kept and `tune --after-reboot ID` finds its before."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from lowtail.core.errors import UserError
from lowtail.store.codec import TUNE_SESSION
from lowtail.store.db import Store
from lowtail.tune.document import TuneDocument


class SessionRow(TypedDict):
    """A session as `lowtail tune --list` shows it."""

    tune_id: int
    created_at: datetime
    spec: str
    before: int
    status: str


def create_session(store: Store, document: TuneDocument) -> int:
    """A new session; its id."""
    with store.transaction():
        (tid,) = store.con.execute("SELECT nextval('tune_session_ids')").fetchone()
        store.con.execute(
            "INSERT INTO tune_sessions (tune_id, spec_path, before_experiment, status, document) VALUES (?, ?, ?, ?, ?)",
            [
                tid,
                document["spec"],
                document["before"],
                document["status"],
                TUNE_SESSION.encode({**document, "tune_id": int(tid)}),
            ],
        )
    return int(tid)


def save_session(store: Store, document: TuneDocument) -> None:
    """The session's document as it stands now."""
    with store.transaction():
        store.con.execute(
            "UPDATE tune_sessions SET status = ?, document = ? WHERE tune_id = ?",
            [document["status"], TUNE_SESSION.encode(document), document["tune_id"]],
        )


def session(store: Store, tune_id: int) -> TuneDocument:
    """A stored session (UserError naming the ones there are when it is not one)."""
    row = store.con.execute("SELECT document FROM tune_sessions WHERE tune_id = ?", [tune_id]).fetchone()
    if row is None:
        ids = [r[0] for r in store.con.execute("SELECT tune_id FROM tune_sessions ORDER BY tune_id").fetchall()]
        known = ", ".join(map(str, ids)) if ids else "none yet"
        raise UserError(f"no tune session {tune_id} in this database (sessions: {known})")
    return TUNE_SESSION.decode(store, row[0], f"tune session {tune_id}")


def sessions(store: Store) -> list[SessionRow]:
    """Every session, newest first: id, when, the experiment file, before, status."""
    rows = store.con.execute(
        "SELECT tune_id, created_at, spec_path, before_experiment, status FROM tune_sessions ORDER BY tune_id DESC"
    ).fetchall()
    return [
        SessionRow(tune_id=t, created_at=at, spec=spec, before=before, status=status)
        for t, at, spec, before, status in rows
    ]
