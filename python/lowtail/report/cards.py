"""Verdict cards: what every page opens with, one card per device (an experiment's), per
configuration or sweep (a comparison's) or per analysis, before any problem, table or
plot. A card reads stored judgements (the `JudgementDocument`s a run, a configuration or an
analysis is judged into) and says the
status — PASS, FAIL or inconclusive (INVALID when nothing could be judged) — the judged
percentile against the budget with the confidence of its bounds, what would decide an
inconclusive one (the packets more that the judgement stored), and whether degraded or
emulated runs stand behind it. The comparison page, the experiment and analysis pages and
the qualification record (`certify`) all draw these cards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lowtail.core import percentiles
from lowtail.core.units import format_count, format_minutes, format_ns, format_percent
from lowtail.report.page import esc
from lowtail.verdict.device import FLOOR, combined_status
from lowtail.verdict.document import JudgementDocument

CARD_STYLE = """<style>
.lt-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: .6em; margin: .8em 0; }
.lt-card { border: 1px solid #ddd; border-left: 6px solid #d9a400; border-radius: 4px; padding: .45em .8em; }
.lt-card.pass { border-left-color: #067647; } .lt-card.fail { border-left-color: #b42318; }
.lt-card.meta { border-left-color: #888; }
.lt-card.pass, .lt-card.fail, .lt-card.warn, .lt-card.meta { color: #1d1d1f; font-weight: normal; }
.lt-card .name { font-weight: 600; overflow-wrap: anywhere; }
.lt-card .status { font-size: 1.2em; font-weight: 700; color: #9a6700; }
.lt-card.pass .status { color: #067647; } .lt-card.fail .status { color: #b42318; } .lt-card.meta .status { color: #555; }
.lt-card .detail { color: #444; font-size: .9em; } .lt-card .mark { color: #9a6700; font-weight: 600; font-size: .9em; }
</style>"""

_CSS = {"FAIL": "fail", "INVALID": "meta", "inconclusive": "warn", "PASS": "pass", FLOOR: "meta"}


@dataclass(frozen=True)
class VerdictCard:
    """One DuT configuration (or analysis): its judgements (one per run or rate it stands
    for), the rate of each when it is a sweep, and what a reader must know about them."""

    title: str
    judgements: Sequence[JudgementDocument]
    # Beside each judgement, what tells it from the others: the rates of a sweep, the
    # configurations of a device (a card for several judgements).
    labels: Sequence[str] = ()
    emulated: bool = False
    notes: Sequence[str] = field(default_factory=tuple)
    degraded_runs: int | None = None  # when known apart from the judgements (a pooled configuration)
    pooled_runs: int | None = None  # the runs a pooled configuration's one judgement stands for
    reason_always: bool = False  # the judgement's reason even for a PASS (the qualification record)

    @property
    def status(self) -> str:
        """The one rule of several judgements (`device_verdict.combined_status`): FAIL if any
        fails, PASS only if all pass, INVALID when none could be trusted, else inconclusive.
        A sweep's notes may say up to which rate it meets the budget; its card passes only
        when every rate does. A card of calibration runs alone (a floor's analysis) is the
        floor: judged against no budget."""
        if self.judgements and all(j["status"] == FLOOR for j in self.judgements):
            return FLOOR
        return combined_status(j["status"] for j in self.judgements)

    def lines(self) -> list[str]:
        """Its details: the judged percentile against the budget, per-rate outcomes."""
        judged = [j for j in self.judgements if j["value_ns"] is not None]
        out = []
        if judged:
            worst = max(judged, key=lambda j: j["value_ns"] or 0)
            label = percentiles.label(worst["percentile"]) if worst["percentile"] else "judged percentile"
            budget = f" against a {format_ns(worst['budget_ns'])} budget" if worst["budget_ns"] else ""
            many = "worst " if len(judged) > 1 else ""
            confidence = worst.get("confidence")
            sure = f" ({format_percent(confidence, 'g')} confidence)" if confidence else ""
            out.append(f"{label}: {many}{format_ns(worst['value_ns'])}{budget}{sure}")
        if self.labels:
            by_status: dict[str, list[str]] = {}
            for j, label in zip(self.judgements, self.labels):
                where = by_status.setdefault(j["status"], [])
                if label not in where:
                    where.append(label)
            out.append("; ".join(f"{s} at {', '.join(r)}" for s, r in by_status.items()))
        elif len(self.judgements) == 1 and self.status == "inconclusive" and not self.reason_always:
            out.append(self._bound_line(self.judgements[0]))  # its whole reason is the card's tooltip
        elif len(self.judgements) == 1 and (
            self.reason_always or (self.status != "PASS" and not (judged and self.judgements[0]["cause"] == "latency"))
        ):
            out.append(self.judgements[0]["reason"])  # a latency FAIL is the line above; others say why
        decide = self.to_decide()
        if decide and not any(
            "would be decided" in line or line.startswith("to decide") for line in [*out, *self.notes]
        ):
            out.append(decide)
        return out + [n for n in self.notes if n]

    @staticmethod
    def _bound_line(j: JudgementDocument) -> str:
        """An inconclusive judgement in a card's width: where its bounds lie against the
        budget (the sentence that says it all is the card's tooltip, `title`)."""
        lower, upper, confidence = j.get("lower_ns"), j.get("upper_ns"), j.get("confidence")
        if upper is None and lower is None:
            # What is not bounded, in the card's width; why (how many clusters, what would
            # bound it) is the rest of the reason, the card's tooltip.
            head, _, rest = j["reason"].partition("; ")
            return f"{head} (hover for why)" if rest else head
        sure = f" {format_percent(confidence, 'g')}" if confidence else ""
        low = format_ns(lower) if lower is not None else "unbounded"
        high = format_ns(upper) if upper is not None else "unbounded"
        return f"its{sure} bounds, {low} to {high}, hold the budget"

    def to_decide(self) -> str:
        """What would decide an inconclusive card, as its judgements stored it: how many packets
        longer a run would be decided about half the time (the most any inconclusive one
        needs: the median length that decides, docs/statistics.md §2) and how long they take."""
        if self.status != "inconclusive":
            return ""
        needs = [j for j in self.judgements if j["status"] == "inconclusive" and j.get("more_packets")]
        if not needs:
            return ""
        most = max(needs, key=lambda j: j["more_packets"] or 0)
        seconds = most.get("more_seconds")
        took = f" ({format_minutes(seconds)})" if seconds else ""
        return f"a run about {format_count(most['more_packets'])} packets longer{took} would be decided about half the time"

    def marks(self) -> list[str]:
        """What stands behind the verdict that a reader must weigh: degraded or emulated runs."""
        degraded = self.degraded_runs
        if degraded is None:
            degraded = sum(bool(j["degraded"]) for j in self.judgements)
        runs = self.pooled_runs if self.pooled_runs is not None else len(self.judgements)
        marks = []
        if degraded:
            marks.append(f"degraded ({degraded} of {runs} runs)" if runs > 1 else "degraded")
        if self.emulated:
            marks.append("emulated (TCG): not this hardware's latency")
        return marks

    def html(self) -> str:
        details = "".join(f"<div class='detail'>{esc(line)}</div>" for line in self.lines() if line)
        marks = "".join(f"<div class='mark'>⚠ {esc(m)}</div>" for m in self.marks())
        whole = self.judgements[0]["reason"] if len(self.judgements) == 1 else ""
        tooltip = f" title='{esc(whole)}'" if whole else ""
        return (
            f"<div class='lt-card {_CSS[self.status]}'{tooltip}><div class='name'>{esc(self.title)}</div>"
            f"<div class='status'>{esc(self.status)}</div>{details}{marks}</div>"
        )


def cards_html(cards: Sequence[VerdictCard], heading: str = "") -> str:
    """The cards as a page's lead: one grid, a line above it (the budget, how many pass)."""
    if not cards:
        return ""
    passed = sum(c.status == "PASS" for c in cards)
    summary = heading or f"{passed} of {len(cards)} pass"
    return (
        CARD_STYLE
        + f"<p class='lt-lead'><b>{esc(summary)}</b></p>"
        + f"<div class='lt-cards'>{''.join(c.html() for c in cards)}</div>"
    )
