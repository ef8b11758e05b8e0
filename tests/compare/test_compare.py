"""`lowtail compare` end to end on stored runs (real synthetic captures, really analysed):
pooled exact percentiles over repetitions, their spread and worst repetition, the floor,
verdicts, differences built to differ and built not to, the stored tables a page reads,
the 80-column table, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_support import experiment, store_run
from rich.console import Console

from lowtail.cli.compare import comparison_view
from lowtail.compare import differences as diffs
from lowtail.store import comparisons as comparestore
from lowtail.store import open_store
from lowtail.store import runs as runstore

PACKETS = 30_000


def lowtail(*args, db=None):
    cmd = [sys.executable, "-m", "lowtail", *map(str, args)] + (["--db", str(db)] if db else [])
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Experiment 1: a wire calibration and DuTs `fast` (bare and container), `slow`, and
    `twin` (fast's distribution, other seeds), three repetitions each; one invalid run."""
    tmp = tmp_path_factory.mktemp("cmp")
    db = tmp / "c.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "four duts", {"percentile": 99.9, "budget": "30us"})
        for rep in range(3):
            store_run(
                store,
                tmp,
                eid,
                "wire",
                "wire",
                rep,
                base_latency_ns=3_000,
                jitter_ns=200.0,
                seed=90 + rep,
                packets=PACKETS,
            )
            for dut, containment, base, seed in (
                ("fast", "bare", 10_000, 10),
                ("fast", "container", 10_000, 20),
                ("slow", "bare", 40_000, 30),
                ("twin", "bare", 10_000, 40),
            ):
                store_run(
                    store,
                    tmp,
                    eid,
                    dut,
                    "lowtail-fwd",
                    rep,
                    containment=containment,
                    base_latency_ns=base,
                    jitter_ns=1_000.0,
                    seed=seed + rep,
                    packets=PACKETS,
                )
        store_run(
            store, tmp, eid, "slow", "lowtail-fwd", 3, valid=False, base_latency_ns=40_000, seed=99, packets=PACKETS
        )
    return db, eid


