"""One reader and one writer per kind of host setting (host/settings.py): read → write the
restore value → read gives the original, for every kind, over generated values, on a sysroot
whose files answer writes as the kernel's do (a "[a] b c" file takes one word and refuses its
whole line with EINVAL, a cpulist or mask file shows its own form of what it took). Then the
same through `host apply` / `host undo` and through `tune`'s trials: the THP defect of the
issue (a trial restoring "always defer defer+madvise [madvise] never" whole) fails without
the fix."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host_fixtures import make_sysroot
from lowtail.host import settings as host_settings
from lowtail.host.apply import Change, apply_changes, planned_changes, undo
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan, resolve_plan
from lowtail.host.state import read_host_state
from lowtail.host.sysroot import SysRoot, cpus_to_cpumask, format_cpulist

THP_ENABLED = ("always", "madvise", "never")
THP_DEFRAG = ("always", "defer", "defer+madvise", "madvise", "never")


class KernelRoot(SysRoot):
    """A sysroot whose setting files answer a write as the kernel's do: `choices` files take
    one of their words and show it bracketed among the others; cpulist files show the CPUs in
    the kernel's own form ("0-2,5"), mask files as an 8-digit hex mask; int files take digits
    only. Anything else the kernel refuses with EINVAL."""

    def __init__(self, root: Path, choices: dict[str, tuple[str, ...]], kinds: dict[str, str]):
        super().__init__(root)
        self.choices = choices
        self.kinds = kinds

    def write(self, rel: str, text: str) -> None:
        value = text.strip()
        if rel in self.choices:
            if value not in self.choices[rel]:
                raise OSError(errno.EINVAL, "Invalid argument")
            shown = " ".join(f"[{w}]" if w == value else w for w in self.choices[rel])
        elif self.kinds.get(rel) == "cpulist":
            shown = format_cpulist(host_settings.value("cpulist", value))
        elif self.kinds.get(rel) == "mask":
            if not all(c in "0123456789abcdefABCDEF," for c in value):
                raise OSError(errno.EINVAL, "Invalid argument")
            shown = f"{int(value.replace(',', '') or '0', 16):08x}"
        elif self.kinds.get(rel) == "int":
            if not value.lstrip("-").isdigit():
                raise OSError(errno.EINVAL, "Invalid argument")
            shown = str(int(value))
        else:
            shown = value
        self.path(rel).write_text(shown + "\n")


def kernel_form(kind: str, value: object, choices: tuple[str, ...] = ()) -> str:
    """How the kernel shows `value` of `kind` when it is read (with padding it may add)."""
    if kind == "selected":
        return " ".join(f"[{w}]" if w == value else w for w in choices)
    if kind == "cpulist":
        return format_cpulist(value)  # type: ignore[arg-type]
    if kind == "mask":
        return f"{int(cpus_to_cpumask(value), 16):08x}"  # type: ignore[arg-type]
    return str(value)


cpu_sets = st.sets(st.integers(0, 63), min_size=1, max_size=16).map(sorted)
cases = st.one_of(
    st.tuples(st.just("selected"), st.sampled_from(THP_DEFRAG), st.just(THP_DEFRAG)),
    st.tuples(st.just("selected"), st.sampled_from(THP_ENABLED), st.just(THP_ENABLED)),
    st.tuples(st.just("cpulist"), cpu_sets, st.just(())),
    st.tuples(st.just("mask"), cpu_sets, st.just(())),
    st.tuples(st.just("int"), st.integers(-(2**31), 2**31 - 1), st.just(())),
    st.tuples(st.just("text"), st.sampled_from(["performance", "powersave", "schedutil"]), st.just(())),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases, padding=st.sampled_from(["", "\n", " \n"]))
def test_every_kind_reads_back_as_it_was_after_its_restore_value_is_written(tmp_path, case, padding):
    kind, value, choices = case
    rel = f"settings/{kind}"
    (tmp_path / "settings").mkdir(exist_ok=True)
    root = KernelRoot(tmp_path, {rel: choices} if choices else {}, {rel: kind})
    (tmp_path / rel).write_text(kernel_form(kind, value, choices) + padding)
    original = host_settings.read(root, rel)
    assert original is not None
    host_settings.write(root, rel, kind, original)  # what undo does with what it read
    assert host_settings.same(kind, host_settings.read(root, rel), original)
    assert host_settings.value(kind, host_settings.read(root, rel)) == host_settings.value(kind, original)


@pytest.fixture
def untuned_kernel(tmp_path):
    """The untuned fixture sysroot whose THP, KSM, sysctl, idle-state, governor, IRQ and mask
    files answer writes as the kernel's do."""
    root = make_sysroot(tmp_path / "sysroot", tuned=False)
    choices = {
        "sys/kernel/mm/transparent_hugepage/enabled": THP_ENABLED,
        "sys/kernel/mm/transparent_hugepage/defrag": THP_DEFRAG,
    }
    kinds = {"proc/irq/default_smp_affinity": "mask"}
    for p in root.glob("proc/irq/*/smp_affinity_list"):
        kinds[str(p.relative_to(root))] = "cpulist"
    for rel in ("proc/sys/vm/stat_interval", "proc/sys/kernel/timer_migration", "sys/kernel/mm/ksm/run"):
        kinds[rel] = "int"
    for p in root.glob("sys/devices/system/cpu/cpu*/cpuidle/state*/disable"):
        kinds[str(p.relative_to(root))] = "int"
    return KernelRoot(root, choices, kinds)


