"""[cores]: the roles an experiment file pins reach the run's core plan as the file wrote them
(a core number each, the DuT a list of them), and every role it leaves out keeps the plan's
own core; the plan keeps its keys in the order it is stored with."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail.experiment import spec
from lowtail.host.plan import role_cores
from lowtail.testbed.cores import CoreRoles

AVAILABLE = sorted(CoreRoles.available())
_core = st.sampled_from(AVAILABLE)
_tables = st.fixed_dictionaries(
    {},
    optional={
        "generator": _core,
        "capture": _core,
        "housekeeping": _core,
        "dut": st.lists(_core, min_size=1, max_size=2),
    },
)
_host_cpus = st.lists(st.integers(0, 63), min_size=1, max_size=6, unique=True).map(sorted)


def _file(table: dict[str, object]) -> str:
    lines = [f"{role} = {value}" for role, value in table.items()]
    return "[traffic]\nrates = ['1000pps']\n[cores]\n" + "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(_tables, _host_cpus)
def test_the_cores_a_file_pins_reach_the_plan(table: dict[str, object], cpus: list[int]) -> None:
    exp = spec.parse(_file(table), "cores.toml")
    assert exp.cores == table
    planned = role_cores(cpus)
    plan = role_cores(cpus, exp.cores)
    assert list(plan) == ["housekeeping", "generator", "capture", "dut"]
    assert plan == {role: table.get(role, planned[role]) for role in planned}
