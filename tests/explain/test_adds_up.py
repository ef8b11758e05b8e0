"""The evidence adds up, by construction: over synthetic traces and packets of every shape
hypothesis finds — tasks, interrupts and softirqs on the DuT's and the generator's cores,
lowtail's own processes among them, steal samples, packets delayed by them or by nothing —

- no tail packet is given more delay than its latency above the run's floor;
- each cause's share is its whole number of tail packets over the tail's, and the shares and
  the unexplained share add up to 1;
- the headline, the terminal's table and the JSON carry the same numbers (a cause's stored
  share, formatted once);
- lowtail's own processes are never "another task preempted the DuT".

Then, on a real store: compare's causes column and the explanation's page show the stored
shares of `explain --json`."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
from compare_support import experiment, store_run, trace_and_explain  # noqa: E402
from test_simulated import HOST, _intervals  # noqa: E402

from lowtail.cli.explain import show  # noqa: E402
from lowtail.core.units import format_ns, format_percent  # noqa: E402
from lowtail.explain.analysis import RunFacts, attributed  # noqa: E402
from lowtail.explain.asked import tail_words  # noqa: E402
from lowtail.explain.packets import Packets  # noqa: E402
from lowtail.explain.words import MEASUREMENT_KINDS, OWN_PROCESS  # noqa: E402
from lowtail.host.steal import STEAL_KIND  # noqa: E402
from lowtail.store import open_store  # noqa: E402

RATE = 10_000
PERIOD = 1_000_000_000 // RATE
N = 20_000
T0 = 1_700_000_000_000_000_000
SPAN = N * PERIOD
COVERAGE = {(HOST, 0): (T0, T0 + SPAN), (HOST, 1): (T0, T0 + SPAN)}
# The DuT's own task, the generator's, and lowtail's own command (its sampler thread too).
DUT_PID, GEN_PID, LOWTAIL_PID, SAMPLER_TID = 100, 200, 900, 901
NAMES = {
    "task": ["hog", "cc1", "lowtail", "python"],
    "vector": ["local_timer", "irq_work", "call_function"],
    "softirq": ["NET_RX", "TIMER", "RCU"],
}

# Something that recurs on a core (a tick, a task that wakes every so often), its events
# overlapping or not, delaying the packets in flight or not.
source = st.tuples(
    st.sampled_from([0, 1]),  # the DuT's core, the generator's
    st.sampled_from(["task", "vector", "softirq"]),
    st.integers(0, 3),  # which name
    st.integers(0, 20_000_000),  # first start, after T0
    st.integers(2_000_000, 200_000_000),  # period
    st.integers(20_000, 3_000_000),  # duration
    st.sampled_from([4242, LOWTAIL_PID, SAMPLER_TID, 4343]),  # a task's pid (lowtail's own among them)
    st.booleans(),  # whether the packets in flight wait for it
)


def _events(sources: list[tuple]) -> list[tuple]:
    return [
        (cpu, kind, which, start, length, pid, delays)
        for cpu, kind, which, first, period, length, pid, delays in sources
        for start in range(first, SPAN - length, period)
    ]


def _facts(steal: list[tuple[int, int, str, int, int]]) -> RunFacts:
    return RunFacts(
        run_id=1,
        rate_pps=RATE,
        burst=1,
        dut_kind="lowtail-fwd",
        dut_config={"batch": 1},
        dut_stats={},
        virtualization=None,
        budget_ns=None,
        budget_failed=False,
        roles={
            "dut": {"host": HOST, "cpus": [0], "pids": [DUT_PID], "comms": ["lowtail-fwd"]},
            "generator": {"host": HOST, "cpus": [1], "pids": [GEN_PID], "comms": ["lowtail-gen"]},
        },
        steal=steal,
        own_tasks={HOST: {LOWTAIL_PID, SAMPLER_TID, DUT_PID, GEN_PID}},
    )


def _run(
    events: list[tuple], steal_ticks: list[tuple[int, int]], seed: int, above: Fraction | None = None
) -> tuple[dict, object]:
    rng = np.random.default_rng(seed)
    ids = np.arange(N, dtype=np.int64)
    pre = T0 + ids * PERIOD + rng.integers(0, 300, N)
    extra = np.zeros(N, dtype=np.int64)
    rows = []
    for cpu, kind, which, start, length, pid, delays in events:
        name = NAMES[kind][which % len(NAMES[kind])]
        task = kind == "task"
        rows.append((cpu, T0 + start, T0 + start + length, kind, name, pid if task else -1, 120 if task else -1))
        if delays:
            hit = (pre >= T0 + start) & (pre < T0 + start + length)
            extra[hit] = np.maximum(extra[hit], T0 + start + length - pre[hit])
    # Some slow packets no event explains.
    extra[rng.choice(N, 5, replace=False)] += rng.integers(200_000, 2_000_000, 5)
    latency = 8_000 + rng.exponential(3_000, N).astype(np.int64) + extra
    p = Packets.of(ids, pre, pre + latency, latency)
    steal = [(T0 + (k + 1) * 100_000_000, cpu, STEAL_KIND, 10_000_000, 100_000_000) for cpu, k in steal_ticks]
    return attributed(p, _facts(steal), _intervals(rows, state="R"), COVERAGE, above)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sources=st.lists(source, max_size=5),
    steal_ticks=st.lists(st.tuples(st.sampled_from([0, 1]), st.integers(0, 19)), max_size=6),
    seed=st.integers(0, 2**16),
    above=st.sampled_from([None, Fraction(99, 100)]),
)
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_evidence_adds_up(sources, steal_ticks, seed, above):
    doc, attribution = _run(_events(sources), steal_ticks, seed, above)
    tail, causes = doc["tail"], doc["causes"]
    n = tail["packets"]
    # No packet is given more delay than its latency above the floor.
    room = attribution.latency_ns - attribution.floor_ns
    assert (attribution.delay_ns <= room).all() and (attribution.delay_ns >= 0).all()
    assert attribution.floor_ns == tail["floor_ns"]
    for c in causes:
        for e in c["evidence"]["events"]:
            assert e["delay_ns"] <= e["latency_ns"] - tail["floor_ns"], e
    # Whole packets: each cause's own, the rest unexplained, all of the tail.
    for i, c in enumerate(causes):
        assert int((attribution.cause == i).sum()) == c["tail_packets"]
        assert c["share"] == c["tail_packets"] / n
    assert sum(c["tail_packets"] for c in causes) + doc["unexplained_packets"] == n
    assert int((attribution.cause < 0).sum()) == doc["unexplained_packets"]
    if n:
        assert abs(sum(c["share"] for c in causes) + doc["unexplained_share"] - 1) < 1e-12
    # lowtail's own processes are the measurement's, never the DuT's preemptors.
    for c in causes:
        if c["kind"] == "preemption":
            assert c["evidence"].get("pid") not in (LOWTAIL_PID, SAMPLER_TID), c
        if c["kind"] == OWN_PROCESS:
            assert c["evidence"]["pid"] in (LOWTAIL_PID, SAMPLER_TID)
    # The same numbers on every surface: the headline and the terminal print the stored share.
    for c in causes:
        if c["kind"] in MEASUREMENT_KINDS:
            assert f"{format_percent(c['share'])} of the tail" in doc["headline"]
    if any(c["kind"] in MEASUREMENT_KINDS for c in causes):
        assert "hypervisor" not in doc["headline"] or "steal" in doc["headline"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        show(json.loads(json.dumps(doc)))
    text = printed.getvalue()
    for c in causes:
        assert format_percent(c["share"]) in text
    assert f"unexplained: {format_percent(doc['unexplained_share'])}" in text
    # The tail's latency is said once: "above p99.9 (1.240 ms)".
    head = next(line for line in text.splitlines() if line.startswith(f"run {doc['run']}:"))
    assert head.count(format_ns(tail["threshold_ns"])) == 1, head


@pytest.mark.parametrize(
    ("rule", "shown"),
    [
        ("above p99.9", "above p99.9 (1.240 ms)"),
        ("above the budget, 1.240 ms", "above the budget, 1.240 ms"),  # was "…, 1.240 ms (1.240 ms)"
        ("above 1.240 ms", "above 1.240 ms"),  # `--above 1240us`: was "above 1.240 ms (1.240 ms)"
    ],
)
def test_the_tails_rule_names_its_latency_once(rule, shown):
    assert tail_words(rule, 1_240_000) == shown


def _lowtail(*args: object, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lowtail", *map(str, args), "--db", str(db)], capture_output=True, text=True
    )


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_json_compare_and_page_carry_the_stored_shares(tmp_path):
    """One explained run: `explain --json`, `compare --json`'s causes column, the terminal and
    the page each show the stored share of each cause, not one worked out again."""
    db = tmp_path / "one.duckdb"
    with open_store(db) as store:
        e = experiment(store, "traced", {"percentile": 99.9, "budget": "30us"})
        run = store_run(store, tmp_path, e, "fwd", seed=3, spike_probability=0.003, spike_ns=40_000)
        stored = trace_and_explain(store, run, tmp_path)
    assert stored["causes"], stored
    done = _lowtail("explain", run, "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(stored))
    shares = [c["share"] for c in stored["causes"]]
    done = _lowtail("compare", "latest", "--json", db=db)
    assert done.returncode in (0, 3), done.stderr
    column = json.loads(done.stdout)["causes"][0]["causes"]
    assert [k["share"] for k in column] == shares[: len(column)]
    page = tmp_path / "explain.html"
    done = _lowtail("explain", run, "-o", page, db=db)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    for share in shares:
        assert format_percent(share) in html and format_percent(share) in done.stdout + done.stderr
    assert format_percent(stored["unexplained_share"]) in html
