"""`chain = [...]` in the experiment file: a chain of [[dut]] tables run in sequence, each hop
keeping its kind's options; every mistake one line naming the file and the line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail.core.errors import UserError
from lowtail.experiment import spec
from lowtail.testbed.document import options_json

HOPS = """
[experiment]
calibrate = false
[traffic]
rates = ["10kpps"]
[[dut]]
name = "fw"
kind = "nftables"
rules = 10
[[dut]]
name = "ips"
kind = "suricata"
rules = "none"
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = [0, 2000]
"""


def chain_file(chain: str, duts: str = HOPS) -> str:
    return f"chain = {chain}\n{duts}"


def error_of(text: str) -> str:
    with pytest.raises(UserError) as e:
        spec.parse(text, "exp.toml")
    message = str(e.value)
    assert "\n" not in message
    return message


def test_a_chain_runs_its_duts_in_order_each_with_its_own_options():
    exp = spec.parse(chain_file('["fw", "ips", "fwd"]'), "exp.toml")
    # fwd sweeps over two values: two chains, each hop one configuration.
    assert [d.name for d in exp.duts] == ["fw+ips+fwd", "fw+ips+fwd"]
    first, second = exp.duts
    assert first.kind == spec.CHAIN
    assert [(h.name, h.kind) for h in first.hops] == [("fw", "nftables"), ("ips", "suricata"), ("fwd", "lowtail-fwd")]
    assert first.hops[0].options.rules == 10
    assert [c.hops[2].options.work_ns for c in exp.duts] == [0, 2000]
    assert options_json(first.options)["hops"][1] == {
        "name": "ips",
        "kind": "suricata",
        "options": options_json(first.hops[1].options),
    }
    # The configurations are told apart: the sweep resumes each of them.
    keys = {c.key for c in exp.combinations()}
    assert len(keys) == 2
    assert first.parts == first.hops and exp.duts[0].hops[0].parts == (first.hops[0],)


def test_the_order_of_the_chain_is_the_order_traffic_passes():
    exp = spec.parse(chain_file('["fwd", "fw", "ips"]'), "exp.toml")
    assert [h.name for h in exp.duts[0].hops] == ["fwd", "fw", "ips"]


def test_an_unknown_name_says_which_were_declared_and_the_closest():
    message = error_of(chain_file('["fw", "isp", "fwd"]'))
    assert message.startswith("exp.toml line 1: chain names 'isp', which no [[dut]] declares (did you mean 'ips'?")
    assert "declared: 'fw', 'ips', 'fwd'" in message


def test_a_chain_of_one_is_refused():
    message = error_of(chain_file('["fw"]', HOPS.split('[[dut]]\nname = "ips"')[0]))
    assert "a chain needs at least two DuTs (this one has 1)" in message


def test_a_repeated_name_is_refused():
    message = error_of(chain_file('["fw", "ips", "fw", "fwd"]'))
    assert "chain names 'fw' 2 times: each hop is a DuT of its own" in message


def test_a_declared_dut_left_out_of_the_chain_is_refused():
    message = error_of(chain_file('["fw", "ips"]'))
    assert "[[dut]] 'fwd' is not in the chain" in message


def test_a_chain_is_a_list_of_names():
    assert "chain" in error_of(chain_file('"fw"'))
    assert "chain" in error_of(chain_file("[1, 2]"))


def test_a_chain_under_a_table_is_not_a_chain():
    text = HOPS.replace("[experiment]\n", '[experiment]\nchain = ["fw", "ips", "fwd"]\n')
    assert "chain" in error_of(text)


WIRED = """
[experiment]
name = "wired"
[traffic]
rates = ["10kpps"]
[testbed]
kind = "interfaces"
generator = "eth1"
pre = "eth1"
post = "eth1"
{vlans}
[[dut]]
name = "a"
kind = "kernel-mirred"
interfaces = ["eth2", "eth2"]
[[dut]]
name = "b"
kind = "lowtail-fwd"
interfaces = ["eth1", "eth1"]
"""


def test_a_chain_on_real_wiring_has_one_vlan_per_link():
    exp = spec.parse(chain_file('["a", "b"]', WIRED.format(vlans="vlans = [10, 11, 12]")), "exp.toml")
    assert exp.testbed.vlans == (10, 11, 12)
    [chain] = exp.duts
    assert [h.interfaces for h in chain.hops] == [("eth2", "eth2"), ("eth1", "eth1")]


@pytest.mark.parametrize(
    ("vlans", "says"),
    [
        ("", "a chain on real wiring has one VLAN id per link over one physical loop: [testbed] vlans = [...] with 3"),
        ("vlans = [10, 11]", "vlans lists 2 ids: a chain of 2 DuTs has 3 links, one VLAN id each"),
        ("vlans = [10, 11, 10]", "vlans: VLAN 10 is given twice"),
        ("vlans = [10, 4095, 12]", "vlans: 4095 is not a VLAN id"),
        ("vlans = 10", "vlans takes one VLAN id per link"),
    ],
)
def test_a_chain_on_real_wiring_without_the_right_vlans_is_refused(vlans, says):
    assert says in error_of(chain_file('["a", "b"]', WIRED.format(vlans=vlans)))


def test_one_dut_on_a_vlan_loop_has_two_links_and_names_that_fit():
    one = WIRED.format(vlans="vlans = [10, 11, 12]").split('[[dut]]\nname = "b"')[0]
    assert "vlans lists 3 ids: one DuT has two links (PRE, POST)" in error_of(one)
    long = WIRED.format(vlans="vlans = [1000, 1001]").split('[[dut]]\nname = "b"')[0].replace('"eth2"', '"enp0s31f6xx"')
    assert "enp0s31f6xx.1000 would be longer than 15 characters" in error_of(long)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), max_size=6))
def test_any_chain_of_names_is_read_or_refused_in_one_line(names):
    import json

    text = chain_file(json.dumps(names))
    try:
        exp = spec.parse(text, "exp.toml")
    except UserError as e:
        assert "\n" not in str(e)
        return
    assert [h.name for h in exp.duts[0].hops] == names


def test_the_chain_example_is_a_chain_of_a_firewall_an_ips_and_a_forwarder():
    exp = spec.parse(spec.example_text("chain"), "chain.toml")
    assert "chain" in spec.example_names()
    chains = [d for d in exp.duts if d.kind == spec.CHAIN]
    assert chains and all([h.kind for h in d.hops] == ["nftables", "suricata", "lowtail-fwd"] for d in chains)
    assert exp.calibrate and exp.verdict.budget_ns == 1_000_000


def test_each_link_of_a_vlan_loop_gets_its_sub_interfaces(tmp_path):
    """HVNet's layout as the interfaces testbed lays it out (before making anything): the
    generator and PRE on the first VLAN, POST on the last, hop i between links i-1 and i, and
    the links between hops stamped on PRE's end of the loop."""
    from lowtail.testbed.interfaces import InterfacesTestbed

    exp = spec.parse(chain_file('["a", "b"]', WIRED.format(vlans="vlans = [10, 11, 12]")), "exp.toml")
    [chain] = exp.duts
    tb = InterfacesTestbed(tmp_path, exp.testbed, None, [h.interfaces for h in chain.hops])
    assert tb.points == {"generator": "eth1.10", "pre": "eth1.10", "post": "eth1.12"}
    assert tb.link_names == ["eth1.11"]
    assert tb.hop_interfaces == [("eth2.10", "eth2.11"), ("eth1.11", "eth1.12")]
    assert tb.vlan_links == {
        "eth1.10": ("eth1", 10),
        "eth1.12": ("eth1", 12),
        "eth1.11": ("eth1", 11),
        "eth2.10": ("eth2", 10),
        "eth2.11": ("eth2", 11),
    }
    hop = tb.hop(1, "b")
    assert (hop.dut_ns, hop.dut_in, hop.dut_out, hop.kind) == (None, "eth1.11", "eth1.12", "interfaces")


