"""The rows a bundle carries (`lowtail export` / `lowtail import`, tables of
schema/012_bundles.sql): reading the stored rows of some runs out as Arrow tables, and
adding a bundle's rows to this database under new ids, with their origin recorded.

Which rows travel: the runs named and the calibration runs their floors come from, their
experiments (file, host), their analyses with every bulky table, their interrupt samples,
and the model results computed from them. The files themselves (Parquet, the manifest)
are `lowtail.bundle`'s business."""

from __future__ import annotations

import json
from typing import Any

from lowtail.store.db import Store, rows_as_dicts

# Every table a bundle carries, in the order rows are added (ids before their users), with
# the id column it is keyed by.
TABLES: tuple[tuple[str, str], ...] = (
    ("experiments", "experiment_id"),
    ("analyses", "analysis_id"),
    ("analysis_percentiles", "analysis_id"),
    ("analysis_histograms", "analysis_id"),
    ("analysis_worst", "analysis_id"),
    ("analysis_rates", "analysis_id"),
    ("runs", "run_id"),
    ("run_interrupts", "run_id"),
    ("model_results", "model_id"),
)
# The id sequences of the tables whose rows get new ids, and the kind `import_ids` names.
_NEW_IDS = {
    "experiments": ("experiment_id", "experiment_id_seq", "experiment"),
    "analyses": ("analysis_id", "analysis_id_seq", "analysis"),
    "runs": ("run_id", "run_id_seq", "run"),
    "model_results": ("model_id", "model_id_seq", "model"),
}


def rows_to_export(store: Store, run_ids: list[int], analysis_ids: list[int]) -> dict[str, Any]:
    """The rows of these runs (with the calibration runs of their floors) and of these plain
    analyses, per table as an Arrow table, in id order."""
    runs = set(run_ids)
    for row in rows_as_dicts(
        store.con.execute(
            """SELECT DISTINCT c.run_id FROM runs r
               JOIN experiments e ON e.experiment_id = r.experiment_id
               JOIN runs c ON c.experiment_id = coalesce(e.calibration_experiment_id, r.experiment_id)
                          AND c.calibration AND c.rate_pps = r.rate_pps AND c.frame_size = r.frame_size
                          AND c.burst = r.burst
               WHERE list_contains(?::BIGINT[], r.run_id)""",
            [sorted(runs)],
        )
    ):
        runs.add(row["run_id"])
    ids = sorted(runs)
    con = store.con
    # fetchall, not fetchone: DuckDB's con.sql below refuses to run while a result is unfinished.
    ((experiments,),) = con.execute(
        "SELECT list(DISTINCT experiment_id) FROM runs WHERE list_contains(?::BIGINT[], run_id)", [ids]
    ).fetchall()
    ((analyses,),) = con.execute(
        "SELECT list(DISTINCT analysis_id) FROM runs WHERE list_contains(?::BIGINT[], run_id) AND analysis_id IS NOT NULL",
        [ids],
    ).fetchall()
    experiments, analyses = sorted(experiments or []), sorted({*(analyses or []), *analysis_ids})
    where = {
        "experiments": ("list_contains(?::BIGINT[], experiment_id)", [experiments]),
        "runs": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "run_interrupts": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "model_results": (
            "list_contains(?::BIGINT[], run_id) OR list_contains(?::BIGINT[], analysis_id) "
            "OR (run_id IS NULL AND analysis_id IS NULL AND list_contains(?::BIGINT[], experiment_id))",
            [ids, analyses, experiments],
        ),
    }
    out = {}
    for table, _ in TABLES:
        clause, params = where.get(table, ("list_contains(?::BIGINT[], analysis_id)", [analyses]))
        # Every column sorts and the chunks are combined, so the same rows
        # always make the same Parquet bytes: the bundle id is a hash of them.
        rows = con.sql(f"SELECT * FROM {table} WHERE {clause} ORDER BY ALL", params=params).to_arrow_table()
        out[table] = rows.combine_chunks()
    return out


def table_columns(store: Store, table: str) -> list[str]:
    """The columns this database's `table` has."""
    return [
        name
        for (name,) in store.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [table],
        ).fetchall()
    ]


def imported(store: Store, bundle_id: str) -> dict[str, Any] | None:
    """The import of this bundle, if it was imported before: its id, when, and the new ids
    of its experiments and runs."""
    rows = rows_as_dicts(
        store.con.execute("SELECT import_id, imported_at FROM imports WHERE bundle_id = ?", [bundle_id])
    )
    if not rows:
        return None
    return rows[0] | _new_ids(store, rows[0]["import_id"])


def _new_ids(store: Store, import_id: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"experiments": [], "runs": [], "analyses": [], "models": []}
    plural = {"experiment": "experiments", "run": "runs", "analysis": "analyses", "model": "models"}
    for kind, new in store.con.execute(
        "SELECT kind, new_id FROM import_ids WHERE import_id = ? ORDER BY kind, new_id", [import_id]
    ).fetchall():
        out[plural[kind]].append(new)
    return out


