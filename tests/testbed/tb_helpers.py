"""Shared by the testbed and experiment tests: what they need from the host, and a check
that nothing of a testbed is left in the kernel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lowtail.testbed.process import TIME_LIMIT_ENV
from lowtail.testbed.registry import STATE_DIR, list_netns, tagged_cgroups
from lowtail.testbed.system import missing_capabilities

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or bool(missing_capabilities()),
    reason="needs root: network namespaces, veth links, packet sockets and cgroups",
)
needs_dpdk = pytest.mark.skipif(
    shutil.which("dpdk-testpmd", path="/usr/bin:/usr/local/bin") is None,
    reason="DPDK is not installed (Debian package dpdk-dev)",
)


def kind_unavailable(kind: str) -> str | None:
    """Why this DuT kind cannot run here (its own check's one line), None when it can."""
    from lowtail.core.errors import UserError
    from lowtail.testbed.duts import KINDS

    try:
        KINDS[kind].check_available()
    except UserError as e:
        return str(e)
    return None


def needs_kind(kind: str, reason: str = "") -> pytest.MarkDecorator:
    """Skip where the DuT kind cannot run, saying why."""
    why = kind_unavailable(kind)
    return pytest.mark.skipif(why is not None, reason=f"{reason}{why}")


def resources_of(pid: int) -> list[str]:
    """Everything of testbeds owned by process `pid` still on the host: namespaces (and the
    links and taps in them), cgroups, state files, run directories, and processes that carry
    the testbed's tag (QEMU's -name lowtail-<tag>, OVS's /run/lowtail/<tag> sockets)."""
    tag = re.compile(rf"^lt{pid}x[0-9a-f]{{4}}")
    left = [n for n in list_netns() if tag.match(n)]
    left += [path for t, path in tagged_cgroups() if tag.match(t)]
    left += [str(p) for p in STATE_DIR.glob(f"lt{pid}x*.json")] if STATE_DIR.is_dir() else []
    left += [str(p) for p in Path("/var/run/dpdk").glob(f"lt{pid}x*")]
    left += [str(p) for p in Path("/run/lowtail").glob(f"lt{pid}x*")]
    left += [f"process {p}: {cmd[:80]}" for p, cmd in tagged_processes(f"lt{pid}x")]
    return left


def time_limit_of(pid: int) -> str | None:
    """The time limit in a process's environment (testbed/process.py's TIME_LIMIT_ENV), or None."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{TIME_LIMIT_ENV}=".encode()
    found = [e.removeprefix(prefix).decode() for e in env if e.startswith(prefix)]
    return found[0] if found else None


def command_lines() -> list[tuple[int, str]]:
    """(pid, command line) of every other process on the host (those gone while read are left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry.name), cmd))
    return found


def tagged_processes(tag_prefix: str) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line names a testbed tag."""
    pattern = re.compile(rf"(lowtail-|/run/lowtail/){re.escape(tag_prefix)}")
    return [(pid, cmd) for pid, cmd in command_lines() if pattern.search(cmd)]


def programs_under(directory: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line names a path under
    `directory`: the generator, timestamper and forwarder of a run whose data is there
    (their statistics and captures go to its run directories)."""
    return [(pid, cmd) for pid, cmd in command_lines() if str(directory) in cmd and not _runs_pytest(cmd)]


def _runs_pytest(cmd: str) -> bool:
    """A pytest process (xdist's workers, a pytest inside a test): not a program of a run.
    Judged by the program it runs, not by the text "pytest" anywhere: pytest's own tmp_path
    (/tmp/pytest-of-root/…) is in every command line a run under it starts."""
    words = cmd.split()[:3]
    return any(Path(w).name in ("pytest", "py.test") for w in words) or "-m pytest" in " ".join(words)


def processes_in_netns_of(pid: int) -> list[int]:
    pids = []
    for ns in list_netns():
        if ns.startswith(f"lt{pid}x"):
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            pids += [int(p) for p in out.split()]
    return pids
