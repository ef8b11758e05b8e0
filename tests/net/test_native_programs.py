"""lowtail-gen, lowtail-cap and lowtail-fwd on real veth links in a fresh namespace.

These tests hold on a busy machine as on an idle one: they wait until the frames in flight
have arrived (measured on the interfaces' counters, not a fixed pause), and what they
require is what lowtail's own code guarantees — no frame it took is lost, and its counters
agree with the kernel's. A frame the kernel itself drops under load (a full ring or
receive backlog) must be counted as such; where none was dropped, the figures are exact.
Speed and pacing belong to bench/, which prints them beside a baseline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pyarrow.parquet as pq
import pytest

from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.testbed.system import ip

from .conftest import backlog_drops, link_counters, native, run_native, settle

GEN, CAP, FWD = "lowtail-gen", "lowtail-cap", "lowtail-fwd"


def capture(background, tmp_path, *ifaces: str, extra: tuple[str, ...] = ()):
    """Start lowtail-cap on the interfaces; returns (process, pcap paths)."""
    argv = [native(CAP), "--stats-json", str(tmp_path / "cap.json"), *extra]
    outs = []
    for i, iface in enumerate(ifaces):
        out = tmp_path / (f"side{i}.pcap.zst" if "--zstd" in extra else f"side{i}.pcap")
        argv += ["--iface", iface, "--out", str(out)]
        outs.append(out)
    return background(argv, tmp_path / "cap.json"), outs


def generate(iface: str, tmp_path, *args: str, check: bool = True) -> tuple[subprocess.CompletedProcess, dict]:
    stats = tmp_path / "gen.json"
    r = run_native([native(GEN), "--iface", iface, "--stats-json", str(stats), *args])
    if check:
        assert r.returncode in (0, 3), r.stderr  # 3: this shared machine may stall the pacing
    return r, (json.loads(stats.read_text()) if stats.exists() else {})


def ns_dev(name: str) -> tuple[str, str]:
    """ "lg1@lt123x-lg" → ("lt123x-lg", "lg1")."""
    dev, _, netns = name.partition("@")
    return netns, dev


def arrived(name: str, expect: int) -> int:
    """Wait until the frames sent towards `name` have arrived there (see `settle`)."""
    return settle(*ns_dev(name), expect)


def test_every_generated_frame_is_captured_on_both_sides_and_analyzed(wire, background, tmp_path):
    cap, (pre, post) = capture(background, tmp_path, wire.tx, wire.rx, extra=("--zstd",))
    r, gen = generate(
        wire.tx,
        tmp_path,
        "--rate",
        "20000",
        "--count",
        "10000",
        "--burst",
        "2",
        "--flows",
        "4",
        "--frame-size",
        "128",
        "--first-id",
        "1000",
    )
    arrived(wire.rx, 10000)
    code, err, stats = cap.stop()
    assert code in (0, 3), err  # 3: the kernel dropped frames from a full ring (counted below)
    assert gen["sent"] == gen["planned"] == 10000
    assert (gen["first_id"], gen["last_id"]) == (1000, 10999)
    assert gen["pacing_error_ns"]["samples"] == 5000  # one per burst
    frames = []
    for side in stats["interfaces"]:
        assert_capture_accounts_for(side)
        assert side["timestamp_source"] == "software"
        frames.append(side["frames"])
    assert stats["complete"] is (stats["drops"] == 0)
    assert pre.read_bytes()[:4] == b"\x28\xb5\x2f\xfd", "zstd-compressed"
    doc = analyze_pair(pre, post, AnalyzeOptions(trim_ns=0))
    assert (doc["sent"], doc["received"], doc["duplicates"]) == (frames[0], frames[1], 0)
    if stats["drops"] == 0:
        assert frames == [10000, 10000] and doc["lost"] == 0
    assert doc["latency_ns"]["min"] > 0


def assert_capture_accounts_for(side: dict) -> None:
    """Every frame the kernel handed the capture's socket is in the file, counted as dropped
    by its full ring, or of the direction it does not keep; and as many left or reached the
    interface (its own counters)."""
    assert side["frames"] + side["drops"] + side["skipped_other_direction"] == side["kernel"]["packets"]
    counters = side["iface_counters"]
    assert side["frames"] + side["drops"] in (counters["tx_packets"], counters["rx_packets"]), (side, counters)


def test_a_capture_with_a_duration_stops_by_itself(wire, tmp_path):
    stats = tmp_path / "cap.json"
    r = run_native(
        [
            native(CAP),
            "--iface",
            wire.rx,
            "--out",
            str(tmp_path / "x.pcap"),
            "--duration",
            "300ms",
            "--stats-json",
            str(stats),
        ],
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(stats.read_text())
    assert doc["stopped_by"] == "duration"
    assert 300_000_000 <= doc["duration_ns"] < 5_000_000_000
    assert doc["interfaces"][0]["frames"] == 0 and doc["complete"] is True


def test_the_forwarder_forwards_everything_unchanged(looped, background, tmp_path):
    fwd = background(
        [native(FWD), "--in", looped.dut_in, "--out", looped.dut_out, "--stats-json", str(tmp_path / "fwd.json")],
        tmp_path / "fwd.json",
    )
    cap, (pre, post) = capture(background, tmp_path, looped.tx, looped.rx)
    generate(looped.tx, tmp_path, "--rate", "20000", "--count", "5000", "--vlan", "7")
    arrived(looped.rx, 5000)
    cap_code, _, cap_stats = cap.stop()
    fwd_code, err, fwd_stats = fwd.stop(signal.SIGTERM)
    assert fwd_code == 0 and cap_code in (0, 3), err
    assert fwd_stats["stopped_by"] == "SIGTERM"
    delivered = link_counters(*ns_dev(looped.dut_in))["rx_packets"]
    assert_forwarder_accounts_for(fwd_stats, delivered)
    for side in cap_stats["interfaces"]:
        assert_capture_accounts_for(side)
    pre_frames, post_frames = (s["frames"] for s in cap_stats["interfaces"])
    assert post_frames == fwd_stats["forwarded"] - cap_stats["interfaces"][1]["drops"]
    # Unchanged: the bytes that came back are the bytes that left (VLAN tag included).
    assert pre.read_bytes()[24 + 16 : 24 + 16 + 60] == post.read_bytes()[24 + 16 : 24 + 16 + 60]
    doc = analyze_pair(pre, post, AnalyzeOptions(trim_ns=0))
    assert (doc["sent"], doc["received"]) == (pre_frames, post_frames)
    if fwd_stats["dropped"] == 0 and cap_stats["drops"] == 0 and delivered == 5000:
        assert fwd_stats["received"] == fwd_stats["forwarded"] == post_frames == 5000 and doc["lost"] == 0


def assert_forwarder_accounts_for(fwd: dict, delivered: int) -> None:
    """Nothing the forwarder took is lost by its own code, and every frame the kernel
    delivered to its input reached it or was counted as dropped by its full ring."""
    assert fwd["received"] == fwd["forwarded"] + fwd["drops"]["send_errors"] + fwd["drops"]["oversized"]
    assert fwd["drops"]["send_errors"] == fwd["drops"]["oversized"] == 0
    assert fwd["received"] + fwd["drops"]["rx_ring"] == delivered


def cpu_pressure_us() -> float:
    """Microseconds during which some task waited for a core, so far (PSI; +inf without
    it: then the machine counts as busy)."""
    try:
        line = open("/proc/pressure/cpu").readline()
    except OSError:
        return float("inf")
    return float(line.rsplit("total=", 1)[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_forwarder_that_may_sleep_leaves_its_core_to_others_and_forwards_everything(looped, background, tmp_path):
    # On a shared core the forwarder busy-polls only --spin-us after the last frame: idle,
    # it must not burn its core (other programs there need it), and sleeping must not
    # lose or delay frames by the milliseconds a preempted busy-poller does.
    fwd = background(
        [
            native(FWD),
            "--in",
            looped.dut_in,
            "--out",
            looped.dut_out,
            "--work-ns",
            "2000",
            "--spin-us",
            "10",
            "--stats-json",
            str(tmp_path / "fwd.json"),
        ],
        tmp_path / "fwd.json",
    )
    cap, (pre, post) = capture(background, tmp_path, looped.tx, looped.rx)
    cpu_before, wall_before = cpu_seconds(fwd.proc.pid), time.monotonic()
    pressure_before = cpu_pressure_us()
    _, gen = generate(looped.tx, tmp_path, "--rate", "2000", "--count", "2000")
    arrived(looped.rx, 2000)
    cpu_used = cpu_seconds(fwd.proc.pid) - cpu_before
    wall = time.monotonic() - wall_before
    busy_share = (cpu_pressure_us() - pressure_before) / 1e6 / wall
    cap.stop()
    code, err, fwd_stats = fwd.stop()
    assert code == 0, err
    assert_forwarder_accounts_for(fwd_stats, link_counters(*ns_dev(looped.dut_in))["rx_packets"])
    # 500 µs between frames: it sleeps for nearly every one — unless a busy machine held the
    # generator back and it sent the overdue frames together (its pacing says how often).
    on_time = gen["pacing_error_ns"]["samples"] - gen["late_bursts"]
    assert fwd_stats["sleeps"] >= min(1000, on_time // 2), (fwd_stats["sleeps"], on_time)
    assert cpu_used < 0.5 * wall, f"{cpu_used:.2f} s of CPU in {wall:.2f} s: it did not sleep"
    doc = analyze_pair(pre, post, AnalyzeOptions(trim_ns=0))
    assert doc["received"] == fwd_stats["forwarded"]
    # Sleeping costs a wake-up, not the milliseconds of a preempted busy-poller. That is a
    # figure of the forwarder only where tasks did not wait for the cores meanwhile (the
    # kernel's CPU pressure, measured over the traffic): on a busy machine the veth path
    # itself waits, and the figure is the machine's.
    if busy_share < 0.1:
        assert doc["latency_ns"]["p50"] < 1_000_000, doc["latency_ns"]


@pytest.mark.parametrize("batch", [1, 8])
def test_the_forwarder_holds_a_batch_until_all_of_it_is_processed(looped, background, tmp_path, batch):
    # Bursts of 8 frames, 1 ms apart; 100 µs of work per frame. With batch 8 the frames
    # that were waiting together leave together, after all of them were processed; with
    # batch 1 each leaves after its own work.
    work_ns = 100_000
    fwd = background(
        [
            native(FWD),
            "--in",
            looped.dut_in,
            "--out",
            looped.dut_out,
            "--work-ns",
            str(work_ns),
            "--batch",
            str(batch),
            "--stats-json",
            str(tmp_path / "fwd.json"),
        ],
        tmp_path / "fwd.json",
    )
    cap, (pre, post) = capture(background, tmp_path, looped.tx, looped.rx)
    pressure_before, wall_before = cpu_pressure_us(), time.monotonic()
    generate(looped.tx, tmp_path, "--rate", "8000", "--burst", "8", "--count", "320")
    arrived(looped.rx, 320)
    busy_share = (cpu_pressure_us() - pressure_before) / 1e6 / (time.monotonic() - wall_before)
    cap.stop()
    _, _, fwd_stats = fwd.stop()
    assert_forwarder_accounts_for(fwd_stats, link_counters(*ns_dev(looped.dut_in))["rx_packets"])
    assert fwd_stats["forwarded"] == 320  # 320 frames never fill its 4096-frame ring
    if batch == 1:
        assert fwd_stats["batch_size"]["max"] == 1
    else:
        assert 2 <= fwd_stats["batch_size"]["max"] <= 8
    series = tmp_path / "series.parquet"
    analyze_pair(pre, post, AnalyzeOptions(trim_ns=0, export=str(series)))
    rows = sorted(zip(*pq.read_table(series, columns=["post_ts_ns", "latency_ns"]).to_pydict().values()))
    assert len(rows) == 320
    # Every frame got its work, whatever the machine did meanwhile.
    assert min(latency for _, latency in rows) >= work_ns
    if busy_share >= 0.1:
        # Preempted while it works, the forwarder finds the work time passed when it runs
        # again: batches then leave closer together than their work, and cannot be told
        # apart by their departures. What follows needs a machine that let it run.
        return
    # Frames leaving less than 40 µs apart left in one batch (work keeps batches ≥ 100 µs apart).
    batches, current = [], [rows[0]]
    for prev, row in zip(rows, rows[1:]):
        if row[0] - prev[0] < 40_000:
            current.append(row)
        else:
            batches.append(current)
            current = [row]
    batches.append(current)
    if batch == 1:
        assert len(batches) == 320
    else:
        assert max(len(b) for b in batches) >= 2
        assert len(batches) < 320 * 0.75
    for b in batches:
        # Nothing of a batch leaves before the work for the whole batch is done.
        assert min(latency for _, latency in b) >= len(b) * work_ns


def test_capture_drops_are_counted_not_silent(wire, background, tmp_path):
    cap, _ = capture(background, tmp_path, wire.rx, extra=("--ring-mb", "1"))
    # A stopped capture cannot drain its 1 MiB ring (~7000 small frames): the rest is dropped.
    cap.proc.send_signal(signal.SIGSTOP)
    try:
        generate(wire.tx, tmp_path, "--rate", "100000", "--count", "20000", "--burst", "16")
    finally:
        cap.proc.send_signal(signal.SIGCONT)
    arrived(wire.rx, 20000)
    code, err, stats = cap.stop()
    side = stats["interfaces"][0]
    assert code == 3, err
    assert "dropped" in err and "incomplete" in err
    assert side["drops"] > 0
    assert_capture_accounts_for(side)
    assert stats["complete"] is False


def test_hardware_timestamps_are_detected_and_refused_where_missing(wire, tmp_path):
    r = run_native(
        [
            native(CAP),
            "--iface",
            wire.rx,
            "--out",
            str(tmp_path / "x.pcap"),
            "--timestamps",
            "hardware",
            "--duration",
            "0.1",
        ]
    )
    assert r.returncode == 2
    assert "cannot stamp received frames in hardware" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_pinned_generator_owns_its_core_at_real_time_priority(wire, tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("on a single core the generator keeps ordinary scheduling")
    common = ("--rate", "10000", "--count", "200", "--cpu", str(cores[-1]))
    _, gen = generate(wire.tx, tmp_path, *common)
    assert gen["scheduling"] == "SCHED_FIFO 40"
    _, gen = generate(wire.tx, tmp_path, *common, "--rt-priority", "0")
    assert gen["scheduling"] == "SCHED_OTHER"
    _, gen = generate(wire.tx, tmp_path, "--rate", "10000", "--count", "200")
    assert gen["scheduling"] == "SCHED_OTHER", "not pinned: no real-time priority"
    # On a core other tasks use: ordinary scheduling at the highest weight instead.
    _, gen = generate(wire.tx, tmp_path, *common, "--nice", "-20")
    assert gen["scheduling"] == "SCHED_OTHER nice -20"


def test_a_rate_out_of_reach_is_reported_not_hidden(wire, tmp_path):
    r, gen = generate(wire.tx, tmp_path, "--rate", "50000000", "--count", "200000", check=False)
    assert r.returncode == 3
    assert "could not keep up" in r.stderr
    assert gen["kept_up"] is False
    assert gen["sent"] == 200000
    assert gen["achieved_rate_pps"] < 50_000_000 * 0.5


def test_signals_stop_every_program_cleanly_with_statistics(looped, background, tmp_path):
    fwd = background(
        [native(FWD), "--in", looped.dut_in, "--out", looped.dut_out, "--stats-json", str(tmp_path / "fwd.json")],
        tmp_path / "fwd.json",
    )
    stats = tmp_path / "gen.json"
    gen = subprocess.Popen(
        [native(GEN), "--iface", looped.tx, "--rate", "10000", "--duration", "60", "--stats-json", str(stats)],
        stderr=subprocess.PIPE,
        text=True,
    )
    backlog_before = backlog_drops()
    try:
        time.sleep(0.2)
        gen.send_signal(signal.SIGINT)
        _, err = gen.communicate(timeout=30)
    finally:
        if gen.poll() is None:
            gen.kill()
    assert gen.returncode == 130, err
    doc = json.loads(stats.read_text())
    assert doc["interrupted"] is True and 0 < doc["sent"] < doc["planned"]
    arrived(looped.rx, doc["sent"])  # forwarded and back: the forwarder has taken them
    delivered = link_counters(*ns_dev(looped.dut_in))["rx_packets"]
    code, _, fwd_stats = fwd.stop(signal.SIGTERM)
    assert code == 0
    assert_forwarder_accounts_for(fwd_stats, delivered)
    # What the generator sent reached the forwarder, unless the host's backlog dropped it.
    assert doc["sent"] - (backlog_drops() - backlog_before) <= delivered <= doc["sent"]


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs filled to the last byte: every write into it fails with ENOSPC."""
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    try:
        with open(mount / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_stderr_is_no_reason_to_panic(wire, tmp_path):
    """stderr on a full device (a full disk under the program's log): the generator goes
    on, its statistics and exit code tell what happened — no panic (exit 101)."""
    stats = tmp_path / "gen.json"
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [native(GEN), "--iface", wire.tx, "--rate", "1000", "--count", "100", "--stats-json", str(stats)],
            stderr=full,
            timeout=60,
        )
    assert r.returncode in (0, 3)  # 3: this shared machine may stall the pacing
    assert json.loads(stats.read_text())["sent"] == 100


