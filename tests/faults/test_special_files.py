"""Results are written only as regular files (issue 21, item 4): an output that names a
character device, a FIFO, a socket or a directory is refused in one line (exit 2) and left as
it was, for every command that writes one. Before, `report latest -o n1`, `experiment report`,
`compare`, `export` and `synth` each turned `mknod n1 c 1 3` (the numbers of /dev/null) or a
FIFO into a regular file, exit 0 — as root, `-o /dev/null` replaced the system's."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from analyze_support import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
from compare_support import experiment, store_run  # noqa: E402

from lowtail.store import open_store  # noqa: E402


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A database with one experiment of two runs, and a capture pair."""
    tmp = tmp_path_factory.mktemp("stored")
    db = tmp / "s.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "one")
        store_run(store, tmp, eid, "wire", "wire", base_latency_ns=3_000, seed=1)
        store_run(store, tmp, eid, "fwd", seed=2)
    return db, tmp / "e1-fwd-bare-10000-r0-__-pre.pcap", tmp / "e1-fwd-bare-10000-r0-__-post.pcap"


def special(path: Path, kind: str) -> None:
    if kind == "device":
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    else:
        path.mkdir()


COMMANDS = {
    "report": ["report", "latest", "-o", "{out}", "--db", "{db}"],
    "experiment report": ["experiment", "report", "1", "-o", "{out}", "--db", "{db}"],
    "compare": ["compare", "1", "-o", "{out}", "--db", "{db}"],
    "export": ["export", "1", "-o", "{out}", "--db", "{db}"],
    "synth PRE": ["synth", "{out}", "post.pcap", "--packets", "100"],
    "synth --truth": ["synth", "pre.pcap", "post.pcap", "--packets", "100", "--truth", "{out}"],
    "analyze --hgrm": ["analyze", "{pre}", "{post}", "--trim", "0", "--no-store", "--hgrm", "{out}"],
    "analyze --export": ["analyze", "{pre}", "{post}", "--trim", "0", "--no-store", "--export", "{out}.parquet"],
    "analyze --report": ["analyze", "{pre}", "{post}", "--trim", "0", "--db", "{db}", "--report", "{out}"],
    "model --plot": ["model", "simulate", "--service", "15us", "--no-store", "--plot", "{out}.png"],
}


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
@pytest.mark.parametrize(
    "command, kind",
    [(c, k) for c in COMMANDS for k in ("device", "fifo")]
    + [(c, k) for c in ("report", "export") for k in ("socket", "directory")],
)
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(stored, tmp_path, command, kind):
    db, pre, post = stored
    out = tmp_path / "n1"
    args = [a.format(out=out, db=db, pre=pre, post=post) for a in COMMANDS[command]]
    target = Path(next(a for a in args if a.startswith(str(out))))
    special(target, kind)
    before = os.stat(target)
    done = run_cli(*args, cwd=tmp_path)  # in this process: the start-up is most of each case
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(target.name) in lines[0], done.stderr
    after = os.stat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    if command.startswith("synth"):
        assert not (tmp_path / "post.pcap").exists() and not (tmp_path / "pre.pcap").exists()


