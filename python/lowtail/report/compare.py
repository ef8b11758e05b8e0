"""The page of a stored comparison (`lowtail compare -o FILE.html`, `lowtail comparison
report`): a plain page of the comparison's tables and one HDR overlay, read from the store
only (store.comparisons). The interactive page replaces this one; its entry point keeps
this signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lowtail.report import plots
from lowtail.report.page import Page, esc, figure_html, table_html
from lowtail.report.tables import configurations_table, evt_table, not_resolvable_note, rates_table
from lowtail.store import comparisons as comparestore
from lowtail.store import open_store


def write_comparison_report(db: str | Path, comparison_id: int | str, path: str | Path) -> Path:
    """Write the page of stored comparison `comparison_id` (an id, or 'latest') of database
    `db` to `path`; returns the path written."""
    with open_store(db, read_only=True) as store:
        row = comparestore.comparison(store, comparison_id)
        cid = row["comparison_id"]
        curves = comparestore.comparison_curves(store, cid)
    doc = row["document"]
    title = f"lowtail comparison {cid}" + (f" — {row['label']}" if row["label"] else "")
    by = ", ".join(a["name"] for a in doc["axes"]) or "nothing (one configuration)"
    page = Page(
        title=title, subtitle=f"{len(doc['configurations'])} configurations by {by} · {' '.join(doc['selection'])}"
    )
    verdict = doc["verdict"]["text"] if doc.get("verdict") else "each configuration against its runs' own budget"
    header, rows, _ = configurations_table(doc)
    marked = not_resolvable_note(doc)
    page.add(
        "Configurations",
        f"<p>Budget: <b>{esc(verdict)}</b>. Percentiles are exact over all packets of a configuration's "
        f"repetitions.</p>"
        + table_html([h.replace("\n", " ") for h in header], rows)
        + (f"<p>{esc(marked)}</p>" if marked else ""),
    )
    page.add("Verdicts", _verdicts(doc))
    page.add("Differences", _differences(doc))
    budget_ns = doc["verdict"]["budget_ns"] if doc.get("verdict") else None
    overlay = [(c["label"], curves[c["index"]]["pooled"]) for c in doc["configurations"] if c["index"] in curves]
    if overlay:
        page.add(
            "Latency by percentile",
            figure_html(
                plots.hdr_percentile_plot(overlay, title="Pooled repetitions", budget_ns=budget_ns),
                "HDR percentile plot of each configuration's pooled packets (x: 1/(1−p), log scale)",
            ),
        )
    if doc["evt"]:
        page.add("EVT over runs", table_html(*evt_table(doc)))
    if doc["rates"]:
        page.add("Latency against rate", table_html(*rates_table(doc)))
    if doc["notes"] or doc["partial_reasons"]:
        page.add(
            "Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in [*doc["notes"], *doc["partial_reasons"]]) + "</ul>"
        )
    return page.write(Path(path))


def _verdicts(doc: dict[str, Any]) -> str:
    rows = [
        [c["label"], c["verdict"]["label"], c["verdict"]["reason"], str(c["worst_repetition"] or "–")]
        for c in doc["configurations"]
    ]
    return table_html(["configuration", "verdict", "why", "worst repetition"], rows)


def _differences(doc: dict[str, Any]) -> str:
    resolved = [d["text"] for d in doc["differences"]]
    unresolved = [d["text"] for d in doc["not_resolvable"]]
    parts = []
    if resolved:
        parts.append("<ul>" + "".join(f"<li>{esc(t)}</li>" for t in resolved) + "</ul>")
    else:
        parts.append("<p>No difference these runs can resolve.</p>")
    if unresolved:
        parts.append(
            "<details><summary>Not resolvable with these runs</summary><ul>"
            + "".join(f"<li>{esc(t)}</li>" for t in unresolved)
            + "</ul></details>"
        )
    return "".join(parts)
