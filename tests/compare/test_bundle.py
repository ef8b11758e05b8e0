"""`lowtail export` / `lowtail import`: runs carried to another database keep every figure,
their floor and their models; importing twice adds nothing; a damaged or newer bundle is
refused with the database untouched."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from compare_support import experiment, store_run, trace_and_explain

from lowtail.bundle.manifest import FORMAT_VERSION
from lowtail.models.knee import sweep_knees
from lowtail.store import open_store
from lowtail.store import runs as runstore


def lowtail(*args, db=None):
    cmd = [sys.executable, "-m", "lowtail", *map(str, args)] + (["--db", str(db)] if db else [])
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A database with two experiments: 1 calibrated (wire, fwd at two rates, two
    repetitions), 2 another DuT read against 1's calibration."""
    tmp = tmp_path_factory.mktemp("src")
    db = tmp / "src.duckdb"
    with open_store(db) as store:
        one = experiment(store, "one", {"percentile": 99.9, "budget": "50us"}, host="lab-a")
        for rep in range(2):
            for rate in (10_000, 20_000):
                store_run(store, tmp, one, "wire", "wire", rep, rate=rate, base_latency_ns=3_000, seed=rep + rate)
                store_run(store, tmp, one, "fwd", repetition=rep, rate=rate, seed=rep + rate + 1)
        sweep_knees(store, one)
        two = experiment(store, "two", host="lab-a")
        runstore.set_calibration(store, two, one)
        store_run(store, tmp, two, "kernel", "kernel-mirred", seed=5)
    return db, tmp


def _rows(db, eid=None):
    with open_store(db, read_only=True) as store:
        return runstore.select_runs(store, [eid] if eid else None)


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_round_trip_keeps_figures_floor_and_models(source, tmp_path):
    db, _ = source
    bundle = tmp_path / "b.lowtail"
    done = lowtail("export", "1", "dut=fwd", "-o", bundle, "--json", db=db)
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert manifest["format"] == "lowtail-bundle" and manifest["format_version"] == FORMAT_VERSION
    # The manifest is bundle/manifest.py's `Manifest`, printed and written in the order every
    # earlier lowtail wrote it (the selection after the origin).
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        written = json.loads(member.read())
    assert list(manifest) == list(written) == [
        "format", "format_version", "lowtail_version", "created_at", "origin", "selection", "bundle_id", "tables",
        "files", "series_missing", "traces_missing",
    ]  # fmt: skip
    assert written == manifest
    # The four fwd runs and the four wire runs of their floor travel.
    assert manifest["tables"]["runs"]["rows"] == 8 and manifest["tables"]["experiments"]["rows"] == 1
    assert manifest["tables"]["model_results"]["rows"] >= 1  # the knee
    assert sum(f.startswith("series/") for f in manifest["files"]) == 8
    target = tmp_path / "dst.duckdb"
    with open_store(target) as store:  # ids already taken there: the import must renumber
        store_run(store, tmp_path, experiment(store, "local"), "local", seed=1)
    imported = json.loads(lowtail("import", bundle, "--json", db=target).stdout)
    assert not imported["already"] and imported["experiments"] == [2] and len(imported["runs"]) == 8
    # The words say the model results it brought too (they did not).
    plain = lowtail("import", bundle, db=tmp_path / "plain.duckdb")
    assert plain.returncode == 0 and f"8 runs, 8 analyses, {len(imported['models'])} model result" in plain.stderr
    assert imported["origin"]["host"] and imported["origin"]["database"] == str(db.resolve())
    before = {(r["dut_name"], r["rate_pps"], r["repetition"]): r for r in _rows(db, 1)}
    after = _rows(target, 2)
    for r in after:
        old = before[(r["dut_name"], r["rate_pps"], r["repetition"])]
        for key in ("sent", "lost", "lat_p50_ns", "lat_p99_9_ns", "lat_max_ns", "valid", "calibration"):
            assert r[key] == old[key], key
        assert r["series_path"].startswith(str(tmp_path / "lowtail-data")) and r["capture_paths"] == []
        assert r["kernel"] == "6.1.0-rt" and r["hostname"] == "lab-a"
    with open_store(target, read_only=True) as store:
        assert runstore.calibration_floor(store, 2)  # the floor came along
        origin = runstore.experiment(store, 2)["origin"]
        assert origin["experiment_id"] == 1 and origin["bundle_id"] == manifest["bundle_id"]
    # The comparison there reads the same figures, floor and knee.
    here = json.loads(lowtail("compare", "1", "dut=fwd", "--json", db=db).stdout)
    there = json.loads(lowtail("compare", "2", "--json", db=target).stdout)
    assert [c["latency_ns"] for c in there["configurations"]] == [c["latency_ns"] for c in here["configurations"]]
    assert [c["floor"]["latency_ns"] for c in there["configurations"]] == [
        c["floor"]["latency_ns"] for c in here["configurations"]
    ]
    assert there["rates"][0]["knees"][0]["knee_pps"] == here["rates"][0]["knees"][0]["knee_pps"]


