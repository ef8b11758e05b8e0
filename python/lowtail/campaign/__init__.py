"""Campaigns: every capture pair of a directory analysed in parallel on a Dask cluster.

`pairs` finds the pairs by name and gives each its identity; `work` is what a worker runs
(the native analyzer on paths it can read, the matched series written where it lies);
`runner` is the coordinating process: it submits the pairs, follows the cluster, and is
the only writer of the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalyzeOptionsDocument

# NAME-pre.EXT with NAME-post.EXT; a --pattern is a regular expression with the same groups.
# Here rather than in `pairs` so that the command line's start-up need not import that.
DEFAULT_PATTERN = r"(?P<name>.+)-(?P<side>pre|post)\.(?P<ext>.+)"


@dataclass(frozen=True)
class CampaignOptions:
    """What a campaign is asked to do: analyse the pairs found in `source` (a directory, or
    "database") by `pattern` with the same analysis options, on the cluster at `scheduler`
    (None: a local one), writing each pair's matched series into `series_dir` (None: no
    series). `analysis` is plain JSON (no export path) so that it pickles to any worker and
    hashes into each pair's identity and the campaign's."""

    source: str
    pattern: str
    analysis: AnalyzeOptionsDocument
    scheduler: str | None = None
    series_dir: Path | None = None
