"""Known answers from captures crafted byte by byte (craft.py), so the readers are not
only checked against lowtail's own writers: pcap in both magics and byte orders, pcapng
with several sections, interfaces, resolutions and simple packet blocks, MoonSniff
records, VLAN stacks, IPv6 extension headers, foreign and snapped frames."""

from __future__ import annotations

import gzip
import shutil
import subprocess

import craft
import numpy as np
import pytest
from analyze_support import analyze, latency_summary, rfc4737_reordered

T0 = 1_700_000_000_123_456_000  # a whole microsecond, so µs captures keep it exactly
GAP = 10_000  # 100 kpps


def scenario(n: int = 40, seed: int = 5):
    """PRE: n packets 10 µs apart, ids 100.. . POST: a fate per packet (lost, latency,
    duplicated), sorted by departure time. Latencies are whole µs, so µs captures
    represent them exactly."""
    rng = np.random.default_rng(seed)
    pre = [(T0 + k * GAP, 100 + k) for k in range(n)]
    post = []
    fates = []
    for k, (ts, pid) in enumerate(pre):
        lost = k in (3, 17, 18, 19)  # a single loss and a burst of three
        latency = int(rng.integers(2, 9)) * 1000 + (25_000 if k in (7, 30) else 0)  # two held back: reordered
        dup = k in (11, 25)
        fates.append((lost, latency, dup))
        if not lost:
            post.append((ts + latency, pid))
            if dup:
                post.append((ts + latency + 1000, pid))
    post.sort(key=lambda e: e[0])
    return pre, post, fates


def expected(pre, post, fates):
    lat = np.array([f[1] for f in fates if not f[0]])
    pos = {pid: k for k, (_, pid) in enumerate(pre)}
    first = {}
    for ts, pid in post:
        first.setdefault(pid, ts)
    arrival = [pos[pid] for pid, ts in sorted(first.items(), key=lambda kv: (kv[1], pos[kv[0]]))]
    counts = {
        "sent": len(pre),
        "received": len(first),
        "lost": sum(f[0] for f in fates),
        "duplicates": len(post) - len(first),
        "reordered": rfc4737_reordered(np.array(arrival)),
        "negative": 0,
    }
    return counts, latency_summary(lat)


def check(doc, counts, lat, foreign=0):
    assert {k: doc[k] for k in counts} == counts
    assert doc["foreign"] == foreign
    for key, value in lat.items():
        if key == "mean":
            assert doc["latency_ns"]["mean"] == pytest.approx(value)
        else:
            assert doc["latency_ns"][key] == value, key


def frames(events, **kw):
    return [(ts, craft.udp_frame(pid, **kw)) for ts, pid in events]


@pytest.mark.parametrize("nanos", [True, False], ids=["ns", "us"])
@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
def test_pcap_magics_and_byte_orders(tmp_path, nanos, big):
    pre, post, fates = scenario()
    (tmp_path / "pre.pcap").write_bytes(craft.pcap(frames(pre), nanos=nanos, big=big))
    (tmp_path / "post.pcap").write_bytes(craft.pcap(frames(post), nanos=nanos, big=big))
    counts, lat = expected(pre, post, fates)
    assert counts["reordered"] >= 2 and counts["duplicates"] == 2 and counts["lost"] == 4
    doc = analyze(tmp_path / "pre.pcap", tmp_path / "post.pcap", trim_ns=0)
    check(doc, counts, lat)
    assert doc["pre"]["format"] == ("pcap-ns" if nanos else "pcap-us")


@pytest.mark.parametrize("compress", ["gzip", "zstd"])
def test_compressed_by_other_tools(tmp_path, compress):
    """Files compressed by the gzip module and the zstd command, detected by magic
    whatever their names."""
    pre, post, fates = scenario()
    raw_pre = craft.pcap(frames(pre))
    raw_post = craft.pcap(frames(post))
    if compress == "gzip":
        (tmp_path / "pre.cap").write_bytes(gzip.compress(raw_pre))
        (tmp_path / "post.cap").write_bytes(gzip.compress(raw_post))
    else:
        if not shutil.which("zstd"):
            pytest.skip("the zstd command is not installed (make deps installs it)")
        for name, raw in (("pre", raw_pre), ("post", raw_post)):
            (tmp_path / f"{name}.raw").write_bytes(raw)
            subprocess.run(
                ["zstd", "-q", "-19", str(tmp_path / f"{name}.raw"), "-o", str(tmp_path / f"{name}.cap")], check=True
            )
    doc = analyze(tmp_path / "pre.cap", tmp_path / "post.cap", trim_ns=0)
    check(doc, *expected(pre, post, fates))
    assert doc["pre"]["compression"] == compress


