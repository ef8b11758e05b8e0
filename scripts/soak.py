#!/usr/bin/env python3
"""`make soak`: lowtail under the faults users and machines cause, many times, at random
moments, for a fixed time (default 12 minutes), ending in a table.

Areas: stop signals at random moments of a sweep (single and double SIGINT to the process
group, SIGTERM, SIGHUP, kill -9; every DuT kind installed here), stop signals during
`analyze`, `host apply` and tune's trials (every kind of setting; kill -9 then the next
command, which must say what is left), edited and hostile undo files, concurrent writers with a reader, a full
disk (a small tmpfs) for every output, damaged databases, mutated captures, ordinary
mistakes, quickly failing analyses (the interpreter-exit race), and untrusted input
(scripts/soak_inputs.py): hostile bundles, bundles small on disk and large decoded, names
with terminal control sequences, rule sets past their bounds, outputs that name special
files, hostile experiment files and import specs. After each case it
counts what was left behind: namespaces, cgroups, processes, /run/lowtail state, taps
(inside the namespaces), partial or 0-byte files, settings changed without an undo file.

Per area the table gives: cases, ok (exit 0), clean errors (one line, the documented exit
code), internal errors (70), aborts (a signal, 134, 139), hangs, OOM (killed by the kernel,
or a peak memory over PEAK_LIMIT_KIB), data lost (something a command said it stored, or
stored before, is gone), leftovers, settings left (a host setting that does not read as
before), control chars (a control character of data in any output). Exit status 1 when any
of the columns from internal errors on is not zero. Needs root (namespaces, tmpfs, the live kernel's
settings are never touched: host faults run on fixture sysroots)."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "testbed"))

from tb_helpers import command_lines  # noqa: E402

import soak_inputs  # noqa: E402
from host_fixtures import make_sysroot  # noqa: E402
from lowtail.core import terminal  # noqa: E402
from lowtail.testbed.duts import KINDS  # noqa: E402
from lowtail.testbed.registry import STATE_DIR, list_netns, tagged_cgroups  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]
HANG_S = 180.0
COLUMNS = (
    "cases", "ok", "clean errors", "internal errors", "aborts", "hangs", "OOM", "data lost", "leftovers",
    "settings left", "control chars",
)  # fmt: skip
# A command whose peak memory passes this counts in the OOM column (a bound not kept; the
# kernel's OOM killer, a SIGKILL the soak did not send, counts there too).
PEAK_LIMIT_KIB = 3 << 20


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))
    notes: list[str] = field(default_factory=list)

    def bad(self, column: str, note: str, n: int = 1) -> None:
        self.counts[column] += n
        if len(self.notes) < 6:
            self.notes.append(f"{column}: {note}"[:400])


TALLIES: dict[str, Tally] = defaultdict(Tally)


@dataclass
class LastCommand:
    """What the last `run` printed and its peak memory, for the judge of its case."""

    output: str = ""
    peak_kib: int = 0


LAST = LastCommand()


def run(args: list[str], cwd: Path, timeout: float = HANG_S, env: dict | None = None) -> tuple[int | None, str, str]:
    """A command to its end; (None, …) when it hung (it is killed then). Its output and peak
    memory are kept for `judge` (control characters, the OOM column)."""
    proc = subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=env if env is not None else _ENV, errors="surrogateescape",
    )  # fmt: skip
    peak = _PeakWatch(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        LAST.output, LAST.peak_kib = out + err, peak.stop()
        return None, out, err
    LAST.output, LAST.peak_kib = out + err, peak.stop()
    return proc.returncode, out, err


class _PeakWatch:
    """A command's own peak resident memory (VmHWM of its process image, read every 50 ms
    while it runs: getrusage's maxrss would carry the soak's own across fork and exec)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            except (OSError, ValueError, IndexError):
                pass

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak_kib


# The soak's commands say what killed commands left (the notices are part of what is soaked).
_ENV = dict(os.environ, LOWTAIL_LEFTOVER_NOTICES="1")


