"""`lowtail host audit` and `lowtail host plan` against fixture sysroots, tuned and untuned."""

from __future__ import annotations

import json

import pytest

from host_fixtures import cli, make_sysroot
from lowtail.host.audit import CHECKS, run_audit, score
from lowtail.host.facts import Host, parse_cmdline
from lowtail.host.plan import resolve_plan
from lowtail.host.sysroot import SysRoot

# What the untuned fixture must give for the plan housekeeping 0, isolated 1-3 — one entry
# per check, so a check added without a test makes this file fail.
UNTUNED = {
    "isolcpus": ("fail", "leaves out DuT core 2-3"),
    "nohz_full": ("pass", "nohz_full=1-3"),
    "rcu_nocbs": ("fail", "not on the command line"),
    "rcu_nocb_poll": ("warn", "misspelt"),
    "irqaffinity": ("fail", "not on the command line"),
    "idle_poll": ("warn", "not on the command line"),
    "intel_idle_max_cstate": ("warn", "not on the command line"),
    "intel_pstate": ("warn", "not on the command line"),
    "tsc_reliable": ("warn", "not on the command line"),
    "mce_ignore_ce": ("warn", "not on the command line"),
    "audit_off": ("warn", "not on the command line"),
    "nmi_watchdog": ("warn", "kernel.nmi_watchdog = 1"),
    "skew_tick": ("warn", "not on the command line"),
    "nosoftlockup": ("warn", "kernel.soft_watchdog = 1"),
    "smt": ("fail", "1+3"),
    "cstates": ("fail", "C6 (133 µs)"),
    "cpufreq": ("fail", "governor powersave"),
    "thp": ("fail", "enabled [always]"),
    "ksm": ("fail", "run = 1"),
    "vm_stat_interval": ("warn", "1 s"),
    "timer_migration": ("warn", "1"),
    "irq_affinity": ("fail", "5 of 5 IRQs may run on DuT core 1-3"),
    "irqbalance": ("fail", "irqbalance is running"),
    "isolation_in_effect": ("fail", "no nohz_full support"),
    "kernel_rt": ("warn", "6.1.0-amd64"),
    "nohz_full_support": ("fail", "CONFIG_NO_HZ_FULL=not set"),
    "clocksource": ("fail", "hpet"),
    "cgroup_version": ("warn", "hybrid"),
    "nic_numa": ("fail", "eth0 node 1"),
    "resctrl": ("warn", "resctrl not mounted"),
}


@pytest.fixture
def tuned(tmp_path):
    return make_sysroot(tmp_path / "tuned", tuned=True)


@pytest.fixture
def untuned(tmp_path):
    return make_sysroot(tmp_path / "untuned", tuned=False)


def audit(root, housekeeping="0", isolated="1-3"):
    host = Host(SysRoot.open(root))
    return {c["id"]: c for c in run_audit(host, resolve_plan(host, housekeeping, isolated))}


def test_every_check_is_covered_by_the_fixture_expectations():
    assert set(UNTUNED) == {cid for cid, _ in CHECKS}


def test_tuned_host_passes_every_check(tuned):
    checks = audit(tuned)
    bad = {cid: (c["status"], c["observed"]) for cid, c in checks.items() if c["status"] != "pass"}
    assert bad == {}
    assert all(c["remedy"] == "" for c in checks.values())
    assert score(list(checks.values()))["score"] == 100


@pytest.mark.parametrize("check_id", sorted(UNTUNED))
def test_untuned_host_fails_each_check_with_what_it_saw(untuned, check_id):
    c = audit(untuned)[check_id]
    status, fragment = UNTUNED[check_id]
    assert c["status"] == status, c
    assert fragment in c["observed"], c["observed"]
    assert c["why"]  # every check says which effect in the URLLC studies it guards against
    if status != "pass":
        assert c["remedy"], f"{check_id} fails without a remedy"


def test_remedies_name_the_exact_parameter_or_command(untuned):
    checks = audit(untuned)
    assert "`rcu_nocbs=1-3`" in checks["rcu_nocbs"]["remedy"]
    assert "`irqaffinity=0`" in checks["irqaffinity"]["remedy"]
    assert "rcu_nocb_poll" in checks["rcu_nocb_poll"]["remedy"]
    assert "cpu1/cpuidle/state2/disable" in checks["cstates"]["remedy"]
    assert "systemctl disable --now irqbalance" in checks["irqbalance"]["remedy"]
    assert "CONFIG_NO_HZ_FULL=y" in checks["nohz_full_support"]["remedy"]


