"""`lowtail explain RUN`: why a run's tail is what it is — its tail packets matched against
what ran on each role's core while they were in flight, the causes ranked, each with its
evidence and remedy, and what could not be seen (explain/). A stored run is answered from its
stored explanation (worked out when the run was stored, or the first time it is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import Db
from lowtail.cli._output import EXIT_PARTIAL, note, out, print_json, table_console, warn
from lowtail.core.files import check_output
from lowtail.core.terminal import shown
from lowtail.core.units import format_ns, format_percent
from lowtail.explain.asked import tail_words
from lowtail.explain.words import KIND_WORDS, core_text, could_hold, hop_adds, rates_lines
from lowtail.store import DEFAULT_DB


@app.command(
    help="Why a run's tail is what it is: its tail packets (above the budget when the run fails it, else above "
    "p99.9) against what ran on the DuT's, generator's and timestamper's cores while they were in flight; "
    "causes ranked by the share of the tail they explain, with evidence and a remedy, and what could not be "
    "seen (steal time, untraced cores) with the share of the tail it could hold. The explanation is worked out "
    "once and stored (the report and `compare` show it); asking again answers from the store. --above "
    "explains another tail on request, without storing it."
)
def explain(
    run: str = typer.Argument("latest", help="Run id, or 'latest'."),
    above: str | None = typer.Option(
        None,
        "--above",
        help="The tail: packets above this percentile (p99) or latency (500us) [default: the run's own, stored].",
    ),
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(False, "--json", help="Print the explanation as JSON."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Also write the explanation's page to this HTML file."
    ),
) -> None:
    """`lowtail explain`."""
    from lowtail.explain.asked import latency_above
    from lowtail.explain.stored import stored_or_explained
    from lowtail.store import open_store
    from lowtail.store.explain import run_id_of

    if output is not None:  # before any work: a FIFO, device or directory is refused at once
        check_output(output, "--output")
    threshold = latency_above(above) if above is not None else None
    with open_store(db, create=False) as store:
        doc = stored_or_explained(store, run_id_of(store, run), threshold)
    if output is not None:
        from lowtail.explain.page import write_explain_report

        written = write_explain_report(db, doc, output)
    if json_out:
        print_json(doc)
    else:
        show(doc)
        if output is not None:
            note(f"page: {written}")
    if doc.get("partial"):
        raise typer.Exit(EXIT_PARTIAL)


def show(doc: Any) -> None:
    """The explanation on the terminal: the headline first, what could not be seen, the causes
    table, each cause's evidence and remedy, the unexplained share, the notes. Names from the
    trace are data: `printable` escapes them."""
    if doc.get("headline"):
        warn(shown(doc["headline"]))
    tail = doc["tail"]
    note(f"run {doc['run']}: {tail['packets']:,} tail packets, {tail_words(tail['rule'], tail['threshold_ns'])}")
    for u in doc.get("unseen") or []:
        note(f"not seen: {shown(u['what'])} ({could_hold(u['share'])})")
        if u.get("resolution"):
            note(f"  resolution: {u['resolution']}")
    causes = doc.get("causes") or []
    if causes:
        t = Table(box=None)
        for col in ("#", "cause", "role", "CPU", "share of tail", "added", "what ran"):
            t.add_column(col, justify="right" if col in ("#", "CPU", "share of tail", "added") else "left")
        for i, c in enumerate(causes, 1):
            t.add_row(
                str(i),
                KIND_WORDS.get(c["kind"], c["kind"]),
                c["role"],
                shown(core_text(c, doc)),
                format_percent(c["share"]),
                format_ns(c["added_ns"]),
                shown(c["evidence"].get("what", "")),
            )
        table_console().print(t)
        for i, c in enumerate(causes, 1):
            for e in c["evidence"].get("events", [])[:2]:
                event = e.get("event")
                happened = f"; {shown(event['what'])} ran {format_ns(event['duration_ns'])}" if event else ""
                out.print(
                    f"  {i}. packet {e['packet_id']}: {format_ns(e['latency_ns'])}, "
                    f"{format_ns(e['delay_ns'])} of it {c['kind'].replace('_', ' ')}{happened}",
                    markup=False,
                )
            out.print(f"  {i}. remedy: {c['remedy']['action']} ({c['remedy']['source']})", markup=False)
    else:
        note("no cause explains more of the tail than chance would")
    note(f"unexplained: {format_percent(doc['unexplained_share'])} of the tail packets")
    for sampled in doc.get("interrupts") or []:
        note(f"{sampled['source']} interrupts, {sampled['resolution']}:")
        for line in rates_lines(sampled):
            note(f"  {shown(line)}")
        for line in sampled.get("sentences") or []:
            note(f"  {shown(line)}")
    hops = doc.get("hops")
    if hops:
        note(f"by hop: {shown(hops['said'])}")
        for h in hops["hops"]:
            note(
                f"  hop {h['hop']} {shown(h['name'])} ({h['kind']}): median {format_ns(h['median_ns'])}, "
                f"tail mean {format_ns(round(h['tail_mean_ns']))}, adds {hop_adds(h['added_ns'])} "
                f"(adds the most to {format_percent(h['share'])} of the tail packets)"
            )
    for n in doc.get("notes") or []:
        note(shown(n))
