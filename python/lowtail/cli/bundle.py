"""`lowtail export` and `lowtail import`: stored runs carried between databases as one
bundle file (see lowtail.bundle)."""

from __future__ import annotations

from pathlib import Path

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db
from lowtail.cli._output import note, print_json, warn
from lowtail.core.terminal import shown
from lowtail.core.units import format_counted, format_named
from lowtail.store import DEFAULT_DB
from lowtail.store.selection import HELP as SELECTION_HELP


@app.command(
    "export",
    help="Write stored runs to a bundle another database can import: their rows, analyses, matched "
    "series, host metadata, the calibration runs of their floor and their model results, their "
    "kernel traces and explanations, with a "
    "manifest of checksums. SELECTION: " + SELECTION_HELP,
)
def export(
    selection: list[str] = typer.Argument(..., help=SELECTION_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="The bundle file to write (a tar file)."),
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(False, "--json", help="Print the bundle's manifest as JSON."),
) -> None:
    """`lowtail export`."""
    from lowtail.bundle.export import export_bundle

    manifest = export_bundle(db, list(selection), output)
    if manifest.series_missing:
        warn(
            f"{format_named(manifest.series_missing, 'analysis', 'analyses')} "
            f"{'has' if len(manifest.series_missing) == 1 else 'have'} no matched series to carry: "
            "a comparison elsewhere uses their stored figures only"
        )
    if manifest.traces_missing:
        runs = format_named(manifest.traces_missing, "run")
        if len(manifest.traces_missing) == 1:
            said = "has lost its kernel trace: its explanation travels, but explaining it again"
        else:
            said = "have lost their kernel traces: their explanations travel, but explaining them again"
        warn(f"{runs} {said} elsewhere finds no trace")
    if json_out:
        import msgspec

        print_json(msgspec.to_builtins(manifest))
        return
    t = manifest.tables
    note(
        f"wrote {output}: {format_counted(t['runs'].rows, 'run')} of "
        f"{format_counted(t['experiments'].rows, 'experiment')}, "
        f"{format_counted(t['analyses'].rows, 'analysis', 'analyses')}, "
        f"{format_counted(t['model_results'].rows, 'model result')} "
        f"(bundle {manifest.bundle_id[:12]})"
    )


@app.command(
    "import",
    help="Add the runs of a bundle (`lowtail export`) to this database under new ids, their origin "
    "recorded, their series in the database's data directory. A bundle imported before adds nothing.",
)
def import_(
    bundle: Path = typer.Argument(..., help="The bundle file."),
    db: Db = DEFAULT_DB,
    data_dir: Path | None = typer.Option(
        None, help="Where its matched series go [default: lowtail-data beside the database]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print what was imported as JSON."),
) -> None:
    """`lowtail import`."""
    from lowtail.bundle.load import import_bundle

    done = import_bundle(db, bundle, data_dir)
    if json_out:
        print_json(done)
        return
    experiments = format_named(done["experiments"], "experiment")
    if done["already"] and done["import_id"] is None:
        note(
            f"every run of {bundle} is in this database already ("
            f"{experiments}; brought by another bundle or measured here): nothing added"
        )
    elif done["already"]:
        note(
            f"{bundle} was imported before (import {done['import_id']}, {done['imported_at']:%Y-%m-%d %H:%M}) "
            f"as {experiments}: nothing added"
        )
    else:
        note(
            f"imported {bundle} from {shown(done['origin']['host'])} ({shown(done['origin']['database'])}): "
            f"{experiments}, "
            f"{format_counted(len(done['runs']), 'run')}, {format_counted(len(done['analyses']), 'analysis', 'analyses')}"
            + (f", {format_counted(len(done['models']), 'model result')}" if done["models"] else "")
            + f" (import {done['import_id']}; series in {done['data_dir']})"
        )
