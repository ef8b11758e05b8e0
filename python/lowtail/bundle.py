"""Bundles: stored runs carried to another database (`lowtail export` / `lowtail import`),
so that experiments from two hosts, two kernels or two colleagues compare in one place.

A bundle is one tar file:

    manifest.json                what it is: format and version, the lowtail that wrote it,
                                 its origin (host, database), its tables and files with
                                 their SHA-256 checksums, and its id
    rows/<table>.parquet         the stored rows (store.bundles.TABLES), as DuckDB holds them
    series/analysis-<id>.parquet each analysis's matched series, as the analysis wrote it

Its id is the SHA-256 over its files' names and checksums: importing the same bundle twice
adds nothing the second time. A bundle of a newer format, or with columns this lowtail's
tables do not have, is refused, as is one whose files do not match their checksums; the
database and its data directory are left as they were."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import socket
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from lowtail import __version__
from lowtail.errors import UserError

FORMAT = "lowtail-bundle"
# Version 1: the layout above. A reader refuses bundles of a later version.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bundle_id(files: dict[str, dict[str, Any]]) -> str:
    """The id of a bundle: SHA-256 over its file names and checksums, in name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{files[name]['sha256']}\n".encode())
    return h.hexdigest()


# -- export -----------------------------------------------------------------------------------


def export_bundle(db: str | Path, words: list[str], output: str | Path) -> dict[str, Any]:
    """Write the runs a selection names (see lowtail.selection), with everything a
    comparison elsewhere needs, to the bundle `output`; returns its manifest."""
    import pyarrow.parquet as pq

    from lowtail import selection
    from lowtail.store import bundles as bundlestore
    from lowtail.store import open_store

    output = Path(output)
    with tempfile.TemporaryDirectory(prefix=".lowtail-bundle-", dir=output.resolve().parent) as tmp:
        folder = Path(tmp)
        (folder / "rows").mkdir()
        (folder / "series").mkdir()
        with open_store(db, read_only=True) as store:
            chosen = selection.select(store, words)
            run_ids = [r["run_id"] for r in chosen if r["run_id"] is not None]
            plain = [r["analysis_id"] for r in chosen if r["run_id"] is None and r["analysis_id"] is not None]
            tables = bundlestore.rows_to_export(store, run_ids, plain)
        files: dict[str, dict[str, Any]] = {}
        counts = {}
        for table, rows in tables.items():
            name = f"rows/{table}.parquet"
            pq.write_table(rows, folder / name)
            counts[table] = rows.num_rows
        missing = []
        analyses = tables["analyses"].to_pylist()
        for a in analyses:
            source = a.get("series_path")
            if not source or not Path(source).exists():
                missing.append(a["analysis_id"])
                continue
            shutil.copyfile(source, folder / f"series/analysis-{a['analysis_id']}.parquet")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(folder).as_posix()
            files[rel] = {"sha256": _sha256(path), "bytes": path.stat().st_size}
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "lowtail_version": __version__,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "origin": {"host": socket.gethostname(), "database": str(Path(db).resolve())},
            "selection": list(words),
            "bundle_id": bundle_id(files),
            "tables": {t: {"rows": counts[t], "columns": tables[t].column_names} for t in tables},
            "files": files,
            "series_missing": missing,
        }
        partial = output.with_name(f".{output.name}.partial")
        with tarfile.open(partial, "w") as tar:
            _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1).encode())
            for rel in sorted(files):
                tar.add(folder / rel, arcname=rel, recursive=False)
        partial.replace(output)
    return manifest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(datetime.now(UTC).timestamp())
    tar.addfile(info, io.BytesIO(data))


# -- import -----------------------------------------------------------------------------------


