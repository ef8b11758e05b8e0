"""The baseline's parser: one capture in, one PostgreSQL COPY row per test packet out.

This is how the URLLC studies turned captures into database rows: a Python packet library
decodes every frame, and the packet id and timestamp become a row. We use dpkt because it
is the fastest of the widely used pure-Python packet libraries (scapy and pyshark are one
to two orders of magnitude slower per packet), it decodes Ethernet, 802.1Q, IPv4, IPv6
and UDP, and it reads nanosecond pcaps with exact timestamps (as `Decimal`; microsecond
pcaps come as floats, too coarse at today's epoch, so they are refused).

The id is where `lowtail analyze` looks by default: a u64, big-endian, at UDP payload
offset 0. It is written as a signed bigint (two's complement), which PostgreSQL compares
exactly like the unsigned value. Frames without such an id are skipped and counted.

Usage: python pcap_to_rows.py CAPTURE.pcap > rows.txt   (tab-separated: id, ts_ns)
"""

from __future__ import annotations

import sys
from decimal import Decimal

import dpkt

NS_PER_S = 1_000_000_000
ID_BYTES = 8
SIGNED_LIMIT = 1 << 63
WRAP = 1 << 64


def udp_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an Ethernet frame, or None when it is not UDP over IP."""
    ip = dpkt.ethernet.Ethernet(frame).data
    if not isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)):
        return None
    udp = ip.data
    return udp.data if isinstance(udp, dpkt.udp.UDP) else None


def write_rows(capture, out) -> tuple[int, int]:
    """Write `id<TAB>ts_ns` lines; returns (rows written, frames skipped)."""
    rows = skipped = 0
    lines: list[str] = []
    for ts, frame in dpkt.pcap.Reader(capture):
        if rows == 0 and not isinstance(ts, Decimal):
            raise SystemExit(f"{capture.name}: not a nanosecond pcap (write it with lowtail synth --format pcap-ns)")
        payload = udp_payload(frame)
        if payload is None or len(payload) < ID_BYTES:
            skipped += 1
            continue
        packet_id = int.from_bytes(payload[:ID_BYTES], "big")
        if packet_id >= SIGNED_LIMIT:
            packet_id -= WRAP
        lines.append(f"{packet_id}\t{int(ts * NS_PER_S)}\n")
        if len(lines) == 8192:
            out.write("".join(lines))
            rows += len(lines)
            lines.clear()
    out.write("".join(lines))
    return rows + len(lines), skipped


def main(path: str) -> None:
    with open(path, "rb") as capture:
        rows, skipped = write_rows(capture, sys.stdout)
    sys.stdout.flush()
    print(f"{path}: {rows} rows, {skipped} frames without a packet id", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
