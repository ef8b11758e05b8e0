"""Containment of a DuT: "bare" (an ordinary process, optionally pinned) or "container"
(the URLLC studies' container configuration, made by container.py: the DuT in its own namespaces
and cgroups, with a cpuset of chosen cores, so it and everything it starts can run only
there). This module knows the cgroup hierarchies and makes the cpusets.

cgroup v2 is used where its hierarchy offers the cpuset controller; hosts that still
mount cpuset as a v1 hierarchy (hybrid set-ups) get the same cpuset there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from lowtail.core.errors import Failure, UserError
from lowtail.host.sysroot import parse_cpulist

MODES = ("bare", "container")


@dataclass(frozen=True)
class CpusetHierarchy:
    version: int
    root: Path

    def effective_cpus(self) -> set[int]:
        name = "cpuset.cpus.effective" if self.version == 2 else "cpuset.effective_cpus"
        return set(parse_cpulist((self.root / name).read_text()))

    def effective_mems(self) -> str:
        name = "cpuset.mems.effective" if self.version == 2 else "cpuset.effective_mems"
        return (self.root / name).read_text().strip()


def format_cpu_list(cpus: list[int] | set[int]) -> str:
    """CPUs as an explicit comma list ("0,1,2"): what cpuset files, taskset and the
    `{cpus}` of a custom DuT command get, for programs that do not read ranges."""
    return ",".join(str(c) for c in sorted(cpus))


def controller_mount(controller: str, mounts: str | None = None) -> tuple[int, Path] | None:
    """Where a cgroup controller is mounted: (2, the unified hierarchy) when cgroup v2 offers
    it, else (1, its v1 hierarchy), else None. `mounts` is /proc/self/mounts' text."""
    mounts = Path("/proc/self/mounts").read_text() if mounts is None else mounts
    v1 = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            try:
                if controller in (mount_point / "cgroup.controllers").read_text().split():
                    return 2, mount_point
            except OSError:
                continue
        elif fstype == "cgroup" and controller in options:
            v1 = mount_point
    return None if v1 is None else (1, v1)


def cpuset_hierarchy() -> CpusetHierarchy | None:
    """Where cpusets can be made on this host, preferring cgroup v2."""
    found = controller_mount("cpuset")
    return None if found is None else CpusetHierarchy(*found)


@dataclass(frozen=True)
class MemoryHierarchy:
    """Where a container's memory cgroup goes: under the cgroup this process is in (v1, so
    the DuT stays inside its accounting), or at the root of the unified hierarchy (v2, whose
    no-internal-processes rule forbids children of a cgroup with processes)."""

    version: int
    root: Path
    parent: Path


def memory_hierarchy(mounts: str | None = None, own: str | None = None) -> MemoryHierarchy | None:
    """The memory controller's hierarchy, preferring cgroup v2 (as `cpuset_hierarchy`)."""
    own = Path("/proc/self/cgroup").read_text() if own is None else own
    found = controller_mount("memory", mounts)
    if found is None:
        return None
    version, root = found
    if version == 2:
        return MemoryHierarchy(2, root, root)
    v1 = root
    for line in own.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return MemoryHierarchy(1, v1, v1 / path.strip().lstrip("/"))
    return MemoryHierarchy(1, v1, v1)


def required_cpuset_hierarchy() -> CpusetHierarchy:
    """The cpuset hierarchy, or a UserError when this host has none (a container cannot be made)."""
    h = cpuset_hierarchy()
    if h is None:
        raise UserError(
            'containment = "container" needs the cgroup cpuset controller, which this host '
            'does not mount (neither in cgroup v2 nor as a v1 hierarchy); use containment = "bare"'
        )
    return h


def create_cpuset(path: Path, cpus: list[int], hierarchy: CpusetHierarchy | None = None) -> Path:
    """A new cgroup at `path` in the cpuset `hierarchy` limited to `cpus`; processes are put
    in by writing their pid to `<path>/cgroup.procs`."""
    h = hierarchy or required_cpuset_hierarchy()
    available = h.effective_cpus()
    if not set(cpus) <= available:
        raise UserError(
            f"container cores {format_cpu_list(cpus)} are not all available on this host "
            f"(available: {format_cpu_list(available)})"
        )
    if h.version == 2:
        _enable_cpuset_controller(h.root)
    path.mkdir()
    try:
        # v1 refuses tasks until both cpus and mems are set; v2 inherits mems but is told anyway.
        (path / "cpuset.mems").write_text(h.effective_mems())
        (path / "cpuset.cpus").write_text(format_cpu_list(cpus))
    except OSError as e:
        path.rmdir()
        raise Failure(f"cannot set up the cpuset of cgroup {path}: {e.strerror}") from None
    return path


def _enable_cpuset_controller(root: Path) -> None:
    control = root / "cgroup.subtree_control"
    if "cpuset" not in control.read_text().split():
        try:
            control.write_text("+cpuset")
        except OSError as e:
            raise Failure(f"cannot enable the cpuset controller in {control}: {e.strerror}") from None


def cgroup_pids(path: str | Path) -> list[int]:
    """The processes in a cgroup (none when it is gone)."""
    try:
        return [int(p) for p in (Path(path) / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def remove_cgroup(path: str | Path, timeout_s: float = 5.0) -> None:
    """Kill what is still inside (only our DuT's processes can be) and remove the cgroup."""
    import signal

    path = Path(path)
    deadline = time.monotonic() + timeout_s
    while path.exists():
        for pid in cgroup_pids(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise Failure(f"cannot remove cgroup {path}: {e.strerror}") from None
            time.sleep(0.05)
