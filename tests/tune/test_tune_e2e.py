"""`lowtail tune` end to end on the namespace testbed: a SCHED_FIFO task above the testbed's
programs, pinned to the DuT's core, busy 1.5 ms every 50 ms (an untuned host's intruder).

tune must propose moving the other tasks off that core (`other-tasks`; its cause names the
intruder when explain saw it), apply it, measure again, and keep it only when the comparison
calls the improvement at the judged percentile; then measure a change that cannot help
(vm.stat_interval, unrelated to the intruder) and undo it. At the end the host's settings
read back as exactly the kept set, and the before and after runs' fingerprints differ
exactly in what was applied.

Judged where this kind of machine resolves it: at p99. The intruder holds the DuT's core 3 % of
the time, so about 3 % of the packets wait behind it — p99 moves by hundreds of µs, far beyond
this VM's noise — while p99.9 is set by the hypervisor here (29 % steal, p99.9 of 7-10 ms with
no intruder at all). Whether a host resolves p99 in 6 s repetitions (60,000 packets, 600 above
p99) is the host's: this one mostly did in 10 s (25 s were needed on a noisier day), a fresh CI
host with more steal said a repetition would take "about 3,750,000 packets". So the test holds
tune to its contract on either host: a move the comparison calls an improvement without harm is
kept, its undo file written, the host reading as the kept set; a move it cannot call is undone
with the reason said, and the host reads as before. (A heavier intruder does not help: moved to
the housekeeping core it stalls the generator, whose catch-up bursts queue at the DuT.) The
host is shared and busy: the generator's stalls up to 50 ms do not degrade a run. All changes
at once as one trial (kept or undone together, one undo file) is
tests/tune/test_tune_every_kind.py's, with every kind of change this host allows. Whatever a
failing test leaves kept is undone (the move includes the test's own processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "explain"))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402
from test_injected import HOG, HOG_PRIORITY, HOG_SOURCE  # noqa: E402

from lowtail.compare.resolution import resolution  # noqa: E402
from lowtail.host.facts import Host  # noqa: E402
from lowtail.host.plan import resolve_plan  # noqa: E402
from lowtail.host.state import differing  # noqa: E402
from lowtail.host.sysroot import SysRoot  # noqa: E402
from lowtail.store import open_store  # noqa: E402
from lowtail.store import runs as runstore  # noqa: E402
from lowtail.testbed.cores import CoreRoles  # noqa: E402

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow, pytest.mark.host]

LOWTAIL = [sys.executable, "-m", "lowtail"]
PLAN = CoreRoles.for_host()
EXPERIMENT = """
[experiment]
name = "tune-e2e"
duration = "6s"
warmup = "300ms"
repetitions = 3
calibrate = false
[traffic]
rates = ["10000pps"]
[verdict]
percentile = 99
[trust]
max_stall = "50ms"
max_pacing_p99 = "50ms"
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = 0
"""
STAT_INTERVAL = Path("/proc/sys/vm/stat_interval")
# The one core plan of this host (host/plan.py, what `host plan` and tune say): tune moves
# tasks off its isolated cores, to its housekeeping ones.
ONE = resolve_plan(Host(SysRoot("/")))
HOUSEKEEPING = set(ONE.housekeeping)
# The intruder's core: the DuT's, which the plan isolates on every host of two CPUs or more.
TARGET = PLAN.dut[0]


@pytest.fixture(scope="module")
def intruder():
    """The hog on the DuT's core, one for the module (the before the test starts from was
    measured with it); killed (and so off every core) after the test."""
    proc = subprocess.Popen([sys.executable, "-c", HOG_SOURCE, HOG, str(TARGET), str(HOG_PRIORITY), "0.0015", "0.05"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(autouse=True)
def kept_changes_undone(tmp_path):
    """Should an assertion stop a test while tune's changes are kept, they are undone (the
    move includes this test's own processes), and vm.stat_interval goes back."""
    before = STAT_INTERVAL.read_text()
    yield
    for kept in tmp_path.glob("lowtail-tune-*.undo.json"):
        subprocess.run([*LOWTAIL, "host", "undo", str(kept), "--force"], capture_output=True)
    if STAT_INTERVAL.read_text() != before:
        STAT_INTERVAL.write_text(before)


def tune(where: Path, *args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [*LOWTAIL, "tune", str(where / "t.toml"), "--db", str(where / "t.duckdb"), "--json", *args],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=900,
    )
    doc = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, doc, done.stderr


def fingerprints(where: Path, experiment: int) -> list[dict]:
    with open_store(where / "t.duckdb", read_only=True) as store:
        return [r["host_state"] for r in runstore.runs(store, experiment)]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, intruder):
    """tune's dry run (the test tries its changes `--before` it): the database, what it
    planned, what it said, and vm.stat_interval as it read."""
    if not HOUSEKEEPING:
        pytest.skip("one CPU: there is no other core to move a task to")
    where = tmp_path_factory.mktemp("tune-e2e")
    (where / "t.toml").write_text(EXPERIMENT)
    stat_before = STAT_INTERVAL.read_text().strip()
    code, planned, stderr = tune(where)
    assert code == 0, stderr
    return where, planned, stderr, stat_before