@pytest.mark.parametrize("kept", ["database", "capture"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_result_is_never_written_over_a_database_or_a_capture(stored, tmp_path, command, kept):
    """Before: `report 1 -o t.duckdb --db t.duckdb` and `compare … -o t.duckdb` replaced the
    database with the HTML page (exit 0, everything stored lost), and `analyze --report` over
    a capture replaced it. Now such an output is refused in one line and the file kept as it
    was; only `synth` writes over a capture (it writes captures)."""
    db, pre, post = stored
    out = tmp_path / "n1"
    args = [a.format(out=out, db=db, pre=pre, post=post) for a in COMMANDS[command]]
    target = Path(next(a for a in args if a.startswith(str(out))))
    target.write_bytes((db if kept == "database" else pre).read_bytes())
    before = target.read_bytes()
    done = run_cli(*args, cwd=tmp_path)
    if command.startswith("synth") and kept == "capture":
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    named = {"database": "is a lowtail database (DuckDB)", "capture": "is a capture (pcap"}[kept]
    assert len(lines) == 1 and named in lines[0] and "does not write a result over it" in lines[0], lines
    assert target.read_bytes() == before


EXPERIMENT = """
[experiment]
name = "e"
duration = "1s"
repetitions = 2
[traffic]
rates = ["1kpps"]
[[dut]]
name = "k"
kind = "kernel-mirred"
"""


@pytest.mark.parametrize(
    "args, said",
    [
        (["synth", "a.pcap", "./a.pcap", "--packets", "100"], "POST a.pcap: the same file as PRE a.pcap"),
        (["synth", "a.pcap", "b.pcap", "--truth", "a.pcap", "--packets", "100"], "--truth a.pcap: the same file as PRE"),
        (["analyze", "{pre}", "{post}", "--no-store", "--export", "o.csv", "--hgrm", "o.csv"], "--hgrm o.csv: the same file as --export"),
        (["analyze", "{pre}", "{post}", "--db", "n.duckdb", "--report", "{pre}"], "is a capture (pcap)"),
        (["run", "e.toml", "--db", "n.duckdb", "--report", "./e.toml"], "the same file as the experiment file e.toml"),
        (["tune", "e.toml", "--db", "n.duckdb", "-o", "e.toml"], "the same file as FILE e.toml"),
    ],
    ids=["synth-pre-post", "synth-truth", "analyze-export-hgrm", "analyze-report-over-pre", "run-report-over-file",
         "tune-report-over-file"],
)  # fmt: skip
def test_two_outputs_or_an_output_and_an_input_naming_one_file_are_refused(stored, tmp_path, args, said):
    """Before: `synth a.pcap ./a.pcap` failed with "a.pcap: No such file or directory" after
    rewriting a.pcap; `analyze --export o.csv --hgrm o.csv` wrote the series, then the
    distribution over it (exit 0); `analyze --report PRE` wrote the page over the capture;
    `run e.toml --report e.toml` and `tune e.toml -o e.toml` the page over the experiment file."""
    _, pre, post = stored
    (tmp_path / "a.pcap").write_bytes(pre.read_bytes())
    (tmp_path / "e.toml").write_text(EXPERIMENT)
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    done = run_cli(*[a.format(pre=pre, post=post) for a in args], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == kept
    assert pre.read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\n\r\r\n")


# -- issue 32: --db, outputs checked before work, ASCII digits ---------------------------------------

DB_COMMANDS = {
    "list": ["list", "--db", "{db}"],
    "experiment list": ["experiment", "list", "--db", "{db}"],
    "import": ["import", "{bundle}", "--db", "{db}"],
    "export": ["export", "1", "-o", "{out}", "--db", "{db}"],
}


@pytest.mark.parametrize("command", DB_COMMANDS)
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_database_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path, command, kind):
    """Before: `--db FIFO` hung `list`, `experiment list`, `import` and `export`."""
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    db = tmp_path / "d.duckdb"
    special(db, kind)
    (tmp_path / "b.lowtail").write_bytes(b"x" * 1024)
    args = [a.format(db=db, bundle=tmp_path / "b.lowtail", out=tmp_path / "o.lowtail") for a in DB_COMMANDS[command]]
    done = subprocess.run([sys.executable, "-m", "lowtail", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a lowtail database" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


WORK_FIRST = {
    "experiment report": ["experiment", "report", "1", "-o", "{out}", "--db", "{db}"],
    "explain": ["explain", "latest", "-o", "{out}", "--db", "{db}"],
    "certify": ["certify", "1", "-o", "{out}", "--db", "{db}"],
    "report": ["report", "latest", "-o", "{out}", "--db", "{db}"],
}


@pytest.mark.parametrize("command", WORK_FIRST)
def test_an_output_fifo_is_refused_before_any_work(stored, tmp_path, command):
    """Before: `experiment report`, `explain`, `certify` and `report -o FIFO` refused the
    output only after 5 s of work; now before the database is opened (a missing one is not
    even made)."""
    out = tmp_path / "out.fifo"
    os.mkfifo(out)
    missing = tmp_path / "none.duckdb"
    args = [a.format(out=out, db=missing) for a in WORK_FIRST[command]]
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2 and "is a FIFO" in done.stderr, done.stderr
    assert not missing.exists()


@pytest.mark.parametrize(
    "args",
    [["explain", "１"], ["noise", "--cpus", "０", "--duration", "1s"], ["compare", "1", "--percentile", "９９.９"],
     ["show", "１"], ["host", "plan", "--isolated", "１-３"]],
    ids=["explain-id", "noise-cpus", "compare-percentile", "show-id", "host-plan-cpus"],
)  # fmt: skip
def test_numbers_in_other_scripts_digits_are_refused(stored, tmp_path, args):
    """Before: `explain １`, `noise --cpus ０` and `compare --percentile ９９.９` ran as if 1,
    0 and 99.9 had been typed."""
    db, _, _ = stored
    done = run_cli(*args, "--db", db, cwd=tmp_path) if args[0] in ("explain", "compare", "show") else run_cli(*args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