def judge(area: str, rc: int | None, err: str, expected: tuple[int, ...], what: str) -> str:
    """Count one case by its exit: ok, a clean error, or one of the failures."""
    t = TALLIES[area]
    t.counts["cases"] += 1
    if terminal.has_control(LAST.output + err):
        shown = next(c for c in LAST.output + err if terminal.has_control(c))
        t.bad("control chars", f"{what}: {shown!r} reached the terminal")
    if LAST.peak_kib > PEAK_LIMIT_KIB:
        t.bad("OOM", f"{what}: peak memory {LAST.peak_kib >> 10} MiB")
    LAST.output, LAST.peak_kib = "", 0
    if rc is None:
        t.bad("hangs", what)
        return "hang"
    if rc == 70 or "Traceback" in err:
        t.bad("internal errors", f"{what}: {err.strip()[-300:]}")
        return "internal"
    if rc in (-9, 137):  # no case judged here was sent SIGKILL by the soak: the OOM killer's
        t.bad("OOM", f"{what}: killed (exit {rc}): {err.strip()[-200:]}")
        return "abort"
    if rc < 0 or rc in (134, 139):
        t.bad("aborts", f"{what}: exit {rc}: {err.strip()[-200:]}")
        return "abort"
    if rc == 0:
        t.counts["ok"] += 1
        return "ok"
    # The one line that says why it ended (notes such as "waiting for" or "SIGINT while
    # stopping" may come before it).
    errors = [line for line in err.splitlines() if re.match(r"lowtail: (error|internal error|interrupted)", line)]
    if rc in expected and len(errors) <= 1:
        t.counts["clean errors"] += 1
        return "clean"
    t.bad("internal errors", f"{what}: exit {rc}, expected one of {expected}: {err.strip()[-300:]}")
    return "internal"


# -- what a testbed leaves ------------------------------------------------------------------------


def programs_under(directory: Path) -> list[str]:
    """Processes whose command line names a path under `directory` (a run's programs)."""
    return [f"process {pid}: {cmd[:100]}" for pid, cmd in command_lines() if str(directory) in cmd]


def leftovers_of(pid: int) -> list[str]:
    """Everything of the testbeds of process `pid` still on the host."""
    tag = re.compile(rf"^lt{pid}x[0-9a-f]{{4}}")
    left = [n for n in list_netns() if tag.match(n)]
    left += [p for t, p in tagged_cgroups() if tag.match(t)]
    left += [str(p) for p in STATE_DIR.glob(f"lt{pid}x*")] if STATE_DIR.is_dir() else []
    left += [str(p) for p in Path("/run/lowtail").glob(f"lt{pid}x*")]
    left += [str(p) for p in Path("/var/run/dpdk").glob(f"lt{pid}x*")]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if re.search(rf"(lowtail-|/run/lowtail/)lt{pid}x", cmd):
                left.append(f"process {entry.name}: {cmd[:100]}")
    return left


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


# -- 1. stop signals during a sweep -------------------------------------------------------------------

SEQUENCES = ("SIGINT", "SIGINT+SIGINT", "SIGTERM", "SIGHUP", "SIGTERM+SIGINT", "SIGHUP+SIGHUP", "SIGKILL")


def dut_kinds() -> list[tuple[str, str]]:
    """The DuT kinds to interrupt (the issue's lowtail-fwd most often), where installed."""
    kinds = [
        ("lowtail-fwd", '[[dut]]\nname = "f"\nkind = "lowtail-fwd"\n'),
        ("lowtail-fwd", '[[dut]]\nname = "f"\nkind = "lowtail-fwd"\n'),
        ("kernel-mirred", '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'),
        ("container", '[[dut]]\nname = "c"\nkind = "lowtail-fwd"\ncontainment = "container"\n'),
        ("nftables", '[[dut]]\nname = "n"\nkind = "nftables"\nrules = 50\n'),
        ("ovs", '[[dut]]\nname = "o"\nkind = "ovs"\n'),
        ("vm", '[[dut]]\nname = "v"\nkind = "vm"\nguest_forwarder = "mirred"\n'),
    ]
    usable = []
    for name, text in kinds:
        kind = "lowtail-fwd" if name == "container" else name
        try:
            KINDS[kind].check_available()
        except Exception:  # noqa: BLE001 — not installed here: said in the table's notes
            TALLIES["sweep signals"].notes.append(f"{name}: not available here, not tried")
            continue
        if name == "vm" and not _guest_image_cached():
            TALLIES["sweep signals"].notes.append("vm: no guest image built (`lowtail vm build`), not tried")
            continue
        usable.append((name, text))
    return usable


def _guest_image_cached() -> bool:
    from lowtail.testbed.vm.image import cache_dir

    images = cache_dir() / "images"
    return images.is_dir() and any(images.iterdir())


