"""Programs on another host, each under lowtail-leash, and the host as a run's `Site`.

    lowtail ── ssh (master) ══ sshd ── lowtail-leash ── lowtail-cap …
              stdin: heartbeats, "stop"    stdout: "ready", "@leash …" lines
              stderr: the program's messages, into a log file here

The leash ends its program when lowtail says `stop`, when the SSH channel closes (lowtail
or its connection died) or when heartbeats stop coming (the network went silent), and then
runs its undo commands: a keeper — a leash without a program — holds a piece of set-up
(the run's directory, a qdisc) and takes it back however the run ends. `RemoteProgram`
looks like a local `Program` to the run, so measure.py starts roles the same way anywhere.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from lowtail.core.errors import Failure
from lowtail.core.processes import exit_code, wait_for
from lowtail.testbed.document import SiteIdentity
from lowtail.testbed.hosts.ssh import SSH_FAILED, SshHost
from lowtail.testbed.process import ProcessHandle, time_limit_setting

if TYPE_CHECKING:
    from lowtail.testbed.hosts.facts import HostFacts

# Heartbeats every second; a leash that hears none for this long stops its role.
HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_TIMEOUT = "10s"


class Heartbeat:
    """Writes a heartbeat line to every live leash once a second, from one thread."""

    def __init__(self) -> None:
        self._programs: list[RemoteProgram] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="lowtail-heartbeat", daemon=True)
        self._thread.start()

    def add(self, program: RemoteProgram) -> None:
        """Keep `program`'s leash alive."""
        with self._lock:
            self._programs.append(program)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            with self._lock:
                self._programs = [p for p in self._programs if p.running()]
                programs = list(self._programs)
            for p in programs:
                p.say("")

    def close(self) -> None:
        """Stop beating (leashes still running will notice within their timeout)."""
        self._stop.set()
        self._thread.join()


class RemoteProgram(ProcessHandle):
    """A program started on a host under lowtail-leash (`argv` empty: a keeper that only
    holds its `undo` commands); `prelude`, a shell command, runs first (the leash only if it
    succeeds). Quacks like testbed.process.Program: its statistics come back on the leash's
    last lines, without another round trip."""

    host: SshHost

    def __init__(
        self,
        name: str,
        host: SshHost,
        bindir: str,
        argv: list[str],
        log: Path,
        heartbeat: Heartbeat,
        stats: str | None = None,
        undo: Sequence[list[str]] = (),
        prelude: str | None = None,
    ):
        self.name = name
        self.host = host
        self.log = log
        self.stats_path = stats
        self.stop_signal: int | None = None
        self.before_stop = None
        self.clock_start: tuple[int, int] | None = None
        self.clock_end: tuple[int, int] | None = None
        # The program's pid on its host, as the leash says it (`pid` is the ssh client's here).
        self.remote_pid: int | None = None
        self.exit_code: int | None = None
        self._statistics: dict[str, object] | None = None
        self._ready = threading.Event()
        self._started = threading.Event()
        self._write = threading.Lock()
        leash = [f"{bindir}/lowtail-leash", "--heartbeat-timeout", HEARTBEAT_TIMEOUT]
        for command in undo:
            leash += ["--undo", shlex.join(command)]
        if stats:
            leash += ["--stats", stats]
        # The run's time limit (testbed/process.py) goes along: the heartbeat comes from a
        # thread of its own, and it beats on while a lowtail that hangs does nothing else.
        limit = [f"{k}={v}" for k, v in time_limit_setting().items()]
        shell = "exec " + shlex.join((["env", *limit] if limit else []) + leash + (["--", *argv] if argv else []))
        with open(log, "ab") as err:
            self.popen = host.popen(f"{prelude} && {shell}" if prelude else shell, stdout=subprocess.PIPE, stderr=err)
        self._reader = threading.Thread(target=self._read, name=f"lowtail-{name}", daemon=True)
        self._reader.start()
        heartbeat.add(self)

    def wait_started(self, timeout_s: float = 30.0) -> RemoteProgram:
        """Wait until the leash runs (its program started, or it holds); a Failure if it did not."""
        if not self._started.wait(timeout_s) and self.running():
            self.stop()
        if not self._started.is_set():
            raise Failure(f"{self.name} did not start on host {self.host.label}: {self.exit_message()}")
        return self

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode(errors="replace").strip()
            if line == "ready":
                self._ready.set()
            elif line.startswith("@leash "):
                words = line.split()
                if words[1] in ("started", "holding"):
                    if words[1] == "started" and words[2].isdigit():
                        self.remote_pid = int(words[2])
                    self.clock_start = (int(words[-2]), int(words[-1]))
                    self._started.set()
                elif words[1] == "stats":
                    self._statistics = _json_object(line.split(None, 2)[2]) if len(words) > 2 else None
                elif words[1] == "exit":
                    self.exit_code = int(words[2])
                    self.clock_end = (int(words[-2]), int(words[-1]))

    # -- what Program offers -----------------------------------------------------------------

    def say(self, line: str) -> None:
        """One line to the leash (a heartbeat, or `stop`); a closed channel is no error."""
        with self._write:
            try:
                assert self.popen.stdin is not None
                self.popen.stdin.write(line.encode() + b"\n")
                self.popen.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def stop(self, grace_s: float = 5.0) -> int:
        """Ask the leash to stop its program (SIGINT there, then SIGTERM, SIGKILL) and wait;
        without an answer, end the ssh client (the leash then stops on its own)."""
        if self.running():
            self.stop_signal = self.stop_signal or signal.SIGINT
            self.say("stop")
            if self.wait(grace_s + 10.0) is None:
                self.popen.terminate()
                if self.wait(5.0) is None:
                    self.popen.kill()
        code = wait_for(self.popen)
        assert code is not None  # waited without a limit
        self._reader.join(5)
        return code

    def returncode(self) -> int | None:
        """The program's exit code as its leash reported it, else the ssh client's; None while it runs."""
        return self.exit_code if self.exit_code is not None else exit_code(self.popen)

    def lost(self) -> bool:
        """Whether the connection went before the leash said how its program ended."""
        return exit_code(self.popen) == SSH_FAILED and self.exit_code is None

    def exit_message(self) -> str:
        if self.lost():
            return f"lost the SSH connection to host {self.host.label} ({self.name} ran there" + (
                f"; {self.log_tail()})" if self.log_tail() else ")"
            )
        code = self.exit_code if self.exit_code is not None else exit_code(self.popen)
        tail = self.log_tail()
        return f"{self.name} on {self.host.label} exited with code {code}" + (
            f" (its last output: {tail})" if tail else ""
        )

    # Free-form, as a local Program's (`process.Program.statistics`): the program's JSON object.
    def statistics(self) -> dict[str, Any] | None:
        """The program's statistics, as the leash passed them on when it ended."""
        if self.running():
            return None
        self._reader.join(5)
        return self._statistics

    def wait_file(self, path: Path, timeout_s: float) -> bool:
        """Wait until the program says it is ready (its --ready-file's moment, said on stdout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ready.wait(0.02):
                return True
            if not self.running():
                return False
        return False


def _json_object(text: str) -> dict[str, object] | None:
    """The JSON object a leash's `@leash stats` line carries; None when it carries none."""
    try:
        return msgspec.json.decode(text, type=dict[str, object])
    except msgspec.DecodeError:  # not JSON, or not an object
        return None


