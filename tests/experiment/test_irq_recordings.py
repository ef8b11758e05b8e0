"""Reading interrupt recordings made elsewhere (experiment/irq_recordings.py): the URLLC
studies' semicolon-separated cumulative counts and lowtail's own samples, against counts
known here — a CPU without a line, a counter that wraps at 32 bits, one that is reset — and
hostile text of every kind, which is either read into sane samples or refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from irq_files import COLUMNS, study_file  # noqa: E402

from lowtail.core.errors import UserError  # noqa: E402
from lowtail.experiment.irq_recordings import (  # noqa: E402
    COUNTER_WRAP,
    LOWTAIL_HEADER,
    RecordingError,
    parse_recording,
    read_recording,
)

T0 = 1_700_000_000_000_000_000
SECOND = 1_000_000_000


def _by_key(samples):
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for s in samples:
        out.setdefault((s.kind, s.cpu), []).append((s.t_ns, s.delta))
    return out


def test_a_study_recording_gives_each_periods_increments():
    """Guest-side shape: LOC 250 a second and IWI 83 or 84 on CPU 2, a device interrupt on
    CPU 1, CPU 3 without an IWI line: each increment at the end of its period, the empty
    column skipped and counted, the kinds named as lowtail names them."""
    iwi = [83, 84, 83] * 3
    text = study_file(
        {("LOC", 2): [250] * 9, ("IWI", 2): iwi, ("33:virtio0-input.0", 1): [0, 5, 0, 0, 7, 0, 0, 0, 1]},
        start={("LOC", 2): 123_456},
        missing={("IWI", 3)},
    )
    r = parse_recording(text, T0, SECOND)
    got = _by_key(r.samples)
    assert got[("LOC", 2)] == [(T0 + k * SECOND, 250) for k in range(1, 10)]
    assert [d for _, d in got[("IWI", 2)]] == iwi
    assert got[("33:virtio0-input.0", 1)] == [(T0 + 2 * SECOND, 5), (T0 + 5 * SECOND, 7), (T0 + 9 * SECOND, 1)]
    assert ("IWI", 3) not in got and r.empty_fields == 10
    assert r.rows == 10 and r.cpus == [1, 2, 3] and set(r.kinds) == {"LOC", "IWI", "33:virtio0-input.0"}
    assert all(s.interval_ns == SECOND for s in r.samples)
    assert r.wraps == 0 and r.resets == 0


def test_a_counter_that_wraps_is_unwrapped_and_one_reset_is_left_out():
    near_top = COUNTER_WRAP - 300
    text = study_file({("LOC", 0): [250] * 4}, start={("LOC", 0): near_top}, wrap_at=COUNTER_WRAP)
    r = parse_recording(text, T0, SECOND)
    assert [s.delta for s in r.samples] == [250] * 4 and r.wraps == 1
    # The host rebooted between the second and third sample: that period is unknown, not negative.
    reset = "LOC_Local_timer_interrupts_CPU0;CAL_Function_call_interrupts_CPU0\n1000;5\n1250;9\n40;1\n290;2\n"
    r = parse_recording(reset, T0, SECOND)
    assert [(s.kind, s.t_ns, s.delta) for s in r.samples] == [
        ("LOC", T0 + SECOND, 250),
        ("CAL", T0 + SECOND, 4),
        ("LOC", T0 + 3 * SECOND, 250),
        ("CAL", T0 + 3 * SECOND, 1),
    ]
    assert r.resets == 2 and r.wraps == 0


def test_lowtails_own_samples_are_read_as_they_are():
    text = (
        ",".join(LOWTAIL_HEADER)
        + "\n"
        + "\n".join(f"{T0 + k * 100_000_000},{cpu},LOC,{25 + cpu},100000000" for k in range(1, 4) for cpu in (0, 1))
    )
    r = parse_recording(text, 0, SECOND)
    assert r.shape == "lowtail" and r.period_ns == 100_000_000 and len(r.samples) == 6
    assert {(s.cpu, s.delta) for s in r.samples} == {(0, 25), (1, 26)}


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "empty"),
        ("LOC_Local_timer_interrupts_CPU0\n", "no row of counts"),
        ("time,cpu,value\n1,2,3\n", "neither a header"),
        ("LOC_Local_timer_interrupts_CPU0\n12\nx7\n", "line 3"),
        ("LOC_Local_timer_interrupts_CPU0;IWI_IRQ_work_interrupts_CPU0\n1;2;3\n", "3 fields"),
        ("LOC_Local_timer_interrupts_CPU0;LOC_Other_name_CPU0\n1;2\n", "appears twice"),
        ("LOC_Local_timer_interrupts_CPU0\n-5\n", "not a count"),
        ("LOC_Local_timer_interrupts_CPU0\n99999999999999999999999\n", "not a count"),
        (",".join(LOWTAIL_HEADER) + "\n1,2,LOC,3\n", "4 fields"),
        (",".join(LOWTAIL_HEADER) + "\n1,2,LOC,3,0\n", "positive"),
    ],
)
def test_what_is_not_a_recording_is_said_with_its_line(text, says):
    with pytest.raises(RecordingError, match=says):
        parse_recording(text, T0, SECOND)


def test_a_file_that_is_no_recording_names_the_file(tmp_path):
    binary = tmp_path / "irq.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match=str(binary)):
        read_recording(binary, T0, SECOND)
    with pytest.raises(UserError, match="is a directory"):
        read_recording(tmp_path, T0, SECOND)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from("LOCIW_0123456789;,-\n\r \tCPUabc\x00\x1b\u00e9"), max_size=400))
def test_hostile_text_is_read_sanely_or_refused(text):
    """Anything at all: a RecordingError in words, or samples every later step can trust."""
    try:
        r = parse_recording(text, T0, SECOND)
    except RecordingError as e:
        assert str(e) and "\n" not in str(e)
        return
    for s in r.samples:
        assert s.delta > 0 and 0 <= s.cpu <= 99_999 and s.interval_ns > 0
        assert s.kind.isprintable() and s.kind == s.kind.strip() and len(s.kind) <= 200


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(sorted(COLUMNS)), st.integers(0, 7)),
        st.tuples(st.integers(0, COUNTER_WRAP - 1), st.lists(st.integers(0, 100_000), min_size=1, max_size=12)),
        min_size=1,
        max_size=6,
    )
)
def test_every_increment_comes_back_across_wraps(counters):
    """Counters of any start (near the top of 32 bits too) printed as the kernel's unsigned
    ints: every period's increment comes back, unwrapped, at its period's end."""
    periods = max(len(v) for _, v in counters.values())
    increments = {k: v + [0] * (periods - len(v)) for k, (_, v) in counters.items()}
    text = study_file(increments, start={k: s for k, (s, _) in counters.items()}, wrap_at=COUNTER_WRAP)
    r = parse_recording(text, T0, SECOND)
    got = _by_key(r.samples)
    for key, inc in increments.items():
        expected = [(T0 + (i + 1) * SECOND, d) for i, d in enumerate(inc) if d]
        assert got.get(key, []) == expected, key
    assert r.resets == 0 and r.rows == periods + 1
