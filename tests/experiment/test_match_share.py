"""`[traffic] match_share`: the option as a user types it, the packets it chooses by id (the
same ones in the generator, the analysis and the rule), and what a run makes of them — the
drops an IPS meant apart from loss, its counters checked against the marked packets."""

from __future__ import annotations

import math
import re
import string
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail import _native
from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.experiment import matching, spec
from lowtail.experiment.document import MatchingDocument, MatchLatency
from lowtail.report import tables
from lowtail.testbed.duts import suricata
from lowtail.verdict.judge import Cause, Verdict, unintended_loss

FILE = """\
[experiment]
duration = "1s"
calibrate = false
[traffic]
rates = ["10kpps"]
{line}
[[dut]]
name = "ips"
kind = "suricata"
rules = 10
"""


def parse(line: str) -> spec.Experiment:
    return spec.parse(FILE.format(line=line), "exp.toml")


# -- the option ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, max_value=1) | st.integers(min_value=0, max_value=1))
def test_a_share_from_0_to_1_is_taken_as_typed(share):
    exp = parse(f"match_share = {share!r}")
    (combo,) = exp.combinations()
    assert combo.traffic.match_share == float(share)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not 0 <= x <= 1)
    | st.integers().filter(lambda x: x not in (0, 1) and abs(x) < 2**63)
    | st.text(alphabet=string.ascii_letters + string.digits + " .%-", max_size=10).map(lambda t: f'"{t}"')
    | st.just("true")
    | st.just("[]")
)
def test_anything_else_is_one_line_naming_the_option(value):
    text = value if isinstance(value, str) else repr(value)
    with pytest.raises(UserError) as e:
        parse(f"match_share = {text}")
    message = str(e.value)
    assert "\n" not in message and message.startswith("exp.toml line 6: ")
    assert "match_share" in message, message


def test_a_list_is_an_axis_and_a_share_of_zero_keeps_the_runs_keys():
    exp = parse("match_share = [0, 0.1]")
    shares = [c.traffic.match_share for c in exp.combinations()]
    assert shares == [0.0, 0.1]
    plain = parse("").combinations()[0]
    zero, tenth = exp.combinations()
    assert zero.key == plain.key  # runs stored before match_share existed are resumed
    assert tenth.key != zero.key and "/m0.1/" in tenth.key


def test_the_generator_is_asked_for_the_share_only_when_there_is_one():
    from lowtail.experiment.measure import generator_argv
    from lowtail.testbed.cores import CoreRoles

    zero, quarter = parse("match_share = [0, 0.25]").combinations()
    plan = CoreRoles(housekeeping=0, generator=1, capture=0, dut=[0])

    def argv(traffic: spec.Traffic) -> list[str]:
        return generator_argv(
            "lowtail-gen", "a", traffic, 10, "02:00:00:00:00:01", "02:00:00:00:00:02", plan, None, "s"
        )

    assert "--match-share" not in argv(zero.traffic)
    share = argv(quarter.traffic)
    assert share[share.index("--match-share") + 1] == "0.25"


# -- the packets it chooses ----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0, max_value=1), st.integers(min_value=0, max_value=2**64 - 1), st.integers(0, 2000))
def test_the_mask_and_the_count_agree(share, first, count):
    ids = (np.arange(count, dtype=np.uint64) + np.uint64(first)) if first + count < 2**64 else None
    if ids is None:
        return
    mask = np.frombuffer(_native.match_marked(ids, share), dtype=np.uint8)
    assert mask.sum() == _native.match_count(first, count, share)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_a_larger_share_marks_every_packet_a_smaller_one_does(a, b):
    ids = np.arange(5000, dtype=np.uint64)
    small = np.frombuffer(_native.match_marked(ids, min(a, b)), dtype=np.uint8)
    large = np.frombuffer(_native.match_marked(ids, max(a, b)), dtype=np.uint8)
    assert not (small & ~large & 1).any()


