"""`lowtail run` end to end, as a user runs it: a real process, real namespaces, the native
generator and timestamper, the database, Ctrl-C, SIGTERM, SIGKILL, a full disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_dpdk, needs_root, resources_of  # noqa: E402

from lowtail.core.binaries import find_binary  # noqa: E402
from lowtail.core.errors import UserError  # noqa: E402
from lowtail.experiment.measure import GENERATOR_BEHIND_REASON  # noqa: E402
from lowtail.testbed.cores import DUT_RT_PRIORITY, CoreRoles  # noqa: E402
from lowtail.testbed.duts import LowtailFwd, options_from_json  # noqa: E402


def _native_programs_installed() -> bool:
    try:
        for name in ("lowtail-gen", "lowtail-cap", "lowtail-fwd"):
            find_binary(name)
    except UserError:
        return False
    return True


needs_programs = pytest.mark.skipif(
    not _native_programs_installed(), reason="lowtail-gen/-cap/-fwd are not built (make build)"
)
pytestmark = [needs_root, needs_programs, pytest.mark.root]

LOWTAIL = [sys.executable, "-m", "lowtail"]
MIRRED = [
    "tc qdisc add dev {in} ingress",
    "tc filter add dev {in} parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev {out}",
]


def experiment(
    tmp_path: Path, duts: str, rates=(5000,), duration="1s", warmup="200ms", calibrate=False, name="t"
) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[experiment]
name = "{name}"
duration = "{duration}"
warmup = "{warmup}"
calibrate = {str(calibrate).lower()}
[traffic]
rates = {[f"{r}pps" for r in rates]}
{duts}
""")
    return path


