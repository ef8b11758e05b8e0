"""Experiments and their runs in the results database (tables of schema/002_runs.sql)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from lowtail.core.errors import UserError
from lowtail.core.units import format_named
from lowtail.experiment.document import ExperimentListRow
from lowtail.store.analyses import save_analysis
from lowtail.store.codec import (
    ANALYSIS_FIGURES,
    ANALYSIS_WARNINGS,
    EXPERIMENT_HOST,
    EXPERIMENT_ORIGIN,
    EXPERIMENT_SPEC,
    RUN_COLUMNS,
)
from lowtail.store.db import (
    Store,
    latency_columns,
    latency_figures_of,
    row_as_dict,
    rows_as_dicts,
    stored_id,
)
from lowtail.store.records import JSON_COLUMNS, RunRecord, derived_columns_sql

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalysisDocument, AnalyzeOptionsDocument
    from lowtail.experiment.document import ExperimentFile, ExperimentHost, ExperimentRow, ExperimentStatus, RunRow
    from lowtail.host.document import HostMetadata

# The calibration runs an experiment's runs are read against, by their traffic:
# (rate_pps, frame_size, burst) -> the calibration run with its latency columns.
Floor = dict[tuple[int, int | None, int | None], "RunRow"]


def create_experiment(
    store: Store, name: str, spec: ExperimentFile, spec_hash: str, host: ExperimentHost | HostMetadata, data_dir: str
) -> int:
    """A new experiment, status 'running'; returns its id. Its host: a measured experiment's
    `HostMetadata` (every key of `ExperimentHost`), an imported one's what is known."""
    with store.transaction():
        (eid,) = store.con.execute(
            "INSERT INTO experiments (name, spec, spec_hash, host, status, data_dir) VALUES (?, ?, ?, ?, 'running', ?) "
            "RETURNING experiment_id",
            [
                name,
                EXPERIMENT_SPEC.encode(spec),
                spec_hash,
                EXPERIMENT_HOST.encode(cast("ExperimentHost", host)),
                data_dir,
            ],
        ).fetchone()
    return int(eid)


def resumable_experiment(store: Store, spec_hash: str) -> ExperimentStatus | None:
    """The latest unfinished experiment of the same file measured in this database, if any:
    resuming continues it (an imported one, however unfinished, is another lab's)."""
    found = latest_experiment(store, spec_hash)
    if found is None or found["status"] == "finished":
        return None
    return found


def latest_experiment(store: Store, spec_hash: str) -> ExperimentStatus | None:
    """The latest experiment of the same file (or campaign of `import-captures`) measured in
    this database, whatever its status: never one a bundle brought (`origin`), which a local
    run must not resume or write into."""
    found = row_as_dict(
        store.con.execute(
            "SELECT experiment_id, name, status, data_dir FROM experiments WHERE spec_hash = ? AND origin IS NULL "
            "ORDER BY experiment_id DESC LIMIT 1",
            [spec_hash],
        )
    )
    return cast("ExperimentStatus | None", found)


def set_data_dir(store: Store, experiment_id: int, data_dir: str) -> None:
    """Where the experiment's captures and series go (known once it has an id)."""
    with store.transaction():
        store.con.execute("UPDATE experiments SET data_dir = ? WHERE experiment_id = ?", [data_dir, experiment_id])


def set_status(store: Store, experiment_id: int, status: str) -> None:
    """running, interrupted, failed, partial (an import that left captures out) or finished
    (which also sets finished_at)."""
    with store.transaction():
        store.con.execute(
            "UPDATE experiments SET status = ?, finished_at = CASE WHEN ? IN ('finished') "
            "THEN current_timestamp ELSE finished_at END WHERE experiment_id = ?",
            [status, status, experiment_id],
        )


def done_keys(store: Store, experiment_id: int) -> set[str]:
    """The combination keys of the runs stored so far: resuming skips them."""
    return {
        k
        for (k,) in store.con.execute(
            "SELECT combination_key FROM runs WHERE experiment_id = ?", [experiment_id]
        ).fetchall()
    }


