"""The rows a bundle carries (`lowtail export` / `lowtail import`, tables of
schema/012_bundles.sql): reading the stored rows of some runs out as Arrow tables, and
adding a bundle's rows to this database under new ids, with their origin recorded.

Which rows travel: the runs named and the calibration runs their floors come from, their
experiments (file, host), their analyses with every bulky table and their latency summaries
(what comparisons pool), their interrupt samples, their kernel traces' documents and their
explanations with their causes, and the model results computed from them. The files
themselves (Parquet, the manifest) are `lowtail.bundle`'s business.

A bundle's rows are untrusted: `check_rows` refuses, before the first write, columns of
another type than this database's, empty values where none may be, ids twice, rows that
name an experiment, analysis or run the bundle does not carry, and more rows per analysis
or run than lowtail ever stores (`RowsRefused`, naming the member and the rule). Rows are
also known by their content (`CONTENT`: what survives an import unchanged, never an id or a
path), so runs that come back through another lab's bundle are recognised (`known_content`)
and not added twice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from lowtail.core import schema
from lowtail.store import codec
from lowtail.store.codec import IMPORT_MANIFEST, IMPORT_ORIGIN
from lowtail.store.db import Store, rows_as_dicts

if TYPE_CHECKING:
    import pyarrow as pa

# A bundle's rows: per table, an Arrow table.
Tables = dict[str, "pa.Table"]


class ImportedRows(TypedDict):
    """An import of a bundle: its id (when it was made, once stored) and the new ids of what it added."""

    import_id: int
    imported_at: NotRequired[datetime]
    experiments: list[int]
    runs: list[int]
    analyses: list[int]
    models: list[int]


# Every table a bundle carries, in the order rows are added (ids before their users), with
# the id column it is keyed by.
TABLES: tuple[tuple[str, str], ...] = (
    ("experiments", "experiment_id"),
    ("analyses", "analysis_id"),
    ("analysis_percentiles", "analysis_id"),
    ("analysis_histograms", "analysis_id"),
    ("analysis_worst", "analysis_id"),
    ("analysis_rates", "analysis_id"),
    ("analysis_summaries", "analysis_id"),
    ("analysis_flows", "analysis_id"),
    ("analysis_flow_keys", "analysis_id"),
    ("runs", "run_id"),
    ("run_interrupts", "run_id"),
    ("run_traces", "run_id"),
    ("run_explanations", "run_id"),
    ("run_causes", "run_id"),
    ("run_chains", "run_id"),
    ("run_hops", "run_id"),
    ("model_results", "model_id"),
)
# The format version that first carried each table not in version 1 (2: the explanations and
# the summaries; 3: each flow's figures; 4: a chain's hops): an older bundle has none of them,
# and is read as having no rows of them.
SINCE_VERSION: dict[str, int] = {
    "analysis_summaries": 2,
    "run_traces": 2,
    "run_explanations": 2,
    "run_causes": 2,
    "analysis_flows": 3,
    "analysis_flow_keys": 3,
    "run_chains": 4,
    "run_hops": 4,
}


def tables_of_version(format_version: int) -> list[str]:
    """The tables a bundle of this format version carries, in the order rows are added."""
    return [table for table, _ in TABLES if SINCE_VERSION.get(table, 1) <= format_version]


# The most rows a bundle may carry per table, and per analysis or run of the bulky ones
# (what lowtail itself stores: at most 10^6 worst events, 10^4 bins of three histograms, an
# .hgrm of a few thousand rows, a rate per second for 23 days, interrupt samples of a long run).
MAX_ROWS: dict[str, int] = {
    "experiments": 10_000,
    "analyses": 100_000,
    "runs": 100_000,
    "model_results": 100_000,
    "analysis_percentiles": 20_000_000,
    "analysis_histograms": 20_000_000,
    "analysis_worst": 20_000_000,
    "analysis_rates": 20_000_000,
    "run_interrupts": 20_000_000,
    "analysis_summaries": 100_000,
    "analysis_flows": 20_000_000,
    "analysis_flow_keys": 100_000,
    "run_traces": 100_000,
    "run_explanations": 100_000,
    "run_causes": 10_000_000,
    "run_chains": 100_000,
    "run_hops": 1_600_000,
}
PER_PARENT: dict[str, tuple[str, int]] = {
    "analysis_percentiles": ("analyses", 100_000),
    "analysis_histograms": ("analyses", 30_000),
    "analysis_worst": ("analyses", 1_000_000),
    "analysis_rates": ("analyses", 4_000_000),
    "run_interrupts": ("runs", 10_000_000),
    "analysis_summaries": ("analyses", 1),
    # The flows an analysis tells apart (MAX_FLOWS) and the one holding the rest.
    "analysis_flows": ("analyses", 4_097),
    "analysis_flow_keys": ("analyses", 1),
    "run_traces": ("runs", 1),
    "run_explanations": ("runs", 1),
    # A cause per kind, role and CPU: far fewer than this on any host.
    "run_causes": ("runs", 10_000),
    # A chain of at most 16 DuTs a run (experiment/spec.py MAX_HOPS).
    "run_chains": ("runs", 1),
    "run_hops": ("runs", 16),
}
# The largest value a bundle's row may hold, by the column's type in this database, and the
# most bytes a table's rows may take decoded (what a dictionary-encoded Parquet column
# repeats counted for every row that names it): far beyond what lowtail stores (an experiment
# file is at most 4 MiB of text, a document a few MiB), far below what would exhaust memory.
VALUE_LIMITS: dict[str, int] = {"VARCHAR": 4 << 20, "JSON": 16 << 20, "BLOB": 64 << 20}
OTHER_VALUE_LIMIT = 4 << 20  # a type not named above (a list, a struct): its encoded bytes
MAX_TABLE_DECODED_BYTES = 2 << 30


def value_limits(store: Store, table: str) -> dict[str, int]:
    """The largest value each column of `table` may hold in a bundle's rows, in bytes."""
    return {
        column: VALUE_LIMITS.get(db_type, OTHER_VALUE_LIMIT)
        for column, (db_type, _) in column_types(store, table).items()
    }


