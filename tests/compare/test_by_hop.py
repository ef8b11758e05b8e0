"""`compare --by hop`: a chain run's hops as configurations of their own, each hop's
repetitions pooled from the hops' own matched series, a run of one DuT left whole, and a hop
whose series was not kept said, not guessed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from compare_support import analysed, experiment, store_run

from lowtail.analyze.document import ChainDocument, HopDocument
from lowtail.analyze.hops import ONE_CLOCK
from lowtail.store import open_store
from lowtail.store.chains import save_run_chain

# The firewall adds little, the forwarder behind it most: hop 2's percentiles must be its own.
HOPS = (("fw", "nftables", 2_000), ("fwd", "lowtail-fwd", 50_000))


def _chain(tmp: Path, repetition: int, keep_second: bool = True) -> ChainDocument:
    hops = []
    for i, (name, kind, base) in enumerate(HOPS, 1):
        doc, _ = analysed(tmp, f"r{repetition}-{name}", base_latency_ns=base, seed=10 * repetition + i)
        latency: Any = doc["latency_ns"]
        kept = keep_second or i == 1
        hops.append(
            HopDocument(
                hop=i, name=name, kind=kind, captures=["pre", "link1"] if i == 1 else ["link1", "post"],
                sent=doc["sent"], received=doc["received"], lost=doc["lost"], latency_ns=latency, share=0.5,
                series_path=doc["export_path"] if kept else None,
            )
        )  # fmt: skip
    return ChainDocument(hops=hops, clock=ONE_CLOCK, packets_compared=1, sum_mismatch_ns=0, warnings=[])


def _compare(db: Path, *words: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "compare", *words, "--db", str(db), "--json"], capture_output=True, text=True
    )
    return done.returncode, json.loads(done.stdout)


def test_each_hop_is_a_configuration_pooled_over_the_repetitions(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "chain")
        for repetition in (0, 1):
            run_id = store_run(store, tmp_path, eid, "fw+fwd", kind="chain", repetition=repetition, seed=repetition)
            save_run_chain(store, run_id, _chain(tmp_path, repetition))
    code, doc = _compare(db, "experiment:1", "--by", "hop")
    assert code == 0, doc
    configs = {c["label"]: c for c in doc["configurations"]}
    assert set(configs) == {"hop 1. fw", "hop 2. fwd"}, list(configs)
    fw, fwd = configs["hop 1. fw"], configs["hop 2. fwd"]
    assert len(fw["runs"]) == len(fwd["runs"]) == 2 and fw["runs"] == fwd["runs"]
    # each hop's own packets and percentiles, pooled from its own series
    assert fw["sent"] == fwd["sent"] == 2 * 5_000
    assert fw["latency_ns"]["p50"] < 10_000 < 50_000 <= fwd["latency_ns"]["p50"]


def test_a_hop_without_its_series_is_said_and_a_plain_run_stays_whole(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "chain")
        run_id = store_run(store, tmp_path, eid, "fw+fwd", kind="chain", seed=1)
        save_run_chain(store, run_id, _chain(tmp_path, 0, keep_second=False))
        store_run(store, tmp_path, eid, "fwd", seed=2)
    code, doc = _compare(db, "experiment:1", "--by", "hop")
    assert code == 3, doc  # partial: one hop's distribution could not be read
    labels = sorted(c["label"] for c in doc["configurations"])
    assert labels == ["hop 1. fw", "hop 2. fwd", "hop –"], labels
    reasons = doc["partial_reasons"]
    assert doc["partial"] and any("2. fwd" in p and "hop's matched series was not kept" in p for p in reasons), reasons


def test_the_python_api_gives_every_hop_as_stored(tmp_path: Path) -> None:
    """`lowtail.open(db).hops()`: a chain's hops from Python (they were reachable only by SQL)."""
    import lowtail

    db = tmp_path / "c.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "chain")
        run_id = store_run(store, tmp_path, eid, "fw+fwd", kind="chain", seed=1)
        chain = _chain(tmp_path, 0)
        save_run_chain(store, run_id, chain)
    hops = lowtail.open(db).hops()
    assert list(hops["hop"]) == [1, 2] and list(hops["name"]) == ["fw", "fwd"] and set(hops["run_id"]) == {run_id}
    for row, hop in zip(hops.itertuples(), chain["hops"]):
        assert row.kind == hop["kind"] and row.sent == hop["sent"] and row.lost == hop["lost"]
        assert row.p99_9_ns == hop["latency_ns"]["p99_9"] and row.max_ns == hop["latency_ns"]["max"]
        assert row.series_path == hop["series_path"] and row.experiment_id == eid
