"""The compare page without a browser, from a comparison in the stored document's shape
(report_fixtures.comparison_document): its sections in the order issue 11 names them, a
rate sweep summarised by the highest rate that meets the budget, unresolvable percentiles
marked, differences that isolate one axis listed before the rest, every latency figure
with its budget line."""

from __future__ import annotations

import json
import re

import pytest
from report_fixtures import comparison_document

from lowtail.compare.page import comparison_page

ORDER = [
    "Configurations",
    "Latency by percentile",
    "Latency distribution (CDF)",
    "Worst events",
    "Latency versus rate",
    "Tail models (EVT)",
]


def _page() -> tuple[dict, str]:
    doc, drawn = comparison_document()
    return doc, comparison_page(doc, drawn).render()


def test_sections_come_in_order_and_the_contents_link_them():
    _, html = _page()
    headings = re.findall(r"<h2[^>]*>([^<]+)</h2>", html)
    assert [h for h in headings if h in ORDER] == ORDER
    links = re.findall(r"<nav class='toc'>.*?</nav>", html, re.S)[0]
    for section_id in re.findall(r"href='#([^']+)'", links):
        assert f"id='{section_id}'" in html or f'id="{section_id}"' in html


def test_the_page_opens_with_the_verdict_cards():
    """The answer first: the cards right under the title, before any banner, the contents
    and every section (they were a section after the contents)."""
    _, html = _page()
    cards = html.index("<div class='lt-cards'>")
    assert cards < html.index("<nav class='toc'>") and cards < html.index("<h2")
    assert "class='banner" not in html[:cards]


def test_a_rate_sweep_is_summarised_by_the_highest_rate_that_meets_the_budget():
    doc, html = _page()
    sweep = doc["rates"][0]
    passing = [p["rate_pps"] for p in sweep["points"] if p["verdict"] == "PASS"]
    failing = [p["rate_pps"] for p in sweep["points"] if p["verdict"] != "PASS"]
    assert passing and failing  # the fixture sweeps past the budget
    assert f"meets the budget at every rate up to {max(passing) // 1000:g} kpps" in html
    # Its configurations are in the sweep's card, not a card each.
    swept = {p["configuration"] for p in sweep["points"]}
    cards = re.findall(r"<div class='name'>([^<]+)</div>", html)
    assert not {doc["configurations"][i]["label"] for i in swept} & set(cards)
    assert len(cards) == len(doc["configurations"]) - len(swept) + 1


def test_table_ii_marks_what_the_packets_cannot_resolve_and_judges_every_configuration():
    doc, html = _page()
    table = re.findall(r"<table class='lt-configs'>.*?</table>", html, re.S)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    assert len(rows) == len(doc["configurations"])
    for c, row in zip(doc["configurations"], rows):
        unresolved = [k for k, iv in c["intervals"].items() if not iv["resolvable"]]
        assert row.count("not resolved") == len(unresolved)
        assert c["verdict"]["label"] in row
        assert f"run {c['worst_repetition']}" in row


def test_differences_that_isolate_one_axis_come_first():
    doc, html = _page()
    section = html[html.index(">Differences</h3>") :]
    isolated = next(d for d in doc["differences"] if len(d["axes_differing"]) == 1)
    several = next(d for d in doc["differences"] if len(d["axes_differing"]) > 1)
    folded = section.index("<details>")
    assert section.index(isolated["text"]) < folded < section.index(several["text"])


def test_every_latency_figure_draws_the_budget():
    doc, html = _page()
    budget = f"budget {doc['verdict']['budget_ns'] // 1000} µs"
    specs = [json.loads(s) for s in re.findall(r"class='lt-plot-spec'[^>]*>(.*?)</script>", html, re.S)]
    assert len(specs) == 4  # HDR, CDF, worst events, latency against rate
    for spec in specs:
        names = [s.get("name") for s in spec["layout"].get("shapes", [])]
        assert budget in names, spec["layout"]["title"]["text"]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_worst_repetitions_interrupts_are_drawn_where_sampled(tmp_path):
    """A configuration whose worst repetition has interrupt samples gets its timeline
    under its own name; one whose worst repetition has none gets no such section."""
    from report_fixtures import experiment

    from lowtail.store import open_store
    from lowtail.store import runs as runstore

    db, eid = experiment(tmp_path)
    doc, drawn = comparison_document()
    with open_store(db, read_only=True) as store:
        fwd = [r["run_id"] for r in runstore.runs(store, eid) if r["dut_name"] == "fwd"]
        sampled, unsampled = fwd[0], fwd[1]  # the fixture samples the first fwd run only
        first, second = doc["configurations"][:2]
        first["runs"], first["worst_repetition"] = [sampled], sampled
        second["runs"], second["worst_repetition"] = [unsampled], unsampled
        html = comparison_page(doc, drawn, store).render()
    assert f"{first['label']}: interrupts (run {sampled})" in html
    assert f"(run {unsampled})</h" not in html


