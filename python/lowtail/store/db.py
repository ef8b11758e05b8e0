"""Open the database, create what is missing, and the transaction every write runs in.

The queries themselves are module functions beside this one, one module per family of
tables (`analyses`, `runs`, `host`, `models`), each taking the open `Store` first.

How lowtail shares its database (docs/architecture.md, "The database"): DuckDB lets one
process open a file for writing and no other process open it beside that, not even to
read. So a command holds the file only while it reads or writes it — a long one (`lowtail
run`) lets go between its transactions (`release`) — and a command that finds it held
waits, LOCK_WAIT_S at most, saying so once. A file is checked when it is opened: one cut
short (smaller than the blocks its header counts) is damaged; lowtail reads what it still
can but never writes into it, and `lowtail recover` copies what is readable into a new
database.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lowtail.core import schema, signals
from lowtail.core.errors import DiskFull, Failure, UserError
from lowtail.core.files import DUCKDB_MAGIC, DUCKDB_MAGIC_AT, database_files, remove_database, special_kind
from lowtail.core.percentiles import KEYS

if TYPE_CHECKING:
    from lowtail.analyze.document import LatencyColumns, LatencyFigures
from lowtail.store.errors import DamagedDatabase, DatabaseBusy
from lowtail.store.template import copy_template, discard_template, template_key

with signals.held():
    # DuckDB's native module builds its enums in Python code that C++ calls (nanobind): a
    # KeyboardInterrupt raised in there cannot unwind and aborts the process (SIGABRT, no
    # word). A stop signal while it loads is raised once it has loaded. Every other module
    # takes DuckDB from here (hence the explicit re-export).
    import duckdb as duckdb

# How long a command waits for another process to let go of the database. A writer holds it
# for one transaction (milliseconds to a second), a reader for one query: a minute covers a
# busy machine; past it something else holds the file (a notebook, a stuck process).
LOCK_WAIT_S = 60.0
_SAY_WAITING_AFTER_S = 1.0
# DuckDB's file: three 4 KiB headers, then the blocks its active header counts.
_HEADER_BYTES = 3 * 4096
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
_DAMAGE = ("Could not read enough bytes", "checksum", "Corrupt", "corrupt")
_OUT_OF_SPACE = "No space left on device"


def is_out_of_space(e: BaseException) -> bool:
    """A DuckDB error for a full disk (it carries no errno, only its message says so)."""
    return isinstance(e, duckdb.Error) and _OUT_OF_SPACE in str(e)


@functools.cache
def _schema_files() -> list[tuple[str, str]]:
    """Every schema file, (name, SQL), in order; each is idempotent (CREATE ... IF NOT EXISTS)."""
    folder = resources.files("lowtail.store").joinpath("schema")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name, f.read_text()) for f in files]


def _write_schema(con: Any, files: list[tuple[str, str]]) -> None:
    """Apply schema files inside the caller's transaction, and record them as applied."""
    # One statement list (a file's last statement needs no ";", a comment may end it):
    # DuckDB parses it at once, a call per file cost a sixth more.
    con.execute(";\n".join(sql for _, sql in files))
    con.execute(
        "INSERT INTO schema_files (name) SELECT unnest(?::VARCHAR[]) ON CONFLICT DO NOTHING",
        [[name for name, _ in files]],
    )


def _make_template(path: Path) -> None:
    """An empty database with the whole schema and no identity, checkpointed on close."""
    con = duckdb.connect(str(path))
    try:
        con.execute("BEGIN TRANSACTION")
        _write_schema(con, _schema_files())
        con.execute("COMMIT")
    finally:
        con.close()


def _copy_template(path: Path) -> bool:
    """Make the new database `path` as a copy of the schema's template (store/template.py)."""
    return copy_template(path, template_key(duckdb.__version__, _schema_files()), _make_template)


def _say(message: str) -> None:
    """A note on stderr (the store's only message: that it waits)."""
    print(f"lowtail: {message}", file=sys.stderr, flush=True)


