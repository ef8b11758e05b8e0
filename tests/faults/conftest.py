"""The fault suite: what users and machines do to lowtail — mistakes, signals, full disks,
damaged and busy databases — and the promise it keeps under each: one line, the right exit
code, nothing lost, nothing left behind. `make soak` runs the same faults many more times
(scripts/soak.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# The analyze tests' helpers (synthetic pairs, the CLI in-process) and the testbed tests'.
for helpers in ("analyze", "testbed"):
    sys.path.insert(0, str(Path(__file__).parents[1] / helpers))