def save_run(
    store: Store,
    run: RunRecord | Mapping[str, Any],
    analysis: AnalysisDocument | None,
    analysis_options: AnalyzeOptionsDocument,
) -> int:
    """Store a run and its analysis together (one transaction: both or neither). A mapping
    of RunRecord's fields is read into one first."""
    record = run if isinstance(run, RunRecord) else RunRecord.of(run)
    with store.transaction():
        analysis_id = save_analysis(store, analysis, options=analysis_options, label=record.label) if analysis else None
        row = record.columns() | {"analysis_id": analysis_id}
        for k in JSON_COLUMNS:
            row[k] = RUN_COLUMNS[k].encode(row[k])
        cols = list(row)
        (run_id,) = store.con.execute(
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) RETURNING run_id",
            [row[c] for c in cols],
        ).fetchone()
    return int(run_id)


def _decoded_run(store: Store, run: dict[str, object]) -> RunRow:
    """A run row as DuckDB handed it back (its values not yet typed) with its JSON columns (and
    its analysis's) read back into their types: the run row it then is."""
    where = f"run {run.get('run_id')}"
    for k in JSON_COLUMNS:
        if k in run:
            run[k] = RUN_COLUMNS[k].decode(store, run[k], where)
    if run.get("figures") is not None:
        run["figures"] = ANALYSIS_FIGURES.decode(store, run["figures"], where)
    if run.get("warnings") is not None:
        run["warnings"] = ANALYSIS_WARNINGS.decode(store, run["warnings"], where)
    return cast("RunRow", run)


def _decoded_runs(store: Store, rows: list[dict[str, object]]) -> list[RunRow]:
    return [_decoded_run(store, r) for r in rows]


def experiment(store: Store, experiment_id: int | str) -> ExperimentRow:
    """One stored experiment (an id, or 'latest') with its file and host, JSON decoded."""
    eid = stored_id(
        store, experiment_id, "experiments", "experiment_id", "experiments", "`lowtail experiment list` lists them"
    )
    found = row_as_dict(store.con.execute("SELECT * FROM experiments WHERE experiment_id = ?", [eid]))
    assert found is not None
    where = f"experiment {eid}"
    found["spec"] = EXPERIMENT_SPEC.decode(store, found["spec"], where)
    found["host"] = EXPERIMENT_HOST.decode(store, found["host"], where)
    found["origin"] = EXPERIMENT_ORIGIN.decode(store, found.get("origin"), where)
    return cast("ExperimentRow", found)


def latest_swept_experiment(store: Store) -> int:
    """The newest experiment that measured a DuT (not only the wire, as `lowtail calibrate`
    does): what 'latest' means for a model of a DuT's sweep."""
    (found,) = store.con.execute(
        "SELECT max(experiment_id) FROM runs WHERE NOT calibration AND valid AND analysis_id IS NOT NULL"
    ).fetchone()
    if found is None:
        raise UserError(f"{store.path}: holds no experiment with a valid run of a DuT yet (run `lowtail run`)")
    return int(found)


_RUNS_WITH_FIGURES = f"""SELECT r.* EXCLUDE (series_path), a.sent, a.received, a.lost, a.duplicates, a.reordered, {latency_columns("a")},
                  a.partial, a.warnings, a.figures, a.start_ts_ns, coalesce(r.series_path, a.series_path) AS series_path,
                  {derived_columns_sql()}
           FROM runs r JOIN experiments e USING (experiment_id) LEFT JOIN analyses a USING (analysis_id)"""


def runs(store: Store, experiment_id: int) -> list[RunRow]:
    """The experiment's runs with their headline figures and their host's kernel and name,
    in the order they ran."""
    return _decoded_runs(
        store,
        rows_as_dicts(
            store.con.execute(f"{_RUNS_WITH_FIGURES} WHERE r.experiment_id = ? ORDER BY r.run_id", [experiment_id])
        ),
    )


def select_runs(
    store: Store,
    experiment_ids: list[int] | None = None,
    run_ids: list[int] | None = None,
    analysis_ids: list[int] | None = None,
) -> list[RunRow]:
    """Runs as `runs` returns them: those of these experiments, with these ids, or with
    these analyses (the union), in id order; every stored run when none is given."""
    wanted = [("r.experiment_id", experiment_ids), ("r.run_id", run_ids), ("r.analysis_id", analysis_ids)]
    clauses = [f"list_contains(?::BIGINT[], {column})" for column, ids in wanted if ids]
    params = [list(map(int, ids)) for _, ids in wanted if ids]
    where = f"WHERE {' OR '.join(clauses)}" if clauses else ""
    return _decoded_runs(
        store, rows_as_dicts(store.con.execute(f"{_RUNS_WITH_FIGURES} {where} ORDER BY r.run_id", params))
    )


