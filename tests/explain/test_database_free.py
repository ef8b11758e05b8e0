"""`lowtail explain` holds the database only to read its inputs and to write its answer: a
`compare` started while it works the explanation out does not wait for it.

Before: explaining a 10 s run held the database for the whole minute it took, and a `compare`
started meanwhile waited ("waiting for …: pid … (lowtail explain) is using it").

The explain process is caught between its visits to the database — its file not open, the
explanation not yet written — and stopped there (SIGSTOP), so the compare provably runs
while the explanation is being worked out, however fast or slow the host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
from compare_support import experiment, store_run  # noqa: E402

from lowtail.store import open_store  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]


def _holds(pid: int, db: Path) -> bool:
    """Whether the process has the database (or its write-ahead log) open."""
    names = {str(db), f"{db}.wal"}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in names:
                return True
        except OSError:
            continue
    return False


def _explained(db: Path, run: int) -> bool:
    with open_store(db, read_only=True) as store:
        row = store.con.execute("SELECT count(*) FROM run_explanations WHERE run_id = ?", [run]).fetchone()
    return bool(row and row[0])


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_compare_started_during_explain_does_not_wait_for_it(tmp_path):
    db = tmp_path / "runs.duckdb"
    with open_store(db) as store:
        e = experiment(store, "big", {"percentile": 99.9, "budget": "30us"})
        run = store_run(store, tmp_path, e, "fwd", packets=300_000, seed=2, spike_probability=0.003, spike_ns=40_000)
    assert not _explained(db, run)  # explained on its first request
    explain = subprocess.Popen(
        [*LOWTAIL, "explain", str(run), "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    caught = False
    try:
        seen_open = False
        deadline = time.monotonic() + 120
        while explain.poll() is None and time.monotonic() < deadline and not caught:
            if _holds(explain.pid, db):
                seen_open = True
            elif seen_open:
                os.kill(explain.pid, signal.SIGSTOP)
                # Stopped while it had let go (not back at the file since the look above)?
                if explain.poll() is None and not _holds(explain.pid, db):
                    caught = not _explained(db, run)
                    if not caught:
                        break  # it wrote its answer before ever letting go while computing
                else:
                    os.kill(explain.pid, signal.SIGCONT)
            time.sleep(0.001)
        assert caught, "explain never let go of the database while it worked the explanation out"
        started = time.monotonic()
        compare = subprocess.run(
            [*LOWTAIL, "compare", "latest", "--db", str(db), "--json"], capture_output=True, text=True, timeout=120
        )
        assert compare.returncode in (0, 3), compare.stderr
        assert "waiting for" not in compare.stderr, compare.stderr
        assert time.monotonic() - started < 60
    finally:
        os.kill(explain.pid, signal.SIGCONT)
        out, err = explain.communicate(timeout=300)
    assert explain.returncode == 0, err
    assert _explained(db, run)