def test_a_full_disk_is_its_own_exit_code_and_the_runs_reason(wire, full_disk, tmp_path):
    """Statistics that cannot be written for a full disk: the documented exit code for it,
    one line saying so, and the experiment's reason for the run says "disk full" from that
    code (not from the program's log text)."""
    from lowtail._native import PROGRAM_EXIT_CODES
    from lowtail.experiment.measure import _disk_full_or
    from lowtail.testbed.process import Program

    argv = [native(GEN), "--iface", wire.tx, "--rate", "1000", "--count", "10"]
    r = run_native([*argv, "--stats-json", str(full_disk / "gen.json")])
    assert r.returncode == PROGRAM_EXIT_CODES["disk_full"] == 4, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "disk full" in r.stderr, r.stderr
    assert not list(full_disk.glob("gen.json*"))
    program = Program("generator", [*argv, "--stats-json", str(full_disk / "gen.json")], tmp_path / "gen.log")
    assert program.wait(60) == 4
    assert _disk_full_or(program, "the traffic generator failed").startswith("disk full: generator")
    other = Program("generator", [*argv, "--stats-json", str(tmp_path / "gen.json")], tmp_path / "ok.log")
    assert other.wait(60) in (0, 3)
    assert _disk_full_or(other, "the traffic generator failed") == "the traffic generator failed"


