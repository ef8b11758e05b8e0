"""An analysis shown again (`lowtail show`, `lowtail report`, `analyze --report`) is judged
against its own budget: a run's against its experiment's, one `analyze --budget` judged
against that one; never silently against the default. And the percentiles its packets do not
bound say why, under the terminal's table and on the page."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

from report_fixtures import experiment, short_analysis

from lowtail.store import open_store
from lowtail.store import runs as runstore

LOWTAIL = [sys.executable, "-m", "lowtail"]


def lowtail(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*LOWTAIL, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def page_text(path: Path) -> str:
    """The page's words, without its scripts, styles and markup."""
    text = re.sub(r"<(script|style).*?</\1>", "", path.read_text(), flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def card_status(path: Path) -> str:
    found = re.findall(r"<div class='status'>([^<]*)</div>", path.read_text())
    assert len(found) == 1, found
    return found[0]


def test_a_runs_analysis_is_judged_against_its_experiments_budget(tmp_path: Path) -> None:
    """Before, its page judged a 30 µs DuT against the default 1 ms at p99.999 (inconclusive
    on 5,000 packets) while its experiment's budget is 200 µs at p99.9, which it keeps."""
    db, eid = experiment(tmp_path)
    with open_store(db, read_only=True) as store:
        runs = runstore.runs(store, eid)
    slow = next(r for r in runs if r["dut_name"] == "fwd" and r["rate_pps"] == 10_000)
    wire = next(r for r in runs if r["calibration"])

    page = tmp_path / "slow.html"
    assert lowtail("report", slow["analysis_id"], "--db", db, "-o", page, cwd=tmp_path).returncode == 0
    words = page_text(page)
    assert f"Budget: 99.9th percentile under 200.000 µs (95 % confidence), no loss (experiment {eid}'s" in words
    assert card_status(page) == "PASS"

    shown = lowtail("show", slow["analysis_id"], "--db", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    verdict = [line for line in shown.stdout.splitlines() if line.startswith("verdict:")]
    assert len(verdict) == 1 and verdict[0].startswith("verdict: PASS · 99.9th percentile under 200.000 µs")
    assert f"(experiment {eid}'s, run {slow['run_id']})" in verdict[0]

    # A calibration run is the floor, judged against no budget.
    floor_page = tmp_path / "wire.html"
    assert lowtail("report", wire["analysis_id"], "--db", db, "-o", floor_page, cwd=tmp_path).returncode == 0
    assert card_status(floor_page) == "floor"
    floor_line = [x for x in lowtail("show", wire["analysis_id"], "--db", db, cwd=tmp_path).stdout.splitlines()]
    assert [x for x in floor_line if x.startswith("verdict: floor (experiment")], floor_line


def test_the_budget_analyze_judged_is_the_one_its_report_and_show_judge(tmp_path: Path) -> None:
    """Before, `analyze --budget 20us --percentile 99 --report` printed PASS and wrote a page
    judging the 99.999th percentile against 1 ms."""
    assert lowtail("synth", "pre.pcap", "post.pcap", "--packets", "50000", cwd=tmp_path).returncode == 0
    done = lowtail(
        "analyze", "pre.pcap", "post.pcap", "--trim", "0", "--budget", "20us", "--percentile", "99",
        "--report", "r.html", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("verdict:")]
    assert printed and printed[0].startswith("verdict: PASS · 99th percentile under 20.000 µs")
    words = page_text(tmp_path / "r.html")
    assert "Budget: 99th percentile under 20.000 µs (95 % confidence), no loss (as `lowtail analyze --budget`" in words
    assert card_status(tmp_path / "r.html") == "PASS"

    shown = [line for line in lowtail("show", cwd=tmp_path).stdout.splitlines() if line.startswith("verdict:")]
    assert shown == [printed[0].replace(" · 99 % is", " (as `lowtail analyze --budget` judged it) · 99 % is", 1)]

    # What a page is asked for replaces it, and says so.
    asked = lowtail("report", "--budget", "1us", "-o", "asked.html", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert "Budget: 99th percentile under 1.000 µs (95 % confidence), no loss (as asked)" in page_text(
        tmp_path / "asked.html"
    )
    assert card_status(tmp_path / "asked.html") == "FAIL"

    # A plain analysis keeps saying that its budget is the default.
    assert lowtail("analyze", "pre.pcap", "post.pcap", "--trim", "0", "--label", "plain", cwd=tmp_path).returncode == 0
    assert lowtail("report", "-o", "plain.html", cwd=tmp_path).returncode == 0
    assert "(the default; `lowtail help budget`)" in page_text(tmp_path / "plain.html")
    assert not [x for x in lowtail("show", cwd=tmp_path).stdout.splitlines() if x.startswith("verdict:")]


def test_percentiles_the_packets_do_not_bound_say_why(tmp_path: Path) -> None:
    """4,000 packets bound no p99.999: the table said "max, not resolved" and nothing more."""
    db, aid = short_analysis(tmp_path)
    shown = lowtail("show", aid, "--db", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    why = [line for line in shown.stdout.splitlines() if line.startswith("not resolved: ")]
    assert len(why) == 1, shown.stdout
    assert "these 4,000 packets do not bound it at 95 % confidence (" in why[0]
    assert re.search(r"p99\.999 takes [0-9,]+", why[0]), why[0]

    page = tmp_path / "short.html"
    assert lowtail("report", aid, "--db", db, "-o", page, cwd=tmp_path).returncode == 0
    words = page_text(page)
    assert "95 % interval" in words and "max, not resolved" in words
    assert "these 4,000 packets do not bound it at 95 % confidence" in words and "hover over one" in words
    # Each one not resolved carries its whole reason on hover.
    assert re.search(r"<td title='[^']*is their maximum and is not bounded from above[^']*'>", page.read_text())


def test_a_stored_judgement_that_names_no_whole_budget_is_no_budget() -> None:
    """A judgement stored by another version, or not by lowtail, falls back to the default
    budget (said as the default) rather than failing or being half read."""
    from lowtail.verdict.judge import Verdict

    whole = {"percentile": "p99", "budget_ns": 20_000, "max_loss": 0, "confidence": 0.95}
    assert Verdict.of_judgement(whole) == Verdict(99, 20_000, 0, 0.95)
    for broken in (
        {**whole, "percentile": "p42"},
        {**whole, "budget_ns": -1},
        {**whole, "budget_ns": "20us"},
        {**whole, "max_loss": -3},
        {**whole, "confidence": 7},
        {k: v for k, v in whole.items() if k != "confidence"},
    ):
        assert Verdict.of_judgement(broken) is None, broken
