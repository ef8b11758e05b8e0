"""Fixtures of the model tests: the CLI in-process (exit codes and one-line errors as a
user sees them) and a fresh database per test."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lowtail.cli import main
from lowtail.store import open_store


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    def run(*args: str) -> CliResult:
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "test.duckdb"


@pytest.fixture
def store_at(db):
    def opened():
        return open_store(db)

    return opened
