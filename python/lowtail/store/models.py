"""Model results in the database, and the stored runs models read from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowtail import __version__
from lowtail.errors import UserError
from lowtail.store.analyses import analysis, latency_summary
from lowtail.store.datadir import series_problem
from lowtail.store.db import Store, as_id, rows_as_dicts, stored_id
from lowtail.store.runs import run_figures


def save_model(
    store: Store,
    kind: str,
    inputs: dict[str, Any],
    result: Mapping[str, Any],
    *,
    label: str | None = None,
    experiment_id: int | None = None,
    dut_name: str | None = None,
    run_id: int | None = None,
    analysis_id: int | None = None,
    source: str | None = None,
) -> int:
    """Store one model result with its inputs and what it was computed from; returns its id."""
    with store.transaction():
        (model_id,) = store.con.execute(
            """INSERT INTO model_results (lowtail_version, kind, label, experiment_id, dut_name, run_id, analysis_id,
                   source, inputs, result, partial)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING model_id""",
            [
                __version__,
                kind,
                label,
                experiment_id,
                dut_name,
                run_id,
                analysis_id,
                source,
                json.dumps(inputs, default=_plain),
                json.dumps(result, default=_plain),
                bool(result.get("partial")),
            ],
        ).fetchone()
    return int(model_id)


def _plain(value: Any) -> Any:
    """numpy scalars and paths as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


_COLUMNS = (
    "model_id",
    "created_at",
    "kind",
    "label",
    "experiment_id",
    "dut_name",
    "run_id",
    "analysis_id",
    "source",
    "inputs",
    "result",
    "partial",
)


def _rows(store: Store, where: str, params: list[Any], limit: int | None = None) -> list[dict[str, Any]]:
    sql = f"SELECT {', '.join(_COLUMNS)} FROM model_results WHERE {where} ORDER BY model_id DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    out = []
    for row in store.con.execute(sql, params).fetchall():
        doc = dict(zip(_COLUMNS, row))
        doc["inputs"], doc["result"] = json.loads(doc["inputs"]), json.loads(doc["result"])
        out.append(doc)
    return out


def _has_models(store: Store) -> bool:
    return bool(
        store.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'model_results'"
        ).fetchone()[0]
    )


def model_result(store: Store, model_id: int | str) -> dict[str, Any]:
    """One stored model result (an id, or 'latest')."""
    if not _has_models(store):
        raise UserError(f"{store.path}: holds no model results yet (run `lowtail model ...`)")
    mid = stored_id(store, model_id, "model_results", "model_id", "model results", "`lowtail model list` lists them")
    return _rows(store, "model_id = ?", [mid])[0]


def latest_model(store: Store, kind: str, **keys: Any) -> dict[str, Any] | None:
    """The newest result of `kind` matching the given columns (experiment_id, dut_name, run_id ...)."""
    if not _has_models(store):
        return None
    where, params = ["kind = ?"], [kind]
    for column, value in keys.items():
        if column not in _COLUMNS:
            raise ValueError(column)
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = _rows(store, " AND ".join(where), params, 1)
    return rows[0] if rows else None


def list_models(store: Store, kind: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest model results, of one kind or all."""
    if not _has_models(store):
        return []
    return _rows(store, "kind = ?", [kind], limit) if kind else _rows(store, "true", [], limit)


# -- what models read ------------------------------------------------------------------


@dataclass
class SeriesSource:
    """A matched series and where it came from."""

    path: str
    run_id: int | None = None
    analysis_id: int | None = None
    partial: bool = False
    label: str = ""


def series_source(store: Store | None, text: str) -> SeriesSource:
    """INPUT as the model commands take it: a Parquet file, `run:ID` (or a bare run id),
    or `analysis:ID`."""
    kind, _, ident = text.partition(":")
    if not ident and Path(text).exists():
        return SeriesSource(path=text, label=text)
    if not ident and as_id(text) is not None:
        kind, ident = "run", text
    if kind not in ("run", "analysis") or as_id(ident) is None:
        if text.endswith(".parquet"):
            raise UserError(f"{text}: no such file")
        raise UserError(f"{text!r}: give a Parquet series file, a run id (run:12 or 12) or an analysis id (analysis:7)")
    if store is None:
        raise UserError(f"{text}: a stored {kind} needs the database (--db)")
    if kind == "run":
        run = run_figures(store, int(ident))
        if run["analysis_id"] is None:
            raise UserError(f"run {ident} has no analysis (it failed or is still running): nothing to model")
        src = SeriesSource(
            path=run["series_path"],
            run_id=run["run_id"],
            analysis_id=run["analysis_id"],
            partial=bool(run["partial"]),
            label=f"run {ident} ({run['dut_name']}, {run['rate_pps']:,} pps)",
        )
    else:
        a = analysis(store, int(ident))
        src = SeriesSource(
            path=a["series_path"], analysis_id=a["analysis_id"], partial=bool(a["partial"]), label=f"analysis {ident}"
        )
    if not src.path:
        raise UserError(
            f"{text}: its matched series was not exported (analyse with --export, or run with the series kept)"
        )
    if not Path(src.path).exists():
        raise UserError(f"{text}: its series {src.path} is gone")
    assert src.analysis_id is not None  # both kinds above have one
    problem = series_problem(store, src.path, *latency_summary(store, src.analysis_id))
    if problem:
        raise UserError(f"{text}: {problem}")
    return src


def sweep_points(store: Store, experiment_id: int, dut_name: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The valid, non-calibration runs of an experiment, per DuT, in rate order: the fields
    of the knee model's `SweepPoint` (run_id, rate_pps, sent, lost, p50_ns, p99_ns,
    p99_999_ns, max_ns)."""
    experiment_id = stored_id(
        store, experiment_id, "experiments", "experiment_id", "experiments", "`lowtail experiment list` lists them"
    )
    sql = """SELECT r.dut_name, r.run_id, r.rate_pps, a.sent, a.lost, a.lat_p50_ns AS p50_ns, a.lat_p99_ns AS p99_ns,
                    a.lat_p99_999_ns AS p99_999_ns, a.lat_max_ns AS max_ns
             FROM runs r JOIN analyses a ON a.analysis_id = r.analysis_id
             WHERE r.experiment_id = ? AND r.valid AND NOT r.calibration"""
    params: list[Any] = [experiment_id]
    if dut_name:
        sql += " AND r.dut_name = ?"
        params.append(dut_name)
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows_as_dicts(store.con.execute(sql + " ORDER BY r.rate_pps, r.run_id", params)):
        out.setdefault(row.pop("dut_name"), []).append(row)
    if not out:
        which = f" for DuT {dut_name!r}" if dut_name else ""
        raise UserError(f"experiment {experiment_id} has no valid analysed runs{which}")
    return out
