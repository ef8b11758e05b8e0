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
    from lowtail.bundle.export import export_bundle

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


# -- issue 32: value bombs, terminal escapes, rule sets, hostile undo files -------------------------


def _bomb_bundle(rng: random.Random, source: Path, out: Path) -> str:
    """A bundle whose bytes are small and whose decoded rows are not (or that nests, or holds
    a tar header tarfile cannot read); returns how."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bundle_craft import read_bundle, rows, write_bundle

    manifest, files = read_bundle(source)
    how = rng.choice(("dictionary", "huge-string", "deep-json", "pax-sparse", "many-rows"))
    runs = rows(files, "runs")
    if how in ("dictionary", "huge-string"):
        schema = rows(files, "run_interrupts").schema
        n = rng.choice((10, 102, 1000)) if how == "dictionary" else 1
        value = "x" * (rng.choice((5, 8, 64)) << 20 if how == "dictionary" else rng.choice((100, 200)) << 20)
        run_id = runs.column("run_id")[0].as_py()
        columns = {"run_id": [run_id] * n, "t_ns": list(range(n)), "cpu": [0] * n, "kind": ["LOC"] * n,
                   "delta": [1] * n, "interval_ns": [1] * n, "source": [value] * n}  # fmt: skip
        arrays = {f.name: pa.array(columns[f.name], f.type) for f in schema if f.name != "source"}
        # One copy of the value, named by every row (built as a dictionary: never decoded here).
        arrays["source"] = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array([value]))
        table = pa.table([arrays[f.name] for f in schema], names=[f.name for f in schema])
        buf = io.BytesIO()
        pq.write_table(table, buf, use_dictionary=how == "dictionary", compression="zstd")
        files["rows/run_interrupts.parquet"] = buf.getvalue()
        write_bundle(out, manifest, files)
    elif how == "deep-json":
        column = rng.choice(("dut_config", "generator", "capture", "containment", "invalid_reasons"))
        depth = rng.choice((33, 1000, 100_000))
        runs = runs.set_column(
            runs.column_names.index(column), column, pa.array(["[" * depth + "]" * depth] * runs.num_rows)
        )
        buf = io.BytesIO()
        pq.write_table(runs, buf)
        files["rows/runs.parquet"] = buf.getvalue()
        write_bundle(out, manifest, files)
    elif how == "pax-sparse":
        write_bundle(out, manifest, files)
        with tarfile.open(out, "a", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo(next(n for n in files if n.startswith("series/")))
            info.size = 10
            info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                                "GNU.sparse.realsize": rng.choice(("x", "-1", "99999999999999"))}  # fmt: skip
            tar.addfile(info, io.BytesIO(b"0" * 10))
    else:
        table = rows(files, "analysis_worst")
        if table.num_rows:
            table = pa.concat_tables([table.slice(0, 1)] * 100_000)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        files["rows/analysis_worst.parquet"] = buf.getvalue()
        write_bundle(out, manifest, files)
    return how


def bombs(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Bundles small on disk and large decoded (a dictionary value named by every row, one
    huge string, deep JSON, a pax sparse header, a FIFO fed endless zeros): refused (2) in
    bounded memory (the soak's OOM column), the database as it was."""
    area = "bundle value bombs"
    _, source = _source(work)
    target = work / "t.duckdb"
    from compare_support import experiment

    from lowtail.store import open_store

    with open_store(target) as store:
        experiment(store, "mine")
    i = 0
    while time.monotonic() < until:
        i += 1
        bundle = work / f"bomb-{i % 2}.lowtail"
        before = _experiments(target)
        if rng.random() < 0.15:
            fifo = work / f"zeros-{i}.fifo"
            os.mkfifo(fifo)
            import subprocess

            writer = subprocess.Popen(["sh", "-c", f"cat /dev/zero > {fifo} 2>/dev/null"])
            try:
                rc, _, err = run([*LOWTAIL, "import", str(fifo), "--db", str(target)], work, 120)
            finally:
                writer.kill()
                writer.wait()
                fifo.unlink()
            judge(area, rc, err, (2,), "a FIFO of zeros")
        else:
            how = _bomb_bundle(rng, source, bundle)
            rc, _, err = run([*LOWTAIL, "import", str(bundle), "--db", str(target)], work, 300)
            judge(area, rc, err, (2,), f"{how} bundle")
            if rc == 0:
                bad(area, "internal errors", f"{how}: a bomb was imported")
        if _experiments(target) != before:
            bad(area, "data lost", "a refused import changed the experiments")
        data = work / "lowtail-data"
        if data.exists() and list(data.iterdir()):
            bad(area, "leftovers", f"{sorted(p.name for p in data.iterdir())}")


_ESCAPES = ("\x1b]0;owned\x07", "\x1b[2J", "\x00", "\x9b31m", "\x1b]8;;http://x\x1b\\", "\u202e", "\r", "\x08")


