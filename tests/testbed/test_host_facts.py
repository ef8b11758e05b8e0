"""A remote host's facts (testbed/hosts/facts.py): every line the facts script says lands in
a field of HostFacts, so that a fact added to the script cannot be dropped by the parser."""

from __future__ import annotations

import dataclasses
import re

from lowtail.testbed.hosts import facts


def test_every_fact_the_script_says_has_a_field():
    said = set(re.findall(r"\bsay ([a-z_]+) ", facts._SCRIPT))
    fields = {f.name for f in dataclasses.fields(facts.HostFacts)}
    assert said and said <= fields, f"said but not kept: {sorted(said - fields)}"


def test_the_script_output_is_read_into_its_fields():
    text = (
        "hostname=dut1\nboot_id=b-1\nkernel=6.1.0\ncpus_online=0-7\ncpus_available=2-5\nisolated=4-5\n"
        "capeff=0000000000803000\nuser=root\nif.eth1.flags=0x1003\nif.eth1.address=02:00:00:00:00:01\n"
        "ptp.ptp0=mlx5_ptp\ntime_daemons=chronyd ptp4l \ntool.ip=/usr/sbin/ip\ntool.tc=\nworkdir_free_kib=1024\n"
        "a line without an equals sign\n"
    )
    found = facts.parse_facts(text)
    assert found.hostname == "dut1" and found.boot_id == "b-1" and found.workdir_error is None
    assert found.interfaces == {"eth1": {"flags": "0x1003", "address": "02:00:00:00:00:01"}}
    assert found.ptp_clocks == {"ptp0": "mlx5_ptp"} and found.tools == {"ip": "/usr/sbin/ip", "tc": ""}
    assert facts.cpus(found) == [2, 3, 4, 5] and facts.isolated(found) == {4, 5}
    assert facts.missing_capabilities(found, "the DuT") == []
    summary = facts.summary(found)
    assert summary["cpus_online"] == 8 and summary["time_daemons"] == ["chronyd", "ptp4l"]
