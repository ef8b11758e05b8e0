"""Known answers from the generator's ground truth: every capture format, compression,
encapsulation and id layout, with loss, loss bursts, duplicates, reordering, foreign
frames, skewed clocks, 32-bit wrap, trimming and truncation. The expected figures are
computed with numpy from the per-packet truth (analyze_support.expected_from_truth)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from analyze_support import analyze, assert_figures, expected_from_truth, synth

from lowtail import _native
from lowtail.core.errors import Failure

# A device with everything a run can show: jitter, interrupts, spikes, loss in bursts,
# duplicates, reordering, foreign frames on both sides. 1.5 s at 20 kpps: 0.5 s after
# the default 1 s warm-up trim.
BUSY = dict(
    packets=30_000,
    rate_pps=20_000,
    jitter_ns=400.0,
    irq_period_ns=4_000_000,
    irq_durations_ns=[5_500, 8_200],
    spike_probability=0.0005,
    spike_ns=40_000,
    loss=0.002,
    loss_burst=4,
    duplicate=0.003,
    reorder=0.004,
    reorder_delay_ns=120_000,
    foreign=0.01,
    seed=7,
)

FORMATS = [
    ("pcap-ns", [9]),
    ("pcap-us", [9]),
    ("pcap-ns-be", [9]),
    ("pcap-us-be", [9]),
    ("pcapng", [9]),
    ("pcapng-be", [9]),
    ("pcapng", [6]),
    ("pcapng", [12]),
    ("pcapng", [0x80 | 30]),
    ("pcapng-be", [9, 6, 0x80 | 20]),
]


@pytest.mark.parametrize("compression", ["none", "zstd", "gzip"])
@pytest.mark.parametrize("fmt,tsresol", FORMATS, ids=[f"{f}-{'+'.join(map(str, r))}" for f, r in FORMATS])
def test_every_format_and_compression(tmp_path, fmt, tsresol, compression):
    pair = synth(tmp_path, format=fmt, tsresol=tsresol, compression=compression, **BUSY)
    doc = analyze(pair.pre, pair.post)
    want = expected_from_truth(pair)
    assert want.counts["lost"] > 0 and want.counts["duplicates"] > 0 and want.counts["reordered"] > 0
    assert_figures(doc, want)
    assert doc["trim_ns"] == 1_000_000_000
    assert doc["pre"]["compression"] == compression
    assert doc["pre"]["format"] == {
        "pcap-ns": "pcap-ns",
        "pcap-us": "pcap-us",
        "pcap-ns-be": "pcap-ns",
        "pcap-us-be": "pcap-us",
    }.get(fmt, "pcapng")
    assert doc["warnings"] == []


@pytest.mark.parametrize("compression", ["none", "zstd", "gzip"])
@pytest.mark.parametrize("by_name", [True, False])
def test_moonsniff_records(tmp_path, compression, by_name):
    suffix = ".mscap" if by_name else ".bin"
    if compression != "none":
        suffix += ".zst" if compression == "zstd" else ".gz"
    spec = {**BUSY, "foreign": 0.0}
    pair = synth(tmp_path, suffix=suffix, format="moonsniff", id_width=4, compression=compression, **spec)
    doc = analyze(pair.pre, pair.post, moonsniff_records=not by_name)
    assert doc["pre"]["format"] == "moonsniff"
    assert_figures(doc, expected_from_truth(pair))


@pytest.mark.parametrize("vlan", [0, 1, 2], ids=["untagged", "802.1Q", "QinQ"])
@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_encapsulations(tmp_path, vlan, ipv6):
    pair = synth(tmp_path, vlan=vlan, ipv6=ipv6, frame_size=128, **BUSY)
    assert_figures(analyze(pair.pre, pair.post), expected_from_truth(pair))


@pytest.mark.parametrize("offset,width,big", [(0, 8, True), (6, 4, False), (13, 8, False), (2, 4, True)])
def test_id_layouts(tmp_path, offset, width, big):
    pair = synth(tmp_path, id_offset=offset, id_width=width, id_big_endian=big, frame_size=96, **BUSY)
    doc = analyze(pair.pre, pair.post, id_offset=offset, id_width=width, id_endian="big" if big else "little")
    assert_figures(doc, expected_from_truth(pair))


def test_moonsniff_id_format_in_pcap(tmp_path):
    """MoonGen's packets: u32 little-endian at payload offset 0 (`--id-format moonsniff`)."""
    pair = synth(tmp_path, id_offset=0, id_width=4, id_big_endian=False, **BUSY)
    assert_figures(analyze(pair.pre, pair.post, id_format="moonsniff"), expected_from_truth(pair))


