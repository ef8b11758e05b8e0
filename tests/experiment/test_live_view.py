"""`lowtail run` watched as a user watches it: under a pseudo-terminal the live view shows
the run in progress and its running figures, updated while the traffic flows, then the
final table, the verdict per DuT and where everything went; piped, it logs one line per
stored run and draws nothing."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_run import experiment, needs_programs  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402

pytestmark = [needs_root, needs_programs, pytest.mark.root, pytest.mark.slow]

LOWTAIL = [sys.executable, "-m", "lowtail"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
MIRRED = '[[dut]]\nname = "kernel"\nkind = "kernel-mirred"\n'


def run_in_a_terminal(args: list[str], cwd: Path, timeout_s: float = 180) -> tuple[int, bytes]:
    """Run the command with stdin, stdout and stderr on a pseudo-terminal 140 columns wide;
    everything it drew, and its exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 140, 0, 0))
    env = os.environ | {"TERM": "xterm-256color", "COLUMNS": "140", "LINES": "50"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(args, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    drawn = bytearray()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the program ended
                break
            if not chunk:
                break
            drawn += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=30), bytes(drawn)


def test_the_live_view_updates_while_the_run_is_in_progress(tmp_path):
    toml = experiment(tmp_path, MIRRED, rates=(5000,), duration="4s", warmup="1s")
    code, drawn = run_in_a_terminal([*LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb")], tmp_path)
    text = ANSI.sub("\n", drawn.decode(errors="replace"))
    assert code in (0, 3), text[-3000:]  # 3: degraded on a busy host
    assert "\x1b[" in drawn.decode(errors="replace"), "drawn with terminal control sequences"
    assert "run 1 of 1" in text and "kernel @ 5 kpps" in text and "sweep ends in about" in text
    # The running figures: frames sent of those planned (25,000), redrawn as they grow.
    # A redraw may move the cursor into a number and rewrite only its last digits ("20,186"
    # redrawn as "186"): a number right after a control sequence is such a fragment, left out.
    marked = ANSI.sub("\x00", drawn.decode(errors="replace"))
    # Counts of other things are not the figure: "19,298 of 25,000 bursts late" (the pacing
    # warning of a busy host) or "103 of 25,000 packets lost" (the final verdict's reason) — a
    # word follows them; in the live row, a column of figures follows.
    sent = [int(n.replace(",", "")) for n in re.findall(r"(?<![\d,\x00])([\d,]{3,}) of 25,000(?! ?[a-z])", marked)]
    sent = [n for n in sent if n >= 100]
    assert len(set(sent)) >= 3 and sorted(set(sent)) == sorted(set(sent), key=sent.index), sent
    assert max(sent) >= 15_000
    # The running latency (µs on this testbed, from the timestamper's own matching).
    assert re.search(r"p99 so far.*max so far", text, re.S)
    assert re.search(r"\d+\.\d{3} (µs|ms)", text)
    # Then the final table, the verdict per device and the hand-over.
    assert "verdict per device (" in text and re.search(r"kernel\s+(PASS|FAIL|inconclusive|INVALID)", text)
    assert "stored as experiment 1 in" in text


def test_piped_the_run_logs_a_line_per_stored_run_and_draws_nothing(tmp_path):
    toml = experiment(tmp_path, MIRRED, rates=(5000, 10000), duration="1s", warmup="200ms")
    report = tmp_path / "exp.html"
    done = subprocess.run(
        [*LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), "--report", str(report)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode in (0, 3), done.stderr  # 3: degraded on a busy host
    assert "\x1b[" not in done.stdout + done.stderr
    logged = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line[:5] for line in logged] == ["[1/2]", "[2/2]"], done.stderr
    assert "kernel @ 5 kpps" in logged[0] and "(run 1)" in logged[0]
    # The report's link, once.
    assert done.stderr.count(report.name) == 1 and f"report: {report.resolve().as_uri()}" in done.stderr
