"""Model results in the database, and the stored runs models read from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar

from lowtail.core.errors import UserError
from lowtail.core.terminal import shown
from lowtail.core.units import format_rate
from lowtail.core.version import __version__
from lowtail.models.document import (
    AliasingDocument,
    EvtDocument,
    FlowTailsDocument,
    KneeDocument,
    OverloadDocument,
    SimulateDocument,
)
from lowtail.store import records
from lowtail.store.analyses import analysis, latency_summary
from lowtail.store.codec import MODEL_INPUTS, MODEL_RESULTS, RUN_COLUMNS, Column
from lowtail.store.datadir import series_problem
from lowtail.store.db import Store, as_id, rows_as_dicts, stored_id
from lowtail.store.errors import DamagedDatabase
from lowtail.store.runs import run_figures

D = TypeVar("D")


@dataclass(frozen=True)
class ModelKind(Generic[D]):
    """A kind of model result: its name in model_results.kind and the column its document
    is written from and read back into (store/codec.py)."""

    name: str

    @property
    def column(self) -> Column[D]:
        found: Column[D] = MODEL_RESULTS[self.name]
        return found


# Any kind's document (a list of model results of every kind).
ModelDocument = OverloadDocument | KneeDocument | EvtDocument | FlowTailsDocument | AliasingDocument | SimulateDocument

OVERLOAD = ModelKind[OverloadDocument]("overload")
KNEE = ModelKind[KneeDocument]("knee")
EVT = ModelKind[EvtDocument]("evt")
FLOWS = ModelKind[FlowTailsDocument]("flows")
ALIASING = ModelKind[AliasingDocument]("aliasing")
SIMULATE = ModelKind[SimulateDocument]("simulate")


class ModelRow(TypedDict):
    """A stored model result's row but its document: what it is and was computed from,
    and its inputs (the kind's options, its own keys)."""

    model_id: int
    created_at: datetime
    kind: str
    label: str | None
    experiment_id: int | None
    dut_name: str | None
    run_id: int | None
    analysis_id: int | None
    source: str | None
    inputs: dict[str, object]
    partial: bool


class StoredModel(ModelRow, Generic[D]):
    """A stored model result with its document read back into its kind's type."""

    result: D


class ModelLinks(TypedDict, total=False):
    """What a model result was computed from, as `save_model` links it (each a column of
    model_results): a model gathers them while it reads its input and passes them on."""

    experiment_id: int | None
    dut_name: str | None
    run_id: int | None
    analysis_id: int | None
    source: str | None


def save_model(
    store: Store,
    kind: ModelKind[D],
    inputs: Mapping[str, object],
    result: D,
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
                kind.name,
                label,
                experiment_id,
                dut_name,
                run_id,
                analysis_id,
                source,
                MODEL_INPUTS.encode(dict(inputs)),
                kind.column.encode(result),
                bool(isinstance(result, Mapping) and result.get("partial")),
            ],
        ).fetchone()
    return int(model_id)


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
    "partial",
)


def _rows(store: Store, where: str, params: list[Any], limit: int | None = None) -> list[tuple[ModelRow, str | None]]:
    """The rows matching `where`, newest first, each with its document's stored text."""
    sql = f"SELECT {', '.join(_COLUMNS)}, result FROM model_results WHERE {where} ORDER BY model_id DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    out = []
    for (
        model_id,
        created,
        kind,
        label,
        experiment_id,
        dut_name,
        run_id,
        analysis_id,
        source,
        inputs,
        partial,
        result,
    ) in store.con.execute(sql, params).fetchall():
        row = ModelRow(
            model_id=model_id,
            created_at=created,
            kind=kind,
            label=label,
            experiment_id=experiment_id,
            dut_name=dut_name,
            run_id=run_id,
            analysis_id=analysis_id,
            source=source,
            inputs=MODEL_INPUTS.decode(store, inputs, f"model result {model_id}"),
            partial=partial,
        )
        out.append((row, result))
    return out


def _stored(store: Store, kind: ModelKind[D], row: ModelRow, text: str | None) -> StoredModel[D]:
    """The row with its document read back, in the columns' order (the document before `partial`)."""
    return {
        "model_id": row["model_id"],
        "created_at": row["created_at"],
        "kind": row["kind"],
        "label": row["label"],
        "experiment_id": row["experiment_id"],
        "dut_name": row["dut_name"],
        "run_id": row["run_id"],
        "analysis_id": row["analysis_id"],
        "source": row["source"],
        "inputs": row["inputs"],
        "result": kind.column.decode(store, text, f"model result {row['model_id']}"),
        "partial": row["partial"],
    }