def sweep_case(rng: random.Random, work: Path, kind: str, dut: str, killed: list[tuple[int, Path]]) -> None:
    area = "sweep signals"
    rate = 2000 if kind == "vm" else rng.choice((5000, 10000))
    toml = work / f"{kind}.toml"
    toml.write_text(
        f'[experiment]\nname = "soak {kind}"\nduration = "2s"\nwarmup = "200ms"\ncalibrate = false\n'
        f'[traffic]\nrates = ["{rate}pps", "{rate + 1000}pps"]\n{dut}'
    )
    db, data = work / f"{kind}.duckdb", work / f"data-{kind}"
    proc = subprocess.Popen(
        [*LOWTAIL, "run", str(toml), "--db", str(db), "--data-dir", str(data)],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    sequence = rng.choice(SEQUENCES)
    time.sleep(rng.uniform(0.3, 40.0 if kind == "vm" else 7.0))  # any moment: set-up, traffic, storing, teardown
    for i, name in enumerate(sequence.split("+")):
        if i:
            time.sleep(rng.uniform(0.05, 1.0))
        try:
            os.killpg(proc.pid, getattr(signal, name))
        except ProcessLookupError:
            break
    try:
        _, err = proc.communicate(timeout=HANG_S)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        rc = None
    what = f"{kind}, {sequence}"
    t = TALLIES[area]
    if sequence == "SIGKILL":
        t.counts["cases"] += 1
        if rc not in (-9, 0, 3):
            judge(area, rc, err, (130,), what)
            t.counts["cases"] -= 1
        else:
            t.counts["clean errors" if rc == -9 else "ok"] += 1
        # Its programs die with it; its namespaces wait for the next run (checked there).
        if not wait_until(lambda: not programs_under(data), 15):
            t.bad("leftovers", f"{what}: programs still running 15 s after kill -9: {programs_under(data)}")
        killed.append((proc.pid, data))
    else:
        judge(area, rc, err, (130, 1, 3), what)
        left = leftovers_of(proc.pid) + programs_under(data)
        if left:
            t.bad("leftovers", f"{what}: {left[:4]}", len(left))
    _check_stored(area, db, err, what)


def _check_stored(area: str, db: Path, err: str, what: str) -> None:
    """The runs a sweep said it stored are in the database, which opens."""
    m = re.search(r"interrupted: (\d+) of \d+ runs of experiment (\d+) are stored", err)
    if not db.exists():
        if m and int(m.group(1)):
            TALLIES[area].bad("data lost", f"{what}: said {m.group(1)} runs stored, no database")
        return
    rc, out, e = run([*LOWTAIL, "experiment", "list", "--db", str(db), "--json"], db.parent, timeout=120)
    if rc != 0:
        TALLIES[area].bad("data lost", f"{what}: the database no longer reads: {e.strip()[-200:]}")
        return
    if m:
        runs = {x["experiment_id"]: x["runs"] for x in json.loads(out)}
        if runs.get(int(m.group(2)), 0) < int(m.group(1)):
            TALLIES[area].bad("data lost", f"{what}: said {m.group(1)} runs stored, found {runs}")


def sweep_signals(rng: random.Random, work: Path, until: float) -> None:
    kinds = dut_kinds()
    killed: list[tuple[int, Path]] = []
    i = 0
    while time.monotonic() < until:
        kind, dut = kinds[i % len(kinds)]
        i += 1
        sweep_case(rng, work, kind, dut, killed)
        # What a killed run left is removed by the next run before it starts.
        for pid, _ in killed[:-1] if killed and killed[-1][0] else killed:
            left = leftovers_of(pid)
            if left:
                TALLIES["sweep signals"].bad("leftovers", f"killed run {pid}: the next run left {left[:4]}", len(left))
        killed = killed[-1:]
    if killed:  # the last kill -9: a run afterwards must clean it
        rc, _, err = run([*LOWTAIL, "testbed", "clean"], work)
        if rc != 0 or leftovers_of(killed[0][0]):
            TALLIES["sweep signals"].bad("leftovers", f"`testbed clean` left {leftovers_of(killed[0][0])}")


# -- 2. stop signals during analyze ---------------------------------------------------------------------


def analyze_signals(rng: random.Random, work: Path, until: float) -> None:
    area = "analyze signals"
    big = _pair(work, "big", packets=2_000_000, rate_pps=1_000_000)
    db = work / "analyze.duckdb"
    stored = 0
    while time.monotonic() < until:
        extra = rng.choice(([], ["--export", str(work / "s.parquet")], ["--hgrm", str(work / "x.hgrm")]))
        proc = subprocess.Popen(
            [*LOWTAIL, "analyze", str(big[0]), str(big[1]), "--trim", "0", "--db", str(db), *extra],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.05, 2.5))
        sequence = rng.choice(("SIGINT", "SIGTERM", "SIGHUP", "SIGINT+SIGINT"))
        for i, name in enumerate(sequence.split("+")):
            if i:
                time.sleep(rng.uniform(0.02, 0.3))
            try:
                os.killpg(proc.pid, getattr(signal, name))
            except ProcessLookupError:
                break
        try:
            _, err = proc.communicate(timeout=HANG_S)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            rc = None
        outcome = judge(area, rc, err, (130,), sequence)
        if outcome == "ok" or "the analysis was stored as analysis" in err:
            stored += 1
        partial = [p.name for p in work.iterdir() if p.name.endswith(".partial")]
        if partial:
            TALLIES[area].bad("leftovers", f"{sequence}: {partial}", len(partial))
            for p in partial:
                (work / p).unlink()
    if db.exists():
        rc, out, err = run([*LOWTAIL, "list", "--db", str(db), "--json", "--limit", "100000"], work)
        found = len(json.loads(out)) if rc == 0 else -1
        if found < stored:
            TALLIES[area].bad("data lost", f"{stored} analyses said stored, {found} in the database: {err[-200:]}")
        elif found > stored:  # stored, then stopped before it could say so: kept, not lost
            TALLIES[area].notes.append(f"{found - stored} analyses stored but interrupted before saying so")