@pytest.fixture(scope="module")
def compared(stored):
    db, eid = stored
    done = lowtail("compare", eid, "--json", db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def by_label(doc):
    return {c["label"]: c for c in doc["configurations"]}


def test_configurations_are_the_axes_that_vary_and_runs_sharing_them_repetitions(compared, stored):
    db, eid = stored
    assert compared["by"] == ["dut", "containment"]
    configs = by_label(compared)
    assert set(configs) == {"fast · bare", "fast · container", "slow · bare", "twin · bare"}
    with open_store(db, read_only=True) as store:
        rows = runstore.runs(store, eid)
    for c in configs.values():
        assert c["repetitions"] == 3 and len(c["runs"]) == 3
        members = [r for r in rows if r["run_id"] in c["runs"]]
        assert {r["dut_name"] for r in members} == {c["key"]["dut"]}
        assert c["sent"] == sum(r["sent"] for r in members) and c["lost"] == 0 and c["loss_ratio"] == 0
    # The invalid repetition is not pooled, and is said.
    slow = configs["slow · bare"]
    assert [i["run_id"] for i in slow["invalid_runs"]] == [r["run_id"] for r in rows if not r["valid"]]
    # Calibration runs are the floor, not a configuration.
    wire = [r["run_id"] for r in rows if r["calibration"]]
    assert sorted(x["run_id"] for x in compared["left_out"]) == wire
    assert all(c["floor"]["runs"] == wire for c in configs.values())


def test_pooled_figures_are_exact_over_all_packets_and_the_spread_over_repetitions(compared, stored):
    db, eid = stored
    with open_store(db, read_only=True) as store:
        rows = {r["run_id"]: r for r in runstore.runs(store, eid)}
    c = by_label(compared)["fast · container"]
    packets = np.sort(
        np.concatenate([pq.read_table(rows[r]["series_path"]).column("latency_ns").to_numpy() for r in c["runs"]])
    )
    for key, q in (("p50", 0.5), ("p99", 0.99), ("p99_9", 0.999), ("p99_99", 0.9999), ("p99_999", 0.99999)):
        assert c["latency_ns"][key] == packets[max(1, int(np.ceil(q * len(packets)))) - 1], key
        per_run = [rows[r][f"lat_{key}_ns"] for r in c["runs"]]
        assert c["spread"][key] == {"min": min(per_run), "max": max(per_run)}
    assert c["latency_ns"]["max"] == packets[-1] and c["latency_ns"]["samples"] == len(packets)
    worst = max(c["runs"], key=lambda r: (rows[r]["lat_p99_9_ns"], rows[r]["lat_max_ns"]))
    assert c["worst_repetition"] == worst
    # 90,000 packets bound the 99.99th percentile but not the 99.999th.
    assert c["intervals"]["p99_99"]["resolvable"] and not c["intervals"]["p99_999"]["resolvable"]
    assert c["intervals"]["p99_999"]["packets_needed"] > len(packets)


def test_verdicts_use_the_stored_budget_and_the_floor_is_the_calibration(compared):
    configs = by_label(compared)
    assert compared["verdict"]["key"] == "p99_9" and compared["verdict"]["budget_ns"] == 30_000
    assert configs["slow · bare"]["verdict"]["status"] == "FAIL"
    assert configs["fast · bare"]["verdict"]["status"] == "PASS"
    assert configs["fast · bare"]["floor"]["latency_ns"]["p99_9"] < configs["fast · bare"]["latency_ns"]["p99_9"]


def test_differences_are_called_only_beyond_run_to_run_variation_with_their_effect_size(compared):
    called = {(d["lower"], d["higher"], d["percentile"]) for d in compared["differences"]}
    assert ("fast · bare", "slow · bare", "p99_9") in called and ("fast · bare", "slow · bare", "p50") in called
    d = next(d for d in compared["differences"] if d["higher"] == "slow · bare" and d["percentile"] == "p99_9")
    assert d["text"].startswith("fast · bare is lower than slow · bare at p99.9 by ")
    assert d["ratio_lower"] <= d["ratio"] <= d["ratio_upper"] and d["repetitions"] == [3, 3] and d["df"] == 4
    family = compared["difference_family"]
    assert family["procedure"] == "Holm" and f"Holm over {family['comparisons']} comparisons" in d["text"]
    # Built not to differ: fast and its twin share a distribution; judged at every headline
    # percentile the repetitions bound, called at none.
    twins = [d for d in compared["not_resolvable"] if {d["a"], d["b"]} == {"fast · bare", "twin · bare"}]
    assert {d["percentile"] for d in twins} == {"p50", "p99", "p99_9", "p99_99", "p99_999"}
    assert all(d["text"].startswith("fast · bare and twin · bare at p") and "not called" in d["text"] for d in twins)
    assert not any({d["lower"], d["higher"]} == {"fast · bare", "twin · bare"} for d in compared["differences"])
    # p99.999 is beyond what 30,000 packets of a repetition bound: never called.
    assert all(d["percentile"] != "p99_999" for d in compared["differences"])
    assert all(d["reason"] == diffs.UNBOUNDED for d in compared["not_resolvable"] if d["percentile"] == "p99_999")


def _side(values, label="a", degraded=False, emulated=False, bounded=True):
    return diffs.Side(
        label=label,
        values=list(values),
        bounded=[bounded] * len(values),
        pooled_ns=int(np.median(values)),
        degraded=degraded,
        emulated=emulated,
    )


def test_the_difference_test_is_students_t_on_log_repetitions_and_holm_over_the_family():
    from scipy.stats import ttest_ind

    a, b = [100, 104, 97], [130, 125, 141]
    t = diffs.t_test([np.log(v) for v in a], [np.log(v) for v in b], 0.95)
    assert t.p_value == pytest.approx(ttest_ind(np.log(b), np.log(a)).pvalue, rel=1e-9) and t.df == 4
    assert t.lower < t.ratio < t.upper and t.ratio == pytest.approx(np.exp(np.log(b).mean() - np.log(a).mean()))
    # Holm: the smallest p against α/m, the next against α/(m−1), stopping at the first kept.
    assert diffs.holm([0.01, 0.04, 0.03, 0.5], 0.05) == [True, False, False, False]
    assert diffs.holm([0.01, 0.016, 0.024, 0.049], 0.05) == [True, True, True, True]
    judged = diffs.judge(_side(a), _side(b, "b"), "p99_9", 0.95)
    assert judged["reason"] == diffs.NOT_SIGNIFICANT and judged["p_value"] == t.p_value  # called by the family
    # Never called, whatever the test: degraded runs, emulated against native, one repetition,
    # a repetition that does not bound the percentile.
    assert diffs.judge(_side(a), _side(b, "b", degraded=True), "p99_9", 0.95)["reason"] == diffs.DEGRADED
    emulated = diffs.judge(_side(a), _side(b, "b", emulated=True), "p99_9", 0.95)
    assert emulated["reason"] == diffs.EMULATED and "QEMU's emulator" in emulated["why"]
    assert diffs.judge(_side(a[:1]), _side(b, "b"), "p99_9", 0.95)["reason"] == diffs.FEW_REPETITIONS
    assert diffs.judge(_side(a), _side(b, "b", bounded=False), "p99_9", 0.95)["reason"] == diffs.UNBOUNDED


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_what_the_page_reads_is_stored(compared, stored, tmp_path):
    db, _ = stored
    cid = compared["comparison_id"]
    with open_store(db, read_only=True) as store:
        row = comparestore.comparison(store, cid)
        curves = comparestore.comparison_curves(store, cid)
        cdf = comparestore.comparison_cdf(store, cid)
        worst = comparestore.comparison_worst(store, cid)
    assert row["document"]["configurations"] == compared["configurations"]
    for c in compared["configurations"]:
        entry = curves[c["index"]]
        assert entry["pooled"][-1] == (1.0, c["latency_ns"]["max"])
        assert len(entry["repetitions"]) == 3 and entry["floor"]
        for p, lo, hi in entry["band"]:
            values = [dict(points)[p] for points in entry["repetitions"].values()]
            assert (lo, hi) == (min(values), max(values))
        assert len(cdf[c["index"]]) == 1001 and cdf[c["index"]][500][1] == c["latency_ns"]["p50"]
        assert {w["run_id"] for w in worst[c["index"]]} == set(c["runs"])
    page = lowtail("comparison", "report", cid, "-o", tmp_path / "c.html", db=db)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "c.html").read_text()
    assert "fast · container" in html and "Not called" in html


