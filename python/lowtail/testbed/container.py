"""`containment = "container"`: what the URLLC studies' LXC containers had ("Containing Low
Tail-Latencies in Packet Processing Using Lightweight Virtualization", §3) — the DuT in its
own PID, mount and UTS namespaces besides the testbed's network namespace, in a cpuset of
cores it holds exclusively with the scheduler's load balancing off for them, with memory
reserved for it.

cgroup v2: one cgroup with the cpuset and memory controllers; the cpuset becomes an
"isolated" partition (exclusive cores, no load balancing; "root" where the kernel offers no
isolated partitions) and memory.min reserves the memory. cgroup v1 (hybrid hosts): the
cpuset hierarchy's cpu_exclusive and sched_load_balance, and the memory hierarchy's soft
limit (v1 has no hard reservation; the soft limit is what reclaim respects). Whatever the
kernel accepted is read back and recorded with the run, including what it did not honour.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Required, TypedDict

from lowtail.core.errors import Failure
from lowtail.host.sysroot import parse_cpulist
from lowtail.testbed import containment
from lowtail.testbed.containment import CpusetHierarchy, MemoryHierarchy, format_cpu_list
from lowtail.testbed.registry import cgroup_name
from lowtail.testbed.system import tool

Namespace = Literal["pid", "mnt", "uts", "net"]
NAMESPACES: tuple[Namespace, ...] = ("pid", "mnt", "uts", "net")


class NamespaceIds(TypedDict, total=False):
    """The namespaces a process is in, as /proc/PID/ns shows them ("pid:[4026531836]"): those it could read."""

    pid: str
    mnt: str
    uts: str
    net: str


class RecordedNamespaces(NamespaceIds, total=False):
    """What a run records of a container's namespaces (`containment.namespaces`): the
    contained program's PID and namespaces, and which of them are its own (not lowtail's)."""

    contained_pid: Required[int]
    own: Required[list[str]]


class UnseenNamespaces(TypedDict):
    """What a run records of a container whose program was not seen starting: why not."""

    own: list[str]  # none
    why: str


class CpusetExclusive(TypedDict, total=False):
    """What the kernel shows of the cores held exclusively: v2's partition, v1's flags."""

    partition: str  # v2: isolated | root
    exclusive: bool
    load_balancing: str  # in words: off, or on and why
    cpu_exclusive: int  # v1's files, as read back
    sched_load_balance: int


class CpusetApplied(CpusetExclusive):
    """The container's cpuset: where, which cores, and how exclusive they are."""

    path: str
    cpus: str


class MemoryReservation(TypedDict, total=False):
    """The memory reserved for the container (the file written and what it reads back), or why none."""

    reserved: Required[bool]
    why: str
    file: str
    bytes: int
    path: str
    cgroup_version: int


class ContainerCgroups(TypedDict):
    """What the container's cgroups applied, as recorded with the run's containment."""

    cgroup_version: int
    cpuset: CpusetApplied
    memory: MemoryReservation


def namespace_argv() -> list[str]:
    """The prefix that gives a program its own PID, mount (with its own /proc) and UTS
    namespaces; it is PID 1 there, and dies with the `unshare` that waits for it."""
    return [tool("unshare", "util-linux"), "--pid", "--fork", "--kill-child", "--mount-proc", "--uts", "--"]


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _siblings_holding(path: Path, cpus: list[int]) -> list[str]:
    """Sibling cpusets whose cores overlap `cpus` (why the kernel refuses exclusivity)."""
    held = []
    for sibling in path.parent.iterdir():
        if sibling == path or not sibling.is_dir():
            continue
        text = _read(sibling / "cpuset.cpus")
        if text and set(parse_cpulist(text)) & set(cpus):
            held.append(sibling.name)
    return held


def make_exclusive(h: CpusetHierarchy, path: Path, cpus: list[int]) -> CpusetExclusive:
    """Exclusive cores with load balancing off; what the kernel shows afterwards."""
    if h.version == 2:
        applied = None
        for partition in ("isolated", "root"):
            try:
                _write(path / "cpuset.cpus.partition", partition)
            except OSError:
                continue
            shown = _read(path / "cpuset.cpus.partition") or ""
            if shown.split()[:1] == [partition] and "invalid" not in shown:
                applied = partition
                break
        if applied is None:
            raise Failure(
                f"the kernel would not make cores {format_cpu_list(cpus)} an exclusive cpuset partition "
                f"({_read(path / 'cpuset.cpus.partition')}); other cgroups may hold them"
            )
        return {
            "partition": applied,
            "exclusive": True,
            "load_balancing": "off" if applied == "isolated" else "on (a root partition balances its cores)",
        }
    try:
        _write(path / "cpuset.cpu_exclusive", "1")
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise Failure(f"cannot make cpuset {path} exclusive: {e.strerror}") from None
        holders = _siblings_holding(path, cpus)
        raise Failure(
            f"cores {format_cpu_list(cpus)} cannot be held exclusively: "
            + (f"the cpusets {', '.join(holders)} use them too" if holders else "the kernel refused")
            + " (another run's container? run one container at a time on these cores)"
        ) from None
    _write(path / "cpuset.sched_load_balance", "0")
    # A v1 child's flag only counts where its parent balances no more either: the root's
    # flag covers the whole host (changing it is `lowtail host apply`'s business, not a run's).
    parent_balances = _read(path.parent / "cpuset.sched_load_balance") != "0"
    return {
        "cpu_exclusive": int(_read(path / "cpuset.cpu_exclusive") or 0),
        "sched_load_balance": int(_read(path / "cpuset.sched_load_balance") or 0),
        "exclusive": _read(path / "cpuset.cpu_exclusive") == "1",
        "load_balancing": "on: the parent cpuset still balances these cores" if parent_balances else "off",
    }


