"""`lowtail explain` on namespace testbed runs with causes injected: a real-time task that
takes the DuT's (or the generator's) core 1.5 ms every 50 ms, batches, a rate above R_max,
and nothing at all. Timing on a shared host is noisy, so these assert what is ranked and
named, not tail figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_root  # noqa: E402

from lowtail.explain.words import MEASUREMENT_KINDS as HEADLINE_KINDS  # noqa: E402
from lowtail.testbed.cores import CoreRoles  # noqa: E402

pytestmark = [needs_root, pytest.mark.root, pytest.mark.host]

LOWTAIL = [sys.executable, "-m", "lowtail"]
HOG = "lowtail-hog"
# Above every program of the testbed (the timestamper runs at 50).
HOG_PRIORITY = 60
# The stand-in for an untuned host: busy 1.5 ms every 50 ms.
HOG_BUSY_S = 0.0015
HOG_SOURCE = """
import os, sys, time
open("/proc/self/comm", "w").write(sys.argv[1])
os.sched_setaffinity(0, {int(sys.argv[2])})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(sys.argv[3])))
busy, period = float(sys.argv[4]), float(sys.argv[5])
due = time.monotonic()
while True:
    end = time.monotonic() + busy
    while time.monotonic() < end:
        pass
    due += period
    time.sleep(max(0.0, due - time.monotonic()))
"""


@contextmanager
def hog(cpu: int, busy_s: float = HOG_BUSY_S, period_s: float = 0.05) -> Iterator[None]:
    """A SCHED_FIFO task above the testbed's programs, pinned to `cpu`, busy `busy_s` every `period_s`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOG_SOURCE, HOG, str(cpu), str(HOG_PRIORITY), str(busy_s), str(period_s)]
    )
    try:
        time.sleep(0.3)
        assert proc.poll() is None, "the hog did not start"
        yield
    finally:
        proc.kill()
        proc.wait()


