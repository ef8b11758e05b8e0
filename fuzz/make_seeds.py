"""Write the seed inputs of each fuzz target (fuzz/seeds/<target>/) from captures
crafted by the test suite's independent writer. Run again when a target's input
layout changes: python3 fuzz/make_seeds.py"""

import gzip
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "analyze"))
import craft  # noqa: E402

T0 = 1_700_000_000_000_000_000


def captures():
    frames = [
        craft.udp_frame(7),
        craft.udp_frame(8, vlans=(0x88A8, 0x8100)),
        craft.udp_frame(9, ipv6=True, v6_ext=(0, 44)),
        craft.arp_frame(),
        craft.udp_frame(10, id_width=4, id_endian="little", payload_len=3),
    ]
    recs = [(T0 + k * 1000, f) for k, f in enumerate(frames)]
    yield "pcap-ns", craft.pcap(recs)
    yield "pcap-us-be", craft.pcap(recs, nanos=False, big=True, snaplen=50)
    a = craft.Section(
        interfaces=[craft.Interface(tsresol=9), craft.Interface(linktype=101, tsresol=0x80 | 20, tsoffset_s=2)]
    )
    a.blocks += [
        ("epb", 0, 5, frames[0]),
        ("spb", frames[1]),
        ("epb", 1, 7, craft.udp_frame(3, link="raw")),
        ("other", 4, b"\x00\x00\x00\x00"),
    ]
    b = craft.Section(big=True, interfaces=[craft.Interface(tsresol=6, snaplen=46)], blocks=[("epb", 0, 9, frames[2])])
    yield "pcapng", craft.pcapng([a, b])


def main():
    seeds = {t: [] for t in ("pcap", "pcapng", "moonsniff", "compressed", "capture_file", "extract_id")}
    for name, data in captures():
        if name.startswith("pcap-"):
            seeds["pcap"] += [bytes([0]) + data[4:], bytes([0x80 | 1]) + data[4:]]
        else:
            seeds["pcapng"] += [bytes([0]) + data[4:], bytes([1]) + data[4:]]
        seeds["compressed"] += [bytes([0]) + data, bytes([0x11]) + data]
        seeds["capture_file"].append(bytes([2]) + data)
    ms = craft.mscap([(T0 + k, 2**32 - 2 + k) for k in range(5)]) + b"\x01\x02"
    seeds["moonsniff"] += [bytes([1]) + ms, bytes([2]) + ms]
    seeds["compressed"].append(bytes([8]) + ms)
    seeds["compressed"].append(bytes([3]) + gzip.compress(ms)[4:])
    for f, link in (
        (craft.udp_frame(7), 0),
        (craft.udp_frame(9, ipv6=True, v6_ext=(0, 60, 44)), 0),
        (craft.udp_frame(3, link="raw"), 1),
        (craft.udp_frame(4, vlans=(0x8100,)), 0x80),
    ):
        seeds["extract_id"].append(bytes([link, 0xC0, 0, 0]) + f)
    for target, inputs in seeds.items():
        d = HERE / "seeds" / target
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(inputs):
            (d / f"seed-{i}").write_bytes(data)


if __name__ == "__main__":
    main()