def _has_models(store: Store) -> bool:
    return bool(
        store.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'model_results'"
        ).fetchone()[0]
    )


def model_row(store: Store, model_id: int | str) -> ModelRow:
    """One stored model result's row, its document left unread (an id, or 'latest')."""
    if not _has_models(store):
        raise UserError(f"{store.path}: holds no model results yet (run `lowtail model ...`)")
    mid = stored_id(store, model_id, "model_results", "model_id", "model results", "`lowtail model list` lists them")
    return _rows(store, "model_id = ?", [mid])[0][0]


def model_result(store: Store, model_id: int | str, kind: ModelKind[D]) -> StoredModel[D]:
    """One stored model result of `kind` (an id, or 'latest'), its document read back."""
    if not _has_models(store):
        raise UserError(f"{store.path}: holds no model results yet (run `lowtail model ...`)")
    mid = stored_id(store, model_id, "model_results", "model_id", "model results", "`lowtail model list` lists them")
    row, text = _rows(store, "model_id = ?", [mid])[0]
    if row["kind"] != kind.name:
        raise UserError(f"model result {mid} is a {row['kind']} model, not {kind.name}")
    return _stored(store, kind, row, text)


def latest_model(store: Store, kind: ModelKind[D], **keys: Any) -> StoredModel[D] | None:
    """The newest result of `kind` matching the given columns (experiment_id, dut_name, run_id ...)."""
    if not _has_models(store):
        return None
    where, params = ["kind = ?"], [kind.name]
    for column, value in keys.items():
        if column not in _COLUMNS:
            raise ValueError(column)
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = _rows(store, " AND ".join(where), params, 1)
    return _stored(store, kind, *rows[0]) if rows else None


def list_models(store: Store, kind: str | None = None, limit: int = 50) -> list[StoredModel[ModelDocument]]:
    """The newest model results, of one kind or all, each document read back into its kind's."""
    if not _has_models(store):
        return []
    rows = _rows(store, "kind = ?", [kind], limit) if kind else _rows(store, "true", [], limit)
    return [_stored(store, _kind_of(store, row), row, text) for row, text in rows]


def _kind_of(store: Store, row: ModelRow) -> ModelKind[ModelDocument]:
    if row["kind"] not in MODEL_RESULTS:
        raise DamagedDatabase(
            f"{store.path}: model result {row['model_id']} is of kind {shown(row['kind'])!r}, which this lowtail "
            "does not know; lowtail leaves it as it is"
        )
    return ModelKind[ModelDocument](row["kind"])


# -- what models read ------------------------------------------------------------------


@dataclass
class SeriesSource:
    """A matched series and where it came from."""

    path: str
    run_id: int | None = None
    analysis_id: int | None = None
    partial: bool = False
    label: str = ""


def stored_input(text: str) -> tuple[str, str] | None:
    """INPUT as the model commands take it, read before any database is opened: None for a
    Parquet file, ("run" | "analysis", id) for `run:ID` (or a bare run id) or `analysis:ID`;
    UserError for anything else (so a mistyped file makes no database)."""
    kind, _, ident = text.partition(":")
    if not ident and Path(text).exists():
        return None
    if not ident and as_id(text) is not None:
        kind, ident = "run", text
    if kind not in ("run", "analysis") or as_id(ident) is None:
        if text.endswith(".parquet"):
            raise UserError(f"{text}: no such file")
        raise UserError(f"{text!r}: give a Parquet series file, a run id (run:12 or 12) or an analysis id (analysis:7)")
    return kind, ident


