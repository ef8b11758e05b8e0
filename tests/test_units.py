"""One grammar of durations and rates (core/units.py, `lowtail help units`), strict everywhere.

Every duration and rate a person types carries its unit: the command line's options (found
by walking the command tree for the option types that read one), the experiment file's and
the import spec's fields (found by their `schema.with_unit` mark), the DuT options
(`DurationOption`), the [testbed] durations (`wiring.DURATION_KEYS`), the selection's rate
axis and the Python API. A bare number is refused, with exit 2 and a message naming the
field; every accepted form reads back through the one writer (`format_*_setting`) as the
same value. Before: `budget = 350` was 350 s, `--service 15` 15 ns, `--trim 500` 500 s."""

from __future__ import annotations

import io
import math
import os
import random
from collections.abc import Iterator
from contextlib import redirect_stderr
from pathlib import Path

import click
import msgspec
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowtail.cli import app, load_commands, main
from lowtail.cli._options import SpecType, UnitType
from lowtail.core import schema
from lowtail.core.errors import UserError
from lowtail.core.units import (
    MAX_RATE_PPS,
    UNIT_KINDS,
    format_duration_setting,
    format_rate,
    format_rate_setting,
    parse_duration_ns,
    parse_frequency_hz,
    parse_rate_pps,
)
from lowtail.experiment import external, spec
from lowtail.store import records
from lowtail.testbed import wiring
from lowtail.testbed.duts import KINDS
from lowtail.testbed.duts.options import DurationOption

EXAMPLES = int(os.environ.get("LOWTAIL_HYPOTHESIS_EXAMPLES", "40"))
_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Per field or option (each is a case of its own): fewer values each.
_EACH = settings(
    max_examples=max(3, EXAMPLES // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize(
    "text, ns",
    [
        ("500ms", 500_000_000),
        ("1.5s", 1_500_000_000),
        ("3.1us", 3_100),
        ("3.1 µs", 3_100),
        ("350μs", 350_000),
        ("2min", 120_000_000_000),
        ("1e-3s", 1_000_000),
        ("0", 0),
        (0, 0),
    ],
)
def test_durations_as_people_write_them(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    "text, pps",
    [("50k", 50_000), ("1.2M", 1_200_000), ("10kpps", 10_000), ("20 kpps", 20_000), ("800pps", 800), ("0", 0)],
)
def test_rates_as_people_write_them(text, pps):
    assert parse_rate_pps(text) == pps


@pytest.mark.parametrize("value", ["350", "0.35", "1e3", 350, 0.35, " 12 "])
def test_a_bare_number_is_no_duration_rate_or_interrupt_rate(value):
    for reader in (parse_duration_ns, parse_rate_pps, parse_frequency_hz):
        with pytest.raises(
            UserError, match=r"^--x: .* has no unit: write a .* with its unit, e\.g\. .*lowtail help units"
        ):
            reader(value, what="--x")


@pytest.mark.parametrize("text", ["-5k", "inf", "nan", "1e300", "fast", "", "1²", True, math.inf, None, "1e30k"])
def test_what_is_not_a_rate_is_one_clear_error(text):
    with pytest.raises(UserError, match=r"^rates: "):
        parse_rate_pps(text, what="rates")


@pytest.mark.parametrize(
    "text", ["-5s", "inf", "nan", "1e300s", "soon", "", "1²s", True, math.inf, None, "5m", "5 sec"]
)
def test_what_is_not_a_duration_is_one_clear_error(text):
    with pytest.raises(UserError, match=r"^duration: "):
        parse_duration_ns(text, what="duration")


def _texts(seed: int, n: int = 5_000) -> list[str]:
    """Random short texts of the characters rates and durations are made of, and others."""
    rng = random.Random(seed)
    alphabet = "0123456789.eE+-kKMGgmunsµpps/ hzHx\t"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(n)]


def test_any_text_is_a_rate_or_a_user_error_naming_the_field():
    for text in _texts(1):
        try:
            assert 0 <= parse_rate_pps(text, what="rates") <= MAX_RATE_PPS, text
        except UserError as e:
            assert str(e).startswith("rates: "), (text, str(e))


def test_any_text_is_a_duration_or_a_user_error_naming_the_field():
    for text in _texts(3):
        try:
            assert parse_duration_ns(text, what="--trim") >= 0, text
        except UserError as e:
            assert str(e).startswith("--trim"), (text, str(e))


def test_a_formatted_rate_reads_back_close():
    """What a table prints ("87.5 kpps") the reader takes, within its 3 digits."""
    rng = random.Random(2)
    for pps in [1, 999, 1_000, 20_000, 87_500, *(rng.randint(1, 10**9) for _ in range(2_000))]:
        assert parse_rate_pps(format_rate(pps)) == pytest.approx(pps, rel=5e-3, abs=0.5), pps