# What makes two rows of a bulky table the same row (a bundle that repeats one is refused).
_NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "analysis_histograms": ("analysis_id", "kind", "lo_ns"),
    "analysis_rates": ("analysis_id", "side", "second"),
    "analysis_worst": ("analysis_id", "pre_ts_ns", "latency_ns", "packet_id"),
    "run_interrupts": ("run_id", "source", "t_ns", "cpu", "kind"),
    "analysis_summaries": ("analysis_id",),
    "analysis_flows": ("analysis_id", "flow"),
    "analysis_flow_keys": ("analysis_id",),
    "run_traces": ("run_id",),
    "run_explanations": ("run_id",),
    "run_causes": ("run_id", "rank"),
    "run_chains": ("run_id",),
    "run_hops": ("run_id", "hop"),
}
# Which ids a row names, and the table that must carry them (None allowed where the column is).
_REFERENCES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "runs": (("experiment_id", "experiments", False), ("analysis_id", "analyses", True)),
    "analysis_percentiles": (("analysis_id", "analyses", False),),
    "analysis_histograms": (("analysis_id", "analyses", False),),
    "analysis_worst": (("analysis_id", "analyses", False),),
    "analysis_rates": (("analysis_id", "analyses", False),),
    "run_interrupts": (("run_id", "runs", False),),
    "analysis_summaries": (("analysis_id", "analyses", False),),
    "analysis_flows": (("analysis_id", "analyses", False),),
    "analysis_flow_keys": (("analysis_id", "analyses", False),),
    "run_traces": (("run_id", "runs", False),),
    "run_explanations": (("run_id", "runs", False),),
    "run_causes": (("run_id", "runs", False),),
    "run_chains": (("run_id", "runs", False),),
    "run_hops": (("run_id", "runs", False),),
}


