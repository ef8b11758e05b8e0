"""`lowtail noise` for real on this machine: the native probe pinned to CPU 1 for a couple
of seconds, interrupts sampled from CPU 0, the result stored and reported; and snapshots
of the live host (read only)."""

from __future__ import annotations

import json
import os

import pytest

from host_fixtures import cli
from lowtail.host.facts import Host
from lowtail.host.sysroot import SysRoot

needs_two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0),
    reason="the probe runs on CPU 1 with CPU 0 for housekeeping: needs two CPUs",
)


@needs_two_cpus
@pytest.mark.slow
def test_noise_probe_on_cpu_1(tmp_path, capsys):
    db, report = tmp_path / "n.duckdb", tmp_path / "noise.html"
    code, out, err = cli(
        capsys,
        "noise",
        "--cpus",
        "1",
        "--duration",
        "2s",
        "--housekeeping",
        "0",
        "--sample-interval",
        "100ms",
        "--db",
        db,
        "--report",
        report,
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    (core,) = doc["cores"]
    assert core["cpu"] == 1
    for key in ("gaps", "rate_hz", "max_ns", "p99_ns", "interrupts"):
        assert key in core
    # It stops at the first clock read past 2 s, so it overshoots by at most the last gap
    # (which it records): seconds on a loaded machine, microseconds on a quiet one.
    assert 2e9 <= core["duration_ns"] <= 2e9 + max(core["max_ns"], 1_000_000)
    # As many loops as the probe was given the CPU for: on a core shared with a second suite a
    # fraction of an idle one's millions, never fewer than the shortest loop allows.
    assert core["loops"] > 10_000 and 0 < core["min_loop_ns"] < 1_000
    assert core["loops"] * core["min_loop_ns"] <= core["duration_ns"]
    assert core["rate_hz"] == pytest.approx(core["gaps"] / (core["duration_ns"] / 1e9))
    if core["gaps"]:
        assert core["p99_ns"] <= core["max_ns"] and core["max_ns"] > 1_000
        assert sum(b["count"] for b in core["histogram"]) == core["gaps"] - core["dropped"]
    # A core spinning for 2 s is interrupted at least by its timer tick (no nohz_full here).
    if Host(SysRoot("/")).nohz_full_in_effect is None:
        assert core["interrupts"]["LOC"]["count"] > 0 and core["interrupts"]["LOC"]["rate_hz"] > 10
    for v in core["interrupts"].values():
        assert {"count", "rate_hz", "typical_ns", "description"} <= set(v)
    assert doc["sampler"]["reads"] >= 10 and doc["housekeeping_cpu"] == 0
    assert doc["energy"]["available"] in (True, False)
    assert report.read_text().count("Interrupt profile") == 1

    from lowtail.store import open_store
    from lowtail.store.host import interrupt_profile, noise_run

    with open_store(db, read_only=True) as s:
        stored = noise_run(s, "latest")
        profile = interrupt_profile(s, "latest", cpu=1)
    assert stored["cores"][0]["gaps"] == core["gaps"]
    assert {p["kind"] for p in profile} == set(core["interrupts"])


@needs_two_cpus
def test_noise_table_output(tmp_path, capsys):
    code, out, err = cli(capsys, "noise", "--cpus", "1", "--duration", "300ms", "--no-store", "--sample-interval", "0")
    assert code == 0, err
    assert "gaps (exact nearest rank" in out and "CPU 1 interrupts (count-matched" in out
    assert "energy:" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cpus", "4095"], "does not exist or is offline"),
        (["--cpus", "x"], "is not a CPU number"),
        (["--duration", "0s"], "must be positive"),
        (["--duration", "soon"], "cannot read 'soon' as a duration"),
        (["--housekeeping", "4095"], "no such online CPU"),
    ],
)
def test_noise_bad_input(capsys, args, message):
    code, out, err = cli(capsys, "noise", "--no-store", *args)
    assert code == 2 and message in err, err


def test_snapshot_of_the_live_host_audits_like_the_live_host(tmp_path, capsys):
    snap = tmp_path / "snap"
    code, out, err = cli(capsys, "host", "snapshot", snap, "--json")
    assert code == 0, err
    assert json.loads(out)["files"] > 10
    assert (snap / "lowtail-snapshot.json").exists()
    code, live, _ = cli(capsys, "host", "audit", "--json")
    code2, copied, err = cli(capsys, "host", "audit", "--sysroot", snap, "--json")
    assert code == code2 == 0, err
    live, copied = json.loads(live), json.loads(copied)
    # Interrupt counts move between the two reads; every check's verdict must not.
    assert [(c["id"], c["status"]) for c in copied["checks"]] == [(c["id"], c["status"]) for c in live["checks"]]
    assert copied["plan"] == live["plan"]
    code, _, err = cli(capsys, "host", "snapshot", snap)
    assert code == 2 and "is not empty" in err
