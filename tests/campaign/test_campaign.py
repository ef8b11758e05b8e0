"""`lowtail campaign analyze` on a real Dask cluster: a `dask scheduler` and two `dask worker`
processes on localhost, started here; one worker (or the scheduler) killed mid-campaign."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from local_dask import LocalDask
from lowtail import _native

BIN = Path(sys.executable).parent
PAIRS = 8
PACKETS = 400_000  # per pair: long enough that a kill lands mid-campaign, short enough to stay quick


def synth_pairs(directory: Path, count: int = PAIRS, packets: int = PACKETS) -> dict[str, dict]:
    """NAME-pre.pcap/NAME-post.pcap pairs with different seeds; their truth summaries by name."""
    directory.mkdir(parents=True, exist_ok=True)
    truth = {}
    for i in range(count):
        name = f"run{i:02d}"
        spec = {"packets": packets, "rate_pps": 1_000_000, "seed": i + 1, "loss": 0.001}
        truth[name] = json.loads(
            _native.synth_pair(
                str(directory / f"{name}-pre.pcap"), str(directory / f"{name}-post.pcap"), json.dumps(spec), None
            )
        )
    return truth


@pytest.fixture
def cluster(tmp_path):
    c = LocalDask(tmp_path, workers=2, death_timeout=10)
    yield c
    c.stop()


def campaign(*args: str, db: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "lowtail"), "campaign", "analyze", *args, "--trim", "0", "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(p: subprocess.Popen) -> tuple[int, dict, str]:
    out, err = p.communicate(timeout=240)
    return p.returncode, json.loads(out) if out.strip() else {}, err


def wait_for_series(directory: Path, at_least: int, proc: subprocess.Popen) -> None:
    """Until `at_least` pairs' matched series are begun (a worker creates the file as it starts a
    pair: with two workers, a third file means a pair is finished)."""
    deadline = time.monotonic() + 120
    while len(list(directory.glob("*-series.parquet"))) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def stored_analyses(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT analysis_id, label, sent, lost FROM analyses ORDER BY label").fetchall()


def check_every_pair_once(doc: dict, truth: dict, db: Path) -> None:
    assert sorted(p["name"] for p in doc["pairs"]) == sorted(truth)
    for p in doc["pairs"]:
        assert p["sent"] == truth[p["name"]]["packets"]
        assert p["lost"] == truth[p["name"]]["lost"]
        assert p["latency_ns"]["max"] >= p["latency_ns"]["p50"] > 0
    rows = stored_analyses(db)
    assert sorted(r[1] for r in rows) == sorted(truth), "a pair stored twice or not at all"
    assert {r[0] for r in rows} == {p["analysis_id"] for p in doc["pairs"]}


@pytest.mark.slow
def test_a_killed_worker_loses_nothing_and_a_rerun_resumes(tmp_path, cluster):
    data, db = tmp_path / "captures", tmp_path / "lowtail.duckdb"
    truth = synth_pairs(data)
    proc = campaign(str(data), "--scheduler", cluster.address, db=db)
    wait_for_series(data, 1, proc)
    victim = cluster.workers[0]
    victim.send_signal(signal.SIGKILL)
    code, doc, err = finish(proc)
    assert code == 0, err
    assert doc["failed"] == [] and not doc["partial"]
    check_every_pair_once(doc, truth, db)
    busy = {w["address"]: w for w in doc["workers"]}
    assert len(busy) == 2 and sum(w["lost"] for w in busy.values()) == 1
    survivor = next(w for w in busy.values() if not w["lost"])
    assert survivor["pairs"] >= PAIRS // 2
    for p in doc["pairs"]:
        assert Path(p["series"]).exists() and p["worker"]

    again = campaign(str(data), "--scheduler", cluster.address, db=db)
    code, redo, err = finish(again)
    assert code == 0, err
    assert all(p["resumed"] for p in redo["pairs"])
    assert {p["name"]: p["analysis_id"] for p in redo["pairs"]} == {p["name"]: p["analysis_id"] for p in doc["pairs"]}
    check_every_pair_once(redo, truth, db)


def run_in_process(tmp_path: Path, cluster: LocalDask, pairs_count: int, coordinator_class: type) -> tuple:
    """A campaign over `pairs_count` synthetic pairs, its coordinator (`coordinator_class`, a
    `runner._Campaign`) run in this process against `cluster`: (coordinator, truth, db)."""
    from distributed import Client

    from lowtail.analyze.pair import analyze_options
    from lowtail.campaign import DEFAULT_PATTERN
    from lowtail.campaign.pairs import campaign_key, choose_pairs
    from lowtail.store import campaigns, open_store

    data, db = tmp_path / "captures", tmp_path / "lowtail.duckdb"
    truth = synth_pairs(data, count=pairs_count)
    options = analyze_options(trim_ns=0).to_dict()
    options.pop("export", None)
    pairs, chosen = choose_pairs(data, db, DEFAULT_PATTERN, options, cluster.address, False, None)
    client = Client(cluster.address, timeout="10s")
    try:
        with open_store(db) as s:
            campaign_id = campaigns.open_campaign(s, campaign_key(chosen), chosen.source, chosen.analysis)
            coordinator = coordinator_class(s, campaign_id, chosen, None)
            coordinator.client = client
            coordinator.run(client, pairs)
    finally:
        client.close()
    return coordinator, truth, db


def kill_worker_holding(client, fut, others_busy_s: float = 0.0) -> str:
    """SIGKILL the worker that holds `fut`'s result; its address. With `others_busy_s`, the
    other workers are first given a task that sleeps that long (running, not queued): the
    result's recomputation waits for it."""
    holder = client.who_has([fut])[fut.key][0]
    if others_busy_s:
        others = [w for w in client.scheduler_info(n_workers=-1)["workers"] if w != holder]
        busy = [client.submit(time.sleep, others_busy_s, workers=[w], pure=False) for w in others]
        deadline = time.monotonic() + 60
        while not all(any(b.key in keys for keys in client.processing(others).values()) for b in busy):
            assert time.monotonic() < deadline
            time.sleep(0.005)
    os.kill(client.run(os.getpid, workers=[holder])[holder], signal.SIGKILL)
    return holder


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("fetch", ["after-it-is-lost", "while-it-is-lost"])
def test_a_result_lost_with_its_worker_before_it_is_fetched_is_computed_again_and_stored(
    tmp_path, cluster, monkeypatch, fetch
):
    """The worker that holds a finished pair's result dies between Dask's `wait` saying the pair
    is done and the coordinator fetching it: the future turns from finished to lost and is
    computed again. Two defects, one per case. After the scheduler saw the result go, the
    coordinator dropped the pair without a word (a fresh clone's campaign ended "finished",
    not partial, one pair short). With the fetch begun before, it timed out while the pair
    was computed again — a TimeoutError is an OSError, read as "no scheduler" — and the
    campaign stopped, "the scheduler went away after 0 of 2 pairs", the scheduler well (3 of
    3 runs before the fix); a future "lost" for longer than the grace period read as a lost
    scheduler too. The grace period is shortened here, and the other worker kept busy for
    1 s so that the recomputation outlasts it. The kill comes through the coordinator's own
    collecting step, on a real cluster."""
    from lowtail.campaign import runner

    # Far shorter than the recomputation, which waits for the other worker to finish a 1 s task.
    monkeypatch.setattr(runner, "SCHEDULER_GRACE_S", 0.1)

    class WorkerDiesBeforeTheFetch(runner._Campaign):
        killed: str | None = None

        def _collect(self, fut, pair):
            if self.killed is None:
                self.killed = kill_worker_holding(self.client, fut, others_busy_s=1.0)
                deadline = time.monotonic() + 30
                while fetch == "after-it-is-lost" and fut.status == "finished":  # the scheduler saw it go
                    assert time.monotonic() < deadline
                    time.sleep(0.001)
            return super()._collect(fut, pair)

    coordinator, truth, db = run_in_process(tmp_path, cluster, 2, WorkerDiesBeforeTheFetch)
    result = coordinator.result
    assert coordinator.killed is not None
    assert result.stopped is None and result.failed == [] and not result.partial, result.as_dict()
    assert sorted(p["name"] for p in result.pairs) == sorted(truth)
    assert sorted(r[1] for r in stored_analyses(db)) == sorted(truth)
    for p in result.pairs:
        assert p["sent"] == truth[p["name"]]["packets"] and p["lost"] == truth[p["name"]]["lost"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_cluster_left_without_workers_stops_the_campaign_saying_so(tmp_path, cluster, monkeypatch):
    """Every worker dies after the first pair is stored: Dask would wait for new workers for
    ever, and the campaign with it. It stops after the grace period, partial and resumable,
    saying why, with what finished stored. Before, it said "the scheduler went away" (a
    finished result lost with its worker read as a lost scheduler), the scheduler well — or,
    with no finished result to lose, waited for ever."""
    from lowtail.campaign import runner

    monkeypatch.setattr(runner, "WORKERLESS_GRACE_S", 1.0)

    class EveryWorkerDies(runner._Campaign):
        def _collect(self, fut, pair):
            collected = super()._collect(fut, pair)
            if collected and len(self.collected) == 1:
                for worker in cluster.workers:
                    worker.kill()
                    worker.wait()
            return collected

    coordinator, truth, db = run_in_process(tmp_path, cluster, 3, EveryWorkerDies)
    result = coordinator.result
    assert result.stopped is not None and result.stopped.startswith(
        "no worker on the cluster for 1 s after 1 of 3 pairs"
    )
    assert result.partial
    assert [p["name"] for p in result.pairs] == [r[1] for r in stored_analyses(db)]
    assert len(result.pairs) == 1


@pytest.mark.slow
def test_a_lost_scheduler_stops_cleanly_and_the_campaign_resumes(tmp_path, cluster):
    data, db = tmp_path / "captures", tmp_path / "lowtail.duckdb"
    truth = synth_pairs(data)
    proc = campaign(str(data), "--scheduler", cluster.address, db=db)
    wait_for_series(data, 3, proc)
    cluster.scheduler.send_signal(signal.SIGKILL)
    code, doc, err = finish(proc)
    assert code == 3, err
    assert "scheduler went away" in err and "Resume with: lowtail campaign analyze" in err
    assert "Traceback" not in err
    kept = {p["name"]: p["analysis_id"] for p in doc["pairs"]}
    assert 1 <= len(kept) < PAIRS
    assert len(stored_analyses(db)) == len(kept)

    # resumed on a local cluster of this machine's cores: only the rest is analysed
    code, redo, err = finish(campaign(str(data), db=db))
    assert code == 0, err
    check_every_pair_once(redo, truth, db)
    assert {p["name"]: p["analysis_id"] for p in redo["pairs"] if p["resumed"]} == kept


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_unpaired_and_unreadable_captures_are_named_and_the_rest_analysed(tmp_path, cluster):
    data, db = tmp_path / "captures", tmp_path / "lowtail.duckdb"
    truth = synth_pairs(data, count=2, packets=20_000)
    (data / "lonely-pre.pcap").write_bytes((data / "run00-pre.pcap").read_bytes())
    (data / "broken-pre.pcap").write_bytes(b"this is not a capture at all")
    (data / "broken-post.pcap").write_bytes(b"neither is this")
    # One capture as both sides: it matched every packet with itself (0 ns) and was stored.
    (data / "twin-pre.pcap").symlink_to("run00-pre.pcap")
    (data / "twin-post.pcap").symlink_to("run00-pre.pcap")
    code, doc, err = finish(campaign(str(data), "--scheduler", cluster.address, db=db))
    assert code == 3, err
    assert doc["partial"]
    check_every_pair_once(doc, truth, db)
    failed = {f["name"]: f["error"] for f in doc["failed"]}
    assert set(failed) == {"lonely", "broken", "twin"}
    assert "no POST capture" in failed["lonely"]
    assert "broken-pre.pcap" in failed["broken"]
    assert "PRE and POST are the same file" in failed["twin"]
    assert "lonely" in err and "broken" in err and "Traceback" not in err
    # In words: each pair's figures with their unit, the counts in the number they take.
    words = subprocess.run(
        [str(BIN / "lowtail"), "campaign", "analyze", str(data), "--trim", "0", "--db", str(db)]
        + ["--scheduler", cluster.address],
        capture_output=True,
        text=True,
    )
    assert words.returncode == 3, words.stderr
    assert "run00: analysis " in words.stderr and " µs, max " in words.stderr, words.stderr
    assert ": 2 pairs stored (2 before this run), 3 failed, on 2 workers" in words.stderr, words.stderr

    # --from-db: the stored pairs again, under other options (a new identity, so analysed anew)
    code, again, err = finish(
        campaign("--from-db", "--max-latency", "5s", "--no-series", "--scheduler", cluster.address, db=db)
    )
    assert code == 0, err
    assert sorted(p["name"] for p in again["pairs"]) == sorted(truth) and again["failed"] == []
    assert not any(p["resumed"] for p in again["pairs"])
    assert {p["analysis_id"] for p in again["pairs"]}.isdisjoint(p["analysis_id"] for p in doc["pairs"])
    assert [p["sent"] for p in again["pairs"]] == [p["sent"] for p in doc["pairs"]]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_directory_without_pairs_and_an_unreachable_scheduler_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = finish(campaign(str(empty), db=tmp_path / "x.duckdb"))
    assert code == 2 and "no capture pairs" in err and len(err.strip().splitlines()) == 1
    synth_pairs(tmp_path / "one", count=1, packets=1000)
    code, _, err = finish(campaign(str(tmp_path / "one"), "--scheduler", "tcp://127.0.0.1:9", db=tmp_path / "x.duckdb"))
    assert code == 2 and "cannot reach the scheduler" in err and len(err.strip().splitlines()) == 1


def test_a_scheduler_address_that_is_none_and_a_series_directory_that_cannot_be_are_one_line_errors(tmp_path):
    """Before: `--scheduler nonsense://x` was exit 70, "internal error: ValueError: unknown
    address scheme"; `--series-dir /proc/x` started the cluster and failed every pair with
    "FileNotFoundError: [Errno 2] No such file or directory: '/proc/x'", exit 3."""
    synth_pairs(tmp_path / "one", count=1, packets=1000)
    for args, needle in (
        (("--scheduler", "nonsense://x"), "--scheduler nonsense://x: not a scheduler's address"),
        (("--series-dir", "/proc/x"), "--series-dir /proc/x: cannot create it"),
    ):
        code, doc, err = finish(campaign(str(tmp_path / "one"), *args, db=tmp_path / "x.duckdb"))
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (code, err)


def test_a_worker_that_cannot_make_the_series_directory_says_so_for_its_pair(tmp_path):
    """A remote cluster's workers see their own file system: the pair fails with words, not
    with the worker's exception."""
    from lowtail.campaign.work import PairTask, analyze_task

    truth = synth_pairs(tmp_path / "one", count=1, packets=1000)
    (name,) = truth
    task = PairTask(
        name=name,
        key=name,
        pre=str(tmp_path / "one" / f"{name}-pre.pcap"),
        post=str(tmp_path / "one" / f"{name}-post.pcap"),
        options={"trim_ns": 0},
        series=f"/proc/x/{name}-series.parquet",
    )
    outcome = analyze_task(task)
    assert outcome.doc is None and outcome.error is not None
    assert outcome.error.startswith("the series directory /proc/x: cannot create it on "), outcome.error


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_campaign_whose_every_pair_failed_exits_1(tmp_path):
    """Every pair unreadable: nothing was stored, and the command said exit 3 — a partial
    result — where nothing could be computed (README: exit 1)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("a", "b"):
        for side in ("pre", "post"):
            (broken / f"{name}-{side}.pcap").write_bytes(b"not a capture" * 10)
    code, doc, err = finish(campaign(str(broken), db=tmp_path / "x.duckdb"))
    assert code == 1, err
    assert doc["pairs"] == [] and len(doc["failed"]) == 2 and "Traceback" not in err
