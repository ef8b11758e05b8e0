"""The database under what users and machines do to it: another process holding it, two
analyses writing at once, a file cut short, a full disk. Nothing finished is thrown away,
nothing damaged is written into, no 0-byte or half-written file stays, and every failure
is one line with its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from analyze_support import assert_clean_failure, run_cli, synth

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (needs root)")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("pair"), packets=3000, rate_pps=1000)


def analyses_in(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT count(*) FROM analyses").fetchone()[0]


@contextmanager
def held_by_another_process(db: Path, seconds: float):
    """Another process opens the database for writing (as a run or a notebook does) and
    keeps it `seconds`, then lets go."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time\ncon = duckdb.connect({str(db)!r})\nprint('held', flush=True)\n"
            f"time.sleep({seconds})\ncon.close()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    try:
        yield holder
    finally:
        holder.wait(timeout=60)


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_an_analysis_waits_for_a_database_another_process_holds(pair, tmp_path):
    """Before: exit 2 with DuckDB's lock error, the finished analysis thrown away."""
    db = tmp_path / "x.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode == 0
    with held_by_another_process(db, 2.5):
        done = run_cli("analyze", pair.pre, pair.post, "--db", db, "--label", "again", cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stderr
    assert "waiting for" in done.stderr and "is using it" in done.stderr
    assert analyses_in(db) == 2


@pytest.mark.parametrize("command", [["list"], ["show", "latest"], ["experiment", "list"]])
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_reading_commands_wait_for_a_writer_and_read(pair, tmp_path, command):
    db = tmp_path / "x.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode == 0
    with held_by_another_process(db, 2.0):
        done = run_cli(*command, "--db", db, "--json", cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_analyses_writing_one_database_at_once_are_all_stored(pair, tmp_path):
    """Before: in 4 of 6 rounds one of two concurrent analyses exited 2 ("Could not set lock")."""
    db = tmp_path / "x.duckdb"
    rounds, writers = 3, 3
    for r in range(rounds):  # each its own label: an analysis repeated exactly is stored once
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "lowtail", "analyze", str(pair.pre), str(pair.post), "--db", str(db), "--json"]
                + ["--label", f"writer {r}.{i}"],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(writers)
        ]
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert json.loads(out)["analysis_id"] > 0
    assert analyses_in(db) == rounds * writers