def test_the_share_is_the_share_and_no_flow_gets_all_of_it():
    n, share = 1_000_000, 0.1
    marked = np.frombuffer(_native.match_marked(np.arange(n, dtype=np.uint64), share), dtype=np.uint8)
    sd = math.sqrt(n * share * (1 - share))
    assert abs(int(marked.sum()) - n * share) < 5 * sd
    for flow in range(10):  # ten flows round robin: each about a tenth of the marked packets
        assert abs(int(marked[flow::10].sum()) - n * share / 10) < 5 * sd / math.sqrt(10)
    assert _native.match_count(0, 1000, 0.0) == 0 and _native.match_count(7, 1000, 1.0) == 1000


@pytest.mark.parametrize("bad", [-0.01, 1.5, float("nan")])
def test_a_share_outside_0_to_1_is_refused_natively(bad):
    with pytest.raises(ValueError, match="from 0 to 1"):
        _native.match_count(0, 10, bad)


def test_the_generated_rule_set_ends_with_the_rule_on_the_marker():
    text = suricata.generate_rules(3, "drop", 53)
    last = text.splitlines()[-1]
    assert last.startswith("drop udp any any -> any 53 (")
    marker = "|" + " ".join(f"{b:02X}" for b in _native.MATCH_MARKER) + "|"
    assert f'content:"{marker}"; offset:{_native.MATCH_MARKER_OFFSET}; depth:6;' in last
    assert f"sid:{suricata.MARKER_SID};" in last
    sids = [int(m) for m in re.findall(r"sid:(\d+);", text)]
    assert len(set(sids)) == 3  # three rules: two that match nothing, the marker's; no id shared
    assert suricata.marker_rule_action({"program": "suricata", "rules": 3, "action": "drop"}) == "drop"
    assert suricata.generate_rules(0, "drop", 53) == ""
    for stats in (
        {"program": "suricata", "rules": "default", "action": "drop"},
        {"program": "suricata", "rules": 0, "action": "drop"},
        {"program": "lowtail-fwd"},
        {},
    ):
        assert suricata.marker_rule_action(stats) is None


@pytest.mark.skipif(not Path("/usr/bin/suricata").exists(), reason="no Suricata here")
def test_suricata_drops_exactly_the_marked_packets_of_a_capture(tmp_path):
    """The generated rule set against marked frames, offline (`suricata -r --simulate-ips`):
    Suricata's drop and alert counters equal the packets the share marks."""
    ids = np.arange(2000, dtype=np.uint64)
    mask = np.frombuffer(_native.match_marked(ids, 0.1), dtype=np.uint8)
    pcap = tmp_path / "marked.pcap"
    pcap.write_bytes(_pcap([_frame(int(i), bool(m)) for i, m in zip(ids, mask)]))
    (tmp_path / "gen.rules").write_text(suricata.generate_rules(32, "drop", 53))
    (tmp_path / "log").mkdir()
    done = subprocess.run(
        ["suricata", "-r", str(pcap), "--simulate-ips", "-S", str(tmp_path / "gen.rules"), "-l", str(tmp_path / "log"),
         "-k", "none"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stats = suricata.last_stats((tmp_path / "log" / "eve.json").read_text())
    assert stats is not None
    counted = suricata.counters(stats)
    assert counted["blocked"] == counted["alerts"] == int(mask.sum()) > 100
    assert counted["drop_reasons"] == {"rules": int(mask.sum())}


def _frame(packet_id: int, marked: bool) -> bytes:
    """A frame as lowtail-gen builds it: Ethernet, IPv4, UDP to port 53, the 8-byte id, then
    the marker (or zeros)."""
    import struct

    payload = struct.pack(">Q", packet_id) + (_native.MATCH_MARKER if marked else bytes(6)) + bytes(4)
    udp = struct.pack(">HHHH", 49152, 53, 8 + len(payload), 0) + payload
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, b"\n\0\0\1", b"\n\0\0\2"))
    total = sum(struct.unpack(">10H", bytes(ip)))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = struct.pack(">H", ~total & 0xFFFF)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + bytes(ip) + udp


