"""Campaigns in the database (schema/010_campaigns.sql): which pairs of a campaign are
stored (with their analysis) or failed, so that a campaign resumes where it stopped."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from lowtail.store.analyses import save_analysis
from lowtail.store.codec import ANALYSIS_FIGURES, CAMPAIGN_OPTIONS
from lowtail.store.db import Store

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalysisDocument, AnalyzeOptionsDocument, LatencyFigures
    from lowtail.campaign.document import CapturePair

CAMPAIGN_STATUSES = ("running", "finished", "partial", "interrupted")


class StoredPair(TypedDict):
    """What is stored of a pair some campaign already analysed: its analysis, the worker that
    computed it and the analysis's headline figures."""

    analysis_id: int
    worker: str | None
    sent: int
    lost: int
    partial: bool
    export_path: str | None
    latency_ns: LatencyFigures | None


def open_campaign(store: Store, campaign_key: str, source: str, options: AnalyzeOptionsDocument) -> int:
    """The id of the campaign with this key: the stored one (resumed), or a new one."""
    with store.transaction():
        found = store.con.execute(
            "SELECT campaign_id FROM campaigns WHERE campaign_key = ? ORDER BY campaign_id LIMIT 1", [campaign_key]
        ).fetchone()
        if found:
            store.con.execute("UPDATE campaigns SET status = 'running' WHERE campaign_id = ?", [found[0]])
            return int(found[0])
        (campaign_id,) = store.con.execute(
            "INSERT INTO campaigns (campaign_key, source, options, status) VALUES (?, ?, ?, 'running') "
            "RETURNING campaign_id",
            [campaign_key, source, CAMPAIGN_OPTIONS.encode(options)],
        ).fetchone()
        return int(campaign_id)


def stored_pairs(store: Store, pair_keys: list[str]) -> dict[str, StoredPair]:
    """pair_key → what is stored of it for the pairs of `pair_keys` that some campaign
    already analysed."""
    if not pair_keys:
        return {}
    rows = store.con.execute(
        """SELECT p.pair_key, p.analysis_id, p.worker, a.sent, a.lost, a.partial, a.series_path, a.figures
           FROM campaign_pairs p JOIN analyses a USING (analysis_id)
           WHERE p.pair_key IN (SELECT unnest(?::VARCHAR[]))""",
        [pair_keys],
    ).fetchall()
    return {
        key: StoredPair(
            analysis_id=analysis_id,
            worker=worker,
            sent=sent,
            lost=lost,
            partial=partial,
            export_path=series_path,
            latency_ns=ANALYSIS_FIGURES.decode(store, figures, f"analysis {analysis_id}").get("latency_ns"),
        )
        for key, analysis_id, worker, sent, lost, partial, series_path, figures in rows
    }


def save_pair(
    store: Store,
    campaign_id: int,
    pair: CapturePair,
    doc: AnalysisDocument,
    options: AnalyzeOptionsDocument,
    worker: str | None,
) -> tuple[int, bool]:
    """Store one pair's analysis and mark it done, in one transaction: (analysis_id, new).
    A pair whose key is already done is not stored again (new is False)."""
    with store.transaction():
        done = store.con.execute(
            "SELECT analysis_id FROM campaign_pairs WHERE pair_key = ? AND analysis_id IS NOT NULL", [pair["key"]]
        ).fetchone()
        if done:
            return done[0], False
        analysis_id = save_analysis(store, doc, options=options, label=pair["name"])
        store.con.execute("DELETE FROM campaign_pairs WHERE pair_key = ?", [pair["key"]])
        store.con.execute(
            "INSERT INTO campaign_pairs (campaign_id, pair_key, name, pre_path, post_path, analysis_id, worker) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [campaign_id, pair["key"], pair["name"], pair["pre"], pair["post"], analysis_id, worker],
        )
    return analysis_id, True


def save_failure(store: Store, campaign_id: int, pair: CapturePair, error: str) -> None:
    """Record that a pair (or a capture without its partner) could not be analysed."""
    with store.transaction():
        store.con.execute("DELETE FROM campaign_pairs WHERE pair_key = ? AND analysis_id IS NULL", [pair["key"]])
        store.con.execute(
            "INSERT INTO campaign_pairs (campaign_id, pair_key, name, pre_path, post_path, error) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [campaign_id, pair["key"], pair["name"], pair["pre"], pair["post"], error],
        )


def finish_campaign(store: Store, campaign_id: int, status: str) -> None:
    """Set a campaign's status (one of CAMPAIGN_STATUSES)."""
    if status not in CAMPAIGN_STATUSES:
        raise ValueError(f"unknown campaign status {status!r}")
    with store.transaction():
        store.con.execute("UPDATE campaigns SET status = ? WHERE campaign_id = ?", [status, campaign_id])


def analysed_capture_pairs(store: Store) -> list[tuple[str, str]]:
    """(pre_path, post_path) of every capture pair the database holds an analysis of, oldest
    first, each once: the pairs `campaign analyze --from-db` analyses again."""
    return store.con.execute(
        "SELECT pre_path, post_path FROM analyses GROUP BY pre_path, post_path ORDER BY min(analysis_id)"
    ).fetchall()