_SHORT_WAIT = """
import sys
import lowtail.store.db as db
db.LOCK_WAIT_S = 1.0
from lowtail.cli import main
main(sys.argv[1:])
"""


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_database_held_past_the_bound_still_prints_the_analysis(pair, tmp_path):
    """When the holder does not let go in time, the analysis is not lost: its figures are
    printed, and one line says it was not stored and why (exit 1)."""
    db = tmp_path / "x.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode == 0
    with held_by_another_process(db, 4.0):
        done = subprocess.run(
            [sys.executable, "-c", _SHORT_WAIT, "analyze", str(pair.pre), str(pair.post), "--db", str(db), "--json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["sent"] > 0
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "was not stored" in errors[0] and "more than 1 s" in errors[0], done.stderr
    assert analyses_in(db) == 1


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_run_lets_go_of_the_database_between_its_runs(tmp_path):
    """A sweep holds the database only while it stores: `Store.release` closes it, and the
    next query opens it again (waiting if another process holds it then)."""
    from lowtail.store import open_store
    from lowtail.store import runs as runstore

    db = tmp_path / "x.duckdb"
    with open_store(db) as store:
        store.release()
        with held_by_another_process(db, 1.5):
            pass  # another process could open it while this one held a Store
        time.sleep(0.1)
        assert runstore.list_experiments(store) == []  # opened again on use


# -- a damaged file ---------------------------------------------------------------------------------


@pytest.fixture
def cut_short(pair, tmp_path):
    """A database with two analyses, truncated by one byte (a copy interrupted, a disk error)."""
    db = tmp_path / "d.duckdb"
    for n in range(2):
        assert run_cli("analyze", pair.pre, pair.post, "--db", db, "--label", f"copy {n}").returncode == 0
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size - 1)
    return db


def test_a_damaged_database_is_never_written_into(pair, cut_short, tmp_path):
    """Before: `analyze` went on adding analyses to it (exit 0)."""
    before = cut_short.read_bytes()
    done = run_cli("analyze", pair.pre, pair.post, "--db", cut_short, cwd=tmp_path)
    line = assert_clean_failure(done, 1, "is damaged", "does not write into it", "lowtail recover")
    assert "cut short" in line
    assert cut_short.read_bytes() == before
    assert not cut_short.with_name(cut_short.name + ".wal").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["show", "1"],
        ["show", "2"],
        ["report", "1", "-o", "r.html"],
        ["export", "analysis:1", "-o", "x.lowtail"],
    ],
)
def test_reading_a_damaged_database_is_never_an_internal_error(cut_short, tmp_path, command):
    """Before: `show` and `report` ended in "internal error: IOException" (exit 70), and so did
    `export` (its rows read as Arrow tables). What can be read is shown, with a warning; what
    cannot is one error line naming the way out, exit 1 (the store's state)."""
    done = run_cli(*command, "--db", cut_short, cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode in (0, 1), done.stderr
    assert "is damaged" in done.stderr and "lowtail recover" in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == (done.returncode != 0), done.stderr


@pytest.mark.parametrize("first_block", [0, 1])
@pytest.mark.parametrize("command", [["show", "1"], ["report", "1", "-o", "r.html"]])
def test_a_block_that_fails_its_checksum_is_damage_not_an_internal_error(pair, tmp_path, command, first_block):
    """Before: "internal error: Error: Corrupt database file: computed checksum …" (70):
    DuckDB raises a checksum failure as its base Error, which was not taken for damage."""
    db = tmp_path / "d.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode == 0
    data = bytearray(db.read_bytes())
    # A byte inside the payload of every block from `first_block` on (block 0 is read when
    # the file is opened, the others when an analysis is).
    for block in range(12288 + first_block * 262144 + 100, len(data), 262144):
        data[block] ^= 0xFF
    db.write_bytes(bytes(data))
    done = run_cli(*command, "--db", db, cwd=tmp_path, process=True)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert "is damaged" in done.stderr and "lowtail recover" in done.stderr


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_recover_copies_what_a_damaged_database_still_holds(pair, cut_short, tmp_path):
    new = tmp_path / "new.duckdb"
    con = duckdb.connect(str(cut_short), read_only=True)
    try:
        identity = con.execute("SELECT database_id FROM database_identity").fetchall()
    finally:
        con.close()
    done = run_cli("recover", cut_short, new, "--json", cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr
    tables = {t["table"]: t for t in json.loads(done.stdout)}
    assert tables["analyses"]["copied"] == tables["analyses"]["rows"] == 2
    assert "schema_files" not in tables  # the new database's own list, not data to copy
    # It keeps the damaged database's identity (its experiments' folders are claimed under
    # it), one row: before, a new identity was made and the old one copied beside it.
    con = duckdb.connect(str(new), read_only=True)
    try:
        assert con.execute("SELECT database_id FROM database_identity").fetchall() == identity
    finally:
        con.close()
    lost = sum(t["rows"] - t["copied"] for t in tables.values())
    assert (done.returncode == 3) == (lost > 0)
    listed = run_cli("list", "--db", new, "--json")
    assert [a["analysis_id"] for a in json.loads(listed.stdout)] == [2, 1]
    # The recovered database is whole: it takes new analyses, numbered after the old ones.
    again = run_cli("analyze", pair.pre, pair.post, "--db", new, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["analysis_id"] == 3
    assert_clean_failure(run_cli("recover", cut_short, new), 2, "exists")


_KILLED_BEFORE_CHECKPOINT = """
import os, sys
import lowtail.store.db as db
from lowtail.cli import main

# Killed after its commits, before it closes the file: no store is closed, and none is let
# go (a connection the garbage collector closes would checkpoint the log as close does).
kept = []
opened = db.Store.__init__
def keep(self, *args, **kwargs):
    kept.append(self)
    opened(self, *args, **kwargs)
db.Store.__init__ = keep
db.Store.close = lambda self: None
for n in range(5):  # enough rows for new blocks, all in the write-ahead log (each its own label:
    try:                # an analysis repeated exactly is stored once)
        main(sys.argv[1:] + ["--label", f"killed {n}"])
    except SystemExit as e:
        assert not e.code, e.code
os._exit(0)  # as kill -9: no checkpoint, the log stays
"""


def test_a_database_killed_before_its_checkpoint_is_whole(pair, tmp_path):
    """A writer killed after its commits leaves them in the write-ahead log, which the next
    open replays: the file is whole (its own header counts its blocks), not "cut short".
    Before (the check asked DuckDB, whose count includes the replayed blocks held in
    memory): every later command called it damaged and refused to write."""
    db = tmp_path / "x.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode == 0
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_CHECKPOINT, "analyze", str(pair.pre), str(pair.post), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == 0, killed.stderr
    assert db.with_name(db.name + ".wal").stat().st_size > 0
    done = run_cli("analyze", pair.pre, pair.post, "--db", db, "--json", "--label", "after", process=True)
    assert done.returncode == 0, done.stderr
    assert "damaged" not in done.stderr
    assert analyses_in(db) == 7


# -- a full disk ------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (room for a database of every schema table), unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave_bytes: int) -> None:
    """Fill the disk until about `leave_bytes` are free."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))


def leftovers(disk: Path) -> list[str]:
    """Files a failed write left on the disk: anything 0 bytes long or partial, and any
    database (or log) that was not there before."""
    return sorted(p.name for p in disk.iterdir() if p.name != "filler" and p.name != "old.duckdb")


@needs_root
@pytest.mark.parametrize("leave_kib", [4, 40, 120])
@pytest.mark.parametrize(
    "output",
    [
        ["--db", "{disk}/new.duckdb"],
        ["--db", "{disk}/old.duckdb"],
        ["--no-store", "--hgrm", "{disk}/x.hgrm"],
        ["--no-store", "--export", "{disk}/s.parquet"],
        ["--db", "{tmp}/x.duckdb", "--report", "{disk}/r.html"],
    ],
)
def test_a_full_disk_is_one_line_and_leaves_no_file_behind(pair, tmp_path, small_disk, output, leave_kib):
    """Before: internal errors for --hgrm and --report, 0-byte outputs and hidden
    .NAME.parquet.partial files left. A result either is complete or is not there."""
    args = [a.replace("{disk}", str(small_disk)).replace("{tmp}", str(tmp_path)) for a in output]
    old = small_disk / "old.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", old).returncode == 0
    fill(small_disk, leave_kib << 10)
    done = run_cli("analyze", pair.pre, pair.post, "--trim", "0", *args, cwd=tmp_path)
    assert "Traceback" not in done.stderr
    if done.returncode == 0:  # it fitted: then it is whole
        written = Path(args[-1])
        assert written.stat().st_size > 0 or written.suffix == ".duckdb"
    else:
        assert_clean_failure(done, 1, "disk is full")
        assert leftovers(small_disk) == [], leftovers(small_disk)
    assert not [p for p in small_disk.iterdir() if p.name.endswith(".partial")]
    assert not [p for p in small_disk.iterdir() if p.stat().st_size == 0]
    # What was stored before is untouched.
    (small_disk / "filler").unlink()
    assert analyses_in(old) >= 1
    shown = run_cli("show", "1", "--db", old)
    assert shown.returncode == 0, shown.stderr


@needs_root
def test_a_database_that_fits_in_its_log_is_stored(pair, tmp_path, small_disk):
    """DuckDB commits to its write-ahead log first: with room for the log but not for the
    checkpoint, the analysis is stored all the same (and read back)."""
    db = small_disk / "new.duckdb"
    fill(small_disk, 150 << 10)
    done = run_cli("analyze", pair.pre, pair.post, "--db", db, "--json")
    if done.returncode == 0:
        (small_disk / "filler").unlink()
        assert analyses_in(db) == 1
    else:
        assert_clean_failure(done, 1, "disk is full")


def _query(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_opening_gives_a_database_only_the_schema_files_it_lacks(tmp_path):
    """A database lists the schema files it was given; opening it runs only the others (the
    files are idempotent, so a database made before the list gets them all once more)."""
    from lowtail.store import open_store
    from lowtail.store.db import _schema_files

    def listed() -> list[str]:
        return sorted(n for (n,) in _query(db, "SELECT name FROM schema_files"))

    def tables() -> set[str]:
        return {t for (t,) in _query(db, "SELECT table_name FROM duckdb_tables()")}

    every = sorted(name for name, _ in _schema_files())
    db = tmp_path / "x.duckdb"
    with open_store(db) as s:
        identity = s.database_id
    assert listed() == every
    # Listed files are not run again: a table dropped behind lowtail's back stays dropped...
    _query(db, "DROP TABLE import_ids")
    with open_store(db):
        pass
    assert "import_ids" not in tables()
    # ...and a database without the list (made by an earlier lowtail) is given every file.
    _query(db, "DROP TABLE schema_files")
    with open_store(db) as s:
        assert s.database_id == identity
    assert "import_ids" in tables() and listed() == every


def test_a_reader_of_an_older_database_gives_it_the_tables_of_this_version(tmp_path):
    """Readers (reports, list, compare) open the database read-only and query every table
    of this version: a database an older lowtail made (here: before the explanations'
    tables) is given its missing schema files once, then read. Before: `experiment report`
    on an experiment stored before explain existed was exit 70 ("Table with name
    run_explanations does not exist")."""
    from lowtail.store import open_store

    db = tmp_path / "older.duckdb"
    with open_store(db):
        pass
    for table in ("run_causes", "run_explanations", "run_traces"):  # as an older lowtail left it
        _query(db, f"DROP TABLE {table}")
    _query(db, "DELETE FROM schema_files WHERE name LIKE '017_%'")
    with open_store(db, read_only=True) as s:
        assert s.read_only
        assert s.con.execute("SELECT count(*) FROM run_explanations").fetchone() == (0,)
    assert any(n.startswith("017_") for (n,) in _query(db, "SELECT name FROM schema_files"))
    done = run_cli("list", "--db", db, "--json")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "command",
    [["import", "{capture}", "--db", "{db}"], ["recover", "{capture}", "{db}"]],
    ids=["import-a-capture", "recover-a-capture"],
)
def test_a_failed_import_or_recovery_leaves_no_new_database(tmp_path, pair, command):
    """Before: `import p.pcap --db new.duckdb` ("not a readable lowtail bundle") and `recover
    p.pcap new.duckdb` ("not a database lowtail can read") each left an empty new.duckdb."""
    db = tmp_path / "new.duckdb"
    done = run_cli(*[a.format(capture=pair.pre, db=db) for a in command], cwd=tmp_path)
    assert_clean_failure(done, 2, str(pair.pre))
    assert list(tmp_path.iterdir()) == []


def test_a_failed_import_into_a_database_that_existed_keeps_it(tmp_path, pair):
    db = tmp_path / "kept.duckdb"
    assert run_cli("analyze", pair.pre, pair.post, "--db", db).returncode in (0, 3)
    before = analyses_in(db)
    done = run_cli("import", pair.pre, "--db", db, cwd=tmp_path)
    assert_clean_failure(done, 2, "not a readable lowtail bundle")
    assert db.exists() and analyses_in(db) == before == 1