def test_pcapng_sections_interfaces_resolutions(tmp_path):
    """Two sections of opposite byte order; interfaces with ns, µs (option absent),
    2^-24 s and 10^-7 s resolutions and a time offset; a raw-IP interface; simple
    packet blocks and unknown blocks in between."""
    pre, post, fates = scenario(n=60)
    ifaces_a = [craft.Interface(tsresol=9), craft.Interface(linktype=craft.LINKTYPE_RAW, tsresol=7)]
    ifaces_b = [
        craft.Interface(tsresol=None, tsoffset_s=5),
        craft.Interface(tsresol=0x80 | 24),
        craft.Interface(tsresol=9, snaplen=200),
    ]

    def ng(events):
        a = craft.Section(big=False, interfaces=ifaces_a)
        b = craft.Section(big=True, interfaces=ifaces_b)
        read_back = []
        for k, (ts, pid) in enumerate(events):
            section = a if k < len(events) // 2 else b
            i = k % len(section.interfaces)
            iface = section.interfaces[i]
            link = "raw" if iface.linktype == craft.LINKTYPE_RAW else "ethernet"
            units = craft.ng_units(ts, iface)
            section.blocks.append(("epb", i, units, craft.udp_frame(pid, link=link)))
            if k % 9 == 0:
                section.blocks.append(("spb", craft.udp_frame(pid + 10**9)))
                section.blocks.append(("other", 0x0BAD, b"\x01\x02\x03\x04"))  # custom block: skipped
            read_back.append((craft.ng_read_ns(units, iface), pid))
        return craft.pcapng([a, b]), read_back

    pre_bytes, pre_read = ng(pre)
    post_bytes, post_read = ng(post)
    (tmp_path / "pre.pcapng").write_bytes(pre_bytes)
    (tmp_path / "post.pcapng").write_bytes(post_bytes)
    doc = analyze(tmp_path / "pre.pcapng", tmp_path / "post.pcapng", trim_ns=0)

    # expected figures from the timestamps a correct reader recovers
    post_first = {}
    for ts, pid in post_read:
        post_first.setdefault(pid, ts)
    lat = np.array([post_first[pid] - ts for ts, pid in pre_read if pid in post_first])
    assert len(set(lat.tolist())) > 10
    counts, _ = expected(pre, post, fates)
    check(doc, counts, latency_summary(lat))
    assert any("simple packet blocks carry no timestamp" in w for w in doc["warnings"]), doc["warnings"]


