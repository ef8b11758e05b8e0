"""Bundles: stored runs carried to another database (`lowtail export` / `lowtail import`),
so that experiments from two hosts, two kernels or two colleagues compare in one place.

A bundle is one tar file:

    manifest.json                what it is: format and version, the lowtail that wrote it,
                                 its origin (host, database), its tables (rows and columns)
                                 and files (SHA-256 and size), and its id
    rows/<table>.parquet         the stored rows (store.bundles.TABLES), as DuckDB holds them
    series/analysis-<id>.parquet each analysis's matched series, as the analysis wrote it
    traces/run-<id>.parquet      each run's kernel trace (trace/timeline.py), as the run wrote it

Its id is the SHA-256 over its files' names and checksums: importing the same bundle twice
adds nothing the second time. Rows are known by their content too (store.bundles: the same
runs arriving in another bundle, re-exported by a second lab, are recognised and not added
again).

A bundle is untrusted input, checked before anything is written: the manifest against its
schema (`Manifest`: types, ranges, names) before any member is read; every member a regular
file that the manifest lists, of the declared size, within the limits and the free space,
before extraction (sparse members, links, devices and names outside the layout are refused);
each trace checked to be one (its columns, its interval count, its recording facts);
extracted into a staging folder of the database's data directory that a killed import's next
one removes; rows checked (types, uniqueness, references, counts within the manifest's and
the limits) before the first write. Every refusal is one line naming the member and the rule
(exit 2); the database and its data directory are left as they were."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec

from lowtail.core import schema
from lowtail.core.errors import UserError

FORMAT: Final = "lowtail-bundle"
# Version 1: the layout above without traces, and without the tables store.bundles.SINCE_VERSION
# names. Version 2: traces, explanations and summaries. Version 3: each flow's figures. Version
# 4: a chain's hops (their rows). Version 5: the hops' series files (series/hop-<run>-<hop>),
# which `lowtail explain` splits a chain's tail by. A reader refuses bundles of a later
# version, and reads an earlier one as having none of the later rows or files.
FORMAT_VERSION = 5
# The first version whose bundles may carry hop series files.
HOP_SERIES_SINCE = 5
MANIFEST = "manifest.json"

# Limits a bundle must keep (far beyond any real export; a bundle past them is refused before
# its members are read).
MAX_MANIFEST_BYTES = 64 << 20
MAX_MEMBERS = 200_000
MAX_ROWS_FILE_BYTES = 4 << 30
MAX_SERIES_FILE_BYTES = 1 << 40
# Free space left on the data directory's disk after the bundle's files are unpacked.
DISK_MARGIN_BYTES = 64 << 20

_SERIES_NAME = re.compile(r"^series/analysis-([1-9][0-9]{0,17})\.parquet$")
_TRACE_NAME = re.compile(r"^traces/run-([1-9][0-9]{0,17})\.parquet$")
# A chain run's hop (run id, hop number: a chain has at most 16 hops).
_HOP_SERIES_NAME = re.compile(r"^series/hop-([1-9][0-9]{0,17})-([1-9][0-9]?)\.parquet$")
_Sha256 = Annotated[str, schema.rule("must be a SHA-256 (64 lowercase hex digits)", pattern="^[0-9a-f]{64}$")]
_Short = Annotated[str, schema.rule("must be a string of at most 4,096 characters", max_length=4096)]


class FileEntry(msgspec.Struct, forbid_unknown_fields=True):
    """A member of the bundle: its checksum and size."""

    sha256: _Sha256
    bytes: Annotated[int, schema.rule("must be a size in bytes", ge=0, le=MAX_SERIES_FILE_BYTES)]


class TableEntry(msgspec.Struct, forbid_unknown_fields=True):
    """A table's rows in the bundle: how many, and their columns."""

    rows: Annotated[int, schema.rule("must be a count of rows", ge=0, le=schema.INT64_MAX)]
    columns: Annotated[
        list[Annotated[str, schema.rule("must be a column name", pattern="^[a-z_][a-z0-9_]{0,62}$")]],
        schema.rule("must be a list of at most 1,000 column names", max_length=1000),
    ]


class Origin(msgspec.Struct, forbid_unknown_fields=True):
    """Where the bundle was written: the host and the database."""

    host: _Short
    database: _Short


class Manifest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """manifest.json (its fields in the order `lowtail export` writes them)."""

    format: Literal["lowtail-bundle"]
    format_version: Annotated[int, schema.rule(f"must be 1 to {FORMAT_VERSION}", ge=1, le=FORMAT_VERSION)]
    lowtail_version: Annotated[str, schema.rule("must be a version", max_length=100)]
    created_at: Annotated[str, schema.rule("must be a time", max_length=64)]
    origin: Origin
    selection: Annotated[list[_Short], schema.rule("must be a list of words", max_length=10_000)] = []
    bundle_id: _Sha256
    tables: dict[str, TableEntry]
    files: Annotated[
        dict[str, FileEntry],
        schema.rule(f"must be a table of at most {MAX_MEMBERS:,} files (name: sha256, bytes)", max_length=MAX_MEMBERS),
    ]
    series_missing: Annotated[
        list[Annotated[int, schema.rule("must be analysis ids", ge=0, le=schema.INT64_MAX)]],
        schema.rule("must be a list of analysis ids", max_length=MAX_MEMBERS),
    ] = []
    traces_missing: Annotated[
        list[Annotated[int, schema.rule("must be run ids", ge=0, le=schema.INT64_MAX)]],
        schema.rule("must be a list of run ids", max_length=MAX_MEMBERS),
    ] = []


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, as a manifest lists it (lowercase hex)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bundle_id(files: Mapping[str, Mapping[str, object]]) -> str:
    """The id of a bundle: SHA-256 over its file names and checksums (name: {"sha256": …},
    as a manifest lists them), in name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{files[name]['sha256']}\n".encode())
    return h.hexdigest()


class BundleError(UserError):
    """A bundle refused: which member broke which rule (None: the bundle as a whole)."""

    def __init__(self, path: Path, rule: str, member: str | None = None) -> None:
        self.member = member
        self.rule = rule
        super().__init__(f"{path}: damaged bundle: {member + ': ' if member else ''}{rule}")
