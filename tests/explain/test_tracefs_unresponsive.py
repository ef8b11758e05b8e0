"""A kernel whose tracing faulted holds every tracefs access in an unkillable wait. The trace
start must then end in "no trace" (the run goes on and says why), and the rest of that boot's
runs must be told at once instead of each waiting again — otherwise a suite of traced runs
turns into hours of waiting. A script that sleeps past a short timeout stands in for the
stuck kernel (the real one cannot be faulted on purpose)."""

from __future__ import annotations

import pytest

from lowtail.trace import tracefs
from lowtail.trace.tracefs import LocalShell, TraceUnavailable


@pytest.fixture
def marker(tmp_path, monkeypatch):
    path = tmp_path / "run" / "tracefs-unresponsive"
    monkeypatch.setattr(tracefs, "STUCK_MARKER", path)
    monkeypatch.setattr(tracefs, "TRACEFS_TIMEOUT_S", 0.5)
    return path


def test_a_tracefs_that_does_not_answer_is_no_trace_and_the_rest_of_the_boot_is_told_at_once(marker, tmp_path):
    shell = LocalShell()
    with pytest.raises(TraceUnavailable, match="did not answer within 0.5 s"):
        shell.run("sleep 30", "starting the kernel trace on localhost")
    assert marker.exists() and tracefs.stuck_since() is not None
    ran = tmp_path / "ran"
    with pytest.raises(TraceUnavailable, match="stopped answering at .* until a reboot"):
        shell.run(f"touch {ran}", "starting the kernel trace on localhost")
    assert not ran.exists()  # told at once: nothing was asked of tracefs again


def test_a_marker_of_an_earlier_boot_is_not_this_boots(marker):
    marker.parent.mkdir(parents=True)
    marker.write_text("0000-another-boot 2026-01-01 00:00:00 UTC\n")
    assert tracefs.stuck_since() is None
    assert LocalShell().run("echo answered", "a script") == "answered\n"
