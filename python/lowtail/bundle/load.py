"""`lowtail import`: a bundle checked as the untrusted input it is (bundle/manifest.py says what
is checked, before anything is written), then its rows, series and traces added under new ids."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tarfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from lowtail.bundle.document import ImportOrigin, ImportResult
from lowtail.bundle.manifest import (
    _HOP_SERIES_NAME,
    _SERIES_NAME,
    _TRACE_NAME,
    DISK_MARGIN_BYTES,
    FORMAT,
    FORMAT_VERSION,
    HOP_SERIES_SINCE,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    MAX_MEMBERS,
    MAX_ROWS_FILE_BYTES,
    MAX_SERIES_FILE_BYTES,
    BundleError,
    Manifest,
    bundle_id,
)
from lowtail.core import files, schema, terminal
from lowtail.core.errors import DiskFull, UserError
from lowtail.core.version import __version__

if TYPE_CHECKING:
    from lowtail.store.bundles import Tables

# A rows file's footer (its schema, row groups and statistics), read whole before anything
# else: far beyond a real footer, far below what would cost memory (a value's min/max
# statistics are copied into it).
MAX_FOOTER_BYTES = 16 << 20
# Rows read at a time while their decoded size is counted.
_BATCH_ROWS = 8192


def import_bundle(db: str | Path, path: str | Path, data_dir: str | Path | None = None) -> ImportResult:
    """Add the runs of bundle `path` to database `db` under new ids, their series under
    `data_dir` (default: the database's data directory). Returns what was imported (or, for
    a bundle whose every row is here already, what it was imported as, with `already: true`)."""
    from lowtail.store import datadir, default_data_dir, made_whole_or_not_at_all, open_store

    path = Path(path)
    if not path.exists():  # before anything is made: a mistyped name leaves nothing behind
        raise UserError(f"{path}: no such bundle")
    kind = files.special_kind(path)
    if kind is not None and kind != "a FIFO":  # a device would be read without end
        raise UserError(f"{path}: is {kind}, not a bundle")
    root = Path(data_dir) if data_dir else default_data_dir(db)
    made_root = not root.exists()
    with made_whole_or_not_at_all(db), open_store(db) as store:
        staging: Path | None = None
        try:
            # What killed or failed imports into this database left: gone before this one starts.
            datadir.clean_import_leftovers(store, root)
            staging = datadir.import_folder(store, root, datadir.IMPORT_STAGING_PREFIX)
            return _import_staged(store, path, root, staging)
        except OSError as e:
            where = root if e.errno in files.DISK_FULL else path  # the disk that is full: the data directory's
            raise files.os_error(e, where, "import") from None
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            if made_root:
                _remove_if_empty(root)


def _remove_if_empty(folder: Path) -> None:
    """The data directory an import made, gone again when the import added nothing to it."""
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty: it holds what was imported


def _import_staged(store: Any, path: Path, root: Path, staging: Path) -> ImportResult:
    from lowtail.store import bundles as bundlestore
    from lowtail.store import datadir

    with _open_bundle(path) as source:
        limits = {table: bundlestore.value_limits(store, table) for table, _ in bundlestore.TABLES}
        manifest, tables = _unpack(path, source, staging, _newer_columns(store, path), limits)
    tables = bundlestore.with_absent_tables(store, tables)
    try:
        bundlestore.check_rows(store, tables, _series_ids(manifest), _trace_ids(manifest), _hop_ids(manifest))
    except bundlestore.RowsRefused as e:
        raise BundleError(path, e.rule, e.member) from None
    before = bundlestore.imported(store, manifest.bundle_id)
    if before is not None:
        return {
            "already": True,
            "bundle_id": manifest.bundle_id,
            "import_id": before["import_id"],
            "imported_at": before["imported_at"],
            "experiments": before["experiments"],
            "runs": before["runs"],
            "analyses": before["analyses"],
            "models": before["models"],
        }
    known = bundlestore.known_content(store, tables)
    if known.everything:
        # Every row came here before, by another bundle (a re-export) or measured here.
        here = known.as_result()
        return {
            "already": True,
            "bundle_id": manifest.bundle_id,
            "import_id": None,
            "experiments": here["experiments"],
            "runs": here["runs"],
            "analyses": here["analyses"],
            "models": here["models"],
        }
    target = datadir.import_folder(store, root, f"{datadir.IMPORT_FOLDER_PREFIX}{manifest.bundle_id[:12]}-")
    try:
        # What is here already keeps its own series and trace.
        series = _move_members(manifest.files, _SERIES_NAME, known.of("analyses"), staging, target, None)
        traces = _move_members(manifest.files, _TRACE_NAME, known.of("runs"), staging, target, "trace-run-{}.parquet")
        hop_series = _move_hop_members(manifest.files, known.of("runs"), staging, target)
        origin = ImportOrigin(
            host=manifest.origin.host,
            database=manifest.origin.database,
            bundle_id=manifest.bundle_id,
            lowtail_version=manifest.lowtail_version,
            exported_at=manifest.created_at,
        )
        done = bundlestore.import_rows(
            store,
            tables,
            manifest.bundle_id,
            dict(origin),
            msgspec.to_builtins(manifest),
            str(target.resolve()),
            series,
            known,
            traces,
            hop_series,
        )
        datadir.release_import_folder(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return {
        "already": False,
        "bundle_id": manifest.bundle_id,
        "data_dir": str(target),
        "origin": origin,
        "import_id": done["import_id"],
        "experiments": done["experiments"],
        "runs": done["runs"],
        "analyses": done["analyses"],
        "models": done["models"],
    }


def _move_members(
    names: Iterable[str],
    pattern: re.Pattern[str],
    here: Mapping[int, int],
    staging: Path,
    target: Path,
    rename: str | None,
) -> dict[int, str]:
    """The staged members that `pattern` names (its group: the old id) moved into the import's
    folder (under their own name, or `rename` formatted with the old id), but for those whose
    row is here already: old id → the file's absolute path."""
    moved = {}
    for rel in names:
        m = pattern.match(rel)
        if m is None or int(m.group(1)) in here:
            continue
        old = int(m.group(1))
        name = rename.format(old) if rename else Path(rel).name
        os.replace(staging / rel, target / name)
        moved[old] = str((target / name).resolve())
    return moved