def _same_explanation(doc, run_id, trace_path):
    """An explanation with the run's id and its trace's path as they are in another database."""
    return json.loads(json.dumps(doc)) | {"run": run_id, "trace": doc["trace"] | {"path": trace_path}}


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_round_trip_carries_explanations_traces_and_summaries(tmp_path):
    """An imported run shows the explanation it had (stored, and made again from its carried
    trace), and comparisons pool it from its carried summary. Before: the bundle had no
    traces, explanations or summaries, and `lowtail explain` on the imported run found no
    trace ("no kernel trace: the run was recorded without one")."""
    src = tmp_path / "src.duckdb"
    with open_store(src) as store:
        e = experiment(store, "traced", {"percentile": 99.9, "budget": "30us"}, host="lab-a")
        runs = [
            store_run(store, tmp_path, e, "fwd", repetition=rep, seed=rep + 7, spike_probability=0.003, spike_ns=40_000)
            for rep in range(2)
        ]
        stored = {r: trace_and_explain(store, r, tmp_path) for r in runs}
    for doc in stored.values():  # what the trace says: the hog on the DuT's core holds the tail
        assert doc["causes"][0]["kind"] == "preemption" and doc["causes"][0]["evidence"]["what"].startswith("hog")
    here = {r: json.loads(lowtail("explain", r, "--json", db=src).stdout) for r in runs}
    bundle = tmp_path / "b.lowtail"
    manifest = json.loads(lowtail("export", "1", "-o", bundle, "--json", db=src).stdout)
    assert sorted(f for f in manifest["files"] if f.startswith("traces/")) == [f"traces/run-{r}.parquet" for r in runs]
    for table in ("run_traces", "run_explanations", "analysis_summaries"):
        assert manifest["tables"][table]["rows"] == 2, table
    assert manifest["tables"]["run_causes"]["rows"] >= 2
    target = tmp_path / "dst.duckdb"
    with open_store(target) as store:  # ids already taken there: the import must renumber
        store_run(store, tmp_path, experiment(store, "local"), "local", seed=1)
    imported = json.loads(lowtail("import", bundle, "--json", db=target).stdout)
    new = dict(zip(runs, imported["runs"]))
    assert all(old != n for old, n in new.items())
    from lowtail.store.explain import causes_of, explanation, run_trace

    with open_store(target, read_only=True) as store:
        for old, n in new.items():
            trace = run_trace(store, n)
            assert trace["path"].startswith(imported["data_dir"]) and Path(trace["path"]).is_file()
            assert explanation(store, n) == _same_explanation(stored[old], n, trace["path"])
            assert [c["kind"] for c in causes_of(store, [n])[n]] == [c["kind"] for c in stored[old]["causes"]]
    for old, n in new.items():  # explained again there, from the trace that came along
        there = json.loads(lowtail("explain", n, "--json", db=target).stdout)
        assert there == _same_explanation(here[old], n, there["trace"]["path"])
    # Comparisons pool the imported runs from their summaries: the same with their series gone.
    source_figures = json.loads(lowtail("compare", "1", "--json", db=src).stdout)["configurations"]
    for path in Path(imported["data_dir"]).glob("analysis-*.parquet"):
        path.unlink()
    there = lowtail("compare", "2", "--json", db=target)
    assert there.returncode == 0, there.stderr
    figures = json.loads(there.stdout)["configurations"]
    assert [c["latency_ns"] for c in figures] == [c["latency_ns"] for c in source_figures]
    # A trace file gone from the source: the export says so, and the bundle lists it.
    Path(stored[runs[0]]["trace"]["path"]).unlink()
    again = lowtail("export", "1", "-o", tmp_path / "c.lowtail", db=src)
    assert again.returncode == 0, again.stderr
    assert f"run {runs[0]} has lost its kernel trace: its explanation travels" in again.stderr, again.stderr
    assert json.loads(lowtail("export", "1", "-o", tmp_path / "d.lowtail", "--json", db=src).stdout)[
        "traces_missing"
    ] == [runs[0]]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_importing_the_same_bundle_twice_adds_nothing(source, tmp_path):
    db, _ = source
    bundle = tmp_path / "b.lowtail"
    assert lowtail("export", "2", "-o", bundle, db=db).returncode == 0
    target = tmp_path / "dst.duckdb"
    first = json.loads(lowtail("import", bundle, "--json", db=target).stdout)
    # Experiment 2 is read against 1's calibration: both experiments travel.
    assert len(first["experiments"]) == 2
    second = lowtail("import", bundle, db=target)
    assert second.returncode == 0 and "imported before" in second.stderr and "nothing added" in second.stderr
    assert len(_rows(target)) == len(first["runs"])
    # Exported again, the same runs make the same bundle: importing it adds nothing either.
    exported_again = tmp_path / "b2.lowtail"
    assert lowtail("export", "2", "-o", exported_again, db=db).returncode == 0
    third = json.loads(lowtail("import", exported_again, "--json", db=target).stdout)
    assert third["already"] and third["import_id"] == first["import_id"]
    # Two databases in one folder: each gets its own copy of the series.
    other = tmp_path / "other.duckdb"
    again = json.loads(lowtail("import", bundle, "--json", db=other).stdout)
    assert again["data_dir"] != first["data_dir"]