def missing_ids(store: Store, table: str, id_column: str, ids: list[int]) -> list[int]:
    """Which of these ids `table` does not hold (experiments, runs, analyses)."""
    if not ids:
        return []
    found = {
        i
        for (i,) in store.con.execute(
            f"SELECT {id_column} FROM {table} WHERE list_contains(?::BIGINT[], {id_column})", [list(map(int, ids))]
        ).fetchall()
    }
    return [i for i in ids if i not in found]


# What a stored id can name, as a selection writes it (`experiment:3`, `run:12`, `analysis:7`).
_ID_KINDS = {
    "experiment": ("experiments", "experiment_id"),
    "run": ("runs", "run_id"),
    "analysis": ("analyses", "analysis_id"),
}
_PLURAL = {"experiment": "experiments", "run": "runs", "analysis": "analyses"}


def not_found(store: Store, kind: str, ids: list[int], also: tuple[str, ...] = ()) -> UserError:
    """ "no run with id 3" — and when every id is one of another kind the command also takes
    (`also`), how to name them: `compare 1 2` after two `lowtail analyze` runs, where a bare
    number is an experiment, says "there are analyses 1, 2: write analysis:1 analysis:2"."""
    listed = ", ".join(map(str, ids))
    text = f"{store.path}: no {kind} with id {listed}"
    for other in also:
        if other != kind and not missing_ids(store, *_ID_KINDS[other], ids):
            named = format_named(ids, other, _PLURAL[other])
            there = f"there are {named}" if len(ids) > 1 else f"there is {'an' if other[0] in 'aeiou' else 'a'} {named}"
            text += f" ({there}: write {' '.join(f'{other}:{i}' for i in ids)})"
            break
    return UserError(text)


def verdict_settings(store: Store, experiment_ids: list[int]) -> dict[int, dict[str, object]]:
    """The [verdict] table each experiment was stored with ({} where its file had none), as its
    file said it (`verdict.judge.parse_verdict` checks it)."""
    if not experiment_ids:
        return {}
    rows = store.con.execute(
        "SELECT experiment_id, json_extract(spec, '$.verdict') FROM experiments "
        "WHERE list_contains(?::BIGINT[], experiment_id)",
        [list(map(int, experiment_ids))],
    ).fetchall()
    return {eid: EXPERIMENT_SPEC.decode(store, v, f"experiment {eid}") for eid, v in rows}


def calibration_runs(store: Store, source: int, rate_pps: int, frame_size: int, burst: int) -> list[RunRow]:
    """Every valid analysed calibration run of experiment `source` with this traffic (its
    repetitions), as `runs` returns them: the floor of a configuration and its spread."""
    return _decoded_runs(
        store,
        rows_as_dicts(
            store.con.execute(
                f"""{_RUNS_WITH_FIGURES} WHERE r.experiment_id = ? AND r.calibration AND r.valid
                   AND r.analysis_id IS NOT NULL AND r.rate_pps = ? AND r.frame_size = ? AND r.burst = ?
                   ORDER BY r.run_id""",
                [source, rate_pps, frame_size, burst],
            )
        ),
    )


@dataclass(frozen=True)
class ExperimentRuns:
    """A stored experiment with its runs (as `runs` returns them) and the floor they are read against."""

    experiment: ExperimentRow
    runs: list[RunRow]
    floor: Floor


def experiment_runs(store: Store, experiment_id: int) -> ExperimentRuns:
    """The experiment, its runs and its calibration floor: what a table of its runs shows."""
    return ExperimentRuns(
        experiment(store, experiment_id), runs(store, experiment_id), calibration_floor(store, experiment_id)
    )


def run_figures(store: Store, run_id: int, also: tuple[str, ...] = ()) -> RunRow:
    """A run joined with the figures of its analysis (its DuT options and containment decoded);
    `also`: the other kinds of id the caller takes, named when the id is one of them."""
    doc = row_as_dict(
        store.con.execute(
            f"""SELECT r.run_id, r.experiment_id, r.dut_name, r.dut_kind, r.dut_config, r.containment, r.calibration,
                  r.rate_pps, r.frame_size, r.burst, r.repetition, r.valid, r.analysis_id,
                  coalesce(r.series_path, a.series_path) AS series_path,
                  a.sent, a.received, a.lost, a.duration_ns, a.start_ts_ns, a.partial, {latency_columns("a")}
           FROM runs r LEFT JOIN analyses a ON a.analysis_id = r.analysis_id WHERE r.run_id = ?""",
            [int(run_id)],
        )
    )
    if doc is None:
        raise not_found(store, "run", [int(run_id)], also)
    return _decoded_run(store, doc)