def test_the_stored_comparison_makes_its_page(tmp_path):
    """write_comparison_report reads a comparison as `lowtail compare` stores it (needs the
    store of comparisons: skipped on a tree without it)."""
    comparestore = pytest.importorskip("lowtail.store.comparisons")
    from lowtail.compare.page import write_comparison_report
    from lowtail.store import open_store

    doc, drawn = comparison_document()
    curves = [
        comparestore.CurvePoint(i, source, None, None, p, int(v))
        for i, stored in drawn.curves.items()
        for source in (comparestore.POOLED, comparestore.FLOOR)
        for p, v in stored[source]
    ]
    cdf = [(i, f, int(v)) for i, points in drawn.cdf.items() for f, v in points]
    with open_store(tmp_path / "c.duckdb") as store:
        cid = comparestore.save_comparison(store, doc, ["1"], doc["by"], curves, cdf, [])
    html = write_comparison_report(tmp_path / "c.duckdb", cid, tmp_path / "c.html").read_text()
    for heading in ("Configurations", "Latency by percentile", "Latency distribution (CDF)"):
        assert f">{heading}</h2>" in html
    assert "<div class='lt-cards'>" in html
    assert "meets the budget at every rate up to" in html and html.count("class='lt-plot-spec'") >= 3


def _thirteen_differences(doc: dict) -> dict:
    """13 single-axis differences of one repetition each, as `compare 1` on an experiment of
    one repetition gave (each line ended with the same note)."""
    note = "one repetition of fwd and kernel: run-to-run variation not measured"
    doc["differences"] = [
        {
            "text": f"a is lower than b at p{i} by {i} µs",
            "difference_ns": 1_000 * i,
            "axes_differing": ["dut"],
            "note": note,
        }
        for i in (3, 13, 7, 1, 12, 2, 11, 5, 9, 4, 8, 10, 6)
    ]
    return doc


def test_differences_are_listed_largest_first_the_rest_folded_the_note_said_once():
    doc, drawn = comparison_document()
    html = comparison_page(_thirteen_differences(doc), drawn).render()
    section = html.split("<h3>Differences</h3>", 1)[1]
    listed = [int(n) for n in re.findall(r"<li>a is lower than b at p\d+ by (\d+) µs", section.split("<details>")[0])]
    assert listed == [13, 12, 11, 10, 9, 8, 7, 6]
    assert "5 smaller differences" in section
    assert html.count("run-to-run variation not measured") == 1


def test_the_terminal_lists_differences_alike():
    from lowtail.cli.compare import _differences

    doc, _ = comparison_document()
    doc["not_resolvable"] = []
    lines = [str(t) for t in _differences(_thirteen_differences(doc))]
    listed = [int(n) for line in lines for n in re.findall(r"^  a is lower than b at p\d+ by (\d+) µs$", line)]
    assert listed == [13, 12, 11, 10, 9, 8, 7, 6]
    assert sum("run-to-run variation not measured" in line for line in lines) == 1


def test_a_pooled_card_says_how_many_of_its_runs_are_degraded():
    """Before: "⚠ degraded" on a card pooling three runs, two of them degraded."""
    doc, html = _page()
    card = html.split("lowtail-fwd · container · 10 kpps</div>", 1)[1].split("<div class='lt-card", 1)[0]
    assert "degraded (2 of 3 runs)" in card
    assert html.count("degraded (") == 1  # the other cards' runs are not degraded


def test_pairs_not_called_are_grouped_by_their_reason():
    """Before: each of the three pairs repeated the same reason on its own line."""
    from report_fixtures import _DEGRADED_WHY

    _, html = _page()
    folded = html.split("Not called (4)</summary>", 1)[1].split("</details>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", folded)
    assert len(items) == 2 and folded.count("degraded runs") == 1
    assert items[0].startswith(f"{_DEGRADED_WHY} (3): ") and items[0].count(" and ") == 3
    assert items[1].startswith("within run-to-run variation (1): bridge · bare and kernel-mirred · bare at p99")


def test_the_terminal_groups_pairs_not_called_alike():
    from lowtail.cli.compare import _differences

    doc, _ = comparison_document()
    lines = [str(t) for t in _differences(doc)]
    grouped = [line for line in lines if line.startswith("  a side has degraded runs")]
    assert len(grouped) == 1 and grouped[0].count(" and ") == 3