def test_a_capture_on_a_full_disk_exits_with_the_disk_full_code(wire, background, full_disk, tmp_path):
    cap = background(
        [native(CAP), "--iface", wire.rx, "--out", str(full_disk / "x.pcap"), "--stats-json", str(tmp_path / "c.json")],
        tmp_path / "c.json",
    )
    generate(wire.tx, tmp_path, "--rate", "20000", "--count", "20000", "--frame-size", "1000")
    arrived(wire.rx, 20000)
    code, err, _ = cap.stop()
    assert code == 4, err
    assert "disk full" in err


def test_lowtail_noise_on_a_full_disk_exits_with_the_disk_full_code(full_disk, tmp_path):
    """lowtail-noise's results (stdout) and gap files: a full disk is exit code 4 and one
    line saying so, as for the other programs — never a panic."""
    argv = [native("lowtail-noise"), "--cpu", "0", "--duration", "10ms"]
    with open("/dev/full", "w") as full:
        r = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 4, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "disk full" in r.stderr, r.stderr
    r = run_native([*argv, "--threshold-ns", "1", "--gaps-dir", str(full_disk)])
    assert r.returncode == 4, r.stderr
    assert "disk full" in r.stderr and "cpu0.gaps" in r.stderr, r.stderr
    with open("/dev/full", "w") as full:  # its usage on a full stderr: still exit 2
        r = subprocess.run([*argv[:1], "--no-such-flag"], stderr=full, timeout=60)
    assert r.returncode == 2