def escapes(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Names with terminal control sequences in a bundle (experiment, DuT, origin host,
    lowtail version of a later format), then every command that prints them: the soak's judge
    counts a control character in any output."""
    import pyarrow as pa
    from bundle_craft import parquet_bytes, read_bundle, rows, write_bundle

    area = "terminal escapes"
    _, source = _source(work)
    i = 0
    while time.monotonic() < until:
        i += 1
        evil = "".join(rng.sample(_ESCAPES, rng.randint(1, 4)))
        manifest, files = read_bundle(source)
        runs = rows(files, "runs")
        files["rows/runs.parquet"] = parquet_bytes(
            runs.set_column(runs.column_names.index("dut_name"), "dut_name", pa.array([f"d{evil}"] * runs.num_rows))
        )
        exps = rows(files, "experiments")
        files["rows/experiments.parquet"] = parquet_bytes(
            exps.set_column(exps.column_names.index("name"), "name", pa.array([f"e{evil}"] * exps.num_rows))
        )
        manifest["origin"]["host"] = f"h{evil}"
        if rng.random() < 0.3:
            manifest = dict(manifest, format_version=99, lowtail_version=f"9{evil}")
        bundle = write_bundle(work / "esc.lowtail", manifest, files, fix=manifest.get("format_version") != 99)
        db = work / f"esc-{i}.duckdb"
        commands = [["import", str(bundle)], ["experiment", "list"], ["list"], ["compare", "1"],
                    ["experiment", "show", "1"], ["certify", "1"]]  # fmt: skip
        for argv in commands:
            rc, out, err = run([*LOWTAIL, *argv, "--db", str(db)], work, 120)
            judge(area, rc, err + out, (1, 2, 3), " ".join(argv[:2]))
        db.unlink(missing_ok=True)


def rules(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """Rule sets a user may mistype: past the maximum, a path outside (never echoed), a file
    of too many rules, special files, a huge file; each refused (2) before any traffic, with
    nothing of the named file on the terminal."""
    area = "rule sets"
    secret = "soak-secret:*:20228:0:99999:7:::"
    (work / "etc").mkdir(exist_ok=True)
    (work / "etc" / "shadow").write_text(secret + "\n")
    (work / "many.rules").write_text(
        "".join(f'alert udp any any -> any 53 (msg:"m"; content:"x"; sid:{1_000_000 + k};)\n' for k in range(100_001))
    )
    with open(work / "huge.rules", "wb") as f:
        f.truncate((64 << 20) + 1)
    # Refused where the experiment file is read, for either kind; a file's content only
    # Suricata reads before any testbed is made (`suricata -T`).
    values = ["100000000000", "100001", "-1", '"/dev/zero"', '"many.rules"', '"huge.rules"', '"/nonexistent"',
              "true", '"１０"']  # fmt: skip
    while time.monotonic() < until:
        kind = rng.choice(("suricata", "nftables"))
        value = rng.choice(values + (['"../etc/shadow"', '"../etc/../etc/shadow"'] if kind == "suricata" else []))
        (work / "sub").mkdir(exist_ok=True)
        spec = work / "sub" / "r.toml"
        spec.write_text(
            '[experiment]\nname = "r"\nduration = "1s"\nwarmup = "0s"\ncalibrate = false\n'
            f'[traffic]\nrates = [1000]\n[[dut]]\nname = "d"\nkind = "{kind}"\nrules = {value}\n'
        )
        rc, out, err = run([*LOWTAIL, "run", str(spec), "--db", str(work / "r.duckdb")], work / "sub", 300)
        judge(area, rc, err, (2,), f"{kind} rules = {value}")
        if secret.split(":")[0] in out + err or "20228" in out + err:
            bad(area, "data lost", f"{kind} rules = {value}: the named file's content reached the terminal")
        if rc == 0:
            bad(area, "internal errors", f"{kind} rules = {value} was run")


def undo_files(rng: random.Random, work: Path, until: float, run: Run, judge: Judge, bad: Callable) -> None:
    """`host undo` of hostile undo files — /dev/zero, a FIFO nobody writes, nesting bombs,
    NaN, a file past the cap, a real undo file mutated — refused (2) or restoring (0), never
    hanging, never reading without end."""
    area = "hostile undo files"
    fifo = work / "u.fifo"
    os.mkfifo(fifo)
    big = work / "big.json"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    real = {"format": "lowtail-host-undo/1", "state": "applied", "sysroot": str(work / "nowhere"), "plan": {},
            "changes": [{"setting": "KSM", "path": "sys/kernel/mm/ksm/run", "written": "0", "before": "1",
                         "restore": "1", "compare": "int"}]}  # fmt: skip
    while time.monotonic() < until:
        how = rng.choice(("zero", "fifo", "nesting", "nan", "big", "mutated", "random"))
        target = work / "u.json"
        if how == "zero":
            target = Path("/dev/zero")
        elif how == "fifo":
            target = fifo
        elif how == "big":
            target = big
        elif how == "nesting":
            depth = rng.choice((33, 10_000, 1_000_000))
            target.write_text('{"format": "lowtail-host-undo/1", "x": ' + "[" * depth + "]" * depth + "}")
        elif how == "nan":
            target.write_text(json.dumps(real).replace('"plan": {}', '"plan": {"x": NaN}'))
        elif how == "mutated":
            target.write_text(json.dumps(_mutate(rng, real, rng.randint(1, 3)), default=str))
        else:
            target.write_bytes(os.urandom(rng.randint(0, 4096)))
        rc, _, err = run([*LOWTAIL, "host", "undo", str(target)], work, 60)
        judge(area, rc, err, (2,), how)