def run_latency(store: Store, run_id: int, figure: str = "p50") -> int:
    """One latency figure of a run's analysis ("p50", "min", ...); UserError when the run
    has none (no analysis, or nothing received)."""
    value = latency_figures_of(run_figures(store, run_id), [figure])[figure]
    if value is None:
        raise UserError(f"run {run_id} has no measured latency (no analysis, or nothing received)")
    return int(value)


def set_calibration(store: Store, experiment_id: int, calibration_experiment_id: int | None) -> None:
    """Read the experiment's runs against another experiment's calibration (None: its own)."""
    with store.transaction():
        store.con.execute(
            "UPDATE experiments SET calibration_experiment_id = ? WHERE experiment_id = ?",
            [calibration_experiment_id, experiment_id],
        )


def check_calibration(store: Store, experiment_id: int) -> None:
    """UserError unless the experiment exists and has valid calibration runs to be a floor."""
    experiment(store, experiment_id)
    (count,) = store.con.execute(
        "SELECT count(*) FROM runs WHERE experiment_id = ? AND calibration AND valid AND analysis_id IS NOT NULL",
        [int(experiment_id)],
    ).fetchone()
    if not count:
        raise UserError(
            f"experiment {experiment_id} has no valid calibration runs to be a floor "
            f"(`lowtail experiment list`; `lowtail calibrate` makes one)"
        )


def calibration_source(store: Store, experiment_id: int) -> int:
    """The experiment whose calibration runs are this one's floor: the one it names, else itself."""
    found = store.con.execute(
        "SELECT calibration_experiment_id FROM experiments WHERE experiment_id = ?", [experiment_id]
    ).fetchone()
    return found[0] if found and found[0] is not None else experiment_id


def calibration_floor(store: Store, experiment_id: int, source: int | None = None) -> Floor:
    """Per (rate, frame size, burst): the calibration run to read the experiment's results
    against (with every headline latency column), from `source`, else the experiment it
    names (`set_calibration`), else its own — never another experiment's by chance. Empty
    when that experiment has no valid calibration runs. Calibration is lowtail's own veth
    wire: runs on real wiring or imported captures have no floor here."""
    (kind,) = store.con.execute(
        "SELECT coalesce(any_value(testbed->>'$.kind'), 'namespaces') FROM runs WHERE experiment_id = ?",
        [experiment_id],
    ).fetchone()
    if kind != "namespaces":
        return {}
    source = calibration_source(store, experiment_id) if source is None else source
    cur = store.con.execute(
        f"""SELECT DISTINCT ON (r.rate_pps, r.frame_size, r.burst) r.rate_pps, r.frame_size, r.burst, r.run_id,
                  r.experiment_id, r.analysis_id, {latency_columns("a")}
           FROM runs r JOIN analyses a USING (analysis_id)
           WHERE r.calibration AND r.valid AND r.experiment_id = ?
           ORDER BY r.rate_pps, r.frame_size, r.burst, r.run_id DESC""",
        [source],
    )
    return {(r["rate_pps"], r["frame_size"], r["burst"]): cast("RunRow", r) for r in rows_as_dicts(cur)}


def list_experiments(store: Store, limit: int = 50) -> list[ExperimentListRow]:
    """The newest experiments with how many runs each has, and how many are valid."""
    return [
        ExperimentListRow(
            experiment_id=eid, name=name, created_at=created_at, status=status, runs=runs, valid_runs=valid_runs
        )
        for eid, name, created_at, status, runs, valid_runs in store.con.execute(
            """SELECT e.experiment_id, e.name, e.created_at, e.status, count(r.run_id) AS runs,
                  count(r.run_id) FILTER (WHERE r.valid) AS valid_runs
           FROM experiments e LEFT JOIN runs r USING (experiment_id)
           GROUP BY ALL ORDER BY e.experiment_id DESC LIMIT ?""",
            [limit],
        ).fetchall()
    ]