def _pair(work: Path, name: str, **spec) -> tuple[Path, Path]:
    pre, post = work / f"{name}-pre.pcap", work / f"{name}-post.pcap"
    if not pre.exists():
        from lowtail import _native

        _native.synth_pair(str(pre), str(post), json.dumps(spec))
    return pre, post


# -- 3. host apply under signals, and edited undo files -----------------------------------------------------


def _many_irqs(root: Path, n: int) -> None:
    """More IRQs than a server has, so that apply takes long enough to be interrupted."""
    for irq in range(100, 100 + n):
        d = root / f"proc/irq/{irq}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "smp_affinity_list").write_text("0-3\n")


def _settings(root: Path) -> dict[str, str]:
    """What apply touches, as the kernel would say it (THP's selected word)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir():
            if "cgroup" in rel:
                out[rel] = "dir"
            continue
        text = p.read_text(errors="replace").strip()
        m = re.search(r"\[([^\]]+)\]", text) if "transparent_hugepage" in rel else None
        out[rel] = m.group(1) if m else text
    return out


def apply_signals(rng: random.Random, work: Path, until: float) -> None:
    area = "host apply signals"
    i = 0
    while time.monotonic() < until:
        i += 1
        root = make_sysroot(work / f"sysroot{i}", tuned=False)
        _many_irqs(root, 1500)
        undo = work / f"undo{i}.json"
        before = _settings(root)
        proc = subprocess.Popen(
            [*LOWTAIL, "host", "apply", "--sysroot", str(root), "--isolated", "1-3", "--yes", "--undo-file", str(undo)],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.0, 2.0))
        name = rng.choice(("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "SIGINT+SIGINT"))
        for k, part in enumerate(name.split("+")):
            if k:
                time.sleep(0.05)
            try:
                os.killpg(proc.pid, getattr(signal, part))
            except ProcessLookupError:
                break
        try:
            _, err = proc.communicate(timeout=HANG_S)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            rc = None
        if name == "SIGKILL" and rc == -9:
            TALLIES[area].counts["cases"] += 1
            TALLIES[area].counts["clean errors"] += 1
        else:
            judge(area, rc, err, (130, 1), name)
        # All or nothing: as before (no undo file needed), or an undo file that restores it.
        if undo.exists():
            urc, _, uerr = run([*LOWTAIL, "host", "undo", str(undo)], work)
            if urc != 0:
                TALLIES[area].bad("leftovers", f"{name}: `host undo` failed after exit {rc}: {uerr.strip()[-200:]}")
        after = _settings(root)
        changed = [k for k in before if after.get(k) != before[k]] + [k for k in after if k not in before]
        if changed:
            TALLIES[area].bad(
                "settings left", f"{name} (exit {rc}): {len(changed)} settings changed, e.g. {changed[:3]}"
            )
        shutil.rmtree(root, ignore_errors=True)


# A tune trial on a sysroot, as `tune` makes one (argv: sysroot, undo file, seconds measured):
# what it restores read as it starts, applied with its undo file in flight, measured (a
# sleep), undone; a stop signal undoes what is in force, as tune's _abandon does.
_TRIAL = """
import sys, time
from pathlib import Path
from lowtail.core import signals
from lowtail.core.errors import Failure, Interrupted
from lowtail.host.apply import apply_changes, planned_changes, undo
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan
from lowtail.host.sysroot import SysRoot
from lowtail.tune.loop import _as_now