@pytest.mark.parametrize("fmt", ["pcap-ns", "moonsniff"])
def test_32_bit_ids_wrap(tmp_path, fmt):
    """Ids cross 2^32 half-way through: unwrapped, matched, and exported as sent
    (counting on past the wrap)."""
    spec = {**BUSY, "foreign": 0.0, "first_id": 2**32 - 25_000}  # wraps after the 20 000 trimmed
    pair = synth(
        tmp_path,
        format=fmt,
        id_width=4,
        id_big_endian=False,
        suffix=".mscap" if fmt == "moonsniff" else ".pcap",
        **spec,
    )
    out = tmp_path / "series.parquet"
    doc = analyze(pair.pre, pair.post, id_width=4, id_endian="little", export=str(out))
    want = expected_from_truth(pair)
    assert_figures(doc, want)
    ids = pq.read_table(out).column("id").to_numpy()
    assert ids.min() < 2**32 < ids.max()
    np.testing.assert_array_equal(ids, want.series["id"])


def test_64_bit_ids_far_from_zero(tmp_path):
    pair = synth(tmp_path, first_id=2**63 + 12345, **BUSY)
    assert_figures(analyze(pair.pre, pair.post), expected_from_truth(pair))


@pytest.mark.parametrize("trim_s", [0.0, 0.25, 1.0, 1.4])
def test_warm_up_trim(tmp_path, trim_s):
    pair = synth(tmp_path, **BUSY)
    trim_ns = round(trim_s * 1e9)
    doc = analyze(pair.pre, pair.post, trim_ns=trim_ns)
    assert doc["trim_ns"] == trim_ns
    want = expected_from_truth(pair, trim_ns=trim_ns)
    assert_figures(doc, want)
    assert doc["trimmed_pre"] == BUSY["packets"] - want.counts["sent"]


def test_loss_bursts_are_counted_packet_by_packet(tmp_path):
    pair = synth(tmp_path, packets=40_000, rate_pps=20_000, loss=0.001, loss_burst=50, seed=3)
    want = expected_from_truth(pair)
    assert want.counts["lost"] >= 100
    assert_figures(analyze(pair.pre, pair.post), want)


def test_heavy_reordering(tmp_path):
    """Many packets overtaken at once (a long hold-back at a high rate)."""
    pair = synth(tmp_path, packets=30_000, rate_pps=100_000, reorder=0.05, reorder_delay_ns=200_000, seed=11)
    doc = analyze(pair.pre, pair.post, trim_ns=0)
    want = expected_from_truth(pair, trim_ns=0)
    assert want.counts["reordered"] > 1000
    assert_figures(doc, want)


def test_skewed_post_clock(tmp_path):
    """POST's clock runs a little behind: the negative latencies (a minority) are counted,
    warned about and kept out of the latency figures. (Nothing is overtaken here:
    reordering under a skewed clock is the next test.)"""
    spec = {**BUSY, "reorder": 0.0, "spike_probability": 0.0}
    pair = synth(tmp_path, post_clock_offset_ns=-3_500, **spec)
    doc = analyze(pair.pre, pair.post)
    want = expected_from_truth(pair)
    assert 0 < want.counts["negative"] < want.counts["received"] / 2
    assert_figures(doc, want)
    assert any("negative latency" in w for w in doc["warnings"])


# -110 µs: only the packets held back 120 µs keep a positive latency. -3 ms: every
# latency is negative.
@pytest.mark.parametrize("offset_ns", [-110_000, -3_000_000], ids=["held-back-positive", "all-negative"])
def test_mostly_negative_latencies_are_refused_as_swapped(tmp_path, offset_ns):
    """When the ground truth has most latencies negative, no figures of the rest are
    given: the analysis stops with SwappedCapturesError (PRE and POST swapped, or
    clocks far apart), whose message says how far."""
    pair = synth(tmp_path, post_clock_offset_ns=offset_ns, **BUSY)
    want = expected_from_truth(pair)
    assert want.counts["negative"] > want.counts["received"] / 2
    with pytest.raises(Failure, match="look swapped") as caught:
        analyze(pair.pre, pair.post)
    assert isinstance(caught.value.__cause__, _native.SwappedCapturesError)


