"""`lowtail export`: the runs a selection names, their series, traces and the rows that go with
them, written into one bundle (bundle/manifest.py describes it)."""

from __future__ import annotations

import io
import json
import shutil
import socket
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from lowtail.bundle.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    FileEntry,
    Manifest,
    Origin,
    TableEntry,
    bundle_id,
    sha256_of,
)
from lowtail.core import files
from lowtail.core.version import __version__


def export_bundle(db: str | Path, words: list[str], output: str | Path) -> Manifest:
    """Write the runs a selection names (see lowtail.store.selection), with everything a
    comparison elsewhere needs, to the bundle `output`; returns its manifest. The bundle is
    written whole or not at all, as a regular file (files.write_atomically)."""
    output = files.check_output(Path(output), "export")
    try:
        with tempfile.TemporaryDirectory(prefix=".lowtail-bundle-", dir=output.resolve().parent) as tmp:
            return _export_into(db, words, output, Path(tmp))
    except OSError as e:  # the staging folder beside the output: name the output, not a temporary path
        raise files.os_error(e, output, "export") from None


def _export_into(db: str | Path, words: list[str], output: Path, folder: Path) -> Manifest:
    import pyarrow.parquet as pq

    from lowtail.store import bundles as bundlestore
    from lowtail.store import open_store, selection

    (folder / "rows").mkdir()
    (folder / "series").mkdir()
    (folder / "traces").mkdir()
    with open_store(db, read_only=True) as store:
        chosen = selection.select(store, words)
        run_ids = [r["run_id"] for r in chosen if r["run_id"] is not None]
        plain = [r["analysis_id"] for r in chosen if r["run_id"] is None and r["analysis_id"] is not None]
        tables = bundlestore.rows_to_export(store, run_ids, plain)
    listed: dict[str, FileEntry] = {}
    counts = {}
    for table, rows in tables.items():
        name = f"rows/{table}.parquet"
        pq.write_table(rows, folder / name)
        counts[table] = rows.num_rows
    missing = []
    analyses = tables["analyses"].to_pylist()
    for a in analyses:
        source = a.get("series_path")
        if not source or not Path(source).is_file():
            missing.append(a["analysis_id"])
            continue
        shutil.copyfile(source, folder / f"series/analysis-{a['analysis_id']}.parquet")
    for hop in tables["run_hops"].to_pylist():
        # A hop whose series is gone travels without it: explain then says its tail cannot be split.
        source = hop.get("series_path")
        if source and Path(source).is_file():
            shutil.copyfile(source, folder / f"series/hop-{hop['run_id']}-{hop['hop']}.parquet")
    traces_missing = []
    for t in tables["run_traces"].to_pylist():
        source = t.get("path")
        if not source:
            continue  # recorded without a trace: its reason travels in its row
        if not Path(source).is_file():
            traces_missing.append(t["run_id"])
            continue
        shutil.copyfile(source, folder / f"traces/run-{t['run_id']}.parquet")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        listed[rel] = FileEntry(sha256=sha256_of(path), bytes=path.stat().st_size)
    manifest = Manifest(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        lowtail_version=__version__,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        origin=Origin(host=socket.gethostname(), database=str(Path(db).resolve())),
        selection=list(words),
        bundle_id=bundle_id({name: {"sha256": entry.sha256} for name, entry in listed.items()}),
        tables={t: TableEntry(rows=counts[t], columns=tables[t].column_names) for t in tables},
        files=listed,
        series_missing=missing,
        traces_missing=traces_missing,
    )

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w") as tar:
            _add_bytes(tar, MANIFEST, json.dumps(msgspec.to_builtins(manifest), indent=1).encode())
            for rel in sorted(listed):
                tar.add(folder / rel, arcname=rel, recursive=False)

    files.write_atomically(output, write, "export")
    return manifest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(datetime.now(UTC).timestamp())
    tar.addfile(info, io.BytesIO(data))
