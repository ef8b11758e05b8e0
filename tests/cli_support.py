"""What every test of a bad input checks of lowtail's answer: one clear line on stderr, the
exit code that means bad input, never a traceback."""

from __future__ import annotations

import subprocess


def one_line(done: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one line lowtail printed for a refused input (asserting it is one, with `code`)."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]