# -- every accepted form reads back through the one writer ---------------------------------------

_number = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.decimals(min_value=0, max_value=10**5, places=4, allow_nan=False).map(lambda d: format(d, "f")),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(1, 999), st.integers(-3, 3)),
)
_units = {
    "duration": ["ns", "us", "µs", "μs", "ms", "s", "min", "h"],
    "rate": ["pps", "kpps", "Mpps", "k", "M", "G", "Gpps"],
    "frequency": ["Hz", "kHz"],
}


@_SETTINGS
@given(kind=st.sampled_from(sorted(UNIT_KINDS)), number=_number, data=st.data())
def test_every_accepted_form_round_trips_through_the_one_writer(kind, number, data):
    reader, writer, _ = UNIT_KINDS[kind]
    unit = data.draw(st.sampled_from(_units[kind]))
    space = data.draw(st.sampled_from(["", " "]))
    try:
        value = reader(f"{number}{space}{unit}")
    except UserError:  # beyond what lowtail holds (a rate over 10^12 pps, say): refused, by name
        return
    written = writer(value)
    assert reader(written) == value, (number, unit, value, written)
    assert writer(reader(written)) == written


@_SETTINGS
@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_every_duration_in_nanoseconds_is_written_exactly(ns):
    assert parse_duration_ns(format_duration_setting(ns)) == ns


@_SETTINGS
@given(st.integers(min_value=0, max_value=MAX_RATE_PPS))
def test_every_rate_is_written_exactly(pps):
    assert parse_rate_pps(format_rate_setting(pps)) == pps


# -- every option of the command line that takes one ------------------------------------------------


def _commands() -> Iterator[tuple[list[str], click.Command]]:
    load_commands(["--help"])
    stack: list[tuple[list[str], click.Command]] = [([], typer.main.get_command(app))]
    while stack:
        path, command = stack.pop()
        if isinstance(command, click.Group):
            stack += [([*path, name], sub) for name, sub in command.commands.items()]
        else:
            yield path, command


# (command, option, its type, whether the command takes --db)
UNIT_OPTIONS = sorted(
    (
        path,
        param.opts[0],
        param.type,
        any(p.opts[:1] == ["--db"] for p in command.params if isinstance(p, click.Option)),
    )
    for path, command in _commands()
    for param in command.params
    if isinstance(param.type, (UnitType, SpecType))
)


def test_the_walk_finds_the_options_people_give_durations_and_rates_to():
    """The enumeration is the declarations: it must not come back empty, and the options the
    issue found taking bare numbers are among them."""
    found = {(" ".join(path), name) for path, name, _, _ in UNIT_OPTIONS}
    for expected in [
        ("analyze", "--trim"),
        ("analyze", "--budget"),
        ("analyze", "--max-latency"),
        ("analyze", "--rate"),
        ("compare", "--budget"),
        ("certify", "--budget"),
        ("experiment report", "--budget"),
        ("model simulate", "--service"),
        ("model simulate", "--irq"),
        ("model simulate", "--rate"),
        ("model overload", "--irq"),
        ("model aliasing", "--irq-durations"),
        ("noise", "--duration"),
        ("synth", "--rate"),
        ("campaign analyze", "--trim"),
    ]:
        assert expected in found, expected


_DURATION_WORDS = {
    *("budget", "trim", "latency", "duration", "durations", "timeout", "interval", "threshold", "service"),
    *("gap", "overhead", "jitter", "phase", "rate", "above", "transfer", "e2e", "stall", "settle"),
}


def test_no_option_named_for_a_duration_or_rate_reads_plain_text():
    """A safety net under the walk: an option whose name says it is a duration or a rate and
    that is not of a unit type would read whatever it is given. (`explain --above` takes a
    percentile or a latency; its reader refuses a bare number, checked below.)"""
    plain = [
        (" ".join(path), p.opts[0])
        for path, command in _commands()
        for p in command.params
        if isinstance(p, click.Option)
        and _DURATION_WORDS & set(p.opts[0].lstrip("-").split("-"))
        and "percentile" not in p.opts[0]  # named for what it is: `model flows --threshold-percentile`
        and not isinstance(p.type, (UnitType, SpecType, click.types.BoolParamType))
    ]
    assert plain == [("explain", "--above")]


def _invoke(argv: list[str]) -> tuple[int, str]:
    """`lowtail ARGV` in this process: its exit code and what it wrote to stderr."""
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            return int(e.code or 0), err.getvalue()
    return 0, err.getvalue()


_bare_number = st.one_of(
    st.integers(min_value=1, max_value=10**9).map(str),
    st.floats(min_value=0.001, max_value=1e6, allow_nan=False).map(lambda f: f"{f:g}"),
)


