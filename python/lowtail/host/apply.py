"""`lowtail host apply` and `lowtail host undo`: the run-time part of a core plan.

apply changes what needs no reboot — IRQ affinities, vm.stat_interval, transparent huge
pages, KSM, the frequency governor and C-states of the DuT cores, timer migration, and a
cpuset for the DuT; for `lowtail tune` also the CPUs a task may run on (moved off the DuT's
core, the thread named by pid and start time so that a pid used again is never touched) — and
nothing else. It is all or nothing: the undo file is written
before the first change; a change that fails, or a stop signal (SIGINT, SIGTERM, SIGHUP:
held until the write in progress is made and recorded), rolls back everything made, and
the undo file goes only once every setting reads back as before. undo restores exactly
what apply changed, after checking that nothing has changed them since; it takes the undo
file as input, and refuses one that names anything apply does not write.

Values are compared the way the kernel reports them, not byte for byte: THP's file reads
"always madvise [never]" after "never" was written, an affinity may read "0-1" for "0,1"."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import msgspec

from lowtail.core import files, schema, signals, terminal
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.host import pending, settings
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan
from lowtail.host.sysroot import SysRoot, cpumask_to_cpus, cpus_to_cpumask, format_cpulist, parse_cpulist

UNDO_FORMAT = "lowtail-host-undo/1"
DEFAULT_CPUSET = "lowtail-dut"
CPUSET_NAME = re.compile(r"(?!\.+$)[A-Za-z0-9_.-]+")  # one path component, not "." or ".."
STAT_INTERVAL_S = 3600  # JNSM 2023, §4.1

# Every file apply may write, relative to the root (its cpuset's files are matched against
# the host's cpuset hierarchy by `_cpuset_path`). An undo file is input: one that names
# anything else was not written by apply, and undo refuses it whole.
SETTING_FILES = re.compile(
    r"proc/sys/vm/stat_interval|proc/sys/kernel/timer_migration"
    r"|sys/kernel/mm/transparent_hugepage/(enabled|defrag)|sys/kernel/mm/ksm/run"
    r"|sys/devices/system/cpu/cpu\d+/cpufreq/scaling_governor"
    r"|sys/devices/system/cpu/cpu\d+/cpuidle/state\d+/disable"
    r"|proc/irq/default_smp_affinity|proc/irq/\d+/smp_affinity_list"
)
# A thread's allowed CPUs (kind "affinity"): moved with sched_setaffinity, named by its
# /proc directory and its start time (a pid used again is another task, never touched).
TASK_PATH = re.compile(r"proc/(\d+)/task/(\d+)")
CPUSET_FILES = ("cpuset.cpus", "cpuset.mems", "cpuset.cpus.partition", "cpuset.cpu_exclusive")
COMPARISONS = tuple(settings.KINDS)
# An undo file is input: far beyond what apply writes (a few hundred bytes per change; tune's
# other-tasks moves every thread of the host), far below what would cost memory.
MAX_UNDO_BYTES = 64 << 20
MAX_UNDO_CHANGES = 200_000
_Text = Annotated[str, schema.rule("must be a string of at most 4,096 characters", max_length=4096)]


@dataclass
class Change:
    setting: str  # what a person calls it: "IRQ 36 (virtio1-req.0) affinity"
    path: str  # relative to the sysroot
    written: str  # the value apply writes ("" for mkdir)
    before: str | None  # the file's text before (None: created by apply)
    restore: str | None  # what undo writes (None: removed with the directory apply made)
    compare: str = "text"  # how values compare: text | cpulist | mask | selected | controllers
    kind: str = "write"  # write | mkdir | affinity
    optional: bool = False  # the kernel may refuse it (managed IRQs, partitions) without failing apply
    status: str = "planned"  # planned | applied | refused
    after: str | None = None  # the file's text after the write
    note: str = ""
    task_start: str | None = None  # an affinity change's thread, by its start time (/proc stat field 22)


def normalized(compare: str, text: str | None) -> Any:
    """A setting's value as the kernel means it (host/settings.py: one reader per kind)."""
    return settings.value(compare, text)