def lowtail(tmp_path: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    """Run the command; the result also carries its pid, to check what it left behind."""
    proc = subprocess.Popen(
        [*LOWTAIL, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    stdout, stderr = proc.communicate(timeout=600)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    done.pid = proc.pid
    return done


def run_json(tmp_path: Path, toml: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    done = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), "--json", *extra)
    return done, (json.loads(done.stdout) if done.stdout.strip() else [])


def db_rows(tmp_path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def _ctrl_c_as_at_a_terminal() -> None:
    """A shell starts background jobs with SIGINT ignored, and Python keeps an inherited
    ignore (as it should: that is nohup's promise). Under `make test &` the command would
    then never see the test's Ctrl-C; give it the disposition a terminal gives."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(tmp_path: Path, toml: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*LOWTAIL, "run", str(toml), "--db", str(tmp_path / "t.duckdb")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )


def wait_for(predicate, timeout: float = 120.0, watching: subprocess.Popen | None = None) -> None:
    """Wait until the predicate holds. With `watching`, a run that ends first fails at once with
    what it said, and one still going at the deadline is interrupted and its words shown: a
    timeout alone says nothing of why."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if watching is not None and watching.poll() is not None:
            _, stderr = watching.communicate()
            raise AssertionError(f"the run ended (exit {watching.returncode}) first: {stderr[-4000:]}")
        if time.monotonic() >= deadline:
            said = ""
            if watching is not None:
                watching.send_signal(signal.SIGINT)
                try:
                    said = watching.communicate(timeout=60)[1][-4000:]
                except subprocess.TimeoutExpired:
                    watching.kill()
                    said = "(no end 60 s after an interrupt) " + watching.communicate()[1][-4000:]
            raise AssertionError(f"timed out after {timeout} s: {said}")
        time.sleep(0.05)


def run_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "lowtail-data").glob("experiment-*/0*"))


ALL_KINDS = f"""
[[dut]]
name = "kernel"
kind = "kernel-mirred"
[[dut]]
name = "bridge"
kind = "bridge"
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = 1000
batch = 4
[[dut]]
name = "mine"
kind = "custom"
setup = {json.dumps(MIRRED)}
"""
DPDK = """
[[dut]]
name = "pmd"
kind = "dpdk-testpmd"
containment = "container"
"""


def trusted(run: dict) -> bool:
    """Valid, or invalid only because the shared host's cores kept the generator from its
    schedule: the tests check the testbed, not how busy the machine is."""
    return all(r.startswith(GENERATOR_BEHIND_REASON) for r in run["invalid_reasons"])


def _check_clean_run(run: dict, seconds: float = 1.0, warmup: float = 0.2) -> None:
    """The generator sent warm-up + duration at the rate; the analysis cut the warm-up, and
    every frame after it is accounted for."""
    label = f"{run['dut']} ({run['kind']})"
    assert trusted(run), f"{label}: {run['invalid_reasons']}"
    assert run["generator"]["sent"] == round(run["rate_pps"] * (seconds + warmup)), label
    # The analysis cut the warm-up (by time: how many frames that is depends on how evenly
    # a busy host let the generator send them).
    assert 0 < run["sent"] < run["generator"]["sent"], label
    assert run["received"] + run["lost"] == run["sent"], label
    # Loss beyond 1 % must be the kernel's, and counted by it: frames a loaded host dropped
    # from its receive backlogs, or the forwarder's full ring.
    counted = run["capture"].get("host_backlog_drops", 0) + (run["dut_stats"] or {}).get("dropped", 0)
    assert run["lost"] <= run["sent"] // 100 + counted, f"{label}: lost {run['lost']}, counted {counted}"
    lat = run["latency_ns"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99_999"] <= lat["max"], label
    assert lat["samples"] == run["received"], label
    assert pq.read_table(run["series_path"]).num_rows == run["received"], label


def test_every_installed_dut_kind_end_to_end_with_calibration_and_report(tmp_path):
    import shutil

    with_dpdk = shutil.which("dpdk-testpmd") is not None
    toml = experiment(tmp_path, ALL_KINDS + (DPDK if with_dpdk else ""), calibrate=True)
    done, runs = run_json(tmp_path, toml, "--report", str(tmp_path / "r.html"))
    trustworthy = all(r["valid"] and not r["degraded_reasons"] for r in runs)
    assert done.returncode == (0 if trustworthy else 3), done.stderr
    kinds = ["wire", "kernel-mirred", "bridge", "lowtail-fwd", "custom"] + (["dpdk-testpmd"] if with_dpdk else [])
    assert [r["kind"] for r in runs] == kinds
    for run in runs:
        _check_clean_run(run)
        assert run["calibration"] == (run["kind"] == "wire")
        assert run["calibration"] or run["calibration_floor"]["run_id"] == runs[0]["run_id"]
    fwd = next(r for r in runs if r["kind"] == "lowtail-fwd")
    assert fwd["dut_config"] == {
        "work_ns": 1000,
        "batch": 4,
        "spin_us": None,
        "batch_timeout_us": None,
        "containment": "bare",
        "cpus": None,
        "memory_reservation": 256,
    }
    assert all(r["virtualization"] is None for r in runs)
    # Not alone on an isolated core, the forwarder must sleep when idle (else frames wait
    # milliseconds for it).
    assert fwd["dut_stats"]["spin_us"] == LowtailFwd("f", options_from_json("lowtail-fwd", fwd["dut_config"])).spin_us(
        CoreRoles.for_host()
    )
    assert fwd["dut_stats"]["scheduling"] == f"SCHED_FIFO {DUT_RT_PRIORITY}"
    if with_dpdk:
        pmd = runs[-1]
        assert pmd["containment"]["mode"] == "container" and pmd["dut_stats"]["tx_packets"] >= pmd["received"]
        # It never sleeps: where the plan puts it beside the testbed's own programs, the run
        # says so, and it runs at a priority that keeps the core (else a busy host starves it).
        plan = CoreRoles.for_host()
        warned = [w for w in pmd["degraded_reasons"] if w.startswith("core plan: dpdk-testpmd busy-polls")]
        assert bool(warned) == plan.shared(plan.dut), pmd["degraded_reasons"]
        assert pmd["containment"]["scheduling"] in ("nice -n -20", f"chrt -f {DUT_RT_PRIORITY}")
    stored = db_rows(tmp_path, "SELECT count(*), count(analysis_id), count(*) FILTER (valid) FROM runs")
    assert stored == [(len(kinds), len(kinds), sum(r["valid"] for r in runs))]
    # Each run's analysis is labelled with its rate in words ("t: fwd @ 5 kpps", was "… @ 5000 pps").
    labels = [label for (label,) in db_rows(tmp_path, "SELECT label FROM analyses ORDER BY analysis_id")]
    assert labels[0] == f"t: {runs[0]['dut']} @ 5 kpps" and all(label.endswith("@ 5 kpps") for label in labels)
    (host,) = db_rows(tmp_path, "SELECT host FROM experiments")[0]
    host = json.loads(host)
    assert {"kernel", "kernel_cmdline", "cpu_model", "core_plan", "lowtail_version", "command"} <= set(host)
    html = (tmp_path / "r.html").read_text()
    assert "Verdict" in html and html.count("class='lt-plot-spec'") >= 2 * len(kinds) - 1 and "inconclusive" in html
    assert resources_of(done.pid) == []


def _netns() -> list[str]:
    from lowtail.testbed.registry import list_netns

    return list_netns()


def test_ctrl_c_keeps_finished_runs_removes_everything_and_the_same_command_resumes(tmp_path):
    toml = experiment(tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n', rates=(5000, 6000, 7000))
    proc = start_run(tmp_path, toml)
    wait_for(lambda: len(run_dirs(tmp_path)) >= 2, watching=proc)  # the first run is stored, the second has begun
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted: 1 of 3 runs of experiment 1 are stored" in stderr
    assert "Traceback" not in stderr
    assert resources_of(proc.pid) == []
    assert [d.name.split("-")[0] for d in run_dirs(tmp_path)] == ["0000"]  # the half-done run is gone
    assert db_rows(tmp_path, "SELECT status FROM experiments") == [("interrupted",)]
    assert db_rows(tmp_path, "SELECT rate_pps FROM runs") == [(5000,)]

    done, runs = run_json(tmp_path, toml, "--strict")  # `run`'s end gates on the device's verdict
    status = runs[0]["device_verdict"]["status"]
    # 4 on FAIL; else 3 when a run is untrustworthy (a busy host's generator fell behind); else 0 on PASS, 5 not
    gated = {"FAIL": (4,), "PASS": (0, 3)}.get(status, (3, 5))
    assert done.returncode in gated, (status, done.stderr)
    assert all(trusted(r) for r in runs)
    assert "resumed experiment 1: 1 run was already stored, 2 measured now" in done.stderr
    assert [r["rate_pps"] for r in runs] == [5000, 6000, 7000]
    assert {r["experiment_id"] for r in runs} == {1}
    assert db_rows(
        tmp_path,
        "SELECT status, count(DISTINCT combination_key) FROM experiments JOIN runs "
        "USING (experiment_id) GROUP BY status",
    ) == [("finished", 3)]


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path):
    toml = experiment(tmp_path, '[[dut]]\nname = "f"\nkind = "lowtail-fwd"\n', duration="3s")
    proc = start_run(tmp_path, toml)
    wait_for(lambda: (d := run_dirs(tmp_path)) and (d[0] / "generator.log").exists())
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted: 0 of 1 runs" in stderr, stderr
    assert resources_of(proc.pid) == []


def _netns_pids(namespace: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()


@pytest.mark.leftovers
def test_testbed_clean_removes_a_killed_runs_leftovers_and_nothing_of_live_ones(tmp_path):
    from lowtail.testbed.topology import NamespacesTestbed as SoftTestbed

    toml = experiment(tmp_path, '[[dut]]\nname = "f"\nkind = "lowtail-fwd"\n', duration="20s")
    with SoftTestbed(tmp_path / "live") as live:
        proc = start_run(tmp_path, toml)
        # Killed once the run's programs are up (on a loaded machine the generator's log
        # appears before its process does): then there are processes for clean to stop.
        wait_for(
            lambda: (
                (d := run_dirs(tmp_path))
                and (d[0] / "generator.log").exists()
                and any(_netns_pids(ns) for ns in _netns() if ns.startswith(f"lt{proc.pid}x"))
            )
        )
        proc.kill()
        proc.wait()
        assert any(x.endswith("-dut") for x in resources_of(proc.pid))
        done = lowtail(tmp_path, "testbed", "clean", "--json")
        assert done.returncode == 0, done.stderr
        removed = json.loads(done.stdout)["removed"]
        assert any(r["owner_pid"] == proc.pid and r["netns"] for r in removed)
        assert not any(r["tag"] == live.tag for r in removed)
        assert resources_of(proc.pid) == []
        assert set(live.namespaces) <= set(_netns())


def test_a_rate_the_generator_cannot_reach_is_said_and_marked_invalid(tmp_path):
    toml = experiment(
        tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n', rates=(20_000_000,), duration="100ms", warmup="0s"
    )
    done, runs = run_json(tmp_path, toml)
    assert done.returncode == 3, done.stderr
    assert not runs[0]["valid"]
    assert any(r.startswith(GENERATOR_BEHIND_REASON + ": achieved") for r in runs[0]["invalid_reasons"])
    assert "1 of 1 runs invalid" in done.stderr.splitlines()[-1] and GENERATOR_BEHIND_REASON in done.stderr


def test_a_dut_that_crashes_mid_run_is_reported_and_the_next_run_still_happens(tmp_path):
    # A userspace forwarder killed 1.5 s after it started: it forwards the first part of the run only.
    crashing = f"timeout -s KILL 1.5 {find_binary('lowtail-fwd')} --in {{in}} --out {{out}}"
    duts = (
        f'[[dut]]\nname = "crashy"\nkind = "custom"\ncommand = "{crashing}"\n'
        '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n'
    )
    toml = experiment(tmp_path, duts, duration="3s")
    done, runs = run_json(tmp_path, toml)
    assert done.returncode == 3, done.stderr
    crash, ok = runs
    reasons = " ".join(crash["invalid_reasons"])
    assert not crash["valid"] and "was killed by signal 9" in reasons and "while traffic was flowing" in reasons
    assert crash["lost"] > 0  # what it did forward before dying is measured
    assert trusted(ok), ok["invalid_reasons"]
    assert resources_of(done.pid) == []


def test_missing_privileges_say_what_is_needed():
    import tempfile

    with tempfile.TemporaryDirectory() as shared:  # pytest's tmp_path is private to root
        home = Path(shared)
        home.chmod(0o777)
        toml = experiment(home, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n')
        done = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                *LOWTAIL,
                "run",
                str(toml),
                "--db",
                str(home / "t.duckdb"),
            ],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "lowtail run needs root" in done.stderr and "CAP_NET_ADMIN" in done.stderr
        assert not (home / "t.duckdb").exists()


@needs_dpdk
def test_dpdk_missing_is_a_clear_message_before_anything_runs(tmp_path):
    toml = experiment(tmp_path, DPDK)
    env = os.environ | {"PATH": str(Path(sys.executable).parent)}
    done = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), env=env)
    assert done.returncode == 2
    assert "needs DPDK" in done.stderr and "apt-get install dpdk-dev" in done.stderr
    assert not (tmp_path / "t.duckdb").exists()


def test_a_full_disk_stops_the_sweep_keeping_finished_runs(tmp_path):
    data = tmp_path / "small"
    data.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(data)], check=True)
    try:
        toml = experiment(tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n', rates=(5000, 200_000))
        done = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / "t.duckdb"), "--data-dir", str(data))
        assert done.returncode == 1, done.stderr
        assert "not enough disk space" in done.stderr and "finished runs are kept" in done.stderr
        assert db_rows(tmp_path, "SELECT rate_pps FROM runs") == [(5000,)]
        assert db_rows(tmp_path, "SELECT status FROM experiments") == [("failed",)]
    finally:
        subprocess.run(["umount", str(data)], check=True)


def test_calibrate_measures_the_wire_at_the_experiments_rates(tmp_path):
    toml = experiment(tmp_path, '[[dut]]\nname = "k"\nkind = "kernel-mirred"\n', rates=(5000, 8000))
    done = lowtail(tmp_path, "calibrate", str(toml), "--db", str(tmp_path / "t.duckdb"), "--json")
    assert done.returncode in (0, 3), done.stderr
    runs = json.loads(done.stdout)
    assert [(r["kind"], r["rate_pps"], r["calibration"]) for r in runs] == [("wire", 5000, True), ("wire", 8000, True)]
    for r in runs:
        _check_clean_run(r)
