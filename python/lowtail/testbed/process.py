"""Programs the testbed starts inside its namespaces: started in their own process group
(a Ctrl-C reaches lowtail, which stops them in order), output kept in a log file, stopped
with SIGINT (the native programs write their statistics then), then SIGTERM, then SIGKILL.

Every program dies with lowtail: it gets SIGKILL when the lowtail process exits, however
it exits (`PR_SET_PDEATHSIG`, which survives the exec chain `ip netns exec`, `taskset`,
`sh -c 'exec …'`). lowtail's own programs ask for SIGTERM instead once they run, to stop
cleanly; a launcher's children (unshare's, QEMU's threads) go with it. A lowtail that hangs
rather than dies is covered by a time limit every program started under `time_limit` keeps:
lowtail's own stop by themselves, others are ended by the kernel (`keep_to_time_limit`)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from lowtail.core.processes import exit_code, wait_for

if TYPE_CHECKING:
    from lowtail.testbed.hosts.ssh import SshHost

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


# lowtail's native programs stop by themselves after the duration in this variable of their
# environment (crates/lowtail-net/src/signal.rs): a controller that hangs, alive, leaves no
# real-time program spinning on a core (one that dies stops them at once, above).
TIME_LIMIT_ENV = "LOWTAIL_TIME_LIMIT"
_time_limit_s: float | None = None


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """The programs started inside stop by themselves after `seconds` (lowtail's own; others
    ignore it)."""
    global _time_limit_s
    before, _time_limit_s = _time_limit_s, seconds
    try:
        yield
    finally:
        _time_limit_s = before


def _time_limit_whole_s() -> int | None:
    """The time limit in force in whole seconds (what the programs are told), None when none is."""
    return None if _time_limit_s is None else max(1, round(_time_limit_s))


def time_limit_setting() -> dict[str, str]:
    """The environment variable of the time limit in force ({} when none is): for a program
    started here, or on another host through its leash."""
    seconds = _time_limit_whole_s()
    return {} if seconds is None else {TIME_LIMIT_ENV: f"{seconds}s"}


def keep_to_time_limit(seconds: int, cores: int) -> None:
    """In a child between fork and exec: the kernel ends the program it becomes once the
    time limit has run out, whether or not the program knows the limit (DPDK's testpmd,
    QEMU, Suricata, a custom command spin on in a lowtail that hangs as lowtail-fwd did).
    Both survive exec and the launchers' exec chain (`ip netns exec`, `chrt`, `nice`):
    - a one-shot `ITIMER_REAL` of `seconds`: SIGALRM, whose default action ends a program
      that does not take it (lowtail's own arm the same timer from their environment and
      stop cleanly on it; OVS's daemons exit on it; `unshare --fork --kill-child` dies of
      it and takes the contained program along);
    - `RLIMIT_CPU` of `seconds` per core of the host, soft and hard alike (SIGKILL): for a
      program that blocks SIGALRM — QEMU reads it through a signalfd and does nothing —
      yet spins, which is the harm. A process cannot use more CPU than that in `seconds`,
      so no run within its limit meets it; a spinning one is ended after at most `cores`
      times the limit (a program that only sleeps is left to lowtail's teardown)."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds * cores, seconds * cores))


def _environment() -> dict[str, str] | None:
    """A program's environment: this process's, with the time limit if one is set."""
    limit = time_limit_setting()
    return os.environ | limit if limit else None


def die_with(parent: int) -> None:
    """In a child between fork and exec: SIGKILL when `parent` exits (at once if it has)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


class ProcessHandle:
    """What a started program offers, whether it runs here (`Program`) or through an ssh
    client on another host (`hosts.remote.RemoteProgram`): `popen` is the local process,
    `log` its output file, `stop_signal` set once it was asked to stop."""

    popen: subprocess.Popen[bytes]
    log: Path
    name: str
    stop_signal: int | None = None
    # Where it runs: None here; a program on another host names it, and its pid there once
    # its leash said (the `pid` of any handle is the local process's).
    host: SshHost | None = None
    remote_pid: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return exit_code(self.popen) is None

    def wait(self, timeout: float) -> int | None:
        return wait_for(self.popen, timeout)

    def died(self) -> bool:
        """Ended without being asked to."""
        return not self.running() and self.stop_signal is None

    def log_tail(self, lines: int = 1) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        return " | ".join(t.strip() for t in text[-lines:])


class Program(ProcessHandle):
    def __init__(self, name: str, argv: list[str], log: Path, stats: Path | None = None, signal_group: bool = False):
        self.name = name
        self.argv = argv
        self.log = log
        self.stats_path = stats
        self.stop_signal: int | None = None
        # Signal the whole process group: a program behind a launcher that waits for it
        # (`unshare --fork` ignores SIGINT and SIGTERM itself) gets the signal directly.
        self.signal_group = signal_group
        # Run before the first stop signal, e.g. to take back real-time scheduling that
        # would let the program's threads starve each other while they wind down.
        self.before_stop: Callable[[], object] | None = None
        parent = os.getpid()
        limit_s, cores = _time_limit_whole_s(), os.cpu_count() or 1

        def in_child() -> None:
            die_with(parent)
            if limit_s is not None:
                keep_to_time_limit(limit_s, cores)

        with open(log, "wb") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
                preexec_fn=in_child,
                env=_environment(),
            )

    def stop(self, grace_s: float = 5.0) -> int:
        """Ask the program to finish (SIGINT), insist if it does not; its exit code."""
        if self.before_stop is not None and self.running():
            self.before_stop()
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            if not self.running():
                break
            self.stop_signal = self.stop_signal or sig
            try:
                (os.killpg if self.signal_group else os.kill)(self.pid, sig)
            except ProcessLookupError:
                break
            self.wait(wait_s)
        code = wait_for(self.popen)
        assert code is not None  # waited without a limit
        return code

    def returncode(self) -> int | None:
        """The program's exit code (negative: the signal that ended it); None while it runs."""
        return exit_code(self.popen)

    def exit_message(self) -> str:
        code = exit_code(self.popen)
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        tail = self.log_tail()
        return f"{self.name} {how}" + (f" (its last output: {tail})" if tail else "")

    # Free-form: the JSON object the program wrote (--stats-json), whose shape is the
    # program's; its reader types it (experiment.measure: GeneratorStatistics,
    # CaptureStatistics; a DuT kind its counters, `DutCounters`).
    def statistics(self) -> dict[str, Any] | None:
        """What the program wrote of itself as it ended; None when it wrote nothing readable."""
        if self.stats_path is None or not self.stats_path.exists():
            return None
        try:
            return msgspec.json.decode(self.stats_path.read_bytes(), type=dict[str, object])
        except msgspec.DecodeError:  # not JSON, or not an object
            return None

    def wait_file(self, path: Path, timeout_s: float) -> bool:
        """Wait until the program creates `path` (its `--ready-file`). False when it died
        or the time ran out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if path.exists():
                return True
            if not self.running():
                return False
            time.sleep(0.02)
        return False


def make_realtime(pid: int, priority: int | None) -> str:
    """Every thread of process `pid` to SCHED_FIFO `priority` (for DuTs that do not switch
    themselves, as lowtail-fwd does with --rt-priority), or back to ordinary scheduling
    (None); what was applied, in words."""
    policy, param = (os.SCHED_FIFO, os.sched_param(priority)) if priority else (os.SCHED_OTHER, os.sched_param(0))
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return "ordinary (the process had ended)"
    for tid in threads:
        try:
            os.sched_setscheduler(tid, policy, param)
        except ProcessLookupError:
            continue
        except OSError as e:
            return f"ordinary (SCHED_FIFO refused: {e.strerror})"
    return f"SCHED_FIFO {priority}" if priority else "ordinary"
