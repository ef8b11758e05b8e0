"""Experiment files and import specs are untrusted input: whatever a file holds, lowtail says
what is wrong in one line naming the file, the line and the field (exit 2), never an internal
error (70), and stores nothing. The fixed cases are the outside soak's reproductions (issue
21, items 9 and 10); the property tests generate hostile documents of every shape
(`LOWTAIL_HYPOTHESIS_EXAMPLES` raises how many; `make soak`'s hostile-spec area runs the real
commands on randomly edited files for minutes)."""

from __future__ import annotations

import os
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowtail.core import schema
from lowtail.core.errors import UserError
from lowtail.experiment import external, spec
from lowtail.store import open_store

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_support import one_line  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]
EXAMPLES = int(os.environ.get("LOWTAIL_HYPOTHESIS_EXAMPLES", "60"))


def lowtail(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def experiments_in(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT experiment_id, status FROM experiments").fetchall()


# -- the reproductions ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A directory with one capture pair, and a database it was never imported into."""
    from lowtail import _native

    d = tmp_path_factory.mktemp("campaign")
    (d / "c").mkdir()
    _native.synth_pair(str(d / "c" / "fwd-pre.pcap"), str(d / "c" / "fwd-post.pcap"), '{"packets": 2000}')
    return d


@pytest.mark.parametrize(
    "text, needle",
    [
        ('axes = 5\n[import]\npattern = "{dut}-{side}.pcap"\n', "spec.toml line 1: [axes] must be a table"),
        ('analysis = "x"\n[import]\npattern = "{dut}-{side}.pcap"\n', "line 1: [analysis] must be a table"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nrepetition = "²"\n', "line 4: [axes] repetition"),
        (
            '[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nframe_size = 99999999999999999999999\n',
            "line 4: axes.frame_size",
        ),
        (
            '[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nframe_size = "99999999999999999999999"\n',
            "line 4: [axes] frame_size: must be a whole number",
        ),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nrate = "1e99k"\n', "line 4: [axes] rate: 1e99k"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nrate = -5\n', "line 4: [axes] rate: -5"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[axes]\nhost = [1, 2]\n', "line 4: [axes] host must be"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[verdict]\npercentile = [1]\n', "line 4: [verdict] percentile"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[analysis]\nid_format = 5\n', "line 4: [analysis] id_format"),
        ('[import]\npattern = "{dut}-{side}.pcap"\n[analysis]\ntrim_ns = 5\n', "did you mean 'trim'?"),
    ],
)
def test_an_import_spec_that_breaks_a_rule_is_one_line_and_stores_nothing(campaign, text, needle):
    """Before: exit 70 for each (a list for a table, "²".isdigit(), integers past 64 bits,
    1e99k packets per second), "failed" experiments with no runs for the last two, and
    −5 pps stored as a rate."""
    (campaign / "spec.toml").write_text(text)
    done = lowtail(campaign, "import-captures", "c", "--spec", "spec.toml", "--db", "t.duckdb")
    assert needle in one_line(done)
    assert experiments_in(campaign / "t.duckdb") == []


def test_an_experiment_file_nested_5000_lists_deep_is_one_line(tmp_path):
    """Before: RecursionError, exit 70."""
    deep = "[" * 5000 + "1" + "]" * 5000
    (tmp_path / "deep.toml").write_text(
        f'[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "f"\nkind = "lowtail-fwd"\nwork_ns = {deep}\n'
    )
    line = one_line(lowtail(tmp_path, "calibrate", "deep.toml", "--db", "t.duckdb"))
    assert "deep.toml line 6: nested more than" in line
    (tmp_path / "deep.toml").write_text("[traffic]\nrates = " + "[" * 40 + "1" + "]" * 40 + "\n")
    assert "deep.toml line 2: traffic.rates[0]" in one_line(lowtail(tmp_path, "calibrate", "deep.toml"))


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            "[traffic]\nrates = [99999999999999999999999]\n",
            "line 2: traffic.rates[0]: 99999999999999999999999 is larger",
        ),
        ('[traffic]\nrates = ["²"]\n', "line 2: rates: cannot read '²' as a rate"),
        ("[traffic]\nrates = [inf]\n", "line 2: traffic.rates[0]: inf is not a finite number"),
        ("[traffic]\nrats = [1000]\n", "unknown key 'rats' in [traffic] (did you mean 'rates'?"),
        ("[trafic]\nrates = ['1000pps']\n", "unknown section [trafic] (did you mean [traffic]?"),
        ("traffic = 5\n", "line 1: [traffic] must be a table, not 5"),
        ('[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = [1]\n', "line 5: DuT 'a': unknown kind [1]"),
        (
            "[experiment]\nrepetitions = 1000000\n[traffic]\nrates = ['1000pps', '2000pps', '3000pps']\n",
            "declares 3,000,000 runs",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "f"\nkind = "lowtail-fwd"\n'
            f"work_ns = {list(range(1000))}\nbatch = {list(range(1, 1001))}\n",
            "sweeps over 1,000,000 configurations",
        ),
    ],
)
def test_an_experiment_file_that_breaks_a_rule_is_one_line(text, needle):
    """Before: exit 70 for an unhashable kind, and a sweep of a million DuT configurations
    was built in memory before anything was said (a few such lists exhaust memory)."""
    with pytest.raises(UserError) as e:
        spec.parse(text, "exp.toml")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_an_experiment_file_is_read_only_from_a_file_or_a_fifo(tmp_path):
    """A device is refused without reading a byte (/dev/zero would never end); a FIFO is read
    (`lowtail run <(…)`), and one nobody writes to is given up on."""
    assert "is a character device" in one_line(lowtail(tmp_path, "calibrate", "/dev/zero"))
    assert "is a directory" in one_line(lowtail(tmp_path, "calibrate", str(tmp_path)))


