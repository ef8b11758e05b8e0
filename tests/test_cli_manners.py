"""The manners of the command line, through the real command: one version for the module
and every native program, shell completion that bash really uses, help topics, errors as
JSON with --json, one formatter of durations in every table, the files commands promise
and where they say they wrote."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail import _native
from lowtail.core.binaries import find_binary
from lowtail.core.errors import UserError
from lowtail.store import open_store
from lowtail.store.analyses import worst_events

LOWTAIL = [sys.executable, "-m", "lowtail"]
BIN = Path(sys.executable).parent


def lowtail(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_version_names_the_build_and_the_native_programs_agree():
    done = lowtail("--version")
    assert done.returncode == 0
    first = done.stdout.splitlines()[0]
    assert first == f"lowtail {_native.LONG_VERSION}"
    assert re.fullmatch(r"lowtail \d+\.\d+\.\d+ \(commit ([0-9a-f]{10}|unknown), (release|debug) build\)", first)
    checked = 0
    for name in ("lowtail-gen", "lowtail-cap", "lowtail-fwd", "lowtail-leash", "lowtail-noise"):
        try:
            program = find_binary(name)
        except UserError:
            continue
        out = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=10)
        assert out.returncode == 0 and out.stdout.strip() == f"{name} {_native.LONG_VERSION}", (name, out)
        checked += 1
    if not checked:
        pytest.skip("the native programs are not built (make build)")


def _complete(words: list[str], cword: int) -> list[str]:
    """What bash completes after sourcing `lowtail completion bash`, as Tab would."""
    script = (
        "source <(lowtail completion bash)\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={cword}\n"
        '"$(complete -p lowtail | sed -E "s/.* -F ([^ ]+) .*/\\1/")" lowtail\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_bash_completion_completes_commands_subcommands_and_options():
    if not (BIN / "lowtail").exists():
        pytest.skip("the lowtail command is not installed in this environment")
    assert _complete(["lowtail", "experi"], 1) == ["experiment"]
    assert "report" in _complete(["lowtail", "experiment", "re"], 2)
    assert _complete(["lowtail", "run", "--fr"], 2) == ["--fresh"]
    assert _complete(["lowtail", "completion", ""], 2) == ["bash", "zsh", "fish"]
    assert "budget" in _complete(["lowtail", "help", ""], 2)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_completion_scripts_for_the_other_shells_call_lowtail_back(shell):
    done = lowtail("completion", shell)
    assert done.returncode == 0 and "_LOWTAIL_COMPLETE=complete_" + shell in done.stdout


def test_the_command_registry_names_every_command_and_its_module():
    """`lowtail CMD` loads CMD's module alone, found in COMMAND_MODULES: a command added
    without its line there would be unknown to `lowtail CMD` (it is in every listing)."""
    probe = (
        "from lowtail.cli import COMMAND_MODULES, load_commands; load_commands([]); "
        "from lowtail.cli._app import app; "
        "cmds = {(c.name or c.callback.__name__.replace('_', '-')): c.callback.__module__ "
        "for c in app.registered_commands}; "
        "cmds |= {g.name: g.typer_instance.registered_commands[0].callback.__module__ "
        "for g in app.registered_groups}; "
        "print(cmds == {k: 'lowtail.cli.' + v for k, v in COMMAND_MODULES.items()}, sorted(cmds))"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert found.stdout.startswith("True"), found.stdout + found.stderr


def test_a_command_loads_its_own_module_and_no_other():
    probe = (
        "import sys; from lowtail.cli import load_commands; load_commands(['analyze', 'a.pcap', 'b.pcap']); "
        "print(sorted(m for m in sys.modules if m.startswith('lowtail.cli.') and not m.startswith('lowtail.cli._')))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert loaded.stdout.strip() == "['lowtail.cli.analyze', 'lowtail.cli.completion']", loaded.stdout + loaded.stderr
    # A word that names no command still gets click's suggestion, from every command's name.
    typo = lowtail("analyse", "a", "b")
    assert typo.returncode == 2 and "analyze" in typo.stderr and typo.stderr.count("\n") == 1


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_help_topics_and_help_of_a_command():
    listing = lowtail("help")
    assert listing.returncode == 0
    for topic in ("budget", "floor", "trim", "percentiles", "database"):
        assert topic in listing.stdout
        page = lowtail("help", topic)
        assert page.returncode == 0 and len(page.stdout.splitlines()) > 5, topic
    assert lowtail("help", "experiment", "report").stdout == lowtail("experiment", "report", "--help").stdout
    unknown = lowtail("help", "nonsense")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "budget" in unknown.stderr


def test_the_budget_page_states_the_figures_the_code_uses():
    """`lowtail help budget` said a run needs 100,000 packets for 99.999 % and that "auto"
    measures 5.5 s at 20 kpps, where the verdict needs 299,572 and auto measures 24 s: its
    figures are now read against the code's, so they cannot drift again."""
    from lowtail.cli.topics import page
    from lowtail.core import percentiles
    from lowtail.experiment.spec import auto_duration_ns
    from lowtail.verdict.judge import Verdict

    text = " ".join(page("budget").split())
    for percent in (99.999, 99.99, 99.9):
        assert f"{Verdict(percent, 1, 0).packets_needed:,}" in text, percent
    needed = Verdict(99.999, 1, 0).packets_needed
    # …the units page shows settings as they are written…
    from lowtail.core.units import format_duration_setting

    units = page("units")
    for ns in (180 * 10**9, 2_500_000):
        assert f"`{format_duration_setting(ns)}`" in units, format_duration_setting(ns)
    # …and the percentiles page names every percentile the tables show.
    listed = " ".join(page("percentiles").split())
    assert all(f"{p.digits}th" in listed for p in percentiles.HEADLINE), listed[:300]
    for rate, said in ((20_000, "24 s at 20 kpps"), (100_000, "4.8 s at 100 kpps")):
        assert said in text and said.startswith(f"{auto_duration_ns(rate, needed) / 1e9:g} s")


