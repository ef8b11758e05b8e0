"""`lowtail certify`: the qualification record of a run or a selection — one page a
customer reads (and its --json), on the stored comparison of those runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db, Strict, duration_info, verdict_request
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, count_progress, note, out, print_json, strict_exit, warn
from lowtail.core.files import check_output
from lowtail.store import DEFAULT_DB
from lowtail.store.selection import HELP as SELECTION_HELP


@app.command(
    help="Write the qualification record of stored runs: each device's verdict over its configurations; per "
    "configuration the device by name and kind with every option it was configured with (rule sets with their "
    "hash), its containment, cores and kernel, the traffic, the runs, the host, the packets, the budget, the "
    "judged percentile with its interval and the one-sided bounds the verdict used, the verdict and its "
    "confidence, the floor, the loss, degraded or emulated runs, the lowtail version and the data's identity "
    "(captures, sizes, frames). The verdict is `lowtail compare`'s, on the same rule as `lowtail run`'s. "
    "SELECTION: " + SELECTION_HELP
)
def certify(
    selection: list[str] = typer.Argument(..., help=SELECTION_HELP),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the record's page here (HTML)."),
    budget_ns: Annotated[
        int | None,
        duration_info("--budget", None, "Judge against this latency bound, e.g. 350us [default: the runs' own]."),
    ] = None,
    percentile: str | None = typer.Option(None, help="...at this percentile [default: the runs' own]."),
    confidence: str | None = typer.Option(
        None, help="...with this confidence: 95, 95% or 0.95 [default: the runs' own, else 95]."
    ),
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the comparison the record rests on (`lowtail comparison list`)."),
    json_out: bool = typer.Option(False, "--json", help="Print the record as one JSON document."),
    strict: Strict = False,
) -> None:
    """`lowtail certify`."""
    from lowtail.compare.certificate import certify_and_store
    from lowtail.compare.comparison import CompareOptions
    from lowtail.store import open_store

    if output is not None:  # before any work: a FIFO, device or directory is refused at once
        check_output(output, "--output")
    opts = CompareOptions(verdict=verdict_request(budget_ns, percentile, confidence=confidence))
    with (
        open_store(db, read_only=not store, create=False) as s,
        count_progress("reading latencies", "rows", not json_out) as progress,
    ):
        doc = certify_and_store(s, list(selection), opts, progress, save=store)
    if output is not None:
        from lowtail.compare.certificate_page import write_certificate

        write_certificate(doc, output)
    if json_out:
        print_json(doc)
    else:
        for c in doc["configurations"]:
            v = c["verdict"]
            out.print(
                f"{c['label']}: {v['label']} · {v.get('budget', '')} · {v['reason']}", soft_wrap=True, markup=False
            )
        if doc["devices"]:
            width = max(len(d["device"]) for d in doc["devices"])
            budget = doc["budget"] or "each configuration against its runs' own budget"
            out.print(f"\nverdict per device ({budget}):", markup=False)
            for d in doc["devices"]:
                out.print(f"  {d['device']:<{width}}  {d['summary']}", soft_wrap=True, markup=False)
        on = f"comparison {doc['comparison_id']}" if doc["comparison_id"] is not None else "a comparison not stored"
        note(f"on {on} of {doc['selected']}" + (f"; record: {output}" if output else ""))
    for why in doc["partial_reasons"]:
        warn(why)
    judged = [c["verdict"]["status"] for c in doc["configurations"]]
    raise typer.Exit(strict_exit(EXIT_PARTIAL if doc["partial"] else EXIT_OK, judged, strict, json_out))
