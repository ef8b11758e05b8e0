"""What a testbed owns, written down before it is made, so that whatever kills a run
(Ctrl-C, SIGTERM, SIGKILL, a crash) `lowtail testbed clean` can find and remove it later.

Every testbed has a tag `lt<owner pid>x<4 hex>`; its namespaces, cgroups and DPDK
runtime files are named after the tag, and /run/lowtail/testbeds/<tag>.json lists them
together with the owner's pid and start time. A testbed is a leftover only when its
owner is dead: other users' and other engineers' running testbeds are never touched.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from lowtail.core import signals
from lowtail.core.errors import Failure
from lowtail.core.processes import is_alive, process_start_time
from lowtail.testbed.containment import cpuset_hierarchy, memory_hierarchy, remove_cgroup
from lowtail.testbed.system import ip, local_argv, sh, tool

STATE_DIR = Path(os.environ.get("LOWTAIL_STATE_DIR", "/run/lowtail/testbeds"))
TAG_PATTERN = re.compile(r"^lt(\d+)x([0-9a-f]{4})$")
# A chain's hops have namespaces <tag>-h1 … and, when contained, cgroups lowtail-<tag>-h1 ….
NETNS_PATTERN = re.compile(r"^(lt\d+x[0-9a-f]{4})-(lg|dut|h\d+)$")
CGROUP_PATTERN = re.compile(r"^lowtail-(lt\d+x[0-9a-f]{4})(?:-h\d+)?$")


def new_tag() -> str:
    """A fresh testbed tag owned by this process."""
    return f"lt{os.getpid()}x{secrets.token_hex(2)}"


def netns_name(tag: str, side: str) -> str:
    """The network namespace of a testbed's side: "lg" (generator, timestamper) or "dut"."""
    return f"{tag}-{side}"


def hop_tag(tag: str, index: int) -> str:
    """The name a chain's `index`-th hop (from 0) gives what it makes outside its namespace."""
    return f"{tag}-h{index + 1}"


def cgroup_name(tag: str) -> str:
    """The name of a testbed's cgroups (its DuT's cpuset and, for a container, its memory cgroup)."""
    return f"lowtail-{tag}"


def tag_owner(tag: str) -> int:
    """The pid of the process that made a testbed, from its tag."""
    m = TAG_PATTERN.match(tag)
    if not m:
        raise ValueError(f"not a testbed tag: {tag}")
    return int(m.group(1))


@dataclass
class OwnedProcess:
    pid: int
    start_time: int | None
    name: str


@dataclass
class Registry:
    """The resources of one testbed, kept on disk as they are created and removed."""

    tag: str
    owner_pid: int
    owner_start: int | None
    created: float = field(default_factory=time.time)
    netns: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    processes: list[OwnedProcess] = field(default_factory=list)
    # Commands that take back set-up made outside the testbed's own namespaces (a qdisc
    # on the user's interface), newest last: run in reverse.
    undo: list[list[str]] = field(default_factory=list)

    @classmethod
    def for_this_process(cls, tag: str) -> Registry:
        pid = os.getpid()
        reg = cls(tag=tag, owner_pid=pid, owner_start=process_start_time(pid))
        reg.save()
        return reg

    @property
    def file(self) -> Path:
        return STATE_DIR / f"{self.tag}.json"

    def save(self) -> None:
        with signals.held():  # never a half-written state file left behind
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            tmp = self.file.with_suffix(".partial")
            tmp.write_text(json.dumps(asdict(self)))
            tmp.replace(self.file)

    def add(self, kind: str, value: Any) -> None:
        getattr(self, kind).append(value)
        self.save()

    def discard(self, kind: str, value: Any) -> None:
        items = getattr(self, kind)
        if value in items:
            items.remove(value)
            self.save()

    def owner_alive(self) -> bool:
        return is_alive(self.owner_pid, self.owner_start)

    def forget(self) -> None:
        self.file.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path) -> Registry:
        doc = json.loads(path.read_text())
        doc["processes"] = [OwnedProcess(**p) for p in doc.get("processes", [])]
        return cls(**doc)


# -- finding and removing leftovers ---------------------------------------------------------------


class LeftoverDocument(TypedDict):
    """A dead owner's testbed, as `lowtail testbed clean --json` prints it."""

    tag: str
    owner_pid: int
    netns: list[str]
    cgroups: list[str]
    paths: list[str]
    processes: list[int]
    undo: list[str]  # each command as one line