@pytest.mark.parametrize("option", UNIT_OPTIONS, ids=lambda o: " ".join([*o[0], o[1]]) if isinstance(o, tuple) else "")
@_EACH
@given(number=_bare_number, data=st.data())
def test_a_bare_number_on_the_command_line_is_refused_naming_the_option(option, number, data, tmp_path_factory):
    """Exit 2, one line naming the option, before anything runs (the value is read while
    the command line is parsed)."""
    path, name, kind, has_db = option
    value = data.draw(st.sampled_from(kind.bare_examples(number)))
    here = tmp_path_factory.mktemp("bare")
    cwd = Path.cwd()
    os.chdir(here)
    try:
        code, err = _invoke([*path, name, value, *(["--db", str(here / "t.duckdb")] if has_db else [])])
    finally:
        os.chdir(cwd)
    assert code == 2, (path, name, value, err)
    assert f"'{name}'" in err and "has no unit" in err, err
    assert err.count("\n") == 1, err
    assert not list(here.iterdir())  # nothing ran


def test_explain_above_refuses_a_bare_number(tmp_path):
    code, err = _invoke(["explain", "1", "--above", "500", "--db", str(tmp_path / "t.duckdb")])
    assert code == 2 and "--above '500'" in err, err


# -- every field of a file that takes one ----------------------------------------------------------------

BASE = '[traffic]\nrates = ["1kpps"]\n'
KERNEL = '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'


def _unit_fields(struct: type) -> Iterator[tuple[str, str]]:
    """(field name, kind) of every field of a msgspec Struct marked `schema.with_unit`,
    alone, in a union or as a list's items."""
    for f in msgspec.inspect.type_info(struct).fields:
        kinds = set()
        stack = [f.type]
        while stack:
            info = stack.pop()
            if isinstance(info, msgspec.inspect.Metadata):
                kinds |= {(info.extra or {}).get("unit")} - {None}
                stack.append(info.type)
            elif isinstance(info, msgspec.inspect.UnionType):
                stack += info.types
            elif isinstance(info, msgspec.inspect.ListType):
                stack.append(info.item_type)
        yield from ((f.encode_name, kind) for kind in kinds)


def _sections() -> dict[str, type]:
    """The experiment file's tables that are Structs, by their section."""
    tables = {}
    for f in msgspec.inspect.type_info(spec._ExperimentFile).fields:
        info = f.type
        if isinstance(info, msgspec.inspect.StructType):
            tables[f.encode_name] = info.cls
    return tables | {"traffic": spec._TrafficTable}


def _experiment_cases() -> list[tuple[str, str, str]]:
    """(what the field is called in messages, kind, a file with {value} where it goes)."""
    cases = []
    for section, struct in _sections().items():
        for name, kind in _unit_fields(struct):
            if section == "traffic":
                cases.append((name, kind, f"[traffic]\n{name} = {{value}}\n{KERNEL}"))
            else:
                cases.append((name, kind, f"{BASE}{KERNEL}[{section}]\n{name} = {{value}}\n"))
    for kind_name, cls in KINDS.items():
        for option, declared in cls.options.items():
            if isinstance(declared, DurationOption):
                cases.append(
                    (
                        f"option '{option}'",
                        "duration",
                        f'{BASE}[[dut]]\nname = "d"\nkind = "{kind_name}"\n{option} = {{value}}\n',
                    )
                )
    testbeds = {
        "settle": '[testbed]\nkind = "interfaces"\ngenerator = "eth1"\npre = "eth1"\npost = "eth2"\n',
        "connect_timeout": '[testbed]\nkind = "hosts"\n[testbed.loadgen]\nssh = "a"\ninterface = "e"\n'
        '[testbed.timestamper]\nssh = "b"\npre = "e"\npost = "f"\n',
    }
    for key in wiring.DURATION_KEYS:
        table = testbeds[key]
        head, _, rest = table.partition("\n[testbed.")
        cases.append(
            (
                key,
                "duration",
                f"{head}\n{key} = {{value}}\n"
                + (f"[testbed.{rest}" if rest else "")
                + BASE
                + '[[dut]]\nname = "e"\nkind = "external"\n',
            )
        )
    return cases


EXPERIMENT_CASES = _experiment_cases()


def test_the_walk_finds_the_file_fields_people_give_durations_and_rates_to():
    named = {name for name, _, _ in EXPERIMENT_CASES}
    assert {"duration", "warmup", "drain", "rates", "budget", "max_stall", "max_pacing_p99"} <= named
    assert {"option 'ready_timeout'", "settle", "connect_timeout"} <= named


_toml_bare = st.one_of(
    st.integers(min_value=1, max_value=10**9).map(str),  # a TOML integer
    st.floats(min_value=0.001, max_value=1e6, allow_nan=False).map(repr),  # a TOML float
    st.integers(min_value=1, max_value=10**9).map(lambda n: f'"{n}"'),  # a string holding a number
)


