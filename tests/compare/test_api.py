"""The Python API for notebooks: `lowtail.open`, runs and analyses as DataFrames with the
configuration axes as columns, latencies as Arrow or NumPy, comparisons as the `--json`
document plus DataFrames; the example in docs/python-api.md runs and type-checks; `import
lowtail` stays cheap."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_support import analysed, experiment, store_run

import lowtail
from lowtail.store import analyses as analysisstore
from lowtail.store import open_store

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """Experiment 3 (1 and 2 are empty): fwd bare and container, two repetitions each, and
    kernel; one plain analysis."""
    tmp = tmp_path_factory.mktemp("api")
    path = tmp / "lowtail.duckdb"
    with open_store(path) as store:
        experiment(store, "one")
        experiment(store, "two")
        eid = experiment(store, "three", {"percentile": 99.99, "budget": "350us"})
        for rep in range(2):
            for containment in ("bare", "container"):
                store_run(
                    store, tmp, eid, "fwd", repetition=rep, containment=containment, options={"batch": 4}, seed=rep
                )
            store_run(store, tmp, eid, "kernel", "kernel-mirred", repetition=rep, seed=7 + rep)
        doc, opts = analysed(tmp, "plain", seed=3)
        analysisstore.save_analysis(store, doc, opts, label="by hand")
    return path


def test_runs_and_analyses_are_dataframes_with_the_axes_as_columns(db):
    handle = lowtail.open(db)
    runs = handle.runs()
    assert len(runs) == 6 and list(runs["run_id"]) == [1, 2, 3, 4, 5, 6]
    for column in ("dut", "kind", "batch", "containment", "rate", "frame_size", "kernel", "host", "repetition"):
        assert column in runs.columns, column
    fwd = handle.runs("3", "dut=fwd", "containment=container")
    assert set(fwd["containment"]) == {"container"} and set(fwd["batch"]) == {4} and len(fwd) == 2
    assert (fwd["p99_99_ns"] <= fwd["max_ns"]).all() and (fwd["loss_ratio"] == 0).all()
    analyses = handle.analyses()
    assert len(analyses) == 7
    plain = analyses[analyses["run_id"].isna()]
    assert list(plain["label"]) == ["by hand"] and plain["dut"].isna().all()


def test_runs_carry_their_verdict_and_whether_they_are_degraded(db, tmp_path):
    """runs() had no verdict or degraded column, and of a database without runs it had no
    columns at all (a notebook's `runs["dut"]` raised KeyError)."""
    from lowtail.verdict.judge import parse_verdict

    runs = lowtail.open(db).runs()
    for column in ("verdict", "verdict_reason", "degraded", "degraded_reasons"):
        assert column in runs.columns, column
    with open_store(db, read_only=True) as store:
        from lowtail.store import runs as runstore

        rows = runstore.runs(store, 3)
    budget = parse_verdict({"percentile": 99.99, "budget": "350us"})
    assert list(runs["verdict"]) == [budget.judge(r).label for r in rows]
    assert list(runs["verdict_reason"]) == [budget.judge(r).reason for r in rows]
    assert not runs["degraded"].any()  # none stored degraded here
    empty = tmp_path / "empty.duckdb"
    with open_store(empty):
        pass
    nothing = lowtail.open(empty)
    assert {"run_id", "dut", "rate", "p99_999_ns", "verdict", "degraded"} <= set(nothing.runs().columns)
    assert len(nothing.runs()) == 0 and {"analysis_id", "p99_999_ns"} <= set(nothing.analyses().columns)


def test_latencies_as_arrow_and_numpy(db):
    handle = lowtail.open(db)
    table = handle.latencies(1)
    assert table.column_names == ["id", "pre_ts_ns", "post_ts_ns", "latency_ns", "flow"]
    values = handle.latencies(1, format="numpy")
    assert values.dtype == np.int64 and np.array_equal(values, table.column("latency_ns").to_numpy())
    run = handle.runs("run:1").iloc[0]
    assert len(values) == run["samples"] and values.max() == run["max_ns"]
    assert np.array_equal(values, pq.read_table(run["series_path"]).column("latency_ns").to_numpy())


def test_compare_returns_the_cli_document_and_dataframes(db):
    handle = lowtail.open(db)
    c = handle.compare("3", by="dut,containment")
    cli = subprocess.run(
        [sys.executable, "-m", "lowtail", "compare", "3", "--by", "dut,containment", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
    )
    doc = json.loads(cli.stdout)
    assert c.document["comparison_id"] + 1 == doc["comparison_id"]
    strip = lambda d: {k: v for k, v in d.items() if k != "comparison_id"}  # noqa: E731
    assert strip(json.loads(json.dumps(c.document, default=str))) == strip(doc)
    frame = c.configurations
    assert list(frame["label"]) == ["fwd · bare", "fwd · container", "kernel · bare"]
    assert list(frame["p99_99_ns"]) == [x["latency_ns"]["p99_99"] for x in doc["configurations"]]
    assert {"p99_99_lower_ns", "p99_99_upper_ns", "p99_99_min_ns", "p99_99_max_ns", "verdict"} <= set(frame.columns)
    assert len(c.differences) == len(doc["differences"]) + len(doc["not_resolvable"])
    assert set(c.curves["source"]) == {"pooled", "repetition"} and len(c.cdf) == 3 * 1001
    stored = handle.comparison(c.document["comparison_id"])
    assert stored.document["configurations"] == json.loads(json.dumps(c.document["configurations"], default=str))
    assert len(stored.curves) == len(c.curves)
    unstored = handle.compare("3", store=False)
    assert unstored.document["comparison_id"] is None


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_documented_example_runs_and_type_checks(db, tmp_path):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    example = tmp_path / "example.py"
    example.write_text(code)
    ran = subprocess.run([sys.executable, str(example)], cwd=db.parent, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    env = {**os.environ, "MYPYPATH": str(ROOT / "python")}
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            "--disallow-untyped-defs",
            "--disallow-incomplete-defs",
            "--cache-dir",
            str(tmp_path / "mypy"),
            str(ROOT / "python/lowtail/api.py"),
            str(example),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_import_lowtail_loads_nothing_heavy():
    probe = "import sys, lowtail; print(sorted(m for m in ('duckdb', 'pandas', 'pyarrow', 'numpy', 'scipy') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_missing_database_is_one_clear_error(tmp_path):
    with pytest.raises(lowtail.core.errors.UserError, match="no such database"):
        lowtail.open(tmp_path / "nope.duckdb")


def test_open_without_a_path_takes_the_database_every_command_takes(db, tmp_path, monkeypatch):
    """`lowtail.open()` is `--db`'s default: $LOWTAIL_DB, else ./lowtail.duckdb."""
    monkeypatch.setenv("LOWTAIL_DB", str(db))
    monkeypatch.chdir(tmp_path)
    assert lowtail.open().path == db and len(lowtail.open().runs()) == 6
    monkeypatch.delenv("LOWTAIL_DB")
    with pytest.raises(lowtail.core.errors.UserError, match="lowtail.duckdb: no such database"):
        lowtail.open()


def test_flows_are_a_dataframe_that_adds_up_to_each_analysis(tmp_path):
    """`lowtail.open(db).flows()`: each analysis's flows from Python, with the label its
    analysis gives each (they were reachable only by SQL)."""
    import json
    import subprocess
    import sys

    import lowtail

    argv = [sys.executable, "-m", "lowtail"]
    made = subprocess.run([*argv, "synth", "p.pcap", "q.pcap", "--packets", "20000", "--set", "flows=4"], cwd=tmp_path)
    assert made.returncode == 0
    done = subprocess.run(
        [*argv, "analyze", "p.pcap", "q.pcap", "--trim", "0", "--db", "f.duckdb", "--json"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    analysed = json.loads(done.stdout)
    flows = lowtail.open(tmp_path / "f.duckdb").flows()
    assert list(flows["flow"]) == [0, 1, 2, 3] and set(flows["flow_key"]) == {"5tuple"}
    assert set(flows["analysis_id"]) == {analysed["analysis_id"]} and flows["run_id"].isna().all()
    assert flows["sent"].sum() == analysed["sent"] and flows["samples"].sum() == analysed["latency_ns"]["samples"]
    by_flow = {f["flow"]: f for f in analysed["flows"]["flows"]}
    for row in flows.itertuples():
        assert row.key == by_flow[row.flow]["key"] and row.p99_9_ns == by_flow[row.flow]["latency_ns"]["p99_9"]
    assert flows["max_ns"].max() == analysed["latency_ns"]["max"]