def series_source(store: Store | None, text: str) -> SeriesSource:
    """INPUT as the model commands take it: a Parquet file, `run:ID` (or a bare run id),
    or `analysis:ID`."""
    stored = stored_input(text)
    if stored is None:
        return SeriesSource(path=text, label=text)
    kind, ident = stored
    if store is None:
        raise UserError(f"{text}: a stored {kind} needs the database (--db)")
    if kind == "run":
        run = run_figures(store, int(ident), also=("analysis",))
        if run["analysis_id"] is None:
            raise UserError(f"run {ident} has no analysis (it failed or is still running): nothing to model")
        src = SeriesSource(
            path=run["series_path"] or "",  # none exported: said below
            run_id=run["run_id"],
            analysis_id=run["analysis_id"],
            partial=bool(run["partial"]),
            label=f"run {ident} ({run['dut_name']}, {format_rate(run['rate_pps'])})",
        )
    else:
        a = analysis(store, int(ident))
        src = SeriesSource(
            path=a["series_path"] or "",
            analysis_id=a["analysis_id"],
            partial=bool(a["partial"]),
            label=f"analysis {ident}",
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


class SweepRow(TypedDict):
    """A valid run of a sweep with the figures the knee model reads (`models.knee.SweepPoint`)."""

    run_id: int
    rate_pps: int
    sent: int
    lost: int
    p50_ns: int | None
    p99_ns: int | None
    p99_999_ns: int | None
    max_ns: int | None
    degraded: bool  # the run is marked degraded (the host could not measure it as asked)


# The run columns that make a sweep's configuration besides its rate (a sweep is one
# configuration at several rates): the declared axes a runs row holds, and the DuT's options.
_SWEEP_AXES = tuple(a for a in records.RUN_AXES if a.sql is None and a.name != "rate")


def sweep_points(store: Store, experiment_id: int, dut_name: str | None = None) -> dict[str, list[SweepRow]]:
    """The valid, non-calibration runs of an experiment, per configuration but the rate, in
    rate order: the fields of the knee model's `SweepPoint` (run_id, rate_pps, sent, lost,
    p50_ns, p99_ns, p99_999_ns, max_ns). A configuration is keyed by its DuT's name, followed,
    where one DuT ran in several configurations (a vanilla and an rt guest), by what tells
    them apart ("vm · guest_kernel rt"): their points are never mixed into one sweep."""
    experiment_id = stored_id(
        store, experiment_id, "experiments", "experiment_id", "experiments", "`lowtail experiment list` lists them"
    )
    columns = ", ".join(sorted({f"r.{a.column}" for a in _SWEEP_AXES} | {"r.dut_config"}))
    sql = f"""SELECT {columns}, r.run_id, r.rate_pps, a.sent, a.lost, a.lat_p50_ns AS p50_ns, a.lat_p99_ns AS p99_ns,
                    a.lat_p99_999_ns AS p99_999_ns, a.lat_max_ns AS max_ns,
                    coalesce(json_array_length(r.degraded_reasons), 0) > 0 AS degraded
             FROM runs r JOIN analyses a ON a.analysis_id = r.analysis_id
             WHERE r.experiment_id = ? AND r.valid AND NOT r.calibration"""
    params: list[Any] = [experiment_id]
    if dut_name:
        sql += " AND r.dut_name = ?"
        params.append(dut_name)
    configured: dict[tuple[str, str], list[SweepRow]] = {}
    parts: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows_as_dicts(store.con.execute(sql + " ORDER BY r.rate_pps, r.run_id", params)):
        for name in records.JSON_COLUMNS:
            if name in row:
                row[name] = RUN_COLUMNS[name].decode(store, row[name], f"run {row['run_id']}")
        shown = {a.name: a.show(a.value(row)) for a in _SWEEP_AXES if a.name != "dut"}
        shown |= {k: records.show_value(v) for k, v in sorted((row.get("dut_config") or {}).items())}
        key = (row["dut_name"], json.dumps(shown, sort_keys=True))
        parts[key] = shown
        point = SweepRow(
            run_id=row["run_id"],
            rate_pps=row["rate_pps"],
            sent=row["sent"],
            lost=row["lost"],
            p50_ns=row["p50_ns"],
            p99_ns=row["p99_ns"],
            p99_999_ns=row["p99_999_ns"],
            max_ns=row["max_ns"],
            degraded=bool(row["degraded"]),
        )
        configured.setdefault(key, []).append(point)
    if not configured:
        which = f" for DuT {dut_name!r}" if dut_name else ""
        raise UserError(f"experiment {experiment_id} has no valid analysed runs{which}")
    out: dict[str, list[SweepRow]] = {}
    for (name, _), points in configured.items():
        siblings = [parts[k] for k in configured if k[0] == name]
        differing = [axis for axis in parts[(name, _)] if len({s.get(axis) for s in siblings}) > 1]
        label = " · ".join([name, *(f"{axis} {parts[(name, _)][axis]}" for axis in differing)])
        out[label] = points
    return out