@pytest.mark.parametrize("case", EXPERIMENT_CASES, ids=lambda c: c[0] if isinstance(c, tuple) else "")
@_EACH
@given(value=_toml_bare)
def test_a_bare_number_in_an_experiment_file_is_refused_naming_the_field(case, value):
    name, _, template = case
    text = template.format(value=value)
    line = next(i for i, _ in enumerate(text.splitlines(), 1) if "{value}" in template.splitlines()[i - 1])
    with pytest.raises(UserError) as refused:
        spec.parse(text, "exp.toml")
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert f"exp.toml line {line}:" in message and name in message and "has no unit" in message, message


IMPORT_BASE = '[import]\npattern = "{dut}-{side}.pcap"\n'


def _import_cases() -> list[tuple[str, str]]:
    cases = []
    for section, struct in (("analysis", external._AnalysisTable), ("verdict", spec.VerdictTable)):
        for name, _ in _unit_fields(struct):
            cases.append((name, f"{IMPORT_BASE}[{section}]\n{name} = {{value}}\n"))
    for axis in records.IMPORTED_AXES:
        if axis.parse in (parse_rate_pps, parse_duration_ns):
            cases.append((axis.name, f"{IMPORT_BASE}[axes]\n{axis.name} = {{value}}\n"))
    return cases


IMPORT_CASES = _import_cases()


def test_the_walk_finds_the_import_spec_fields():
    assert {name for name, _ in IMPORT_CASES} == {"trim", "max_latency", "budget", "rate"}


@pytest.mark.parametrize("case", IMPORT_CASES, ids=lambda c: c[0] if isinstance(c, tuple) else "")
@_EACH
@given(value=_toml_bare)
def test_a_bare_number_in_an_import_spec_is_refused_naming_the_field(case, value):
    name, template = case
    text = template.replace("{value}", value)
    with pytest.raises(UserError) as refused:
        external.parse_spec(schema.load_toml(text, "spec.toml"), "spec.toml", schema.TomlLines(text).line)
    message = str(refused.value)
    assert refused.value.exit_code == 2 and name in message and "has no unit" in message, message


def test_a_rate_in_a_file_name_takes_its_unit_from_the_pattern():
    """`{rate}pps` in the pattern: the file's "50000" is 50 kpps; without a unit anywhere, the
    pair is named as one that cannot be read."""
    with_unit = external.parse_spec(schema.load_toml('[import]\npattern = "{dut}-{rate}pps-{side}.pcap"\n', "s"), "s")
    assert external._axis_value("rate", with_unit.with_unit("rate", "50000")) == 50_000
    bare = external.parse_spec(schema.load_toml('[import]\npattern = "{dut}-{rate}-{side}.pcap"\n', "s"), "s")
    with pytest.raises(UserError, match="has no unit"):
        external._axis_value("rate", bare.with_unit("rate", "50000"))
    assert external._axis_value("rate", bare.with_unit("rate", "50k")) == 50_000


def test_a_selection_takes_a_rate_with_its_unit_only():
    from lowtail.store.axes import find

    rate = find("rate", [])
    assert rate.parse_number("50kpps") == 50_000
    with pytest.raises(UserError, match="rate=50000: .*has no unit"):
        rate.parse_number("50000")


def test_the_python_api_reads_a_budget_as_the_command_line_does(tmp_path):
    import lowtail
    from lowtail.store import open_store

    with open_store(tmp_path / "t.duckdb"):
        pass
    db = lowtail.open(tmp_path / "t.duckdb")
    with pytest.raises(UserError, match="has no unit"):
        db.compare("1", budget="350")


def test_a_stored_experiment_keeps_the_budget_it_was_judged_against():
    """An older lowtail read `budget = 350` as 350 s: the stored experiment is read as it was
    measured and judged, not refused and not silently the default."""
    from lowtail.verdict.judge import stored_verdict

    assert stored_verdict({"verdict": {"budget": 350}}).budget_ns == 350_000_000_000
    assert stored_verdict({"verdict": {"budget": "350us"}}).budget_ns == 350_000


def test_event_rates_read_with_the_prefix_that_reads_best():
    """explain printed a CPU's call-function interrupts as "CAL 1.833e+04 Hz"; the noise
    profile, the models and explain each formatted Hz their own way."""
    from lowtail.core.units import format_hz

    assert [format_hz(x) for x in (18_330.2, 645.12, 0.5439, 250, 166.6667, 0, 2.5e6)] == [
        "18.33 kHz", "645.1 Hz", "0.5439 Hz", "250 Hz", "166.7 Hz", "0 Hz", "2.5 MHz",
    ]  # fmt: skip
    assert format_hz(458.8642297732465, 6) == "458.864 Hz"
    assert "e+" not in format_hz(99_999.0) and format_hz(99_999.0) == "100 kHz"