def _process_name(pid: int) -> str:
    """ "pid 1234 (lowtail run)": who holds the database, in a few words of one line."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    words = [" ".join(a.decode(errors="replace").split()) for a in argv if a.strip()]
    if "lowtail" in words:  # python -m lowtail run …
        words = words[words.index("lowtail") :]
    elif words:
        words[0] = Path(words[0]).name
    text = " ".join(words[:3])
    return f"pid {pid} ({text[:60]}{'…' if len(text) > 60 else ''})" if text else f"pid {pid}"


def _blocks(fd: int) -> tuple[int, int] | None:
    """(blocks, block size) of the file's active header, read from the file itself
    (DuckDB's own figure counts blocks it holds in memory, e.g. after replaying its log);
    None when the header is not one this check knows."""
    try:
        head = os.pread(fd, _HEADER_BYTES, 0)
    except OSError:
        return None
    if len(head) < _HEADER_BYTES or head[DUCKDB_MAGIC_AT : DUCKDB_MAGIC_AT + len(DUCKDB_MAGIC)] != DUCKDB_MAGIC:
        return None
    # Two database headers after the main one; the active one has the higher iteration:
    # checksum, iteration, meta block, free list, block count, block size, …
    headers = [struct.unpack_from("<6Q", head, offset) for offset in (4096, 8192)]
    _, _, _, _, blocks, block_size = max(headers, key=lambda h: h[1])
    if not 4096 <= block_size <= 1 << 30 or block_size & (block_size - 1):
        return None
    return blocks, block_size


class Store:
    """A results database. Writes happen in one transaction each: a failure leaves what
    was stored before untouched, and a stop signal waits until the transaction is over."""

    def __init__(self, path: str | Path, read_only: bool = False, create: bool = True):
        self.path = Path(path)
        self.read_only = read_only
        self.damage: str | None = None  # why the file is damaged, when it is
        self._tx_depth = 0
        self._con: _Connection | None = None
        # The file, read by lowtail itself (its header), open for as long as DuckDB's
        # connection: closing any descriptor of a file drops every POSIX lock the process
        # holds on it, DuckDB's lock included, and another process would then open the
        # database beside this one (its commit fails on the write-ahead log's lock).
        self._file: int | None = None
        self._schema_ready = read_only
        self._making_schema = False
        kind = special_kind(self.path)
        if kind is not None:  # a FIFO would be waited on for ever, a device read without end
            raise UserError(f"{self.path}: is {kind}, not a lowtail database (--db names a database file)")
        # A command that only reads what is stored (or stores beside it what it read) never
        # leaves an empty database behind for a mistyped --db.
        if (read_only or not create) and not self.path.exists():
            raise UserError(f"{self.path}: no such database (run an analysis first, or pass --db)")
        self._created = not self.path.exists()
        # A new database begins as a copy of the schema's template; it is then given its identity.
        self._from_template = self._created and not read_only and _copy_template(self.path)
        try:
            self._open()
        except (DiskFull, DatabaseBusy):
            raise
        except (UserError, Failure, duckdb.Error):
            if not self._from_template:
                raise
            # The template is not a sound database (a damaged cache file): this database is
            # made with the statements, and the template made again by the next new one.
            self._make_without_template()

    def _make_without_template(self) -> None:
        self.close()
        remove_database(self.path)
        discard_template(template_key(duckdb.__version__, _schema_files()))
        self._from_template = False
        self.damage = None
        self._schema_ready = False
        self._open()

    # -- the connection ----------------------------------------------------------------------------

    @property
    def con(self) -> _Connection:
        """The DuckDB connection, opened again after `release`."""
        if self._con is None:
            self._open()
        assert self._con is not None
        return self._con

    def release(self) -> None:
        """Let go of the file until the next query, so that other lowtail processes can open
        it meanwhile (a run releases it while it measures)."""
        if self._con is not None and self._tx_depth == 0:
            self.close()

    @property
    def database_id(self) -> str | None:
        """The database's identity; None for a database made before identities, opened read-only."""
        try:
            found = self.con.execute("SELECT database_id FROM database_identity LIMIT 1").fetchone()
        except duckdb.CatalogException:
            return None
        return found[0] if found else None

    def close(self) -> None:
        """Close the connection (a `with` block does it)."""
        if self._con is not None:
            self._con.close()
            self._con = None
        # After DuckDB's connection (see __init__); taken before it is closed, so that a second
        # close never closes a descriptor the number has since been given to.
        fd, self._file = self._file, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> None:
        self._con = _Connection(self, self._connect())
        self._check_whole()
        if not self._schema_ready:
            self._apply_schema()
            self._schema_ready = True
        elif self.read_only and self.damage is None and self._missing_schema():
            self._upgrade_then_read()

    def _missing_schema(self) -> list[tuple[str, str]]:
        """The schema files this database lacks (a database made by an older lowtail); all of
        them for a file this store has just made (not from the template: a copy of it is
        asked, as any database), without asking DuckDB: the question fails
        there (no table of them yet), and a failed query costs DuckDB as much as a fifth of
        the schema itself. (Should another process have made the file meanwhile, applying
        the files again changes nothing: each is idempotent.)"""
        if self._created and not self.read_only and not self._from_template:
            return _schema_files()
        try:
            applied = {name for (name,) in self.con.execute("SELECT name FROM schema_files").fetchall()}
        except duckdb.CatalogException:
            applied = set()
        return [(name, sql) for name, sql in _schema_files() if name not in applied]

    def _upgrade_then_read(self) -> None:
        """A reader of a database an older lowtail made: the readers query every table of
        this version, so the missing schema files are applied first (one short write, as any
        writing command would do), then the database is opened for reading again."""
        self.close()
        self.read_only = False
        try:
            self._con = _Connection(self, self._connect())
            self._apply_schema()
        except PermissionError as e:
            raise UserError(
                f"{self.path} was made by an older lowtail and needs its tables added once: "
                f"open it with write access (`lowtail list --db {self.path}` as its owner) ({e.strerror})"
            ) from None
        finally:
            self.close()
            self.read_only = True
        self._con = _Connection(self, self._connect())
        self._check_whole()

    def _apply_schema(self) -> None:
        """Give the database the schema files it lacks (all of them when it is new, or made
        before it kept their list), and its identity when it has none."""
        con = self.con
        missing = self._missing_schema()
        # A copy of the template has no identity yet, and another process may open it
        # first (it found the file there): whichever writer opens it first gives it one.
        # The connection holds DuckDB's lock on the file, so no other process is between
        # the question and the answer.
        if not missing and self._has_identity():
            return
        self._making_schema = True
        try:
            with self.transaction():
                if missing:
                    _write_schema(con, missing)
                # The database's identity, given once (see store/datadir.py).
                if not self._has_identity():
                    con.execute("INSERT INTO database_identity (database_id) VALUES (?)", [uuid.uuid4().hex])
        finally:
            self._making_schema = False

    def _has_identity(self) -> bool:
        return bool(self.con.execute("SELECT count(*) FROM database_identity").fetchone()[0])

    def _connect(self) -> Any:
        """duckdb.connect, waiting (LOCK_WAIT_S at most) while another process holds the file."""
        started = time.monotonic()
        said = False
        pause = 0.02
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=self.read_only)
            except duckdb.IOException as e:
                holder = _LOCK_HOLDER.search(str(e))
                if holder is None:
                    raise self._open_error(e) from None
                waited = time.monotonic() - started
                who = _process_name(int(holder.group(2)))
                if waited >= LOCK_WAIT_S:
                    raise DatabaseBusy(
                        f"{self.path} was held by {who} for more than {LOCK_WAIT_S:g} s; "
                        "run the command again when it is done"
                    ) from None
                if waited >= _SAY_WAITING_AFTER_S and not said:
                    _say(f"waiting for {self.path}: {who} is using it (at most {LOCK_WAIT_S:g} s)")
                    said = True
                time.sleep(pause)
                pause = min(pause * 2, 0.25)
            except duckdb.Error as e:
                if (damage := self.failure(e)) is not e:  # a lowtail database, damaged
                    raise damage from None
                raise UserError(f"{self.path}: not a lowtail database ({str(e).splitlines()[0]})") from None

    def _open_error(self, e: Exception) -> Exception:
        first = str(e).splitlines()[0]
        if _OUT_OF_SPACE in first:
            self._tidy_after_disk_full()
            return self._disk_full(first)
        return UserError(f"{self.path}: cannot open the database: {first}")

    def _check_whole(self) -> None:
        """A file cut short inside a block (a copy interrupted, a disk error) is damaged:
        say so, and refuse writing. A file some whole blocks shorter than its header counts
        is not: DuckDB counts free blocks at the end that it never wrote (seen after
        interrupted sweeps, the file whole); a block that is really missing is found when
        it is read (`failure`)."""
        if self._file is None:
            self._file = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        counted = _blocks(self._file)
        size = self.path.stat().st_size
        if counted is None or self.damage:
            return
        blocks, block_size = counted
        need = _HEADER_BYTES + blocks * block_size
        if size >= need or (size >= _HEADER_BYTES and (size - _HEADER_BYTES) % block_size == 0):
            return
        self.damage = f"it is cut short: {size:,} bytes where its blocks need {need:,}"
        if self.read_only:
            _say(f"{self.path} is damaged ({self.damage}): showing what can still be read; {self.recovery()}")
            return
        self.close()
        raise DamagedDatabase(
            f"{self.path} is damaged ({self.damage}); lowtail does not write into it: {self.recovery()}"
        )

    def recovery(self) -> str:
        """How to get back what a damaged database still holds."""
        return f"`lowtail recover {self.path} NEW.duckdb` copies what can still be read into a new database"

    def failure(self, e: Exception) -> Exception:
        """The lowtail error for a DuckDB error: a damaged file, a full disk, or the error."""
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if _OUT_OF_SPACE in first:
            return self._disk_full(first)
        if any(m in first for m in _DAMAGE):  # DuckDB raises a checksum failure as its base Error
            return DamagedDatabase(f"{self.path} is damaged and this part cannot be read ({first}); {self.recovery()}")
        return e

    def _disk_full(self, detail: str) -> DiskFull:
        return DiskFull(
            f"{self.path}: the disk is full ({detail}); nothing was stored: free some space and run it again"
        )

    # -- transactions ------------------------------------------------------------------------------

    def transaction(self) -> _Transaction:
        """A transaction; nested ones join the outermost (one commit for the whole write)."""
        return _Transaction(self)

    def _tidy_after_disk_full(self) -> None:
        """After a full disk: a database this store created (and never filled) is removed,
        and so is an empty write-ahead log: no 0-byte or header-only file stays behind."""
        self.close()
        _, wal = database_files(self.path)
        try:
            if self._created:
                self.path.unlink(missing_ok=True)
                wal.unlink(missing_ok=True)
            elif wal.stat().st_size == 0:
                wal.unlink()
        except FileNotFoundError:
            pass