def test_intel_only_parameters_do_not_apply_to_amd(tmp_path):
    root = make_sysroot(tmp_path / "amd", tuned=False, vendor="AuthenticAMD")
    checks = audit(root)
    assert checks["intel_idle_max_cstate"]["status"] == "skip"
    assert checks["intel_pstate"]["status"] == "skip"


def test_isolation_asked_for_but_not_in_effect(tuned):
    # The command line asks for isolcpus=1-3 but the kernel isolated only 1.
    (tuned / "sys/devices/system/cpu/isolated").write_text("1\n")
    (tuned / "sys/devices/system/cpu/nohz_full").write_text("1-2\n")
    c = audit(tuned)["isolation_in_effect"]
    assert c["status"] == "fail"
    assert "sys/devices/system/cpu/isolated is 1" in c["observed"]
    assert "nohz_full asks for 1-3 but the kernel applies 1-2" in c["observed"]


def test_score_counts_a_warning_as_half(untuned):
    s = score(list(audit(untuned).values()))
    assert s["applicable"] == s["passed"] + s["warned"] + s["failed"]
    assert s["score"] == round(100 * (s["passed"] + 0.5 * s["warned"]) / s["applicable"])
    assert 0 < s["score"] < 50


def test_plan_is_read_from_the_boot_command_line(tuned):
    host = Host(SysRoot.open(tuned))
    plan = resolve_plan(host)
    assert (plan.housekeeping, plan.isolated, plan.source) == ((0,), (1, 2, 3), "boot command line")


def test_cmdline_parsing_follows_the_kernel():
    p = parse_cmdline('root=/dev/sda1 ro nmi-watchdog=0 isolcpus=1 isolcpus=2-3 foo="a b" -- init-arg=1')
    assert p["nmi_watchdog"] == "0"  # dashes and underscores are the same to the kernel
    assert p["isolcpus"] == "2-3"  # the last one wins
    assert p["foo"] == "a b" and p["ro"] is None
    assert "init_arg" not in p  # after "--": the init's arguments


