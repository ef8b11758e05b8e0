"""The kernel trace of a run's roles on another host: trace/tracefs.py's `Shell` over the
host's SSH connection (the testbed's one master: no new handshake), so the same `Recorder`
records there as here.

Whatever fails there — tracefs refused to a login that is not root, a tracefs that does
not answer, the connection gone — is `TraceUnavailable` naming the host: the run goes on
without that host's trace, and the run's trace document says which roles and why.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from lowtail.core.errors import Failure
from lowtail.testbed.hosts.ssh import SshHost, last_line
from lowtail.trace.tracefs import TRACEFS_TIMEOUT_S, TraceUnavailable


class SshShell:
    """Another host, reached through its `SshHost` connection."""

    local = False

    def __init__(self, host: SshHost) -> None:
        self.host = host
        self.label = host.label

    def run(self, script: str, what: str) -> str:
        try:
            done = self.host.run(script, what=what, check=False, timeout=TRACEFS_TIMEOUT_S)
        except Failure as e:  # ConnectionLost among them
            raise TraceUnavailable(f"{what}: {e}") from None
        if done.returncode != 0:
            raise TraceUnavailable(f"{what}: {last_line(done.stderr) or f'exit code {done.returncode}'}")
        return done.stdout.decode(errors="replace")

    def fetch(self, path: str, local: Path) -> None:
        try:
            self.host.fetch(path, local, what=f"bringing the raw trace {shlex.quote(path)} back")
        except Failure as e:
            raise TraceUnavailable(str(e)) from None