def _tamper(bundle, out, edit):
    with tarfile.open(bundle) as src, tarfile.open(out, "w") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read()
            data = edit(m.name, data)
            m.size = len(data)
            dst.addfile(m, io.BytesIO(data))


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_damaged_or_newer_bundle_is_refused_and_nothing_changes(source, tmp_path):
    db, _ = source
    bundle = tmp_path / "b.lowtail"
    assert lowtail("export", "2", "-o", bundle, db=db).returncode == 0
    target = tmp_path / "dst.duckdb"
    with open_store(target) as store:
        experiment(store, "mine")

    def flip_series(name, data):
        return data[:100] + bytes([data[100] ^ 0xFF]) + data[101:] if name.startswith("series/") else data

    def newer(name, data):
        if name != "manifest.json":
            return data
        return json.dumps(
            json.loads(data) | {"format_version": FORMAT_VERSION + 1, "lowtail_version": "9.0.0"}
        ).encode()

    cut = tmp_path / "cut.lowtail"
    cut.write_bytes(bundle.read_bytes()[: len(bundle.read_bytes()) // 2])
    cases = [(cut, "not a readable lowtail bundle")]
    for name, edit, message in (
        ("flipped", flip_series, "does not match its checksum"),
        ("newer", newer, f"bundle format {FORMAT_VERSION + 1}; this lowtail"),
    ):
        _tamper(bundle, tmp_path / f"{name}.lowtail", edit)
        cases.append((tmp_path / f"{name}.lowtail", message))
    _tamper(bundle, tmp_path / "future.lowtail", _with_a_column_from_the_future(bundle))
    cases.append((tmp_path / "future.lowtail", "written by a newer lowtail (9.1.0): its rows have columns"))
    (tmp_path / "junk.lowtail").write_text("not a bundle")
    cases.append((tmp_path / "junk.lowtail", "not a readable lowtail bundle"))
    for path, message in cases:
        done = lowtail("import", path, db=target)
        assert done.returncode == 2 and message in done.stderr, (path.name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    with open_store(target, read_only=True) as store:
        assert [e["experiment_id"] for e in runstore.list_experiments(store)] == [1]
    assert not (tmp_path / "lowtail-data").exists() or not any((tmp_path / "lowtail-data").iterdir())


def _with_a_column_from_the_future(bundle):
    """An edit that adds a column to the runs' rows, with checksums and id made to match:
    what a newer lowtail's bundle looks like."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lowtail.bundle.manifest import bundle_id

    with tarfile.open(bundle) as tar:
        rows = pq.read_table(io.BytesIO(tar.extractfile("rows/runs.parquet").read()))
    buf = io.BytesIO()
    pq.write_table(rows.append_column("future_column", pa.array(["x"] * rows.num_rows)), buf)
    runs = buf.getvalue()

    def edit(name, data):
        if name == "rows/runs.parquet":
            return runs
        if name == "manifest.json":
            manifest = json.loads(data)
            manifest["files"]["rows/runs.parquet"] = {"sha256": hashlib.sha256(runs).hexdigest(), "bytes": len(runs)}
            manifest["tables"]["runs"]["columns"].append("future_column")
            manifest |= {"bundle_id": bundle_id(manifest["files"]), "lowtail_version": "9.1.0"}
            return json.dumps(manifest).encode()
        return data

    return edit


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_round_trip_keeps_each_flows_figures(tmp_path):
    """An analysis of several flows carries its per-flow rows (format version 3): the
    imported analysis lists the same flows with the same packets and figures."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "analyze"))
    from analyze_support import synth

    pair = synth(tmp_path, packets=6_000, rate_pps=20_000, flows=4, flow_offsets_ns=[0, 0, 40_000, 0], fifo=False)
    src, dst, bundle = tmp_path / "src.duckdb", tmp_path / "dst.duckdb", tmp_path / "f.lowtail"
    done = lowtail("analyze", pair.pre, pair.post, "--trim", "0", "--json", db=src)
    assert done.returncode == 0, done.stderr
    assert lowtail("export", "analysis:1", "-o", bundle, db=src).returncode == 0
    done = lowtail("import", bundle, "--json", db=dst)
    assert done.returncode == 0, done.stderr

    def flows(db: Path) -> list[tuple]:
        with open_store(db, read_only=True) as store:
            key = store.con.execute("SELECT flow_key, overflowed FROM analysis_flow_keys").fetchall()
            rows = store.con.execute(
                "SELECT * EXCLUDE (analysis_id) FROM analysis_flows ORDER BY analysis_id, flow"
            ).fetchall()
            return [*key, *rows]

    before = flows(src)
    assert len(before) == 1 + 4 and flows(dst) == before


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_chain_runs_hops_travel_with_their_series_files(tmp_path):
    """A chain run carries its chain document, a row per hop (format version 4) and each hop's
    series file (version 5: series/hop-<run>-<hop>.parquet), under the run's new id, the paths
    set to where the files now are; a hop whose file was gone when exported travels without
    one (its path dropped, not left pointing into the other lab)."""
    from lowtail.analyze.document import ChainDocument, HopDocument
    from lowtail.analyze.hops import ONE_CLOCK
    from lowtail.store.chains import run_chain, save_run_chain

    src, dst, bundle = tmp_path / "src.duckdb", tmp_path / "dst.duckdb", tmp_path / "c.lowtail"
    with open_store(dst) as store:  # a database already holding a run: the chain's id moves
        store_run(store, tmp_path, experiment(store, "other"), "fwd", seed=9)
    with open_store(src) as store:
        run_id = store_run(store, tmp_path, experiment(store, "chain"), "fw+fwd", kind="chain", seed=3)
        (series,) = store.con.execute("SELECT series_path FROM runs WHERE run_id = ?", [run_id]).fetchone()
    first_hop = tmp_path / "hop1.parquet"  # a real matched series; hop 2's is gone
    first_hop.write_bytes(Path(series).read_bytes())
    latency = {"samples": 100, "p50": 2_300, "p99": 9_000, "p99_9": 12_000, "max": 15_000, "mean": 2_500.0}
    hops = [
        HopDocument(hop=i, name=name, kind=kind, captures=[a, b], sent=100, received=100 - i, lost=i,
                    latency_ns=latency, share=share, series_path=str(tmp_path / f"hop{i}.parquet"))
        for i, (name, kind, a, b, share) in enumerate(
            [("fw", "nftables", "pre", "link1", 0.25), ("fwd", "lowtail-fwd", "link1", "post", 0.75)], 1
        )
    ]  # fmt: skip
    chain = ChainDocument(hops=hops, clock=ONE_CLOCK, packets_compared=98, sum_mismatch_ns=0, warnings=[])
    with open_store(src) as store:
        save_run_chain(store, run_id, chain)
    assert lowtail("export", run_id, "-o", bundle, db=src).returncode == 0
    with tarfile.open(bundle) as tar:
        members = tar.getnames()
    assert f"series/hop-{run_id}-1.parquet" in members and f"series/hop-{run_id}-2.parquet" not in members
    done = lowtail("import", bundle, "--json", db=dst)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    (new_id,) = imported["runs"]
    assert new_id != run_id
    with open_store(dst, read_only=True) as store:
        carried = run_chain(store, new_id)
        rows = store.con.execute("SELECT hop, name, kind, lost, lat_p99_ns, share, series_path FROM run_hops "
                                 "WHERE run_id = ? ORDER BY hop", [new_id]).fetchall()  # fmt: skip
    assert carried is not None
    moved, gone = (h["series_path"] for h in carried["hops"])
    assert gone is None and moved is not None and Path(moved).read_bytes() == first_hop.read_bytes()
    assert Path(moved).parent == Path(imported["data_dir"]).resolve()
    assert carried == chain | {"hops": [hops[0] | {"series_path": moved}, hops[1] | {"series_path": None}]}
    assert rows == [(1, "fw", "nftables", 1, 9_000, 0.25, moved), (2, "fwd", "lowtail-fwd", 2, 9_000, 0.75, None)]
    # Imported twice: nothing added.
    assert json.loads(lowtail("import", bundle, "--json", db=dst).stdout)["runs"] == [new_id]
    with open_store(dst, read_only=True) as store:
        assert store.con.execute("SELECT count(*) FROM run_hops").fetchone() == (2,)


def test_a_bundle_of_one_analysis_is_said_in_words_that_fit_it(tmp_path):
    """An analysis without its series, carried alone: the export said "analyses 1 have no
    matched series", the import "experiment , 0 runs, 1 analysis"."""
    pre, post = tmp_path / "pre.pcap", tmp_path / "post.pcap"
    assert lowtail("synth", pre, post, "--packets", "3000").returncode == 0
    assert lowtail("analyze", pre, post, "--trim", "0", db=tmp_path / "a.duckdb").returncode == 0
    exported = lowtail("export", "analysis:1", "-o", tmp_path / "one.tar", db=tmp_path / "a.duckdb")
    assert exported.returncode == 0, exported.stderr
    assert "warning: analysis 1 has no matched series to carry" in exported.stderr
    imported = lowtail("import", tmp_path / "one.tar", db=tmp_path / "b.duckdb")
    assert imported.returncode == 0, imported.stderr
    assert ": no experiment, 0 runs, 1 analysis (import 1;" in imported.stderr
