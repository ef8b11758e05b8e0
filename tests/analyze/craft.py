"""Captures crafted byte by byte, independently of lowtail's own writers.

Everything here follows the format specifications (libpcap's file format, the pcapng
draft, MoonSniff's record layout, Ethernet/802.1Q/IPv4/IPv6/UDP) with `struct`, so the
readers are checked against something other than their own writers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101


def udp_frame(
    pid: int,
    *,
    id_offset: int = 0,
    id_width: int = 8,
    id_endian: str = "big",
    vlans: tuple[int, ...] = (),
    ipv6: bool = False,
    v6_ext: tuple[int, ...] = (),
    dst_port: int = 53,
    payload_len: int | None = None,
    ip_proto: int = 17,
    ethertype: int | None = None,
    link: str = "ethernet",
) -> bytes:
    """A UDP datagram carrying `pid` at `id_offset` of its payload, in a frame.

    vlans: TPIDs of the tags, outermost first (0x8100 = 802.1Q, 0x88a8 = QinQ outer).
    v6_ext: IPv6 extension headers by next-header number (0 hop-by-hop, 43 routing,
    60 destination options, 44 fragment with offset 0), each 8 bytes long.
    """
    fmt = {(4, "big"): ">I", (4, "little"): "<I", (8, "big"): ">Q", (8, "little"): "<Q"}[(id_width, id_endian)]
    need = id_offset + id_width
    size = payload_len if payload_len is not None else need + 6
    payload = bytearray(b"\x5a" * size)
    if need <= size:  # else: a datagram too short for the id
        payload[id_offset:need] = struct.pack(fmt, pid & ((1 << (8 * id_width)) - 1))
    udp = struct.pack(">HHHH", 49152, dst_port, 8 + len(payload), 0) + bytes(payload)
    if ipv6:
        ext = b""
        chain = list(v6_ext) + [ip_proto]
        for i in range(len(v6_ext)):
            ext += bytes([chain[i + 1], 0]) + b"\x00" * 6  # next header, length 0 (8 bytes), no options
        l3 = (
            struct.pack(">IHBB", 0x6 << 28, len(ext) + len(udp), chain[0], 64)
            + bytes.fromhex("fd000000000000000000000000000001")
            + bytes.fromhex("fd000000000000000000000000000002")
            + ext
            + udp
        )
        et = ETH_IPV6
    else:
        header = struct.pack(
            ">BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(udp),
            0,
            0x4000,
            64,
            ip_proto,
            0,
            bytes([10, 0, 0, 1]),
            bytes([10, 0, 0, 2]),
        )
        l3 = header + udp
        et = ETH_IPV4
    if link == "raw":
        return l3
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
    for i, tpid in enumerate(vlans):
        eth += struct.pack(">HH", tpid, 100 + i)
    return eth + struct.pack(">H", et if ethertype is None else ethertype) + l3


def arp_frame() -> bytes:
    return (
        b"\xff" * 6
        + bytes.fromhex("020000000001")
        + struct.pack(">H", 0x0806)
        + bytes.fromhex("0001080006040001")
        + b"\x00" * 38
    )


def tcp_frame() -> bytes:
    """IPv4 protocol 6: not UDP, whatever follows."""
    return udp_frame(0, ip_proto=6)


# -- pcap -----------------------------------------------------------------------------


def pcap(
    records: list[tuple],
    *,
    nanos: bool = True,
    big: bool = False,
    linktype: int = LINKTYPE_ETHERNET,
    snaplen: int = 65535,
    version: tuple[int, int] = (2, 4),
) -> bytes:
    """records: (ts_ns, frame) or (ts_ns, frame, orig_len); frames longer than the snap
    length are cut to it, as a capturing tool would. `linktype` is the whole 32-bit
    field (FCS length and flag bits included)."""
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = bytearray(struct.pack(e + "IHHiIII", magic, *version, 0, 0, snaplen, linktype))
    for rec in records:
        ts, data = rec[0], rec[1]
        orig = rec[2] if len(rec) > 2 else len(data)
        data = data[:snaplen]
        secs, frac = divmod(ts, 1_000_000_000)
        if not nanos:
            frac //= 1000
        out += struct.pack(e + "IIII", secs, frac, len(data), orig) + data
    return bytes(out)


# -- pcapng ---------------------------------------------------------------------------


@dataclass
class Interface:
    linktype: int = LINKTYPE_ETHERNET
    tsresol: int | None = 9  # raw if_tsresol byte; None = option absent (default 10^-6)
    snaplen: int = 0
    tsoffset_s: int = 0


@dataclass
class Section:
    big: bool = False
    version: tuple[int, int] = (1, 0)
    interfaces: list[Interface] = field(default_factory=list)
    # ("epb", interface, ts_units, frame[, orig_len]) | ("spb", frame) | ("other", block_type, body)
    # | ("idb", Interface): one more interface, declared between packets
    blocks: list[tuple] = field(default_factory=list)


def units_per_second(tsresol: int | None) -> int:
    if tsresol is None:
        return 1_000_000
    return 2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10**tsresol


def _block(e: str, block_type: int, body: bytes) -> bytes:
    body = body + b"\x00" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack(e + "II", block_type, total) + body + struct.pack(e + "I", total)


def _option(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _idb(e: str, iface: Interface) -> bytes:
    opts = b""
    if iface.tsresol is not None:
        opts += _option(e, 9, bytes([iface.tsresol]))
    if iface.tsoffset_s:
        opts += _option(e, 14, struct.pack(e + "q", iface.tsoffset_s))
    if opts:
        opts += struct.pack(e + "HH", 0, 0)
    return _block(e, 1, struct.pack(e + "HHI", iface.linktype, 0, iface.snaplen) + opts)


def pcapng(sections: list[Section]) -> bytes:
    out = bytearray()
    for s in sections:
        e = ">" if s.big else "<"
        out += _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, *s.version, -1))
        interfaces = list(s.interfaces)
        for iface in s.interfaces:
            out += _idb(e, iface)
        for b in s.blocks:
            if b[0] == "idb":
                interfaces.append(b[1])
                out += _idb(e, b[1])
            elif b[0] == "epb":
                _, i, units, data = b[:4]
                orig = b[4] if len(b) > 4 else len(data)
                snap = interfaces[i].snaplen
                data = data[:snap] if snap else data
                out += _block(
                    e, 6, struct.pack(e + "IIIII", i, units >> 32, units & 0xFFFFFFFF, len(data), orig) + data
                )
            elif b[0] == "spb":
                out += _block(e, 3, struct.pack(e + "I", len(b[1])) + b[1])
            else:
                out += _block(e, b[1], b[2])
    return bytes(out)


def ng_units(ts_ns: int, iface: Interface) -> int:
    """Raw timestamp units of `ts_ns` on an interface (rounding down)."""
    return (ts_ns - iface.tsoffset_s * 1_000_000_000) * units_per_second(iface.tsresol) // 1_000_000_000


def ng_read_ns(units: int, iface: Interface) -> int:
    """What a correct reader makes of raw units: exact, rounding down."""
    return units * 1_000_000_000 // units_per_second(iface.tsresol) + iface.tsoffset_s * 1_000_000_000


# -- MoonSniff ------------------------------------------------------------------------


def mscap(records: list[tuple[int, int]]) -> bytes:
    """MoonSniff records: u64 timestamp ns, u32 id, little-endian, no header."""
    return b"".join(struct.pack("<QI", ts, pid & 0xFFFFFFFF) for ts, pid in records)
