"""The matched series: one row per matched packet, in PRE order, as `lowtail analyze
--export` writes it (the native Parquet export) and the models read it. The names of its
columns and their types come from the native export (`_native.SERIES_COLUMNS`), their
one owner; this module names them for Python."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowtail import _native
from lowtail._native import SERIES_COLUMNS
from lowtail.core import files
from lowtail.core.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow.parquet as pq

    from lowtail._native import SeriesSummary

COLUMNS: tuple[str, ...] = tuple(name for name, _ in SERIES_COLUMNS)
# The packet id (UInt64), when it entered the DuT and when it left (Int64 ns), post − pre,
# and its flow (UInt32: the index of its flow among the analysis's flows, from PRE's headers;
# series written before flows were told apart lack the column).
ID, PRE_TS, POST_TS, LATENCY, FLOW = COLUMNS

# What stands in for the series where the statistics need no more: its latencies' exact
# distribution and time blocks (`_native.SeriesSummary`). An analysis document carries it
# under "summary" (never printed; stored as its bytes, in this format).
SUMMARY_FORMAT: int = _native.SUMMARY_FORMAT


def arrow_schema() -> Any:
    """The series' Arrow schema, exactly as the native export writes it."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(name, pa.type_for_alias(kind), nullable=False) for name, kind in SERIES_COLUMNS]  # type: ignore[call-overload]
    )


def columns_text() -> str:
    """The columns as help texts and messages name them: "id, pre_ts_ns, post_ts_ns, latency_ns, flow"."""
    return ", ".join(COLUMNS)


# The files an exported series can be: Parquet (written directly) or CSV (converted from it).
EXPORT_FORMATS = (".parquet", ".csv")


def check_export_path(path: Path, option: str = "--export") -> None:
    """A UserError unless `path` names a format a series can be exported to."""
    if path.suffix.lower() not in EXPORT_FORMATS:
        raise UserError(f"{option} {path}: the file name must end in .parquet or .csv")
    files.check_output(path, option)


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


def write_series(path: Path, ids: Any, pre_ts_ns: Any, post_ts_ns: Any, flows: Any = None) -> None:
    """Write a series of the same shape (numpy arrays; latency is post − pre; every packet
    in flow 0 unless `flows` says), atomically: a reader never sees half a file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    pre, post = np.asarray(pre_ts_ns, dtype=np.int64), np.asarray(post_ts_ns, dtype=np.int64)
    flow = np.zeros(len(pre), dtype=np.uint32) if flows is None else np.asarray(flows).astype(np.uint32)
    columns = [np.asarray(ids).astype(np.uint64), pre, post, post - pre, flow]
    table = pa.table([pa.array(c) for c in columns], schema=arrow_schema())
    tmp = path.with_name(f".{path.name}.partial")
    pq.write_table(table, tmp)
    tmp.replace(path)


def column_range(path: str | Path, column: str) -> tuple[int, int | None, int | None]:
    """The rows of a series file and the least and greatest value of one of its columns, from
    its Parquet footer (no data is read); (rows, None, None) when the file lacks the column or
    keeps no statistics for it."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    if column not in meta.schema.names:
        return meta.num_rows, None, None
    col = meta.schema.names.index(column)
    stats = [meta.row_group(i).column(col).statistics for i in range(meta.num_row_groups)]
    bounds: list[tuple[Any, Any]] = [(st.min, st.max) for st in stats if st is not None and st.has_min_max]
    if not bounds or len(bounds) != len(stats):
        return meta.num_rows, None, None
    return meta.num_rows, min(int(lo) for lo, _ in bounds), max(int(hi) for _, hi in bounds)


def pre_time_range(path: str | Path) -> tuple[int, int] | None:
    """The first and last PRE timestamps of a series file, from its Parquet column
    statistics (no data is read); None when the file does not keep them."""
    _, first, last = column_range(path, PRE_TS)
    return None if first is None or last is None else (first, last)


def open_series(path: str | Path, columns: tuple[str, ...], gone: str = "no such file") -> pq.ParquetFile:
    """A series file opened for streaming, checked: it exists (else UserError "PATH: `gone`"),
    is Parquet and has these columns. No pre-buffering (it holds hundreds of MB of column
    chunks ahead of the reader) and buffered reads within a column chunk: memory stays at a
    few batches."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: {gone}")
    try:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: not a Parquet file ({str(e).splitlines()[0]})") from None
    missing = [c for c in columns if c not in pf.schema_arrow.names]
    if missing:
        raise UserError(
            f"{path}: no column {', '.join(missing)} (expected the matched series that "
            f"`lowtail analyze --export` writes: {columns_text()})"
        )
    return pf


# Rows per batch when a series is streamed: ~8 MB of latencies, whatever the run's length.
_STREAM_ROWS = 1 << 20


def summary_of(path: str | Path) -> SeriesSummary:
    """The `SeriesSummary` of a series file (streamed in batches; the same summary its
    analysis made, for series stored before analyses kept one). UserError when the file is
    missing or is not a series."""
    from lowtail._native import SeriesSummary

    summary = SeriesSummary()
    for pre_ts, latencies in _iter_columns(path, (PRE_TS, LATENCY), "the matched series is gone"):
        summary.record(pre_ts, latencies)
    return summary


def flow_summaries(path: str | Path) -> dict[int, SeriesSummary]:
    """The `SeriesSummary` of each flow of a series file (its `flow` column), in one streamed
    pass. UserError when the file is missing, is not a series or has no flow column."""
    import numpy as np

    from lowtail._native import SeriesSummary

    out: dict[int, SeriesSummary] = {}
    for pre_ts, latencies, flows in _iter_columns(path, (PRE_TS, LATENCY, FLOW), "the matched series is gone"):
        for flow in np.unique(flows):
            mine = flows == flow
            summary = out.setdefault(int(flow), SeriesSummary())
            summary.record(np.ascontiguousarray(pre_ts[mine]), np.ascontiguousarray(latencies[mine]))
    return out


def iter_latencies(path: str | Path) -> Iterator[np.ndarray]:
    """The latencies of a series file as int64 NumPy arrays, one batch at a time (memory
    stays at one batch). UserError when the file is missing or is not a series."""
    for (latencies,) in _iter_columns(path, (LATENCY,), "the matched series is gone"):
        yield latencies


def read_columns(path: str | Path, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """These columns of a series file, whole, as int64 NumPy arrays (a chain's hops are
    joined by id: every row is needed at once). UserError as `iter_latencies`."""
    import numpy as np

    batches = list(_iter_columns(path, names, "the matched series is gone"))
    if not batches:
        return tuple(np.empty(0, dtype=np.int64) for _ in names)
    return tuple(np.concatenate([b[i] for b in batches]) for i in range(len(names)))


def _iter_columns(path: str | Path, names: tuple[str, ...], gone: str) -> Iterator[tuple[np.ndarray, ...]]:
    """These columns of a series file as int64 NumPy arrays, one batch at a time."""
    import numpy as np

    pf = open_series(path, names, gone=gone)
    for batch in pf.iter_batches(batch_size=_STREAM_ROWS, columns=list(names), use_threads=False):
        out = []
        for name, column in zip(names, batch.columns):
            if column.null_count:
                raise UserError(f"{path}: {name} has empty rows")
            out.append(np.ascontiguousarray(column.to_numpy(zero_copy_only=False), dtype=np.int64))
        yield tuple(out)