def test_audit_cli_json_lists_checks_with_status_observed_remedy(untuned, capsys):
    code, out, err = cli(
        capsys, "host", "audit", "--sysroot", untuned, "--housekeeping", "0", "--isolated", "1-3", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["plan"]["isolated"] == [1, 2, 3]
    assert len(doc["checks"]) == len(CHECKS)
    for c in doc["checks"]:
        assert {"id", "status", "observed", "remedy", "why"} <= set(c)
    assert doc["summary"]["failed"] == sum(v[0] == "fail" for v in UNTUNED.values())


def test_audit_cli_table_strict_and_store(untuned, tmp_path, capsys):
    db = tmp_path / "a.duckdb"
    code, out, err = cli(
        capsys, "host", "audit", "--sysroot", untuned, "--isolated", "1-3", "--strict", "--store", "--db", db
    )
    assert code == 4, err
    assert "score" in out and "[always]" in out  # markup in observed values is printed as is
    assert "stored as audit 1" in err
    from lowtail.store import open_store

    with open_store(db, read_only=True) as s:
        (n,) = s.con.execute("SELECT count(*) FROM host_audit_checks WHERE status = 'fail'").fetchone()
    assert n == sum(v[0] == "fail" for v in UNTUNED.values())


def test_audit_only_selected_checks(untuned, capsys):
    code, out, err = cli(capsys, "host", "audit", "--sysroot", untuned, "--check", "thp", "--check", "ksm", "--json")
    assert code == 0, err
    assert [c["id"] for c in json.loads(out)["checks"]] == ["thp", "ksm"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--isolated", "7"], "CPU 7 does not exist"),
        (["--housekeeping", "0", "--isolated", "0-1"], "cannot be both housekeeping and isolated"),
        (["--isolated", "0-3"], "leaves no housekeeping CPU"),
        (["--isolated", "one"], "is not a CPU number"),
        (["--check", "nope"], "no such check"),
    ],
)
def test_bad_core_plans_are_one_line_errors(untuned, args, message, capsys):
    code, out, err = cli(capsys, "host", "audit", "--sysroot", untuned, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_directory_that_is_not_a_sysroot(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "host", "audit", "--sysroot", tmp_path / "empty")
    assert code == 2 and "is not a sysroot" in err
    code, _, err = cli(capsys, "host", "audit", "--sysroot", tmp_path / "missing")
    assert code == 2 and "no such directory" in err


def test_plan_writes_the_papers_parameters_and_keeps_the_grub_line(untuned, capsys):
    code, out, err = cli(
        capsys, "host", "plan", "--sysroot", untuned, "--housekeeping", "0", "--isolated", "1-3", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    # The untuned fixture's kernel lacks CONFIG_NO_HZ_FULL (the audit fails it): no nohz_full.
    assert doc["cmdline"] == (
        "isolcpus=1-3 rcu_nocbs=1-3 rcu_nocb_poll irqaffinity=0 idle=poll "
        "intel_idle.max_cstate=0 intel_pstate=disable tsc=reliable mce=ignore_ce audit=0 "
        "nmi_watchdog=0 skew_tick=1 nosoftlockup nosmt"
    )
    assert any(
        n.startswith("nohz_full=1-3 left out: this kernel is built without CONFIG_NO_HZ_FULL") for n in doc["notes"]
    )
    assert doc["kept_from"] == "etc/default/grub"
    assert doc["grub"] == f'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash {doc["cmdline"]}"'


def test_plan_recommends_nohz_full_on_a_kernel_built_for_it(tuned, capsys):
    code, out, err = cli(
        capsys, "host", "plan", "--sysroot", tuned, "--housekeeping", "0", "--isolated", "1-3", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert "nohz_full=1-3" in doc["cmdline"].split() and not any("CONFIG_NO_HZ_FULL" in n for n in doc["notes"])


def test_plan_for_a_guest_gives_the_vm_duts_boot_parameters(capsys):
    """`host plan --guest-vcpus N`: the same parameters for a VM DuT's guest kernel (vCPU 0
    housekeeping, the rest isolated), without those of the physical machine, in a form the
    experiment file takes as it is."""
    from lowtail.experiment import spec

    code, out, err = cli(capsys, "host", "plan", "--guest-vcpus", "3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cmdline"] == (
        "isolcpus=1-2 nohz_full=1-2 rcu_nocbs=1-2 rcu_nocb_poll irqaffinity=0 idle=poll tsc=reliable "
        "mce=ignore_ce audit=0 nmi_watchdog=0 skew_tick=1 nosoftlockup"
    )
    exp = spec.parse(
        f'[traffic]\nrates = ["2000pps"]\n[[dut]]\nname = "v"\nkind = "vm"\n{doc["experiment_file"]}\n', "e.toml"
    )
    (dut,) = exp.duts
    assert dut.options.guest_cmdline == doc["cmdline"] and dut.options.vcpus == 3
    code, out, err = cli(capsys, "host", "plan", "--guest-vcpus", "1")
    assert code == 2 and "at least 2 vCPUs" in err and len(err.strip().splitlines()) == 1


def test_plan_without_grub_file_keeps_the_running_parameters_and_drops_stale_ones(untuned):
    (untuned / "etc/default/grub").unlink()
    host = Host(SysRoot.open(untuned))
    from lowtail.host.plan import kernel_cmdline

    doc = kernel_cmdline(host, resolve_plan(host, "0", "1-3"))
    # root= and BOOT_IMAGE are GRUB's own; isolcpus/nohz_full are replaced; the misspelling goes.
    assert doc["kept"] == ["quiet"]
    assert doc["kept_from"] == "proc/cmdline"


def test_a_tuned_host_audited_from_its_plan_table_passes(tuned):
    """The plan's parameters, booted, are what the audit asks for: the tuned fixture runs
    exactly the planned command line."""
    host = Host(SysRoot.open(tuned))
    from lowtail.host.plan import kernel_cmdline

    planned = set(kernel_cmdline(host, resolve_plan(host, "0", "1-3"))["cmdline"].split())
    booted = set(host.cmdline.split())
    assert planned - booted == {"isolcpus=1-3"}  # booted with flags: isolcpus=domain,managed_irq,1-3