def reserve_memory(h: MemoryHierarchy, path: Path, size_bytes: int) -> MemoryReservation:
    """The memory reservation: v2 memory.min, v1 memory.soft_limit_in_bytes."""
    name = "memory.min" if h.version == 2 else "memory.soft_limit_in_bytes"
    try:
        _write(path / name, str(size_bytes))
    except OSError as e:
        raise Failure(f"cannot reserve memory in {path / name}: {e.strerror}") from None
    return {
        "reserved": True,
        "file": name,
        "bytes": int(_read(path / name) or 0),
        "path": str(path),
        "cgroup_version": h.version,
    }


def _enable_controller(root: Path, controller: str) -> None:
    control = root / "cgroup.subtree_control"
    if controller not in (_read(control) or "").split():
        try:
            _write(control, f"+{controller}")
        except OSError as e:
            raise Failure(f"cannot enable the {controller} controller in {control}: {e.strerror}") from None


def create_container_cgroups(
    tag: str,
    cpus: list[int],
    memory_bytes: int,
    register: Callable[[Path], None],
    cpuset: CpusetHierarchy | None = None,
    memory: MemoryHierarchy | None = None,
) -> tuple[list[Path], ContainerCgroups]:
    """The container's cgroups (each passed to `register` before it is made) and what was
    applied. The DuT joins every returned cgroup."""
    cpuset = cpuset or containment.required_cpuset_hierarchy()
    memory = memory if memory is not None else containment.memory_hierarchy()
    name = cgroup_name(tag)
    cpuset_path = cpuset.root / name
    register(cpuset_path)
    if cpuset.version == 2 and memory is not None and memory.version == 2:
        _enable_controller(cpuset.root, "memory")
    containment.create_cpuset(cpuset_path, cpus, cpuset)
    cpuset_applied: CpusetApplied = {
        "path": str(cpuset_path),
        "cpus": format_cpu_list(cpus),
        **make_exclusive(cpuset, cpuset_path, cpus),
    }
    paths = [cpuset_path]
    if memory is None:
        unreserved: MemoryReservation = {"reserved": False, "why": "this host mounts no memory controller"}
        return paths, {"cgroup_version": cpuset.version, "cpuset": cpuset_applied, "memory": unreserved}
    if memory.version == 2 and cpuset.version == 2 and memory.root == cpuset.root:
        memory_path = cpuset_path
    else:
        memory_path = memory.parent / name
        register(memory_path)
        if memory.version == 2:
            _enable_controller(memory.root, "memory")
        memory_path.mkdir()
        paths.append(memory_path)
    reserved = reserve_memory(memory, memory_path, memory_bytes)
    return paths, {"cgroup_version": cpuset.version, "cpuset": cpuset_applied, "memory": reserved}


def namespaces_of(pid: int) -> NamespaceIds:
    """The namespaces a process is in, as /proc/PID/ns shows them ("pid:[4026531836]")."""
    out: NamespaceIds = {}
    for ns in NAMESPACES:
        try:
            out[ns] = os.readlink(f"/proc/{pid}/ns/{ns}")
        except OSError:
            pass
    return out


def contained_process(unshare_pid: int, timeout_s: float = 5.0) -> int | None:
    """The program `unshare` started (PID 1 of the new PID namespace), seen from here."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
        except OSError:
            return None
        if children:
            return int(children[0])
        time.sleep(0.01)
    return None


def recorded_namespaces(unshare_pid: int) -> RecordedNamespaces | UnseenNamespaces:
    """What the run records of the container's namespaces: each one's id, and whether it
    differs from lowtail's own (it must, for all four)."""
    child = contained_process(unshare_pid)
    if child is None:
        return {"own": [], "why": "the contained program was not seen starting"}
    theirs, ours = namespaces_of(child), namespaces_of(os.getpid())
    return {
        "contained_pid": child,
        **theirs,
        "own": sorted(ns for ns in NAMESPACES if ns in theirs and theirs[ns] != ours.get(ns)),
    }
