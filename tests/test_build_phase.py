"""scripts/phase.sh, the heartbeat of `make build`: while cargo's progress bar stands at its
last unit (the Python module's compile and thin-LTO link, minutes without output) it says
what that step does and how long it has taken; the done line gives the step's time. The
build sat at 150/151 for two minutes with no sign of what it was doing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

PHASE = Path(__file__).resolve().parents[1] / "scripts" / "phase.sh"
CARGO_LIKE = r"""
printf '   Compiling lowtail-stats v0.1.0\n'
printf '    Building [=====>   ] 149/151: lowtail-program, lowtail-py\r'
sleep 1
printf '    Building [=======> ] 150/151: lowtail-py                  \r'
sleep 11
printf '    Finished `release` profile\n'
"""


def _phase(tmp_path: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [
            "bash",
            str(PHASE),
            str(tmp_path / "p.log"),
            "[3/4] native module",
            "about 4 min",
            "--",
            "bash",
            "-c",
            CARGO_LIKE,
        ],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_last_step_says_what_it_does_and_for_how_long(tmp_path: Path) -> None:
    out = _phase(tmp_path, {"PHASE_LAST_STEP": "linking the module"})
    beats = [line for line in out.splitlines() if "150/151: linking the module" in line]
    assert len(beats) >= 2, out  # every 5 s in a log
    seconds = [int(line.rsplit(", ", 1)[1].split("s")[0]) for line in beats]
    assert seconds == sorted(seconds) and seconds[-1] >= 5, out  # it counts
    last = out.splitlines()[-1]
    assert last.startswith("    done in 0:1") and "(the last step: " in last, out


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_without_a_description_the_heartbeat_is_cargos_line(tmp_path: Path) -> None:
    out = _phase(tmp_path, {"PHASE_LAST_STEP": ""})
    assert "Building [=======> ] 150/151: lowtail-py" in out and "the last step" not in out
