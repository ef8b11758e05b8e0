"""`lowtail report`: an HTML report from the results database."""

from __future__ import annotations

from pathlib import Path

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db
from lowtail.cli._output import note, print_json
from lowtail.core.files import check_output
from lowtail.store import DEFAULT_DB


@app.command(help="Write an HTML report of a stored analysis (an id, or 'latest').")
def report(
    analysis: str = typer.Argument("latest", help="Analysis id or 'latest'."),
    db: Db = DEFAULT_DB,
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file [default: lowtail-report-<id>.html]."),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail report`."""
    from lowtail.analyze.page import write_analysis_report

    if output is not None:  # before any work: a FIFO, device or directory is refused at once
        check_output(output, "--output")
    path = write_analysis_report(db, analysis, output)
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