def every_setting(root: SysRoot) -> dict[str, object]:
    """Every setting apply may write, as the kernel means it."""
    out: dict[str, object] = {}
    for ch in planned_changes(Host(SysRoot(root.root)), CorePlan((0,), (1, 2, 3), "test"), cpuset=None):
        out[ch.path] = host_settings.value(ch.compare, root.read(ch.path))
    return out


def test_apply_then_undo_gives_every_kind_back_on_a_kernel_like_root(untuned_kernel, tmp_path):
    root = untuned_kernel
    before = every_setting(root)
    plan = CorePlan((0,), (1, 2, 3), "test")
    changes = planned_changes(Host(root), plan, cpuset=None)
    kinds = {ch.compare for ch in changes}
    assert {"selected", "int", "cpulist", "mask", "text"} <= kinds, kinds
    apply_changes(root, changes, plan, tmp_path / "u.json")
    assert every_setting(root) != before
    undo(tmp_path / "u.json", root)
    assert every_setting(root) == before


def test_an_undo_file_whose_thp_restore_is_the_whole_line_still_restores(untuned_kernel, tmp_path):
    """The issue's undo file: `restore` for both THP settings was the whole line. Before the
    fix `host undo` failed with "Invalid argument" and left THP at never."""
    root = untuned_kernel
    thp = "sys/kernel/mm/transparent_hugepage/defrag"
    line = root.read(thp)
    assert line == "always defer defer+madvise [madvise] never"
    plan = CorePlan((0,), (1, 2, 3), "test")
    changes = [c for c in planned_changes(Host(root), plan, cpuset=None) if c.path == thp]
    apply_changes(root, changes, plan, tmp_path / "u.json")
    doc = json.loads((tmp_path / "u.json").read_text())
    doc["changes"][0]["restore"] = line  # what tune's trial wrote before the fix
    (tmp_path / "u.json").write_text(json.dumps(doc))
    undo(tmp_path / "u.json", root)
    assert root.read(thp) == line


def test_a_tune_trial_restores_what_it_read_as_the_trial_started(untuned_kernel, tmp_path):
    """tune re-reads what a trial restores as the trial starts (`_as_now`); before the fix it
    kept THP's whole line, and undoing the trial failed with EINVAL, leaving the host changed."""
    from lowtail.tune.loop import _as_now

    root = untuned_kernel
    before = every_setting(root)
    plan = CorePlan((0,), (1, 2, 3), "test")
    for n in range(2):  # applied, undone, applied again: as a trial's repetitions are
        changes = _as_now(root, planned_changes(Host(root), plan, cpuset=None))
        for ch in changes:
            ch.status, ch.after = "planned", None
        apply_changes(root, changes, plan, tmp_path / f"trial-{n}.json", command="tune")
        undo(tmp_path / f"trial-{n}.json", root)
        assert every_setting(root) == before


def test_the_fingerprint_reads_each_setting_in_its_kinds_form(untuned_kernel):
    settings_now = read_host_state(untuned_kernel, [1])["settings"]
    assert settings_now["transparent huge pages defrag"] == "madvise"
    assert settings_now["transparent huge pages"] == "always"
    assert settings_now["default IRQ affinity"] == "f"
    assert settings_now["vm.stat_interval"] == "1"


def test_a_change_of_every_kind_is_planned_with_its_restore_in_the_kernels_form(untuned_kernel):
    host = Host(untuned_kernel)
    for ch in planned_changes(host, resolve_plan(host, "0", "1-3"), cpuset=None):
        assert isinstance(ch, Change)
        assert ch.restore == host_settings.restore_text(ch.compare, ch.before or "")
        assert "[" not in (ch.restore or "")


def test_an_undo_cut_short_is_finished_by_the_next_undo_without_force(untuned_kernel, tmp_path):
    """An undo killed half-way (SIGKILL) leaves some settings restored and its file saying
    "applied": before, the next `host undo` refused every restored one as "changed since
    apply" and needed --force; now a setting that reads as before is simply done."""
    root = untuned_kernel
    before = every_setting(root)
    plan = CorePlan((0,), (1, 2, 3), "test")
    changes = planned_changes(Host(root), plan, cpuset=None)
    apply_changes(root, changes, plan, tmp_path / "u.json")
    for ch in changes[: len(changes) // 2]:  # what the killed undo got to
        host_settings.write(root, ch.path, ch.compare, ch.restore or "")
    undo(tmp_path / "u.json", root)
    assert every_setting(root) == before