def _takes_effect(ch: Change, current: str | None) -> bool:
    """Does the file now hold what apply wrote?"""
    if ch.compare == "controllers":
        return bool(normalized("controllers", ch.written) <= (normalized("controllers", current) or frozenset()))
    return bool(normalized(ch.compare, current) == normalized(ch.compare, ch.written))


# -- what to change ---------------------------------------------------------------------------


def planned_changes(host: Host, plan: CorePlan, cpuset: str | None = DEFAULT_CPUSET) -> list[Change]:
    """The run-time changes that make the host follow the core plan (only those not in
    place already); `cpuset` names the DuT's cpuset, None for none."""
    root = host.root
    hk, iso = format_cpulist(plan.housekeeping), plan.isolated
    changes: list[Change] = []
    if cpuset:
        changes += _cpuset_changes(host, plan, cpuset)

    def sysctl(name: str, value: str, keep: Callable[[str], bool] = lambda v: False) -> None:
        rel = "proc/sys/" + name.replace(".", "/")
        cur = root.read(rel)
        if cur is not None and not settings.same("int", cur, value) and not keep(cur):
            changes.append(Change(name, rel, value, cur, settings.restore_text("int", cur), compare="int"))

    sysctl("vm.stat_interval", str(STAT_INTERVAL_S), keep=lambda v: v.isdigit() and int(v) >= STAT_INTERVAL_S)
    sysctl("kernel.timer_migration", "0")
    for name in ("enabled", "defrag"):
        rel = f"sys/kernel/mm/transparent_hugepage/{name}"
        cur = root.read(rel)
        if cur is not None and normalized("selected", cur) != "never":
            changes.append(
                Change(
                    f"transparent huge pages {name}",
                    rel,
                    "never",
                    cur,
                    settings.restore_text("selected", cur),
                    compare="selected",
                )
            )
    ksm = root.read("sys/kernel/mm/ksm/run")
    if ksm is not None and not settings.same("int", ksm, "0"):
        changes.append(
            Change("KSM", "sys/kernel/mm/ksm/run", "0", ksm, settings.restore_text("int", ksm), compare="int")
        )
    for cpu in iso:
        rel = f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
        gov = root.read(rel)
        available = (root.read(f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors") or "").split()
        if gov is not None and gov != "performance" and (not available or "performance" in available):
            changes.append(Change(f"CPU {cpu} frequency governor", rel, "performance", gov, gov))
        for st in host.idle_states(cpu):
            if st.latency_us > 0 and not st.disabled:
                rel = f"sys/devices/system/cpu/cpu{cpu}/cpuidle/state{st.index}/disable"
                cur = root.read(rel) or "0"
                changes.append(
                    Change(
                        f"CPU {cpu} idle state {st.name} ({st.latency_us} µs)",
                        rel,
                        "1",
                        cur,
                        settings.restore_text("int", cur),
                        compare="int",
                    )
                )
    default = root.read("proc/irq/default_smp_affinity")
    if default is not None and set(cpumask_to_cpus(default)) - set(plan.housekeeping):
        changes.append(
            Change(
                "default IRQ affinity",
                "proc/irq/default_smp_affinity",
                cpus_to_cpumask(plan.housekeeping),
                default,
                settings.restore_text("mask", default),
                compare="mask",
            )
        )
    for irq in host.irqs:
        if set(irq.affinity) - set(plan.housekeeping):
            rel = f"proc/irq/{irq.number}/smp_affinity_list"
            cur = root.read(rel)
            if cur is None:
                continue
            changes.append(
                Change(
                    f"IRQ {irq.number} ({irq.name}) affinity",
                    rel,
                    hk,
                    cur,
                    settings.restore_text("cpulist", cur),
                    compare="cpulist",
                    optional=True,
                )
            )
    return changes


def _cpuset_changes(host: Host, plan: CorePlan, name: str) -> list[Change]:
    """A cpuset holding the DuT cores (and their memory nodes): cgroup v2 as an isolated
    partition (no load balancing, nothing else scheduled there), v1 as an exclusive set."""
    if not CPUSET_NAME.fullmatch(name):
        raise UserError(f"--cpuset {name!r}: use letters, digits, '.', '_' and '-' only (not just dots)")
    mount = host.cpuset_mount
    if mount is None:
        return []
    version, base = mount
    d = f"{base}/{name}"
    if host.root.exists(d):
        raise UserError(
            f"{host.root.path(d)} exists already (from an earlier apply?): run `lowtail host undo` "
            "with its undo file, or choose another --cpuset NAME"
        )
    nodes = sorted(n for n, cpus in host.numa_nodes.items() if set(cpus) & set(plan.isolated)) or [0]
    changes = []
    if version == "v2":
        rel = f"{base}/cgroup.subtree_control"
        cur = host.root.read(rel) or ""
        if "cpuset" not in cur.split():
            changes.append(
                Change("cpuset controller for child cgroups", rel, "+cpuset", cur, "-cpuset", compare="controllers")
            )
    cpus = format_cpulist(plan.isolated)
    changes.append(Change(f"cpuset {name} for the DuT", d, "", None, None, kind="mkdir"))
    changes.append(Change(f"cpuset {name} CPUs", f"{d}/cpuset.cpus", cpus, None, None, compare="cpulist"))
    changes.append(
        Change(f"cpuset {name} memory nodes", f"{d}/cpuset.mems", format_cpulist(nodes), None, None, compare="cpulist")
    )
    if version == "v2":
        changes.append(
            Change(
                f"cpuset {name} as an isolated partition",
                f"{d}/cpuset.cpus.partition",
                "isolated",
                None,
                None,
                compare="selected",
                optional=True,
            )
        )
    else:
        changes.append(Change(f"cpuset {name} exclusive", f"{d}/cpuset.cpu_exclusive", "1", None, None, optional=True))
    return changes


# -- doing it ------------------------------------------------------------------------------

# How the kernel refuses an optional change it cannot make (a managed or per-CPU IRQ, no room
# for another vector, a partition it will not form) — unlike EACCES/EPERM, not our mistake.
_REFUSALS = {errno.EIO, errno.EINVAL, errno.EBUSY, errno.ENOSPC}


def _do(root: SysRoot, ch: Change) -> None:
    if ch.kind == "mkdir":
        root.path(ch.path).mkdir()
    elif ch.kind == "affinity":
        _set_affinity(root, ch, ch.written)
    else:
        root.write(ch.path, ch.written)


def task_start(root: SysRoot, rel: str) -> str | None:
    """A thread's start time (clock ticks since boot, /proc stat field 22), None when gone."""
    stat = root.read(f"{rel}/stat")
    rest = stat.rpartition(")")[2].split() if stat else []
    return rest[22 - 3] if len(rest) > 22 - 3 else None


def read_setting(root: SysRoot, ch: Change) -> str | None:
    """What a change's setting holds now (an affinity: the thread's allowed CPUs)."""
    if ch.kind != "affinity":
        return root.read(ch.path)
    if task_start(root, ch.path) != ch.task_start:
        return None  # gone (or its pid is another task's now)
    for line in (root.read(f"{ch.path}/status") or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.partition(":")[2].strip()
    return None


def _set_affinity(root: SysRoot, ch: Change, cpus: str) -> None:
    """Move the thread (the one that started at `task_start`, on the live host only)."""
    m = TASK_PATH.fullmatch(ch.path)
    if m is None or not root.live:
        raise OSError(errno.EINVAL, "a task's CPUs can be changed on the live host only")
    if task_start(root, ch.path) != ch.task_start:
        raise OSError(errno.ESRCH, "the task has ended")
    os.sched_setaffinity(int(m.group(2)), parse_cpulist(cpus))


def _undo_one(root: SysRoot, ch: Change) -> None:
    if ch.kind == "mkdir":
        p = root.path(ch.path)
        try:
            p.rmdir()
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
            # A copied sysroot: the files apply wrote are ordinary files (a cgroup
            # filesystem would have taken the rmdir with them inside). Only those go.
            inside = list(p.iterdir())
            if any(f.name not in CPUSET_FILES or f.is_symlink() or not f.is_file() for f in inside):
                raise
            for f in inside:
                f.unlink()
            p.rmdir()
    elif ch.kind == "affinity":
        if ch.restore is not None and task_start(root, ch.path) == ch.task_start:
            try:
                _set_affinity(root, ch, ch.restore)
            except OSError as e:
                if e.errno != errno.ESRCH:
                    raise  # ESRCH: it ended meanwhile, and a task that has ended needs nothing restored
    elif ch.restore is not None:
        # Written in the form the kernel takes back (an undo file whose restore is THP's
        # whole "always [madvise] never" line, written by an older lowtail, included).
        settings.write(root, ch.path, ch.compare, ch.restore)


def _describe_os_error(e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{e.strerror} (no permission to change it: run as root, on a writable /sys)"
    return e.strerror or str(e)


def apply_changes(
    root: SysRoot, changes: list[Change], plan: CorePlan, undo_path: Path, command: str = "host apply"
) -> list[Change]:
    """Make every change, or none: the undo file is written first; on a failure the
    changes already made are reverted and Failure says what happened. While the changes are
    being made the undo file is in flight (host/pending.py: a command killed outright leaves
    it for the next command to find); `command` "tune" keeps it so until the trial is kept
    (`pending.release`) or undone, any other command until apply returns."""
    if root.live and os.geteuid() != 0:
        raise UserError(
            "apply changes kernel settings and needs root: run it with sudo "
            "(without --yes it only shows what it would change)"
        )
    if root.unreadable:
        raise UserError(f"cannot read {root.path(root.unreadable[0])}: permission denied (run as root)")
    # Checked as every output is, before any change: a FIFO, device or directory refused, no
    # directory created.
    undo_path = files.check_output(Path(undo_path), "--undo-file")
    if undo_path.exists():
        raise UserError(
            f"{undo_path} exists from an earlier apply: run `lowtail host undo {undo_path}` first, "
            "or pass another --undo-file"
        )
    made: list[Change] = []
    current: Change | None = None
    pending.hold(undo_path, command)
    try:
        _write_undo(undo_path, root, plan, changes, "pending")
        for ch in changes:
            current = ch
            # A signal waits until the write is made and recorded: nothing changes unseen.
            with signals.held():
                try:
                    _do(root, ch)
                except OSError as e:
                    if ch.optional and ch.kind == "affinity" and e.errno == errno.ESRCH:
                        # A task of many moved at once (tune's other-tasks) ended first: nothing to move.
                        ch.status, ch.note = "refused", "the task had ended"
                        continue
                    if ch.optional and e.errno in _REFUSALS:
                        ch.status, ch.note = "refused", f"the kernel refused it: {e.strerror}"
                        continue
                    raise
                made.append(ch)
                ch.status = "applied"
            ch.after = read_setting(root, ch) if ch.kind != "mkdir" else None
            if ch.kind != "mkdir" and not _takes_effect(ch, ch.after):
                if ch.optional:
                    ch.note = f"the kernel kept {ch.after!r}"
                    continue
                raise OSError(errno.EINVAL, f"wrote {ch.written!r} but it reads {ch.after!r}")
        _write_undo(undo_path, root, plan, changes, "applied")
    except (OSError, KeyboardInterrupt) as e:
        _roll_back(root, plan, changes, made, undo_path, current, e)
    except BaseException:
        if not undo_path.exists():
            pending.release(undo_path)
        raise
    if command != "tune":
        pending.release(undo_path)
    return changes


def _roll_back(
    root: SysRoot,
    plan: CorePlan,
    changes: list[Change],
    made: list[Change],
    undo_path: Path,
    current: Change | None,
    cause: BaseException,
) -> NoReturn:
    """Revert `made` after a failure or a stop signal, and say so. The undo file goes only
    once every reverted setting reads back as it was; otherwise it stays for `host undo`."""
    interrupted = isinstance(cause, KeyboardInterrupt)
    reason = "interrupted" if interrupted else _describe_os_error(cause)  # type: ignore[arg-type]
    failed = _revert(root, made)
    what = f"{current.setting} ({root.path(current.path)})" if current else "the undo file"
    if failed:
        _write_undo(undo_path, root, plan, changes, "pending")
        message = (
            f"rolling back also failed for {failed[0].setting} — {undo_path} lists every change: "
            f"fix the cause, then `lowtail host undo {undo_path}`"
        )
        if interrupted:
            raise Interrupted(f"interrupted while changing {what}; {message}") from None
        raise Failure(f"could not change {what}: {reason}; {message}") from None
    undo_path.unlink(missing_ok=True)
    pending.release(undo_path)
    rolled = f"the {len(made)} change(s) made were rolled back and read back as before, nothing is changed"
    if interrupted:
        raise Interrupted(f"interrupted while changing {what}: {rolled}") from None
    raise Failure(f"could not change {what}: {reason}; {rolled}") from None


def _revert(root: SysRoot, made: list[Change]) -> list[Change]:
    """Undo `made` newest first, each read back; the changes that could not be undone."""
    failed = []
    for ch in reversed(made):
        try:
            _undo_one(root, ch)
        except OSError:
            failed.append(ch)
            continue
        if not _restored(root, ch):
            failed.append(ch)
            continue
        ch.status = "planned"
    return failed


def _restored(root: SysRoot, ch: Change) -> bool:
    """Does the setting read as it did before apply (or is the directory apply made gone)?"""
    if ch.kind == "mkdir":
        return not root.path(ch.path).exists()
    if ch.before is None:
        return True  # a file in a directory apply made: it goes with the directory
    now = read_setting(root, ch)
    if ch.kind == "affinity" and now is None:
        return True  # the task has ended: nothing of it is left changed
    if ch.compare == "controllers":  # only the controllers apply switched count
        switched = normalized("controllers", ch.written)
        return bool(normalized("controllers", now) & switched == normalized("controllers", ch.before) & switched)
    return bool(normalized(ch.compare, now) == normalized(ch.compare, ch.before))


def _write_undo(path: Path, root: SysRoot, plan: CorePlan, changes: list[Change], state: str) -> None:
    doc = {
        "format": UNDO_FORMAT,
        "state": state,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname() if root.live else None,
        "sysroot": str(root.root.resolve()),
        "plan": plan.to_json(),
        "changes": [asdict(c) for c in changes],
    }
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with signals.held():  # the undo file is whole, or the one before it stays
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write the undo file {path}: {e.strerror} (choose another --undo-file)") from None


# -- undo -----------------------------------------------------------------------------------


class UndoChange(msgspec.Struct, forbid_unknown_fields=True):
    """One change as an undo file records it (`Change`'s fields, each checked)."""

    setting: _Text
    path: _Text
    written: _Text
    before: _Text | None
    restore: _Text | None
    compare: Literal["text", "int", "cpulist", "mask", "selected", "controllers"] = "text"
    kind: Literal["write", "mkdir", "affinity"] = "write"
    optional: bool = False
    status: Literal["planned", "applied", "refused"] = "planned"
    after: _Text | None = None
    note: _Text = ""
    task_start: Annotated[str, schema.rule("must be a start time in clock ticks", pattern="^[0-9]{1,20}$")] | None = (
        None
    )


class UndoDocument(msgspec.Struct, forbid_unknown_fields=True):
    """An undo file: what `apply` wrote, read through the schema layer like every input."""

    format: Literal["lowtail-host-undo/1"]
    state: Literal["pending", "applied"]
    sysroot: _Text
    changes: Annotated[
        list[UndoChange],
        schema.rule(f"must be a list of at most {MAX_UNDO_CHANGES:,} changes", max_length=MAX_UNDO_CHANGES),
    ]
    # The core plan applied (`CorePlan.to_json`), kept for whoever reads the file: undo restores
    # from `changes` alone and never reads it, so any older shape of it loads.
    plan: dict[str, object] = {}
    created_at: Annotated[str, schema.rule("must be a time", max_length=64)] = ""
    host: _Text | None = None


def load_undo(path: Path) -> UndoDocument:
    """The undo file `apply` wrote, checked: a regular file (a FIFO or a device is refused
    without reading a byte) of at most MAX_UNDO_BYTES, its shape and every field through the
    schema layer; a clear error when it is missing, already used or not one."""
    path = Path(path)
    if not path.exists():
        done = path.with_name(path.name + ".done")
        hint = f" ({done} shows it was undone already)" if done.exists() else ""
        raise UserError(f"{path}: no such undo file{hint}")
    data = files.read_input(path, "undo file", MAX_UNDO_BYTES, fifo=False)
    try:
        raw = schema.load_json(data, str(path), MAX_UNDO_BYTES)
    except schema.InputError as e:
        raise UserError(f"{path}: not a lowtail undo file ({e.reason})") from None
    if not isinstance(raw, dict) or raw.get("format") != UNDO_FORMAT:
        raise UserError(f"{path}: not a lowtail undo file (written by `lowtail host apply --yes`)")
    try:
        doc: UndoDocument = schema.convert(raw, UndoDocument, str(path))
    except schema.InputError as e:
        raise UserError(f"{e}; the undo file was edited or damaged, nothing was restored") from None
    return doc


def _inside(root: SysRoot, rel: str) -> bool:
    """Is `rel` a plain relative path that stays under the root, symbolic links followed?"""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return False
    base = os.path.realpath(root.root)
    return os.path.commonpath([base, os.path.realpath(root.path(rel))]) == base


def _cpuset_path(base: str | None, kind: str, rel: str) -> bool:
    """Is `rel` what apply makes in the cpuset hierarchy `base`: the v2 controller switch, a
    cpuset directory, or one of the files it writes in one?"""
    if base is None:
        return False
    if rel == f"{base}/cgroup.subtree_control":
        return kind == "write"
    directory, _, name = rel.rpartition("/")
    if kind == "mkdir":
        return directory == base and CPUSET_NAME.fullmatch(name) is not None
    parent, _, cpuset = directory.rpartition("/")
    return name in CPUSET_FILES and parent == base and CPUSET_NAME.fullmatch(cpuset) is not None


def _checked_changes(path: Path, root: SysRoot, doc: UndoDocument) -> list[Change]:
    """The undo file's changes, each checked to be one apply makes: a known kind of setting,
    inside the root. One that is not refuses the whole file (an undo file is input)."""
    mount = Host(root).cpuset_mount
    base = mount[1] if mount else None
    changes = []
    for i, entry in enumerate(doc.changes, 1):
        ch = Change(**msgspec.structs.asdict(entry))
        known = (
            (ch.kind == "write" and SETTING_FILES.fullmatch(ch.path) is not None)
            or (ch.kind == "affinity" and TASK_PATH.fullmatch(ch.path) is not None)
            or _cpuset_path(base, ch.kind, ch.path)
        )
        if not known or not _inside(root, ch.path):
            raise UserError(
                f"{path}: change {i} ({terminal.shown(ch.path)}) is not a setting `lowtail host apply` writes under "
                f"{root.root}; the undo file was edited or damaged, nothing was restored"
            )
        changes.append(ch)
    return changes


def undo(path: Path, sysroot: str | Path | SysRoot | None = None, force: bool = False) -> list[Change]:
    """Restore what the undo file says apply changed. Refuses (changing nothing) when a
    setting no longer holds what apply left there, unless `force`. `sysroot` (a path, or the
    SysRoot to write through) must be the one the file was written for."""
    path = Path(path)
    doc = load_undo(path)
    recorded = Path(doc.sysroot)
    given = sysroot.root if isinstance(sysroot, SysRoot) else sysroot
    if given is not None and Path(given).resolve() != recorded:
        raise UserError(f"{path} was written for {recorded}, not {Path(given).resolve()}")
    if not recorded.is_dir():
        raise UserError(f"{path} was written for {recorded}, which no longer exists")
    root = sysroot if isinstance(sysroot, SysRoot) else SysRoot(recorded)
    if root.live and os.geteuid() != 0:
        raise UserError("undo changes kernel settings and needs root: run it with sudo")
    changes = _checked_changes(path, root, doc)
    todo: list[Change] = []
    mismatches: list[str] = []
    for ch in changes:
        if ch.status == "refused" or (ch.restore is None and ch.kind == "write"):
            continue  # nothing to restore (refused, or inside a directory apply made)
        if ch.kind == "mkdir":
            if root.path(ch.path).is_dir():
                todo.append(ch)
            elif doc.state == "applied":
                mismatches.append(f"{root.path(ch.path)} is gone")
            continue
        cur = read_setting(root, ch)
        if ch.kind == "affinity" and cur is None:
            continue  # the task has ended: nothing to restore
        if ch.before is not None and _restored(root, ch):
            # As before already: apply never got to it (a pending file), or an undo cut short
            # (a SIGKILL half-way) restored it. Nothing to restore, and nothing changed since.
            continue
        expected = ch.after if ch.after is not None else ch.written
        if normalized(ch.compare, cur) == normalized(ch.compare, expected) or _takes_effect(ch, cur):
            todo.append(ch)
            continue
        mismatches.append(f"{ch.setting} ({root.path(ch.path)}) is {cur!r}, apply left {ch.after or ch.written!r}")
        if force:
            todo.append(ch)
    if mismatches and not force:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise UserError(
            f"{path} no longer matches the host: {mismatches[0]}{more}; something changed it since "
            "apply — restore by hand, or pass --force to write the old values anyway"
        )
    restored: list[Change] = []
    for ch in reversed(todo):
        try:
            _undo_one(root, ch)
        except OSError as e:
            failed = _reapply(root, restored, changes)
            tail = "" if not failed else f"; re-applying also failed for {failed[0].setting}"
            raise Failure(
                f"could not restore {ch.setting} ({root.path(ch.path)}): {_describe_os_error(e)}; "
                f"the {len(restored)} setting(s) restored before it were changed back{tail}, "
                f"{path} is kept"
            ) from None
        restored.append(ch)
    root.discard_partials(ch.path for ch in changes if ch.kind == "write")
    path.replace(path.with_name(path.name + ".done"))
    pending.release(path)
    return list(reversed(restored))


def _reapply(root: SysRoot, restored: list[Change], changes: list[Change]) -> list[Change]:
    """Put back what an interrupted undo had restored (a directory with the files apply wrote in it)."""
    failed = []
    for ch in reversed(restored):
        inside = [
            c for c in changes if ch.kind == "mkdir" and c.path.startswith(ch.path + "/") and c.status == "applied"
        ]
        try:
            for c in [ch] + inside:
                _do(root, c)
        except OSError:
            failed.append(ch)
    return failed