def test_with_json_an_error_is_a_json_document_on_stdout_too(tmp_path):
    done = lowtail("show", "latest", "--json", "--db", str(tmp_path / "none.duckdb"))
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"error": json.loads(done.stdout)["error"], "exit_code": 2}
    assert "no such database" in json.loads(done.stdout)["error"]
    assert done.stderr.startswith("lowtail: error: ") and done.stderr.count("\n") == 1
    # Without --json, stdout stays empty.
    plain = lowtail("show", "latest", "--db", str(tmp_path / "none.duckdb"))
    assert plain.returncode == 2 and plain.stdout == ""


@pytest.fixture(scope="module")
def synth_pair(tmp_path_factory) -> Path:
    """`lowtail synth` with its defaults, and a base latency of 6.93 ms."""
    d = tmp_path_factory.mktemp("synth")
    done = lowtail("synth", "pre.pcap", "post.pcap", "--set", "base_latency_ns=6933694", cwd=d)
    assert done.returncode == 0, done.stderr
    return d


def test_synth_then_analyze_with_the_defaults_works_and_reports_enough_packets(synth_pair):
    done = lowtail("analyze", "pre.pcap", "post.pcap", "--json", "--no-store", cwd=synth_pair)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["trim_ns"] == 1_000_000_000
    assert doc["latency_ns"]["samples"] >= 100_000  # enough for the 99.999th percentile


