"""What every test shares: the signal dispositions of a terminal.

A suite started in the background by a shell without job control (`make test &` in a
script) inherits SIGINT ignored, and lowtail keeps an ignored signal ignored (nohup's
promise, lowtail/signals.py), so every test that presses Ctrl-C on a lowtail process would
see it ignored and fail. The tests are about a user's Ctrl-C: the suite's own process takes
SIGINT as a terminal gives it, and the processes it starts inherit that."""

from __future__ import annotations

import os
import signal
import tempfile

# The suite shares its host with other engineers' runs: what their killed commands left is not
# a test's output. The tests of those notices (tests/faults/test_leftover_notices.py) set it to 1.
os.environ["LOWTAIL_LEFTOVER_NOTICES"] = "0"
# Undo files in flight (host/pending.py) are recorded in a folder of the suite's own: a test
# that applies to a sysroot and fails half-way leaves no marker for the host's next command.
os.environ.setdefault("LOWTAIL_UNDO_STATE_DIR", tempfile.mkdtemp(prefix="lowtail-test-undo-state-"))

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
