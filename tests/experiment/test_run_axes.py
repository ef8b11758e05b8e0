"""Each configuration axis of a run is declared once, by the store (`store/records.py`),
beside its column: every declared axis is a column of the runs table (or a derived column
of the runs query), every field of `RunRecord` is a column, and the axis is known to what
reads runs — tables and `--by` (store/axes.py), filters and plain analyses (store/selection.py), import
specs (experiment/external.py) — without being named there."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from lowtail.experiment.external import Pair, parse_spec, run_record
from lowtail.store import axes, open_store, records, selection
from lowtail.store import runs as runstore
from lowtail.store.records import ALL_AXES, RunRecord


def _record(eid: int, **changes: object) -> RunRecord:
    base = RunRecord(
        label="fwd @ 20 kpps",
        experiment_id=eid,
        combination_key="fwd/20000",
        dut_name="fwd",
        dut_kind="lowtail-fwd",
        dut_config={"batch": 32},
        rate_pps=20_000,
        frame_size=128,
        burst=16,
        repetition=2,
        duration_ns=2 * 10**9,
        warmup_ns=0,
        started_at=datetime.now(),
        finished_at=datetime.now(),
        valid=True,
        containment={"mode": "container"},
        virtualization="tcg",
        traffic={"flows": 4},
        host_state={"id": "3aa8b2d798", "settings": {"vm.stat_interval": "1"}},
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
def stored(tmp_path: Path):
    db = tmp_path / "axes.duckdb"
    with open_store(db) as store:
        eid = runstore.create_experiment(store, "axes", {}, "h", {"kernel": "6.1.0-rt", "hostname": "lab1"}, "")
        runstore.save_run(store, _record(eid), None, {})
        runstore.save_run(store, _record(eid, combination_key="other", dut_name="kernel", rate_pps=50_000), None, {})
    return db


# Every axis a run has one value of; `flow` splits a run's packets by flow (compare --by flow,
# from its series) and `hop` a chain run by hop (compare --by hop), so a run has no one flow or
# hop to store or show (tests/analyze/test_flows.py, tests/compare/test_by_hop.py).
_COLUMN_AXES = [a for a in ALL_AXES if a not in (records.FLOW_AXIS, records.HOP_AXIS)]


def test_every_declared_axis_and_record_field_is_a_column_of_the_runs_query(stored):
    with open_store(stored, read_only=True) as store:
        table = {
            c
            for (c,) in store.con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'"
            ).fetchall()
        }
        row = runstore.runs(store, 1)[0]
    fields = {f.name for f in dataclasses.fields(RunRecord)} - {"label"}
    assert fields <= table, fields - table
    for axis in _COLUMN_AXES:
        if axis.sql is None:
            assert axis.column in table, axis.name
        assert axis.column in row, axis.name


def test_every_declared_axis_is_known_to_tables_filters_and_plain_analyses(stored):
    with open_store(stored, read_only=True) as store:
        rows = runstore.runs(store, 1)
        fwd = next(r for r in rows if r["dut_name"] == "fwd")
        for axis in _COLUMN_AXES:
            found = axes.find(axis.name, rows)
            assert found is not None, axis.name
            stored_text = found.show(found.read(fwd))
            assert stored_text not in ("", "–"), (axis.name, stored_text)
            kept = selection.select(store, ["1", f"{axis.name}={stored_text}"])
            assert fwd["run_id"] in [r["run_id"] for r in kept], axis.name
    plain = records.analysis_as_run({"analysis_id": 7, "sent": 1000, "duration_ns": 10**9, "label": None})
    for axis in _COLUMN_AXES:
        assert axis.column in plain, axis.name
    assert plain["experiment_id"] is None and plain["dut_name"] == "analysis 7"


def test_an_import_spec_fills_every_declared_column_axis_from_a_file_name(tmp_path: Path):
    imported = [a for a in ALL_AXES if a.imported is not None]
    pattern = "-".join(f"{{{a.name}}}" for a in imported) + "-{side}.pcap"
    spec = parse_spec({"import": {"pattern": pattern}}, "spec.toml")
    values = {"dut": "fw", "kind": "nft", "containment": "container", "rate": "50k", "frame_size": "256",
              "burst": "8", "repetition": "3"}  # fmt: skip
    assert set(values) == {a.name for a in imported}, "a new imported axis needs a value here"
    name = "-".join(values[a.name] for a in imported) + "-pre.pcap"
    match = spec.regex.fullmatch(name)
    assert match is not None
    pair = Pair({k: records.axis_named(k).parse(v) for k, v in match.groupdict().items() if k != "side"},
                tmp_path / "pre", tmp_path / "post")  # fmt: skip
    record = run_record(pair, {"sent": 10, "duration_ns": 10**9}, 1, "campaign")
    assert (record.dut_name, record.dut_kind, record.rate_pps, record.frame_size, record.burst, record.repetition) == (
        "fw", "nft", 50_000, 256, 8, 3)  # fmt: skip
    assert record.containment == {"mode": "container"} and record.dut_config == {}
