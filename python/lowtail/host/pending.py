"""Undo files in flight: host changes a running lowtail holds until it undoes or keeps them,
written down where the next command looks, so that a command killed outright (SIGKILL, a lost
machine session) leaves a trace every later command finds.

`host apply` and `tune` put a marker in STATE_DIR before their first change: the undo file's
path, and the owner's pid and start time. The marker goes when the change is kept on purpose
(`host apply` finished, `tune` kept a trial) or undone. A marker whose owner is dead and whose
undo file still exists is a pending undo file: every command says so first (cli.main, through
`notices`), and `lowtail testbed clean` undoes it. Markers are best effort: where STATE_DIR
cannot be written (not root, on a sysroot) the changes themselves are still all or nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from lowtail.core import signals
from lowtail.core.files import discard
from lowtail.core.processes import is_alive, process_start_time

STATE_DIR = Path(os.environ.get("LOWTAIL_UNDO_STATE_DIR", "/run/lowtail/undo"))
# A marker is a few hundred bytes: a larger file in STATE_DIR is not one.
_MAX_MARKER_BYTES = 64 << 10


@dataclass(frozen=True)
class InFlight:
    """An undo file some lowtail process holds changes of."""

    undo_file: str
    owner_pid: int
    owner_start: int | None
    command: str  # "host apply", "tune"

    def owner_alive(self) -> bool:
        return is_alive(self.owner_pid, self.owner_start)

    def how_to_undo(self) -> str:
        return f"`lowtail host undo {self.undo_file}` or `lowtail testbed clean` undoes it"


def _marker(undo_file: Path) -> Path:
    key = hashlib.sha256(str(Path(undo_file).absolute()).encode()).hexdigest()[:20]
    return STATE_DIR / f"{key}.json"


def hold(undo_file: Path, command: str) -> None:
    """Record that this process holds the changes of `undo_file` (before the first change)."""
    pid = os.getpid()
    entry = InFlight(str(Path(undo_file).absolute()), pid, process_start_time(pid), command)
    marker = _marker(undo_file)
    tmp = marker.with_suffix(".partial")
    try:
        with signals.held():  # the marker is whole or absent
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(asdict(entry)))
            tmp.replace(marker)
    except OSError:
        discard(tmp)


def release(undo_file: Path) -> None:
    """The changes of `undo_file` are undone, or kept on purpose: no longer in flight."""
    discard(_marker(undo_file))


def _load(marker: Path) -> InFlight | None:
    try:
        if not marker.is_file() or marker.is_symlink() or marker.stat().st_size > _MAX_MARKER_BYTES:
            return None
        doc = json.loads(marker.read_text())
        entry = InFlight(
            undo_file=str(doc["undo_file"]),
            owner_pid=int(doc["owner_pid"]),
            owner_start=None if doc.get("owner_start") is None else int(doc["owner_start"]),
            command=str(doc.get("command", "lowtail")),
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return entry


def pending() -> list[InFlight]:
    """The undo files of dead owners that still exist (markers whose undo file is gone are
    removed: undone by hand, or a test's sysroot taken away)."""
    try:
        markers = sorted(STATE_DIR.glob("*.json"))
    except OSError:
        return []
    found = []
    for marker in markers:
        entry = _load(marker)
        if entry is None or entry.owner_alive():
            continue
        if not Path(entry.undo_file).is_file():
            discard(marker)
            continue
        found.append(entry)
    return found
