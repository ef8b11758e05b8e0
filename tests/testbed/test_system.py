"""The short system commands of set-up and teardown (testbed/system.py's `sh`)."""

from __future__ import annotations

import subprocess
import sys

# lowtail takes Ctrl-C (here: a handler that notes it) while `sh` runs a command; Ctrl-C goes
# to the whole process group, as a terminal sends it.
_CTRL_C_DURING_SH = """
import os, signal, threading
from lowtail.testbed.system import sh

signal.signal(signal.SIGINT, lambda *args: None)
threading.Timer(0.2, os.killpg, (os.getpgid(0), signal.SIGINT)).start()
done = sh("sh", "-c", "sleep 0.6; echo finished", what="a short command")
print(done.stdout.strip(), done.returncode)
"""


def test_a_ctrl_c_to_the_process_group_does_not_cut_a_short_command_half_way():
    """Before: a second Ctrl-C during a teardown killed `ip netns delete` and left the
    namespace (1 run in about 20 of the double-Ctrl-C sweep test)."""
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_DURING_SH], capture_output=True, text=True, timeout=60, start_new_session=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["finished", "0"]
