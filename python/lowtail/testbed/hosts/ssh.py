"""One SSH connection per host, through OpenSSH's client.

Why OpenSSH's `ssh` rather than a Python SSH library (asyncssh, paramiko): it is what the
user already reaches the hosts with, so their ~/.ssh/config (aliases, ports, jump hosts),
agent, keys and known_hosts work unchanged, with the server compatibility and security
fixes of the distribution's package; a library would re-implement that configuration and
add a dependency. Its ControlMaster gives one authenticated connection per host that every
command and program of a sweep shares (no handshake per command).

Every ssh process lowtail starts dies with lowtail (`setpriv --pdeathsig`): the master's end
closes the connection, and the programs on the host, held by lowtail-leash, stop themselves.
Errors become one line naming the host: a refused key, an unknown host key, an unreachable
host (UserError); a connection lost mid-sweep (`ConnectionLost`, a Failure).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from lowtail.core.errors import Failure, UserError
from lowtail.core.processes import exit_code, wait_for
from lowtail.testbed.system import tool
from lowtail.testbed.wiring import Ssh

# ssh's own exit status for its failures (a remote command's status is passed through).
SSH_FAILED = 255
# A dead connection is noticed after this many seconds without an answer from the server.
_ALIVE_INTERVAL_S, _ALIVE_COUNT = 2, 3
# iproute2 lives in /sbin, which a non-interactive login's PATH may lack.
_REMOTE_PATH = 'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"; export PATH; '


class ConnectionLost(Failure):
    """The connection to a host went away during the sweep."""


def _reachability(host: str, stderr: str) -> Exception:
    """The error a failed connection attempt is, from what ssh said."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    said = lines[-1] if lines else "ssh exited without a message"
    text = stderr.lower()
    if "permission denied" in text:
        return UserError(
            f"host {host} refused the SSH key ({said}): check `identity` in [testbed] and the host's "
            f"authorized_keys for that user"
        )
    if "host key verification failed" in text or "host key for" in text:
        return UserError(
            f"host {host}: its SSH host key is not known here, or has changed ({said}); add it to known_hosts "
            f"(ssh-keyscan), or name a known_hosts file in [testbed]"
        )
    if any(
        s in text
        for s in (
            "connection refused",
            "no route to host",
            "timed out",
            "network is unreachable",
            "could not resolve",
            "name or service not known",
            "connection closed",
        )
    ):
        return UserError(f"cannot reach host {host}: {said}")
    return UserError(f"cannot connect to host {host}: {said}")


class SshHost:
    """A host reached through one ssh master connection (`connect`, then `run`/`popen`)."""

    def __init__(self, destination: str, options: Ssh, control_socket: Path, log: Path):
        self.destination = destination
        self.options = options
        self.control_socket = control_socket
        self.log = log
        self.master: subprocess.Popen[bytes] | None = None

    @property
    def label(self) -> str:
        """The host as messages name it."""
        return self.destination

    def _ssh(self) -> list[str]:
        argv = [tool("setpriv", "util-linux"), "--pdeathsig", "TERM", "--", tool("ssh", "openssh-client")]
        if self.options.config:
            argv += ["-F", self.options.config]
        if self.options.identity:
            argv += ["-i", self.options.identity, "-o", "IdentitiesOnly=yes"]
        if self.options.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.options.known_hosts}"]
        return argv + [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={max(1, round(self.options.connect_timeout_ns / 1e9))}",
            "-o",
            f"ServerAliveInterval={_ALIVE_INTERVAL_S}",
            "-o",
            f"ServerAliveCountMax={_ALIVE_COUNT}",
            "-o",
            f"ControlPath={self.control_socket}",
            "-o",
            "LogLevel=ERROR",
            "-T",
        ]

    def connect(self) -> None:
        """Open the master connection; UserError when the host cannot be reached or refuses."""
        self.start()
        self.wait_connected()

    def start(self) -> None:
        """Start opening the master connection (from the thread that lives as long as it:
        the ssh process ends with the thread that started it)."""
        argv = self._ssh() + ["-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no", self.destination]
        with open(self.log, "ab") as log:
            self.master = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
            )

    def wait_connected(self) -> None:
        """Wait for the master connection; UserError when the host cannot be reached or refuses."""
        assert self.master is not None
        limit_s = self.options.connect_timeout_ns / 1e9 + 10
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if exit_code(self.master) is not None:
                raise _reachability(self.label, self.log.read_text(errors="replace"))
            if self.control_socket.exists() and self._check():
                return
            time.sleep(0.05)
        self.close()
        raise UserError(f"cannot reach host {self.label}: no SSH connection within {limit_s:.0f} s")

    def _check(self) -> bool:
        done = subprocess.run(
            self._ssh() + ["-O", "check", self.destination], capture_output=True, text=True, timeout=10
        )
        return done.returncode == 0

    def alive(self) -> bool:
        """Whether the master connection is still up."""
        return self.master is not None and exit_code(self.master) is None

    def require_alive(self) -> None:
        """ConnectionLost when the master connection went away."""
        if not self.alive():
            raise ConnectionLost(f"lost the SSH connection to host {self.label}{self._last_words()}")

    def _last_words(self) -> str:
        try:
            lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return f" ({lines[-1].strip()})" if lines else ""

    def command(self, command: str) -> list[str]:
        """The argv that runs a shell command on the host through the master connection."""
        return self._ssh() + ["-o", "ControlMaster=no", self.destination, "--", _REMOTE_PATH + command]

    def run(
        self, command: str, what: str, stdin: IO[bytes] | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a short shell command there; a failure becomes one line saying `what` failed,
        a dropped connection `ConnectionLost`."""
        self.require_alive()
        try:
            done = subprocess.run(
                self.command(command),
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise Failure(f"host {self.label}: {what} did not finish within {timeout:.0f} s") from None
        if done.returncode == SSH_FAILED and not self.alive():
            raise ConnectionLost(f"lost the SSH connection to host {self.label} while {what}{self._last_words()}")
        if check and done.returncode != 0:
            raise Failure(f"host {self.label}: {what}: {last_line(done.stderr) or f'exit code {done.returncode}'}")
        return done

    def popen(self, command: str, stdout: Any, stderr: Any) -> subprocess.Popen[bytes]:
        """Start a long-running shell command there, its stdin a pipe from here."""
        self.require_alive()
        return subprocess.Popen(
            self.command(command), stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, start_new_session=True
        )

    def fetch(self, remote: str, local: Path, what: str) -> None:
        """Copy a file from the host to `local` (written whole or not at all)."""
        partial = local.with_name(local.name + ".partial")
        with open(partial, "wb") as out:
            self.require_alive()
            done = subprocess.run(self.command(f"cat {shlex.quote(remote)}"), stdout=out, stderr=subprocess.PIPE)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            if done.returncode == SSH_FAILED and not self.alive():
                raise ConnectionLost(f"lost the SSH connection to host {self.label} while {what}{self._last_words()}")
            raise Failure(f"host {self.label}: {what}: {last_line(done.stderr) or f'exit code {done.returncode}'}")
        partial.replace(local)

    def close(self) -> None:
        """End the master connection (whatever still runs there on a leash stops itself)."""
        if self.master is not None and exit_code(self.master) is None:
            self.master.terminate()
            if wait_for(self.master, 5) is None:
                self.master.kill()
                wait_for(self.master)
        self.control_socket.unlink(missing_ok=True)


def last_line(stderr: bytes | str) -> str:
    """The last non-empty line of a program's error output."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