root, undo_file, measured = SysRoot.open(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
plan = CorePlan((0,), (1, 2, 3), "soak")
with signals.stop_on_signals(until_exit=True):
    print("ready", flush=True)  # a signal before this is the interpreter's start, not tune's
    try:
        for repetition in range(2):
            changes = _as_now(root, planned_changes(Host(root), plan, cpuset=None))
            for ch in changes:
                ch.status, ch.after = "planned", None
            apply_changes(root, changes, plan, undo_file, command="tune")
            time.sleep(measured)
            with signals.held():
                undo(undo_file)
                undo_file.with_name(undo_file.name + ".done").unlink()
    except (KeyboardInterrupt, Interrupted):
        with signals.held():
            if undo_file.exists():
                undo(undo_file, force=True)
        print("lowtail: interrupted", file=sys.stderr)
        sys.exit(130)
    except Failure as e:
        print(f"lowtail: error: {e}", file=sys.stderr)
        sys.exit(1)
"""


def tune_trials(rng: random.Random, work: Path, until: float) -> None:
    """tune's trials on a sysroot of every kind of setting (THP, KSM, governor, idle states,
    sysctls, IRQ and default affinities), a stop signal at a random moment of apply, measure
    or undo; SIGKILL then the next command (any: `list`), which must say what is left and how
    to undo it. After each case every setting reads as before."""
    area = "tune trials"
    i = 0
    state = work / "undo-state"
    env = dict(_ENV, LOWTAIL_UNDO_STATE_DIR=str(state))
    while time.monotonic() < until:
        i += 1
        root = make_sysroot(work / f"sysroot{i}", tuned=False)
        _many_irqs(root, rng.choice((50, 800)))
        undo = work / f"trial{i}.undo.json"
        before = _settings(root)
        proc = subprocess.Popen(
            [sys.executable, "-c", _TRIAL, str(root), str(undo), str(rng.choice((0.2, 1.0)))],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready" (or nothing: it ended)
        time.sleep(rng.uniform(0.0, 2.5))
        name = rng.choice(("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "SIGINT+SIGINT", "SIGTERM+SIGKILL"))
        for k, part in enumerate(name.split("+")):
            if k:
                time.sleep(0.05)
            try:
                os.killpg(proc.pid, getattr(signal, part))
            except ProcessLookupError:
                break
        try:
            _, err = proc.communicate(timeout=HANG_S)
            trial_rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            trial_rc = None
        rc = trial_rc
        if "SIGKILL" in name and rc == -9:
            TALLIES[area].counts["cases"] += 1
            TALLIES[area].counts["clean errors"] += 1
            if undo.exists():  # killed with a trial in force: the next command must say so
                lrc, _, lerr = run([*LOWTAIL, "list", "--db", str(work / "x.duckdb")], work, env=env)
                judge(area, lrc, lerr, (0, 1, 2), f"{name}: the next command")
                if str(undo) not in lerr or "left host settings changed" not in lerr:
                    TALLIES[area].bad(
                        "settings left", f"{name}: the next command did not say what was left: {lerr[:200]}"
                    )
                urc, _, uerr = run([*LOWTAIL, "host", "undo", str(undo)], work, env=env)
                judge(area, urc, uerr, (0,), f"{name}: host undo as the notice says")
        else:
            judge(area, rc, err, (0, 130), name)
        after = _settings(root)
        changed = [k for k in before if after.get(k) != before[k]] + [k for k in after if k not in before]
        if changed:
            TALLIES[area].bad(
                "settings left", f"{name} (exit {rc}): {len(changed)} settings changed, e.g. {changed[:3]}"
            )
        shutil.rmtree(root, ignore_errors=True)


def hostile_undo(rng: random.Random, work: Path, until: float) -> None:
    area = "edited undo files"
    edits = [
        ("vm.stat_interval", "../victim.txt", "write"),
        ("cpuset lowtail-dut for the DuT", "../victimdir", "mkdir"),
        ("vm.stat_interval", "/tmp/victim-abs.txt", "write"),
        ("KSM", "proc/cmdline", "write"),
        ("KSM", "sys/kernel/mm/ksm", "mkdir"),
        ("cpuset lowtail-dut for the DuT", "sys/fs/cgroup/cpuset", "mkdir"),
        ("vm.stat_interval", "proc/sys/vm/../../cmdline", "write"),
    ]
    i = 0
    while time.monotonic() < until:
        i += 1
        setting, path, kind = edits[i % len(edits)]
        case = work / f"hostile{i}"
        root = make_sysroot(case / "root", tuned=False)
        undo = case / "undo.json"
        rc, _, err = run(
            [*LOWTAIL, "host", "apply", "--sysroot", str(root), "--isolated", "1-3", "--yes", "--undo-file", str(undo)],
            case,
        )
        victim, victimdir = case / "victim.txt", case / "victimdir"
        victim.write_text("keep\n")
        victimdir.mkdir()
        (victimdir / "data").write_text("keep\n")
        doc = json.loads(undo.read_text())
        ch = next(c for c in doc["changes"] if c["setting"] == setting)
        ch["path"], ch["kind"] = (path if not path.startswith("/tmp/victim-abs") else str(victim)), kind
        undo.write_text(json.dumps(doc))
        inside = _settings(root)
        rc, _, err = run([*LOWTAIL, "host", "undo", str(undo)], case)
        judge(area, rc, err, (2,), path)
        if rc == 0:
            TALLIES[area].bad("internal errors", f"{path}: an edited undo file was accepted")
        if victim.read_text() != "keep\n" or not (victimdir / "data").exists() or _settings(root) != inside:
            TALLIES[area].bad("data lost", f"{path}: a file outside what apply writes was touched")
        shutil.rmtree(case, ignore_errors=True)


# -- 4. the database: concurrent writers, a full disk, damage ---------------------------------------------


def concurrent_writers(rng: random.Random, work: Path, until: float) -> None:
    area = "concurrent writers"
    pre, post = _pair(work, "small", packets=3000, rate_pps=1000)
    db = work / "shared.duckdb"
    stored = 0
    while time.monotonic() < until:
        writers = [
            subprocess.Popen(
                [*LOWTAIL, "analyze", str(pre), str(post), "--db", str(db), "--json"],
                cwd=work,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(rng.randint(2, 4))
        ]
        readers = [
            subprocess.Popen(
                [*LOWTAIL, cmd, *(["list"] if cmd == "experiment" else []), "--db", str(db), "--json"],
                cwd=work,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for cmd in rng.sample(("list", "experiment"), 2)
        ]
        for p in writers + readers:
            try:
                out, err = p.communicate(timeout=HANG_S)
                rc: int | None = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                rc = None
            outcome = judge(area, rc, err, (2,) if p in readers else (), "writer" if p in writers else "reader")
            if p in writers and outcome == "ok":
                stored += 1
            elif p in readers and outcome == "clean" and "no such database" not in err:
                TALLIES[area].bad("internal errors", f"a reader failed beside writers: {err.strip()[-200:]}")
    rc, out, err = run([*LOWTAIL, "list", "--db", str(db), "--json", "--limit", "100000"], work)
    if rc != 0 or len(json.loads(out)) != stored:
        TALLIES[area].bad("data lost", f"{stored} stored, the database lists {out[:80]!r} {err[-200:]}")


def disk_full(rng: random.Random, work: Path, until: float) -> None:
    area = "disk full"
    pre, post = _pair(work, "full", packets=60_000, rate_pps=100_000)
    disk = work / "small"
    disk.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        while time.monotonic() < until:
            for p in disk.iterdir():
                p.unlink()
            old = disk / "old.duckdb"
            rc, _, err = run([*LOWTAIL, "analyze", str(pre), str(post), "--trim", "0", "--db", str(old)], work)
            if rc != 0:
                judge(area, rc, err, (1,), "the first analysis")
                continue
            leave = rng.choice((0, 2048, 8192, 40 << 10, 120 << 10, 300 << 10, 800 << 10))
            st = os.statvfs(disk)
            with open(disk / "filler", "wb") as f:
                f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
            output = rng.choice(
                (
                    ["--db", str(disk / "new.duckdb")],
                    ["--db", str(old)],
                    ["--no-store", "--hgrm", str(disk / "x.hgrm")],
                    ["--no-store", "--export", str(disk / "s.parquet")],
                    ["--db", str(work / "elsewhere.duckdb"), "--report", str(disk / "r.html")],
                )
            )
            rc, _, err = run([*LOWTAIL, "analyze", str(pre), str(post), "--trim", "0", *output], work)
            outcome = judge(area, rc, err, (1,), f"{leave} bytes free, {output[-1]}")
            names = {p.name: p.stat().st_size for p in disk.iterdir() if p.name != "filler"}
            bad = [n for n, size in names.items() if n.endswith(".partial") or size == 0]
            if outcome != "ok":
                bad += [n for n in names if n not in ("old.duckdb",) and not n.startswith("old.duckdb")]
            if bad:
                TALLIES[area].bad("leftovers", f"{leave} bytes free, {output[-1]}: {sorted(set(bad))}", len(set(bad)))
            (disk / "filler").unlink()
            rc, _, err = run([*LOWTAIL, "show", "1", "--db", str(old)], work)
            if rc != 0:
                TALLIES[area].bad("data lost", f"{leave} bytes free: the earlier analysis is gone: {err[-200:]}")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def damaged_databases(rng: random.Random, work: Path, until: float) -> None:
    area = "damaged databases"
    pre, post = _pair(work, "small", packets=3000, rate_pps=1000)
    good = work / "good.duckdb"
    if not good.exists():
        for _ in range(3):
            run([*LOWTAIL, "analyze", str(pre), str(post), "--db", str(good)], work)
    i = 0
    while time.monotonic() < until:
        i += 1
        db = work / f"damaged{i}.duckdb"
        data = bytearray(good.read_bytes())
        how = rng.choice(("truncate", "flip", "zero-page", "truncate-block"))
        if how == "truncate":
            data = data[: len(data) - rng.randint(1, len(data) // 2)]
        elif how == "truncate-block":
            data = data[: len(data) - 262144 * rng.randint(1, 3)]
        elif how == "flip":
            for _ in range(rng.randint(1, 16)):
                at = rng.randrange(12288, len(data))
                data[at] ^= 1 << rng.randrange(8)
        else:
            page = rng.randrange(3, len(data) // 4096)
            data[page * 4096 : (page + 1) * 4096] = bytes(4096)
        db.write_bytes(bytes(data))
        command = rng.choice(
            (
                ["list"],
                ["show", "latest"],
                ["show", "1"],
                ["report", "2", "-o", str(work / "r.html")],
                ["analyze", str(pre), str(post)],
                ["experiment", "list"],
            )
        )
        if rng.random() < 0.25:
            command = ["recover", str(db), str(work / f"recovered{i}.duckdb")]
            rc, _, err = run([*LOWTAIL, *command], work)
        else:
            rc, _, err = run([*LOWTAIL, *command, "--db", str(db)], work)
        judge(area, rc, err, (1, 2, 3), f"{how}, {command[0]}")
        db.unlink(missing_ok=True)
        db.with_name(db.name + ".wal").unlink(missing_ok=True)


# -- 5. inputs: mutated captures, ordinary mistakes, quick failures --------------------------------------


def mutated_captures(rng: random.Random, work: Path, until: float) -> None:
    area = "mutated captures"
    pairs = [
        _pair(work, "m-pcap", packets=3000, rate_pps=10_000),
        _pair(work, "m-ng", packets=3000, rate_pps=10_000, format="pcapng"),
    ]
    i = 0
    while time.monotonic() < until:
        i += 1
        pre, post = rng.choice(pairs)
        victim = rng.choice((0, 1))
        data = bytearray((pre, post)[victim].read_bytes())
        how = rng.choice(("flip", "truncate", "insert", "zero", "duplicate"))
        if how == "flip":
            for _ in range(rng.randint(1, 30)):
                at = rng.randrange(len(data))
                data[at] ^= 1 << rng.randrange(8)
        elif how == "truncate":
            data = data[: rng.randrange(len(data))]
        elif how == "insert":
            at = rng.randrange(len(data))
            data[at:at] = rng.randbytes(rng.randint(1, 64))
        elif how == "zero":
            at = rng.randrange(len(data))
            data[at : at + rng.randint(1, 256)] = bytes(min(256, len(data) - at))
        else:
            at, n = rng.randrange(len(data)), rng.randint(16, 512)
            data[at:at] = data[at : at + n]
        mutated = work / f"mutated{(pre, post)[victim].suffix}"
        mutated.write_bytes(bytes(data))
        pair = (mutated, post) if victim == 0 else (pre, mutated)
        rc, _, err = run([*LOWTAIL, "analyze", str(pair[0]), str(pair[1]), "--trim", "0", "--no-store"], work, 120)
        judge(area, rc, err, (1, 2, 3), f"{how} of {'PRE' if victim == 0 else 'POST'}")


def mistakes(rng: random.Random, work: Path, until: float) -> None:
    area = "ordinary mistakes"
    pre, post = _pair(work, "small", packets=3000, rate_pps=1000)
    db = work / "mistakes.duckdb"
    run([*LOWTAIL, "analyze", str(pre), str(post), "--db", str(db)], work)
    long = "a" * 5000
    cases = [
        ["analyze", str(pre), str(post), "--no-store", "--trim", "inf"],
        ["analyze", str(pre), str(post), "--no-store", "--trim", "nan"],
        ["analyze", str(pre), str(post), "--no-store", "--trim", "1e300"],
        ["analyze", str(pre), str(post), "--no-store", "--trim", "-1"],
        ["analyze", str(pre), str(post), "--no-store", "--worst", "-1"],
        ["analyze", str(pre), str(post), "--no-store", "--worst", "1.5"],
        ["analyze", str(pre), str(post), "--no-store", "--udp-port", "70000"],
        ["analyze", str(pre), str(post), "--no-store", "--hgrm", str(work)],
        ["analyze", str(pre), long, "--no-store"],
        ["analyze", str(pre), str(post), "--db", long + ".duckdb"],
        ["analyze", str(pre), str(post), "--no-store", "--export", long + ".parquet"],
        ["show", "abc", "--db", str(db)],
        ["show", "1.5", "--db", str(db)],
        ["report", "abc", "--db", str(db)],
        ["experiment", "report", "abc", "--db", str(db)],
        ["analyse"],
        ["host", "aplly"],
        ["list", "--limit", "1.5", "--db", str(db)],
    ]
    i = 0
    while time.monotonic() < until:
        args = cases[i % len(cases)]
        i += 1
        rc, _, err = run([*LOWTAIL, *args], work, 120)
        judge(area, rc, err, (1, 2), " ".join(a[:30] for a in args))
        if args[0] in ("analyse", "host") and err.lower().count("did you mean") != 1:
            TALLIES[area].bad("internal errors", f"{args}: the suggestion is not printed once: {err!r}")


def quick_failures(rng: random.Random, work: Path, until: float) -> None:
    area = "quick failures (exit race)"
    pre, post = _pair(work, "small", packets=3000, rate_pps=1000)
    while time.monotonic() < until:
        rc, _, err = run([*LOWTAIL, "analyze", str(pre), str(post), "--trim", "100s", "--db", "race.duckdb"], work, 60)
        judge(area, rc, err, (1,), "--trim 100s")


def _inputs(area: Callable[..., None]) -> Callable[[random.Random, Path, float], None]:
    """An area of soak_inputs with this soak's runner, judge and tally."""

    def soak(rng: random.Random, work: Path, until: float) -> None:
        area(rng, work, until, run, judge, lambda name, column, note: TALLIES[name].bad(column, note))

    return soak


