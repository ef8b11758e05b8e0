"""A container that is one (own namespaces, exclusive cpuset, reserved memory: seen in /proc
and the cgroup files), the nftables rule sets and Open vSwitch, on a real testbed; and the
cgroup v2 side of the container on a fixture hierarchy (this host mounts cgroup v1)."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest
from tb_helpers import needs_root, resources_of, tagged_processes

from lowtail.host.sysroot import parse_cpulist
from lowtail.testbed import containment
from lowtail.testbed.container import create_container_cgroups
from lowtail.testbed.containment import CpusetHierarchy, MemoryHierarchy, cpuset_hierarchy
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import KINDS, make_dut
from lowtail.testbed.duts.nftables import generate_ruleset
from lowtail.testbed.probe import wait_forwarding
from lowtail.testbed.topology import NamespacesTestbed as SoftTestbed

PLAN = CoreRoles.for_host()


def forwards(tb: SoftTestbed, dut, timeout: float = 15.0) -> bool:
    took = wait_forwarding(
        tb.lg_ns, tb.tx, tb.rx, tb.macs[tb.tx], tb.macs[tb.rx], timeout, still_starting=lambda: dut.failure() is None
    )
    return took is not None


@pytest.mark.root
@needs_root
@pytest.mark.skipif(cpuset_hierarchy() is None, reason="no cgroup cpuset controller on this host")
def test_a_container_has_its_own_namespaces_an_exclusive_cpuset_and_reserved_memory(tmp_path):
    core = CoreRoles.available()[-1]
    config = KINDS["lowtail-fwd"].expand({"containment": "container", "cpus": [core], "memory_reservation": 64})[0]
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("lowtail-fwd", "c", config)
        dut.start(tb, PLAN)
        assert forwards(tb, dut)
        c = dut.containment
        inner = c["namespaces"]["contained_pid"]
        # The forwarder is PID 1 of its own PID namespace, with its own mount and UTS namespaces
        # and the testbed's network namespace, none of them lowtail's.
        status = Path(f"/proc/{inner}/status").read_text()
        assert re.search(r"^NSpid:\s+\d+\s+1$", status, re.MULTILINE), status
        assert "lowtail-fwd" in Path(f"/proc/{inner}/cmdline").read_text()
        for ns in ("pid", "mnt", "uts", "net"):
            theirs, ours = os.readlink(f"/proc/{inner}/ns/{ns}"), os.readlink(f"/proc/self/ns/{ns}")
            assert theirs != ours and c["namespaces"][ns] == theirs, ns
        assert sorted(c["namespaces"]["own"]) == ["mnt", "net", "pid", "uts"]
        assert os.stat(f"/proc/{inner}/ns/net").st_ino == os.stat(f"/run/netns/{tb.dut_ns}").st_ino
        # Its cgroups, as the kernel shows them.
        cpuset = Path(c["cpuset"]["path"])
        assert str(inner) in (cpuset / "cgroup.procs").read_text().split()
        assert set(parse_cpulist(Status(inner).cpus_allowed)) == {core}
        if c["cgroup_version"] == 1:
            assert (cpuset / "cpuset.cpu_exclusive").read_text().strip() == "1"
            assert (cpuset / "cpuset.sched_load_balance").read_text().strip() == "0"
            assert set(parse_cpulist((cpuset / "cpuset.cpus").read_text())) == {core}
            memory = Path(c["memory"]["path"])
            assert (memory / "memory.soft_limit_in_bytes").read_text().strip() == str(64 << 20)
            assert str(inner) in (memory / "cgroup.procs").read_text().split()
            assert c["memory"]["bytes"] == 64 << 20
        else:
            assert (cpuset / "cpuset.cpus.partition").read_text().split()[0] in ("isolated", "root")
            assert (cpuset / "memory.min").read_text().strip() == str(64 << 20)
        stats = dut.stop()
        assert stats["forwarded"] >= 1  # it stopped on SIGINT as PID 1 and wrote its statistics
        cgroups = [cpuset, Path(c["memory"]["path"])]
    assert not any(p.exists() for p in cgroups)
    assert resources_of(os.getpid()) == []


class Status:
    def __init__(self, pid: int):
        self.text = Path(f"/proc/{pid}/status").read_text()

    @property
    def cpus_allowed(self) -> str:
        return self.text.split("Cpus_allowed_list:")[1].split()[0]


def test_the_cgroup_v2_container_is_an_isolated_partition_with_memory_min(tmp_path):
    """cgroup v2 on a fixture hierarchy: the files a v2 kernel would get."""
    root = tmp_path / "cgroup2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cpuset.cpus.effective").write_text("0-3\n")
    (root / "cpuset.mems.effective").write_text("0\n")
    registered: list[Path] = []
    paths, applied = create_container_cgroups(
        "lt1x0001",
        [2, 3],
        128 << 20,
        register=registered.append,
        cpuset=CpusetHierarchy(2, root),
        memory=MemoryHierarchy(2, root, root),
    )
    group = root / "lowtail-lt1x0001"
    assert paths == registered == [group]  # one cgroup holds both controllers in v2
    assert (group / "cpuset.cpus").read_text() == "2,3"
    assert (group / "cpuset.mems").read_text() == "0"
    assert (group / "cpuset.cpus.partition").read_text() == "isolated"
    assert (group / "memory.min").read_text() == str(128 << 20)
    assert applied["cpuset"]["partition"] == "isolated" and applied["cpuset"]["load_balancing"] == "off"
    assert applied["memory"] == {
        "reserved": True,
        "file": "memory.min",
        "bytes": 128 << 20,
        "path": str(group),
        "cgroup_version": 2,
    }


def test_the_memory_hierarchy_is_found_in_v1_and_v2_mount_tables(tmp_path):
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset memory\n")
    found = containment.memory_hierarchy(f"cgroup2 {v2} cgroup2 rw 0 0\n", "0::/user.slice\n")
    assert found == MemoryHierarchy(2, v2, v2)
    v1 = tmp_path / "memory"
    found = containment.memory_hierarchy(
        f"cgroup {v1} cgroup rw,memory 0 0\n", "4:memory:/process_api/abc\n3:cpuset:/\n"
    )
    assert found == MemoryHierarchy(1, v1, v1 / "process_api/abc")


def test_generated_rule_sets_have_the_rules_they_say():
    ports = generate_ruleset(1000, "ports", 53)
    assert ports.count(" drop\n") == 1000 and "dport 53 " not in ports
    match = generate_ruleset(3, "match", 5353)
    assert match.count("udp dport 5353 counter\n") == 3
    addresses = generate_ruleset(500, "set", 53)
    assert addresses.count("ip saddr @blocked drop") == 1 and addresses.count("100.64.") == 500
    assert "198.18." not in addresses and "198.19." not in addresses  # never the test traffic's


@pytest.mark.root
@needs_root
@pytest.mark.parametrize("rules", [1, 1000])
def test_nftables_forwards_through_its_rules(tmp_path, rules):
    config = KINDS["nftables"].expand({"rules": rules, "rule_kind": "match"})[0]
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("nftables", "fw", config)
        dut.start(tb, PLAN)
        assert forwards(tb, dut)
        stats = dut.stop()
    assert stats["rules"] == rules and stats["passed"] >= 1
    assert (tmp_path / "ruleset.nft").read_text().count("counter\n") == rules
    assert resources_of(os.getpid()) == []


@pytest.mark.root
@needs_root
def test_open_vswitch_forwards_with_its_own_daemons_and_leaves_nothing(tmp_path):
    KINDS["ovs"].check_available()
    with SoftTestbed(tmp_path) as tb:
        dut = make_dut("ovs", "sw", KINDS["ovs"].expand({})[0])
        dut.start(tb, PLAN)
        assert forwards(tb, dut, timeout=30)
        own = Path(f"/run/lowtail/{tb.tag}/ovs")
        assert (own / "db.sock").exists() and (own / "br0.mgmt").exists()
        daemons = {cmd.split()[0].rsplit("/", 1)[-1] for _, cmd in tagged_processes(tb.tag) if "ovs" in cmd}
        assert {"ovsdb-server", "ovs-vswitchd"} <= daemons
        assert dut.containment["scheduling"] == "SCHED_FIFO 45"
        # Its sockets are its own: the host's OVS directory is untouched.
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(own / "db.sock"))
        stats = dut.stop()
    assert stats["flow_packets"] and stats["flow_packets"][0] >= 1
    assert tagged_processes(tb.tag) == []
    assert resources_of(os.getpid()) == []
