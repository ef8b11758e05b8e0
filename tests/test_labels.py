"""`--label`, the name a command stores its result under, is one line of printable text on
every command that takes it: a newline split every table row the name was shown in."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowtail.cli._options import LabelType
from lowtail.core.labels import LABEL_MAX_CHARACTERS
from test_units import _commands, _invoke

LABEL_OPTIONS = sorted(
    (" ".join(path), param)
    for path, command in _commands()
    for param in command.params
    if isinstance(param, click.Option) and "--label" in param.opts
)


def test_every_label_option_is_the_one_label_type():
    commands = {path for path, _ in LABEL_OPTIONS}
    assert {"analyze", "compare", "model evt", "noise"} <= commands, commands
    assert all(isinstance(param.type, LabelType) for _, param in LABEL_OPTIONS), [
        path for path, param in LABEL_OPTIONS if not isinstance(param.type, LabelType)
    ]


@pytest.mark.parametrize("path", sorted({path for path, _ in LABEL_OPTIONS}))
@pytest.mark.parametrize(
    "label,says",
    [
        ("two\nlines", "one line of text"),
        ("a\ttab", "one line of text"),
        ("\x1b[31mred", "one line of text"),
        ("", "it is empty"),
        ("   ", "it is empty"),
        ("x" * (LABEL_MAX_CHARACTERS + 1), f"at most {LABEL_MAX_CHARACTERS} characters"),
    ],
    ids=["newline", "tab", "escape", "empty", "blank", "too-long"],
)
def test_a_label_that_is_not_one_short_line_is_refused_before_anything_runs(path, label, says, tmp_path):
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        code, err = _invoke([*path.split(), "--label", label, "--db", str(tmp_path / "t.duckdb")])
    finally:
        os.chdir(cwd)
    assert code == 2, err
    assert "'--label'" in err and says in err, err
    assert err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())  # nothing ran, no database made


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=LABEL_MAX_CHARACTERS + 20))
def test_any_text_is_a_label_or_one_clear_refusal(text):
    kind = LabelType()
    fits = (
        text.strip() != ""
        and len(text) <= LABEL_MAX_CHARACTERS
        and not any(unicodedata.category(c) == "Cc" for c in text)
    )
    try:
        assert kind.convert(text, None, None) == text and fits
    except click.BadParameter as e:
        assert not fits and "\n" not in e.message


@pytest.mark.parametrize("label", ["two\nlines", "", "x" * (LABEL_MAX_CHARACTERS + 1), "tab\there"])
def test_the_python_api_refuses_the_labels_the_command_line_refuses(label, tmp_path):
    """`lowtail.open(db).simulate(label=...)` (and compare, evt, overload) ask the same rule as
    `--label`, before anything runs or is stored."""
    import lowtail
    from lowtail.core.errors import UserError
    from lowtail.store import open_store

    open_store(tmp_path / "db.duckdb").close()
    db = lowtail.open(tmp_path / "db.duckdb")
    with pytest.raises(UserError, match="label") as refused:
        db.simulate(label=label)
    assert "\n" not in str(refused.value)
    with pytest.raises(UserError, match="label"):
        db.compare("analysis:1", label=label)  # refused before the selection is looked up
    with open_store(tmp_path / "db.duckdb", read_only=True) as store:
        assert store.con.execute("SELECT count(*) FROM model_results").fetchone() == (0,)


def test_a_good_label_is_stored_as_given_through_the_api(tmp_path):
    import lowtail
    from lowtail.models.simulate import SimulateOptions
    from lowtail.store import open_store

    open_store(tmp_path / "db.duckdb").close()
    doc = lowtail.open(tmp_path / "db.duckdb").simulate(SimulateOptions(packets=2_000), label="fifo — 2 µs service")
    with open_store(tmp_path / "db.duckdb", read_only=True) as store:
        stored = store.con.execute("SELECT label FROM model_results WHERE model_id = ?", [doc["model_id"]]).fetchone()
    assert stored == ("fifo — 2 µs service",)
