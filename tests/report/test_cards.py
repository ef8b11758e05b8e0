"""The verdict cards a page opens with: an inconclusive card says where its bounds lie in a
card's width, and its whole reason stays one hover away (the comparison page's first screen
lost its last card below the fold to one card's 300-character sentence)."""

from __future__ import annotations

import html
import re

from lowtail.report.cards import VerdictCard
from lowtail.verdict.document import JudgementDocument

REASON = (
    "99.99 % is 194.095 µs, at most 251.462 µs with 95 % confidence, budget 250.000 µs; about 0.002 % of the "
    "packets reach it: a run about 16,429 packets longer would be decided about half the time, if that share "
    "stays as measured, their clustering as measured (D = 1.2)"
)


def judgement(status: str, **changes: object) -> JudgementDocument:
    j: JudgementDocument = {
        "status": status, "cause": "latency", "label": status, "reason": REASON, "percentile": "p99_99",
        "value_ns": 194_095, "budget_ns": 250_000, "samples": 60_000, "packets_needed": 10_000, "lost": 0,
        "max_loss": 0, "degraded": [], "confidence": 0.95, "lower_ns": 173_743, "upper_ns": 251_462,
        "more_packets": 16_429, "more_seconds": None,
    }  # fmt: skip
    j.update(changes)  # type: ignore[typeddict-item]
    return j


def test_an_inconclusive_card_says_its_bounds_briefly_and_keeps_the_whole_reason_as_its_tooltip():
    card = VerdictCard("bridge · container", [judgement("inconclusive")])
    lines = card.lines()
    assert "its 95 % bounds, 173.743 µs to 251.462 µs, hold the budget" in lines
    assert any("16,429 packets longer" in line for line in lines)
    assert all(len(line) <= 100 for line in lines), lines
    tooltip = re.search(r"title='([^']*)'", card.html())
    assert tooltip and html.unescape(tooltip.group(1)) == REASON


def test_without_bounds_an_inconclusive_card_says_its_reason():
    """What is not bounded on the card, why in its tooltip: 64 flows' cards each held the
    whole reason ("… come in 9 clusters of about 2 packets (stalls), fewer than the 15 …")."""
    card = VerdictCard("x", [judgement("inconclusive", lower_ns=None, upper_ns=None, more_packets=None)])
    head = REASON.partition("; ")[0]
    assert f"{head} (hover for why)" in card.lines()
    tooltip = re.search(r"title='([^']*)'", card.html())
    assert tooltip and html.unescape(tooltip.group(1)) == REASON
    plain = VerdictCard("x", [judgement("inconclusive", lower_ns=None, upper_ns=None, reason="it wanders")])
    assert "it wanders" in plain.lines()


def test_a_fail_that_is_not_latency_still_says_why_on_the_card():
    why = "lost 12 packets, more than the 0 the budget allows"
    card = VerdictCard("x", [judgement("FAIL", cause="loss", reason=why)])
    assert why in card.lines()
