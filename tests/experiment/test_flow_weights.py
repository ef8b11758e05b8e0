"""`[traffic] flow_weights`: the option as a user types it (one weight per flow, whole numbers
the generator's schedule accepts), the runs' keys of experiments without it unchanged, and
the generator asked for the weights only when there are some. What the weights do to the
traffic is checked on synthetic pairs (tests/analyze/test_flows.py) and through Suricata
(tests/experiment/test_run_flows.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail._native import MAX_FLOW_WEIGHT
from lowtail.core.errors import UserError
from lowtail.experiment import spec

FILE = """\
[experiment]
duration = "1s"
calibrate = false
[traffic]
rates = ["10kpps"]
{lines}
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
"""


def parse(lines: str) -> spec.Experiment:
    return spec.parse(FILE.format(lines=lines), "exp.toml")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=MAX_FLOW_WEIGHT), min_size=1, max_size=40))
def test_one_weight_per_flow_is_taken_as_typed(weights: list[int]) -> None:
    exp = parse(f"flows = {len(weights)}\nflow_weights = {weights}")
    (combo,) = exp.combinations()
    assert combo.traffic.flow_weights == tuple(weights)
    assert combo.traffic.flows == len(weights)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=6).filter(
        lambda ws: any(not 1 <= w <= MAX_FLOW_WEIGHT for w in ws)
    )
    | st.just([])
    | st.just(["1", "2"])
    | st.just([1.5, 2])
    | st.just("4")
)
def test_anything_else_is_one_line_naming_the_option(weights: object) -> None:
    flows = len(weights) if isinstance(weights, list) and weights else 2
    text = str(weights).replace("'", '"')
    with pytest.raises(UserError) as e:
        parse(f"flows = {flows}\nflow_weights = {text}")
    message = str(e.value)
    assert "\n" not in message and message.startswith("exp.toml line 7: "), message
    assert "flow_weights" in message or "flow weight" in message, message


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ("flows = 3\nflow_weights = [1, 2]", "flow_weights has 2 weights for 3 flows: one per flow"),
        ("flows = [2, 3]\nflow_weights = [1, 2]", "flow_weights needs one number of flows, not a sweep"),
        ("flow_weights = [2]\nflows = 2", "flow_weights has 1 weights for 2 flows"),
        (f"flows = 101\nflow_weights = {[MAX_FLOW_WEIGHT] * 101}", "sum to"),
    ],
)
def test_weights_that_do_not_fit_the_flows_say_so(lines: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        parse(lines)


def test_runs_without_weights_keep_their_keys_and_weighted_ones_are_told_apart() -> None:
    (plain,) = parse("flows = 3").combinations()
    (even,) = parse("flows = 3\nflow_weights = [2, 2, 2]").combinations()
    (weighted,) = parse("flows = 3\nflow_weights = [8, 1, 1]").combinations()
    assert plain.traffic.flow_weights == () and "flow_weights" not in plain.key
    assert "/f3/" in plain.key and "/f3w/" in weighted.key and weighted.key != even.key != plain.key


def test_the_generator_is_asked_for_the_weights_only_when_there_are_some() -> None:
    from lowtail.experiment.measure import generator_argv
    from lowtail.testbed.cores import CoreRoles

    plan = CoreRoles(housekeeping=0, generator=1, capture=0, dut=[0])

    def argv(lines: str) -> list[str]:
        (combo,) = parse(lines).combinations()
        return generator_argv(
            "lowtail-gen", "a", combo.traffic, 10, "02:00:00:00:00:01", "02:00:00:00:00:02", plan, None, "s"
        )

    assert "--flow-weights" not in argv("flows = 3")
    weighted = argv("flows = 3\nflow_weights = [8, 1, 1]")
    assert weighted[weighted.index("--flow-weights") + 1] == "8,1,1"