def test_pcapng_interface_declared_after_packets(tmp_path):
    """An interface may be declared between packet blocks."""
    pre = craft.Section(interfaces=[craft.Interface(tsresol=9)])
    pre.blocks += [
        ("epb", 0, T0, craft.udp_frame(1)),
        ("idb", craft.Interface(tsresol=6)),
        ("epb", 1, (T0 + GAP) // 1000, craft.udp_frame(2)),
    ]
    post = craft.Section(interfaces=[craft.Interface(tsresol=9)], blocks=[("epb", 0, T0 + 5000, craft.udp_frame(1))])
    (tmp_path / "pre.pcapng").write_bytes(craft.pcapng([pre]))
    (tmp_path / "post.pcapng").write_bytes(craft.pcapng([post]))
    doc = analyze(tmp_path / "pre.pcapng", tmp_path / "post.pcapng", trim_ns=0)
    assert (doc["sent"], doc["received"], doc["lost"]) == (2, 1, 1)
    assert doc["latency_ns"]["max"] == 5000
    assert doc["pre"]["last_ts_ns"] == T0 + GAP


@pytest.mark.parametrize(
    "vlans", [(), (0x8100,), (0x88A8, 0x8100), (0x9100, 0x8100)], ids=["untagged", "802.1Q", "QinQ", "QinQ-9100"]
)
@pytest.mark.parametrize("v6_ext", [None, (), (0, 60, 43, 44)], ids=["ipv4", "ipv6", "ipv6-ext"])
def test_encapsulations(tmp_path, vlans, v6_ext):
    pre, post, fates = scenario()
    kw = {"vlans": vlans, "ipv6": v6_ext is not None, "v6_ext": v6_ext or ()}
    (tmp_path / "pre.pcap").write_bytes(craft.pcap(frames(pre, **kw)))
    (tmp_path / "post.pcap").write_bytes(craft.pcap(frames(post, **kw)))
    check(analyze(tmp_path / "pre.pcap", tmp_path / "post.pcap", trim_ns=0), *expected(pre, post, fates))


def test_foreign_frames_are_skipped_and_counted(tmp_path):
    """ARP, TCP, UDP too short for the id, UDP to another port (with --udp-port) and a
    later IPv4 fragment are foreign; the figures ignore them."""
    pre, post, fates = scenario()
    pre_recs = frames(pre)
    post_recs = frames(post)
    frag = bytearray(craft.udp_frame(9999))
    frag[20:22] = (0x0020).to_bytes(2, "big")  # fragment offset 32 (×8 bytes)
    foreign = [
        craft.arp_frame(),
        craft.tcp_frame(),
        craft.udp_frame(1, id_width=8, payload_len=4),
        craft.udp_frame(5, dst_port=4789),
        bytes(frag),
    ]
    for i, f in enumerate(foreign):
        pre_recs.insert(3 + 2 * i, (pre_recs[2 + 2 * i][0], f))
        post_recs.append((post_recs[-1][0], f))
    (tmp_path / "pre.pcap").write_bytes(craft.pcap(pre_recs))
    (tmp_path / "post.pcap").write_bytes(craft.pcap(post_recs))
    doc = analyze(tmp_path / "pre.pcap", tmp_path / "post.pcap", trim_ns=0, udp_port=53)
    check(doc, *expected(pre, post, fates), foreign=2 * len(foreign))
    assert doc["pre"]["too_short"] == 1 and doc["pre"]["not_udp"] == 4


def test_snap_length_cuts_some_ids(tmp_path):
    """Frames captured with a snap length that cuts the id are foreign and named in a
    warning; the others are analysed."""
    pre, post, fates = scenario()
    pre_recs = frames(pre)
    cut = [(ts, f[:46], len(f)) for ts, f in pre_recs[::4]]  # 42 header bytes + 4 of the 8-byte id
    pre_recs = [r for i, r in enumerate(pre_recs) if i % 4] + cut
    pre_recs.sort(key=lambda r: r[0])
    (tmp_path / "pre.pcap").write_bytes(craft.pcap(pre_recs))
    (tmp_path / "post.pcap").write_bytes(craft.pcap(frames(post)))
    doc = analyze(tmp_path / "pre.pcap", tmp_path / "post.pcap", trim_ns=0)
    assert doc["pre"]["snapped"] == len(cut)
    assert doc["sent"] == len(pre) - len(cut)
    assert doc["unmatched"] == sum(1 for _, pid in post if (pid - 100) % 4 == 0)
    assert any("snap length" in w for w in doc["warnings"]), doc["warnings"]


def test_moonsniff_crafted_with_wrap(tmp_path):
    """MoonSniff records whose 32-bit ids wrap; the lost ids straddle the wrap."""
    first = 2**32 - 20
    pre = [(T0 + k * GAP, first + k) for k in range(40)]
    post = [(ts + 3000 + (k % 5) * 100, pid) for k, (ts, pid) in enumerate(pre) if k not in (19, 20, 21)]
    (tmp_path / "pre.mscap").write_bytes(craft.mscap(pre))
    (tmp_path / "post.mscap").write_bytes(craft.mscap(post))
    out = tmp_path / "s.parquet"
    doc = analyze(tmp_path / "pre.mscap", tmp_path / "post.mscap", trim_ns=0, export=str(out))
    assert (doc["sent"], doc["received"], doc["lost"], doc["reordered"]) == (40, 37, 3, 0)
    assert doc["latency_ns"]["min"] == 3000 and doc["latency_ns"]["max"] == 3400
    import pyarrow.parquet as pq

    ids = pq.read_table(out).column("id").to_pylist()
    assert ids == [pid for k, (_, pid) in enumerate(pre) if k not in (19, 20, 21)]


def test_nearest_rank_on_a_tiny_sample(tmp_path):
    """Ten latencies 1..10 µs: p50 is the 5th, p90 the 9th, p99 and above the 10th
    (percentile_disc), the mean 5.5 µs."""
    pre = [(T0 + k * GAP, k) for k in range(10)]
    post = [(ts + (k + 1) * 1000, pid) for k, (ts, pid) in enumerate(pre)]
    (tmp_path / "pre.pcap").write_bytes(craft.pcap(frames(pre)))
    (tmp_path / "post.pcap").write_bytes(craft.pcap(frames(post)))
    lat = analyze(tmp_path / "pre.pcap", tmp_path / "post.pcap", trim_ns=0)["latency_ns"]
    assert (lat["min"], lat["p50"], lat["p90"], lat["p99"], lat["p99_9999"], lat["max"]) == (
        1000,
        5000,
        9000,
        10000,
        10000,
        10000,
    )
    assert lat["mean"] == 5500.0
