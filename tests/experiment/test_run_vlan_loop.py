"""A chain on real wiring, HVNet's layout: one physical loop (here a veth pair va ↔ vb), one
VLAN id per link, each frame crossing the wire once per link. The hops alternate ends of the
loop (kernel-mirred on vb, lowtail-fwd on va, kernel-mirred on vb), the timestamper stamps
every link on va's VLAN sub-interfaces, and the hops add up to the end-to-end latency packet
by packet. The whole run happens in a network namespace of the test's own, so the host's
interfaces are untouched; the sub-interfaces lowtail made are gone afterwards.

A kernel without 802.1Q (this machine's: no CONFIG_VLAN_8021Q, and modules cannot be loaded)
runs the chain on Debian's guest kernel instead: a QEMU guest whose root is this host's file
system (`kernel_guest.py`), running the loop (`vlan_loop.py`); what it wrote back
is checked here. Under emulation the loop is driven at 1 kpps: the guest's emulated CPU
cannot take a 5 kpps stream across four captured links without its interfaces refusing frames."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import vlan_loop  # noqa: E402
from kernel_guest import run_on_guest_kernel  # noqa: E402
from test_run import needs_programs, needs_root  # noqa: E402

pytestmark = [needs_root, needs_programs, pytest.mark.root]


@pytest.fixture
def loop_namespace() -> Iterator[str]:
    with vlan_loop.loop_namespace() as ns:
        yield ns


def _series(path: str) -> dict[int, int]:
    table = pq.read_table(path, columns=["id", "latency_ns"])
    return dict(zip(table.column("id").to_pylist(), table.column("latency_ns").to_pylist(), strict=True))


def test_a_kernel_without_vlans_is_said_in_one_line(tmp_path: Path, loop_namespace: str) -> None:
    """Where 802.1Q is missing (this machine's kernel), the run stops before any traffic with
    what it needs, exit 2, and leaves nothing behind."""
    if vlan_loop.kernel_has_vlans(loop_namespace):
        pytest.skip("this kernel makes VLAN sub-interfaces: the chain test below runs instead")
    done = vlan_loop.run_the_loop(tmp_path, loop_namespace)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "lowtail: error: cannot make the VLAN sub-interface va.10: this kernel has no 802.1Q VLAN support "
        "(CONFIG_VLAN_8021Q, module 8021q); [testbed] vlans needs it"
    )
    links = vlan_loop.in_ns(loop_namespace, "ip", "-o", "link", "show").stdout
    assert "va." not in links and "vb." not in links


def _check_the_chain(out: Path) -> None:
    done = json.loads((out / "run.json").read_text())
    assert done["returncode"] in (0, 3), done["stderr"]
    [run] = json.loads(done["stdout"])
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
    links = (out / "links.txt").read_text()
    assert "va." not in links and "vb." not in links


@pytest.mark.slow
def test_a_chain_over_one_loop_with_a_vlan_per_link_adds_up(tmp_path: Path) -> None:
    """On this kernel when it has 802.1Q, else on Debian's guest kernel under QEMU."""
    with vlan_loop.loop_namespace() as ns:
        here = vlan_loop.kernel_has_vlans(ns)
    if here:
        vlan_loop.measure_the_loop(tmp_path, "5kpps")
    else:
        guest = run_on_guest_kernel(
            [sys.executable, vlan_loop.__file__, str(tmp_path), "1kpps"],
            cwd=Path(__file__).parent,
            shared=tmp_path,
        )
        assert guest.returncode == 0, guest.output[-4000:]
        assert guest.kernel_release != os.uname().release and "8021q" in guest.modules
    _check_the_chain(tmp_path)
