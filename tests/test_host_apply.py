"""`lowtail host apply` / `undo` round trips on fixture sysroots: dry run, all-or-nothing
with rollback, exact restore, refusal when the host changed since, permissions, bad input.
The live host is never written."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from host_fixtures import cli, file_states, make_sysroot
from lowtail.core.errors import Failure, UserError
from lowtail.host.apply import apply_changes, normalized, planned_changes, undo
from lowtail.host.audit import run_audit
from lowtail.host.facts import Host
from lowtail.host.plan import resolve_plan
from lowtail.host.sysroot import SysRoot

RUNTIME_CHECKS = {"cstates", "cpufreq", "thp", "ksm", "vm_stat_interval", "timer_migration", "irq_affinity"}


def runtime_statuses(root: Path) -> dict[str, str]:
    host = Host(SysRoot.open(root))
    return {c["id"]: c["status"] for c in run_audit(host, resolve_plan(host, "0", "1-3"), RUNTIME_CHECKS)}


def settings(root: Path, changes) -> dict[str, object]:
    """What the kernel would report for every setting apply touches (None: absent)."""
    out = {}
    for ch in changes:
        p = root / ch.path
        out[ch.path] = (
            ("dir" if p.is_dir() else None)
            if ch.kind == "mkdir"
            else normalized(ch.compare, p.read_text() if p.exists() else None)
        )
    return out


@pytest.fixture
def untuned(tmp_path):
    return make_sysroot(tmp_path / "untuned", tuned=False)


def plan_for(root: Path):
    host = Host(SysRoot.open(root))
    plan = resolve_plan(host, "0", "1-3")
    return host, plan, planned_changes(host, plan)


def test_dry_run_lists_changes_and_changes_nothing(untuned, tmp_path, capsys):
    before = file_states(untuned)
    code, out, err = cli(
        capsys,
        "host",
        "apply",
        "--sysroot",
        untuned,
        "--isolated",
        "1-3",
        "--undo-file",
        tmp_path / "undo.json",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["undo_file"] is None
    settings_changed = {c["setting"] for c in doc["changes"]}
    assert {
        "vm.stat_interval",
        "kernel.timer_migration",
        "KSM",
        "transparent huge pages enabled",
        "CPU 1 frequency governor",
        "default IRQ affinity",
        "IRQ 24 (eth0-TxRx-0) affinity",
        "cpuset lowtail-dut for the DuT",
        "CPU 3 idle state C6 (133 µs)",
    } <= settings_changed
    assert not any(c["setting"].startswith("CPU 0 ") for c in doc["changes"])  # housekeeping cores untouched
    assert file_states(untuned) == before
    assert not (tmp_path / "undo.json").exists()


def test_apply_then_undo_restores_every_setting_exactly(untuned, tmp_path, capsys):
    host, plan, changes = plan_for(untuned)
    before_settings = settings(untuned, changes)
    before_audit = runtime_statuses(untuned)
    before_files = file_states(untuned)
    undo_file = tmp_path / "undo.json"
    code, out, err = cli(
        capsys,
        "host",
        "apply",
        "--sysroot",
        untuned,
        "--housekeeping",
        "0",
        "--isolated",
        "1-3",
        "--yes",
        "--undo-file",
        undo_file,
    )
    assert code == 0, err
    assert f"lowtail host undo {undo_file}" in err
    after = runtime_statuses(untuned)
    # The governor is set, but intel_pstate itself only goes with a boot parameter.
    assert after == {**{k: "pass" for k in RUNTIME_CHECKS}, "cpufreq": "warn"}, after
    assert (untuned / "sys/fs/cgroup/cpuset/lowtail-dut/cpuset.cpus").read_text() == "1-3\n"
    assert (untuned / "sys/fs/cgroup/cpuset/lowtail-dut/cpuset.mems").read_text() == "0\n"
    doc = json.loads(undo_file.read_text())
    assert doc["state"] == "applied" and all(c["status"] == "applied" for c in doc["changes"])

    code, out, err = cli(capsys, "host", "undo", undo_file)
    assert code == 0, err
    assert settings(untuned, changes) == before_settings
    assert runtime_statuses(untuned) == before_audit
    assert not (untuned / "sys/fs/cgroup/cpuset/lowtail-dut").exists()
    # Files whose kernel semantics equal their text come back byte for byte.
    now = file_states(untuned)
    same = [p for p in before_files if "transparent_hugepage" not in p]
    assert {p: now[p] for p in same} == {p: before_files[p] for p in same}
    assert not undo_file.exists() and undo_file.with_name("undo.json.done").exists()
    code, _, err = cli(capsys, "host", "undo", undo_file)
    assert code == 2 and "was undone already" in err


def test_cgroup_v2_cpuset_enables_the_controller_and_makes_an_isolated_partition(tmp_path):
    root = make_sysroot(tmp_path / "tuned", tuned=True)
    host, plan, changes = plan_for(root)
    assert [c.setting for c in changes] == [
        "cpuset controller for child cgroups",
        "cpuset lowtail-dut for the DuT",
        "cpuset lowtail-dut CPUs",
        "cpuset lowtail-dut memory nodes",
        "cpuset lowtail-dut as an isolated partition",
    ]
    apply_changes(host.root, changes, plan, tmp_path / "u.json")
    assert (root / "sys/fs/cgroup/lowtail-dut/cpuset.cpus.partition").read_text() == "isolated\n"
    restored = undo(tmp_path / "u.json")
    assert len(restored) == 2  # the directory (with what is in it) and the controller
    assert not (root / "sys/fs/cgroup/lowtail-dut").exists()
    assert (root / "sys/fs/cgroup/cgroup.subtree_control").read_text() == "-cpuset\n"  # the kernel's way to restore


def test_a_failure_midway_rolls_back_what_was_done(untuned, tmp_path):
    host, plan, changes = plan_for(untuned)
    before = settings(untuned, changes)
    # Make a late change impossible: the KSM switch becomes a directory after planning.
    ksm = untuned / "sys/kernel/mm/ksm/run"
    ksm.unlink()
    ksm.mkdir()
    idx = next(i for i, c in enumerate(changes) if c.setting == "KSM")
    assert 0 < idx < len(changes) - 1
    with pytest.raises(Failure) as e:
        apply_changes(host.root, changes, plan, tmp_path / "undo.json")
    assert "could not change KSM" in str(e.value) and "rolled back" in str(e.value)
    ksm.rmdir()
    ksm.write_text("1\n")
    assert settings(untuned, changes) == before
    assert not (tmp_path / "undo.json").exists()  # nothing to undo


def test_undo_refuses_when_the_host_changed_since(untuned, tmp_path):
    host, plan, changes = plan_for(untuned)
    undo_file = tmp_path / "undo.json"
    apply_changes(host.root, changes, plan, undo_file)
    (untuned / "proc/sys/vm/stat_interval").write_text("10\n")  # someone else changed it
    irq_before = (untuned / "proc/irq/24/smp_affinity_list").read_text()
    with pytest.raises(UserError) as e:
        undo(undo_file)
    assert "no longer matches the host: vm.stat_interval" in str(e.value) and "'10'" in str(e.value)
    assert (untuned / "proc/irq/24/smp_affinity_list").read_text() == irq_before  # nothing restored
    assert undo_file.exists()
    undo(undo_file, force=True)
    assert (untuned / "proc/sys/vm/stat_interval").read_text() == "1\n"
    assert (untuned / "proc/irq/24/smp_affinity_list").read_text() == "0-3\n"


def test_apply_refuses_to_overwrite_an_undo_file(untuned, tmp_path, capsys):
    undo_file = tmp_path / "undo.json"
    undo_file.write_text("{}")
    before = file_states(untuned)
    code, _, err = cli(capsys, "host", "apply", "--sysroot", untuned, "--yes", "--undo-file", undo_file)
    assert code == 2 and "exists from an earlier apply" in err
    assert file_states(untuned) == before


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "not a lowtail undo file"),
        ('{"format": "something else"}', "not a lowtail undo file"),
    ],
)
def test_undo_rejects_files_it_did_not_write(tmp_path, capsys, content, message):
    f = tmp_path / "u.json"
    f.write_text(content)
    code, _, err = cli(capsys, "host", "undo", f)
    assert code == 2 and message in err


def test_undo_checks_the_sysroot_it_is_given(untuned, tmp_path):
    host, plan, changes = plan_for(untuned)
    apply_changes(host.root, changes, plan, tmp_path / "u.json")
    other = make_sysroot(tmp_path / "other", tuned=False)
    with pytest.raises(UserError, match="was written for"):
        undo(tmp_path / "u.json", sysroot=other)


def test_apply_refuses_an_existing_cpuset(untuned, tmp_path, capsys):
    (untuned / "sys/fs/cgroup/cpuset/lowtail-dut").mkdir()
    code, _, err = cli(capsys, "host", "apply", "--sysroot", untuned, "--isolated", "1-3")
    assert code == 2 and "exists already" in err


def _as_nobody(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run `lowtail ARGS` as the unprivileged user `nobody`, in a forked child of this
    process (the venv's interpreter lives where nobody may not execute it); returns
    (exit code, stderr)."""
    err_path = cwd / "stderr.txt"
    fd = os.open(err_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for real, then run the command
        code = 99
        try:
            os.dup2(fd, 2)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            sys.stdout = open(os.devnull, "w")
            os.chdir(cwd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            from lowtail.cli import main

            try:
                main(args)
                code = 0
            except SystemExit as e:
                code = e.code or 0
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = err_path.read_text()
    err_path.unlink()
    return os.waitstatus_to_exitcode(status), text


@pytest.fixture
def shared_dir():
    """A directory the unprivileged user can enter (pytest's tmp_path is root-only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a command as another user")
    d = Path(tempfile.mkdtemp(prefix="lowtail-host-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def test_apply_without_root_on_the_live_host_is_refused(shared_dir):
    code, err = _as_nobody(["host", "apply", "--yes", "--undo-file", str(shared_dir / "u.json")], shared_dir)
    assert code == 2, err
    assert "needs root" in err and len(err.strip().splitlines()) == 1
    assert not (shared_dir / "u.json").exists()


def test_no_permission_midway_rolls_back_and_says_so(shared_dir):
    """An unprivileged user may write most of a copied sysroot but not one file: the
    write fails for real (EACCES), the changes before it are rolled back."""
    root = make_sysroot(shared_dir / "sysroot", tuned=False)
    _, _, changes = plan_for(root)
    before = settings(root, changes)
    for p in [root, *root.rglob("*")]:
        os.chown(p, 65534, 65534)
    os.chown(root / "sys/kernel/mm/ksm/run", 0, 0)  # root's, mode 0644: nobody cannot write it
    os.chown(shared_dir, 65534, 65534)
    code, err = _as_nobody(
        [
            "host",
            "apply",
            "--sysroot",
            str(root),
            "--isolated",
            "1-3",
            "--yes",
            "--undo-file",
            str(shared_dir / "u.json"),
        ],
        shared_dir,
    )
    assert code == 1, err
    assert "could not change KSM" in err and "no permission" in err and "rolled back" in err
    assert settings(root, changes) == before
    assert not (root / "sys/fs/cgroup/cpuset/lowtail-dut").exists()
    assert not (shared_dir / "u.json").exists()


# -- an undo file is input: what an edited one must not reach ---------------------------------


def _edit_undo(undo_file: Path, edit) -> None:
    doc = json.loads(undo_file.read_text())
    edit(doc["changes"])
    undo_file.write_text(json.dumps(doc))


def _retarget(setting: str, path: str, kind: str = "write"):
    def edit(changes: list[dict]) -> None:
        ch = next(c for c in changes if c["setting"] == setting)
        ch["path"], ch["kind"] = path, kind

    return edit


def _symlink_escape(untuned: Path, victim: Path):
    link = untuned / "proc/sys/vm/stat_interval"
    link.unlink()
    link.symlink_to(victim)
    return lambda changes: None


@pytest.mark.parametrize(
    "hostile",
    [
        "dotdot-file",
        "dotdot-mkdir",
        "absolute-file",
        "symlink-escape",
        "not-a-setting",
        "cpuset-hierarchy-itself",
        "wrong-kind",
    ],
)
def test_undo_refuses_a_file_that_reaches_outside_what_apply_writes(untuned, tmp_path, capsys, hostile):
    """An edited undo file (`"path": "../victim.txt"`, a `mkdir` of `../victimdir`, a symbolic
    link out of the sysroot, a file apply never writes) is refused whole: exit 2, one line,
    nothing outside the sysroot touched, nothing inside it restored."""
    host, plan, changes = plan_for(untuned)
    undo_file = tmp_path / "undo.json"
    apply_changes(host.root, changes, plan, undo_file)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    victimdir = tmp_path / "victimdir"
    victimdir.mkdir()
    (victimdir / "data").write_text("precious\n")
    edit = {
        "dotdot-file": _retarget("vm.stat_interval", "../victim.txt"),
        "dotdot-mkdir": _retarget("cpuset lowtail-dut for the DuT", "../victimdir", kind="mkdir"),
        "absolute-file": _retarget("vm.stat_interval", str(victim)),
        "symlink-escape": None,
        "not-a-setting": _retarget("vm.stat_interval", "proc/cmdline"),
        "cpuset-hierarchy-itself": _retarget("cpuset lowtail-dut for the DuT", "sys/fs/cgroup/cpuset", kind="mkdir"),
        "wrong-kind": _retarget("KSM", "sys/kernel/mm/ksm", kind="mkdir"),
    }[hostile]
    if edit is None:
        edit = _symlink_escape(untuned, victim)
    _edit_undo(undo_file, edit)
    inside_before = file_states(untuned)
    code, out, err = cli(capsys, "host", "undo", undo_file)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "nothing was restored" in err, err
    assert victim.read_text() == "keep me\n"
    assert (victimdir / "data").read_text() == "precious\n"
    assert file_states(untuned) == inside_before
    assert undo_file.exists()


def test_every_path_apply_plans_passes_the_undo_check(tmp_path):
    """The list of what apply may write (SETTING_FILES, the cpuset's) covers all it writes,
    on a cgroup v1 and a v2 host: a real undo file is never refused."""
    for tuned in (False, True):
        root = make_sysroot(tmp_path / f"r{tuned}", tuned=tuned)
        host, plan, changes = plan_for(root)
        apply_changes(host.root, changes, plan, tmp_path / f"u{tuned}.json")
        restored = undo(tmp_path / f"u{tuned}.json")
        assert restored, tuned


# -- signals while apply writes ---------------------------------------------------------------------

_SIGNAL_DURING_APPLY = """
import json, os, signal, sys
from pathlib import Path
from lowtail.core import signals
from lowtail.core.errors import Interrupted
from lowtail.host.apply import Change, apply_changes, planned_changes
from lowtail.host.facts import Host
from lowtail.host.plan import resolve_plan
from lowtail.host.sysroot import SysRoot

root_dir, undo_file, sig, nth, live = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]


class SignalAfterWrite(SysRoot):
    # A real sysroot; right after its nth write takes effect, and before apply can record
    # it, a real signal arrives: the worst moment.
    left = nth

    def write(self, rel, text):
        super().write(rel, text)
        SignalAfterWrite.left -= 1
        if SignalAfterWrite.left == 0:
            os.kill(os.getpid(), sig)


host = Host(SysRoot.open(root_dir))
plan = resolve_plan(host, "0", "1" if live == "live" else "1-3")  # the tests' plan_for
if live == "live":
    rel = "proc/sys/vm/stat_interval"
    now = (Path("/") / rel).read_text().strip()
    changes = [Change("vm.stat_interval", rel, str(int(now) + 1), now, now)]
else:
    changes = planned_changes(host, plan)
with signals.stop_on_signals():  # what `lowtail` does for every command
    try:
        apply_changes(SignalAfterWrite(root_dir), changes, plan, undo_file)
    except Interrupted as e:
        print(json.dumps({"interrupted": str(e)}))
        sys.exit(130)
print(json.dumps({"finished": True}))
"""


def _apply_with_signal(root: Path, undo_file: Path, sig: int, nth: int, live: bool = False):
    import subprocess

    return subprocess.run(
        [
            sys.executable,
            "-c",
            _SIGNAL_DURING_APPLY,
            str(root),
            str(undo_file),
            str(int(sig)),
            str(nth),
            "live" if live else "fixture",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("nth", [1, 4, -1])
def test_a_signal_during_apply_rolls_back_every_write_including_the_one_it_interrupted(untuned, tmp_path, sig, nth):
    """SIGINT, SIGTERM or SIGHUP right after a write took effect: the write is finished and
    recorded first, then everything made is rolled back and read back; the undo file goes
    only then, and the command says so in one line (exit 130)."""
    import signal as signal_module

    host, plan, changes = plan_for(untuned)
    before = settings(untuned, changes)
    writes = sum(c.kind == "write" for c in changes)
    undo_file = tmp_path / "undo.json"
    done = _apply_with_signal(untuned, undo_file, getattr(signal_module, sig), nth if nth > 0 else writes)
    assert done.returncode == 130, done.stderr
    message = json.loads(done.stdout)["interrupted"]
    assert "rolled back and read back as before, nothing is changed" in message
    assert settings(untuned, changes) == before
    assert not undo_file.exists() and not list(tmp_path.glob(".undo.json*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="writes the live /proc/sys (as root), and restores it")
@pytest.mark.host
def test_a_signal_during_apply_on_the_live_host_leaves_its_setting_as_it_was(tmp_path):
    """The same on the live kernel: vm.stat_interval is changed and a SIGINT arrives right
    after; it must read as before afterwards (restored by the test whatever happens)."""
    import signal as signal_module

    path = Path("/proc/sys/vm/stat_interval")
    original = path.read_text()
    try:
        done = _apply_with_signal(Path("/"), tmp_path / "u.json", signal_module.SIGINT, 1, live=True)
        assert done.returncode == 130, done.stderr
        assert "nothing is changed" in json.loads(done.stdout)["interrupted"]
        assert path.read_text() == original
        assert not (tmp_path / "u.json").exists()
    finally:
        path.write_text(original)