def test_testbed_clean_knows_a_chains_namespaces_and_cgroups():
    """A killed chain run leaves <tag>-h1 … and lowtail-<tag>-h2: `lowtail testbed clean` finds
    them by their owner's tag, as it finds a lone DuT's."""
    from lowtail.testbed.registry import CGROUP_PATTERN, NETNS_PATTERN, hop_tag, netns_name

    tag = "lt123x0abc"
    for side in ("lg", "dut", "h1", "h12"):
        match = NETNS_PATTERN.match(netns_name(tag, side))
        assert match and match.group(1) == tag
    for name in (tag, hop_tag(tag, 1)):
        match = CGROUP_PATTERN.match(f"lowtail-{name}")
        assert match and match.group(1) == tag
    assert NETNS_PATTERN.match(f"{tag}-hx") is None


def test_runs_whose_options_hold_tables_in_lists_have_axes():
    """A chain's `hops` option is a list of tables: reading the runs' axes raised
    "unhashable type: 'dict'" (an internal error after a chain's runs were stored)."""
    from lowtail.store import axes

    exp = spec.parse(chain_file('["fw", "ips", "fwd"]'), "exp.toml")
    rows = [
        {"dut_name": c.name, "dut_kind": c.kind, "dut_config": options_json(c.options), "rate_pps": 10_000, "run_id": i}
        for i, c in enumerate(exp.duts)
    ]
    varying = [a.name for a in axes.varying(rows)]
    assert any("hops" in name for name in varying)