def test_synth_refuses_numbers_it_cannot_pass_on(tmp_path):
    """Before: `synth --rate inf` said "expected value at line 1 column 31" (the JSON the
    native generator was handed)."""
    assert "Invalid value for '--rate': cannot read 'inf' as a rate" in one_line(
        lowtail(tmp_path, "synth", "a.pcap", "b.pcap", "--rate", "inf")
    )
    assert "--set loss: nan" in one_line(lowtail(tmp_path, "synth", "a.pcap", "b.pcap", "--set", "loss=NaN"))
    assert not list(tmp_path.iterdir())


# -- property tests: hostile documents of every shape --------------------------------------------

_keys = st.sampled_from(
    ["experiment", "traffic", "dut", "cores", "verdict", "trust", "testbed", "import", "axes", "analysis"]
    + ["rates", "frame_size", "burst", "flows", "udp_dst_port", "name", "kind", "duration", "repetitions"]
    + ["pattern", "pre", "post", "rate", "repetition", "trim", "worst", "percentile", "budget", "work_ns"]
) | st.text(string.ascii_letters + "_", min_size=1, max_size=8)
_scalars = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.text(max_size=12)
    | st.sampled_from(["²", "١٢", "1e99k", "5s", "{side}", "{dut}-{side}.pcap", "lowtail-fwd", "inf", "-5"])
)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4), max_leaves=20
)
_documents = st.dictionaries(_keys, _values | st.dictionaries(_keys, _values, max_size=5), max_size=6)


def _toml(doc: dict) -> str | None:
    """The document as TOML text (None when TOML cannot say it: nan keys and such)."""
    import json

    lines = []
    for key, value in doc.items():
        lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
    text = "\n".join(lines) + "\n"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return text


def _toml_value(value: object) -> str:
    import json
    import math

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents)
def test_any_experiment_file_is_an_experiment_or_one_line(doc):
    text = _toml(doc)
    if text is None:
        return
    try:
        spec.parse(text, "exp.toml")
    except UserError as e:
        assert str(e).startswith("exp.toml") and "\n" not in str(e), str(e)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents)
def test_any_import_spec_is_a_spec_or_one_line(doc):
    text = _toml(doc)
    if text is None:
        return
    try:
        external.parse_spec(schema.load_toml(text, "spec.toml"), "spec.toml", schema.TomlLines(text).line)
    except UserError as e:
        assert str(e).startswith("spec.toml") and "\n" not in str(e), str(e)