def _move_hop_members(
    names: Iterable[str], here: Mapping[int, int], staging: Path, target: Path
) -> dict[tuple[int, int], str]:
    """The staged hop series moved into the import's folder, but for runs here already:
    (old run id, hop) → the file's absolute path."""
    moved = {}
    for rel in names:
        m = _HOP_SERIES_NAME.match(rel)
        if m is None or int(m.group(1)) in here:
            continue
        name = Path(rel).name
        os.replace(staging / rel, target / name)
        moved[(int(m.group(1)), int(m.group(2)))] = str((target / name).resolve())
    return moved


def _hop_ids(manifest: Manifest) -> set[tuple[int, int]]:
    return {(int(m.group(1)), int(m.group(2))) for rel in manifest.files if (m := _HOP_SERIES_NAME.match(rel))}


def _series_ids(manifest: Manifest) -> set[int]:
    return {int(m.group(1)) for rel in manifest.files if (m := _SERIES_NAME.match(rel))}


def _trace_ids(manifest: Manifest) -> set[int]:
    return {int(m.group(1)) for rel in manifest.files if (m := _TRACE_NAME.match(rel))}


class _open_bundle:  # noqa: N801 — a context manager read like a function
    """The bundle as a stream: a regular file, or a FIFO (`<(…)`, a writer waited for as for
    any input); a device, socket or directory refused without reading a byte (checked again
    once open: a file swapped meanwhile is refused too). Nothing is copied before it is
    checked: `_unpack` reads the stream member by member."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise UserError(f"{self.path}: no such bundle") from None
        try:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise UserError(
                    f"{self.path}: is {files.special_kind(self.path) or 'not a regular file'}, not a bundle"
                )
            if stat.S_ISFIFO(mode):
                files.wait_for_writer(fd, self.path)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self.file = os.fdopen(fd, "rb")
        return self.file

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


def _read_manifest(path: Path, tar: tarfile.TarFile, first: tarfile.TarInfo | None) -> Manifest:
    """The manifest (the bundle's first member), refused unless it is what format version 1
    says; a later version is named as such."""
    if first is None or first.name != MANIFEST or not first.isreg():
        raise UserError(f"{path}: not a lowtail bundle (no {MANIFEST} first)")
    if first.size > MAX_MANIFEST_BYTES:
        raise BundleError(path, f"is {first.size:,} bytes, more than {MAX_MANIFEST_BYTES:,}", MANIFEST)
    data = tar.extractfile(first).read()  # type: ignore[union-attr]
    source = f"{path}: {MANIFEST}"
    try:
        raw = schema.load_json(data, source, MAX_MANIFEST_BYTES)
    except schema.InputError as e:
        raise BundleError(path, e.reason, MANIFEST) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise UserError(f"{path}: not a lowtail bundle")
    version = raw.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise UserError(
            f"{path}: written by lowtail {terminal.shown(str(raw.get('lowtail_version', '?'))[:40])} in bundle format {version}; "
            f"this lowtail ({__version__}) reads format {FORMAT_VERSION}: upgrade lowtail to import it"
        )
    try:
        manifest: Manifest = schema.convert(raw, Manifest, source)
    except schema.InputError as e:
        raise BundleError(path, e.reason, MANIFEST) from None
    _check_layout(path, manifest)
    return manifest


def _check_layout(path: Path, manifest: Manifest) -> None:
    """Every file a name of the layout; every table one a bundle carries, with its file."""
    from lowtail.store.bundles import tables_of_version

    names = set(tables_of_version(manifest.format_version))
    for table in manifest.tables:
        if table not in names:
            raise BundleError(path, f"lists a table {table!r} lowtail's bundles do not carry", MANIFEST)
    for table in names:
        if table not in manifest.tables:
            raise BundleError(path, f"has no {table} rows", MANIFEST)
        if f"rows/{table}.parquet" not in manifest.files:
            raise BundleError(path, f"lists table {table} without its file rows/{table}.parquet", MANIFEST)
    for rel in manifest.files:
        is_trace = _TRACE_NAME.match(rel) and manifest.format_version >= 2
        is_hop = _HOP_SERIES_NAME.match(rel) and manifest.format_version >= HOP_SERIES_SINCE
        if not (_SERIES_NAME.match(rel) or is_trace or is_hop or rel in {f"rows/{table}.parquet" for table in names}):
            raise BundleError(
                path,
                f"lists {rel!r}, which is no file of a bundle (rows/<table>.parquet, series/analysis-<id>.parquet, "
                "series/hop-<run id>-<hop>.parquet, traces/run-<id>.parquet)",
                MANIFEST,
            )
    if bundle_id({k: {"sha256": v.sha256} for k, v in manifest.files.items()}) != manifest.bundle_id:
        raise BundleError(path, "its id does not match its files", MANIFEST)


def _check_member(path: Path, member: tarfile.TarInfo, manifest: Manifest, seen: set[str]) -> None:
    """A member's header, before a byte of it is copied: a regular file the manifest lists,
    once, of its declared size, within the limits."""
    if len(seen) >= MAX_MEMBERS:
        raise BundleError(path, f"holds more than {MAX_MEMBERS:,} members")
    name = member.name
    if name not in manifest.files:
        raise BundleError(path, "is not in the manifest (a bundle holds only the files it lists)", _shown(name))
    if name in seen:
        raise BundleError(path, "appears twice", name)
    if not member.isreg():
        raise BundleError(path, f"is {_member_kind(member)}; a bundle holds only regular files", name)
    if member.issparse() or any(k.startswith("GNU.sparse") for k in member.pax_headers):
        raise BundleError(path, "is a sparse file; a bundle holds only plain files", name)
    declared = manifest.files[name].bytes
    if member.size != declared:
        raise BundleError(path, f"is {member.size:,} bytes, the manifest says {declared:,}", name)
    limit = MAX_ROWS_FILE_BYTES if name.startswith("rows/") else MAX_SERIES_FILE_BYTES
    if member.size > limit:
        raise BundleError(path, f"is {member.size:,} bytes, more than {limit:,}", name)
    seen.add(name)


def _next_member(path: Path, tar: tarfile.TarFile) -> tarfile.TarInfo | None:
    """The next member's header. tarfile raises ValueError (not a TarError) for GNU sparse
    maps and pax extensions it cannot read: a bundle holds neither, refused in one line."""
    try:
        return tar.next()
    except ValueError as e:
        raise BundleError(
            path, f"holds a tar header lowtail does not read (a sparse or pax extension: {_first_line(e)})"
        ) from None


def _member_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to {_shown(member.linkname)})"
    if member.islnk():
        return f"a hard link (to {_shown(member.linkname)})"
    if member.isdir():
        return "a directory"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return f"a member of type {member.type!r}"


def _shown(name: str) -> str:
    return name if len(name) <= 120 and name.isprintable() else terminal.shown(repr(name[:100])) + "…"


def _newer_columns(store: Any, path: Path) -> Callable[[Manifest], None]:
    """A check of the manifest's columns against this database's: a bundle whose rows have
    columns its tables lack was written by a newer lowtail, and importing it would lose them."""
    from lowtail.store import bundles as bundlestore

    def check(manifest: Manifest) -> None:
        unknown = []
        for table, entry in manifest.tables.items():
            known = set(bundlestore.table_columns(store, table))
            unknown += [f"{table}.{column}" for column in entry.columns if column not in known]
        if unknown:
            raise UserError(
                f"{path}: written by a newer lowtail ({manifest.lowtail_version}): its rows have columns "
                f"this one does not know ({', '.join(unknown[:5])}{', …' if len(unknown) > 5 else ''}); upgrade lowtail"
            )

    return check


def _unpack(
    path: Path,
    source: IO[bytes],
    staging: Path,
    check_columns: Callable[[Manifest], None],
    limits: Mapping[str, Mapping[str, int]],
) -> tuple[Manifest, Tables]:
    """Check the manifest, the total it declares against the free space, and every member's
    header before a byte of that member is copied — of a regular file every header before
    anything is extracted; of a FIFO, read as a stream, each header before its member —
    extracting each file checked against its checksum as it is written; then read the rows
    (their counts and decoded sizes from the Parquet footers first)."""
    seekable = source.seekable()
    try:
        with tarfile.open(fileobj=source, mode="r:" if seekable else "r|") as tar:
            manifest = _read_manifest(path, tar, _next_member(path, tar))
            check_columns(manifest)
            total = sum(entry.bytes for entry in manifest.files.values())
            free = shutil.disk_usage(staging).free
            if total + DISK_MARGIN_BYTES > free:
                raise DiskFull(
                    f"{path}: its files are {total:,} bytes and the data directory's disk has {free:,} free "
                    f"(with {DISK_MARGIN_BYTES >> 20} MiB to spare): free some space or give --data-dir"
                )
            for member in _checked_members(path, tar, manifest, all_first=seekable):
                _extract(path, tar, member, staging / member.name, manifest.files[member.name].sha256)
                if _TRACE_NAME.match(member.name):
                    _check_trace(path, staging / member.name, member.name)
    except (tarfile.TarError, EOFError) as e:
        raise UserError(
            f"{path}: not a readable lowtail bundle ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    return manifest, _read_rows(path, staging, manifest, limits)


def _checked_members(
    path: Path, tar: tarfile.TarFile, manifest: Manifest, all_first: bool
) -> Iterator[tarfile.TarInfo]:
    """The members after the manifest, each header checked (`_check_member`) before it is
    given; `all_first`: every header checked before the first is given (a seekable bundle).
    Ends with a member the manifest lists but the bundle lacks refused."""
    seen: set[str] = set()
    checked: list[tarfile.TarInfo] = []
    while (member := _next_member(path, tar)) is not None:
        _check_member(path, member, manifest, seen)
        if all_first:
            checked.append(member)
        else:
            yield member
    missing = [name for name in manifest.files if name not in seen]
    if missing:
        raise BundleError(path, "is missing", missing[0])
    yield from checked


def _extract(path: Path, tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, sha256: str) -> None:
    """One member to `target`: exactly its declared bytes, its checksum computed on the way."""
    src = tar.extractfile(member)
    if src is None:
        raise BundleError(path, "cannot be read", member.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    left = member.size
    with src, target.open("xb") as dst:
        while left > 0:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                raise UserError(f"{path}: not a readable lowtail bundle ({member.name} is cut short)")
            h.update(chunk)
            dst.write(chunk)
            left -= len(chunk)
    if h.hexdigest() != sha256:
        raise BundleError(path, "does not match its checksum", member.name)


def _check_trace(path: Path, extracted: Path, member: str) -> None:
    from lowtail.trace import timeline

    try:
        timeline.check(extracted, timeline.MAX_INTERVALS)
    except ValueError as e:
        raise BundleError(path, str(e), member) from None


def _read_rows(path: Path, staging: Path, manifest: Manifest, limits: Mapping[str, Mapping[str, int]]) -> Tables:
    """Each table's rows: the footer's count must be the manifest's and within the limits
    before the rows are read; then their decoded size (`_read_bounded`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lowtail.store.bundles import TABLES, row_limit

    declared_counts = {table: entry.rows for table, entry in manifest.tables.items()}
    tables = {}
    for table, _ in TABLES:
        if table not in manifest.tables:
            continue  # a table of a later format version than the bundle's (store.bundles.with_absent_tables)
        member = f"rows/{table}.parquet"
        declared = manifest.tables[table].rows
        _check_footer(path, staging / member, member)
        try:
            rows = pq.ParquetFile(staging / member).metadata.num_rows
        except (pa.ArrowException, OSError, ValueError) as e:
            raise BundleError(path, f"is not a Parquet file ({_first_line(e)})", member) from None
        if rows != declared:
            raise BundleError(path, f"holds {rows:,} rows, the manifest says {declared:,}", member)
        limit = row_limit(table, declared_counts)
        if rows > limit:
            raise BundleError(path, f"holds {rows:,} rows, more than a bundle of these may carry ({limit:,})", member)
        try:
            tables[table] = _read_bounded(path, staging / member, member, limits.get(table, {}))
        except (pa.ArrowException, OSError, ValueError) as e:
            raise BundleError(path, f"is not a readable Parquet file ({_first_line(e)})", member) from None
        if tables[table].column_names != manifest.tables[table].columns:
            raise BundleError(path, "has other columns than the manifest lists", member)
    return tables


def _check_footer(path: Path, file: Path, member: str) -> None:
    """Refuse a Parquet footer larger than MAX_FOOTER_BYTES from its length (the file's last
    eight bytes), before it is parsed."""
    with file.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 12:
            raise BundleError(path, "is not a Parquet file (too short)", member)
        f.seek(size - 8)
        tail = f.read(8)
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and length > MAX_FOOTER_BYTES:
        raise BundleError(path, f"has a Parquet footer of {length:,} bytes, more than {MAX_FOOTER_BYTES:,}", member)


def _read_bounded(path: Path, file: Path, member: str, limits: Mapping[str, int]) -> Any:
    """A rows file as an Arrow table, bounded by its decoded size before it is materialised:
    the footer's uncompressed size of each column chunk within what its values may hold; then
    read in batches with every text and binary column kept dictionary-encoded, each value's
    length and the table's decoded bytes (a dictionary's value counted for every row that
    names it) checked against `limits` (column → largest value) and MAX_TABLE_DECODED_BYTES;
    only then are the dictionaries decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lowtail.store.bundles import MAX_TABLE_DECODED_BYTES, OTHER_VALUE_LIMIT

    meta = pq.ParquetFile(file).metadata
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            most = limits.get(name, OTHER_VALUE_LIMIT) * max(group.num_rows, 1) + (1 << 20)
            if chunk.total_uncompressed_size > min(most, MAX_TABLE_DECODED_BYTES):
                raise BundleError(
                    path, f"column {name} takes {chunk.total_uncompressed_size:,} bytes uncompressed, more than "
                    f"its {group.num_rows:,} rows may hold", member
                )  # fmt: skip
    texts = [f.name for f in pq.ParquetFile(file).schema_arrow if _is_text(f.type)]
    decoded = 0
    batches = []
    for batch in pq.ParquetFile(file, read_dictionary=texts).iter_batches(batch_size=_BATCH_ROWS):
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            decoded += _decoded_bytes(path, member, name, column, limits.get(name, OTHER_VALUE_LIMIT))
        if decoded > MAX_TABLE_DECODED_BYTES:
            raise BundleError(path, f"its rows take more than {MAX_TABLE_DECODED_BYTES:,} bytes decoded", member)
        batches.append(batch)
    table = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else _empty(file)
    plain = [pa.field(f.name, _value_type(f.type), f.nullable) for f in table.schema]
    return table.cast(pa.schema(plain))


def _is_text(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
    )


def _value_type(arrow_type: Any) -> Any:
    import pyarrow as pa

    return arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type


def _decoded_bytes(path: Path, member: str, name: str, column: Any, limit: int) -> int:
    """A batch's column, decoded: a dictionary-encoded one's value lengths counted for every
    row that names them, and none longer than `limit`; any other its buffers' size."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(column.type):
        return int(column.nbytes)
    lengths = pc.binary_length(column.dictionary)
    longest = pc.max(lengths).as_py() or 0
    if longest > limit:
        raise BundleError(path, f"column {name} holds a value of {longest:,} bytes, more than {limit:,}", member)
    return int(pc.sum(pc.take(lengths, column.indices)).as_py() or 0)


def _empty(file: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.ParquetFile(file).schema_arrow.empty_table()


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:200] if lines else type(e).__name__