class RunOnHosts(Protocol):
    """What a site needs of its run's testbed (`hosts.session.HostsTestbed`): the run's
    local folder, the heartbeat its programs share, and the registry that stops them."""

    work_dir: Path
    heartbeat: Heartbeat

    def adopt(self, program: RemoteProgram) -> RemoteProgram: ...


class RemoteSite:
    """A host as a run's site: lowtail's programs in `bindir`, the run's files in `run_dir`."""

    local = False

    def __init__(self, host: SshHost, facts: HostFacts, bindir: str, run_dir: str, testbed: RunOnHosts):
        self.host = host
        self.facts = facts
        self.bindir = bindir
        self.run_dir = run_dir
        self.testbed = testbed
        self.label = host.label

    def binary(self, name: str) -> str:
        return f"{self.bindir}/{name}"

    def path(self, name: str) -> str:
        return f"{self.run_dir}/{name}"

    def spawn(self, name: str, argv: list[str], ns: str | None = None, stats: str | None = None) -> RemoteProgram:
        return self.start(name, argv, stats).wait_started()

    def start(self, name: str, argv: list[str], stats: str | None = None) -> RemoteProgram:
        """Start a program without waiting for it (`wait_started` does)."""
        return self.testbed.adopt(
            RemoteProgram(
                name,
                self.host,
                self.bindir,
                argv,
                self.testbed.work_dir / f"{name}.log",
                self.testbed.heartbeat,
                stats=stats,
            )
        )

    def keep(self, name: str, undo: list[list[str]], prelude: str | None = None) -> RemoteProgram:
        """A keeper: `undo` runs on the host when the run ends, however it ends (after
        `prelude`, a shell command, made what it takes back). Not waited for: `wait_started`."""
        return self.testbed.adopt(
            RemoteProgram(
                name,
                self.host,
                self.bindir,
                [],
                self.testbed.work_dir / f"{name}.log",
                self.testbed.heartbeat,
                undo=undo,
                prelude=prelude,
            )
        )

    def fetch(self, name: str, local: Path) -> None:
        self.host.fetch(self.path(name), local, what=f"bringing {name} back")

    def trace_shell(self) -> Any:
        """Where a kernel trace of this host's roles runs: a `Shell` over its connection."""
        from lowtail.testbed.hosts.tracing import SshShell

        return SshShell(self.host)

    def isolated_cpus(self) -> set[int] | None:
        from lowtail.testbed.hosts.facts import isolated

        return isolated(self.facts)

    def clocks(self, program: Any, start: tuple[int, int], end: tuple[int, int]) -> tuple[Any, ...]:
        return program.clock_start, program.clock_end

    def identity(self) -> SiteIdentity:
        return {
            "host": self.label,
            "boot_id": self.facts.boot_id,
            "ptp": {
                "clocks": self.facts.ptp_clocks,
                "daemons": (self.facts.time_daemons or "").split(),
                "port_state": self.facts.ptp_port_state,
            },
        }