def row_limit(table: str, counts: dict[str, int]) -> int:
    """The most rows of `table` a bundle whose tables hold `counts` rows may carry."""
    limit = MAX_ROWS[table]
    if table in PER_PARENT:
        parent, per = PER_PARENT[table]
        limit = min(limit, per * counts.get(parent, 0))
    return limit


class RowsRefused(Exception):
    """A bundle's rows break a rule: `member` (rows/<table>.parquet) and the rule in words."""

    def __init__(self, member: str, rule: str) -> None:
        super().__init__(f"{member}: {rule}")
        self.member = member
        self.rule = rule


# The id sequences of the tables whose rows get new ids, and the kind `import_ids` names.
_NEW_IDS = {
    "experiments": ("experiment_id", "experiment_id_seq", "experiment"),
    "analyses": ("analysis_id", "analysis_id_seq", "analysis"),
    "runs": ("run_id", "run_id_seq", "run"),
    "model_results": ("model_id", "model_id_seq", "model"),
}


def rows_to_export(store: Store, run_ids: list[int], analysis_ids: list[int]) -> Tables:
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
        "run_traces": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "run_explanations": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "run_causes": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "run_chains": ("list_contains(?::BIGINT[], run_id)", [ids]),
        "run_hops": ("list_contains(?::BIGINT[], run_id)", [ids]),
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


def column_types(store: Store, table: str) -> dict[str, tuple[str, bool]]:
    """This database's columns of `table`: name → (type, nullable)."""
    return {
        name: (kind, nullable == "YES")
        for name, kind, nullable in store.con.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = ? AND table_schema = 'main' ORDER BY ordinal_position",
            [table],
        ).fetchall()
    }


