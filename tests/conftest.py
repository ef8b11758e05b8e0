"""What every test shares: the signal dispositions of a terminal.

A suite started in the background by a shell without job control (`make test &` in a
script) inherits SIGINT ignored, and lowtail keeps an ignored signal ignored (nohup's
promise, lowtail/core/signals.py), so every test that presses Ctrl-C on a lowtail process would
see it ignored and fail. The tests are about a user's Ctrl-C: the suite's own process takes
SIGINT as a terminal gives it, and the processes it starts inherit that."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The benchmark's helpers live in bench/ (run as scripts there); the tests of the benchmark and
# the tests that start a local Dask cluster (bench/local_dask.py) import them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

# The suite shares its host with other engineers' runs: what their killed commands left is not
# a test's output. The tests of those notices (tests/faults/test_leftover_notices.py) set it to 1.
os.environ["LOWTAIL_LEFTOVER_NOTICES"] = "0"
# Undo files in flight (host/pending.py) are recorded in a folder of the suite's own: a test
# that applies to a sysroot and fails half-way leaves no marker for the host's next command.
os.environ.setdefault("LOWTAIL_UNDO_STATE_DIR", tempfile.mkdtemp(prefix="lowtail-test-undo-state-"))

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test skipped without root (a `skipif` whose reason says root) is a `root` test,
    whether or not its module marks it: `make check` (`-m "not slow and not root"`) leaves it
    out as it leaves out every test that needs the host's namespaces, mounts or settings."""
    for item in items:
        if any(m.name == "skipif" and "root" in str(m.kwargs.get("reason", "")) for m in item.iter_markers()):
            item.add_marker(pytest.mark.root)


# `lowtail testbed clean` removes what every killed run on the host left. A test that leaves a
# killed run's leftovers on purpose and looks at them, and a test that cleans, must not run
# while the other worker does either (CI once failed so: one test's clean took another's
# leftovers between its kill and its look). They take this lock, across the workers.
LEFTOVERS_LOCK = Path(tempfile.gettempdir()) / "lowtail-test-leftovers.lock"


@pytest.fixture(autouse=True)
def _leftovers_alone(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("leftovers") is None:
        yield
        return
    with open(LEFTOVERS_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
