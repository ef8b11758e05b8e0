"""`python/lowtail/_native.pyi` describes the built module: mypy's stubtest compares every
name, class, signature and default of the stub with the module itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_SOURCE = Path(__file__).resolve().parents[1] / "python"


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_stub_matches_the_native_module(tmp_path):
    # The package is installed editable and has no py.typed, so mypy finds the stub only
    # on MYPYPATH; the cache goes to a temporary directory, not into the tree.
    env = {**os.environ, "MYPYPATH": str(PYTHON_SOURCE)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "lowtail._native"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues found" in done.stdout


def test_the_options_document_names_what_the_native_options_give():
    # stubtest checks signatures, not what a method returns: the stub types
    # AnalyzeOptions.to_dict() as documents.AnalyzeOptionsDocument, which the store and the
    # campaign read by key, so the keys the built module gives are pinned here.
    from lowtail import _native
    from lowtail.analyze.document import AnalyzeOptionsDocument

    given = _native.AnalyzeOptions(export="series.parquet").to_dict()
    assert set(given) == AnalyzeOptionsDocument.__required_keys__ | AnalyzeOptionsDocument.__optional_keys__
    assert given["export"] == "series.parquet"
