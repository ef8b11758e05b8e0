"""Per-flow figures: a synthetic pair whose flows have known, different latencies (`lowtail
synth`'s `flows` and `flow_offsets_ns`) and known losses, analysed; every flow's packets
and exact percentiles equal those its ground truth implies, the flows add up to the pooled
figures exactly, the series carries each packet's flow, the store keeps them, and
`--flow-key` chooses what tells flows apart (its parser checked by hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from analyze_support import PERCENTILES, analyze, latency_summary, run_cli, synth
from hypothesis import given
from hypothesis import strategies as st

from lowtail.analyze.document import flow_spread as spread
from lowtail.analyze.document import flows_worst_first as worst_first
from lowtail.analyze.flows import FLOW_KEYS, parse_flow_key
from lowtail.core.errors import UserError

FLOWS = 8
# Flow f is f µs slower than flow 0, and flow 5 the slowest of all: the worst flow is known.
OFFSETS = [0, 1_000, 2_000, 3_000, 4_000, 60_000, 6_000, 7_000]
SPEC = dict(
    packets=40_000,
    rate_pps=20_000,
    flows=FLOWS,
    flow_offsets_ns=OFFSETS,
    jitter_ns=300.0,
    spike_probability=0.001,
    spike_ns=30_000,
    loss=0.003,
    loss_burst=3,
    fifo=False,
    seed=11,
)
TRIM_NS = 1_000_000_000


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    return synth(tmp_path_factory.mktemp("flows"), **SPEC)


@pytest.fixture(scope="module")
def exported(pair, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    series = tmp_path_factory.mktemp("series") / "series.parquet"
    return analyze(pair.pre, pair.post, export=str(series)), series


def truth_by_flow(pair) -> dict[int, dict]:
    """Each flow's packets and latency figures after the trim, from the generator's truth."""
    t = pq.read_table(pair.truth)
    pre, flow = t.column("pre_ts_ns").to_numpy(), t.column("flow").to_numpy()
    post_col = t.column("post_ts_ns")
    arrived = ~np.asarray(post_col.is_null().to_numpy(zero_copy_only=False))
    post = post_col.fill_null(0).to_numpy()
    kept = pre >= pre[0] + TRIM_NS
    out = {}
    for f in range(FLOWS):
        mine = kept & (flow == f)
        out[f] = {
            "sent": int(mine.sum()),
            "lost": int((mine & ~arrived).sum()),
            "received": int((mine & arrived).sum()),
            "latency": latency_summary((post - pre)[mine & arrived]),
        }
    return out


def test_every_flow_reproduces_its_truth_exactly(pair, exported) -> None:
    doc, _ = exported
    want = truth_by_flow(pair)
    flows = doc["flows"]
    assert flows["key"] == "5tuple" and not flows["overflowed"]
    assert [f["flow"] for f in flows["flows"]] == list(range(FLOWS))
    for f in flows["flows"]:
        w = want[f["flow"]]
        assert (f["sent"], f["received"], f["lost"]) == (w["sent"], w["received"], w["lost"]), f["key"]
        assert f["key"] == f"10.0.0.1:{49152 + f['flow']} > 10.0.0.2:53"
        for key in ("min", "max", *(k for k, _ in PERCENTILES)):
            assert f["latency_ns"][key] == w["latency"][key], (f["flow"], key)
    # the flows' latencies are what the model gave them: offsets apart at the median
    medians = [f["latency_ns"]["p50"] for f in flows["flows"]]
    assert medians.index(max(medians)) == 5


def test_flows_add_up_to_the_pooled_figures_exactly(exported) -> None:
    doc, _ = exported
    flows = doc["flows"]["flows"]
    for name in ("sent", "received", "lost", "negative"):
        assert sum(f[name] for f in flows) == doc[name], name
    assert sum(f["latency_ns"]["samples"] for f in flows) == doc["latency_ns"]["samples"]
    assert doc["lost"] > 0  # the test would prove nothing without losses
    assert max(f["latency_ns"]["max"] for f in flows) == doc["latency_ns"]["max"]
    assert min(f["latency_ns"]["min"] for f in flows) == doc["latency_ns"]["min"]
    assert not any("do not add up" in w for w in doc["warnings"])


def test_worst_flows_first_and_their_spread(exported) -> None:
    doc, _ = exported
    flows = doc["flows"]["flows"]
    ranked = worst_first(flows)
    assert ranked[0]["flow"] == 5
    assert [f["latency_ns"]["p99_9"] for f in ranked] == sorted((f["latency_ns"]["p99_9"] for f in flows), reverse=True)
    s = doc["flow_spread"]
    assert s == spread(flows)
    assert s["greatest_ns"] == ranked[0]["latency_ns"]["p99_9"] and s["least_ns"] == ranked[-1]["latency_ns"]["p99_9"]
    assert s["worst_max_ns"] == doc["latency_ns"]["max"]


def test_the_series_carries_each_packets_flow(pair, exported) -> None:
    _, series = exported
    t = pq.read_table(series)
    truth = pq.read_table(pair.truth)
    flow_of_id = dict(zip(truth.column("id").to_pylist(), truth.column("flow").to_pylist()))
    ids, flows = t.column("id").to_pylist(), t.column("flow").to_pylist()
    assert t.schema.field("flow").type == "uint32"
    assert all(flow_of_id[i] == f for i, f in zip(ids, flows))


# An elephant among mice: flow 5 (the slowest) sends 8 of every 20 packets, flow 2 five.
WEIGHTS = [1, 1, 5, 1, 1, 8, 2, 1]


def test_weighted_flows_send_their_weights_and_reproduce_their_truth(tmp_path: Path) -> None:
    """`flow_weights` (what `[traffic] flow_weights` has lowtail-gen send): every whole cycle of
    Σ weights packets gives each flow its weight, and each flow's figures are still exactly its
    truth's, numbered in the order flows first appear."""
    spec = {**SPEC, "flow_weights": WEIGHTS, "packets": 20 * 2_000}
    weighted = synth(tmp_path, **spec)
    doc = analyze(weighted.pre, weighted.post, trim_ns=0)
    flows = {f["flow"]: f for f in doc["flows"]["flows"]}
    assert [flows[f]["sent"] for f in range(FLOWS)] == [w * 2_000 for w in WEIGHTS]
    assert [flows[f]["key"] for f in range(FLOWS)] == [f"10.0.0.1:{49152 + f} > 10.0.0.2:53" for f in range(FLOWS)]
    trimmed = analyze(weighted.pre, weighted.post)
    want = truth_by_flow(weighted)
    for f in trimmed["flows"]["flows"]:
        w = want[f["flow"]]
        assert (f["sent"], f["received"], f["lost"]) == (w["sent"], w["received"], w["lost"]), f["key"]
        for key in ("min", "max", *(k for k, _ in PERCENTILES)):
            assert f["latency_ns"][key] == w["latency"][key], (f["flow"], key)


