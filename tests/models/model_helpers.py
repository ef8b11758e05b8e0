"""Builders for the model tests: a real database with experiments, runs and analyses
as `lowtail run` leaves them (002_runs.sql), Parquet series with known tails, and real
synthetic captures analysed by `lowtail analyze`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lowtail.analyze.pair import analyze_options


def add_experiment(store, name: str = "sweep") -> int:
    (eid,) = store.con.execute(
        "INSERT INTO experiments (name, spec, spec_hash, host, status) VALUES (?, '{}', 'h', '{}', 'finished') "
        "RETURNING experiment_id",
        [name],
    ).fetchone()
    return eid


def add_analysis(
    store,
    *,
    sent: int,
    lost: int,
    p50: int,
    p99: int,
    p99_999: int | None = None,
    max_ns: int | None = None,
    min_ns: int | None = None,
    series_path: str | None = None,
    partial: bool = False,
    start_ts_ns: int = 0,
    duration_ns: int = 10**10,
) -> int:
    """An analyses row with the columns a model reads; the rest filled as an empty analysis."""
    p99_999 = p99_999 if p99_999 is not None else p99
    max_ns = max_ns if max_ns is not None else p99_999
    (aid,) = store.con.execute(
        """INSERT INTO analyses (lowtail_version, pre_path, post_path, options, sent, received, lost, duplicates,
               reordered, foreign_frames, negative, unmatched, trim_ns, start_ts_ns, duration_ns, lat_min_ns,
               lat_mean_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_p99_9_ns, lat_p99_99_ns, lat_p99_999_ns,
               lat_p99_9999_ns, lat_max_ns, partial, warnings, series_path, hgrm, inputs, figures)
           VALUES ('test', 'pre', 'post', ?, ?, ?, ?, 0, 0, 0, 0, 0, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                   '[]', ?, '', ?, '{}') RETURNING analysis_id""",
        [
            json.dumps(analyze_options().to_dict()),
            sent,
            sent - lost,
            lost,
            start_ts_ns,
            duration_ns,
            p50 if min_ns is None else min_ns,
            p50,
            p50,
            p50,
            p99,
            p99,
            p99,
            p99_999,
            max_ns,
            max_ns,
            partial,
            series_path,
            json.dumps({"pre": _side("pre"), "post": _side("post")}),
        ],
    ).fetchone()
    return aid


def _side(path: str) -> dict[str, object]:
    """A capture side as an analysis stores it (`analyses.inputs`), for a row made by hand."""
    counts = dict.fromkeys(("bytes", "frames", "with_id", "not_udp", "too_short", "snapped", "backwards"), 0)
    side = {"path": path, "format": "pcap-ns", "compression": "none", "snaplen": 65535, "first_ts_ns": None}
    return side | counts | {"last_ts_ns": None}


def add_run(
    store,
    experiment_id: int,
    *,
    dut_name: str = "fwd",
    dut_kind: str = "lowtail-fwd",
    dut_config: dict | None = None,
    rate_pps: int = 10_000,
    burst: int = 1,
    analysis_id: int | None = None,
    series_path: str | None = None,
    valid: bool = True,
    repetition: int = 0,
) -> int:
    (rid,) = store.con.execute(
        """INSERT INTO runs (experiment_id, combination_key, dut_name, dut_kind, dut_config, calibration, rate_pps,
               frame_size, burst, repetition, duration_ns, warmup_ns, started_at, analysis_id, series_path, valid,
               invalid_reasons, generator, capture, containment)
           VALUES (?, ?, ?, ?, ?, false, ?, 64, ?, ?, 10000000000, 1000000000, current_timestamp, ?, ?, ?, '[]',
                   '{}', '{}', '{}') RETURNING run_id""",
        [
            experiment_id,
            f"{dut_name}-{rate_pps}-{repetition}",
            dut_name,
            dut_kind,
            json.dumps(dut_config or {}),
            rate_pps,
            burst,
            repetition,
            analysis_id,
            series_path,
            valid,
        ],
    ).fetchone()
    return rid


def write_series(path: Path, latency: np.ndarray, times: np.ndarray | None = None) -> Path:
    """A matched series as `lowtail analyze --export` writes it."""
    n = len(latency)
    times = times if times is not None else np.arange(n, dtype=np.int64) * 1_000 + 10**15
    latency = np.asarray(latency)
    post = times + latency.astype(np.int64) if latency.dtype.kind in "iu" else times
    pq.write_table(
        pa.table({"id": np.arange(n, dtype=np.uint64), "pre_ts_ns": times, "post_ts_ns": post, "latency_ns": latency}),
        path,
    )
    return path


def synth_and_analyze(tmp_path: Path, db: Path, cli, name: str, *sets: str, packets: int, rate: float) -> dict:
    """Real captures from `lowtail synth`, analysed and exported by `lowtail analyze`."""
    pre, post, series = tmp_path / f"{name}-pre.pcap", tmp_path / f"{name}-post.pcap", tmp_path / f"{name}.parquet"
    args = ["synth", pre, post, "--packets", packets, "--rate", f"{rate}pps"]
    for s in sets:
        args += ["--set", s]
    r = cli(*args)
    assert r.code == 0, r.err
    r = cli("analyze", pre, post, "--db", db, "--export", series, "--json", "--trim", 0)
    assert r.code == 0, r.err
    doc = r.json()
    pre.unlink()
    post.unlink()
    return doc
