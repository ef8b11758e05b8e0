"""A campaign's result: its capture pairs, their analyses, failures and workers.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import TypedDict

from lowtail.analyze.document import LatencyFigures

# -- a campaign (`lowtail campaign analyze --json`, stored by store/campaigns.py) ----------------


class CapturePair(TypedDict):
    """One PRE/POST pair of a campaign by name, or a capture without its partner (the missing
    side None); `key` is its identity (both files and the analysis options)."""

    name: str
    pre: str | None
    post: str | None
    key: str


class CampaignPairEntry(TypedDict):
    """A pair of a campaign stored with its analysis (now, or by an earlier run: resumed)."""

    name: str
    pre: str | None
    post: str | None
    analysis_id: int
    sent: int
    lost: int
    latency_ns: LatencyFigures | None
    partial: bool
    series: str | None
    worker: str | None
    resumed: bool


class CampaignFailure(CapturePair):
    """A pair that could not be analysed, and why (the worker None when none was given it)."""

    error: str | None
    worker: str | None


class CampaignWorker(TypedDict):
    """A Dask worker of a campaign: how many pairs it analysed, and whether it was lost."""

    address: str
    pairs: int
    lost: bool


class CampaignDocument(TypedDict):
    """What `lowtail campaign analyze --json` prints."""

    campaign_id: int
    partial: bool
    stopped: str | None
    pairs: list[CampaignPairEntry]
    failed: list[CampaignFailure]
    workers: list[CampaignWorker]
