"""`lowtail run` of a chain, as a user runs it: nftables → Suricata → lowtail-fwd, each in
its own namespace, a capture on every link by one timestamper. Each packet's hop latencies add
up to its end-to-end latency within the clock's stated bound (read here from the Parquet
series, independently of lowtail's own join), the hops are stored, and a delay injected on
one hop's link (a token-bucket shaper that queues each burst, added by the test while the run
starts; this kernel has no netem) is the hop `lowtail explain` names. Nothing of the chain is
left on the host afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_kind, resources_of  # noqa: E402
from test_run import db_rows, lowtail, needs_programs, needs_root, run_json  # noqa: E402

pytestmark = [needs_root, needs_programs, needs_kind("suricata"), needs_kind("nftables"), pytest.mark.root]

CHAIN = """\
chain = ["fw", "ips", "fwd"]
[experiment]
name = "chain"
duration = "2s"
warmup = "300ms"
calibrate = false
[traffic]
rates = ["5kpps"]
burst = 16
[verdict]
percentile = 99.9
budget = "1ms"
[[dut]]
name = "fw"
kind = "nftables"
rules = 10
[[dut]]
name = "ips"
kind = "suricata"
rules = "none"
containment = "container"
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
cpus = [1]
"""
# A shaper on the firewall's way out: 4 Mbit/s with a bucket of two frames, so each burst of
# 16 frames queues there (120 µs a frame: the burst's last waits about 1.7 ms) and the
# firewall's hop carries the chain's tail whatever the loaded host does to the others. Its queue
# holds 2 s of frames: after a stall of the loaded host the generator sends what is overdue
# back to back, and a queue of 100 ms dropped 2,538 of 11,500 frames at the shaper.
SHAPER = ["tc", "qdisc", "add", "dev", "out0", "root", "tbf", "rate", "4mbit", "burst", "120", "latency", "2s"]


def _delay_the_first_hop(stop: threading.Event, done: list[str]) -> None:
    """Once the chain's first namespace has its out0, put the shaper on it (before any
    traffic: Suricata takes seconds to start)."""
    while not stop.is_set():
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        for ns in (n for n in names if n.endswith("-h1")):
            added = subprocess.run(["ip", "netns", "exec", ns, *SHAPER], capture_output=True, text=True)
            if added.returncode == 0:
                done.append(ns)
                return
        time.sleep(0.02)


def _series(path: str) -> dict[int, int]:
    table = pq.read_table(path, columns=["id", "latency_ns"])
    return dict(zip(table.column("id").to_pylist(), table.column("latency_ns").to_pylist(), strict=True))


@pytest.mark.slow
def test_a_chain_adds_up_hop_by_hop_and_explain_names_the_delayed_hop(tmp_path: Path) -> None:
    toml = tmp_path / "chain.toml"
    toml.write_text(CHAIN)
    stop, delayed = threading.Event(), []
    injector = threading.Thread(target=_delay_the_first_hop, args=(stop, delayed))
    injector.start()
    try:
        done, runs = run_json(tmp_path, toml, "--report", str(tmp_path / "page.html"))
    finally:
        stop.set()
        injector.join()
    assert done.returncode in (0, 3), done.stderr
    assert delayed, "the test could not put the shaper on the first hop"
    [run] = runs
    assert run["kind"] == "chain" and run["dut"] == "fw+ips+fwd"
    assert run["lost"] == 0 and run["received"] == run["sent"] > 0, run["invalid_reasons"]
    chain = run["chain"]
    assert [(h["hop"], h["name"], h["kind"]) for h in chain["hops"]] == [
        (1, "fw", "nftables"),
        (2, "ips", "suricata"),
        (3, "fwd", "lowtail-fwd"),
    ]
    assert [h["captures"] for h in chain["hops"]] == [["pre", "link1"], ["link1", "link2"], ["link2", "post"]]
    # Each hop keeps its kind's facts under its name.
    assert set(run["dut_stats"]) == {"fw", "ips", "fwd"} and "suricata" in run["dut_stats"]["ips"]
    hops_contained = run["containment"]["hops"]
    assert set(hops_contained) == {"fw", "ips", "fwd"}
    # Each hop its own containment: the IPS in a container of its own (its cgroup named after
    # its hop), the forwarder bare on the core it was given.
    assert hops_contained["ips"]["mode"] == "container" and hops_contained["ips"]["cgroup"].endswith("-h2")
    assert hops_contained["fwd"] == {"mode": "bare", "cpus": [1]}

    # Packet by packet, from the series files: the hops add up within the stated bound.
    bound = chain["clock"]["bound_ns"]
    assert chain["clock"]["one_clock"] and bound == 0
    end_to_end = _series(run["series_path"])
    hops = [_series(h["series_path"]) for h in chain["hops"]]
    everywhere = [i for i in end_to_end if all(i in h for h in hops)]
    assert len(everywhere) == chain["packets_compared"] > 0.9 * run["received"]
    assert all(abs(sum(h[i] for h in hops) - end_to_end[i]) <= bound for i in everywhere)
    assert chain["sum_mismatch_ns"] <= bound
    assert sum(h["share"] for h in chain["hops"]) == pytest.approx(1.0)
    # The shaped hop has the largest median (the bursts queue there). Not its share of the
    # latency summed: one stall of Suricata's on a loaded host can sum to more.
    assert max(chain["hops"], key=lambda h: h["latency_ns"]["p50"])["name"] == "fw"
    assert chain["hops"][0]["latency_ns"]["p50"] > 500_000

    # Stored: the chain and one row per hop.
    stored = db_rows(tmp_path, "SELECT hop, name, kind, received, share FROM run_hops ORDER BY hop")
    assert [r[:3] for r in stored] == [(1, "fw", "nftables"), (2, "ips", "suricata"), (3, "fwd", "lowtail-fwd")]
    assert db_rows(tmp_path, "SELECT sum_mismatch_ns, clock_bound_ns FROM run_chains") == [(0, 0)]

    # The experiment page has the hops as the terminal has them.
    page = (tmp_path / "page.html").read_text()
    assert "Hop by hop" in page and "the hops add up to the end-to-end latency exactly over" in page
    assert all(f"<td>{name}</td>" in page for name in ("fw", "ips", "fwd"))

    # explain: the tail split by hop names the delayed one.
    # The packets over the budget: the run's own tail (its p99.9) may be one stall of Suricata's
    # on a loaded host (19 ms over 10 packets on a fresh clone), which explain rightly gives to
    # the IPS; what the shaper does is make the packets miss the budget.
    over_budget = ("--above", "1ms")
    explained = lowtail(
        tmp_path, "explain", str(run["run_id"]), *over_budget, "--db", str(tmp_path / "t.duckdb"), "--json"
    )
    assert explained.returncode in (0, 3), explained.stderr
    by_hop = json.loads(explained.stdout)["hops"]
    assert by_hop["tail_hop"] == "fw", by_hop
    assert by_hop["tail_packets"] > 0 and sum(h["share"] for h in by_hop["hops"]) == pytest.approx(1.0)
    shown = lowtail(
        tmp_path, "explain", str(run["run_id"]), *over_budget, "--db", str(tmp_path / "t.duckdb"), "-o", "why.html"
    )
    assert "by hop: hop 1 (fw, nftables) makes the tail" in shown.stderr + shown.stdout
    assert "<b>By hop:</b> hop 1 (fw, nftables) makes the tail" in (tmp_path / "why.html").read_text()

    # Nothing of the chain is left: namespaces, cgroups, processes.
    assert resources_of(done.pid) == []
