"""The capture pairs of a campaign: found by file name, each with a stable identity."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lowtail.campaign import DEFAULT_PATTERN, CampaignOptions
from lowtail.core import files
from lowtail.core.errors import UserError

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalyzeOptionsDocument
    from lowtail.campaign.document import CapturePair

SIDES = ("pre", "post")


@dataclass(frozen=True)
class Pair:
    """One PRE/POST pair, or a capture without its partner (the missing side is None)."""

    name: str
    pre: str | None
    post: str | None
    key: str

    @property
    def complete(self) -> bool:
        """Both captures are there."""
        return self.pre is not None and self.post is not None

    def as_dict(self) -> CapturePair:
        """The pair as the store and --json take it."""
        return {"name": self.name, "pre": self.pre, "post": self.post, "key": self.key}


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A --pattern, checked: it must have the groups `name` and `side` (side matching pre or post)."""
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise UserError(f"--pattern {pattern!r}: not a regular expression ({e})") from None
    missing = {"name", "side"} - set(compiled.groupindex)
    if missing:
        raise UserError(
            f"--pattern {pattern!r}: needs the groups {', '.join(f'(?P<{g}>...)' for g in sorted(missing))}"
        )
    return compiled


def _identity(pre: str | None, post: str | None, options: AnalyzeOptionsDocument) -> str:
    """What makes a pair the same pair: both files (path, size, mtime) and the options."""
    parts: list[object] = []
    for path in (pre, post):
        if path is None:
            parts.append(None)
            continue
        try:
            st = Path(path).stat()
            parts.append([path, st.st_size, st.st_mtime_ns])
        except OSError:
            parts.append([path])
    parts.append(options)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def find_pairs(directory: Path, pattern: str, options: AnalyzeOptionsDocument) -> list[Pair]:
    """The pairs of `directory` by name (sorted by name); captures without their partner
    come back as incomplete pairs, so that the campaign can say which."""
    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory")
    regex = compile_pattern(pattern)
    sides: dict[str, dict[str, str]] = {}
    for f in sorted(directory.iterdir()):
        m = regex.fullmatch(f.name)
        if not m or not f.is_file():
            continue
        side = m.group("side").lower()
        if side not in SIDES:
            raise UserError(f"--pattern {pattern!r}: the side group matched {side!r} in {f.name}, not pre or post")
        found = sides.setdefault(m.group("name"), {})
        if side in found:
            raise UserError(f"{directory}: two {side.upper()} captures named {m.group('name')!r}: {found[side]}, {f}")
        found[side] = str(f.resolve())
    return [pairs_of(name, s.get("pre"), s.get("post"), options) for name, s in sorted(sides.items())]


def pairs_of(name: str, pre: str | None, post: str | None, options: AnalyzeOptionsDocument) -> Pair:
    """A pair with its identity."""
    return Pair(name=name, pre=pre, post=post, key=_identity(pre, post, options))


def name_of(pre: str) -> str:
    """A campaign name for a stored pair: the PRE file's name without its side and extension."""
    m = re.fullmatch(DEFAULT_PATTERN, Path(pre).name)
    return m.group("name") if m else Path(pre).stem


def campaign_key(options: CampaignOptions) -> str:
    """What makes a campaign the same campaign: its source, pattern and analysis options
    (not where it runs or where its series go)."""
    parts = [options.source, options.pattern, options.analysis]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def choose_pairs(
    directory: Path | None,
    db: Path,
    pattern: str,
    options: AnalyzeOptionsDocument,
    scheduler: str | None,
    series: bool,
    series_dir: Path | None,
) -> tuple[list[Pair], CampaignOptions]:
    """The pairs a campaign analyses and the campaign itself (on the cluster at `scheduler`):
    those of `directory` by `pattern`, or (no directory) every capture pair the database at
    `db` has analysed, again; with `series`, each pair's matched series goes to `series_dir`,
    by default beside a directory's captures. UserError for an empty directory, or stored
    pairs without a place for their series."""
    from lowtail.store import open_store
    from lowtail.store.campaigns import analysed_capture_pairs

    if directory is None:
        with open_store(db, read_only=True) as s:
            stored = analysed_capture_pairs(s)
        if series and series_dir is None:
            raise UserError("--from-db: say where the matched series go (--series-dir DIR) or pass --no-series")
        pairs = [pairs_of(name_of(pre), pre, post, options) for pre, post in stored]
        source = "database"
    else:
        pairs = find_pairs(directory, pattern, options)
        if not pairs:
            raise UserError(f"{directory}: no capture pairs (files named like NAME-pre.pcap and NAME-post.pcap)")
        source, series_dir = str(directory.resolve()), series_dir or directory
    series_dir = series_dir if series else None
    if series_dir is not None and scheduler is None:
        check_series_dir(series_dir)
    return pairs, CampaignOptions(source, pattern, options, scheduler, series_dir)


def check_series_dir(directory: Path) -> None:
    """UserError, before any pair is analysed, when the local cluster's workers could not
    write the matched series in `directory` (made here if missing, as they would). A remote
    cluster's workers see their own file system: each says so for its pairs."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--series-dir {directory}: cannot create it ({e.strerror or e})") from None
    files.check_writable(directory, f"--series-dir {directory}")
