"""A chain on real wiring, HVNet's layout: one physical loop (here a veth pair va ↔ vb), one
VLAN id per link, each frame crossing the wire once per link. The hops alternate ends of the
loop (kernel-mirred on vb, lowtail-fwd on va, kernel-mirred on vb), the timestamper stamps
every link on va's VLAN sub-interfaces, and the hops add up to the end-to-end latency packet
by packet. The whole run happens in a network namespace of the test's own, so the host's
interfaces are untouched; the sub-interfaces lowtail made are gone afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_run import LOWTAIL, needs_programs, needs_root  # noqa: E402

pytestmark = [needs_root, needs_programs, pytest.mark.root]

LOOP = """\
chain = ["a", "b", "c"]
[experiment]
name = "loop"
duration = "1s"
warmup = "200ms"
calibrate = false
[traffic]
rates = ["5kpps"]
[testbed]
kind = "interfaces"
generator = "va"
pre = "va"
post = "va"
vlans = [10, 11, 12, 13]
[[dut]]
name = "a"
kind = "kernel-mirred"
interfaces = ["vb", "vb"]
[[dut]]
name = "b"
kind = "lowtail-fwd"
interfaces = ["va", "va"]
[[dut]]
name = "c"
kind = "kernel-mirred"
interfaces = ["vb", "vb"]
"""


def _in(ns: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True)


@pytest.fixture
def loop_namespace():
    """A namespace holding the loop: a veth pair va ↔ vb, both up (removed with it)."""
    ns = f"ltvlan{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        _in(ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
        for dev in ("lo", "va", "vb"):
            _in(ns, "ip", "link", "set", dev, "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _kernel_has_vlans(ns: str) -> bool:
    made = subprocess.run(
        ["ip", "netns", "exec", ns, "ip", "link", "add", "link", "va", "name", "va.9", "type", "vlan", "id", "9"],
        capture_output=True,
        text=True,
    )
    if made.returncode == 0:
        _in(ns, "ip", "link", "del", "va.9")
    return made.returncode == 0


def _run(tmp_path: Path, ns: str) -> subprocess.CompletedProcess:
    toml = tmp_path / "loop.toml"
    toml.write_text(LOOP)
    return subprocess.run(
        ["ip", "netns", "exec", ns, *LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _series(path: str) -> dict[int, int]:
    table = pq.read_table(path, columns=["id", "latency_ns"])
    return dict(zip(table.column("id").to_pylist(), table.column("latency_ns").to_pylist(), strict=True))


def test_a_kernel_without_vlans_is_said_in_one_line(tmp_path: Path, loop_namespace: str) -> None:
    """Where 802.1Q is missing (this machine's kernel), the run stops before any traffic with
    what it needs, exit 2, and leaves nothing behind."""
    if _kernel_has_vlans(loop_namespace):
        pytest.skip("this kernel makes VLAN sub-interfaces: the chain test below runs instead")
    done = _run(tmp_path, loop_namespace)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "lowtail: error: cannot make the VLAN sub-interface va.10: this kernel has no 802.1Q VLAN support "
        "(CONFIG_VLAN_8021Q, module 8021q); [testbed] vlans needs it"
    )
    links = _in(loop_namespace, "ip", "-o", "link", "show").stdout
    assert "va." not in links and "vb." not in links


@pytest.mark.slow
def test_a_chain_over_one_loop_with_a_vlan_per_link_adds_up(tmp_path: Path, loop_namespace: str) -> None:
    if not _kernel_has_vlans(loop_namespace):
        pytest.skip("this kernel makes no VLAN sub-interfaces (no 802.1Q: CONFIG_VLAN_8021Q)")
    done = _run(tmp_path, loop_namespace)
    assert done.returncode in (0, 3), done.stderr
    [run] = json.loads(done.stdout)
    assert run["lost"] == 0 and run["received"] == run["sent"] > 0, run["invalid_reasons"]
    assert run["testbed"]["vlans"] == [10, 11, 12, 13]
    assert run["testbed"]["pre"]["interface"] == "va.10" and run["testbed"]["post"]["interface"] == "va.13"
    chain = run["chain"]
    assert [(h["name"], h["captures"]) for h in chain["hops"]] == [
        ("a", ["pre", "link1"]),
        ("b", ["link1", "link2"]),
        ("c", ["link2", "post"]),
    ]
    assert all(h["received"] > 0 and h["lost"] == 0 for h in chain["hops"])
    end_to_end = _series(run["series_path"])
    hops = [_series(h["series_path"]) for h in chain["hops"]]
    everywhere = [i for i in end_to_end if all(i in h for h in hops)]
    assert len(everywhere) == chain["packets_compared"] > 0
    assert all(sum(h[i] for h in hops) - end_to_end[i] == 0 for i in everywhere)
    # The sub-interfaces lowtail made went with the run; the loop itself is the test's.
    links = _in(loop_namespace, "ip", "-o", "link", "show").stdout
    assert "va." not in links and "vb." not in links