def test_a_sweep_that_passes_above_a_rate_it_does_not_names_its_passing_rates():
    """make run's kernel: inconclusive at 20 kpps, PASS at 50, inconclusive at 100 read
    "meets the budget up to 50 kpps" (and its margin "954.512 µs under the budget (95 % of
    it)" beside a 95 % confidence)."""
    from lowtail.compare.page import _sweep_notes

    def point(index: int, rate: int, verdict: str) -> dict:
        return {"configuration": index, "rate_pps": rate, "verdict": verdict}

    by_index = {i: {"verdict": {"value_ns": 45_488, "budget_ns": 1_000_000}} for i in range(3)}
    kernel = [point(0, 20_000, "inconclusive"), point(1, 50_000, "PASS"), point(2, 100_000, "inconclusive")]
    assert _sweep_notes(kernel, by_index) == [
        "meets the budget at 50 kpps only",
        "954.512 µs under the budget at 50 kpps (95 % of the budget)",
    ]
    prefix = [point(0, 20_000, "PASS"), point(1, 50_000, "PASS"), point(2, 100_000, "FAIL")]
    assert _sweep_notes(prefix, by_index)[0] == "meets the budget at every rate up to 50 kpps"
    assert _sweep_notes([point(0, 20_000, "FAIL")], by_index) == ["meets the budget at no rate swept"]


def test_a_stored_knee_that_found_no_overloaded_rate_is_not_called_missing():
    """make run's comparison read "kernel: knee not stored" where the knee model was stored
    and found no overloaded rate."""
    from lowtail.compare.page import _knee_text

    assert _knee_text(None, stored=True) == "no overloaded rate swept"
    assert _knee_text(None, stored=False) == "knee not stored"
    assert _knee_text(100_000, stored=True) == "knee 100 kpps"


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_comparison_of_many_flows_makes_a_page_a_reader_can_open(tmp_path):
    """`compare 1 --by flow -o page.html` of the flows example (64 flows of one run) ended in
    "internal error: ValueError: Vertical spacing cannot be greater than …", and without the
    worst-events panels the page was 22 MB: the run's interrupt timeline once per flow, a
    line per pair not called (10,080), a curve per flow in each overlay, sixteen rows of cards."""
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment, store_run
    from report_fixtures import Sample

    from lowtail.compare.page import LEAD_CARDS, PLOTTED_CONFIGURATIONS, WORST_PANELS
    from lowtail.store import open_store
    from lowtail.store import runs as runstore
    from lowtail.store.host import save_run_interrupts

    flows = 24
    db = tmp_path / "f.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "flows", {"percentile": 99.9, "budget": "350us"})
        run = store_run(store, tmp_path, eid, "ips", kind="suricata", packets=24_000, rate_pps=20_000, flows=flows)
        start = runstore.run_figures(store, run)["start_ts_ns"]
        samples = [Sample(start + (i + 1) * 100_000_000, 0, "LOC", 25, 100_000_000) for i in range(5)]
        save_run_interrupts(store, run, samples)
    page = tmp_path / "flows.html"
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "compare", str(eid), "--by", "flow", "--db", str(db), "-o", str(page)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    html = page.read_text()
    assert html.count(f"interrupts (run {run})</h2>") == 1  # one run: one timeline
    assert len(re.findall(r"<div class='lt-card ", html)) == LEAD_CARDS
    assert f"The {LEAD_CARDS} of {flows} cards that fail or are not decided first" in html
    assert f"Drawn: the {PLOTTED_CONFIGURATIONS - 1} of {flows} configurations with the highest p99.9" in html
    assert f"The {WORST_PANELS} of {flows} configurations with the largest worst event" in html
    folded = html.split("Not called (", 1)[1].split("</details>", 1)[0]
    assert len(re.findall(r"<li>", folded)) <= 25, folded[:2000]
    assert len(html) < 4_000_000
    # One run, said once: in the subtitle's count and in the degraded runs' banner.
    assert f"{flows} configurations by flow · 1 run · " in html
    # The terminal lists the first reasons, and counts the rest.
    said = subprocess.run(
        [sys.executable, "-m", "lowtail", "compare", str(eid), "--by", "flow", "--db", str(db), "--no-store"],
        capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    why = said.split("why (each configuration's whole reason: --json or the page):", 1)[1]
    assert re.search(r"… and [0-9]+ more \(--json or the page\)", why), said


def test_a_degraded_reason_several_configurations_share_is_said_once():
    """The flows example's page said the run's one degradation once per flow (64 times)."""
    from lowtail.compare.page import comparison_page

    doc, drawn = comparison_document()
    for c in doc["configurations"][:3]:
        c["degraded"] = ["generator stalled 9.9 ms"]
    html = comparison_page(doc, drawn).render()
    banner = html.split("Degraded runs (verdicts to be read with this in mind): ", 1)[1].split("</div>", 1)[0]
    assert banner.count("generator stalled 9.9 ms") == 1 and "3 configurations: generator stalled 9.9 ms" in banner
