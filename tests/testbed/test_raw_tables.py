"""The tables of an experiment file the testbed reads before anything checks them — `[testbed]`
(testbed/wiring.py) and a `[[dut]]` table's options (`Dut.expand`) — whatever they hold: the
wiring or the configurations they declare, or the one error that names the key at fault,
never another exception (mypy proves the checks narrow every value before it is used; these
tests hold the same of the values TOML can hold)."""

from __future__ import annotations

import os
import string
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lowtail.testbed import wiring
from lowtail.testbed.duts import KINDS

# LOWTAIL_HYPOTHESIS_EXAMPLES raises it (as for tests/experiment/test_hostile_input.py); 30 keeps
# each test under 1.5 s, in the fast set.
EXAMPLES = int(os.environ.get("LOWTAIL_HYPOTHESIS_EXAMPLES", "30"))

_scalars = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.text(max_size=12)
    | st.sampled_from(["eth1", "eth1.10", "02:00:00:00:00:01", "10s", "root@host", "/var/tmp/x", "~nobody-here/x"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(string.ascii_letters, max_size=8), inner),
    max_leaves=12,
)
_TESTBED_KEYS = [
    *["kind", "generator", "pre", "post", "dst_mac", "probe", "settle", "vlans", "identity", "known_hosts"],
    *["ssh_config", "connect_timeout", "loadgen", "timestamper", "dut", "ssh", "interface", "workdir", "post_ssh"],
]
_kinds = st.sampled_from(wiring.KINDS)
_roles = st.dictionaries(st.sampled_from(["ssh", "interface", "pre", "post", "post_ssh", "workdir"]), _values)
_tables = st.builds(
    lambda kind, rest, roles: {"kind": kind, **rest, **roles},
    _kinds,
    st.dictionaries(st.sampled_from(_TESTBED_KEYS), _values, max_size=6),
    st.dictionaries(st.sampled_from(["loadgen", "timestamper", "dut"]), _roles | _values, max_size=3),
)


_HOSTS = {
    "loadgen": {"ssh": "root@a", "interface": "eth1"},
    "timestamper": {"ssh": "root@b", "pre": "e1", "post": "e2"},
}
# A file name in the home of a user this host does not have: Path.expanduser's RuntimeError
# ended `lowtail run` with an internal error (exit 70) before the testbed read names through
# `system.home_path`.
NO_SUCH_HOME = "~nobody-here-at-all/file"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example({"kind": "hosts", "identity": NO_SUCH_HOME, **_HOSTS})
@example({"kind": "interfaces", "generator": "eth1", "pre": "eth1", "post": "eth2", "vlans": [10, 10]})
@given(_tables | _values)
def test_any_testbed_table_is_a_wiring_or_a_wiring_error(table):
    try:
        found = wiring.parse(table, Path("/nonexistent"))
    except wiring.WiringError as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert isinstance(found, wiring.Namespaces | wiring.Interfaces | wiring.Hosts)


_options = st.sampled_from(sorted({name for kind in KINDS.values() for name in kind.options}))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example("suricata", {"rules": NO_SUCH_HOME})
@example("nftables", {"ruleset": NO_SUCH_HOME})
@example("vm", {"guest_kernel": NO_SUCH_HOME})
# `cpus = [true]` passed the option's check (Python counts True as 1) and failed the struct's:
# an internal error (exit 70) before CpusOption refused booleans.
@example("lowtail-fwd", {"cpus": [[0, 1], [True]], "batch": [1, 2]})
@given(st.sampled_from(sorted(KINDS)), st.dictionaries(_options, _values, max_size=4))
def test_any_dut_table_is_its_configurations_or_a_value_error(kind, table):
    try:
        configs = KINDS[kind].expand(table)
    except ValueError as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert configs and all(isinstance(c, KINDS[kind].Options) for c in configs)
