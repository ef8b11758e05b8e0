"""The fault suite: what users and machines do to lowtail — mistakes, signals, full disks,
damaged and busy databases — and the promise it keeps under each: one line, the right exit
code, nothing lost, nothing left behind. `make soak` runs the same faults many more times
(scripts/soak.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# The helpers of the analyze tests (synthetic pairs, the CLI in-process), the testbed tests
# (what a testbed leaves) and the experiment tests (`lowtail run` as a user runs it).
for helpers in ("analyze", "testbed", "experiment"):
    sys.path.insert(0, str(Path(__file__).parents[1] / helpers))