def test_analyze_json_is_a_summary_of_the_worst_events_and_the_store_keeps_them_all(synth_pair, tmp_path):
    """--json prints the 20 worst events, worst first (370 KB of 5,000 events before), --worst N
    more; the stored analysis keeps the 5,000 the report and the models read either way."""
    db = tmp_path / "w.duckdb"
    done = lowtail("analyze", "pre.pcap", "post.pcap", "--json", "--db", str(db), cwd=synth_pair)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    latencies = [w["latency_ns"] for w in doc["worst"]]
    assert len(latencies) == 20 and latencies == sorted(latencies, reverse=True) and doc["worst_kept"] == 5_000
    assert len(done.stdout) < 40_000
    with open_store(db, read_only=True) as store:
        stored = worst_events(store, doc["analysis_id"])
    assert len(stored) == 5_000 and max(v for _, v, _ in stored) == latencies[0]
    more = lowtail("analyze", "pre.pcap", "post.pcap", "--json", "--no-store", "--worst", "300", cwd=synth_pair)
    assert len(json.loads(more.stdout)["worst"]) == 300


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_list_fits_100_columns_one_line_per_analysis(synth_pair, tmp_path):
    """A long label and a capture deep in folders: one line per analysis within 100 columns,
    the date whole, the capture's file name (not a prefix of its folder)."""
    deep = tmp_path / "campaign-2026-11-27" / "kernel-mirred" / "rate-20000"
    deep.mkdir(parents=True)
    for side in ("pre", "post"):
        shutil.copy(synth_pair / f"{side}.pcap", deep / f"mirred-20kpps-r3-{side}.pcap")
    db = tmp_path / "l.duckdb"
    label = "kernel mirred at twenty thousand packets per second"
    args = ("analyze", str(deep / "mirred-20kpps-r3-pre.pcap"), str(deep / "mirred-20kpps-r3-post.pcap"))
    for trim in ("1s", "500ms"):  # two analyses (the same one twice is stored once)
        assert lowtail(*args, "--db", str(db), "--label", label, "--trim", trim).returncode == 0
    done = lowtail("list", "--db", str(db), env=os.environ | {"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").splitlines()
    assert len(lines) == 3 and all(len(line) <= 100 for line in lines), done.stdout
    assert all(re.search(r"\b\w{3} \d\d \d\d:\d\d\b", line) for line in lines[1:])
    assert all("mirred-20kpps-r3-pre" in line for line in lines[1:])  # the name, cut at its end if need be
    # At 80 columns the capture's name stays, its middle cut: its start and its end are there.
    # Before: the column was dropped below 90 columns.
    narrow = lowtail("list", "--db", str(db), env=os.environ | {"COLUMNS": "80"})
    lines = narrow.stdout.rstrip("\n").splitlines()
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines), narrow.stdout
    assert "pre capture" in lines[0] and all(re.search(r"\bmirred-\S*…\S*pre\.pcap$", line) for line in lines[1:]), (
        narrow.stdout
    )


