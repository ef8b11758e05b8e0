"""Ordinary conditions are not internal errors: a user's mistake or the machine's state is
one line on stderr and exit 2 (or 1), never 70; a usage error is one line too; and an
analysis that fails leaves no thread behind that could abort the interpreter (134)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from analyze_support import assert_clean_failure, run_cli, synth

LONG = "a" * 5000


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    p = synth(d, packets=3000, rate_pps=1000)
    db = d / "x.duckdb"
    assert run_cli("analyze", p.pre, p.post, "--db", db).returncode == 0
    return p, db


@pytest.mark.parametrize(
    "extra",
    [["--trim", "inf"], ["--trim", "nan"], ["--trim", "1e300"], ["--max-latency", "1e300s"]],
)
def test_a_duration_lowtail_cannot_hold_is_a_user_error(pair, tmp_path, extra):
    p, _ = pair
    assert_clean_failure(run_cli("analyze", p.pre, p.post, "--no-store", *extra, cwd=tmp_path), 2, extra[0])


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--hgrm", "{dir}"], "is a directory"),
        (["--hgrm", LONG], "too long"),
        (["--report", "{dir}", "--db", "{dir}/r.duckdb"], "is a directory"),
        (["--export", LONG + ".parquet"], "too long"),
        (["--db", LONG + ".duckdb"], "too long"),
    ],
)
def test_a_result_file_that_cannot_be_written_is_one_line(pair, tmp_path, extra, needle):
    p, _ = pair
    args = [a.replace("{dir}", str(tmp_path)) for a in extra]
    store = [] if "--db" in args else ["--no-store"]
    done = run_cli("analyze", p.pre, p.post, *store, *args, cwd=tmp_path)
    assert_clean_failure(done, 2, needle)
    assert not list(tmp_path.glob(".*partial"))


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can write into: a read-only tmpfs for root (root ignores
    permissions), a directory without write permission for anyone else."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(d)], check=True)
        yield d
        subprocess.run(["umount", "-l", str(d)], check=False)
    else:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)


@pytest.mark.parametrize(
    "extra",
    [["--db", "{ro}/x.duckdb"], ["--no-store", "--hgrm", "{ro}/x.hgrm"], ["--no-store", "--export", "{ro}/s.parquet"]],
)
def test_an_output_in_a_read_only_directory_is_one_line(pair, tmp_path, read_only_dir, extra):
    """Before: the database in a read-only directory was "internal error" (exit 70)."""
    p, _ = pair
    args = [a.replace("{ro}", str(read_only_dir)) for a in extra]
    done = run_cli("analyze", p.pre, p.post, *args, cwd=tmp_path)
    assert_clean_failure(done, 2, str(read_only_dir))
    assert list(read_only_dir.iterdir()) == []


@pytest.mark.parametrize("which", ["pre", "post"])
def test_a_capture_path_too_long_is_one_line(pair, tmp_path, which):
    p, _ = pair
    pre, post = (LONG, p.post) if which == "pre" else (p.pre, LONG)
    assert_clean_failure(run_cli("analyze", pre, post, "--no-store", cwd=tmp_path), 2, "too long")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show", "abc"], "'abc' is not an id"),
        (["show", "1.5"], "'1.5' is not an id"),
        (["model", "knee", "1.5"], "'1.5' is not an id"),  # an id or 'latest'
        (["show", "99"], "none of its analyses has id 99"),
        (["report", "abc"], "'abc' is not an id"),
        (["experiment", "report", "abc"], "'abc' is not an id"),
    ],
)
def test_an_id_that_is_not_one_is_a_user_error(pair, tmp_path, args, needle):
    _, db = pair
    assert_clean_failure(run_cli(*args, "--db", db, cwd=tmp_path), 2, needle)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["analyze", "{pre}", "{post}", "--trim", "-1"], "--trim"),
        (["analyze", "{pre}", "{post}", "--worst", "-1"], "--worst"),
        (["analyze", "{pre}", "{post}", "--worst", "1.5"], "--worst"),
        (["analyze", "{pre}", "{post}", "--udp-port", "70000"], "--udp-port"),
        (["analyze", "{pre}"], "POST"),
        (["analyze", "{pre}", "{post}", "--no-such-option"], "--no-such-option"),
        (["list", "--limit", "1.5"], "--limit"),
    ],
)
def test_usage_errors_are_one_line(pair, tmp_path, args, needle):
    p, _ = pair
    argv = [a.replace("{pre}", str(p.pre)).replace("{post}", str(p.post)) for a in args]
    line = assert_clean_failure(run_cli(*argv, cwd=tmp_path), 2, needle, "-h shows the usage")
    assert line.startswith("lowtail: error: ")


@pytest.mark.parametrize(
    "args, where",
    [
        (["--db", "x.duckdb", "run"], "lowtail run --db …"),
        (["--json", "experiment", "list"], "lowtail experiment list --json …"),
        (["--db", "x.duckdb"], "lowtail COMMAND --db …"),
    ],
)
def test_a_commands_option_before_the_command_says_where_it_goes(tmp_path, args, where):
    """`lowtail --db x run` said "No such option '--db'" and nothing of where it goes."""
    line = assert_clean_failure(run_cli(*args, cwd=tmp_path), 2, "No such option")
    assert line.endswith(f"(a command's option goes after the command: {where})"), line
    assert "Did you mean" not in line


@pytest.mark.parametrize("typo, command", [(["analyse"], "analyze"), (["host", "aplly"], "apply")])
def test_a_mistyped_command_is_suggested_once(tmp_path, typo, command):
    line = assert_clean_failure(run_cli(*typo, cwd=tmp_path), 2, f"did you mean '{command}'")
    assert line.lower().count("did you mean") == 1


def test_no_arguments_still_show_the_help(tmp_path):
    done = run_cli(cwd=tmp_path)
    assert done.returncode == 2 and "Usage: lowtail" in done.stderr and "analyze" in done.stderr


_THREADS_AFTER_MAIN = """
import sys, threading
from lowtail.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
alive = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive())
print(code, alive)
"""


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_failed_analysis_leaves_no_thread_running(pair, tmp_path):
    """The database driver is imported on a thread while the analysis runs; an analysis
    that fails at once (a trim longer than the captures) must not end the command while
    that import is still running: an interpreter exiting under DuckDB's import aborts
    (exit 134, "FATAL: exception not rethrown") — 7 in 150 runs before."""
    p, _ = pair
    done = subprocess.run(
        [sys.executable, "-c", _THREADS_AFTER_MAIN, "analyze", p.pre, p.post, "--trim", "100s", "--db", "x.duckdb"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "1 []", (done.stdout, done.stderr)
    for _ in range(5):  # and as a user runs it, a few times
        run = run_cli("analyze", p.pre, p.post, "--trim", "100s", "--db", "y.duckdb", cwd=tmp_path, process=True)
        assert_clean_failure(run, 1, "--trim")


@pytest.mark.parametrize(("number", "code", "label"), [(9, 70, "internal error"), (28, 1, "error")])
def test_an_os_error_without_a_file_of_the_users_is_told_by_whose_it_is(monkeypatch, capsys, number, code, label):
    """Before: "lowtail: error: Bad file descriptor", exit 2, as if the user had given a bad
    file (a fresh clone's `lowtail run`, 1a375dd). A closed descriptor is lowtail's own bug
    (exit 70); a full disk is the machine's (exit 1)."""
    import lowtail.cli as cli

    def broken(argv: list[str]) -> None:
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(cli, "_say_leftovers", broken)
    with pytest.raises(SystemExit) as ended:
        cli.main(["list"])
    assert ended.value.code == code
    err = capsys.readouterr().err
    assert err.startswith(f"lowtail: {label}: ")
    if code == 70:  # a bug says where in lowtail it came from, in its one line
        assert "(at lowtail/cli/__init__.py:" in err and " in main; LOWTAIL_DEBUG=1 shows a traceback)" in err, err
        assert err.count("\n") == 1, err
