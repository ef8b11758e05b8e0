"""Bundles made by hand, as a hostile or careless exporter would: files replaced, manifests
edited, checksums and ids made to match (so that only the rule under test is broken), and
tar members of every kind (sparse, links, devices)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lowtail.bundle.manifest import MANIFEST, bundle_id


def read_bundle(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A bundle's manifest and its files' bytes."""
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    return json.loads(files.pop(MANIFEST)), files


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def rows(files: dict[str, bytes], table: str) -> pa.Table:
    return pq.read_table(io.BytesIO(files[f"rows/{table}.parquet"]))


def write_bundle(
    path: Path,
    manifest: dict[str, Any],
    files: dict[str, bytes],
    fix: bool = True,
    members: Callable[[tarfile.TarFile], None] | None = None,
    manifest_bytes: bytes | None = None,
    after: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """A bundle of these files; with `fix`, the manifest's checksums, sizes, row counts and
    id are made to match them; `after` edits the manifest then. `members` adds raw tar members
    of its own."""
    manifest = json.loads(json.dumps(manifest))
    if fix:
        manifest["files"] = {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)} for name, data in files.items()
        }
        for name, data in files.items():
            if name.startswith("rows/") and name.endswith(".parquet"):
                table = name.removeprefix("rows/").removesuffix(".parquet")
                if table in manifest.get("tables", {}) and isinstance(manifest["tables"][table], dict):
                    try:
                        manifest["tables"][table]["rows"] = pq.ParquetFile(io.BytesIO(data)).metadata.num_rows
                    except Exception:  # not Parquet: the count stays as it was
                        pass
        manifest["bundle_id"] = bundle_id(manifest["files"])
    if after is not None:
        after(manifest)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        data = manifest_bytes if manifest_bytes is not None else json.dumps(manifest).encode()
        _add(tar, MANIFEST, data)
        for name, content in files.items():
            _add(tar, name, content)
        if members is not None:
            members(tar)
    return path


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