class _Transaction:
    def __init__(self, store: Store):
        self.store = store
        self._held: Any = None

    def __enter__(self) -> None:
        if self.store._tx_depth == 0:
            # A stop signal waits for the commit: never "Query interrupted" half-way.
            self._held = signals.held()
            self._held.__enter__()
            try:
                self.store.con.execute("BEGIN TRANSACTION")
            except BaseException as e:
                self._end(type(e), e)
                raise
        self.store._tx_depth += 1

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.store._tx_depth -= 1
        if self.store._tx_depth == 0:
            self._end(exc_type, exc)

    def _end(self, exc_type: Any, exc: BaseException | None) -> None:
        """Commit (or roll back after an error); a full disk or a damaged file said in
        lowtail's words, and a database this store created on a full disk removed."""
        store = self.store
        problem = store.failure(exc) if isinstance(exc, duckdb.Error) else None
        try:
            if store._con is not None:
                try:
                    store._con.execute("ROLLBACK" if exc_type else "COMMIT")
                except (duckdb.Error, Failure, UserError) as e:
                    problem = problem or (store.failure(e) if isinstance(e, duckdb.Error) else e)
                    try:
                        store._con.raw.execute("ROLLBACK")
                    except duckdb.Error:
                        pass
            if isinstance(problem or exc, DiskFull):
                store._tidy_after_disk_full()
            elif exc_type is None and problem is None and not store._making_schema:
                store._created = False  # it holds something now: never removed
        finally:
            held, self._held = self._held, None
            if held is not None:
                held.__exit__(None, None, None)
        if problem is not None and problem is not exc:
            raise problem from None


