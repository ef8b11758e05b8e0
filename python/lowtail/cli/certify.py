"""`lowtail certify`: the qualification record of a run or a selection — one page a
customer reads (and its --json), on the stored comparison of those runs."""

from __future__ import annotations

from pathlib import Path

import typer

from lowtail.cli._app import app
from lowtail.cli._options import db_option, duration_option, verdict_request
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, count_progress, note, out, print_json, warn
from lowtail.selection import HELP as SELECTION_HELP


@app.command(
    help="Write the qualification record of stored runs: per configuration the DuT and its configuration, "
    "the host, the packets, the budget, the judged percentile with its interval, the verdict and its "
    "confidence, the floor, the loss, degraded or emulated runs, the lowtail version and the data's "
    "identity (captures, sizes, frames). The verdict is `lowtail compare`'s, on the same rule as "
    "`lowtail run`'s. SELECTION: " + SELECTION_HELP
)
def certify(
    selection: list[str] = typer.Argument(..., help=SELECTION_HELP),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the record's page here (HTML)."),
    budget_ns: int | None = duration_option(
        "--budget", None, "Judge against this latency bound, e.g. 350us [default: the runs' own]."
    ),
    percentile: str | None = typer.Option(None, help="...at this percentile [default: the runs' own]."),
    confidence: str | None = typer.Option(
        None, help="...with this confidence: 95, 95% or 0.95 [default: the runs' own, else 95]."
    ),
    db: Path = db_option(),
    json_out: bool = typer.Option(False, "--json", help="Print the record as one JSON document."),
) -> None:
    """`lowtail certify`."""
    from lowtail.compare.certificate import certify_and_store
    from lowtail.compare.comparison import CompareOptions
    from lowtail.store import open_store

    opts = CompareOptions(verdict=verdict_request(budget_ns, percentile, confidence=confidence))
    with open_store(db) as store, count_progress("reading latencies", "rows", not json_out) as progress:
        doc = certify_and_store(store, list(selection), opts, progress)
    if output is not None:
        from lowtail.report.certificate import write_certificate

        write_certificate(doc, output)
    if json_out:
        print_json(doc)
    else:
        for c in doc["configurations"]:
            v = c["verdict"]
            out.print(f"{c['label']}: {v['label']} · {v.get('budget', '')} · {v['reason']}", soft_wrap=True)
        note(f"on comparison {doc['comparison_id']}" + (f"; record: {output}" if output else ""))
    for why in doc["partial_reasons"]:
        warn(why)
    raise typer.Exit(EXIT_PARTIAL if doc["partial"] else EXIT_OK)
