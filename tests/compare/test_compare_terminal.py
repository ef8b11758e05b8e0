"""`lowtail compare` in a terminal of 100 columns, on an IPS sweep of eight configurations
whose runs are explained: every line within the width, the causes of the tail grouped under
the configuration they belong to, what configurations share said once; and `--no-store`
(compare's and certify's) stores nothing.

Before: the table "causes of the tail" lost its configuration column (its header read
`explai`, every row started with `1`) and the comparison took 59 lines for 6 configurations
at 160 columns; every ad-hoc comparison was stored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from compare_support import experiment, store_run, trace_and_explain

from lowtail.store import comparisons as comparestore
from lowtail.store import open_store

LOWTAIL = [sys.executable, "-m", "lowtail"]


@pytest.fixture(scope="module")
def ips(tmp_path_factory) -> Path:
    """Suricata with two rule sets × two containments × two rates, one run each, explained
    (a task preempting the DuT while its slowest packets were in flight)."""
    tmp = tmp_path_factory.mktemp("ips")
    db = tmp / "i.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "ips", {"percentile": 99.99, "budget": "350us"})
        for rules in ("none", 1000):
            for containment in ("bare", "container"):
                for rate in (10_000, 50_000):
                    run = store_run(
                        store,
                        tmp,
                        eid,
                        "ips",
                        kind="suricata",
                        rate=rate,
                        containment=containment,
                        options={"rules": rules, "action": "alert", "containment": containment},
                        packets=20_000,
                        spike_probability=0.002,
                        spike_ns=60_000 if rules == "none" else 400_000,
                    )
                    trace_and_explain(store, run, tmp, spike_ns=30_000)
    return db


def compare(db: Path, *args: str, columns: int = 100) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LOWTAIL, "compare", "1", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": str(columns), "PATH": "/usr/bin:/bin"},
    )


def test_the_comparison_reads_in_100_columns(ips):
    done = compare(ips, "--no-store")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100, done.stdout
    assert len(lines) <= 45, done.stdout  # 8 configurations
    causes = done.stdout[done.stdout.index("causes of the tail") :]
    # Under their configuration (here all alike: said once, for every configuration).
    assert "every configuration: preemption on the dut (hog (pid 4242" in " ".join(causes.split())
    assert "explai " not in done.stdout and "explained runs" not in done.stdout
    why = " ".join(done.stdout[done.stdout.index("why (") : done.stdout.index("no floor")].split())
    assert "rules none · bare · 10 kpps, rules none · bare · 50 kpps" in why and "inconclusive: about" in why
    assert "FAIL: 99.99 % is at least" in why
    # Percentiles left unjudged for the same configurations are one line (five lines said the same).
    unjudged = [line.split(": not judged for ")[1] for line in lines if ": not judged for " in line]
    assert unjudged and len(unjudged) == len(set(unjudged)), done.stdout


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_no_store_stores_no_comparison(ips):
    with open_store(ips, read_only=True) as store:
        before = len(comparestore.list_comparisons(store))
    assert compare(ips, "--no-store").returncode == 0
    certified = subprocess.run(
        [*LOWTAIL, "certify", "1", "--no-store", "--db", str(ips)], capture_output=True, text=True, timeout=300
    )
    assert certified.returncode == 0, certified.stderr
    assert "on a comparison not stored" in certified.stderr
    with open_store(ips, read_only=True) as store:
        assert len(comparestore.list_comparisons(store)) == before
    refused = compare(ips, "--no-store", "-o", str(ips.parent / "c.html"))
    assert refused.returncode == 2 and "--output needs the comparison stored" in refused.stderr
    assert compare(ips).returncode == 0  # stored by default, as before
    with open_store(ips, read_only=True) as store:
        assert len(comparestore.list_comparisons(store)) == before + 1


def test_a_percentile_one_repetition_does_not_bound_points_at_the_mark_only_where_it_stands():
    """Imported captures: "p50: not judged for fwd: … (* above)" where the table showed fwd's
    p50 unmarked (the repetitions pooled bound it; one repetition's packets do not)."""
    from lowtail.cli.compare import _differences
    from lowtail.compare.document import UNBOUNDED

    def config(index: int, label: str, pooled_p50: bool) -> dict:
        per_run = [{"resolvable": {"p50": False, "p99_999": False}}, {"resolvable": {"p50": True, "p99_999": False}}]
        intervals = {"p50": {"resolvable": pooled_p50}, "p99_999": {"resolvable": False}}
        return {"index": index, "label": label, "per_run": per_run, "intervals": intervals}

    not_called = [{"reason": UNBOUNDED, "percentile": k, "a_index": 0, "b_index": 1} for k in ("p50", "p99_999")]
    doc = {
        "differences": [], "difference_family": {}, "not_resolvable": not_called, "level": 0.95,
        "configurations": [config(0, "fwd", True), config(1, "mirred", False)],
    }  # fmt: skip
    lines = [str(line) for line in _differences(doc)]  # type: ignore[arg-type]
    assert lines == [
        "p50: not judged for any configuration: the packets of a repetition do not bound it",
        "p99.999: not judged for any configuration: the packets of a repetition do not bound it (* above)",
    ]
