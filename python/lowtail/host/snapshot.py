"""`lowtail host snapshot DIR`: copy what the audit reads from the live /proc and /sys
into DIR, so the host can be audited (and `apply` tried out) elsewhere with --sysroot DIR.

The files copied are exactly those the audit, the planner and `apply` read — recorded
while they run on the live host — for every CPU, so any core plan can be audited later."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from lowtail.core.errors import UserError
from lowtail.core.version import __version__
from lowtail.host.apply import planned_changes
from lowtail.host.audit import run_audit
from lowtail.host.facts import Host
from lowtail.host.plan import kernel_cmdline, resolve_plan
from lowtail.host.sysroot import SysRoot

MANIFEST = "lowtail-snapshot.json"


class SnapshotManifest(TypedDict):
    """What a snapshot holds (its MANIFEST file): where and when it was taken, the files
    written and those that could not be read."""

    snapshot: str
    lowtail_version: str
    created_at: str
    host: str
    kernel: str
    files: int
    unreadable: list[str]


class SnapshotDocument(SnapshotManifest):
    """A snapshot written, as `lowtail host snapshot --json` prints it."""

    path: str
    checks: int  # the audit's checks whose files it holds


def write_snapshot(dest: Path, source: str | Path | None = None) -> SnapshotDocument:
    """Copy into `dest` every /proc and /sys file an audit of the host reads (a sysroot to
    audit elsewhere with --sysroot); returns what was written."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise UserError(f"{dest} is not empty: give a new directory for the snapshot")
    root = SysRoot.open(source, record=True)
    host = Host(root)
    plan = resolve_plan(host)
    for cpu in host.cpus_present:  # per-CPU facts for every CPU, not only this plan's
        host.siblings(cpu)
        host.idle_states(cpu)
        host.cpufreq(cpu)
        root.read(f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors")
    checks = run_audit(host, plan)
    kernel_cmdline(host, plan)
    try:
        planned_changes(host, plan)
    except UserError:
        pass  # a cpuset left by an earlier apply: the audit's files are recorded already
    try:
        dest.mkdir(parents=True, exist_ok=True)
        files = root.save_recording(dest)
        manifest: SnapshotManifest = {
            "snapshot": "lowtail host snapshot",
            "lowtail_version": __version__,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": socket.gethostname() if root.live else str(root.root),
            "kernel": host.release,
            "files": files,
            "unreadable": sorted(set(root.unreadable)),
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    except OSError as e:
        raise UserError(f"cannot write the snapshot into {dest}: {e.strerror}") from None
    return {**manifest, "path": str(dest), "checks": len(checks)}
