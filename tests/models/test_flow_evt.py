"""Per-flow EVT (models/flow_evt.py) checked by simulation against flows with a known tail:
a body below u0 and, above it, a generalized Pareto tail of known ξ and σ. Flows drawn from
the model are verified about as often as the test's level promises and their ξ lies in its
interval; a flow whose tail grows in its held-out part is contradicted; a flow too short to
have a tail is named unsupported; a series with a flow column is read flow by flow."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest

from lowtail.core import series
from lowtail.models import gpd
from lowtail.models.flow_evt import FlowEvtOptions, flow_tail, flow_tails

XI, SIGMA, U0, TAIL_SHARE = 0.1, 2_000.0, 10_000.0, 0.02


def known_tail(n: int, rng: np.random.Generator, sigma: float = SIGMA) -> np.ndarray:
    """Latencies whose top TAIL_SHARE is U0 + GPD(sigma, XI): above the 99th percentile (the
    threshold) the tail is a GPD with the same ξ (threshold stability)."""
    body = rng.uniform(3_000.0, U0, n)
    tail = rng.random(n) < TAIL_SHARE
    body[tail] = U0 + gpd.sample(int(tail.sum()), sigma, XI, rng)
    return np.round(body).astype(np.int64)


def test_true_tails_are_verified_as_often_as_the_level_promises() -> None:
    rng = np.random.default_rng(2022)
    flows = [flow_tail(f, known_tail(40_000, rng)) for f in range(40)]
    assert all(d["status"] != "unsupported" for d in flows), [d["reason"] for d in flows]
    verified = sum(d["status"] == "verified" for d in flows)
    # 95 % test: 38 of 40 expected; 33 or fewer has probability < 0.3 % under the model.
    assert verified >= 34, [d["reason"] for d in flows if d["status"] != "verified"]
    covered = sum(d["xi_ci"] is not None and d["xi_ci"][0] <= XI <= d["xi_ci"][1] for d in flows)
    assert covered >= 33
    # the prediction at 99.99 % lies near the true quantile of the known tail
    truth = U0 + gpd.quantile(1 - 1e-4 / TAIL_SHARE, SIGMA, XI)
    predicted = np.median([d["predicted_ns"]["p99_99"] for d in flows])
    assert abs(predicted - truth) / truth < 0.05


def test_a_tail_that_grows_in_the_held_out_part_is_contradicted() -> None:
    rng = np.random.default_rng(7)
    grown = np.concatenate([known_tail(30_000, rng), known_tail(30_000, rng, sigma=4 * SIGMA)])
    doc = flow_tail(3, grown)
    assert doc["status"] == "contradicted", doc["reason"]
    assert doc["observed"] is not None and doc["expected"] is not None and doc["observed"] > doc["expected"]
    # The level in the one unit formatter's words ("5276.033 µs" before, where it meant 5.276 ms).
    slow = flow_tail(3, grown * 100)
    assert re.search(r"held-out packets above [0-9]{1,3}\.[0-9]{3} ms where", slow["reason"]), slow["reason"]


def test_a_flow_too_short_for_a_tail_is_named_unsupported() -> None:
    rng = np.random.default_rng(1)
    short = flow_tail(9, known_tail(1_500, rng))
    assert short["status"] == "unsupported" and "exceedances" in short["reason"]
    # enough to fit, too few held out to check the level ten times deeper
    unchecked = flow_tail(9, known_tail(8_000, rng), FlowEvtOptions(min_expected=20))
    assert unchecked["status"] == "unsupported" and "cannot be verified" in unchecked["reason"]


def test_a_series_is_read_flow_by_flow(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n_flows, per_flow = 4, 20_000
    lat = np.concatenate([known_tail(per_flow, rng) for _ in range(n_flows - 1)] + [known_tail(500, rng)])
    flow = np.concatenate([np.full(per_flow, f) for f in range(n_flows - 1)] + [np.full(500, n_flows - 1)])
    order = rng.permutation(len(lat))  # flows interleaved, as round robin would
    lat, flow = lat[order], flow[order]
    pre = np.arange(len(lat), dtype=np.int64) * 10_000
    path = tmp_path / "flows.parquet"
    series.write_series(path, np.arange(len(lat)), pre, pre + lat, flows=flow)
    doc = flow_tails(path)
    assert [d["flow"] for d in doc["flows"]] == list(range(n_flows))
    assert [d["packets"] for d in doc["flows"]] == [per_flow] * (n_flows - 1) + [500]
    assert doc["flows"][-1]["status"] == "unsupported"
    assert doc["verified"] + doc["contradicted"] + doc["unsupported"] == n_flows


def test_options_out_of_range_are_refused() -> None:
    from lowtail.core.errors import UserError

    with pytest.raises(UserError):
        FlowEvtOptions(fit_fraction=1.5).check()


def test_model_flows_from_an_analysis_stored_and_paged(tmp_path: Path, cli, db) -> None:
    """`lowtail model flows analysis:ID`: real captures, analysed with their series, each
    flow's tail stored as a model result and drawn on its page."""
    pre, post, export = tmp_path / "pre.pcap", tmp_path / "post.pcap", tmp_path / "series.parquet"
    sets = ["flows=3", "jitter_ns=2000", "spike_probability=0.002", "spike_ns=20000", "fifo=false"]
    made = cli("synth", pre, post, "--packets", 150_000, "--rate", "50kpps", *(a for s in sets for a in ("--set", s)))
    assert made.code == 0, made.err
    analysed = cli("analyze", pre, post, "--db", db, "--export", export, "--json")
    assert analysed.code == 0, analysed.err
    done = cli("model", "flows", f"analysis:{analysed.json()['analysis_id']}", "--db", db, "--json")
    assert done.code == 0, done.err
    doc = done.json()
    assert [f["flow"] for f in doc["flows"]] == [0, 1, 2]
    assert doc["verified"] + doc["contradicted"] + doc["unsupported"] == 3 and "model_id" in doc
    # Each flow named as its analysis names it (the table said "2", which no other output does).
    names = [f["key"] for f in analysed.json()["flows"]["flows"]]
    assert sorted(f["key"] for f in doc["flows"]) == sorted(names) and "10.0.0.1:49152 > 10.0.0.2:53" in names
    stored = cli("model", "flows", f"analysis:{analysed.json()['analysis_id']}", "--db", db, "--no-store")
    assert stored.code == 0 and all(name in stored.out for name in names), stored.out
    # A bare series has no names: its flows are numbered.
    text = cli("model", "flows", export, "--no-store")
    assert text.code == 0 and "flows' tails" in text.out and "flow 0" in text.out
    page = tmp_path / "model.html"
    assert cli("model", "report", str(doc["model_id"]), "--db", db, "-o", page).code == 0
    assert "(EVT per flow)" in page.read_text() and html.escape(names[0]) in page.read_text()


def test_flows_not_verified_are_always_in_the_terminals_table(capsys) -> None:
    """With 49 flows verified and 15 contradicted the table showed the first 30 verified and
    no contradicted one; each one not verified now has a row and its reason under the table."""
    from lowtail.cli._model_render import SHOWN_FLOW_TAILS, flow_tails_table

    def flow(i: int, status: str) -> dict:
        return {
            "flow": i, "key": f"port {49152 + i}", "packets": 15_625, "xi": -0.3, "status": status,
            "predicted_ns": {"p99_99": 2_000_000 + i}, "observed_ns": {"p99_99": 1_900_000},
            "reason": f"reason of {i}",
        }  # fmt: skip

    flows = [flow(i, "verified") for i in range(49)] + [flow(i, "contradicted") for i in range(49, 64)]
    doc = {"series": "s.parquet", "flows": flows, "verified": 49, "contradicted": 15, "unsupported": 0}
    flow_tails_table(doc)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert all(f"port {49152 + i}" in out and f"contradicted: reason of {i}" in out for i in range(49, 64))
    assert sum(f"port {49152 + i} " in out for i in range(49)) == SHOWN_FLOW_TAILS - 15
    assert all(len(line) <= 80 for line in out.splitlines()), out
