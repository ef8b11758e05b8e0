"""`lowtail import-captures DIR --spec FILE.toml`: a campaign of capture pairs made by other
tools, stored as an experiment that `experiment report` (and comparisons) read like
lowtail's own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db, Strict
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, err, note, print_json, strict_exit, warn
from lowtail.cli.run import print_runs, run_json
from lowtail.core.units import format_counted
from lowtail.experiment.degraded import degraded_lines
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.experiment.external import ImportResult, Pair
    from lowtail.store.runs import ExperimentRuns


@app.command(
    "import-captures",
    help="Import a campaign of PRE/POST capture pairs made by other tools (MoonGen/MoonSniff, tcpdump, a "
    "hardware timestamper) as a stored experiment: the spec's pattern says which axis values (DuT, rate, "
    "repetition, ...) each pair's file names carry. Pairs that cannot be paired or read are named and left "
    "out (the experiment is then partial, exit 3); importing again resumes.",
)
def import_captures(
    directory: Path = typer.Argument(..., help="Directory of the captures (searched recursively)."),
    spec: Path = typer.Option(..., "--spec", help="TOML file: [import] pattern, [axes], [analysis], [verdict]."),
    db: Db = DEFAULT_DB,
    data_dir: Path | None = typer.Option(
        None, help="Where the matched series go [default: lowtail-data beside the database]."
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Import anew even if this campaign was imported before."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document: runs, unpaired, failed, ignored."),
    strict: Strict = False,
) -> None:
    """`lowtail import-captures`."""
    from lowtail.experiment.external import import_campaign, load_spec
    from lowtail.store import default_data_dir, open_store
    from lowtail.store import runs as runstore

    import_spec = load_spec(spec)
    data_dir = data_dir or default_data_dir(db)

    def progress(i: int, n: int, pair: Pair) -> None:
        if err.is_terminal and not json_out:
            err.print(f"analysing pair {i + 1} of {n}: {pair.label}", end="\r", markup=False)

    with open_store(db) as store:
        result = import_campaign(store, directory, import_spec, data_dir, fresh=fresh, on_pair=progress)
        view = runstore.experiment_runs(store, result.experiment_id)
    _render(result, view, db, json_out, strict)


def _render(result: ImportResult, view: ExperimentRuns, db: Path, json_out: bool, strict: bool) -> None:
    """The imported experiment's runs (or one JSON document), what was left out and why; exit
    3 when the experiment is partial."""
    from lowtail.experiment.page import experiment_devices
    from lowtail.verdict.judge import stored_verdict

    experiment, rows, floors = view.experiment, view.runs, view.floor
    verdict = stored_verdict(experiment["spec"])
    judged = experiment_devices(rows, verdict)
    devices = {d.device: d.as_dict() for d in judged}
    for line in degraded_lines(rows):  # said once per kind; the table's verdicts mark each run
        warn(line)
    if json_out:
        print_json(
            {
                "experiment_id": result.experiment_id,
                "status": experiment["status"],
                "partial": result.partial,
                "already_imported": result.already,
                "runs": [run_json(r, floors, verdict) | {"device_verdict": devices.get(r["dut_name"])} for r in rows],
                "unpaired": result.unpaired,
                "failed": [{"pair": pair, "error": why} for pair, why in result.failed],
                "ignored": result.ignored,
                "warnings": [{"pair": pair, "warning": w} for pair, w in result.warnings],
            }
        )
    else:
        print_runs(experiment, rows, floors, verdict, judged)
        if result.already:
            note(
                f"this campaign is already stored as experiment {result.experiment_id} in {db} "
                f"(--fresh imports it again)"
            )
        else:
            note(
                f"stored as experiment {result.experiment_id} in {db}: {format_counted(result.imported, 'pair')} imported"
                + (f", {result.resumed} were already stored" if result.resumed else "")
            )
        if result.ignored:
            note(
                f"{format_counted(len(result.ignored), 'file')} {'does' if len(result.ignored) == 1 else 'do'} not match the pattern "
                f"and {'was' if len(result.ignored) == 1 else 'were'} ignored: {', '.join(result.ignored[:10])}"
            )
    for pair, w in result.warnings:
        warn(w if pair in w else f"{pair}: {w}")
    for line in result.unpaired:
        warn(f"unpaired: {line}")
    for pair, why in result.failed:
        warn(f"not imported: {pair}: {why}")
    if result.partial:
        warn(
            f"experiment {result.experiment_id} is partial: {len(result.unpaired)} unpaired and "
            f"{len(result.failed)} unreadable captures left out"
        )
    code = EXIT_PARTIAL if result.partial else EXIT_OK
    raise typer.Exit(strict_exit(code, [d.status for d in judged], strict, json_out))