def _pcap(frames: list[bytes]) -> bytes:
    import struct

    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        out.append(struct.pack("<IIII", 1000 + i // 1000, (i % 1000) * 1000, len(f), len(f)) + f)
    return b"".join(out)


# -- what a run makes of them --------------------------------------------------------------------


def _doc(**changes) -> MatchingDocument:
    empty = MatchLatency(samples=0, min=None, p50=None, p99=None, p99_9=None, max=None)
    doc = MatchingDocument(
        share=0.1, action="drop", generated=1000, matched_sent=900, matched_arrived=0, matched_lost=900,
        unmatched_sent=8100, unmatched_lost=0, intended_drops=900, unintended_loss=0, dut_alerts=1000,
        dut_blocked=1000, latency_ns={"matched": empty, "unmatched": empty},
    )  # fmt: skip
    doc.update(changes)  # type: ignore[typeddict-item]
    return doc


def test_counters_that_agree_say_nothing():
    assert matching.disagreements(_doc()) == ([], [])
    assert matching.disagreements(_doc(action="alert", dut_blocked=0)) == ([], [])
    assert matching.disagreements(_doc(action=None, dut_alerts=0, dut_blocked=0)) == ([], [])


def test_a_drop_rule_that_let_packets_through_or_blocked_others_is_invalid():
    invalid, _ = matching.disagreements(_doc(matched_arrived=3))
    assert invalid == ["3 of the 900 packets the drop rule matches came through"]
    invalid, degraded = matching.disagreements(_doc(dut_blocked=990, dut_alerts=990))
    assert "Suricata blocked 990 packets where its drop rule matches 1,000" in invalid[0]
    assert degraded == ["Suricata counted 990 alerts for the 1,000 packets its rule matches"]


def test_alerts_that_are_not_one_per_marked_packet_degrade_the_run():
    invalid, degraded = matching.disagreements(_doc(action="alert", dut_alerts=0, dut_blocked=0))
    assert invalid == [] and degraded == ["Suricata counted 0 alerts for the 1,000 packets its rule matches"]


def test_the_verdict_counts_only_the_loss_not_meant():
    verdict = Verdict(budget_ns=1_000_000)
    run = {"lost": 905, "traffic": {"matching": _doc(intended_drops=900)}}
    assert unintended_loss(run) == 5
    assert unintended_loss({"lost": 905, "traffic": {"flows": 1}}) == 905
    assert unintended_loss({"lost": None}) is None
    judged = verdict.judge_figures(10, 1000, unintended_loss(run), 9000)
    assert judged.cause == Cause.LOSS and judged.reason.startswith("5 of 9,000 packets lost")


def test_every_table_of_runs_says_the_loss_not_meant_with_the_drops_beside_it():
    """Before: the run tables and the certificate said "lost 905" of a run whose drop rule
    removed 900 packets as meant: the loss a customer signs must be the verdict's."""
    from lowtail.compare.certificate_page import _loss_text
    from lowtail.report.tables import run_loss

    run = {"lost": 905, "traffic": {"matching": _doc(intended_drops=900)}}
    assert run_loss(run) == "5 (+900 dropped as meant)"
    assert run_loss({"lost": 905, "traffic": {}}) == "905"
    assert run_loss({"lost": 0, "traffic": {"matching": _doc(intended_drops=0)}}) == "0"
    assert run_loss({"lost": None}) == "–"
    config = {"lost": 905, "intended_drops": 900, "sent": 9000}
    assert _loss_text(config) == "5 (0.05556 %) not meant; 900 (10 %) dropped by the rule set as meant"
    assert _loss_text(config | {"lost": 5, "intended_drops": 0}).startswith("5 (0.05556 %)")
    assert "meant" not in _loss_text(config | {"lost": 5, "intended_drops": 0})


def test_a_filter_that_dropped_every_matching_packet_compares_none():
    """The filter example's table said "not resolved (0 blocks)" for matching packets against
    the others, as if the run were too short: none of them arrived, as the rule meant."""
    unresolved = {"percentile": "p50", "blocks": 0, "level": 0.95, "called": "not resolved"}
    unresolved |= {"median_ns": None, "low_ns": None, "high_ns": None}
    doc = _doc(difference=[unresolved | {"percentile": k} for k in percentiles.MATCHING_PERCENTILES])
    header, rows = tables.matching_table([{"run_id": 1, "traffic": {"matching": doc}}]) or ([], [])
    compared = [cell for name, cell in zip(header, rows[0]) if name.startswith(("matched − other", "at p"))]
    assert compared == ["none arrived"] * len(percentiles.MATCHING_PERCENTILES)
    arrived = _doc(action="alert", matched_arrived=900, difference=doc["difference"])
    _, rows = tables.matching_table([{"run_id": 1, "traffic": {"matching": arrived}}]) or ([], [])
    assert rows[0][-1] == "not resolved (0 blocks)"


# -- matching packets against the others: the difference as called ------------------------------


def _queue(seed: int, packets: int, slower_ns: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A FIFO queue (Lindley: each packet waits for the one before) at load 0.4 with 1 ms
    stalls, 1 in 5,000 packets: latencies correlated in time, as a DuT's are. The packets
    marked at a share of 0.1 take `slower_ns` longer to serve (the rule's work); PRE times,
    latencies and the marks."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e9 / 20_000, packets)
    service = rng.exponential(20_000, packets)
    service[rng.random(packets) < 2e-4] += 1_000_000
    ids = (np.arange(packets) + int(rng.integers(0, 2**40))).astype(np.uint64)
    marked = np.frombuffer(_native.match_marked(ids, 0.1), dtype=np.uint8).astype(bool)
    service[marked] += slower_ns
    walk = np.cumsum(service - gaps)
    waiting = walk - np.minimum(np.minimum.accumulate(walk), 0)
    return np.cumsum(gaps).astype(np.int64), (waiting + service).astype(np.int64), marked


def _calls(runs: int, packets: int, key: str, slower_ns: int = 0) -> list[str]:
    return [matching.latency_difference(*_queue(seed, packets, slower_ns), key)["called"] for seed in range(runs)]


@pytest.mark.slow
def test_with_no_difference_few_runs_are_called_either_way():
    """A/A: the rule costs nothing, so every call of "slower" or "faster" is false. The
    sign-test interval over 20 blocks leaves out the median at most 4.1 % of the time; over
    150 runs (p50) and 50 larger ones (p99, resolved only from ~500 packets of each kind in a
    block), allowing about 2.5 binomial standard errors of sampling."""
    p50 = _calls(150, 40_000, "p50")
    assert sum(c in ("slower", "faster") for c in p50) <= 14, p50
    assert "not resolved" not in p50
    p99 = _calls(50, 200_000, "p99")
    assert sum(c in ("slower", "faster") for c in p99) <= 6, p99
    # too few packets above p99 in a block of the shorter runs: said, not guessed
    (small,) = _calls(1, 40_000, "p99")
    assert small == "not resolved"


def test_a_rule_that_costs_5_us_is_called_slower():
    """Power, and never the wrong way: 5 µs more service for the matching packets (a quarter of
    the mean) is called slower at p50 in every run of 20 000 packets a second for 2 s."""
    calls = _calls(20, 40_000, "p50", slower_ns=5_000)
    assert calls == ["slower"] * 20, calls
    d = matching.latency_difference(*_queue(0, 40_000, 5_000), "p50")
    assert d["low_ns"] is not None and 0 < d["low_ns"] <= d["median_ns"] <= d["high_ns"]
    assert tables.difference_text(d).startswith("slower by ")
