"""`make soak`'s areas of untrusted input (issue 21): hostile bundles, outputs that name
special files, hostile experiment files and import specs. Each case is a real command on real
files; after a refusal the database and its data directory must be as they were (data lost
and leftovers otherwise). The soak (scripts/soak.py) hands in its runner and judge."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import stat
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "compare"))

LOWTAIL = [sys.executable, "-m", "lowtail"]
Run = Callable[..., tuple[int | None, str, str]]
Judge = Callable[[str, int | None, str, tuple[int, ...], str], str]


def _hostile(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            rng.randint(-(2**70), 2**70),
            float("inf"),
            float("nan"),
            rng.random(),
            "",
            "²",
            "١٢",
            "1e99k",
            "-5",
            "../x",
            "/etc/passwd",
            "<b>x</b>",
            "0" * 64,
            [1, [2, [3]]],
            {"a": {"b": 1}},
            "x" * rng.randint(1, 5000),
        ]
    )


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(rng: random.Random, doc: Any, edits: int) -> Any:
    doc = json.loads(json.dumps(doc))
    for _ in range(edits):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        how = rng.choice(("set", "set", "delete", "rename"))
        if how == "set":
            parent[path[-1]] = _hostile(rng)
        elif isinstance(parent, dict) and how == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[str(_hostile(rng))[:40]] = parent.pop(path[-1])
    return doc


def _experiments(db: Path) -> list[tuple]:
    import duckdb

    if not db.exists():
        return []
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT experiment_id, name FROM experiments ORDER BY 1").fetchall()


def _source(work: Path) -> tuple[Path, Path]:
    """Lab A's database (two runs) and its bundle."""
    from compare_support import experiment, store_run

    from lowtail.store import open_store

    db = work / "a.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "one", host="lab-a")
        store_run(store, work, eid, "wire", "wire", base_latency_ns=3_000, seed=1)
        store_run(store, work, eid, "fwd", seed=2)
    bundle = work / "a.lowtail"
    from lowtail.bundle import export_bundle

    export_bundle(db, ["1"], bundle)
    return db, bundle


def _hostile_bundle(rng: random.Random, source: Path, out: Path) -> str:
    """A bundle made hostile one way; returns how."""
    from bundle_craft import parquet_bytes, read_bundle, rows, write_bundle

    manifest, files = read_bundle(source)
    how = rng.choice(("manifest", "manifest-fixed", "member", "rows", "bytes", "sparse"))
    if how == "manifest":
        write_bundle(out, _mutate(rng, manifest, rng.randint(1, 3)), files, fix=False)
    elif how == "manifest-fixed":
        edited = _mutate(rng, manifest, rng.randint(1, 2))
        try:
            write_bundle(out, manifest, files, after=lambda m: (m.clear(), m.update(edited)))
        except Exception:  # noqa: BLE001 — what the edit broke, written as it is
            write_bundle(out, edited, files, fix=False)
    elif how == "member":
        name = rng.choice([n for n in files if n.startswith("series/")] + ["../../x", "/tmp/x"])
        kind = rng.choice((tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE, tarfile.DIRTYPE))

        def member(tar: tarfile.TarFile) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "/etc/passwd"
            tar.addfile(info)

        whole, _ = read_bundle(write_bundle(out, manifest, files))
        files.pop(name, None)
        write_bundle(out, whole, files, fix=False, members=member)
    elif how == "rows":
        table = rng.choice(["runs", "analyses", "analysis_worst", "analysis_rates", "experiments", "model_results"])
        t = rows(files, table)
        import pyarrow as pa

        change = rng.choice(("duplicate", "drop-column", "retype", "many"))
        if change == "duplicate" and t.num_rows:
            t = pa.concat_tables([t, t])
        elif change == "drop-column" and t.num_columns > 1:
            t = t.drop([t.column_names[rng.randrange(t.num_columns)]])
        elif change == "retype" and t.num_columns:
            i = rng.randrange(t.num_columns)
            t = t.set_column(i, t.column_names[i], pa.array([str(v) for v in t.column(i).to_pylist()], pa.string()))
        elif t.num_rows:
            t = pa.concat_tables([t.slice(0, 1)] * rng.choice((10, 1000, 100_000)))
        files[f"rows/{table}.parquet"] = parquet_bytes(t)
        write_bundle(out, manifest, files)
    elif how == "bytes":
        data = bytearray(source.read_bytes())
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        out.write_bytes(bytes(data))
    else:
        whole, _ = read_bundle(write_bundle(out, manifest, files))
        name = next(n for n in files if n.startswith("series/"))
        whole["files"][name]["bytes"] = 3 << 30

        def sparse(tar: tarfile.TarFile) -> None:
            info = tarfile.TarInfo(name)
            info.type = tarfile.GNUTYPE_SPARSE
            info.size = 3 << 30
            info.sparse = [(0, 0)]
            tar.addfile(info, io.BytesIO(b""))

        files.pop(name)
        try:
            write_bundle(out, whole, files, fix=False, members=sparse)
        except Exception:  # noqa: BLE001 — tarfile cannot write GNU sparse headers: a symlink instead
            write_bundle(out, whole, files, fix=False)
    return how


