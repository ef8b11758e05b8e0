"""A stored run whose trace (or series) is damaged or replaced: `lowtail explain` ends with one
line naming the file and what is wrong — exit 1 for a damaged file of the store, 2 for a path
that is not a regular file — never an internal error (exit 70), never a hang on a FIFO.

Before: a truncated, empty or random trace.parquet, a directory in its place, a missing pid
column or missing schema metadata ended in exit 70 (ArrowInvalid, KeyError); a FIFO or a link
to /dev/zero in exit 2 with only the path and no reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
from compare_support import experiment, store_run, trace_and_explain  # noqa: E402

from lowtail.store import open_store  # noqa: E402
from lowtail.store.explain import run_trace  # noqa: E402


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _random(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _without_pid(path: Path) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["pid"]), path)


def _without_metadata(path: Path) -> None:
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata(None), path)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


CASES: dict[str, tuple[Callable[[Path], None], int, str]] = {
    "truncated": (_truncated, 1, "damaged"),
    "empty": (_empty, 1, "damaged"),
    "random": (_random, 1, "damaged"),
    "a directory": (_directory, 2, "is a directory"),
    "no pid column": (_without_pid, 1, "other columns than a trace's"),
    "no schema metadata": (_without_metadata, 1, "no recording facts"),
    "a FIFO": (_fifo, 2, "is a FIFO"),
    "a link to /dev/zero": (_dev_zero, 2, "is a character device"),
}


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, Path]:
    """A stored run with a trace and its explanation: (its folder, its id, its trace file)."""
    tmp = tmp_path_factory.mktemp("damaged")
    db = tmp / "runs.duckdb"
    with open_store(db) as store:
        e = experiment(store, "traced", {"percentile": 99.9, "budget": "30us"})
        run = store_run(store, tmp, e, "fwd", seed=5, spike_probability=0.003, spike_ns=40_000)
        trace_and_explain(store, run, tmp)
        trace = run_trace(store, run)
    assert trace is not None
    return tmp, run, Path(trace["path"])


def _copy(explained: tuple[Path, int, Path], tmp_path: Path) -> tuple[Path, int, Path, Path]:
    """The run's database and files copied, so each case damages its own: (db, run, trace, series)."""
    folder, run, trace = explained
    for f in folder.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    db = tmp_path / "runs.duckdb"
    with open_store(db) as store:
        store.con.execute("UPDATE run_traces SET path = replace(path, ?, ?)", [str(folder), str(tmp_path)])
        store.con.execute(
            "UPDATE run_traces SET document = replace(document::VARCHAR, ?, ?)::JSON", [str(folder), str(tmp_path)]
        )
        store.con.execute("UPDATE runs SET series_path = replace(series_path, ?, ?)", [str(folder), str(tmp_path)])
        (series,) = store.con.execute("SELECT series_path FROM runs WHERE run_id = ?", [run]).fetchone()
    return db, run, tmp_path / trace.name, Path(series)


def _explain(db: Path, run: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lowtail", "explain", str(run), "--db", str(db), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_damaged_trace_is_one_line_naming_it(explained, tmp_path, case):
    damage, code, reason = CASES[case]
    db, run, trace, _ = _copy(explained, tmp_path)
    assert _explain(db, run, "--above", "p99").returncode == 0  # whole, it explains
    damage(trace)
    # Another tail than the stored one is worked out from the files: the damage shows.
    done = _explain(db, run, "--above", "p99")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and str(trace) in lines[0] and reason in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    # The stored explanation is not lost: the run's own tail is still answered from the store.
    assert _explain(db, run).returncode == 0


@pytest.mark.parametrize("case", ["random", "a directory", "a FIFO"])
def test_a_damaged_series_is_one_line_naming_it(explained, tmp_path, case):
    damage, code, _ = CASES[case]
    db, run, _, series = _copy(explained, tmp_path)
    damage(series)
    done = _explain(db, run, "--above", "p99")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and str(series) in lines[0] and "matched series" in lines[0], done.stderr


def test_damaged_stored_dut_options_are_one_line_naming_them(explained, tmp_path):
    """The run's DuT options are read back typed (a lowtail-fwd's batch is a number): stored
    options not of their kind's shape end the command as a damaged store, one line."""
    db, run, _, _ = _copy(explained, tmp_path)
    with open_store(db) as store:
        store.con.execute("UPDATE runs SET dut_config = ?::JSON WHERE run_id = ?", ['{"batch": "many"}', run])
    done = _explain(db, run, "--above", "p99")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and "runs.dut_config" in lines[0] and f"run {run}" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert _explain(db, run).returncode == 0  # the stored explanation is not lost
