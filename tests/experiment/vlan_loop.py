"""The VLAN loop of `test_run_vlan_loop.py`, in a module of its own that imports nothing heavy:
on a kernel without 802.1Q it runs as a program on Debian's guest kernel under emulation,
where every import costs seconds (pytest and pyarrow alone would take 20 s there).

    python vlan_loop.py <out directory> <rate>    # on the guest kernel
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOWTAIL = [sys.executable, "-m", "lowtail"]

LOOP = """\
chain = ["a", "b", "c"]
[experiment]
name = "loop"
duration = "1s"
warmup = "200ms"
calibrate = false
[traffic]
rates = ["{rate}"]
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


def in_ns(ns: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True)


@contextmanager
def loop_namespace() -> Iterator[str]:
    """A namespace holding the loop: a veth pair va ↔ vb, both up (removed with it)."""
    ns = f"ltvlan{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        in_ns(ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
        for dev in ("lo", "va", "vb"):
            in_ns(ns, "ip", "link", "set", dev, "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def kernel_has_vlans(ns: str) -> bool:
    made = subprocess.run(
        ["ip", "netns", "exec", ns, "ip", "link", "add", "link", "va", "name", "va.9", "type", "vlan", "id", "9"],
        capture_output=True,
        text=True,
    )
    if made.returncode == 0:
        in_ns(ns, "ip", "link", "del", "va.9")
    return made.returncode == 0


def run_the_loop(tmp_path: Path, ns: str, rate: str = "5kpps") -> subprocess.CompletedProcess:
    toml = tmp_path / "loop.toml"
    toml.write_text(LOOP.replace("{rate}", rate))
    return subprocess.run(
        ["ip", "netns", "exec", ns, *LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def measure_the_loop(out: Path, rate: str) -> None:
    """Run the chain over the loop into `out`: the run's JSON (`run.json`, exit code and error
    words included) and the interfaces left in the namespace afterwards (`links.txt`)."""
    with loop_namespace() as ns:
        done = run_the_loop(out, ns, rate)
        links = in_ns(ns, "ip", "-o", "link", "show").stdout
    (out / "links.txt").write_text(links)
    (out / "run.json").write_text(
        json.dumps({"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
    )


if __name__ == "__main__":
    measure_the_loop(Path(sys.argv[1]), sys.argv[2])
