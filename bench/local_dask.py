"""A real Dask cluster on this machine, as separate processes: `dask scheduler` and
`dask worker`s (one thread each, no nanny, no dashboard), stopped at the end.

Used by `make bench`'s campaign part and by the campaign tests (which kill its scheduler or a
worker mid-campaign, hence the handles). The scheduler writes its address to a JSON file;
the file appears before its text is flushed, so the address is read once it parses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
START_SECONDS = 60.0  # for the scheduler to write its address, and again for the workers to join


class LocalDask:
    """A scheduler and `workers` workers on localhost; a context manager, or `stop()`."""

    def __init__(self, workdir: Path, workers: int, death_timeout: float | None = None):
        self.file = Path(tempfile.mkdtemp(dir=workdir)) / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        try:
            self.scheduler = self._start(
                ["scheduler", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)]
            )
            self.address = read_scheduler_address(self.file, self.scheduler)
            worker_args = ["--scheduler-file", str(self.file), "--nthreads", "1", "--no-nanny", "--no-dashboard"]
            if death_timeout is not None:
                worker_args += ["--death-timeout", str(death_timeout)]
            self.workers = [self._start(["worker", *worker_args, "--name", f"w{i}"]) for i in range(workers)]
            self._wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> LocalDask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, args: list[str]) -> subprocess.Popen:
        p = subprocess.Popen([str(BIN / "dask"), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def _wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(n, timeout=START_SECONDS)

    def stop(self) -> None:
        """Every process killed and reaped, workers first."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()


def read_scheduler_address(file: Path, scheduler: subprocess.Popen, timeout: float = START_SECONDS) -> str:
    """The address in the scheduler's file, once the file exists and its JSON is whole."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return str(json.loads(file.read_text())["address"])
        except (FileNotFoundError, ValueError, KeyError):
            pass  # not written yet, or written but not yet flushed
        if scheduler.poll() is not None:
            raise RuntimeError(f"dask scheduler exited {scheduler.returncode} before it wrote {file}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"dask scheduler did not write its address to {file} within {timeout:.0f} s")
        time.sleep(0.05)
