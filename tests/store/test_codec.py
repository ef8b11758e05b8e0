"""The store's typed codec (store/codec.py): every JSON column lowtail writes reads back, through
the real DuckDB store, as the document it wrote; a stored document that is not of its type ends a
command with one line (exit 1), never a traceback; documents of older shapes read as today's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
sys.path.insert(0, str(Path(__file__).parents[1] / "analyze"))

from analyze_support import assert_clean_failure, run_cli  # noqa: E402
from compare_support import analysed, experiment, store_run, trace_and_explain  # noqa: E402

from lowtail.analyze.document import NOT_FIGURES  # noqa: E402
from lowtail.compare.comparison import CompareOptions, compare_and_store  # noqa: E402
from lowtail.core.errors import UserError  # noqa: E402
from lowtail.store import codec, open_store  # noqa: E402
from lowtail.store import comparisons as comparestore  # noqa: E402
from lowtail.store import explain as explainstore  # noqa: E402
from lowtail.store import models as modelstore  # noqa: E402
from lowtail.store import runs as runstore  # noqa: E402
from lowtail.store import tune as tunestore  # noqa: E402
from lowtail.store.analyses import analysis, save_analysis  # noqa: E402
from lowtail.store.campaigns import open_campaign  # noqa: E402
from lowtail.store.errors import DamagedDatabase  # noqa: E402
from lowtail.tune.document import TuneDocument  # noqa: E402

# A model result and a tune session's boot parameters as their documents are typed: a knee
# of a sweep with no rate, a session with no boot parameter left to set.
KNEE_OF_NO_SWEEP = {
    "knee_pps": None,
    "last_ok_pps": None,
    "rates": [],
    "criteria": {"loss_limit": 0.01, "growth_limit": 3.0},
}
BOOT_WITH_NOTHING_LEFT = {
    "plan": {"housekeeping": [0], "isolated": [1], "source": "test", "shared": ""},
    "params": [],
    "grub": "",
    "grub_steps": [],
    "preempt_rt": False,
    "notes": [],
}


def _plain(value: object) -> object:
    """A document as JSON gives it back (tuples as lists, numbers as JSON has them)."""
    return json.loads(json.dumps(value, default=str))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A database holding one of every document kind, written by lowtail's own writers."""
    tmp = tmp_path_factory.mktemp("codec")
    db = tmp / "c.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "e", verdict={"budget": "1ms"})
        runs = [
            store_run(store, tmp, eid, "fwd", repetition=k, seed=k + 7, spike_probability=0.003, spike_ns=40_000)
            for k in (0, 1)
        ]
        explained = trace_and_explain(store, runs[0], tmp)
        compared = compare_and_store(store, [str(eid)], CompareOptions())
        doc, options = analysed(tmp, "plain")
        plain_id = save_analysis(store, doc, options, label="plain")
        model_id = modelstore.save_model(store, modelstore.KNEE, {"experiment": eid}, KNEE_OF_NO_SWEEP)
        tune = TuneDocument(
            tune_id=None,
            spec="x.toml",
            before=eid,
            after=None,
            comparison_id=None,
            percentile="p99_9",
            changes=[],
            kept=[],
            undone=[],
            boot=BOOT_WITH_NOTHING_LEFT,
            dry_run=True,
            status="planned",
            after_reboot=[],
            unseen=[],
            owner=None,
            trial_undo_file=None,
            resolution=None,
        )
        tune_id = tunestore.create_session(store, tune)
        campaign_id = open_campaign(store, "k", "src", options)
    return {
        "db": db,
        "eid": eid,
        "runs": runs,
        "explained": explained,
        "compared": compared,
        "plain": (plain_id, doc, options),
        "model_id": model_id,
        "tune": (tune_id, tune),
        "campaign_id": campaign_id,
    }


def test_every_json_column_of_the_schema_is_declared_in_the_codec(stored):
    """A JSON column added to the schema without its document type in the codec fails here."""
    with duckdb.connect(str(stored["db"]), read_only=True) as con:
        json_columns = {
            f"{t}.{c}"
            for t, c in con.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE data_type = 'JSON'"
            ).fetchall()
        }
    declared = {c.where for c in codec.COLUMNS}
    assert json_columns <= declared, sorted(json_columns - declared)


def test_an_analysis_reads_back_as_it_was_written(stored):
    plain_id, doc, options = stored["plain"]
    with open_store(stored["db"], read_only=True) as s:
        back = analysis(s, plain_id)
    assert back["figures"] == _plain({k: v for k, v in doc.items() if k not in NOT_FIGURES})
    assert back["options"] == _plain(options)
    assert back["warnings"] == doc["warnings"]
    for side in ("pre", "post"):
        assert back["inputs"][side] == {k: v for k, v in doc[side].items() if k != "per_second"}


