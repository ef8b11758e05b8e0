"""The URLLC studies' pipeline, rebuilt as lowtail's baseline: captures → rows (dpkt) →
PostgreSQL (COPY) → figures (SQL).

`TempPostgres` runs a private PostgreSQL server from Debian's packages in a temporary
directory for the length of a `with` block; `load_pair` and `analyze_in_sql` are the two
whole-process stages the benchmark times.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lowtail import _native

HERE = Path(__file__).resolve().parent
ROW_PARSER = HERE / "pcap_to_rows.py"
ANALYSIS_SQL = HERE / "baseline.sql"
PG_USER = "postgres"

# The settings one would give a scratch analysis database on this machine: nothing needs
# to survive a crash, sorts and hashes of a few million rows should stay in memory, and
# parallel query may use both cores. They favour the baseline, never handicap it.
SERVER_SETTINGS = {
    "listen_addresses": "''",
    "shared_buffers": "1GB",
    "work_mem": "1GB",
    "maintenance_work_mem": "1GB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "8GB",
    "max_parallel_workers_per_gather": "2",
    "logging_collector": "off",
}


class BaselineError(RuntimeError):
    """The baseline could not run (PostgreSQL missing, a stage failed)."""


def postgres_bindir() -> Path:
    """Debian keeps the server programs out of PATH, one directory per major version."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    raise BaselineError("PostgreSQL is not installed: run `scripts/ensure-apt.sh postgresql` (as root)")


