"""Experiments and their runs in the results database (tables of schema/002_runs.sql)."""

from __future__ import annotations

import json
from typing import Any

from lowtail.errors import UserError
from lowtail.store.db import Store

_JSON_RUN_COLUMNS = (
    "dut_config",
    "invalid_reasons",
    "generator",
    "capture",
    "containment",
    "energy",
    "traffic",
    "dut_stats",
    "capture_paths",
)


def create_experiment(
    store: Store, name: str, spec: dict[str, Any], spec_hash: str, host: dict[str, Any], data_dir: str
) -> int:
    with store.transaction():
        (eid,) = store.con.execute(
            "INSERT INTO experiments (name, spec, spec_hash, host, status, data_dir) VALUES (?, ?, ?, ?, 'running', ?) "
            "RETURNING experiment_id",
            [name, json.dumps(spec, default=str), spec_hash, json.dumps(host), data_dir],
        ).fetchone()
    return eid


def resumable_experiment(store: Store, spec_hash: str) -> dict[str, Any] | None:
    """The latest unfinished experiment of the same file, if any: resuming continues it."""
    cur = store.con.execute(
        "SELECT experiment_id, name, status, data_dir FROM experiments WHERE spec_hash = ? "
        "ORDER BY experiment_id DESC LIMIT 1",
        [spec_hash],
    )
    row = cur.fetchone()
    if row is None or row[2] == "finished":
        return None
    return dict(zip([d[0] for d in cur.description], row))


def set_status(store: Store, experiment_id: int, status: str) -> None:
    with store.transaction():
        store.con.execute(
            "UPDATE experiments SET status = ?, finished_at = CASE WHEN ? IN ('finished') "
            "THEN current_timestamp ELSE finished_at END WHERE experiment_id = ?",
            [status, status, experiment_id],
        )


def done_keys(store: Store, experiment_id: int) -> set[str]:
    return {
        k
        for (k,) in store.con.execute(
            "SELECT combination_key FROM runs WHERE experiment_id = ?", [experiment_id]
        ).fetchall()
    }


def save_run(
    store: Store, run: dict[str, Any], analysis: dict[str, Any] | None, analysis_options: dict[str, Any]
) -> int:
    """Store a run and its analysis together (one transaction: both or neither)."""
    with store.transaction():
        analysis_id = store.save_analysis(analysis, options=analysis_options, label=run["label"]) if analysis else None
        row = {k: v for k, v in run.items() if k != "label"} | {"analysis_id": analysis_id}
        for k in _JSON_RUN_COLUMNS:
            if k in row:
                row[k] = json.dumps(row[k], default=str)
        cols = list(row)
        (run_id,) = store.con.execute(
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) RETURNING run_id",
            [row[c] for c in cols],
        ).fetchone()
    return run_id


def _rows(cur) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _decode(run: dict[str, Any]) -> dict[str, Any]:
    for k in _JSON_RUN_COLUMNS + ("spec", "host", "figures", "warnings"):
        if isinstance(run.get(k), str):
            run[k] = json.loads(run[k])
    return run


def experiment(store: Store, experiment_id: int | str) -> dict[str, Any]:
    if experiment_id == "latest":
        row = store.con.execute("SELECT max(experiment_id) FROM experiments").fetchone()
        if row is None or row[0] is None:
            raise UserError(f"{store.path}: holds no experiments yet (run `lowtail run`)")
        experiment_id = row[0]
    try:
        eid = int(experiment_id)
    except ValueError:
        raise UserError(f"{experiment_id!r} is not an experiment id (a number, or 'latest')") from None
    found = _rows(store.con.execute("SELECT * FROM experiments WHERE experiment_id = ?", [eid]))
    if not found:
        raise UserError(f"{store.path}: no experiment with id {eid} (see `lowtail experiment list`)")
    return _decode(found[0])


def runs(store: Store, experiment_id: int) -> list[dict[str, Any]]:
    """The experiment's runs with their headline figures, in the order they ran."""
    return [
        _decode(r)
        for r in _rows(
            store.con.execute(
                """SELECT r.*, a.sent, a.received, a.lost, a.duplicates, a.reordered, a.lat_min_ns, a.lat_mean_ns,
                  a.lat_p50_ns, a.lat_p90_ns, a.lat_p99_ns, a.lat_p99_9_ns, a.lat_p99_99_ns, a.lat_p99_999_ns,
                  a.lat_p99_9999_ns, a.lat_max_ns, a.partial, a.warnings, a.figures
           FROM runs r LEFT JOIN analyses a USING (analysis_id)
           WHERE r.experiment_id = ? ORDER BY r.run_id""",
                [experiment_id],
            )
        )
    ]


def calibration_floor(store: Store, experiment_id: int) -> dict[tuple[int, int, int], dict[str, Any]]:
    """Per (rate, frame size, burst): the calibration run to read results against — this
    experiment's own, else the latest valid one stored for the same traffic."""
    cur = store.con.execute(
        """SELECT DISTINCT ON (r.rate_pps, r.frame_size, r.burst) r.rate_pps, r.frame_size, r.burst, r.run_id,
                  r.experiment_id, r.analysis_id, a.lat_p50_ns, a.lat_p99_ns, a.lat_p99_999_ns, a.lat_max_ns
           FROM runs r JOIN analyses a USING (analysis_id)
           WHERE r.calibration AND r.valid
           ORDER BY r.rate_pps, r.frame_size, r.burst, (r.experiment_id = ?) DESC, r.run_id DESC""",
        [experiment_id],
    )
    return {(r["rate_pps"], r["frame_size"], r["burst"]): r for r in _rows(cur)}


def list_experiments(store: Store, limit: int = 50) -> list[dict[str, Any]]:
    return _rows(
        store.con.execute(
            """SELECT e.experiment_id, e.name, e.created_at, e.status, count(r.run_id) AS runs,
                  count(r.run_id) FILTER (WHERE r.valid) AS valid_runs
           FROM experiments e LEFT JOIN runs r USING (experiment_id)
           GROUP BY ALL ORDER BY e.experiment_id DESC LIMIT ?""",
            [limit],
        )
    )