def test_runs_experiments_traces_and_explanations_read_back_as_they_were_written(stored):
    with open_store(stored["db"], read_only=True) as s:
        exp = runstore.experiment(s, stored["eid"])
        rows = runstore.select_runs(s, run_ids=stored["runs"])
        trace = explainstore.run_trace(s, stored["runs"][0])
        explanation = explainstore.explanation(s, stored["runs"][0])
    assert exp["spec"] == {"verdict": {"budget": "1ms"}} and exp["host"]["hostname"] == "lab1"
    assert exp["origin"] is None
    for r in rows:
        assert r["containment"] == {"mode": "bare"} and r["generator"] == {"kept_up": True}
        assert r["capture"] == {"interfaces": []} and r["traffic"] == {"flows": 1}
        assert r["degraded_reasons"] == [] and r["invalid_reasons"] == [] and r["testbed"] is None
        assert r["figures"] is not None and r["figures"]["sent"] == r["sent"]
    assert trace is not None and trace["method"] == "tracefs"
    assert trace["roles"]["dut"] == {"host": "lab-a", "cpus": [2], "pids": [100], "comms": ["lowtail-fwd"]}
    assert explanation == _plain(stored["explained"])


def test_comparisons_models_tune_sessions_and_campaigns_read_back(stored):
    with open_store(stored["db"], read_only=True) as s:
        comparison = comparestore.comparison(s, stored["compared"]["comparison_id"])
        model = modelstore.model_result(s, stored["model_id"], modelstore.KNEE)
        tune_id, tune = stored["tune"]
        session = tunestore.session(s, tune_id)
        (options,) = s.con.execute(
            "SELECT options FROM campaigns WHERE campaign_id = ?", [stored["campaign_id"]]
        ).fetchone()
    assert comparison["document"] == _plain(stored["compared"])
    assert comparison["selection"] == [str(stored["eid"])]
    assert model["result"] == KNEE_OF_NO_SWEEP and model["inputs"] == {"experiment": stored["eid"]}
    assert session == tune | {"tune_id": tune_id}
    assert codec.CAMPAIGN_OPTIONS.decode(None, options) == _plain(stored["plain"][2])


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0), reason="the probe runs on CPU 1"
)
def test_a_noise_run_reads_back_as_it_was_printed(tmp_path):
    db = tmp_path / "n.duckdb"
    done = run_cli("noise", "--cpus", "1", "--duration", "300ms", "--housekeeping", "0", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    from lowtail.store.host import noise_run

    with open_store(db, read_only=True) as s:
        back = noise_run(s, "latest")
    assert back["host"] == printed["host"] and back["cpus"] == printed["cpus"]
    assert back["sampler"] == (printed["sampler"] or None) and back["energy"] == printed["energy"]
    assert back["cores"][0]["attribution"] == printed["cores"][0].get("attribution")


def test_a_document_that_is_not_of_its_type_is_never_written(tmp_path):
    """A writer's mistake is lowtail's own: raised before the row exists."""
    with open_store(tmp_path / "w.duckdb") as s:
        eid = experiment(s, "w")
        with pytest.raises(TypeError, match="runs.testbed"):
            runstore.save_run(s, _bare_run(eid) | {"testbed": {"kind": 5}}, None, {})
        assert s.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_model_result_is_stored_as_before_and_read_back_as_its_kind(stored, tmp_path):
    """A model result was an open map: a page read `result["validation"]` of whatever JSON was
    there. It is now its kind's document, validated, and stored as every earlier lowtail stored
    it (no version key), so older databases and bundles read alike."""
    with open_store(stored["db"], read_only=True) as s:
        (text,) = s.con.execute("SELECT result FROM model_results WHERE model_id = ?", [stored["model_id"]]).fetchone()
        assert json.loads(text) == KNEE_OF_NO_SWEEP
        with pytest.raises(UserError, match="is a knee model, not evt"):
            modelstore.model_result(s, stored["model_id"], modelstore.EVT)
        assert [m["result"] for m in modelstore.list_models(s, "knee")] == [KNEE_OF_NO_SWEEP]
    db = tmp_path / "m.duckdb"
    with open_store(db) as s:
        with pytest.raises(TypeError, match="model_results.result"):
            modelstore.save_model(s, modelstore.KNEE, {}, {"knees": [], "partial": False})
        model_id = modelstore.save_model(s, modelstore.KNEE, {}, KNEE_OF_NO_SWEEP)
        older = {k: v for k, v in KNEE_OF_NO_SWEEP.items() if k != "criteria"}  # as if added since
        s.con.execute("UPDATE model_results SET result = ? WHERE model_id = ?", [json.dumps(older), model_id])
        assert modelstore.model_result(s, model_id, modelstore.KNEE)["result"] == older  # read as stored, not lost
        bad = {**KNEE_OF_NO_SWEEP, "knee_pps": "fast"}
        s.con.execute("UPDATE model_results SET result = ? WHERE model_id = ?", [json.dumps(bad), model_id])
        with pytest.raises(DamagedDatabase, match=f"model_results.result of model result {model_id} is damaged"):
            modelstore.model_result(s, model_id, modelstore.KNEE)


def test_every_figure_lowtail_gen_may_leave_empty_is_stored_as_empty(tmp_path):
    """lowtail-gen writes null for what it could not observe (no burst on time at a rate it cannot
    reach, no send error, no frame sent): such a run is stored, not ended by the codec."""
    may_be_null = [
        "netns", "match_share", "cpu", "first_send_error", "last_id", "last_on_time_ns",
        "pacing_error_ns", "inter_departure_ns", "send_call_ns", "iface_counters", "cpu_wait",
    ]  # fmt: skip
    generator = {"program": "lowtail-gen", "planned": 2_000_000, "sent": 0} | dict.fromkeys(may_be_null)
    with open_store(tmp_path / "g.duckdb") as s:
        eid = experiment(s, "g")
        runstore.save_run(s, _bare_run(eid) | {"generator": generator}, None, {})
        [stored_run] = runstore.runs(s, eid)
        assert stored_run["generator"]["last_on_time_ns"] is None


def _bare_run(eid: int) -> dict:
    from datetime import datetime

    return {
        "experiment_id": eid,
        "combination_key": "k",
        "dut_name": "fwd",
        "dut_kind": "lowtail-fwd",
        "rate_pps": 1000,
        "frame_size": 64,
        "burst": 1,
        "repetition": 0,
        "duration_ns": 10**9,
        "warmup_ns": 0,
        "started_at": datetime.now(),
        "finished_at": datetime.now(),
        "valid": True,
    }


@pytest.mark.parametrize(
    ("column", "damage"),
    [
        ("testbed", '{"kind": 5}'),  # JSON, not of its type
        ("generator", '{"sent": "many"}'),
        ("traffic", "[1, 2]"),
    ],
)
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_damaged_stored_document_is_one_line_and_exit_1(tmp_path, column, damage):
    """Before the codec a damaged run column came back as whatever JSON it held and failed
    somewhere in a page or a table with a traceback; now the store says which and where."""
    db = tmp_path / "d.duckdb"
    with open_store(db) as s:
        eid = experiment(s, "d")
        run_id = runstore.save_run(s, _bare_run(eid), None, {})
    with duckdb.connect(str(db)) as con:
        con.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", [damage, run_id])
    for command in (["experiment", "report", str(eid), "-o", tmp_path / "r.html"], ["compare", str(eid)]):
        done = run_cli(*command, "--db", db, process=True)
        line = assert_clean_failure(done, 1, f"runs.{column}", f"run {run_id}", "damaged")
        assert str(db) in line
    with open_store(db, read_only=True) as s, pytest.raises(DamagedDatabase):
        runstore.runs(s, eid)


def test_a_document_of_a_newer_lowtail_is_not_read_as_this_ones(tmp_path):
    db = tmp_path / "n.duckdb"
    with open_store(db) as s:
        eid = experiment(s, "n")
        run_id = runstore.save_run(s, _bare_run(eid), None, {})
        s.con.execute(
            "UPDATE runs SET traffic = ? WHERE run_id = ?", [json.dumps({"flows": 1, codec.VERSION_KEY: 99}), run_id]
        )
        with pytest.raises(DamagedDatabase, match="version 99"):
            runstore.runs(s, eid)


def test_a_trace_stored_before_roles_had_hosts_reads_as_todays(tmp_path):
    """The shape an earlier lowtail stored: no version, roles without their host, what was
    not traced as bare role names. Read: every role has a host ("" — its trace file's one
    host is then its own), the bare names left out (they say no host or reason)."""
    db = tmp_path / "t.duckdb"
    older = {
        "method": "none",
        "reason": "tracing is off",
        "roles": {"dut": {"cpus": [1], "pids": [], "comms": []}},
        "untraced": ["dut", {"role": "generator", "host": "", "reason": "off"}],
    }
    with open_store(db) as s:
        eid = experiment(s, "t")
        run_id = runstore.save_run(s, _bare_run(eid), None, {})
        s.con.execute(
            "INSERT INTO run_traces (run_id, method, document) VALUES (?, 'none', ?)", [run_id, json.dumps(older)]
        )
        trace = explainstore.run_trace(s, run_id)
    assert trace == {
        "method": "none",
        "reason": "tracing is off",
        "roles": {"dut": {"host": "", "cpus": [1], "pids": [], "comms": []}},
        "untraced": [{"role": "generator", "host": "", "reason": "off"}],
    }


def test_an_analysis_stored_before_a_figure_existed_reads_it_as_zero_or_none(stored, tmp_path):
    plain_id, doc, options = stored["plain"]
    db = tmp_path / "f.duckdb"
    with open_store(db) as s:
        aid = save_analysis(s, doc, options)
        figures = json.loads(s.con.execute("SELECT figures FROM analyses WHERE analysis_id = ?", [aid]).fetchone()[0])
        older = {k: v for k, v in figures.items() if k not in ("pre_duplicates", "horizon_ns", "export_rows")}
        older.pop(codec.VERSION_KEY)
        s.con.execute("UPDATE analyses SET figures = ? WHERE analysis_id = ?", [json.dumps(older), aid])
        back = analysis(s, aid)["figures"]
    assert (back["pre_duplicates"], back["horizon_ns"], back["export_rows"]) == (0, 0, 0)
    assert back["sent"] == doc["sent"] and back["latency_ns"] == doc["latency_ns"]


def test_run_json_prints_every_key_of_a_stored_run(stored):
    """`lowtail run --json` is derived from `RunRow`: a column added there is printed, under
    its own name (the DuT's name and kind as the file gives them), with no list to keep."""
    from lowtail.cli.run import run_json
    from lowtail.experiment.document import RunRow
    from lowtail.verdict.judge import Verdict

    with open_store(stored["db"], read_only=True) as s:
        (row,) = runstore.select_runs(s, run_ids=stored["runs"][:1])
    printed = run_json(row, {}, Verdict())
    renamed = {"dut_name": "dut", "dut_kind": "kind"}
    expected = {renamed.get(k, k) for k in RunRow.__annotations__ if k != "figures" and not k.startswith("lat_")}
    assert expected <= set(printed)
    assert printed["dut"] == "fwd" and printed["latency_ns"] == row["figures"]["latency_ns"]
    assert printed["traffic"] == {"flows": 1} and printed["host_state"] is None


def test_the_latency_columns_are_declared_once_as_the_table_has_them(stored):
    """`LatencyColumns` is the one declaration of the `lat_<figure>_ns` columns that a stored
    analysis and a stored run both carry: one per figure of `LATENCY_FIGURES`, each a column
    of `analyses`, and both documents have exactly those."""
    from lowtail.analyze.document import LatencyColumns, StoredAnalysis
    from lowtail.experiment.document import RunRow
    from lowtail.store.db import LATENCY_FIGURES

    declared = set(LatencyColumns.__annotations__)
    assert declared == {f"lat_{f}_ns" for f in LATENCY_FIGURES}
    with duckdb.connect(str(stored["db"]), read_only=True) as con:
        columns = {
            c
            for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'analyses'"
            ).fetchall()
        }
    assert declared <= columns, sorted(declared - columns)
    for document in (StoredAnalysis, RunRow):
        assert {k for k in document.__annotations__ if k.startswith("lat_")} == declared


def test_an_explanation_stored_before_untraced_roles_had_hosts_reads_back(stored, tmp_path):
    """An explanation's trace summary is typed (`ExplainTrace`): one stored before untraced
    roles had a host and a reason, naming each by its role alone, and before the trace said its
    hosts, still reads back as it was stored — never as a damaged database."""
    with open_store(stored["db"], read_only=True) as s:
        today = explainstore.explanation(s, stored["runs"][0])
    assert today is not None
    older = {**today, "trace": {"method": "none", "reason": "tracing is off", "untraced": ["dut", "generator"]}}
    db = tmp_path / "x.duckdb"
    with open_store(db) as s:
        eid = experiment(s, "x")
        run_id = runstore.save_run(s, _bare_run(eid), None, {})
        s.con.execute(
            "INSERT INTO run_explanations (run_id, threshold_ns, tail_packets, unexplained_share, headline, document) "
            "VALUES (?, 1, 1, 0.0, NULL, ?)",
            [run_id, json.dumps({**older, "run": run_id}, default=str)],
        )
        back = explainstore.explanation(s, run_id)
    assert back is not None and back["trace"] == older["trace"]