@dataclass
class Leftover:
    """A testbed whose owner is gone, and what of it is still there."""

    tag: str
    owner_pid: int
    state_file: Path | None
    netns: list[str]
    cgroups: list[str]
    paths: list[str]
    processes: list[OwnedProcess]
    undo: list[list[str]] = field(default_factory=list)

    def summary(self) -> str:
        """What is left, in words: namespaces, cgroups, paths, processes and set-up to undo."""
        what = self.netns + self.cgroups + self.paths + [f"pid {p.pid}" for p in self.processes]
        what += [f"`{' '.join(u)}`" for u in reversed(self.undo)]
        return f"testbed {self.tag} (owner pid {self.owner_pid} is gone): {', '.join(what) or 'its state file'}"

    def describe(self) -> LeftoverDocument:
        """The leftover as `lowtail testbed clean --json` prints it."""
        return {
            "tag": self.tag,
            "owner_pid": self.owner_pid,
            "netns": self.netns,
            "cgroups": self.cgroups,
            "paths": self.paths,
            "processes": [p.pid for p in self.processes],
            "undo": [" ".join(u) for u in self.undo],
        }


def list_netns() -> list[str]:
    """The network namespaces `ip netns` knows."""
    done = ip("-json", "netns", "list", what="listing network namespaces")
    return [entry["name"] for entry in json.loads(done.stdout or "[]")]


def tagged_cgroups() -> list[tuple[str, str]]:
    """(testbed tag, path) of every lowtail cgroup on the host: cpusets, and the memory
    cgroups of containers."""
    parents = []
    h = cpuset_hierarchy()
    if h is not None:
        parents.append(h.root)
    m = memory_hierarchy()
    if m is not None and m.parent not in parents:
        parents.append(m.parent)
    found = []
    for parent in parents:
        for child in parent.iterdir():
            match = CGROUP_PATTERN.match(child.name)
            if match and child.is_dir():
                found.append((match.group(1), str(child)))
    return found


@dataclass
class TestbedOnHost:
    """A testbed seen on this host: its state file (None: only tagged names are left), its
    namespaces and cgroups by name, and whether its owner is alive."""

    registry: Registry | None = None
    netns: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    alive: bool = False
    # A state file's temporary copy, left when its owner was killed (SIGKILL) while saving it.
    partial: Path | None = None


def testbeds_on_host() -> dict[str, TestbedOnHost]:
    """Every testbed visible on this host (state files and tagged names) by tag, with its
    owner's liveness."""
    found: dict[str, TestbedOnHost] = {}

    def entry(tag: str) -> TestbedOnHost:
        return found.setdefault(tag, TestbedOnHost())

    if STATE_DIR.is_dir():
        for path in sorted(STATE_DIR.glob("lt*.json")):
            try:
                reg = Registry.load(path)
            except (ValueError, TypeError, OSError):
                continue  # a state file being written right now, or not ours
            entry(reg.tag).registry = reg
        for path in sorted(STATE_DIR.glob("lt*.partial")):
            if TAG_PATTERN.match(path.stem):
                entry(path.stem).partial = path
    for name in list_netns():
        m = NETNS_PATTERN.match(name)
        if m:
            entry(m.group(1)).netns.append(name)
    for tag, cgroup in tagged_cgroups():
        entry(tag).cgroups.append(cgroup)
    for tag, e in found.items():
        # Without a state file only the pid in the name is known; a live pid is given the
        # benefit of the doubt (it may be a testbed being set up right now).
        e.alive = e.registry.owner_alive() if e.registry else is_alive(tag_owner(tag), None)
    return found


def find_leftovers() -> list[Leftover]:
    """The testbeds on this host whose owner is dead, with what of them is still there."""
    leftovers = []
    for tag, e in testbeds_on_host().items():
        if e.alive:
            continue
        reg = e.registry
        leftovers.append(
            Leftover(
                tag=tag,
                owner_pid=tag_owner(tag),
                state_file=reg.file if reg else e.partial,
                netns=sorted(set(e.netns) | set(reg.netns if reg else [])),
                cgroups=sorted(set(e.cgroups) | set(reg.cgroups if reg else [])),
                paths=[p for p in (reg.paths if reg else []) if Path(p).exists()],
                processes=[p for p in (reg.processes if reg else []) if is_alive(p.pid, p.start_time)],
                undo=list(reg.undo) if reg else [],
            )
        )
    return leftovers


# Where `ip netns add` makes its namespaces: listed without running `ip` (every command's
# start looks, cli/_leftovers.py).
NETNS_RUN_DIR = Path("/run/netns")