@pytest.mark.parametrize(
    "program,args,message",
    [
        (GEN, ["--iface", "nosuch0", "--rate", "1000", "--count", "1"], "no such interface: nosuch0"),
        (GEN, ["--iface", "lg0@lowtail-no-such-ns", "--rate", "1000", "--count", "1"], "no such network namespace"),
        (GEN, ["--iface", "{tx}", "--rate", "1000", "--count", "1", "--cpu", "4096"], "cannot pin to core 4096"),
        (GEN, ["--iface", "{tx}", "--rate", "1000", "--count", "1", "--frame-size", "1600"], "needs an MTU"),
        (GEN, ["--iface", "{tx}", "--rate", "1000", "--count", "1", "--rt-priority", "100"], "outside 1..99"),
        (GEN, ["--iface", "{tx}", "--rate", "1000", "--count", "1", "--nice", "-21"], "outside -20..19"),
        (
            GEN,
            ["--iface", "{tx}", "--rate", "1000", "--count", "1", "--rt-priority", "5", "--nice", "0"],
            "--nice applies to ordinary scheduling",
        ),
        (CAP, ["--iface", "{tx}", "--out", "/nonexistent/dir/x.pcap"], "cannot create"),
        (CAP, ["--iface", "{tx}", "--iface", "{rx}", "--out", "x.pcap"], "one --out per --iface"),
        (FWD, ["--in", "{tx}", "--out", "nosuch1"], "no such interface: nosuch1"),
        (FWD, ["--in", "{tx}", "--out", "{rx}", "--batch", "0"], "--batch must be at least 1"),
    ],
)
def test_bad_set_up_is_one_clear_line_and_exit_2(wire, program, args, message):
    argv = [native(program), *[a.format(tx=wire.tx, rx=wire.rx) for a in args]]
    r = run_native(argv, timeout=30)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_down_interface_is_named(wire):
    ip("-n", wire.tb.lg_ns, "link", "set", "lg0", "down", what="taking lg0 down")
    r = run_native([native(GEN), "--iface", wire.tx, "--rate", "1000", "--count", "1"])
    assert r.returncode == 2
    assert "is down" in r.stderr and "ip link set lg0 up" in r.stderr


