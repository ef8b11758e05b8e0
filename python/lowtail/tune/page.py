"""The before/after page of a tune session (`lowtail tune -o`), read from the store: the
changes tried with the cause each targeted, its measured effect and whether it was kept, the
HDR curves of before and after overlaid (the stored comparison's), and the boot-time
parameters still worth setting with the GRUB line and the reason."""

from __future__ import annotations

from pathlib import Path

from lowtail.compare.document import ComparisonDocument
from lowtail.compare.page import PAGE_STYLE, Drawn, hdr_section, host_state_section, table_section
from lowtail.report.page import Cell, Page, esc, table_html
from lowtail.store import DbPath, open_store
from lowtail.store import comparisons as comparestore
from lowtail.store import tune as tunestore
from lowtail.tune.document import TuneDocument


def _changes_section(page: Page, doc: TuneDocument) -> None:
    rows = []
    for c in doc["changes"]:
        result = "planned" if c["kept"] is None else ("kept" if c["kept"] else "undone")
        rows.append(
            [
                c["setting"],
                c["cause"],
                f"{c['remedy']['action']} ({c['remedy']['source']})",
                c["effect"] or "–",
                Cell(result, "pass" if c["kept"] else ("fail" if c["kept"] is False else "")),
            ]
        )
    body = PAGE_STYLE + (
        table_html(["change", "cause it targets", "remedy (study)", "measured effect", "result"], rows, text=(1, 2, 3))
        if rows
        else "<p>Nothing to change at run time: the host already follows the remedies that fit.</p>"
    )
    kept = [c for c in doc["changes"] if c["kept"]]
    if kept:
        body += (
            "<p>Undo what was kept with "
            + ", ".join(f"<code>lowtail host undo {esc(str(c['undo_file']))}</code>" for c in kept)
            + ".</p>"
        )
    page.add("Changes tried", body)


def _boot_section(page: Page, doc: TuneDocument) -> None:
    boot = doc.get("boot") or {}
    params = boot.get("params") or []
    if not params:
        page.add("Boot-time tuning", "<p>The running kernel command line has every parameter of the plan.</p>")
        return
    rows = [
        [p["text"], p["purpose"], p["source"], ", ".join(p["causes"]) or "a guideline (no measured cause)"]
        for p in params
    ]
    steps = "".join(f"<li>{esc(s)}</li>" for s in boot.get("grub_steps") or [])
    notes = "".join(f"<li>{esc(n)}</li>" for n in boot.get("notes") or [])
    page.add(
        "Boot-time parameters still worth setting",
        table_html(["parameter", "purpose", "study", "measured cause it targets"], rows, text=(1, 2, 3))
        + f"<p>The GRUB line:</p><pre>{esc(boot.get('grub', ''))}</pre><ol>{steps}</ol>"
        + f"<p>Then measure again against this session's before: <code>lowtail tune {esc(doc['spec'])} "
        f"--after-reboot {doc['tune_id']}</code>.</p>" + (f"<ul>{notes}</ul>" if notes else ""),
    )


def tune_page(doc: TuneDocument, comparison: ComparisonDocument | None, drawn: Drawn) -> Page:
    """The session's page: changes, before/after curves and table, boot-time tuning."""
    kept = ", ".join(doc["kept"]) or "nothing"
    page = Page(
        title=f"lowtail tune session {doc['tune_id']}",
        subtitle=f"{doc['spec']} · before: experiment {doc['before']} · kept: {kept}",
    )
    if doc["dry_run"]:
        page.banner("A dry run: nothing was applied (run `lowtail tune` with --yes).")
    if doc["status"] == "interrupted":
        page.banner("The session was interrupted: the change being tried was undone; the host holds what was kept.")
    if doc["status"] == "killed":
        page.banner(
            "The session was killed outright; the next tune undid the change it was trying; what it kept stays."
        )
    resolved = doc.get("resolution")
    if resolved and resolved.get("why"):
        page.banner(f"The before cannot resolve what tune judges: {resolved['why']}.", "warn")
    _changes_section(page, doc)
    unseen = doc.get("unseen") or []
    if unseen:
        page.add(
            "What explain could not see in the before runs",
            "<p>A change that targets a cause needs the cause seen; these runs could not show one:</p><ul>"
            + "".join(f"<li>{esc(u)}</li>" for u in unseen)
            + "</ul>",
        )
    if comparison is not None:
        hdr_section(page, comparison, drawn)
        table_section(page, comparison)
        host_state_section(page, comparison)
    _boot_section(page, doc)
    for r in doc.get("after_reboot") or []:
        page.add(
            f"After the reboot (experiment {r['after']})", f"<p>{esc(r['effect'])}</p><pre>{esc(r['cmdline'])}</pre>"
        )
    return page


def write_tune_report(db: DbPath, tune_id: int, path: str | Path) -> Path:
    """Write the page of stored tune session `tune_id` to `path`."""
    with open_store(db, read_only=True) as store:
        doc = tunestore.session(store, tune_id)
        comparison, drawn = None, Drawn()
        cid = doc.get("comparison_id")
        if cid is not None:
            row = comparestore.comparison(store, cid)
            comparison = row["document"]
            drawn = Drawn(comparestore.comparison_curves(store, cid), {}, {})
    return tune_page(doc, comparison, drawn).write(Path(path))
