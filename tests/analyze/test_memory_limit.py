"""An analysis that would hold more memory than it may: one line that says what fits, exit 1,
instead of the kernel's OOM killer ending it without a word (or ending another process of
the host). The matcher keeps each PRE packet for --max-latency after it was sent, so a
high-rate capture with the default 10 s needs rate × 10 s × 32 bytes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from analyze_support import assert_clean_failure, synth

from lowtail import _native
from lowtail.analyze.pair import analyze_options, analyze_pair
from lowtail.core.errors import Failure
from lowtail.testbed.containment import memory_hierarchy

# 7 Mpps for 1 s: the 10 s horizon holds all 7 million packets, 224 MB with the interpreter's
# 35 MB — past a 200 MiB cgroup, whose three quarters (150 MiB) stop the matcher at 4.2 million.
PACKETS, RATE_PPS = 7_000_000, 7_000_000
CGROUP_LIMIT = 200 << 20


def test_a_limit_set_through_the_api_stops_the_analysis_with_a_failure(tmp_path):
    pair = synth(tmp_path, packets=100_000, rate_pps=1_000_000)
    options = analyze_options(trim_ns=0, max_memory_bytes=1 << 20)
    assert options.max_memory_bytes == 1 << 20
    with pytest.raises(Failure, match=r"^matching needs more memory than 1 MiB, the limit set for this analysis") as e:
        analyze_pair(pair.pre, pair.post, options)
    assert isinstance(e.value.__cause__, _native.OutOfMemoryError)
    assert "\n" not in str(e.value)
    assert analyze_pair(pair.pre, pair.post, analyze_options(trim_ns=0))["received"] == 100_000


@pytest.fixture
def memory_cgroup():
    """A memory cgroup of CGROUP_LIMIT bytes for one command, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("makes a memory cgroup (needs root)")
    hierarchy = memory_hierarchy()
    if hierarchy is None:
        pytest.skip("no cgroup memory controller on this host")
    path = hierarchy.parent / f"lowtail-test-memory-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        (path / ("memory.max" if hierarchy.version == 2 else "memory.limit_in_bytes")).write_text(str(CGROUP_LIMIT))
        yield path
    finally:
        path.rmdir()  # its one process has ended: the cgroup is empty


def _analyze_in(cgroup: Path, pair, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lowtail", "analyze", str(pair.pre), str(pair.post)]
    command += ["--no-store", "--trim", "0", "--id-format", "moonsniff", *extra]
    return subprocess.run(
        ["sh", "-c", f'echo $$ > {cgroup / "cgroup.procs"} && exec "$@"', "sh", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.root
@pytest.mark.slow
def test_a_capture_too_fast_for_the_memory_cgroup_fails_saying_what_fits(tmp_path, memory_cgroup):
    """Before: killed by the OOM killer (exit 137, nothing said)."""
    pair = synth(tmp_path, suffix=".mscap", packets=PACKETS, rate_pps=RATE_PPS, format="moonsniff", id_width=4)
    failed = _analyze_in(memory_cgroup, pair)
    line = assert_clean_failure(failed, 1, "matching needs more memory than 150 MiB", "memory cgroup's limit")
    advised = re.search(r"e\.g\. --max-latency (\S+)$", line)
    assert advised, line
    # What it advises fits in the same cgroup.
    fits = _analyze_in(memory_cgroup, pair, "--max-latency", advised.group(1))
    assert fits.returncode == 0, fits.stderr
    assert "7,000,000" in fits.stdout or "7000000" in fits.stdout, fits.stdout
