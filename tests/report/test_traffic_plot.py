"""The analysis page's packets-per-second plot reads the rate the capture was sent at: the
per-second counts start at the first packet (before the trim), so the last, partial second
is scaled by the part of it the sending covered, never by a sliver that makes a 10 kpps
stream read 10 Mpps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_fixtures import synthetic

from lowtail.analyze.page import write_analysis_report
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.report.plots import DISPLAY_POINTS, seconds_covered, thin_for_display
from lowtail.store import open_store
from lowtail.store.analyses import save_analysis


def _packet_rate_bars(page: Path) -> list[list[float]]:
    """The bars of the page's 'Packets per second' figure, as embedded in the page."""
    specs = re.findall(r"<script type='application/json' class='lt-plot-spec'[^>]*>(.*?)</script>", page.read_text())
    for spec in map(json.loads, specs):
        if spec["layout"]["title"]["text"] == "Packets per second":
            return [list(trace["y"]) for trace in spec["data"]]
    raise AssertionError("no packets-per-second figure on the page")


@pytest.mark.parametrize("trim_ns", [1_000_000_000, 0])
def test_the_last_partial_second_reads_the_sent_rate(tmp_path: Path, trim_ns: int) -> None:
    """2.5 s at 10 kpps analysed with the default 1 s trim (and none): every bar is about
    10 kpps (the last one covers 0.5 s); before the fix the last read 5 Mpps with the trim."""
    doc, _ = synthetic(tmp_path, "steady", 20_000, packets=25_000, rate=10_000.0)
    pre, post = tmp_path / "steady-pre.pcap", tmp_path / "steady-post.pcap"
    doc = analyze_pair(pre, post, AnalyzeOptions(trim_ns=trim_ns))
    db = tmp_path / "a.duckdb"
    with open_store(db) as store:
        aid = save_analysis(store, doc, AnalyzeOptions(trim_ns=trim_ns).to_dict())
    bars = _packet_rate_bars(write_analysis_report(db, aid, tmp_path / "page.html"))
    assert [len(b) for b in bars] == [3, 3]  # seconds 0, 1 and the half second 2
    assert all(9_000 < y < 11_000 for side in bars for y in side), bars


def test_seconds_covered_by_the_sending() -> None:
    """Full seconds, the fraction of the last one, nothing after the last packet sent."""
    assert seconds_covered(4, 2_500_000_000) == [1.0, 1.0, 0.5, 0.0]
    assert seconds_covered(1, 400_000_000) == [0.4]
    assert seconds_covered(2, None) == [1.0, 1.0]


def test_an_analysis_page_of_a_long_run_stays_small(tmp_path: Path) -> None:
    """3 s at 100 kpps (5,000 worst events stored): the page is one offline file under
    2.5 MB (5 MB before: the bundle inlined whole, every worst event drawn), and its
    worst-events scatter draws at most DISPLAY_POINTS markers, the worst one among them."""
    doc, opts = synthetic(tmp_path, "long", 20_000, packets=300_000, rate=100_000.0)
    db = tmp_path / "a.duckdb"
    with open_store(db) as store:
        aid = save_analysis(store, doc, opts)
    page = write_analysis_report(db, aid, tmp_path / "page.html")
    assert page.stat().st_size < 2_500_000
    specs = re.findall(r"<script type='application/json' class='lt-plot-spec'[^>]*>(.*?)</script>", page.read_text())
    scatter = next(json.loads(s) for s in specs if "worst latencies" in json.loads(s)["layout"]["title"]["text"])
    drawn = scatter["data"][0]["y"]
    assert len(doc["worst"]) == 5_000 and len(drawn) == DISPLAY_POINTS
    assert max(drawn) == max(w["latency_ns"] for w in doc["worst"])


def test_thinning_keeps_the_highest_and_time_order() -> None:
    points = [(float(t), float((t * 7919) % 10_007)) for t in range(10_000)]
    drawn = thin_for_display(points, limit=1_000)
    assert len(drawn) == 1_000 and drawn == sorted(drawn)
    highest = sorted(points, key=lambda p: p[1], reverse=True)[:500]
    assert set(highest) <= set(drawn)
    assert drawn[0][0] < 50 and drawn[-1][0] > 9_950  # the sample spans the run
    assert thin_for_display(points[:10], limit=1_000) == points[:10]