def import_bundle(db: str | Path, path: str | Path, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Add the runs of bundle `path` to database `db` under new ids, their series under
    `data_dir` (default: the database's data directory). Returns what was imported (or,
    for a bundle imported before, what it was imported as, with `already: true`)."""
    import pyarrow.parquet as pq

    from lowtail.store import bundles as bundlestore
    from lowtail.store import default_data_dir, open_store

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such bundle")
    with tempfile.TemporaryDirectory(prefix=".lowtail-import-") as tmp:
        folder = Path(tmp)
        manifest = _unpack(path, folder)
        tables = {}
        for table, _ in bundlestore.TABLES:
            if table not in manifest["tables"]:
                raise UserError(f"{path}: damaged bundle: it has no {table} rows")
            tables[table] = pq.read_table(folder / f"rows/{table}.parquet")
        with open_store(db) as store:
            before = bundlestore.imported(store, manifest["bundle_id"])
            if before is not None:
                return {"already": True, "bundle_id": manifest["bundle_id"], **before}
            _check_columns(store, tables, manifest, path)
            root = Path(data_dir) if data_dir else default_data_dir(db)
            root.mkdir(parents=True, exist_ok=True)
            target = Path(tempfile.mkdtemp(prefix=f"import-{manifest['bundle_id'][:12]}-", dir=root))
            try:
                series = {}
                for rel in manifest["files"]:
                    if rel.startswith("series/"):
                        old = int(rel.removeprefix("series/analysis-").removesuffix(".parquet"))
                        shutil.copyfile(folder / rel, target / Path(rel).name)
                        series[old] = str((target / Path(rel).name).resolve())
                origin = manifest["origin"] | {
                    "bundle_id": manifest["bundle_id"],
                    "lowtail_version": manifest["lowtail_version"],
                    "exported_at": manifest["created_at"],
                }
                done = bundlestore.import_rows(
                    store, tables, manifest["bundle_id"], origin, manifest, str(target.resolve()), series
                )
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
    return {"already": False, "bundle_id": manifest["bundle_id"], "data_dir": str(target), "origin": origin, **done}


def _unpack(path: Path, folder: Path) -> dict[str, Any]:
    """Read the manifest, refuse a bundle of a later format, extract the files it lists
    (nothing else) and check every checksum."""
    try:
        with tarfile.open(path, "r:") as tar:
            try:
                manifest = json.loads(tar.extractfile(MANIFEST).read())  # type: ignore[union-attr]
            except (KeyError, AttributeError, json.JSONDecodeError):
                raise UserError(f"{path}: not a lowtail bundle (no readable {MANIFEST})") from None
            _check_manifest(manifest, path)
            members = {m.name: m for m in tar.getmembers()}
            for rel in manifest["files"]:
                member = members.get(rel)
                if member is None or not member.isfile() or ".." in Path(rel).parts or Path(rel).is_absolute():
                    raise UserError(f"{path}: damaged bundle: {rel} is missing")
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, target.open("wb") as dst:  # type: ignore[union-attr]
                    shutil.copyfileobj(src, dst)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise UserError(f"{path}: not a readable lowtail bundle ({str(e).splitlines()[0]})") from None
    for rel, meta in manifest["files"].items():
        if _sha256(folder / rel) != meta["sha256"]:
            raise UserError(f"{path}: damaged bundle: {rel} does not match its checksum")
    if bundle_id(manifest["files"]) != manifest["bundle_id"]:
        raise UserError(f"{path}: damaged bundle: its id does not match its files")
    return cast(dict[str, Any], manifest)


def _check_manifest(manifest: Any, path: Path) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UserError(f"{path}: not a lowtail bundle")
    version = manifest.get("format_version")
    if not isinstance(version, int):
        raise UserError(f"{path}: damaged bundle: no format version")
    if version > FORMAT_VERSION:
        raise UserError(
            f"{path}: written by lowtail {manifest.get('lowtail_version', '?')} in bundle format {version}; "
            f"this lowtail ({__version__}) reads format {FORMAT_VERSION}: upgrade lowtail to import it"
        )
    for key in ("bundle_id", "files", "tables", "origin", "created_at", "lowtail_version"):
        if key not in manifest:
            raise UserError(f"{path}: damaged bundle: its manifest has no {key}")


def _check_columns(store: Any, tables: dict[str, Any], manifest: dict[str, Any], path: Path) -> None:
    """A bundle whose rows have columns this database's tables lack was written by a newer
    lowtail: importing it would lose them."""
    from lowtail.store import bundles as bundlestore

    unknown = []
    for table, rows in tables.items():
        known = set(bundlestore.table_columns(store, table))
        unknown += [f"{table}.{column}" for column in rows.column_names if column not in known]
    if unknown:
        raise UserError(
            f"{path}: written by a newer lowtail ({manifest['lowtail_version']}): its rows have columns "
            f"this one does not know ({', '.join(unknown[:5])}{', …' if len(unknown) > 5 else ''}); upgrade lowtail"
        )