def test_the_table_reads_in_80_columns(compared):
    console = Console(width=80, record=True, highlight=False)
    console.print(comparison_view(compared, 80))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "p99.9" in text and "floor" in text and "FAIL" in text and "PASS" in text
    assert "fast · bare is lower than slow · bare at p99.9" in text
    assert "inconclusive: these packets do not bound" in text  # the p99.999 column is marked
    # Narrower, the p99.999 column goes, and with it the footnote of its marks.
    narrow = Console(width=60, record=True, highlight=False)
    narrow.print(comparison_view(compared, 60))
    narrow_text = narrow.export_text()
    (header,) = [line for line in narrow_text.splitlines() if "reps" in line]
    assert "p99.999" not in header and "inconclusive: these packets do not bound" not in narrow_text


def test_the_cli_prints_the_table_and_stores_the_comparison(stored):
    db, eid = stored
    done = lowtail("compare", eid, "dut!=twin", "--by", "dut", "--budget", "20us", db=db)
    assert done.returncode == 0, done.stderr
    assert "fast" in done.stdout and "twin" not in done.stdout.split("differences")[0]
    assert "stored as comparison" in done.stderr
    # fast ran bare and in a container: --by dut pools them, and says so.
    assert "containment varies within configurations (bare, container)" in done.stdout
    assert "--by dut,containment keeps them apart" in done.stdout
    listed = lowtail("comparison", "list", "--json", db=db)
    assert any(c["by_axes"] == ["dut"] for c in json.loads(listed.stdout))


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_filters_narrow_and_bad_input_is_one_line(stored):
    db, eid = stored
    narrowed = json.loads(lowtail("compare", "containment=container", "--json", db=db).stdout)
    assert [c["label"] for c in narrowed["configurations"]] == ["fast"]  # one configuration: its DuT
    either = json.loads(lowtail("compare", eid, "dut=fast,slow", "--by", "dut", "--json", db=db).stdout)
    assert [c["label"] for c in either["configurations"]] == ["fast", "slow"]
    neither = json.loads(lowtail("compare", eid, "dut!=fast,slow", "--by", "dut", "--json", db=db).stdout)
    assert [c["label"] for c in neither["configurations"]] == ["twin"]
    for args, message in [
        (
            ("dut=nope",),
            "dut=nope left no run: none of the 16 selected runs matches it (dut there: fast, slow, twin, wire)",
        ),
        ((eid, "colour=red"), "the selected runs have no field 'colour'"),
        ((eid, "--by", "colour"), "no axis 'colour' among these runs"),
        (("run:999",), "no run with id 999"),
        (("3x",), "cannot read '3x' as a selection"),
        ((eid, "--percentile", "99.95"), "--percentile: percentile must be one of"),
    ]:
        done = lowtail("compare", *args, "--json", db=db)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert json.loads(done.stdout)["exit_code"] == 2