def dead_owner_tags() -> list[str]:
    """The tags of testbeds whose owner is dead, from their state files and the namespace
    names alone (no command run): a quick look for every command's start; `find_leftovers`
    says what of each is left."""
    tags: dict[str, int | None] = {}
    try:
        states = sorted(STATE_DIR.glob("lt*.json")) if STATE_DIR.is_dir() else []
        partials = sorted(STATE_DIR.glob("lt*.partial")) if STATE_DIR.is_dir() else []
        names = sorted(os.listdir(NETNS_RUN_DIR)) if NETNS_RUN_DIR.is_dir() else []
    except OSError:
        return []
    for path in states:
        try:
            reg = Registry.load(path)
        except (ValueError, TypeError, OSError):
            continue
        if isinstance(reg.tag, str) and TAG_PATTERN.match(reg.tag):
            tags[reg.tag] = reg.owner_start if isinstance(reg.owner_start, int) else None
    for name in names:
        m = NETNS_PATTERN.match(name)
        if m and m.group(1) not in tags:
            tags[m.group(1)] = None
    for path in partials:  # a state file its owner was killed while saving
        if TAG_PATTERN.match(path.stem) and path.stem not in tags:
            tags[path.stem] = None
    return [tag for tag, start in tags.items() if not is_alive(tag_owner(tag), start)]


def kill_processes(procs: list[OwnedProcess], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s` for those still running; only processes whose
    pid and start time still match (a reused pid is someone else's)."""
    live = [p for p in procs if is_alive(p.pid, p.start_time)]
    for p in live:
        _signal(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [p for p in live if is_alive(p.pid, p.start_time)]
    for p in live:
        _signal(p.pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def netns_processes(netns: str) -> list[OwnedProcess]:
    """The processes running inside a network namespace."""
    done = sh(tool("ip"), "netns", "pids", netns, what=f"listing processes in namespace {netns}", check=False)
    pids = [int(p) for p in done.stdout.split() if p.isdigit()]
    return [OwnedProcess(pid, process_start_time(pid), "") for pid in pids]


# `ip netns delete` detaches one mount of the name and unlinks it: a name mounted more than
# once (a bind mount over it) stays, "Device or resource busy", and each try takes one away.
NETNS_DELETE_TRIES = 3


def delete_netns(name: str) -> None:
    """Stop what runs in a network namespace, then delete it and see that its name is gone;
    a Failure saying why when it is still there after a few tries (the teardown then says
    the testbed is not fully removed, and keeps it for `lowtail testbed clean`)."""
    said = ""
    for attempt in range(NETNS_DELETE_TRIES):
        kill_processes(netns_processes(name))
        done = ip("netns", "delete", name, what=f"deleting network namespace {name}", check=False)
        if not os.path.lexists(NETNS_RUN_DIR / name):
            return
        said = (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[-1]
        time.sleep(0.1 * (attempt + 1))
    raise Failure(f"network namespace {name} is still there after {NETNS_DELETE_TRIES} deletions: {said}")


def run_undo(argv: list[str]) -> None:
    """Take back one piece of set-up; what is already gone (a qdisc deleted with its
    interface) is no failure."""
    sh(*local_argv(argv), what=f"undoing with `{' '.join(argv)}`", check=False)


def remove_leftover(left: Leftover) -> None:
    """Remove everything of a dead owner's testbed that is still there, then its state file;
    a Failure naming what stays (its state file kept, for another try)."""
    kill_processes(left.processes)
    for argv in reversed(left.undo):
        run_undo(argv)
    problems = []
    for ns in left.netns:
        try:
            delete_netns(ns)
        except Failure as e:
            problems.append(str(e))
    for cg in left.cgroups:
        remove_cgroup(cg)
    for p in left.paths:
        shutil.rmtree(p, ignore_errors=True)
    if problems:
        raise Failure(f"testbed {left.tag} not fully removed: {'; '.join(problems)}")
    if left.state_file:
        left.state_file.unlink(missing_ok=True)
    (STATE_DIR / f"{left.tag}.partial").unlink(missing_ok=True)  # a save its owner was killed in


def remove_leftovers() -> list[Leftover]:
    """Find the testbeds of dead owners and remove them (`lowtail testbed clean`, and every
    `lowtail run` before it starts); what was removed, or a Failure naming what stays once
    every one was tried."""
    leftovers = find_leftovers()
    problems = []
    for left in leftovers:
        try:
            remove_leftover(left)
        except Failure as e:
            problems.append(str(e))
    if problems:
        raise Failure("; ".join(problems))
    return leftovers