def import_rows(
    store: Store,
    tables: dict[str, Any],
    bundle_id: str,
    origin: dict[str, Any],
    manifest: dict[str, Any],
    data_dir: str,
    series_paths: dict[int, str],
) -> dict[str, Any]:
    """Add a bundle's rows (Arrow tables by name) under new ids, in one transaction: ids
    remapped wherever a row names another, each experiment's origin recorded, its data
    directory and its runs' series paths (`series_paths`: old analysis id → file) set to
    where the files now are, captures not carried left out. Returns the import's id and the
    new ids."""
    con = store.con
    views = {f"bundle_{table}": _with_all_columns(store, table, tables[table]) for table, _ in TABLES}
    views["bundle_series"] = _series_table(series_paths)
    for name, arrow in views.items():
        con.register(name, arrow)
    try:
        with store.transaction():
            (import_id,) = con.execute(
                "INSERT INTO imports (bundle_id, origin, manifest, data_dir) VALUES (?, ?, ?, ?) RETURNING import_id",
                [bundle_id, json.dumps(origin), json.dumps(manifest), data_dir],
            ).fetchone()
            # The id maps are temporary tables of the transaction: a failure takes them along.
            _map_ids(store, import_id)
            _insert_all(store, import_id, origin, data_dir)
            for table in _NEW_IDS:
                con.execute(f"DROP TABLE map_{table}")
    finally:
        for name in views:
            con.unregister(name)
    return {"import_id": import_id, **_new_ids(store, import_id)}


def _with_all_columns(store: Store, table: str, arrow: Any) -> Any:
    """The bundle's rows of `table` with a null column for each one this database has and
    the bundle does not (a bundle of an older lowtail)."""
    import pyarrow as pa

    for name in table_columns(store, table):
        if name not in arrow.column_names:
            arrow = arrow.append_column(name, pa.nulls(arrow.num_rows))
    return arrow


def _series_table(series_paths: dict[int, str]) -> Any:
    import pyarrow as pa

    return pa.table(
        {"old_id": pa.array(list(series_paths), pa.int64()), "path": pa.array(list(series_paths.values()), pa.string())}
    )


def _map_ids(store: Store, import_id: int) -> None:
    """A temporary table per id kind: old id → new id from the table's sequence, also kept
    in import_ids."""
    for table, (column, sequence, kind) in _NEW_IDS.items():
        store.con.execute(
            f"CREATE TEMP TABLE map_{table} AS SELECT {column} AS old_id, nextval('{sequence}') AS new_id "
            f"FROM bundle_{table} ORDER BY {column}"
        )
        store.con.execute(f"INSERT INTO import_ids SELECT ?, ?, old_id, new_id FROM map_{table}", [import_id, kind])


def _new(table: str, column: str, alias: str) -> str:
    """The new id of `alias.column` (NULL stays NULL, an id not in the bundle too)."""
    return f"(SELECT new_id FROM map_{table} WHERE old_id = {alias}.{column})"


def _insert_all(store: Store, import_id: int, origin: dict[str, Any], data_dir: str) -> None:
    con = store.con
    con.execute(
        f"""INSERT INTO experiments BY NAME SELECT * REPLACE (
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("experiments", "calibration_experiment_id", "b")} AS calibration_experiment_id,
                ? AS data_dir,
                json_merge_patch(?::JSON, json_object('experiment_id', b.experiment_id, 'previous', b.origin)) AS origin)
            FROM bundle_experiments b""",
        [data_dir, json.dumps(origin | {"import_id": import_id})],
    )
    con.execute(
        f"""INSERT INTO analyses BY NAME SELECT * REPLACE (
                {_new("analyses", "analysis_id", "b")} AS analysis_id,
                (SELECT path FROM bundle_series s WHERE s.old_id = b.analysis_id) AS series_path)
            FROM bundle_analyses b"""
    )
    for table in ("analysis_percentiles", "analysis_histograms", "analysis_worst", "analysis_rates"):
        con.execute(
            f"INSERT INTO {table} BY NAME SELECT * REPLACE ({_new('analyses', 'analysis_id', 'b')} AS analysis_id) "
            f"FROM bundle_{table} b"
        )
    con.execute(
        f"""INSERT INTO runs BY NAME SELECT * REPLACE (
                {_new("runs", "run_id", "b")} AS run_id,
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("analyses", "analysis_id", "b")} AS analysis_id,
                (SELECT path FROM bundle_series s WHERE s.old_id = b.analysis_id) AS series_path,
                '[]' AS capture_paths)
            FROM bundle_runs b"""
    )
    con.execute(
        f"INSERT INTO run_interrupts BY NAME SELECT * REPLACE ({_new('runs', 'run_id', 'b')} AS run_id) "
        f"FROM bundle_run_interrupts b"
    )
    con.execute(
        f"""INSERT INTO model_results BY NAME SELECT * REPLACE (
                {_new("model_results", "model_id", "b")} AS model_id,
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("runs", "run_id", "b")} AS run_id,
                {_new("analyses", "analysis_id", "b")} AS analysis_id)
            FROM bundle_model_results b"""
    )