class _Connection:
    """The DuckDB connection with its errors in lowtail's words: a part of a damaged file
    that cannot be read, a full disk (`Store.failure`). Queries return it, as DuckDB's do."""

    def __init__(self, store: Store, raw: Any):
        self.store = store
        self.raw = raw

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.raw, method)(*args)
        except duckdb.Error as e:
            translated = self.store.failure(e)
            if translated is e:
                raise
            raise translated from None

    def execute(self, *args: Any) -> _Connection:
        self._call("execute", *args)
        return self

    def executemany(self, *args: Any) -> _Connection:
        self._call("executemany", *args)
        return self

    def fetchone(self) -> Any:
        return self._call("fetchone")

    def sql(self, *args: Any, **kwargs: Any) -> _Relation:
        """A relation whose results are read with the same errors in lowtail's words (an
        export of a damaged file says it is damaged, not DuckDB's IOException)."""
        return _Relation(self.store, _Relation(self.store, self.raw).__getattr__("sql")(*args, **kwargs))

    def fetchall(self) -> list[Any]:
        rows: list[Any] = self._call("fetchall")
        return rows

    @property
    def description(self) -> Any:
        return self.raw.description

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:  # anything else DuckDB offers, as it is
        return getattr(self.raw, name)


class _Relation:
    """A DuckDB relation read through `Store.failure`, as `_Connection`'s queries are."""

    def __init__(self, store: Store, raw: Any):
        self.store = store
        self.raw = raw

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.raw, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return found(*args, **kwargs)
            except duckdb.Error as e:
                translated = self.store.failure(e)
                if translated is e:
                    raise
                raise translated from None

        return call