def postgres_available() -> str | None:
    """None when a private server can be started here, else the reason it cannot."""
    try:
        postgres_bindir()
    except BaselineError as e:
        return str(e)
    if shutil.which("psql") is None:
        return "psql is not installed (Debian package postgresql-client)"
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        return f"there is no {PG_USER!r} user to run the server as"
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != PG_USER:
        return "starting a private PostgreSQL needs root (to run it as the postgres user)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempPostgres:
    """A PostgreSQL server in a fresh temporary directory, on a free port, reachable only
    through a Unix socket in that directory; stopped and deleted on exit, also after an
    error or Ctrl-C."""

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        self.root = Path(tempfile.mkdtemp(prefix=f"lowtail-pgbench-pg-{os.getpid()}-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.psql_program = str(self.bindir / "psql") if (self.bindir / "psql").exists() else "psql"
        self.started = False

    def _as_postgres(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, **kw)

    def __enter__(self) -> TempPostgres:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        if os.geteuid() == 0:
            pw = pwd.getpwnam(PG_USER)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        r = self._as_postgres(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            PG_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        if r.returncode:
            raise BaselineError(f"initdb failed: {r.stderr.strip()}")
        settings = {**SERVER_SETTINGS, "port": str(self.port), "unix_socket_directories": f"'{self.root}'"}
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        r = self._as_postgres(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        if r.returncode:
            raise BaselineError(
                f"PostgreSQL did not start: {r.stderr.strip() or r.stdout.strip()} (log: {self.log_tail()})"
            )
        self.started = True

    def __exit__(self, *exc) -> None:
        if self.started:
            self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            return " | ".join((self.root / "server.log").read_text().strip().splitlines()[-3:])
        except OSError:
            return "no log"

    def version(self) -> str:
        return self.psql_command("SHOW server_version").strip()

    def psql(self, *args: str) -> list[str]:
        """argv of psql connected to this server, failing on the first SQL error."""
        return [
            self.psql_program,
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            PG_USER,
            "-d",
            "postgres",
            *args,
        ]

    def psql_command(self, sql: str) -> str:
        r = subprocess.run(self.psql("-At", "-c", sql), capture_output=True, text=True)
        if r.returncode:
            raise BaselineError(f"psql: {r.stderr.strip()}")
        return r.stdout

    def reset(self) -> None:
        """Drop every table: the next load starts from an empty database."""
        self.psql_command("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")


@dataclass
class StageTiming:
    seconds: float
    cpu_seconds: float
    max_rss_bytes: int


def wait_timed(processes: list[subprocess.Popen], started: float) -> StageTiming:
    """Wait for processes started at `started` (a perf_counter time): wall time since
    then, and their CPU time and largest peak RSS from wait4. Raises if one failed."""
    cpu = 0.0
    rss = 0
    failed = []
    for p in processes:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu += usage.ru_utime + usage.ru_stime
        rss = max(rss, usage.ru_maxrss * 1024)
        if p.returncode:
            failed.append(p)
    seconds = time.perf_counter() - started
    if failed:
        raise BaselineError("; ".join(f"{Path(p.args[0]).name} exited {p.returncode}: {_stderr_of(p)}" for p in failed))
    return StageTiming(seconds, cpu, rss)


def _stderr_of(p: subprocess.Popen) -> str:
    if p.stderr is None:
        return ""
    return p.stderr.read().decode(errors="replace").strip()[-500:]


def load_pair(pg: TempPostgres, pre: Path, post: Path) -> StageTiming:
    """Stage 1: both captures parsed by dpkt and copied into PostgreSQL, the two sides at
    once (two pipelines `pcap_to_rows.py | psql COPY`), as the two cores allow."""
    pg.psql_command(
        "CREATE UNLOGGED TABLE pre (id bigint, ts bigint); CREATE UNLOGGED TABLE post (id bigint, ts bigint);"
    )
    started = time.perf_counter()
    procs: list[subprocess.Popen] = []
    try:
        for table, capture in (("pre", pre), ("post", post)):
            parser = subprocess.Popen(
                [sys.executable, str(ROW_PARSER), str(capture)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            copier = subprocess.Popen(
                pg.psql("-c", f"COPY {table} (id, ts) FROM STDIN"),
                stdin=parser.stdout,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            parser.stdout.close()
            procs += [parser, copier]
        return wait_timed(procs, started)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                p.wait()


# lowtail's headline percentiles and their names in its JSON document.
HEADLINE_PERCENTILES = dict(_native.HEADLINE_PERCENTILES)
HEADLINE_KEYS = list(HEADLINE_PERCENTILES)


def percentile_levels() -> list[float]:
    """The headline percentiles, then the levels of an HDR percentile curve (five ticks
    per halving of the distance to 100 %, to beyond 99.9999 %), as lowtail reports them."""
    curve = [1 - 0.5**h + t * 0.5 ** (h + 1) / 5 for h in range(21) for t in range(5)]
    # PostgreSQL takes the levels as doubles: the double nearest each exact headline
    # quantile ranks as lowtail's exact arithmetic does (tests/analyze/test_native_boundary.py)
    headline = [float(q) for q in HEADLINE_PERCENTILES.values()]
    return headline + curve + [1.0]


def analyze_in_sql(
    pg: TempPostgres, *, trim_ns: int, horizon_ns: int, worst_n: int, bins: int
) -> tuple[StageTiming, dict]:
    """Stage 2: the figures computed by PostgreSQL (one psql process running
    baseline.sql), returned as a document shaped like lowtail's."""
    levels = "{" + ",".join(repr(q) for q in percentile_levels()) + "}"
    argv = pg.psql(
        "-At",
        "-v",
        f"trim_ns={trim_ns}",
        "-v",
        f"horizon_ns={horizon_ns}",
        "-v",
        f"worst_n={worst_n}",
        "-v",
        f"bins={bins}",
        "-v",
        f"percentiles={levels}",
        "-f",
        str(ANALYSIS_SQL),
    )
    started = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    return wait_timed([p], started), _lowtail_shaped(json.loads(out))


def _lowtail_shaped(doc: dict) -> dict:
    """Rename the SQL document's fields to lowtail's `analyze --json` names."""
    lat = doc.pop("latency_ns")
    values = lat.pop("percentiles") or []
    if lat["samples"]:
        lat.update(zip(HEADLINE_KEYS, values))
        doc["latency_ns"] = lat
    else:
        doc["latency_ns"] = None
    # Exact values at the levels of lowtail's HDR percentile curve (whose own values are
    # HdrHistogram buckets, so they are not compared).
    doc["percentile_curve"] = [
        {"percentile": q, "value_ns": v}
        for q, v in zip(percentile_levels()[len(HEADLINE_KEYS) :], values[len(HEADLINE_KEYS) :])
    ]
    hist = doc.pop("histograms") or {}
    doc["latency_histogram"] = hist.get("latency", [])
    doc["jitter_pre_histogram"] = hist.get("jitter_pre", [])
    doc["jitter_post_histogram"] = hist.get("jitter_post", [])
    rates = doc.pop("per_second") or {}
    doc["pre"] = {"per_second": rates.get("pre", [])}
    doc["post"] = {"per_second": rates.get("post", [])}
    for event in doc["worst"]:
        event["id"] %= 1 << 64
    return doc


EXACT_FIELDS = [
    "sent",
    "received",
    "lost",
    "duplicates",
    "reordered",
    "negative",
    "unmatched",
    "trimmed_pre",
    "trimmed_post",
    "start_ts_ns",
    "duration_ns",
]
EXACT_LATENCY_FIELDS = ["samples", "min", "max", *HEADLINE_KEYS]


def differences(sql: dict, lowtail: dict) -> list[str]:
    """Every figure on which the SQL baseline and lowtail disagree (empty: they agree).
    Counts, percentiles, histograms, worst events and rates must be identical; mean and
    standard deviation are floating point and may differ in the last digits."""
    diffs = [f"{k}: SQL {sql[k]} vs lowtail {lowtail[k]}" for k in EXACT_FIELDS if sql[k] != lowtail[k]]
    a, b = sql["latency_ns"], lowtail["latency_ns"]
    if (a is None) != (b is None):
        diffs.append(f"latency_ns: SQL {a} vs lowtail {b}")
    elif a is not None:
        diffs += [f"latency {k}: SQL {a[k]} vs lowtail {b[k]}" for k in EXACT_LATENCY_FIELDS if a[k] != b[k]]
        for k, tolerance in (("mean", 1e-12), ("stddev", 1e-9)):
            if abs(a[k] - b[k]) > tolerance * max(abs(b[k]), 1.0):
                diffs.append(f"latency {k}: SQL {a[k]!r} vs lowtail {b[k]!r}")
    # The worst events as one set, in one order (lowtail prints them worst first).
    by_size = lambda events: sorted(events, key=lambda w: (-w["latency_ns"], w["pre_ts_ns"], w["id"]))  # noqa: E731
    sql, lowtail = {**sql, "worst": by_size(sql["worst"])}, {**lowtail, "worst": by_size(lowtail["worst"])}
    for key in ("latency_histogram", "jitter_pre_histogram", "jitter_post_histogram", "worst"):
        if sql[key] != lowtail[key]:
            diffs.append(f"{key}: {_first_difference(sql[key], lowtail[key])}")
    for side in ("pre", "post"):
        if sql[side]["per_second"] != lowtail[side]["per_second"]:
            diffs.append(
                f"{side} per_second: {_first_difference(sql[side]['per_second'], lowtail[side]['per_second'])}"
            )
    return diffs


def _first_difference(a: list, b: list) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"entry {i}: SQL {x} vs lowtail {y}"
    return f"SQL has {len(a)} entries, lowtail {len(b)}"
