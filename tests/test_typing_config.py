"""mypy --strict holds over the whole package with no exemption per module: third-party
libraries without types are typed by the stubs in stubs/ (the part lowtail calls), never
excused in pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_strict_with_no_overrides():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert "overrides" not in mypy
    assert not mypy.get("ignore_missing_imports")


def test_the_stubs_cover_the_untyped_libraries_imported():
    stubs = ROOT / mypy_path()
    for library in ("plotly", "statsmodels", "distributed"):
        assert (stubs / library / "__init__.pyi").exists(), library


def mypy_path() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["mypy_path"])