def run_and_explain(
    tmp_path: Path, name: str, dut: str, rate: int, burst: int = 1, duration: str = "2s", above: str | None = "p99.9"
) -> dict:
    toml = tmp_path / f"{name}.toml"
    toml.write_text(f"""
[experiment]
name = "{name}"
duration = "{duration}"
warmup = "300ms"
calibrate = false
[traffic]
rates = ["{rate}pps"]
burst = {burst}
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
{dut}
""")
    db = str(tmp_path / f"{name}.duckdb")
    done = subprocess.run([*LOWTAIL, "run", str(toml), "--db", db], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    # The tail as the issue states it (above p99.9), not the budget: a busy host fails the
    # default budget by its own noise, and then the injected cause is a small share of it.
    done = subprocess.run(
        [*LOWTAIL, "explain", "latest", *(["--above", above] if above else []), "--db", db, "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 3), done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) >= {"run", "tail", "causes", "unexplained_share"}
    assert set(doc["tail"]) >= {"threshold_ns", "packets"}
    for c in doc["causes"]:
        assert set(c) >= {"kind", "role", "cpu", "share", "added_ns", "evidence", "remedy"}
        assert c["role"] in ("dut", "generator", "timestamper", "host", "lowtail") and 0 <= c["share"] <= 1
    assert doc["trace"]["method"] == "tracefs", doc["trace"]
    return doc


PLAN = CoreRoles.for_host()


def _names_hog(cause: dict) -> bool:
    return HOG in str(cause["evidence"].get("what", "")) or any(
        HOG in str((e.get("event") or {}).get("what", "")) for e in cause["evidence"].get("events", [])
    )


MEASUREMENT_KINDS = ("generator_stall", "timestamper_stall", "hypervisor")


def _the_duts(doc: dict) -> list[dict]:
    """The causes that are the DuT's, in rank order (not the measurement's: the hypervisor
    under this machine is role host too, but no part of the DuT)."""
    return [c for c in doc["causes"] if c["role"] in ("dut", "host") and c["kind"] not in MEASUREMENT_KINDS]


def _skip_when_nothing_explains(doc: dict) -> None:
    """On a busy shared host the tail may be a stall no trace records (time the hypervisor
    took from the vCPU): the product must then report it unexplained rather than give it to
    a cause, and the injected cause cannot be judged from this run."""
    if not doc["causes"]:
        assert doc["unexplained_share"] == 1.0, doc
        pytest.skip("nothing traced explains this tail: the host took the time where no trace sees it")


def _skip_when_another_task_takes_the_whole_tail(doc: dict, longer_than_ns: int) -> None:
    """A task of the host's own that shares the DuT's core (another suite's build, a CPU hog)
    can hold it for longer than the injected cause delays packets: then every tail packet is
    that preemption's, and the product must name it, whole, rather than the injected cause
    (measured with a busy loop at nice 5 beside this suite: preemption by it 100 % of the tail
    above p99, 20 ms added, where batching holds a packet 10 ms at most)."""
    taken = [c for c in doc["causes"] if c["kind"] == "preemption" and c["role"] == "dut" and c["share"] == 1.0]
    if taken and taken[0]["added_ns"] > longer_than_ns:
        assert taken[0]["evidence"]["what"] and taken[0]["evidence"]["pid"], taken[0]
        pytest.skip(
            f"{taken[0]['evidence']['what']} held the DuT's core for the whole tail: the injected cause is smaller"
        )


def test_a_task_on_the_duts_core_is_the_first_cause(tmp_path):
    """First of the DuT's causes, named; on a host quiet enough to measure (no headline)
    also first of all and most of the tail. What a busy shared host may do instead, and what
    must still hold then:
    - the generator's own stalls outrank it: the headline says so, first;
    - something else held the DuT's core longer than the hog's 1.5 ms (a hypervisor taking
      the vCPU inside an interrupt, a compiler): a p99.9 tail of 40 packets is then that
      event's, and the first cause must show a delay at least the hog's — never a short
      event named in the hog's place;
    - nothing the trace records explains the tail (time the hypervisor took): it is reported
      unexplained, not given to a cause.
    With a headline (the measurement's own stalls beside the hog) the hog's preemption is still
    the first of the DuT's causes, though not necessarily of all: causes rank by packets."""
    with hog(PLAN.dut[0], busy_s=HOG_BUSY_S):
        doc = run_and_explain(tmp_path, "dut-hog", "work_ns = 0", 20_000)
    # Whatever the host did: the causes in order of the tail packets each explains, and a
    # headline exactly when a measurement artefact is among them (explain's own list: the
    # measurement's stalls, its processes or the timestamper on the DuT's core, the hypervisor).
    packets = [c["tail_packets"] for c in doc["causes"]]
    assert packets == sorted(packets, reverse=True), doc["causes"]
    assert (doc["headline"] is not None) == any(c["kind"] in HEADLINE_KINDS for c in doc["causes"])
    if not _the_duts(doc) and doc["headline"]:
        # The product's own answer on a host too busy to measure: its headline says so, first.
        pytest.skip(f"this host could not measure the DuT: {doc['headline']}")
    _skip_when_nothing_explains(doc)
    first = _the_duts(doc)[0]
    if not (first["kind"] == "preemption" and _names_hog(first)):
        assert first["added_ns"] >= 0.8 * HOG_BUSY_S * 1e9, doc["causes"]
        pytest.skip(f"a longer disturbance than the hog took the DuT's core: {first['evidence'].get('what')}")
    assert first["role"] == "dut", doc["causes"]
    assert "isolcpus" in first["remedy"]["boot_parameters"]
    if doc["headline"] is None:
        # Most of what the trace explains: time the hypervisor took from this VM's vCPU is no
        # cause the trace sees, and stays unexplained (0.44 of the tail on CI's host at 0e63b99+).
        explained = 1.0 - doc["unexplained_share"]
        assert doc["causes"][0] is first and first["share"] >= 0.5 * explained, doc
    else:
        # The measurement stalled too: every surface says so first (the headline), while the
        # causes keep their order by packets, the hog's preemption first of it or not (as on
        # 1a375dd's fresh clone, where it explained more of the tail than the stalls).
        assert "could not measure" in doc["headline"]


def test_the_same_task_on_the_generators_core_is_a_measurement_artefact(tmp_path):
    """The hog delays no packet inside the DuT: it stalls the generator, which then sends the
    overdue packets back to back, and the last of them queue at the DuT. That is a
    measurement artefact, first and in the headline. On a busy shared host another task may
    take the DuT's own core for longer than the hog takes the generator's (a compiler for
    8 ms): then those packets are the tail, and what must still hold is that the hog is
    never blamed on the DuT."""
    if PLAN.generator in PLAN.dut:
        pytest.skip("the generator shares the DuT's core on this host")
    with hog(PLAN.generator):
        doc = run_and_explain(tmp_path, "gen-hog", "work_ns = 20000", 10_000)
    assert not any(c["role"] == "dut" and _names_hog(c) for c in doc["causes"]), doc["causes"]
    stalls = [c for c in doc["causes"] if c["kind"] == "generator_stall"]
    if stalls:
        assert stalls[0]["role"] == "generator" and "quieter host" in stalls[0]["remedy"]["action"]
        assert doc["headline"] and "could not measure" in doc["headline"]
    _skip_when_nothing_explains(doc)
    if not _the_duts(doc):
        # The measurement's own first: the stall, or what else took the measurement's time on
        # this host — the hypervisor under it, or (on 4b8f337's CI, the timestamper placed on
        # the DuT's core of a 2-core host) the testbed's own program on the DuT's core. Each is
        # said in the headline: this run could not measure the DuT.
        first = doc["causes"][0]
        assert first["kind"] in HEADLINE_KINDS, doc["causes"]
        assert doc["headline"] and "could not measure" in doc["headline"], doc


def test_batches_at_a_low_rate_are_batching(tmp_path):
    """A DuT that waits for its batch of 32 to fill (up to 10 ms) at 10 kpps: the first
    packet of each batch waits ~3.1 ms for the other 31 to arrive, the last hardly at all —
    the sawtooth. (A batcher that takes what is waiting adds nothing at a low rate with
    packets one by one, and with bursts it raises the median, not the tail: NOMS 2020, V-D.)
    The held packets are milliseconds above the median, more than a shared host's
    preemptions add, so batching is found on a busy host too — above p99: the held packets are
    a few percent of all, and above p99.9 (20 packets in 2 s) one long stall of another task
    (46 ms of ssh on the DuT's core, once, while another suite ran) is the whole tail."""
    doc = run_and_explain(
        tmp_path, "batch", "batch = 32\nbatch_timeout_us = 10000\nwork_ns = 5000", 10_000, above="p99"
    )
    _skip_when_nothing_explains(doc)
    _skip_when_another_task_takes_the_whole_tail(doc, longer_than_ns=10_000_000)  # the batch timeout
    batching = [c for c in doc["causes"] if c["kind"] == "batching"]
    assert batching and batching[0]["evidence"]["batch"] == 32, doc["causes"]
    # On a host quiet enough to measure, with no other task taking the DuT's core, it is first.
    if doc["headline"] is None and not any(c["kind"] == "preemption" for c in doc["causes"]):
        assert doc["causes"][0] is batching[0], doc["causes"]


def test_a_rate_above_r_max_is_overload(tmp_path):
    doc = run_and_explain(tmp_path, "overload", "work_ns = 50000", 30_000, duration="1s")
    first = doc["causes"][0]
    assert first["kind"] == "overload", doc["causes"]
    assert first["evidence"]["r_max_pps"] < 30_000


def test_nothing_injected_invents_no_cause(tmp_path):
    """No cause invented; and the run stored the steal time its sampler saw, per CPU at most
    what /proc/stat's steal grew by around the run (none where the kernel has no column)."""
    from lowtail.host.steal import STEAL_KIND, STEAL_SOURCE, read_steal
    from lowtail.store import open_store
    from lowtail.store.host import run_interrupts

    before = read_steal()
    doc = run_and_explain(tmp_path, "quiet", "work_ns = 0", 10_000)
    after = read_steal()
    with open_store(tmp_path / "quiet.duckdb") as store:
        steal = run_interrupts(store, doc["run"], STEAL_SOURCE)
    if before is None or after is None:
        assert steal == []
    else:
        for cpu in after:
            stored = sum(delta for _, c, kind, delta, _ in steal if c == cpu and kind == STEAL_KIND)
            assert 0 <= stored <= after[cpu] - before.get(cpu, after[cpu])
    assert doc["tail"]["packets"] > 0
    assert not any(_names_hog(c) for c in doc["causes"])
    assert all(c["share"] >= 0.05 for c in doc["causes"])
    assert 0 <= doc["unexplained_share"] <= 1
    assert abs(doc["unexplained_share"] + sum(c["share"] for c in doc["causes"]) - 1) < 1e-9
    assert os.path.exists(doc["trace"]["path"])
    # lowtail's own processes (this command, its sampler thread, what it started, and what those
    # started during the run) are the measurement's: none is ever another task preempting the DuT.
    own = _own_tasks(tmp_path / "quiet.duckdb", doc)
    for c in doc["causes"]:
        if c["kind"] == "preemption":
            assert c["evidence"]["pid"] not in own, c
            assert not any(
                (e.get("event") or {}).get("what", "").startswith("lowtail ") for e in c["evidence"]["events"]
            )


def _own_tasks(db: Path, doc: dict) -> set[int]:
    """The run's own tasks as its trace knows them: the processes it recorded and their forks."""
    from lowtail.explain.cores import TraceView, descendants
    from lowtail.store import open_store
    from lowtail.store.explain import run_trace
    from lowtail.trace import timeline
    from lowtail.trace.own import task_ids

    with open_store(db, read_only=True) as store:
        trace = run_trace(store, doc["run"]) or {}
    recorded = trace["own_processes"]
    assert any(p["comm"] == "lowtail" or "python" in p["comm"] for p in recorded), recorded
    table, facts = timeline.read(Path(trace["path"]))
    (host,) = [h.host for h in facts.hosts if h.local]
    return descendants(TraceView.of(table), host, task_ids(recorded))


def test_every_surface_reads_the_stored_explanation(tmp_path):
    """One run explained when it was stored, then read by `explain --json`, the Python API,
    `compare --json`'s causes column and the experiment's page — each the stored explanation
    (the same shares), none working it out again."""
    import lowtail

    doc = run_and_explain(tmp_path, "surfaces", "work_ns = 0", 10_000, duration="1s", above=None)
    db = tmp_path / "surfaces.duckdb"
    again = lowtail.open(db).explain(doc["run"])
    assert again == doc
    assert [c["kind"] for c in again["causes"]] == [c["kind"] for c in doc["causes"]]
    done = subprocess.run([*LOWTAIL, "compare", "latest", "--json", "--db", str(db)], capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    causes = json.loads(done.stdout)["causes"]
    assert [c["explained_runs"] for c in causes] == [1]
    assert [k["kind"] for k in causes[0]["causes"]] == [c["kind"] for c in doc["causes"]][:3]
    assert [k["share"] for k in causes[0]["causes"]] == [c["share"] for c in doc["causes"]][:3]
    page = tmp_path / "page.html"
    done = subprocess.run(
        [*LOWTAIL, "experiment", "report", "latest", "--db", str(db), "-o", str(page)], capture_output=True, text=True
    )
    assert done.returncode in (0, 3), done.stderr
    html = page.read_text()
    assert f"Run {doc['run']}: causes of the tail" in html
    assert f"{doc['tail']['packets']:,} tail packets" in html
