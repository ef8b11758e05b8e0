"""The matched series: one row per matched packet, in PRE order, as `lowtail analyze
--export` writes it (the native Parquet export) and the models read it. The names of its
columns on the Python side are written only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ID = "id"  # the packet id (UInt64)
PRE_TS = "pre_ts_ns"  # when it entered the DuT (Int64, ns)
POST_TS = "post_ts_ns"  # when it left (Int64, ns)
LATENCY = "latency_ns"  # post − pre (Int64, ns)
COLUMNS = (ID, PRE_TS, POST_TS, LATENCY)


def columns_text() -> str:
    """The columns as help texts and messages name them: "id, pre_ts_ns, post_ts_ns, latency_ns"."""
    return ", ".join(COLUMNS)


def write_series(path: Path, ids: Any, pre_ts_ns: Any, post_ts_ns: Any) -> None:
    """Write a series of the same shape (numpy arrays; latency is post − pre), atomically:
    a reader never sees half a file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            ID: np.asarray(ids).astype(np.uint64),
            PRE_TS: pre_ts_ns,
            POST_TS: post_ts_ns,
            LATENCY: post_ts_ns - pre_ts_ns,
        }
    )
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
