"""A new database is a copy of the schema's template (store/template.py): it must be the
database the schema's statements make, with an identity of its own, and a cache that is
damaged or cannot be written must never cost a database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lowtail.store import open_store
from lowtail.store.template import TEMPLATES, template_key

CATALOG = {
    "tables": "SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal ORDER BY 1",
    "columns": "SELECT table_name, column_name, data_type, column_default, is_nullable "
    "FROM duckdb_columns() WHERE NOT internal ORDER BY 1, 2",
    "views": "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1",
    "indexes": "SELECT index_name, table_name, sql FROM duckdb_indexes() ORDER BY 1",
    "constraints": "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() ORDER BY ALL",
    "macros": "SELECT function_name, macro_definition FROM duckdb_functions() WHERE NOT internal ORDER BY 1",
    "schema files": "SELECT name FROM schema_files ORDER BY 1",
}


def catalog(path: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {part: con.execute(sql).fetchall() for part, sql in CATALOG.items()}
    finally:
        con.close()


def identity(path: Path) -> str:
    with open_store(path) as store:
        found = store.database_id
    assert found is not None
    return found


def templates(cache: Path) -> list[Path]:
    return sorted((cache / TEMPLATES).glob("*.duckdb"))


def test_a_copy_of_the_template_is_the_database_the_statements_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LOWTAIL_CACHE_DIR", str(cache))
    first = identity(tmp_path / "first.duckdb")  # makes the template
    assert len(templates(cache)) == 1
    copied = identity(tmp_path / "copied.duckdb")
    # Where no cache can be written, the statements make it.
    (tmp_path / "not-a-directory").write_text("")
    monkeypatch.setenv("LOWTAIL_CACHE_DIR", str(tmp_path / "not-a-directory"))
    made = identity(tmp_path / "made.duckdb")

    assert catalog(tmp_path / "copied.duckdb") == catalog(tmp_path / "made.duckdb")
    assert catalog(tmp_path / "copied.duckdb")["tables"], "the schema has tables"
    assert len({first, copied, made}) == 3, "each database has an identity of its own"
    assert not list(tmp_path.glob("*.wal")), "nothing was left uncommitted"


def test_a_damaged_template_costs_no_database_and_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LOWTAIL_CACHE_DIR", str(cache))
    identity(tmp_path / "first.duckdb")
    (template,) = templates(cache)
    reference = catalog(tmp_path / "first.duckdb")
    size = template.stat().st_size
    template.write_bytes(b"not a database " * (size // 15))

    identity(tmp_path / "second.duckdb")
    assert catalog(tmp_path / "second.duckdb") == reference
    assert templates(cache) == [], "the damaged template was thrown away"

    identity(tmp_path / "third.duckdb")
    assert catalog(tmp_path / "third.duckdb") == reference
    assert templates(cache) == [template], "and made again by the next new database"


def test_a_template_is_named_by_its_duckdb_and_every_schema_file() -> None:
    files = [("001.sql", "CREATE TABLE a (x INT)"), ("002.sql", "CREATE TABLE b (y INT)")]
    key = template_key("1.1.3", files)
    assert key == template_key("1.1.3", list(files))
    assert key != template_key("1.2.0", files)
    assert key != template_key("1.1.3", files[:1])
    assert key != template_key("1.1.3", [files[0], ("002.sql", "CREATE TABLE b (y BIGINT)")])
    # A file's name and its text cannot trade characters and keep the name.
    assert template_key("v", [("a", "bc")]) != template_key("v", [("ab", "c")])


def test_a_database_path_that_exists_is_opened_not_replaced_by_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOWTAIL_CACHE_DIR", str(tmp_path / "cache"))
    db = tmp_path / "kept.duckdb"
    kept = identity(db)
    with open_store(db) as store:
        store.con.execute("CREATE TABLE mine (x INT)")
    assert identity(db) == kept
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'mine'").fetchone() == (1,)
    finally:
        con.close()


def test_processes_making_one_new_database_at_once_share_one_whole_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each copy is linked into place whole: a process starting beside another never opens
    a database half copied (it would be "cut short"), and all of them share one identity."""
    monkeypatch.setenv("LOWTAIL_CACHE_DIR", str(tmp_path / "cache"))
    identity(tmp_path / "makes-the-template.duckdb")
    db = tmp_path / "shared.duckdb"
    script = (
        "import sys, pathlib; from lowtail.store import open_store\n"
        "with open_store(pathlib.Path(sys.argv[1])) as s: print(s.database_id)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert [code for code, _, _ in results] == [0] * 6, [err for _, _, err in results]
    assert len({out.strip() for _, out, _ in results}) == 1, "one database, one identity"
    assert catalog(db) == catalog(tmp_path / "makes-the-template.duckdb")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], "no partial copy left"
