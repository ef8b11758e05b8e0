"""64 flows through Suricata with two workers on the namespace testbed, as a user runs it
(`lowtail run --print-example flows`, shortened, with one elephant flow weighted 8 among 63
mice): each flow's packets and losses add up to the run's exactly, each flow sent its weight's
share, the worst flow's p99.9 and the weights are shown on the experiment's page, `compare
--by flow` compares the flows, and nothing of the testbed is left behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_kind, resources_of  # noqa: E402
from test_run import db_rows, lowtail, needs_programs, needs_root, run_json, trusted  # noqa: E402

from lowtail.core.units import format_ns, format_percent  # noqa: E402

pytestmark = [needs_root, needs_programs, needs_kind("suricata"), pytest.mark.root]
FLOWS = 64
ELEPHANT = 8


@pytest.mark.slow
def test_64_flows_through_suricata_with_two_workers(tmp_path: Path) -> None:
    example = lowtail(tmp_path, "run", "--print-example", "flows").stdout
    assert "flows = 64" in example and "threads = 2" in example
    toml = tmp_path / "flows.toml"
    weights = [ELEPHANT] + [1] * (FLOWS - 1)
    toml.write_text(
        example.replace('duration = "10s"', 'duration = "3s"')
        .replace('"100kpps"', '"20kpps"')
        .replace("flows = 64 ", f"flow_weights = {weights}\nflows = 64 ")
    )
    page = tmp_path / "page.html"
    done, runs = run_json(tmp_path, toml, "--report", str(page))
    assert done.returncode in (0, 3), done.stderr
    (run,) = runs
    assert trusted(run), run["invalid_reasons"]
    flows = db_rows(
        tmp_path,
        f"SELECT flow, flow_label, sent, received, lost, lat_p99_9_ns FROM analysis_flows "
        f"WHERE analysis_id = {int(run['analysis_id'])} ORDER BY flow",
    )
    assert len(flows) == FLOWS
    assert {label.split(" > ")[0].rsplit(":", 1)[1] for _, label, *_ in flows} == {str(49152 + f) for f in range(FLOWS)}
    # per-flow figures add up to the pooled ones exactly
    assert sum(f[2] for f in flows) == run["sent"] > 0
    assert sum(f[3] for f in flows) == run["received"]
    assert sum(f[4] for f in flows) == run["lost"]
    # each mouse got one packet of every cycle of Σ weights, the elephant its eight: the
    # measured window cuts the cycles anywhere, so to within one cycle's share
    mice = [f[2] for f in flows[1:]]
    assert max(mice) - min(mice) <= 1
    cycles = run["sent"] / sum(weights)
    assert abs(flows[0][2] - ELEPHANT * cycles) <= ELEPHANT + 1, (flows[0][2], cycles)
    # the worst flow's p99.9 is on the experiment's page
    worst_p99_9 = max(f[5] for f in flows)
    text = page.read_text()
    assert "worst flow " in text and f"p99.9 {format_ns(worst_p99_9)}" in text
    assert "flow weights" in text and f"{ELEPHANT} ({format_percent(ELEPHANT / sum(weights))})" in text
    assert run["traffic"]["flow_weights"] == weights
    # compare --by flow: one configuration per flow
    db = str(tmp_path / "t.duckdb")
    compared = lowtail(tmp_path, "compare", "latest", "--by", "flow", "--db", db, "--json")
    assert compared.returncode in (0, 3), compared.stderr
    doc = json.loads(compared.stdout)
    assert len(doc["configurations"]) == FLOWS
    assert sum(c["sent"] for c in doc["configurations"]) == run["sent"]
    assert resources_of(done.pid) == []
