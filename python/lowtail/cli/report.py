"""`lowtail report`: an HTML report from the results database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db, duration_info, verdict_request
from lowtail.cli._output import note, print_json
from lowtail.core.files import check_output
from lowtail.store import DEFAULT_DB


@app.command(help="Write an HTML report of a stored analysis (an id, or 'latest').")
def report(
    analysis: str = typer.Argument("latest", help="Analysis id or 'latest'."),
    db: Db = DEFAULT_DB,
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file [default: lowtail-report-<id>.html]."),
    budget_ns: Annotated[
        int | None,
        duration_info(
            "--budget",
            None,
            "Judge against this latency bound, e.g. 350us [default: a run's experiment's, else the one "
            "`analyze --budget` judged, else 1ms].",
        ),
    ] = None,
    percentile: str | None = typer.Option(
        None, help="...at this percentile, e.g. 99.99 [default: as --budget's, else 99.999]."
    ),
    max_loss: int | None = typer.Option(
        None, min=0, help="...with at most this many packets lost [default: as --budget's, else 0]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail report`."""
    from lowtail.analyze.page import write_analysis_report

    if output is not None:  # before any work: a FIFO, device or directory is refused at once
        check_output(output, "--output")
    path = write_analysis_report(db, analysis, output, verdict_request(budget_ns, percentile, max_loss))
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
