"""The README's tour works when pasted as written: every line of its no-root block, run by
bash in an empty directory with the command on PATH (as `make install` or an activated
venv give it), exits 0 and leaves what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def tour_lines() -> list[str]:
    """The commands of the first ```sh block of the tour (comments stay: bash ignores them)."""
    text = README.read_text()
    tour = text[text.index("## A short tour") :]
    block = re.search(r"```sh\n(.*?)```", tour, re.S)
    assert block, "the tour has a ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_the_tour_names_commands_that_exist():
    lines = tour_lines()
    assert len(lines) >= 10 and all(line.startswith("lowtail ") for line in lines), lines


@pytest.mark.slow
def test_every_line_of_the_tour_works_pasted_into_an_empty_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LOWTAIL_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for line in tour_lines():
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
    made = {p.name for p in tmp_path.iterdir()}
    assert {"pre.pcap", "post.pcap", "series.parquet", "series.csv", "evt.png", "staircase.png"} <= made, made
    assert "lowtail.duckdb" in made and any(re.fullmatch(r"lowtail-report-\d+\.html", name) for name in made), made
