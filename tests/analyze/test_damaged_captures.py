"""Captures the readers must refuse, stop in, or read as cut — through the command line,
with captures crafted byte by byte (`craft.py`), and beside libpcap (tcpdump) where it
is installed: the versions it reads, the FCS bits of the link-type field, damage in the
middle of a file (corruption at an offset: exit 3 with what came before, marked
partial), and one rule for every capture that ends early, plain or compressed (a cut:
warning, partial, exit 3) against a compressed stream whose checksum fails (an error)."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess

import craft
import pytest
from analyze_support import assert_clean_failure, run_cli, synth

T0 = 1_700_000_000_000_000_000
N = 400
LATENCY_NS = 7_000
TCPDUMP = shutil.which("tcpdump")


def records(n: int = N, *, post: bool = False, fcs: bytes = b"") -> list[tuple]:
    """(ts, frame, orig_len) of packets 0…n-1, 1 ms apart; POST copies `LATENCY_NS` later.
    `fcs`: bytes that end every frame (a frame check sequence), counted in orig_len."""
    out = []
    for k in range(n):
        frame = craft.udp_frame(k) + fcs
        out.append((T0 + k * 1_000_000 + (LATENCY_NS if post else 0), frame, len(frame)))
    return out


def analyze(pre, post, *extra):
    p = run_cli("analyze", pre, post, "--trim", "0", "--no-store", "--json", *extra)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def write_pair(tmp_path, pre_bytes: bytes, post_bytes: bytes, suffix: str = ".pcap"):
    pre, post = tmp_path / f"pre{suffix}", tmp_path / f"post{suffix}"
    pre.write_bytes(pre_bytes)
    post.write_bytes(post_bytes)
    return pre, post


def libpcap_reads(path) -> tuple[int, bool]:
    """(packets tcpdump printed, whether it ended without an error)."""
    p = subprocess.run([TCPDUMP, "-r", str(path), "-n", "-tt"], capture_output=True, text=True, timeout=60)
    return len(p.stdout.splitlines()), p.returncode == 0


needs_tcpdump = pytest.mark.skipif(TCPDUMP is None, reason="tcpdump (libpcap) not installed: no reference reader")


# -- versions -------------------------------------------------------------------------


@pytest.mark.parametrize("version,read", [((2, 4), True), ((2, 2), True), ((1, 0), False), ((3, 0), False)])
def test_pcap_versions(tmp_path, version, read):
    """libpcap reads major version 2 only ("archaic" version-1 files have other record
    headers); lowtail reads what it reads."""
    pre, post = write_pair(tmp_path, craft.pcap(records(), version=version), craft.pcap(records(post=True)))
    p = analyze(pre, post)
    if read:
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["received"] == N
    else:
        assert_clean_failure(p, 2, "pre.pcap", f"version {version[0]}.{version[1]}")
    if TCPDUMP:
        assert libpcap_reads(pre)[1] == read


@pytest.mark.parametrize("version,read", [((1, 0), True), ((1, 2), True), ((0, 1), False), ((1, 1), False)])
def test_pcapng_first_section_versions(tmp_path, version, read):
    """libpcap and Wireshark read sections of version 1.0 and 1.2 and refuse 0.1 and 1.1."""
    iface = craft.Interface()

    def ng(recs, v):
        blocks = [("epb", 0, craft.ng_units(ts, iface), frame) for ts, frame, _ in recs]
        return craft.pcapng([craft.Section(version=v, interfaces=[iface], blocks=blocks)])

    pre, post = write_pair(tmp_path, ng(records(), version), ng(records(post=True), (1, 0)), ".pcapng")
    p = analyze(pre, post)
    if read:
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["received"] == N
    else:
        assert_clean_failure(p, 2, "pre.pcapng", f"version {version[0]}.{version[1]}")
    if TCPDUMP:
        assert libpcap_reads(pre)[1] == read


def test_pcapng_later_section_of_major_version_2_stops_the_reading(tmp_path):
    """A second section of version 2.0: reading stops there (libpcap stops there with an
    error), the analysis covers the first section, says where it stopped, exit 3."""
    iface = craft.Interface()

    def section(recs, v):
        blocks = [("epb", 0, craft.ng_units(ts, iface), frame) for ts, frame, _ in recs]
        return craft.Section(version=v, interfaces=[iface], blocks=blocks)

    pre_recs = records()
    first = craft.pcapng([section(pre_recs[:250], (1, 0))])
    pre_bytes = craft.pcapng([section(pre_recs[:250], (1, 0)), section(pre_recs[250:], (2, 0))])
    post_bytes = craft.pcapng([section(records(post=True), (1, 0))])
    pre, post = write_pair(tmp_path, pre_bytes, post_bytes, ".pcapng")
    p = analyze(pre, post)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["partial"] and doc["pre"]["frames"] == 250 and doc["received"] == 250
    line = next(w for w in doc["warnings"] if "version 2.0" in w)
    assert "pre.pcapng" in line and f"byte {len(first)}" in line and "partial" in line
    if TCPDUMP:
        assert libpcap_reads(pre) == (250, False)


# -- the link-type field --------------------------------------------------------------


@pytest.mark.parametrize("field", [0x3000_0001, 0x4000_0001])
def test_pcap_link_type_with_fcs_bits(tmp_path, field):
    """The upper bits of the link-type field (FCS length and flag) are not the link type:
    these are Ethernet files whose frames end in 4 FCS bytes, and the FCS does not
    disturb the ids (they are found from the IP/UDP lengths)."""
    fcs = b"\xde\xad\xbe\xef"
    pre, post = write_pair(
        tmp_path, craft.pcap(records(fcs=fcs), linktype=field), craft.pcap(records(post=True, fcs=fcs), linktype=field)
    )
    p = analyze(pre, post)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["received"] == N and doc["foreign"] == 0
    assert doc["latency_ns"]["min"] == doc["latency_ns"]["max"] == LATENCY_NS
    if TCPDUMP:
        assert libpcap_reads(pre) == (N, True)


# -- damage in the middle -------------------------------------------------------------


def record_offset(k: int, frame_len: int) -> int:
    return 24 + (16 + frame_len) * k


@pytest.mark.parametrize("caplen", [70_000, 262_145])
def test_pcap_record_length_that_cannot_be_right_mid_file(tmp_path, caplen):
    """The outside check's case: a record length of 70,000 under a 262,144 snap length
    half-way through PRE. It is corruption at that record's offset: exit 3, the first
    half analysed and marked partial, the warning saying where — not "the last record is
    truncated" with half of PRE dropped silently."""
    frame_len = len(craft.udp_frame(0))
    data = bytearray(craft.pcap(records(), snaplen=262_144))
    at = record_offset(N // 2, frame_len)
    assert struct.unpack_from("<I", data, at + 8)[0] == frame_len
    struct.pack_into("<I", data, at + 8, caplen)
    pre, post = write_pair(tmp_path, bytes(data), craft.pcap(records(post=True)))
    p = analyze(pre, post)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["partial"] and doc["pre"]["frames"] == N // 2
    line = next(w for w in doc["warnings"] if "corrupt" in w)
    assert f"byte {at}" in line and "pre.pcap" in line and "partial" in line
    assert not any("capture killed" in w for w in doc["warnings"]), doc["warnings"]


def test_pcapng_block_length_that_cannot_be_right_mid_file(tmp_path):
    """The same in pcapng: a packet block's length field runs far past its own trailer."""
    iface = craft.Interface()
    recs = records()

    def ng(rs):
        return craft.pcapng(
            [craft.Section(interfaces=[iface], blocks=[("epb", 0, craft.ng_units(ts, iface), f) for ts, f, _ in rs])]
        )

    data = bytearray(ng(recs))
    half = len(ng(recs[: N // 2]))  # where block N/2 starts
    assert struct.unpack_from("<I", data, half)[0] == 6
    struct.pack_into("<I", data, half + 4, 70_000)
    pre, post = write_pair(tmp_path, bytes(data), ng(records(post=True)), ".pcapng")
    p = analyze(pre, post)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["partial"] and doc["pre"]["frames"] == N // 2
    assert any(f"byte {half}" in w and "corrupt" in w for w in doc["warnings"]), doc["warnings"]


def test_corrupt_first_record_is_refused(tmp_path):
    """Nothing before the damage: nothing to analyse partially — refused, exit 2."""
    data = bytearray(craft.pcap(records()))
    struct.pack_into("<I", data, 24 + 8, 70_000)
    pre, post = write_pair(tmp_path, bytes(data), craft.pcap(records(post=True)))
    assert_clean_failure(analyze(pre, post), 2, "pre.pcap", "corrupt", "byte 24")


# -- captures that end early ----------------------------------------------------------


SMALL = dict(packets=3_000, rate_pps=10_000)


@pytest.mark.parametrize("compression,suffix", [("none", ".pcap"), ("zstd", ".pcap.zst"), ("gzip", ".pcap.gz")])
def test_a_capture_cut_short_is_partial(tmp_path, compression, suffix):
    """One rule, plain or compressed: a capture that ends early (its writer killed) gives
    what it held, a warning, the analysis marked partial, exit 3."""
    pair = synth(tmp_path, compression=compression, suffix=suffix, **SMALL)
    data = pair.post.read_bytes()
    pair.post.write_bytes(data[: len(data) * 2 // 3])
    p = analyze(pair.pre, pair.post)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["partial"] and 0 < doc["received"] < doc["sent"]
    assert any(w in p.stderr for w in ("truncated", "ends early")), p.stderr


@pytest.mark.parametrize("compression,suffix", [("zstd", ".pcap.zst"), ("gzip", ".pcap.gz")])
def test_a_compressed_stream_cut_before_its_end_mark_is_partial(tmp_path, compression, suffix):
    """Every record came out but the stream stops before its end (gzip's CRC and length,
    zstd's last block): nothing proves the capture whole, so it is a cut capture too —
    all packets read, marked partial, exit 3 (zstd and gzip alike)."""
    pair = synth(tmp_path, compression=compression, suffix=suffix, **SMALL)
    pair.post.write_bytes(pair.post.read_bytes()[:-3])
    p = analyze(pair.pre, pair.post)
    assert p.returncode == 3, p.stderr
    doc = json.loads(p.stdout)
    assert doc["partial"] and doc["received"] > 0
    assert "ends early" in p.stderr or "truncated" in p.stderr, p.stderr


@pytest.mark.parametrize("compression,suffix", [("zstd", ".pcap.zst"), ("gzip", ".pcap.gz")])
def test_a_compressed_capture_cut_inside_its_header_is_refused(tmp_path, compression, suffix):
    """Cut before the decompressor could hand out a capture header (a zstd block is
    whole or nothing): refused as a plain file cut inside its header is."""
    pair = synth(tmp_path, compression=compression, suffix=suffix, **SMALL)
    pair.post.write_bytes(pair.post.read_bytes()[:12])
    assert_clean_failure(analyze(pair.pre, pair.post), 2, pair.post.name, "truncated")


def test_a_gzip_checksum_that_fails_is_an_error(tmp_path):
    """The CRC-32 at the end of a gzip member covers everything before it: when it
    fails, nothing read from the member can be trusted — an error, nothing analysed."""
    pair = synth(tmp_path, compression="gzip", suffix=".pcap.gz", **SMALL)
    data = bytearray(pair.post.read_bytes())
    data[-8] ^= 0x55  # the CRC-32 (the last 8 bytes: CRC, then the length)
    pair.post.write_bytes(bytes(data))
    assert gzip.decompress(pair.pre.read_bytes())  # the PRE file is whole
    assert_clean_failure(analyze(pair.pre, pair.post), 2, pair.post.name, "gzip", "checksum")