@settings(
    max_examples=max(5, EXAMPLES // 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_documents)
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_import_captures_with_any_spec_is_exit_0_or_2_and_a_refused_spec_stores_nothing(campaign, doc):
    """Through the real command: a spec it refuses leaves the database as it was."""
    text = _toml(doc)
    if text is None:
        return
    (campaign / "any.toml").write_text(text)
    db = campaign / "any.duckdb"
    before = experiments_in(db)
    done = lowtail(campaign, "import-captures", "c", "--spec", "any.toml", "--db", str(db))
    assert done.returncode in (0, 2, 3), done.stderr
    if done.returncode == 2:
        one_line(done)
        assert experiments_in(db) == before


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


_DEFAULT = tomllib.loads(spec.default_text())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_edit_of_the_default_experiment_is_an_experiment_or_one_line(data):
    """Edits deep inside a valid file (a DuT's option, a sweep's item) reach the kinds' own
    checks, which random documents rarely do."""
    import copy

    doc = copy.deepcopy(_DEFAULT)
    for _ in range(data.draw(st.integers(1, 3), "edits")):
        path = data.draw(st.sampled_from([p for p in _paths(doc) if p]), "where")
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if data.draw(st.booleans(), "delete") and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_values, "value")
    text = _toml(doc)
    if text is None:
        return
    try:
        spec.parse(text, "exp.toml")
    except UserError as e:
        assert str(e).startswith("exp.toml") and "\n" not in str(e), str(e)


def test_a_sweep_of_a_trillion_traffic_points_is_counted_before_it_is_built():
    """Four lists of a thousand values each: 10^12 points, refused before any is made."""
    lists = "\n".join(
        f"{k} = {[f'{v}pps' if k == 'rates' else v for v in range(lo, lo + 1000)]}"
        for k, lo in (("rates", 1), ("frame_size", 64), ("burst", 1), ("flows", 1))
    )
    with pytest.raises(UserError, match="sweeps over 1,000,000,000,000 traffic points"):
        spec.parse(f"[traffic]\n{lists}\n", "exp.toml")


# -- values typed on the command line ---------------------------------------------------------------

HUGE = "99999999999999999999999"
DB = ("--db", "t.duckdb")


@pytest.fixture(scope="module")
def typed_values(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic capture pair and an empty database for the commands that take numbers (the
    database made here, so that no case depends on another having made it: the cases run in
    any order, on any worker)."""
    here = tmp_path_factory.mktemp("typed")
    made = lowtail(here, "synth", "pre.pcap", "post.pcap", "--packets", "3000", "--rate", "1kpps")
    assert made.returncode == 0, made.stderr
    with open_store(here / "t.duckdb"):
        pass
    return here


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["analyze", "pre.pcap", "post.pcap", "--worst", HUGE, *DB], f"--worst must be a smaller number, not {HUGE}"),
        (["analyze", "pre.pcap", "post.pcap", "--id-offset", HUGE, *DB], "--id-offset must be a smaller number"),
        (["model", "aliasing", "--rate", "1e308pps", *DB], "1e308pps: not a rate lowtail takes"),
        (["model", "aliasing", "--rate", "nan", *DB], "cannot read 'nan' as a rate"),
        (["model", "aliasing", "--rate", "1e10pps", "--duration", "1e9s", *DB], "more than the 10,000,000,000 packets"),
        (["model", "list", "--limit", HUGE, *DB], "is not in the range 1<=x<=1000000"),
        (["list", "--limit", HUGE, *DB], "is not in the range 1<=x<=1000000"),
        (["model", "simulate", "--packets", HUGE, *DB], "'--packets': 99999999999999999999999 is not in the range"),
        (["model", "simulate", "--queue", HUGE, *DB], "'--queue': 99999999999999999999999 is not in the range"),
        (["model", "simulate", "--packets", str(2**63 - 1), *DB], "packets must be at most 100000000"),
        (["host", "plan", "--guest-vcpus", HUGE], "is not in the range 1<=x<=4096"),
        (["noise", "--top", HUGE, "--no-store", *DB], "is not in the range 0<=x<=1000000"),
        (["compare", "1", "--budget", "1ms", "--confidence", "١٢", *DB], "'١٢' is not a confidence level"),
        (["model", "evt", "run:²", *DB], "give a Parquet series file, a run id"),
        (["model", "aliasing", "--run", "²", *DB], "give a run id (12 or run:12)"),
        (["compare", "١٢", *DB], "cannot read '١٢' as a selection"),
        (["compare", f"analysis:{HUGE}", *DB], f"{HUGE} is past any id lowtail stores"),
        (["export", HUGE, "--output", "b.tar", *DB], f"{HUGE} is past any id lowtail stores"),
        (["report", "١٢", *DB], "'١٢' is not an id"),
        (["synth", "p.pcap", "q.pcap", "--packets", "١٢٠"], "'١٢٠' is not a number written in ASCII digits"),
        (["synth", "p.pcap", "q.pcap", "--packets", "1_0"], "'1_0' is not a number written in ASCII digits"),
        (["model", "simulate", "--rate", "٥٠٠٠", *DB], "'--rate': cannot read '٥٠٠٠' as a rate"),
    ],
)
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_number_typed_on_the_command_line_is_one_line(typed_values, args, needle):
    """Before: exit 70 for the huge --worst and --id-offset (OverflowError from the native
    options; host plan's --guest-vcpus too), --rate 1e308 (int(inf) packets) and --limit
    (DuckDB's INT128 cast; `lowtail list --limit` until this was found again: exit 70);
    `model simulate --packets`/`--queue` past 64 bits said "bad simulation spec: invalid
    type: floating point `1e+23`, expected u64 at line 1 column 220"; noise --top was exit 1
    after the probe had run; an id past 64 bits in a selection (`compare analysis:N`,
    `export N`) was exit 70, DuckDB's INT128 cast; "١٢"
    (Arabic-Indic digits) was read as 12 % and as experiment or analysis 12; "²" (which
    str.isdigit() takes and int() does not) was exit 70 as a run id. A NaN rate was refused
    before too: it pins the finite rule beside the packet cap. Every int/float option read
    "١٢٠" as 120 and "1_0" as 10 (synth wrote 120 packets): now one check for all of them."""
    done = lowtail(typed_values, *args)
    assert needle in one_line(done)