def test_runs_stored_with_different_budgets_are_said_and_judged_against_the_one_given(tmp_path):
    db = tmp_path / "b.duckdb"
    with open_store(db) as store:
        strict = experiment(store, "strict", {"percentile": 99.9, "budget": "11us"})
        loose = experiment(store, "loose", {"percentile": 99, "budget": "1ms"})
        store_run(store, tmp_path, strict, "a", base_latency_ns=10_000, seed=1)
        store_run(store, tmp_path, loose, "b", base_latency_ns=10_000, seed=2)
    own = json.loads(lowtail("compare", strict, loose, "--json", db=db).stdout)
    assert own["verdict"] is None and any("different budgets" in n for n in own["notes"])
    assert [c["verdict"]["percentile"] for c in own["configurations"]] == ["p99_9", "p99"]
    given = json.loads(
        lowtail("compare", strict, loose, "--budget", "5ms", "--percentile", "99.99", "--json", db=db).stdout
    )
    assert given["verdict"]["budget_ns"] == 5_000_000 and given["verdict"]["key"] == "p99_99"
    assert any("judged against the one given" in n for n in given["notes"])


def test_a_lost_series_pools_from_the_stored_summary_and_a_run_without_either_is_left_out(tmp_path):
    db = tmp_path / "p.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "e")
        ids = [store_run(store, tmp_path, eid, "a", repetition=r, seed=r) for r in range(2)]
        gone = runstore.run_figures(store, ids[0])["series_path"]
    Path(gone).unlink()
    whole = lowtail("compare", eid, "--json", db=db)
    assert whole.returncode == 0, whole.stderr
    c = json.loads(whole.stdout)["configurations"][0]
    assert c["latency_ns"]["samples"] == c["sent"]  # both runs pooled: the summary stands for the series
    with open_store(db) as store:
        aid = runstore.run_figures(store, ids[0])["analysis_id"]
        store.con.execute("DELETE FROM analysis_summaries WHERE analysis_id = ?", [aid])
    done = lowtail("compare", eid, "--json", db=db)
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    assert doc["partial"] and f"run {ids[0]} left out of the pooled figures" in doc["partial_reasons"][0]
    assert "the matched series is gone" in doc["partial_reasons"][0]
    c = doc["configurations"][0]
    assert c["repetitions"] == 2 and c["latency_ns"]["samples"] < c["sent"]  # pooled over one run only


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_evt_over_runs_fits_missing_models_and_reads_them_back(tmp_path):
    db = tmp_path / "e.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "evt")
        for rep in range(2):
            store_run(
                store,
                tmp_path,
                eid,
                "a",
                repetition=rep,
                seed=rep,
                packets=60_000,
                spike_probability=0.0005,
                spike_ns=50_000,
            )
        store_run(store, tmp_path, eid, "b", seed=9, packets=20_000)
    fitted = json.loads(lowtail("compare", eid, "--evt", "--json", db=db).stdout)
    rows = {r["label"]: r for r in fitted["evt"]}
    assert rows["a"]["models"] == 2 and rows["a"]["bounded"] <= 2
    assert rows["a"]["bounded_share"] == rows["a"]["bounded"] / 2 and rows["a"]["mean_exceedances"] is not None
    assert rows["b"]["models"] == 0 and "too few" in rows["b"]["missing"][0]["why"]
    # Stored: a comparison without --evt reads the same models.
    again = json.loads(lowtail("compare", eid, "--json", db=db).stdout)
    assert {r["label"]: r["model_ids"] for r in again["evt"]} == {r["label"]: r["model_ids"] for r in fitted["evt"]}


