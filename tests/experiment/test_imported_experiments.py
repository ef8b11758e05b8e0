"""Another lab's experiment stays that lab's: an unfinished experiment that came in a bundle
is never resumed by the local `lowtail run` of the same file, nor written into (issue 21,
item 1)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import duckdb
import pytest
from test_run import experiment, lowtail, needs_programs, needs_root, run_dirs, start_run, wait_for  # noqa: E402

pytestmark = [needs_root, needs_programs, pytest.mark.root]


def rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_an_imported_unfinished_experiment_is_not_resumed_by_a_local_run(tmp_path):
    """Before: lab B's run of lab A's file said "resumed experiment 1: 1 runs were already
    stored, 1 measured now", joining lab A's 3 kpps run and lab B's 5 kpps run into one
    finished experiment, lab B's series written into the import's folder."""
    lab_a, lab_b = tmp_path / "a", tmp_path / "b"
    lab_a.mkdir()
    lab_b.mkdir()
    toml = experiment(lab_a, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n', rates=(3000, 5000))
    proc = start_run(lab_a, toml)  # into lab_a/t.duckdb
    wait_for(lambda: len(run_dirs(lab_a)) >= 2, watching=proc)  # the first run is stored, the second has begun
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert lowtail(lab_a, "export", "1", "-o", "a.lowtail", "--db", "t.duckdb").returncode == 0
    imported = lowtail(lab_b, "import", str(lab_a / "a.lowtail"), "--db", "t.duckdb", "--json")
    assert imported.returncode == 0, imported.stderr
    folder = Path(json.loads(imported.stdout)["data_dir"])
    before = sorted(p.name for p in folder.iterdir())

    done = lowtail(lab_b, "run", str(toml), "--db", "t.duckdb", "--json")
    assert done.returncode in (0, 3), done.stderr
    assert "resumed" not in done.stderr
    runs = json.loads(done.stdout)
    assert {r["experiment_id"] for r in runs} == {2} and [r["rate_pps"] for r in runs] == [3000, 5000]
    db = lab_b / "t.duckdb"
    assert rows(db, "SELECT experiment_id, count(*) FROM runs GROUP BY ALL ORDER BY 1") == [(1, 1), (2, 2)]
    assert rows(db, "SELECT status FROM experiments WHERE experiment_id = 1") == [("interrupted",)]
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written into the import's folder