def bundles(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Import hostile bundles into a database of its own: exit 0 or 2, never 70; a refusal
    leaves the database and its data directory as they were."""
    area = "hostile bundles"
    _, source = _source(work)
    target = work / "t.duckdb"
    from compare_support import experiment

    from lowtail.store import open_store

    with open_store(target) as store:
        experiment(store, "mine")
    data = work / "lowtail-data"
    i = 0
    while time.monotonic() < until:
        i += 1
        bundle = work / f"case-{i % 3}.lowtail"
        how = _hostile_bundle(rng, source, bundle)
        before = _experiments(target)
        folders = set(data.iterdir()) if data.exists() else set()
        rc, _, err = run([*LOWTAIL, "import", str(bundle), "--db", str(target)], work, 300)
        verdict = judge(area, rc, err, (2,), f"{how} bundle")
        if rc not in (None, 0):
            if _experiments(target) != before:
                bad(area, "data lost", f"{how}: a refused import changed the experiments")
            now = set(data.iterdir()) if data.exists() else set()
            if now - folders:
                bad(area, "leftovers", f"{how}: {sorted(p.name for p in now - folders)}")
        if verdict == "ok" and data.exists():
            staging = [p.name for p in data.iterdir() if p.name.startswith(".lowtail-import-")]
            if staging:
                bad(area, "leftovers", f"{how}: staging folders {staging}")


_OUTPUTS = {
    "report": ["report", "latest", "-o", "{out}", "--db", "{db}"],
    "experiment report": ["experiment", "report", "1", "-o", "{out}", "--db", "{db}"],
    "compare": ["compare", "1", "-o", "{out}", "--db", "{db}"],
    "export": ["export", "1", "-o", "{out}", "--db", "{db}"],
    "synth": ["synth", "{out}", "post.pcap", "--packets", "100"],
    "analyze --hgrm": ["analyze", "pre.pcap", "post.pcap", "--trim", "0", "--no-store", "--hgrm", "{out}"],
    "model --plot": ["model", "simulate", "--service", "15us", "--no-store", "--plot", "{out}"],
}


def special_files(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Every output option aimed at a character device, a FIFO, a socket or a directory:
    refused (2), the node left as it was."""
    area = "special-file outputs"
    db, _ = _source(work)
    from lowtail import _native

    _native.synth_pair(str(work / "pre.pcap"), str(work / "post.pcap"), '{"packets": 2000}')
    while time.monotonic() < until:
        command = rng.choice(list(_OUTPUTS))
        kind = rng.choice(("device", "fifo", "socket", "directory"))
        node = work / ("n1.png" if command == "model --plot" else "n1")
        if kind == "device":
            os.mknod(node, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        elif kind == "fifo":
            os.mkfifo(node)
        elif kind == "socket":
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(node))
            s.close()
        else:
            node.mkdir()
        before = os.stat(node)
        args = [a.format(out=node, db=db) for a in _OUTPUTS[command]]
        rc, _, err = run([*LOWTAIL, *args], work, 120)
        judge(area, rc, err, (2,), f"{command} into a {kind}")
        after = os.stat(node)
        if (stat.S_IFMT(after.st_mode), after.st_ino) != (stat.S_IFMT(before.st_mode), before.st_ino):
            bad(area, "data lost", f"{command} replaced a {kind}")
        node.rmdir() if kind == "directory" else node.unlink()


def _toml(doc: dict) -> str:
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
        if isinstance(v, int):
            return str(v)
        if v is None:
            return '""'
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f"{json.dumps(str(k))} = {value(x)}" for k, x in v.items()) + "}"

    return "".join(f"{json.dumps(str(k))} = {value(v)}\n" for k, v in doc.items())


_IMPORT_SPEC = {
    "import": {"pattern": "{dut}-{side}.pcap", "name": "c"},
    "axes": {"rate": "10k", "frame_size": 64, "kernel": "6.1"},
    "analysis": {"trim": "0s", "worst": 100},
    "verdict": {"percentile": 99.9, "budget": "1ms"},
}


def specs(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Hostile edits of the default experiment file (through `lowtail run`, with a report
    path whose directory is missing: a file that parses stops there, before any testbed) and
    of an import spec (through `import-captures`): 0, 2 or 3, never 70; a refused spec stores
    nothing."""
    import tomllib

    from lowtail import _native
    from lowtail.experiment.spec import default_text

    area = "hostile specs"
    default = tomllib.loads(default_text())
    (work / "c").mkdir()
    _native.synth_pair(str(work / "c" / "fwd-pre.pcap"), str(work / "c" / "fwd-post.pcap"), '{"packets": 2000}')
    db = work / "s.duckdb"
    while time.monotonic() < until:
        if rng.random() < 0.5:
            doc = _mutate(rng, default, rng.randint(1, 3))
            (work / "exp.toml").write_text(_toml(doc))
            rc, _, err = run(
                [*LOWTAIL, "run", "exp.toml", "--db", str(db), "--report", "/nonexistent/r.html"], work, 120
            )
            judge(area, rc, err, (2,), "experiment file")
        else:
            doc = _mutate(rng, _IMPORT_SPEC, rng.randint(1, 3))
            (work / "spec.toml").write_text(_toml(doc))
            before = _experiments(db)
            rc, _, err = run(
                [*LOWTAIL, "import-captures", "c", "--spec", "spec.toml", "--db", str(db), "--fresh"], work, 120
            )
            judge(area, rc, err, (2, 3), "import spec")
            if rc == 2 and _experiments(db) != before:
                bad(area, "data lost", "a refused import spec stored an experiment")
