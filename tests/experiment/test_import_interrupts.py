"""`import-captures` with the interrupt recordings a campaign kept beside its pairs (the URLLC
studies' shape: a guest file and a VM-host file, cumulative counts every second, no time
column): stored as each run's interrupt samples, and `lowtail explain` gives the interrupt
rates per CPU and their correlation with the tail period by period, saying what per-second
counts can and cannot attribute.

The recordings are made here from known counts: on the guest's DuT CPU (2) the local timer at
250 a second and IRQ work at 83 or 84 (one every third tick), TLB shootdowns that come with
the tail (three per tail packet of the second), CPU 3 without an IRQ-work line; a counter near
the top of 32 bits that wraps; on the VM host's CPU 5 the timer and function calls at random."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from irq_files import study_file  # noqa: E402

from lowtail.experiment.irq_recordings import COUNTER_WRAP  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]
RATE = 10_000
SECONDS = 40
SPIKE_NS = 300_000
SPEC = """
[import]
name = "vm study"
pattern = "vm-r{repetition}-{side}.pcap"
[analysis]
trim = "0s"
[interrupts]
guest = "vm-r{repetition}-irq-guest.csv"
host = "vm-r{repetition}-irq-host.csv"
irq_period = "1s"
dut_cpu = 2
host_cpu = 5
"""


def lowtail(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _pair(root: Path, rep: int) -> np.ndarray:
    """A synthetic pair with 200 µs spikes at random; its spikes per second from the first packet."""
    pre, post, truth = (root / f"vm-r{rep}-{s}" for s in ("pre.pcap", "post.pcap", "truth.parquet"))
    done = lowtail(
        root,
        "synth", str(pre), str(post), "--packets", str(RATE * SECONDS), "--rate", f"{RATE}pps", "--seed", str(rep + 3),
        "--set", "spike_probability=0.0005", "--set", f"spike_ns={SPIKE_NS}", "--truth", str(truth),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    t = pq.read_table(truth)
    sent = t.column("pre_ts_ns").to_numpy()
    latency = t.column("post_ts_ns").to_numpy() - sent
    truth.unlink()
    return np.bincount((sent[latency >= SPIKE_NS] - sent.min()) // 1_000_000_000, minlength=SECONDS)[:SECONDS]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_an_imported_vm_study_gives_rates_per_cpu_and_their_correlation_with_the_tail(tmp_path):
    root = tmp_path / "study"
    root.mkdir()
    rng = np.random.default_rng(7)
    for rep in (0, 1):
        spikes = _pair(root, rep)
        guest = {
            ("LOC", 2): [250] * SECONDS,
            ("IWI", 2): [83, 84, 83] * (SECONDS // 3) + [83] * (SECONDS % 3),
            ("TLB", 2): list(3 * spikes + rng.integers(0, 2, SECONDS)),
            ("LOC", 3): [250] * SECONDS,
            ("RES", 0): list(rng.integers(0, 40, SECONDS)),
        }
        text = study_file(guest, start={("LOC", 2): COUNTER_WRAP - 1_000}, missing={("IWI", 3)}, wrap_at=COUNTER_WRAP)
        (root / f"vm-r{rep}-irq-guest.csv").write_text(text)
        if rep == 0:  # the second pair's VM-host file is missing: it is imported without it
            host = {("LOC", 5): [250] * SECONDS, ("CAL", 5): list(rng.integers(0, 9, SECONDS))}
            (root / f"vm-r{rep}-irq-host.csv").write_text(study_file(host))
    (tmp_path / "spec.toml").write_text(SPEC)
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert imported["ignored"] == []  # the recordings are no captures, and not left out
    assert [w["pair"] for w in imported["warnings"]] == ["vm-r1-pre.pcap"]
    assert "no host interrupt recording" in imported["warnings"][0]["warning"]
    by_rep = {r["repetition"]: r for r in imported["runs"]}
    facts = by_rep[0]["testbed"]["interrupts"]
    assert set(facts) == {"guest", "host"} and set(by_rep[1]["testbed"]["interrupts"]) == {"guest"}
    assert facts["guest"]["dut_cpu"] == 2 and facts["host"]["dut_cpu"] == 5
    assert facts["guest"]["wraps"] == 1 and facts["guest"]["empty_fields"] == SECONDS + 1
    assert facts["guest"]["period_ns"] == 1_000_000_000 and facts["guest"]["rows"] == SECONDS + 1
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        stored = con.execute(
            "SELECT source, sum(delta) FROM run_interrupts WHERE run_id = ? AND kind = 'LOC' GROUP BY source "
            "ORDER BY source",
            [by_rep[0]["run_id"]],
        ).fetchall()
    assert stored == [("guest", 2 * 250 * SECONDS), ("host", 250 * SECONDS)]

    done = lowtail(tmp_path, "explain", str(by_rep[0]["run_id"]), "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    sampled = {s["source"]: s for s in doc["interrupts"]}
    guest = sampled["guest"]
    assert guest["period_ns"] == 1_000_000_000 and guest["dut_cpus"] == [2]
    assert "per-period counts against per-period tail counts" in guest["resolution"]
    assert "cannot say which packet an interrupt delayed" in guest["resolution"]
    assert "placed every period from the first packet" in guest["placed"]
    rates = {(r["cpu"], r["kind"]): r["rate_hz"] for r in guest["rates"]}
    assert abs(rates[(2, "LOC")] / 250 - 1) < 1e-3 and abs(rates[(2, "IWI")] / (250 / 3) - 1) < 1e-3
    assert set(rates) <= {(2, "LOC"), (2, "IWI"), (2, "TLB")}  # the DuT's CPU only
    correlation = {c["kind"]: c for c in guest["correlation"]}
    assert correlation["TLB"]["significant"] and correlation["TLB"]["r"] > 0.5, correlation
    assert correlation["LOC"]["r"] is None and not correlation["LOC"]["significant"]  # the same every second
    assert not correlation["IWI"]["significant"]
    assert any("TLB" in s and "more tail packets" in s for s in guest["sentences"])
    assert sampled["host"]["dut_cpus"] == [5] and {r["kind"] for r in sampled["host"]["rates"]} == {"LOC", "CAL"}
    # No trace: the interrupts are seen only at their resolution, and that is said as what could not be seen.
    unseen = [u for u in doc["unseen"] if u["kind"] == "interrupts"]
    assert {u["what"].split("'")[0] for u in unseen} == {"the guest", "the host"}
    assert all(u["sampling_interval_ns"] == 1_000_000_000 for u in unseen)
    text = lowtail(tmp_path, "explain", str(by_rep[0]["run_id"]), "--db", "t.duckdb")
    assert "CPU 2: LOC 250 Hz, IWI 83.33 Hz" in text.stderr, text.stderr