AREAS: list[tuple[str, Callable[[random.Random, Path, float], None], float]] = [
    ("sweep signals", sweep_signals, 0.42),
    ("analyze signals", analyze_signals, 0.09),
    ("host apply signals", apply_signals, 0.07),
    ("edited undo files", hostile_undo, 0.03),
    ("concurrent writers", concurrent_writers, 0.08),
    ("disk full", disk_full, 0.08),
    ("damaged databases", damaged_databases, 0.07),
    ("mutated captures", mutated_captures, 0.08),
    ("ordinary mistakes", mistakes, 0.04),
    ("quick failures (exit race)", quick_failures, 0.04),
    ("hostile bundles", _inputs(soak_inputs.bundles), 0.06),
    ("special-file outputs", _inputs(soak_inputs.special_files), 0.03),
    ("hostile specs", _inputs(soak_inputs.specs), 0.04),
    ("tune trials", tune_trials, 0.06),
    ("hostile undo files", _inputs(soak_inputs.undo_files), 0.02),
    ("bundle value bombs", _inputs(soak_inputs.bombs), 0.04),
    ("terminal escapes", _inputs(soak_inputs.escapes), 0.03),
    ("rule sets", _inputs(soak_inputs.rules), 0.03),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 12)))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", time.time())))
    parser.add_argument("--only", help="run only the areas whose name contains this")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("make soak builds testbeds and mounts a tmpfs: run it as root", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    areas = [a for a in AREAS if not args.only or args.only in a[0]]
    total = sum(share for _, _, share in areas)
    print(f"soak: {args.minutes:g} minutes, seed {args.seed}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="lowtail-soak-") as tmp:
        for name, area, share in areas:
            work = Path(tmp) / re.sub(r"\W+", "-", name)
            work.mkdir()
            started = time.monotonic()
            until = started + args.minutes * 60 * share / total
            try:
                area(rng, work, until)
            except Exception as e:  # the soak's own failure: counted, and the next area goes on
                TALLIES[name].bad("internal errors", f"the soak itself: {type(e).__name__}: {e}")
            t = TALLIES[name]
            print(f"soak: {name}: {t.counts['cases']} cases in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return report()


def report() -> int:
    width = max(len(n) for n in TALLIES) + 2
    print("area".ljust(width) + "".join(c.rjust(len(c) + 2) for c in COLUMNS))
    totals = dict.fromkeys(COLUMNS, 0)
    for name, t in TALLIES.items():
        print(name.ljust(width) + "".join(str(t.counts[c]).rjust(len(c) + 2) for c in COLUMNS))
        for c in COLUMNS:
            totals[c] += t.counts[c]
    print("total".ljust(width) + "".join(str(totals[c]).rjust(len(c) + 2) for c in COLUMNS))
    for name, t in TALLIES.items():
        for n in t.notes:
            print(f"  {name}: {n}")
    failures = sum(totals[c] for c in COLUMNS[3:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
