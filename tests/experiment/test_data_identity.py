"""Run data tied to their database: two databases in one directory never share, delete or
rewrite each other's captures and series, and a series that is not the one its analysis
was made from (an older lowtail mixed them) is refused by the models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_run import experiment, lowtail, needs_programs, needs_root  # noqa: E402  (tests/experiment is on the path)

pytestmark = [needs_root, needs_programs, pytest.mark.root, pytest.mark.slow]

KERNEL = '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'
# A model that a 1 s run at 5 kpps is enough for: thresholds low enough for its few packets.
EVT_SMALL = ["--thresholds", "90,95", "--min-exceedances", "10", "--fit-fraction", "50", "--json"]


def run(tmp_path: Path, name: str, db: str, rate: int) -> dict:
    toml = experiment(tmp_path, KERNEL, rates=(rate,), name=name)
    done = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / db), "--json")
    assert done.returncode in (0, 3), done.stderr
    (r,) = json.loads(done.stdout)
    return r


def identity(series_path: str) -> dict:
    return json.loads((Path(series_path).parents[1] / "lowtail-data.json").read_text())


def test_two_databases_in_one_directory_keep_their_own_series(tmp_path):
    a = run(tmp_path, "a", "a.duckdb", 5_000)
    a_rows = pq.ParquetFile(a["series_path"]).metadata.num_rows
    assert a_rows == a["received"]
    b = run(tmp_path, "b", "b.duckdb", 6_000)
    # Both are experiment 1 of their database, and neither touched the other's folder.
    assert a["experiment_id"] == b["experiment_id"] == 1
    assert Path(a["series_path"]).parents[1] != Path(b["series_path"]).parents[1]
    assert pq.ParquetFile(a["series_path"]).metadata.num_rows == a_rows
    assert identity(a["series_path"])["database_id"] != identity(b["series_path"])["database_id"]
    model = lowtail(tmp_path, "model", "evt", "run:1", "--db", str(tmp_path / "a.duckdb"), *EVT_SMALL)
    assert model.returncode in (0, 3), model.stderr
    assert json.loads(model.stdout)["samples"] == a["received"]

    # What an older lowtail did: b's experiment rewrote a's series in the shared folder.
    # The model refuses the series rather than fit another experiment's packets.
    shutil.copyfile(b["series_path"], a["series_path"])
    refused = lowtail(tmp_path, "model", "evt", "run:1", "--db", str(tmp_path / "a.duckdb"), *EVT_SMALL)
    assert refused.returncode == 2, refused.stderr
    assert "does not match its stored analysis" in refused.stderr and "Traceback" not in refused.stderr

    # A copy of a database has the same identity; its experiments' folders are still told
    # apart, and a folder of another experiment is never deleted or written into.
    shutil.copyfile(tmp_path / "a.duckdb", tmp_path / "c.duckdb")
    c = run(tmp_path, "c", "c.duckdb", 7_000)
    c_series = Path(c["series_path"])
    toml = experiment(tmp_path, KERNEL, rates=(8_000,), name="a2")
    clash = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / "a.duckdb"))
    assert clash.returncode == 2, clash.stderr
    assert "belongs to experiment 2 of another database" in clash.stderr
    assert pq.ParquetFile(c_series).metadata.num_rows == c["received"]
