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

from lowtail.analysis import AnalyzeOptions, analyze_pair
from lowtail.report.analysis import write_analysis_report
from lowtail.report.plots import seconds_covered
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