def test_reordering_counted_in_arrival_order_under_clock_skew(tmp_path):
    """POST copies timestamped before their PRE packets (a minority: more would be
    refused as swapped) count as reordered by their order in POST (RFC 4737), not by
    when their PRE packet shows up; every other figure stays exact."""
    pair = synth(tmp_path, post_clock_offset_ns=-3_500, **BUSY)
    want = expected_from_truth(pair)
    assert want.counts["reordered"] > 0 and 0 < want.counts["negative"] < want.counts["received"] / 2
    assert_figures(analyze(pair.pre, pair.post), want)


@pytest.mark.parametrize("fmt,suffix", [("pcap-ns", ".pcap"), ("pcapng", ".pcapng"), ("moonsniff", ".mscap")])
def test_truncated_last_record(tmp_path, fmt, suffix):
    """A capture killed while writing: the torn last record is dropped with a warning,
    the analysis goes on, and its figures say they are partial (the capture was cut)."""
    spec = {**BUSY, "duplicate": 0.0, "foreign": 0.0}
    pair = synth(
        tmp_path,
        format=fmt,
        suffix=suffix,
        truncate_post_bytes=5,
        **({"id_width": 4} if fmt == "moonsniff" else {}),
        **spec,
    )
    doc = analyze(pair.pre, pair.post)
    lost = {pair.summary["truncated_id"]}
    assert_figures(doc, expected_from_truth(pair, lost_ids=lost))
    assert any("truncated" in w for w in doc["warnings"]), doc["warnings"]
    assert doc["partial"]


def test_export_is_the_matched_series_in_pre_order(tmp_path):
    pair = synth(tmp_path, **BUSY)
    out = tmp_path / "series.parquet"
    doc = analyze(pair.pre, pair.post, export=str(out))
    want = expected_from_truth(pair)
    t = pq.read_table(out)
    assert t.column_names == ["id", "pre_ts_ns", "post_ts_ns", "latency_ns", "flow"]
    assert doc["export_rows"] == t.num_rows == len(want.series["id"])
    for col in t.column_names:
        np.testing.assert_array_equal(t.column(col).to_numpy(), want.series[col], err_msg=col)
    assert np.all(np.diff(t.column("pre_ts_ns").to_numpy()) >= 0)
    assert not list(tmp_path.glob(".*partial"))


def test_worst_events_are_the_largest_latencies(tmp_path):
    pair = synth(tmp_path, **BUSY)
    doc = analyze(pair.pre, pair.post, worst=50)
    want = expected_from_truth(pair)
    worst = doc["worst"]
    assert len(worst) == 50
    top = np.sort(want.series["latency_ns"])[-50:]
    np.testing.assert_array_equal(np.sort([w["latency_ns"] for w in worst]), top)
    by_id = dict(zip(want.series["id"].tolist(), want.series["latency_ns"].tolist()))
    for w in worst:
        assert by_id[w["id"]] == w["latency_ns"]
    assert [w["pre_ts_ns"] for w in worst] == sorted(w["pre_ts_ns"] for w in worst)


def test_rates_and_hdr_distribution(tmp_path):
    pair = synth(tmp_path, **BUSY)
    doc = analyze(pair.pre, pair.post)
    want = expected_from_truth(pair)
    # every PRE packet with an id is counted per second, warm-up included
    assert sum(doc["pre"]["per_second"]) == BUSY["packets"]
    assert doc["pre"]["per_second"][0] == BUSY["rate_pps"]
    # the HDR distribution ends at the exact maximum's bucket and counts every sample
    rows = doc["percentiles"]
    assert rows[-1]["total_count"] == doc["latency_ns"]["samples"] == len(want.series["id"])
    assert abs(rows[-1]["value_ns"] - want.latency["max"]) <= want.latency["max"] / 500
    assert doc["hgrm"].lstrip().startswith("Value")