# -- helpers of the query modules -------------------------------------------------------------

# The headline latency figures an analysis row holds as columns, in the order of its schema.
LATENCY_FIGURES = ("min", "mean", "stddev", *KEYS, "max")


def latency_column(figure: str) -> str:
    """The analyses column of a latency figure: "p99_999" → "lat_p99_999_ns"."""
    return f"lat_{figure}_ns"


def latency_figures_of(row: Mapping[str, Any], figures: Iterable[str] = LATENCY_FIGURES) -> LatencyFigures:
    """A run row's (or an analyses row's) latency columns as the `latency_ns` figures of an
    analysis: "p99_999" → the value of "lat_p99_999_ns" (None where it has none)."""
    return {figure: row.get(latency_column(figure)) for figure in figures}


def latency_columns_of(latency: Mapping[str, Any]) -> LatencyColumns:
    """An analysis's `latency_ns` figures as the latency columns of its row (the inverse of
    `latency_figures_of`): "p99_999" → "lat_p99_999_ns", None where a figure is missing."""
    columns = {latency_column(k): latency.get(k) for k in LATENCY_FIGURES}
    # LatencyColumns declares one key per figure of LATENCY_FIGURES (tests/store/test_codec.py).
    return cast("LatencyColumns", columns)


def latency_columns(alias: str = "", figures: tuple[str, ...] = LATENCY_FIGURES) -> str:
    """A SELECT list of latency columns ("a.lat_min_ns, a.lat_mean_ns, ..."), in schema order."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + latency_column(f) for f in figures)


# Free-form by the driver: DuckDB's Python API types no value it hands back (a cell is whatever
# the SELECT made it), so a raw row maps each column to Any until its reader builds its row
# type from it (`RunRow`, `StoredAnalysis`, ...: what each query's columns are).
def rows_as_dicts(cur: Any) -> list[dict[str, Any]]:
    """Every row of an executed cursor as a column → value dict."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def row_as_dict(cur: Any) -> dict[str, Any] | None:  # free-form by the driver, as rows_as_dicts
    """The next row of an executed cursor as a column → value dict; None when there is none."""
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def newest_id(store: Store, table: str, id_column: str) -> int | None:
    """The highest id of a table (what 'latest' means); None when it is empty."""
    (found,) = store.con.execute(f"SELECT max({id_column}) FROM {table}").fetchone()
    return None if found is None else int(found)


def as_id(ident: int | str) -> int | None:
    """A stored row's id as typed: ASCII digits (int() would also read "١٢" and "1_000", and
    "²" passes str.isdigit() but not int()) within 64 bits; None when it is none."""
    if isinstance(ident, bool):
        return None
    if isinstance(ident, int):
        return ident if 0 <= ident <= 2**63 - 1 else None
    if len(ident) > 19 or not schema.ascii_digits(ident):
        return None
    number = int(ident)
    return number if number <= 2**63 - 1 else None


def stored_id(store: Store, ident: int | str, table: str, id_column: str, what: str, hint: str) -> int:
    """The id a user named: a number, or 'latest' (the newest row). Anything else, or a
    number that names no row, is a UserError saying so (`what`: "analysis"; `hint`: the
    command that lists or makes them)."""
    if ident == "latest":
        found = newest_id(store, table, id_column)
        if found is None:
            raise UserError(f"{store.path}: holds no {what} yet ({hint})")
        return found
    number = as_id(ident)
    if number is None:
        raise UserError(f"{ident!r} is not an id: a whole number, or 'latest' ({hint})")
    if store.con.execute(f"SELECT 1 FROM {table} WHERE {id_column} = ?", [number]).fetchone() is None:
        raise UserError(f"{store.path}: none of its {what} has id {number} ({hint})")
    return number