def test_latency_against_rate_carries_the_stored_knee(tmp_path):
    from lowtail.models.knee import sweep_knees

    db = tmp_path / "r.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "sweep")
        for rate, base, seed in ((10_000, 10_000, 1), (50_000, 12_000, 2), (90_000, 5_000_000, 3)):
            store_run(store, tmp_path, eid, "fwd", rate=rate, base_latency_ns=base, seed=seed)
            store_run(
                store, tmp_path, eid, "kernel", "kernel-mirred", rate=rate, base_latency_ns=base // 2, seed=seed + 9
            )
        sweep_knees(store, eid)
    doc = json.loads(lowtail("compare", eid, "--json", db=db).stdout)
    series = {s["label"]: s for s in doc["rates"]}
    assert set(series) == {"fwd", "kernel"}
    assert [p["rate_pps"] for p in series["fwd"]["points"]] == [10_000, 50_000, 90_000]
    assert series["fwd"]["knees"][0]["knee_pps"] == 90_000


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_comparison_with_emulated_vm_runs_says_so(tmp_path):
    """VM runs under QEMU's emulator (TCG) carry an emulator's latencies: the comparison
    names them in its document, warns on the terminal and puts the warning over its page."""
    from lowtail.core.virtualization import TCG_WARNING

    db = tmp_path / "v.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "vm and bare", {"percentile": 99.9, "budget": "1ms"})
        bare = store_run(store, tmp_path, eid, "fwd", seed=1, packets=PACKETS)
        vm = store_run(
            store, tmp_path, eid, "vm-fwd", "vm", containment="vm", virtualization="tcg", seed=2, packets=PACKETS
        )
    done = lowtail("compare", eid, "--json", "-o", tmp_path / "v.html", db=db)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["emulated_runs"] == [vm] and bare not in doc["emulated_runs"]
    assert TCG_WARNING in " ".join(done.stderr.split())
    assert "emulator" in (tmp_path / "v.html").read_text()


def test_different_budgets_are_one_line_that_holds_for_every_configuration(tmp_path):
    """One DuT's runs from two experiments of different budgets pooled as one configuration:
    one note says how every configuration is judged, naming the pooled one (two lines said
    'each against its own' and 'judged together against experiment 1's')."""
    db = tmp_path / "m.duckdb"
    with open_store(db) as store:
        strict = experiment(store, "strict", {"percentile": 99.9, "budget": "11us"})
        loose = experiment(store, "loose", {"percentile": 99, "budget": "1ms"})
        store_run(store, tmp_path, strict, "a", base_latency_ns=10_000, seed=1)
        store_run(store, tmp_path, loose, "a", base_latency_ns=10_000, seed=2)
    doc = json.loads(lowtail("compare", strict, loose, "--by", "dut", "--json", db=db).stdout)
    budgets = [n for n in doc["notes"] if "budget" in n]
    assert len(budgets) == 1, doc["notes"]
    assert "pool runs of different budgets and are judged against their first experiment's" in budgets[0]
