"""Undo files are input and output like any other file: `host undo` reads them through the
schema layer (a regular file, a size cap, a depth, finite numbers: /dev/zero, a FIFO, a
nesting bomb and NaN each one line and exit 2, read without hanging or reading without end),
and `host apply --undo-file` checks where it writes before any change (no directory made, a
FIFO, a device or a directory refused). Each case failed before: /dev/zero read 8.4 GB and
met the OOM killer, a FIFO hung, nesting ended in RecursionError (exit 70), NaN was taken,
/nonexistent/dir was created and 20 changes applied and rolled back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import one_line
from host_fixtures import file_states, make_sysroot

LOWTAIL = [sys.executable, "-m", "lowtail"]


def lowtail(*argv: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LOWTAIL, *map(str, argv)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def untuned(tmp_path):
    return make_sysroot(tmp_path / "untuned", tuned=False)


def test_dev_zero_as_an_undo_file_is_refused_without_reading_it():
    started = time.monotonic()
    line = one_line(lowtail("host", "undo", "/dev/zero"))
    assert "/dev/zero: is a character device, not a undo file" in line or "character device" in line
    assert time.monotonic() - started < 30


def test_a_fifo_as_an_undo_file_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "u.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    line = one_line(lowtail("host", "undo", fifo))
    assert "is a FIFO" in line and time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"format": "lowtail-host-undo/1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than"),
        ('{"format": "lowtail-host-undo/1", "state": "applied", "sysroot": "/", "changes": [], "plan": {"a": NaN}}',
         "not valid JSON"),
        ('{"format": "lowtail-host-undo/1", "state": "applied", "sysroot": "/", "changes": [], "plan": {"a": 1e999}}',
         "not valid JSON"),
        ('{"format": "lowtail-host-undo/1", "state": "applied", "sysroot": "/", "changes": [{"setting": 1}]}',
         "changes[0]"),
        ('{"format": "lowtail-host-undo/1", "state": "applied", "sysroot": "/", "changes": [], "x": 1}', "x"),
    ],
    ids=["nesting", "nan", "overflow", "wrong-type", "unknown-field"],
)  # fmt: skip
def test_a_damaged_undo_file_is_one_line_and_restores_nothing(tmp_path, body, says):
    (tmp_path / "u.json").write_text(body)
    line = one_line(lowtail("host", "undo", tmp_path / "u.json"))
    assert "not a lowtail undo file" in line or "nothing was restored" in line, line
    assert says in line, line


def test_an_undo_file_larger_than_its_cap_is_refused_unread(tmp_path):
    big = tmp_path / "u.json"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    line = one_line(lowtail("host", "undo", big))
    assert "is larger than" in line


def test_an_undo_file_in_a_missing_directory_is_refused_before_any_change(untuned, tmp_path):
    before = file_states(untuned)
    missing = tmp_path / "nonexistent" / "dir" / "x.json"
    line = one_line(lowtail("host", "apply", "--sysroot", untuned, "--isolated", "1-3", "--housekeeping", "0",
                            "--yes", "--undo-file", missing))  # fmt: skip
    assert "does not exist (lowtail does not create it)" in line
    assert not missing.parent.exists() and not missing.parent.parent.exists()
    assert file_states(untuned) == before


@pytest.mark.parametrize("target", ["fifo", "/dev/full", "/dev/null", "dir"])
def test_a_special_file_as_the_undo_file_is_refused_as_an_output(untuned, tmp_path, target):
    """Before: "exists from an earlier apply: run lowtail host undo …" for each of them."""
    path = {"fifo": tmp_path / "u.fifo", "dir": tmp_path}.get(target, Path(target))
    if target == "fifo":
        os.mkfifo(path)
    before = file_states(untuned)
    line = one_line(lowtail("host", "apply", "--sysroot", untuned, "--isolated", "1-3", "--housekeeping", "0",
                            "--yes", "--undo-file", path))  # fmt: skip
    assert "earlier apply" not in line and "is a" in line, line
    assert file_states(untuned) == before