@pytest.mark.parametrize(
    ("weights", "says"),
    [([1, 2], "2 weights for 8 flows"), ([1, 0, 1, 1, 1, 1, 1, 1], "flow weight 0"), ([10_001] * 8, "flow weight")],
)
def test_weights_that_make_no_schedule_are_refused(tmp_path: Path, weights: list[int], says: str) -> None:
    done = run_cli(
        "synth",
        tmp_path / "a.pcap",
        tmp_path / "b.pcap",
        "--set",
        f"flows={FLOWS}",
        "--set",
        f"flow_weights={json.dumps(weights)}",
    )
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "a.pcap").exists()


def test_one_flow_is_the_pooled_analysis(tmp_path: Path) -> None:
    p = synth(tmp_path, packets=30_000, rate_pps=20_000, seed=3, loss=0.001)
    doc = analyze(p.pre, p.post)
    (only,) = doc["flows"]["flows"]
    assert (only["sent"], only["received"], only["lost"]) == (doc["sent"], doc["received"], doc["lost"])
    assert only["latency_ns"] == doc["latency_ns"]


@pytest.mark.parametrize(("key", "flows", "label"), [("src-port", FLOWS, "src port 49152"), ("none", 1, "all packets")])
def test_flow_key_chooses_what_tells_flows_apart(pair, key: str, flows: int, label: str) -> None:
    doc = analyze(pair.pre, pair.post, flow_key=key)
    assert doc["flows"]["key"] == key
    assert len(doc["flows"]["flows"]) == flows
    assert doc["flows"]["flows"][0]["key"] == label
    assert sum(f["lost"] for f in doc["flows"]["flows"]) == doc["lost"]


