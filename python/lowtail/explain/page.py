"""A run's explanation as a page of its own (`lowtail explain RUN -o FILE`): the run's
verdict card and the answer in a line first (the cause that explains the most of its tail,
and its remedy), the headline when the host could not measure, then the same section the
experiment's page shows (explain/section.py), what could not be seen first in it. Drawn from the
document the command printed (the stored one, or one worked out for another tail)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lowtail.core.terminal import shown
from lowtail.core.units import format_ns, format_percent, format_rate
from lowtail.experiment.page import experiment_cards
from lowtail.explain.section import explain_section, unseen_html
from lowtail.explain.words import KIND_WORDS, hop_adds
from lowtail.report.cards import cards_html
from lowtail.report.page import Page, esc, table_html
from lowtail.store import DbPath, open_store
from lowtail.store import runs as runstore
from lowtail.verdict import judge as verdicts


def write_explain_report(db: DbPath, doc: Mapping[str, Any], output: Path) -> Path:
    """The page of one run's explanation `doc`: its verdict card and the answer in a line
    first (the cause that explains the most of the tail, or that none does), the headline
    when the host could not measure, then the section the experiment's page shows."""
    run_id = int(doc["run"])
    with open_store(db, read_only=True) as store:
        (run,) = runstore.select_runs(store, run_ids=[run_id])
        experiment_id = run["experiment_id"]
        assert experiment_id is not None  # a stored run belongs to an experiment
        experiment = runstore.experiment(store, experiment_id)
        verdict = verdicts.stored_verdict(experiment["spec"])
        rows = [r for r in runstore.runs(store, experiment_id) if r["run_id"] == run_id]
        page = Page(
            title=f"lowtail explain: run {run_id}",
            subtitle=f"experiment {experiment_id} — {experiment['name']} · {run['dut_name']} "
            f"at {format_rate(run['rate_pps'])}, repetition {run['repetition']}",
        )
        # What could not be seen leads, beside the answer: it bounds what the answer can claim.
        page.lead(
            cards_html(experiment_cards(rows, verdict), f"Budget: {verdict.describe()}")
            + _answer(doc)
            + _by_hop(doc)
            + unseen_html(doc)
        )
        if doc.get("headline"):
            page.banner(shown(doc["headline"]), "warn")
        explain_section(page, store, run_id, "Causes of the tail", level=2, doc=doc, unseen=False)
    return page.write(output)


def _by_hop(doc: Mapping[str, Any]) -> str:
    """A chain run's tail split by hop (explain/hops.py): the hop that makes it, then each hop."""
    hops = doc.get("hops")
    if not hops:
        return ""
    rows = [
        [
            h["hop"],
            shown(h["name"]),
            h["kind"],
            format_ns(h["median_ns"]),
            format_ns(round(h["tail_mean_ns"])),
            hop_adds(h["added_ns"]),
            f"{h.get('made_late', '–')}",
            format_percent(h["share"]),
        ]
        for h in hops["hops"]
    ]
    header = ["hop", "DuT", "kind", "median", "tail mean", "adds", "tail packets it delays most", "share"]
    return f"<p><b>By hop:</b> {esc(shown(hops['said']))}.</p>" + table_html(header, rows, text=(1, 2, 6))


def _answer(doc: Mapping[str, Any]) -> str:
    """The explanation in one line: the leading cause and its remedy, or that none stands out."""
    causes = doc.get("causes") or []
    if not causes:
        return (
            f"<p class='lt-lead'><b>No cause explains more of the tail than chance would</b> "
            f"({esc(format_percent(doc['unexplained_share']))} of it unexplained).</p>"
        )
    top = causes[0]
    what = shown(top["evidence"].get("what") or "")
    return (
        f"<p class='lt-lead'><b>{esc(KIND_WORDS.get(top['kind'], top['kind']))}</b>"
        f"{esc(f': {what}' if what else '')} explains {esc(format_percent(top['share']))} of the "
        f"{doc['tail']['packets']:,} tail packets. Remedy: {esc(top['remedy']['action'])}.</p>"
    )
