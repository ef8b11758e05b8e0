"""One run, one verdict (issue 22): the judgement `lowtail run` prints (its DuT lines and run
table judge the stored run), `compare --json` (a configuration of that one run), the
experiment page, the comparison page, `analyze --budget --json` on the same captures and the
Python API all say the same status for the same reason. Three runs, one of each status:
PASS (60,000 packets, far under the budget), FAIL (latency above it) and inconclusive (5,000
packets cannot bound p99.99 from above)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from compare_support import THREE_STATUS_RUNS, THREE_STATUS_VERDICT, lowtail_cli, three_status_experiment

import lowtail
from lowtail.cli.run import device_verdict_lines
from lowtail.compare.page import write_comparison_report
from lowtail.experiment.page import write_experiment_report
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.verdict.judge import parse_verdict

VERDICT, RUNS = THREE_STATUS_VERDICT, THREE_STATUS_RUNS
EXPECTED = {"pass": "PASS", "fail": "FAIL", "short": "inconclusive"}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("one-verdict")
    db = tmp / "v.duckdb"
    with open_store(db) as store:
        eid, _ = three_status_experiment(store, tmp, "three duts")
        rows = runstore.runs(store, eid)
    verdict = parse_verdict(VERDICT)
    judgements = {r["dut_name"]: verdict.judge(r) for r in rows}
    compared = lowtail_cli("compare", eid, "--db", db, "--json")
    assert compared.returncode in (0, 3), compared.stderr
    doc = json.loads(compared.stdout)
    return {"tmp": tmp, "db": db, "eid": eid, "rows": rows, "judgements": judgements, "compare": doc}


def test_run_judges_each_status_as_built(judged):
    judgements = judged["judgements"]
    assert {dut: j.status.value for dut, j in judgements.items()} == EXPECTED
    # What `lowtail run` prints at its end: one line per device, from the same judgement.
    lines = device_verdict_lines(judged["rows"], parse_verdict(VERDICT))
    for dut, j in judgements.items():
        line = next(line for line in lines if line.lstrip().startswith(dut))
        # The status is the line's second word; the label's cause follows it ("FAIL — latency").
        assert line.split()[1] == j.status.value, (dut, lines)
        assert all(word in line for word in j.label.replace(":", " ").replace(",", " ").split()), (dut, lines)


def test_compare_json_says_the_same(judged):
    by_label = {c["label"]: c["verdict"] for c in judged["compare"]["configurations"]}
    for dut, j in judged["judgements"].items():
        v = by_label[dut]
        assert (v["status"], v["reason"]) == (j.status.value, j.reason), dut
        assert v["confidence"] == pytest.approx(0.95)


def test_both_pages_say_the_same(judged):
    tmp, db = judged["tmp"], judged["db"]
    experiment_page = write_experiment_report(db, judged["eid"], tmp / "e.html").read_text()
    comparison_page = write_comparison_report(db, "latest", tmp / "c.html").read_text()
    for dut, j in judged["judgements"].items():
        reason = html.escape(j.reason, quote=False)
        assert reason in experiment_page, dut
        assert reason in comparison_page, dut


def test_analyze_budget_on_the_same_captures_says_the_same(judged):
    tmp: Path = judged["tmp"]
    for dut, j in judged["judgements"].items():
        (pre,) = tmp.glob(f"e*-{dut}-bare-*-pre.pcap")
        post = pre.with_name(pre.name.replace("-pre.pcap", "-post.pcap"))
        r = lowtail_cli(
            "analyze", pre, post, "--trim", "0", "--rate", "10k", "--budget", "100us", "--percentile", "99.99",
            "--no-store", "--json",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        v = json.loads(r.stdout)["verdict"]
        assert (v["status"], v["reason"]) == (j.status.value, j.reason), dut


def test_the_python_api_says_the_same(judged):
    doc = lowtail.open(judged["db"]).compare(str(judged["eid"])).document
    by_label = {c["label"]: c["verdict"] for c in doc["configurations"]}
    for dut, j in judged["judgements"].items():
        assert by_label[dut]["status"] == j.status.value, dut


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_certify_states_the_same_verdict_with_what_it_rests_on(judged):
    """`lowtail certify`: the qualification record a customer reads, on the same verdict."""
    page = judged["tmp"] / "cert.html"
    r = lowtail_cli("certify", judged["eid"], "--db", judged["db"], "-o", page, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["lowtail_version"] == lowtail.__version__ and doc["comparison_id"] is not None
    by_label = {c["label"]: c for c in doc["configurations"]}
    text = page.read_text()
    for dut, j in judged["judgements"].items():
        c = by_label[dut]
        assert (c["verdict"]["status"], c["verdict"]["reason"]) == (j.status.value, j.reason), dut
        assert c["percentile"] == "p99_99" and c["packets"] == RUNS[dut]["packets"] and c["lost"] == 0
        assert c["hosts"] and c["hosts"][0]["hostname"] == "lab1" and not c["emulated"]
        # The data's identity: each analysis's captures as read, which a reader can check again.
        (data,) = c["data"]
        assert data["captures"]["pre"]["path"].endswith("-pre.pcap") and data["captures"]["post"]["frames"] > 0
        assert html.escape(j.reason, quote=False) in text and html.escape(data["captures"]["pre"]["path"]) in text
    assert "95 % confidence" in text and "lowtail qualification record" in text
    # Bad input: one line, exit 2, no traceback.
    bad = lowtail_cli("certify", judged["eid"], "--db", judged["db"], "--confidence", "120", "--json")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and json.loads(bad.stdout)["exit_code"] == 2