def test_tune_keeps_moving_the_intruder_off_the_duts_core_and_undoes_what_cannot_help(dry_run, tmp_path, intruder):
    # The dry run measured, explained and proposed, and changed nothing.
    where, planned, stderr, stat_before = dry_run
    assert planned["dry_run"] and all(c["kept"] is None for c in planned["changes"])
    move = "other-tasks"
    ids = [c["id"] for c in planned["changes"]]
    assert move in ids, planned["changes"]  # the intruder (and this test) are allowed on the DuT's core
    proposed = next(c for c in planned["changes"] if c["id"] == move)
    if proposed["cause"].startswith("preemption"):  # explain saw a task take the DuT's core
        assert proposed["cause"].startswith(f"preemption on CPU {TARGET}")
    if HOG in proposed["cause"]:  # the intruder itself (on a shared host another task may lead)
        assert f"move-pid-{intruder.pid}" in ids
    else:
        print(f"explain named {proposed['cause']!r}, not the intruder; tune said: {planned['unseen']}")
    assert proposed["remedy"]["id"] == "move-tasks-off-dut-cores" and proposed["remedy"]["source"]
    assert os.sched_getaffinity(intruder.pid) == {TARGET} and STAT_INTERVAL.read_text().strip() == stat_before
    # tune names the cores `host plan` names: the one plan of this host and experiment.
    assert planned["boot"]["plan"]["isolated"] == list(ONE.isolated)
    # Whether the before's repetitions can resolve the judged percentile is said before anything is tried.
    resolved = planned["resolution"]
    assert resolved["percentile"] == "p99" and resolved["bounded"] == (resolved["why"] is None)
    if not resolved["bounded"]:
        assert " ".join(resolved["why"].split()) in " ".join(stderr.split())
        print(f"this host: {resolved['why']}")
    # The boot-time remedy is planned with the GRUB line.
    assert "isolcpus" in {p["name"] for p in planned["boot"]["params"]} and "GRUB_CMDLINE" in planned["boot"]["grub"]

    code, doc, stderr = tune(
        where,
        "--yes",
        "--one-by-one",
        "--before",
        str(planned["before"]),
        "--only",
        f"{move},vm.stat_interval",
        "--undo-dir",
        str(tmp_path),
        "-o",
        str(tmp_path / "tune.html"),
    )
    assert code == 0, stderr
    tried = {c["id"]: c for c in doc["changes"]}
    assert set(tried) == {move, "vm.stat_interval"}
    # The change that cannot help: measured, not an improvement, undone.
    useless = tried["vm.stat_interval"]
    assert useless["kept"] is False and useless["improved"] is False and useless["after"] is not None
    assert useless["undo_file"] is None and doc["undone"].count("vm.stat_interval") == 1
    # The move: kept exactly when the comparison called the improvement at p99 without harm
    # (printed: the figure is this host's, the decision the test's).
    moved = tried[move]
    print(f"other-tasks: {moved['effect']}")
    assert moved["kept"] == (moved["improved"] and not moved["harmed"]), moved
    if moved["improved"]:
        assert f"experiment {moved['after']} is lower than experiment {moved['baseline']} at p99" in moved["effect"]
    if moved["kept"]:
        assert Path(moved["undo_file"]).exists() and doc["kept"] == [move] and doc["after"] == moved["after"]
        expected_cpus = HOUSEKEEPING
    else:  # not called on this host: undone, and the reason said
        said = ("not called", "no resolvable difference", "is higher than")
        assert any(why in moved["effect"] for why in said), moved["effect"]
        assert moved["undo_file"] is None and doc["kept"] == [] and doc["undone"].count(move) == 1
        expected_cpus = {TARGET}
    # At p99.9 only where this host bounds it: then the move is no harm there either.
    with open_store(where / "t.duckdb", read_only=True) as store:
        bounded = resolution(store, moved["baseline"], "p99_9")["bounded"]
    print(f"p99.9 bounded by the kept state's repetitions here: {bounded}")
    if bounded and moved["kept"]:
        assert "p99_9" not in moved["harmed"]
    # The host reads back as exactly the kept set.
    assert os.sched_getaffinity(intruder.pid) == expected_cpus
    assert STAT_INTERVAL.read_text().strip() == stat_before
    # The fingerprints of the before and the after runs differ exactly in what was applied.
    before = fingerprints(where, doc["before"])
    after_move = fingerprints(where, moved["after"])
    after_useless = fingerprints(where, useless["after"])
    moved_diff = differing(before[0]["settings"], after_move[0]["settings"])
    hog = f"{HOG}:{HOG_PRIORITY}"
    dut, others = f"CPU {TARGET} real-time tasks", {f"CPU {c} real-time tasks" for c in HOUSEKEEPING}
    assert set(moved_diff) == {dut, *others}, moved_diff
    assert hog in moved_diff[dut][0] and all(hog in moved_diff[k][1] for k in others)
    baseline = after_move if moved["kept"] else before
    assert differing(baseline[0]["settings"], after_useless[0]["settings"]) == {
        "vm.stat_interval": (stat_before, "3600")
    }
    # `compare --by host_state` separates them and says where they differ.
    shown = subprocess.run(
        [*LOWTAIL, "compare", str(doc["before"]), str(moved["after"]), "--by", "host_state", "--json",
         "--db", str(where / "t.duckdb")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode in (0, 3), shown.stderr
    compared = json.loads(shown.stdout)
    assert [c["key"]["host_state"] for c in compared["configurations"]] == [before[0]["id"], after_move[0]["id"]]
    assert set(compared["host_state_differences"][0]["settings"]) == {dut, *others}
    # The before/after page was written from the store.
    page = (tmp_path / "tune.html").read_text()
    assert "Changes tried" in page and "Latency by percentile" in page and "GRUB_CMDLINE" in page
    # What was kept is undone by host undo, exactly.
    if moved["kept"]:
        undone = subprocess.run([*LOWTAIL, "host", "undo", moved["undo_file"]], capture_output=True, text=True)
        assert undone.returncode == 0, undone.stderr
        assert os.sched_getaffinity(intruder.pid) == {TARGET}