def _compatible(db_type: str, arrow_type: pa.DataType) -> bool:
    """Whether a bundle's column of `arrow_type` holds values of the database's `db_type`
    without conversion (a string is no id, a 64-bit number no INTEGER)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_null(arrow_type):
        return True
    if db_type == "BIGINT":
        return bool(pt.is_signed_integer(arrow_type) or arrow_type in (pa.uint8(), pa.uint16(), pa.uint32()))
    if db_type == "INTEGER":
        return arrow_type in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16())
    if db_type == "UBIGINT":
        return bool(pt.is_unsigned_integer(arrow_type))
    if db_type == "DOUBLE":
        return bool(pt.is_floating(arrow_type))
    if db_type == "BOOLEAN":
        return bool(pt.is_boolean(arrow_type))
    if db_type == "BLOB":
        return bool(pt.is_binary(arrow_type) or pt.is_large_binary(arrow_type))
    if db_type in ("VARCHAR", "JSON"):
        return bool(pt.is_string(arrow_type) or pt.is_large_string(arrow_type))
    if db_type.startswith("TIMESTAMP"):
        return bool(pt.is_timestamp(arrow_type) and arrow_type.tz is None)
    return False


def with_absent_tables(store: Store, tables: Tables) -> Tables:
    """The bundle's tables, with the ones a bundle of an earlier format version lacks as
    tables of no rows (this database's columns)."""
    return tables | {
        table: store.con.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table()
        for table, _ in TABLES
        if table not in tables
    }


def check_rows(
    store: Store,
    tables: Tables,
    series_ids: set[int],
    trace_ids: set[int] | None = None,
    hop_ids: set[tuple[int, int]] | None = None,
) -> None:
    """Refuse (RowsRefused) a bundle's rows that this database could not take whole: every
    rule is checked before the first write, so that a refused bundle changes nothing."""
    counts = {table: rows.num_rows for table, rows in tables.items()}
    for table, _ in TABLES:
        member = f"rows/{table}.parquet"
        if counts[table] > row_limit(table, counts):
            raise RowsRefused(
                member,
                f"holds {counts[table]:,} rows, more than a bundle of these may carry ({row_limit(table, counts):,})",
            )
        _check_types(store, table, tables[table], member)
    con = store.con
    names = {f"check_{table}": tables[table] for table, _ in TABLES}
    for name, arrow in names.items():
        con.register(name, arrow)
    try:
        _check_json(store, tables)
        for table, key in TABLES:
            if table in _NEW_IDS:
                _unique(store, table, (key,), "id")
            if table in _NATURAL_KEYS:
                _unique(store, table, _NATURAL_KEYS[table], "row")
            for column, target, nullable in _REFERENCES.get(table, ()):
                _references(store, table, column, target, dict(TABLES)[target], nullable)
            if table in PER_PARENT:
                column = "analysis_id" if PER_PARENT[table][0] == "analyses" else "run_id"
                (most,) = con.execute(
                    f"SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM check_{table} GROUP BY {column})"
                ).fetchall()[0]
                if most > PER_PARENT[table][1]:
                    raise RowsRefused(
                        f"rows/{table}.parquet",
                        f"holds {most:,} rows for one {column.removesuffix('_id')}, more than lowtail stores "
                        f"({PER_PARENT[table][1]:,})",
                    )
        analyses = {a for (a,) in con.execute("SELECT analysis_id FROM check_analyses").fetchall()}
        stray = sorted(series_ids - analyses)
        if stray:
            raise RowsRefused(f"series/analysis-{stray[0]}.parquet", "is the series of no analysis in the bundle")
        traced = {r for (r,) in con.execute("SELECT run_id FROM check_run_traces WHERE path IS NOT NULL").fetchall()}
        stray = sorted((trace_ids or set()) - traced)
        if stray:
            raise RowsRefused(f"traces/run-{stray[0]}.parquet", "is the trace of no traced run in the bundle")
        hops = {(r, h) for r, h in con.execute("SELECT run_id, hop FROM check_run_hops").fetchall()}
        stray_hops = sorted((hop_ids or set()) - hops)
        if stray_hops:
            run, hop = stray_hops[0]
            raise RowsRefused(f"series/hop-{run}-{hop}.parquet", "is the series of no chain run's hop in the bundle")
    finally:
        for name in names:
            con.unregister(name)


def _check_types(store: Store, table: str, rows: pa.Table, member: str) -> None:
    known = column_types(store, table)
    for column in rows.column_names:
        if column not in known:
            raise RowsRefused(member, f"has a column {column!r} this database's {table} lacks")
        db_type, nullable = known[column]
        arrow_type = rows.schema.field(column).type
        if not _compatible(db_type, arrow_type):
            raise RowsRefused(member, f"column {column} holds {arrow_type}, not {db_type}")
        if not nullable and rows.column(column).null_count:
            raise RowsRefused(member, f"column {column} has empty values, which {table}.{column} may not")
    for column, (_, nullable) in known.items():
        if not nullable and column not in rows.column_names:
            raise RowsRefused(member, f"has no column {column}, which {table} needs")


def _check_json(store: Store, tables: Tables) -> None:
    for table, _ in TABLES:
        for column, (db_type, _) in column_types(store, table).items():
            if db_type == "JSON" and column in tables[table].column_names:
                (bad,) = store.con.execute(
                    f"SELECT count(*) FROM check_{table} WHERE {column} IS NOT NULL AND NOT json_valid({column})"
                ).fetchall()[0]
                if bad:
                    raise RowsRefused(
                        f"rows/{table}.parquet", f"column {column} holds {bad:,} values that are not JSON"
                    )
                _check_json_depth(store, table, column)


def _check_json_depth(store: Store, table: str, column: str) -> None:
    """Every value of a JSON column nests at most schema.MAX_DEPTH deep (every reader of the
    stored value — report, compare, certify, explain — would otherwise recurse into it); only
    values with more opening brackets than that are looked at closely."""
    candidates = store.con.execute(
        f"SELECT {column} FROM check_{table} WHERE {column} IS NOT NULL "
        f"AND length(regexp_replace({column}, '[^\\[{{]', '', 'g')) > ?",
        [schema.MAX_DEPTH],
    ).fetchall()
    for (text,) in candidates:
        if schema.json_depth(text) > schema.MAX_DEPTH:
            raise RowsRefused(
                f"rows/{table}.parquet", f"column {column} holds JSON nested more than {schema.MAX_DEPTH} levels deep"
            )


def _unique(store: Store, table: str, key: tuple[str, ...], what: str) -> None:
    columns = ", ".join(key)
    found = next(
        iter(
            store.con.execute(
                f"SELECT {columns}, count(*) FROM check_{table} GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL LIMIT 1"
            ).fetchall()
        ),
        None,
    )
    if found:
        shown = ", ".join(f"{k} {v}" for k, v in zip(key, found[:-1]))
        raise RowsRefused(f"rows/{table}.parquet", f"holds the {what} {shown} {found[-1]:,} times")


def _references(store: Store, table: str, column: str, target: str, target_key: str, nullable: bool) -> None:
    found = next(
        iter(
            store.con.execute(
                f"SELECT {column} FROM check_{table} WHERE {column} IS NOT NULL "
                f"AND {column} NOT IN (SELECT {target_key} FROM check_{target}) ORDER BY 1 LIMIT 1"
            ).fetchall()
        ),
        None,
    )
    if found:
        raise RowsRefused(
            f"rows/{table}.parquet", f"names {column.removesuffix('_id')} {found[0]}, which the bundle does not carry"
        )
    if not nullable:
        (empty,) = store.con.execute(f"SELECT count(*) FROM check_{table} WHERE {column} IS NULL").fetchall()[0]
        if empty:
            raise RowsRefused(f"rows/{table}.parquet", f"has rows without {column}")


# -- content identity ------------------------------------------------------------------------------


# What a row is, whatever its ids and paths: the columns an import keeps as they are. A run
# exported by lab A, imported by lab B and exported again from there has the same content.
def _text(*columns: str) -> str:
    parts = ", ".join(f"coalesce(CAST({c} AS VARCHAR), '\x00')" for c in columns)
    return f"sha256(concat_ws('\x1f', {parts}))"


CONTENT: dict[str, str] = {
    "experiments": _text("name", "created_at", "spec_hash", "host"),
    "analyses": _text(
        "created_at",
        "pre_path",
        "post_path",
        "options",
        "sent",
        "received",
        "lost",
        "duplicates",
        "reordered",
        "start_ts_ns",
        "duration_ns",
        "trim_ns",
        "lat_min_ns",
        "lat_p50_ns",
        "lat_p99_9999_ns",
        "lat_max_ns",
    ),
    "runs": _text(
        "combination_key",
        "dut_name",
        "dut_kind",
        "dut_config",
        "calibration",
        "rate_pps",
        "frame_size",
        "burst",
        "repetition",
        "started_at",
        "finished_at",
        "duration_ns",
    ),
    "model_results": _text("kind", "created_at", "label", "inputs", "result"),
}


@dataclass
class KnownContent:
    """The bundle's rows this database holds already: old id → the id here."""

    ids: dict[str, dict[int, int]] = field(default_factory=dict)
    everything: bool = False

    def of(self, table: str) -> dict[int, int]:
        """Old id → id here, for one table."""
        return self.ids.get(table, {})

    def as_result(self) -> dict[str, list[int]]:
        """The ids here, as an import's result lists them."""
        return {
            "experiments": sorted(set(self.of("experiments").values())),
            "runs": sorted(set(self.of("runs").values())),
            "analyses": sorted(set(self.of("analyses").values())),
            "models": sorted(set(self.of("model_results").values())),
        }


def known_content(store: Store, tables: Tables) -> KnownContent:
    """Which of the bundle's experiments, analyses, runs and model results this database holds
    already, by content (CONTENT): what another bundle brought, or what was measured here."""
    con = store.con
    known = KnownContent()
    for table, content in CONTENT.items():
        key = _NEW_IDS[table][0]
        con.register("content_bundle", tables[table])
        try:
            found = con.execute(
                f"SELECT b.{key}, min(l.{key}) FROM (SELECT {key}, {content} AS c FROM content_bundle) b "
                f"JOIN (SELECT {key}, {content} AS c FROM {table}) l ON b.c = l.c GROUP BY b.{key}"
            ).fetchall()
        finally:
            con.unregister("content_bundle")
        known.ids[table] = {old: here for old, here in found}
    known.everything = all(len(known.of(t)) == tables[t].num_rows for t in CONTENT)
    return known


def imported(store: Store, bundle_id: str) -> ImportedRows | None:
    """The import of this bundle, if it was imported before: its id, when, and the new ids
    of its experiments and runs."""
    rows = rows_as_dicts(
        store.con.execute("SELECT import_id, imported_at FROM imports WHERE bundle_id = ?", [bundle_id])
    )
    if not rows:
        return None
    new = _new_ids(store, rows[0]["import_id"])
    return ImportedRows(
        import_id=rows[0]["import_id"],
        imported_at=rows[0]["imported_at"],
        experiments=new["experiments"],
        runs=new["runs"],
        analyses=new["analyses"],
        models=new["models"],
    )


class _NewIds(TypedDict):
    experiments: list[int]
    runs: list[int]
    analyses: list[int]
    models: list[int]


def _new_ids(store: Store, import_id: int) -> _NewIds:
    ids: dict[str, list[int]] = {"experiment": [], "run": [], "analysis": [], "model": []}
    for kind, new in store.con.execute(
        "SELECT kind, new_id FROM import_ids WHERE import_id = ? ORDER BY kind, new_id", [import_id]
    ).fetchall():
        ids[kind].append(new)
    return _NewIds(experiments=ids["experiment"], runs=ids["run"], analyses=ids["analysis"], models=ids["model"])


def import_rows(
    store: Store,
    tables: Tables,
    bundle_id: str,
    origin: dict[str, object],
    manifest: dict[str, object],
    data_dir: str,
    series_paths: dict[int, str],
    known: KnownContent | None = None,
    trace_paths: dict[int, str] | None = None,
    hop_series_paths: dict[tuple[int, int], str] | None = None,
) -> ImportedRows:
    """Add a bundle's rows (Arrow tables by name) under new ids, in one transaction: ids
    remapped wherever a row names another (in the explanations' documents too), each
    experiment's origin recorded, its data directory, its runs' series paths (`series_paths`:
    old analysis id → file), trace paths (`trace_paths`: old run id → file) and hop series
    paths (`hop_series_paths`: (old run id, hop) → file) set to where the files now are,
    captures not carried left out. Rows this database holds already
    (`known`, by content) are not added again: what names them names the rows here. Returns
    the import's id and the new ids."""
    import pyarrow as pa

    known = known or KnownContent()
    con = store.con
    views = {f"bundle_{table}": _with_all_columns(store, table, tables[table]) for table, _ in TABLES}
    views["bundle_series"] = _series_table(series_paths)
    views["bundle_trace_files"] = _series_table(trace_paths or {})
    views["bundle_hop_series"] = _hop_series_table(hop_series_paths or {})
    for table in _NEW_IDS:
        pairs = known.of(table)
        views[f"known_{table}"] = pa.table(
            {"old_id": pa.array(list(pairs), pa.int64()), "new_id": pa.array(list(pairs.values()), pa.int64())}
        )
    for name, arrow in views.items():
        con.register(name, arrow)
    try:
        with store.transaction():
            (import_id,) = con.execute(
                "INSERT INTO imports (bundle_id, origin, manifest, data_dir) VALUES (?, ?, ?, ?) RETURNING import_id",
                [bundle_id, IMPORT_ORIGIN.encode(origin), IMPORT_MANIFEST.encode(manifest), data_dir],
            ).fetchone()
            # The id maps are temporary tables of the transaction: a failure takes them along.
            _map_ids(store, import_id)
            _insert_all(store, import_id, origin, data_dir)
            for table in _NEW_IDS:
                con.execute(f"DROP TABLE map_{table}")
    finally:
        _unregister(store, views)
    new = _new_ids(store, import_id)
    return ImportedRows(
        import_id=import_id,
        experiments=new["experiments"],
        runs=new["runs"],
        analyses=new["analyses"],
        models=new["models"],
    )


def _unregister(store: Store, names: Mapping[str, object]) -> None:
    """Drop the views of a bundle; after a failure that closed the connection (a full disk)
    there is nothing to drop, and the failure is what the user must hear."""
    for name in names:
        try:
            store.con.unregister(name)
        except Exception:  # noqa: BLE001 — the connection went with the failure being raised
            return


def _with_all_columns(store: Store, table: str, arrow: pa.Table) -> pa.Table:
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


def _hop_series_table(paths: dict[tuple[int, int], str]) -> Any:
    import pyarrow as pa

    return pa.table(
        {
            "old_run": pa.array([run for run, _ in paths], pa.int64()),
            "hop": pa.array([hop for _, hop in paths], pa.int64()),
            "path": pa.array(list(paths.values()), pa.string()),
        }
    )


def _map_ids(store: Store, import_id: int) -> None:
    """A temporary table per id kind: old id → new id from the table's sequence, also kept
    in import_ids."""
    for table, (column, sequence, kind) in _NEW_IDS.items():
        store.con.execute(
            f"CREATE TEMP TABLE map_{table} AS SELECT {column} AS old_id, nextval('{sequence}') AS new_id "
            f"FROM bundle_{table} WHERE {column} NOT IN (SELECT old_id FROM known_{table}) ORDER BY {column}"
        )
        store.con.execute(f"INSERT INTO import_ids SELECT ?, ?, old_id, new_id FROM map_{table}", [import_id, kind])
        # Rows held here already: what names them names the rows here.
        store.con.execute(f"INSERT INTO map_{table} SELECT old_id, new_id FROM known_{table}")


def _new(table: str, column: str, alias: str) -> str:
    """The new id of `alias.column` (NULL stays NULL, an id not in the bundle too)."""
    return f"(SELECT new_id FROM map_{table} WHERE old_id = {alias}.{column})"


def _insert_all(store: Store, import_id: int, origin: dict[str, object], data_dir: str) -> None:
    con = store.con
    con.execute(
        f"""INSERT INTO experiments BY NAME SELECT * REPLACE (
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("experiments", "calibration_experiment_id", "b")} AS calibration_experiment_id,
                ? AS data_dir,
                json_merge_patch(?::JSON, json_object('experiment_id', b.experiment_id, 'previous', b.origin)) AS origin)
            FROM bundle_experiments b WHERE b.experiment_id NOT IN (SELECT old_id FROM known_experiments)""",
        [data_dir, codec.EXPERIMENT_ORIGIN.encode(origin | {"import_id": import_id})],
    )
    con.execute(
        f"""INSERT INTO analyses BY NAME SELECT * REPLACE (
                {_new("analyses", "analysis_id", "b")} AS analysis_id,
                (SELECT path FROM bundle_series s WHERE s.old_id = b.analysis_id) AS series_path)
            FROM bundle_analyses b WHERE b.analysis_id NOT IN (SELECT old_id FROM known_analyses)"""
    )
    for table in (
        "analysis_percentiles",
        "analysis_histograms",
        "analysis_worst",
        "analysis_rates",
        "analysis_summaries",
        "analysis_flows",
        "analysis_flow_keys",
    ):
        con.execute(
            f"INSERT INTO {table} BY NAME SELECT * REPLACE ({_new('analyses', 'analysis_id', 'b')} AS analysis_id) "
            f"FROM bundle_{table} b WHERE b.analysis_id NOT IN (SELECT old_id FROM known_analyses)"
        )
    con.execute(
        f"""INSERT INTO runs BY NAME SELECT * REPLACE (
                {_new("runs", "run_id", "b")} AS run_id,
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("analyses", "analysis_id", "b")} AS analysis_id,
                (SELECT path FROM bundle_series s WHERE s.old_id = b.analysis_id) AS series_path,
                '[]' AS capture_paths)
            FROM bundle_runs b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"""
    )
    con.execute(
        f"INSERT INTO run_interrupts BY NAME SELECT * REPLACE ({_new('runs', 'run_id', 'b')} AS run_id) "
        f"FROM bundle_run_interrupts b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"
    )
    _insert_explanations(store)
    _insert_chains(store)
    con.execute(
        f"""INSERT INTO model_results BY NAME SELECT * REPLACE (
                {_new("model_results", "model_id", "b")} AS model_id,
                {_new("experiments", "experiment_id", "b")} AS experiment_id,
                {_new("runs", "run_id", "b")} AS run_id,
                {_new("analyses", "analysis_id", "b")} AS analysis_id)
            FROM bundle_model_results b WHERE b.model_id NOT IN (SELECT old_id FROM known_model_results)"""
    )


def _insert_explanations(store: Store) -> None:
    """The runs' traces and explanations under the runs' new ids: each trace's file where the
    import put it (no file: the path is dropped, and explaining the run again says the trace
    is gone), each explanation's document naming the run's new id and its trace's new path."""
    con = store.con
    trace_file = "(SELECT path FROM bundle_trace_files f WHERE f.old_id = b.run_id)"
    con.execute(
        f"""INSERT INTO run_traces BY NAME SELECT * REPLACE (
                {_new("runs", "run_id", "b")} AS run_id,
                {trace_file} AS path,
                CASE WHEN b.document->>'path' IS NULL THEN b.document
                     ELSE json_merge_patch(b.document, json_object('path', {trace_file})) END AS document)
            FROM bundle_run_traces b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"""
    )
    con.execute(
        f"""INSERT INTO run_explanations BY NAME SELECT * REPLACE (
                {_new("runs", "run_id", "b")} AS run_id,
                CASE WHEN b.document->'trace'->>'path' IS NULL
                     THEN json_merge_patch(b.document, json_object('run', {_new("runs", "run_id", "b")}))
                     ELSE json_merge_patch(b.document, json_object('run', {_new("runs", "run_id", "b")},
                          'trace', json_object('path', {trace_file}))) END AS document)
            FROM bundle_run_explanations b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"""
    )
    con.execute(
        f"INSERT INTO run_causes BY NAME SELECT * REPLACE ({_new('runs', 'run_id', 'b')} AS run_id) "
        f"FROM bundle_run_causes b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"
    )


def _insert_chains(store: Store) -> None:
    """The chain runs' hops under the runs' new ids, each hop's series path set to where its
    file now is (bundle_hop_series), in the row and the document; a hop whose file the bundle
    does not carry (a bundle of format 4, or one exported where the file was gone) gets none,
    and explaining the run here says its tail cannot be split by hop."""
    con = store.con
    new_run = _new("runs", "run_id", "b")
    carried = "(SELECT s.path FROM bundle_hop_series s WHERE s.old_run = b.run_id AND s.hop = b.hop)"
    con.execute(
        f"INSERT INTO run_hops BY NAME SELECT * REPLACE ({new_run} AS run_id, {carried} AS series_path) "
        f"FROM bundle_run_hops b WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"
    )
    rows = con.execute("SELECT old_run, hop, path FROM bundle_hop_series").fetchall()
    files = {(run, hop): path for run, hop, path in rows}
    added = con.execute(
        f"SELECT b.run_id, {new_run}, b.document FROM bundle_run_chains b "
        f"WHERE b.run_id NOT IN (SELECT old_id FROM known_runs)"
    ).fetchall()
    for old_run, run_id, raw in added:
        document = codec.RUN_CHAIN.decode(store, raw, f"run {run_id}")
        for hop in document["hops"]:
            hop["series_path"] = files.get((old_run, hop["hop"]))
        con.execute(
            f"INSERT INTO run_chains BY NAME SELECT * REPLACE (? AS run_id, ?::JSON AS document) "
            f"FROM bundle_run_chains b WHERE {new_run} = ?",
            [run_id, codec.RUN_CHAIN.encode(document), run_id],
        )