def test_without_privileges_it_says_what_is_needed(wire):
    if subprocess.run(["setpriv", "--help"], capture_output=True).returncode != 0:
        pytest.skip("needs setpriv (util-linux) to drop privileges")
    # Inside the namespace already (ip netns exec), as nobody with no capabilities.
    r = run_native(
        [
            "ip",
            "netns",
            "exec",
            wire.tb.lg_ns,
            "setpriv",
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--inh-caps=-all",
            native(GEN),
            "--iface",
            "lg0",
            "--rate",
            "1000",
            "--count",
            "1",
        ]
    )
    assert r.returncode == 2, r.stderr
    assert "CAP_NET_RAW" in r.stderr


@pytest.mark.parametrize("program", [GEN, CAP, FWD])
def test_every_program_explains_itself(program):
    r = run_native([native(program), "--help"], timeout=30)
    assert r.returncode == 0
    assert "Exit codes" in r.stdout
    assert "--stats-json" in r.stdout and "--cpu" in r.stdout


@pytest.mark.parametrize("frame_size", [64, 1518])
def test_a_frame_size_counts_the_fcs_which_a_capture_does_not_show(wire, background, tmp_path, frame_size):
    """RFC 2544's frame sizes (64 to 1518) are sizes on the wire, FCS included: the frame
    sent and captured is the FCS shorter (a 1518 B frame is captured as 1514 B)."""
    from lowtail import _native

    cap, (pre,) = capture(background, tmp_path, wire.tx, extra=("--snaplen", "2048"))
    generate(wire.tx, tmp_path, "--rate", "1000", "--count", "20", "--frame-size", str(frame_size))
    arrived(wire.rx, 20)
    code, err, _ = cap.stop()
    assert code == 0, err
    assert _record_lengths(pre) == {(frame_size - _native.FCS_BYTES, frame_size - _native.FCS_BYTES)}


def _record_lengths(path) -> set[tuple[int, int]]:
    """(captured, original) length of every record of a little-endian pcap file, read by
    hand: 24 bytes of file header, then 16 of record header (seconds, fraction, captured
    length, original length) before each frame."""
    import struct

    data = path.read_bytes()
    at, found = 24, set()
    while at < len(data):
        _, _, incl, orig = struct.unpack_from("<IIII", data, at)
        found.add((incl, orig))
        at += 16 + incl
    return found