def test_moonsniff_records_are_one_flow(tmp_path: Path) -> None:
    p = synth(
        tmp_path, suffix=".mscap", format="moonsniff", id_width=4, id_big_endian=False, packets=30_000, rate_pps=20_000
    )
    doc = analyze(p.pre, p.post, id_format="moonsniff")
    (only,) = doc["flows"]["flows"]
    assert only["sent"] == doc["sent"]


def test_cli_prints_stores_and_reads_back_the_flows(pair, tmp_path: Path) -> None:
    db = tmp_path / "lowtail.duckdb"
    done = run_cli("analyze", pair.pre, pair.post, "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["flows"]["flows"][0]["flow"] == 5  # worst first
    text = run_cli("analyze", pair.pre, pair.post, "--db", db, "--no-store")
    assert text.returncode == 0, text.stderr
    assert "flows (8 by 5tuple" in text.stdout and "10.0.0.1:49157 > 10.0.0.2:53" in text.stdout
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT flow, sent, lost, lat_p99_9_ns FROM analysis_flows WHERE analysis_id = ? ORDER BY flow",
            [doc["analysis_id"]],
        ).fetchall()
        (key,) = con.execute("SELECT flow_key FROM analysis_flow_keys").fetchone()
    by_flow = {f["flow"]: f for f in doc["flows"]["flows"]}
    assert key == "5tuple"
    assert rows == [(i, by_flow[i]["sent"], by_flow[i]["lost"], by_flow[i]["latency_ns"]["p99_9"]) for i in range(8)]
    from lowtail.store import open_store
    from lowtail.store.analyses import analysis_flows

    with open_store(db) as s:
        stored = analysis_flows(s, doc["analysis_id"])
    assert stored is not None
    assert [f["sent"] for f in stored["flows"]] == [by_flow[i]["sent"] for i in range(8)]
    assert stored["flows"][3]["latency_ns"]["p99_9"] == by_flow[3]["latency_ns"]["p99_9"]

    # `show` prints them again as `analyze` did (it left them out), and its JSON has them worst first.
    shown = run_cli("show", doc["analysis_id"], "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "flows (8 by 5tuple" in shown.stdout and "10.0.0.1:49157 > 10.0.0.2:53" in shown.stdout
    again = json.loads(run_cli("show", doc["analysis_id"], "--db", db, "--json").stdout)
    assert again["flows"] == doc["flows"]


@given(st.text(max_size=30))
def test_flow_key_parser_takes_the_names_and_refuses_the_rest(text: str) -> None:
    try:
        parsed = parse_flow_key(text)
    except UserError as e:
        message = str(e)
        assert "\n" not in message and message.startswith("--flow-key ")
        assert text.strip().lower() not in FLOW_KEYS
    else:
        assert parsed in FLOW_KEYS and parsed == text.strip().lower()


@given(st.sampled_from(FLOW_KEYS), st.sampled_from(["", " ", "\t"]), st.booleans())
def test_flow_key_parser_ignores_case_and_spaces(key: str, pad: str, upper: bool) -> None:
    assert parse_flow_key(pad + (key.upper() if upper else key) + pad) == key


def test_a_bad_flow_key_is_one_line_and_exit_2(pair) -> None:
    done = run_cli("analyze", pair.pre, pair.post, "--no-store", "--flow-key", "5-tuple\x1b[2J")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert "--flow-key" in line and "\x1b" not in line


def test_the_analysis_page_has_a_flows_section(pair, tmp_path: Path) -> None:
    db = tmp_path / "page.duckdb"
    done = run_cli("analyze", pair.pre, pair.post, "--db", db, "--json", "--report", tmp_path / "page.html")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    html = (tmp_path / "page.html").read_text()
    assert ">Flows<" in html or "Flows</h2>" in html
    worst = doc["flows"]["flows"][0]
    assert worst["key"].replace(">", "&gt;") in html
    assert "Latency by percentile, per flow" in html and "Latency distribution per flow (CDF)" in html


def test_compare_by_flow_pools_each_flows_repetitions(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment, store_run

    from lowtail.compare.comparison import CompareOptions, compare
    from lowtail.store import open_store

    spec = dict(packets=8_000, rate_pps=20_000, flows=4, flow_offsets_ns=[0, 0, 50_000, 0], fifo=False)
    with open_store(tmp_path / "c.duckdb") as s:
        eid = experiment(s, "flows")
        runs = [store_run(s, tmp_path, eid, "fwd", repetition=r, seed=r + 1, **spec) for r in range(2)]
        c = compare(s, [str(eid)], CompareOptions(by=["flow"]))
        one = compare(s, [str(eid)], CompareOptions(by=["dut"]))
    configs = c.document["configurations"]
    assert len(configs) == 4 and len(runs) == 2
    assert all(cfg["repetitions"] == 2 for cfg in configs)
    # the flows partition the pooled configuration: packets add up, and flow 2 is the slow one
    (pooled,) = one.document["configurations"]
    assert sum(cfg["sent"] for cfg in configs) == pooled["sent"]
    assert sum(cfg["latency_ns"]["samples"] for cfg in configs) == pooled["latency_ns"]["samples"]
    slow = max(configs, key=lambda cfg: cfg["latency_ns"]["p50"])
    assert slow["label"] == "flow 10.0.0.1:49154 > 10.0.0.2:53"


def test_the_experiment_page_has_each_runs_worst_flows(tmp_path: Path) -> None:
    """The flows example's experiment page gave each run's flows one line; the worst flows'
    table was only on the analysis's own page, which nothing on the experiment's pointed to."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment, store_run

    from lowtail.experiment.page import write_experiment_report
    from lowtail.store import open_store

    spec = dict(packets=8_000, rate_pps=20_000, flows=4, flow_offsets_ns=[0, 0, 50_000, 0], fifo=False)
    with open_store(tmp_path / "c.duckdb") as s:
        eid = experiment(s, "flows")
        run = store_run(s, tmp_path, eid, "fwd", seed=1, **spec)
        plain = store_run(s, tmp_path, eid, "kernel", seed=2)
    html = write_experiment_report(tmp_path / "c.duckdb", eid, tmp_path / "e.html").read_text()
    assert f"Run {run}: flows</h3>" in html and f"Run {plain}: flows" not in html
    section = html[html.index(f"Run {run}: flows</h3>") :]
    assert "4 flows told apart by 5tuple" in section
    assert section.index("10.0.0.1:49154 &gt; 10.0.0.2:53") < section.index("</table>")  # the slow flow, listed


def test_the_flows_example_is_a_valid_experiment() -> None:
    from lowtail.experiment import spec

    exp = spec.parse(spec.example_text("flows"), "flows.toml")
    (combination,) = exp.combinations()
    assert combination.traffic.flows == 64 and combination.dut.kind == "suricata"
    assert combination.dut.options.threads == 2