def test_one_duration_formatter_for_analyze_list_show_and_the_report(synth_pair, tmp_path):
    db = tmp_path / "t.duckdb"
    analyzed = lowtail("analyze", "pre.pcap", "post.pcap", "--db", str(db), cwd=synth_pair)
    assert analyzed.returncode == 0, analyzed.stderr
    for args in (["list"], ["show", "latest"]):
        done = lowtail(*args, "--db", str(db))
        assert done.returncode == 0
        assert re.search(r"\b6\.9\d\d ms\b", done.stdout), (args, done.stdout)
        assert not re.search(r"\d{4}\.\d{3} µs", done.stdout), (args, done.stdout)
    assert re.search(r"\b6\.9\d\d ms\b", analyzed.stdout) and "µs" not in analyzed.stdout.split("mean")[0]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_report_latest_writes_the_file_its_help_promises_and_says_so(synth_pair, tmp_path):
    db = tmp_path / "t.duckdb"
    assert lowtail("analyze", "pre.pcap", "post.pcap", "--db", str(db), cwd=synth_pair).returncode == 0
    assert "lowtail-report-<id>.html" in lowtail("report", "--help").stdout
    done = lowtail("report", "latest", "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0
    written = list(tmp_path.glob("lowtail-report-*.html"))
    assert [p.name for p in written] == ["lowtail-report-1.html"]
    assert done.stderr.strip() == "wrote lowtail-report-1.html"


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_analyze_says_where_it_wrote_and_exports_csv_beside_parquet(synth_pair, tmp_path):
    db = tmp_path / "t.duckdb"
    report, csv_path, parquet = tmp_path / "r.html", tmp_path / "s.csv", tmp_path / "s.parquet"
    done = lowtail(
        "analyze", "pre.pcap", "post.pcap", "--db", str(db), "--report", str(report), "--export", str(csv_path),
        cwd=synth_pair,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"stored as analysis 1 in {db}" in done.stderr
    assert f"wrote the report to {report}" in done.stderr and report.exists()
    assert f"wrote the matched series to {csv_path}" in done.stderr
    assert not list(tmp_path.glob(".*")), "no temporary file is left"
    assert (
        lowtail("analyze", "pre.pcap", "post.pcap", "--no-store", "--export", str(parquet), cwd=synth_pair).returncode
        == 0
    )
    table = pq.read_table(parquet)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == table.column_names
    assert len(rows) == table.num_rows
    for i in (0, len(rows) // 2, len(rows) - 1):
        assert {k: int(v) for k, v in rows[i].items()} == {k: table.column(k)[i].as_py() for k in table.column_names}
    bad = lowtail("analyze", "pre.pcap", "post.pcap", "--export", str(tmp_path / "s.xlsx"), cwd=synth_pair)
    assert bad.returncode == 2 and ".parquet or .csv" in bad.stderr


def test_every_command_uses_the_same_database_lowtail_db_moves_it(synth_pair, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LOWTAIL_DB"}
    plain = lowtail("analyze", str(synth_pair / "pre.pcap"), str(synth_pair / "post.pcap"), cwd=tmp_path, env=env)
    assert plain.returncode == 0 and "in lowtail.duckdb" in plain.stderr
    assert (tmp_path / "lowtail.duckdb").exists()
    moved = tmp_path / "elsewhere.duckdb"
    env["LOWTAIL_DB"] = str(moved)
    again = lowtail("analyze", str(synth_pair / "pre.pcap"), str(synth_pair / "post.pcap"), cwd=tmp_path, env=env)
    assert again.returncode == 0 and f"in {moved}" in again.stderr
    listed = lowtail("list", "--json", cwd=tmp_path, env=env)
    assert [r["analysis_id"] for r in json.loads(listed.stdout)] == [1]
    assert lowtail("experiment", "list", "--json", cwd=tmp_path, env=env).returncode == 0


def test_help_lists_the_commands_by_workflow():
    """`lowtail --help` in the order a newcomer works (it was one flat list in no order):
    measure, analyse, compare, explain, tune, host, data; every command in one section."""
    from lowtail.cli._app import HELP_PANELS, OTHER_PANEL

    done = lowtail("--help", env=os.environ | {"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    headings = re.findall(r"^(\w[\w ]*):$", done.stdout, re.M)
    assert headings == ["Options", "Measure", "Analyse", "Compare", "Explain", "Tune", "Host", "Data"], headings
    assert OTHER_PANEL not in done.stdout  # every command has its place in HELP_PANELS
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", done.stdout, re.M)
    assert len(listed) == len(set(listed)) and set(listed) <= {n for names in HELP_PANELS.values() for n in names}
    # Each description whole, wrapped where it is long: click cut each at 45 characters,
    # mid-sentence ("Run a latency experiment: every combination of the...").
    assert "..." not in done.stdout.split("Measure:")[1], done.stdout
    assert "  run        Run a latency experiment\n" in done.stdout


def test_an_off_by_default_flag_is_shown_once():
    """A flag that is off unless given has no --no-FLAG twin in any command's help (run's
    help showed --print-default / --no-print-default)."""
    import click
    import typer

    from lowtail.cli import app, load_commands

    load_commands([])

    def options(command: click.Command, path: str):
        for param in command.params:
            if isinstance(param, click.Option):
                yield path, param
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from options(sub, f"{path} {name}")

    twins = [
        f"{path}: {'/'.join(p.opts + p.secondary_opts)}"
        for path, p in options(typer.main.get_command(app), "lowtail")
        if p.is_flag and p.secondary_opts and not p.default
    ]
    assert not twins, twins


def test_trim_takes_a_duration_as_every_other_option(synth_pair):
    """--trim 500ms (it said "not a valid float range"), 1.5s, 0; a plain number is refused
    (it was read as seconds: `--trim 500` cut 500 s)."""
    for value, ns in (("500ms", 500_000_000), ("1.5s", 1_500_000_000), ("0", 0)):
        done = lowtail("analyze", "pre.pcap", "post.pcap", "--json", "--no-store", "--trim", value, cwd=synth_pair)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["trim_ns"] == ns
    done = lowtail("analyze", "pre.pcap", "post.pcap", "--no-store", "--trim", "0.25", cwd=synth_pair)
    assert done.returncode == 2 and "'--trim': 0.25 has no unit" in done.stderr, done.stderr


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80), width=st.integers(min_value=3, max_value=60))
def test_a_name_cut_in_its_middle_keeps_its_start_and_its_end(text, width):
    from lowtail.cli._render import middle_cut

    cut = middle_cut(text, width)
    assert len(cut) <= width
    if len(text) <= width:
        assert cut == text
    else:
        head, tail = cut.split("…", 1) if "…" not in text else (cut[: (width - 1) // 2], cut[(width - 1) // 2 + 1 :])
        assert text.startswith(head) and text.endswith(tail) and len(head) + len(tail) == width - 1
