"""The matched series: one row per matched packet, in PRE order, as `lowtail analyze
--export` writes it (the native Parquet export) and the models read it. The names of its
columns and their types come from the native export (`_native.SERIES_COLUMNS`), their
one owner; this module names them for Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lowtail import _native
from lowtail._native import SERIES_COLUMNS
from lowtail.errors import UserError

COLUMNS: tuple[str, ...] = tuple(name for name, _ in SERIES_COLUMNS)
# The packet id (UInt64), when it entered the DuT and when it left (Int64 ns), post − pre.
ID, PRE_TS, POST_TS, LATENCY = COLUMNS

# What stands in for the series where the statistics need no more: its latencies' exact
# distribution and time blocks (`_native.SeriesSummary`). An analysis document carries it
# under this key (never printed; stored as its bytes, in this format).
SUMMARY = "summary"
SUMMARY_FORMAT: int = _native.SUMMARY_FORMAT


def arrow_schema() -> Any:
    """The series' Arrow schema, exactly as the native export writes it."""
    import pyarrow as pa

    return pa.schema([pa.field(name, pa.type_for_alias(kind), nullable=False) for name, kind in SERIES_COLUMNS])


def columns_text() -> str:
    """The columns as help texts and messages name them: "id, pre_ts_ns, post_ts_ns, latency_ns"."""
    return ", ".join(COLUMNS)


# The files an exported series can be: Parquet (written directly) or CSV (converted from it).
EXPORT_FORMATS = (".parquet", ".csv")


def check_export_path(path: Path, option: str = "--export") -> None:
    """A UserError unless `path` names a format a series can be exported to."""
    if path.suffix.lower() not in EXPORT_FORMATS:
        raise UserError(f"{option} {path}: the file name must end in .parquet or .csv")


def parquet_path_for(path: Path) -> Path:
    """Where the Parquet writer writes so that `path` ends up as asked: `path` itself, or
    for CSV a hidden Parquet file beside it that `finish_export` converts."""
    return path if path.suffix.lower() == ".parquet" else path.with_name(f".{path.name}.parquet.partial")


def finish_export(path: Path) -> None:
    """Turn the Parquet file written for a CSV export into the CSV (streamed in row
    groups, written atomically), and remove it."""
    if path.suffix.lower() == ".parquet":
        return
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    source, tmp = parquet_path_for(path), path.with_name(f".{path.name}.partial")
    try:
        parquet = pq.ParquetFile(source)
        with pcsv.CSVWriter(tmp, parquet.schema_arrow) as writer:
            for batch in parquet.iter_batches():
                writer.write_batch(batch)
        tmp.replace(path)
    except OSError as e:
        raise UserError(f"--export {path}: cannot write it ({e.strerror or e})") from e
    finally:
        source.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def write_series(path: Path, ids: Any, pre_ts_ns: Any, post_ts_ns: Any) -> None:
    """Write a series of the same shape (numpy arrays; latency is post − pre), atomically:
    a reader never sees half a file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    pre, post = np.asarray(pre_ts_ns, dtype=np.int64), np.asarray(post_ts_ns, dtype=np.int64)
    table = pa.table([np.asarray(ids).astype(np.uint64), pre, post, post - pre], schema=arrow_schema())
    tmp = path.with_name(f".{path.name}.partial")
    pq.write_table(table, tmp)
    tmp.replace(path)


def pre_time_range(path: str | Path) -> tuple[int, int] | None:
    """The first and last PRE timestamps of a series file, from its Parquet column
    statistics (no data is read); None when the file does not keep them."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    if PRE_TS not in meta.schema.names:
        return None
    col = meta.schema.names.index(PRE_TS)
    stats = [meta.row_group(i).column(col).statistics for i in range(meta.num_row_groups)]
    if not stats or not all(st is not None and st.has_min_max for st in stats):
        return None
    return min(st.min for st in stats), max(st.max for st in stats)


# Rows per batch when a series is streamed: ~8 MB of latencies, whatever the run's length.
_STREAM_ROWS = 1 << 20


def summary_of(path: str | Path) -> Any:
    """The `SeriesSummary` of a series file (streamed in batches; the same summary its
    analysis made, for series stored before analyses kept one). UserError when the file is
    missing or is not a series."""
    from lowtail._native import SeriesSummary

    summary = SeriesSummary()
    for pre_ts, latencies in _iter_columns(path, [PRE_TS, LATENCY]):
        summary.record(pre_ts, latencies)
    return summary


def iter_latencies(path: str | Path) -> Any:
    """The latencies of a series file as int64 NumPy arrays, one batch at a time (memory
    stays at one batch). UserError when the file is missing or is not a series."""
    for (latencies,) in _iter_columns(path, [LATENCY]):
        yield latencies


def _iter_columns(path: str | Path, names: list[str]) -> Any:
    """These columns of a series file as int64 NumPy arrays, one batch at a time."""
    import numpy as np
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: the matched series is gone")
    try:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: not a Parquet file ({str(e).splitlines()[0]})") from None
    for name in names:
        if name not in pf.schema_arrow.names:
            raise UserError(f"{path}: no column {name} (a matched series has {columns_text()})")
    for batch in pf.iter_batches(batch_size=_STREAM_ROWS, columns=names, use_threads=False):
        out = []
        for name, column in zip(names, batch.columns):
            if column.null_count:
                raise UserError(f"{path}: {name} has empty rows")
            out.append(np.ascontiguousarray(column.to_numpy(zero_copy_only=False), dtype=np.int64))
        yield tuple(out)
