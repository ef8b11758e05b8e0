"""`lowtail run`, `lowtail calibrate` and `lowtail experiment list|report`: latency
experiments on a software testbed, their storage and their report."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from lowtail import percentiles
from lowtail.cli._app import app
from lowtail.cli._options import db_option
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, err, note, out, print_json, warn
from lowtail.units import format_count, format_ns, format_rate
from lowtail.virtualization import TCG_WARNING, any_emulated, marked

experiment_app = typer.Typer(help="Stored experiments: list them, write their report.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")

_DATA_HELP = "Where captures and matched series go [default: lowtail-data beside the database]."


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Any]:
    from lowtail.experiment.runner import Progress

    if not (enabled and err.is_terminal):
        yield Progress()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    with Bar(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("runs", total=None)

        def start(i: int, n: int, combo: Any) -> None:
            bar.update(
                task, total=n, completed=i, description=f"{combo.dut.name} @ {format_rate(combo.traffic.rate_pps)}"
            )

        def done(i: int, n: int, combo: Any, run: dict[str, Any]) -> None:
            bar.update(task, completed=i + 1)

        yield Progress(on_start=start, on_done=done)


def _remove_leftovers() -> None:
    """What killed runs left in the kernel (their owner is dead) goes before a run starts:
    their real-time programs and cgroups would spoil its measurements."""
    from lowtail.errors import Failure
    from lowtail.testbed.registry import remove_leftovers

    try:
        for left in remove_leftovers():
            note(f"removed what a killed run left: {left.summary()}")
    except Failure as e:
        warn(f"could not remove what a killed run left ({e}); `lowtail testbed show` lists it")


def _sweep(exp: Any, db: Path, data_dir: Path | None, fresh: bool, json_out: bool, report: Path | None) -> None:
    from lowtail.experiment.runner import check_can_run, run_experiment
    from lowtail.store import open_store
    from lowtail.store import runs as runstore

    check_can_run(exp, log=note)  # before anything is opened or made: privileges, programs, DPDK, guest images
    _remove_leftovers()
    data_dir = data_dir or db.resolve().parent / "lowtail-data"
    with open_store(db) as store, _progress_bar(not json_out) as progress:
        result = run_experiment(exp, store, data_dir, fresh=fresh, progress=progress)
        experiment = runstore.experiment(store, result.experiment_id)
        rows = runstore.runs(store, result.experiment_id)
        floors = runstore.calibration_floor(store, result.experiment_id)
    if result.resumed_runs:
        note(
            f"resumed experiment {result.experiment_id}: {result.resumed_runs} runs were already stored, "
            f"{result.new_runs} measured now"
        )
    if report:
        from lowtail.report.experiment import write_experiment_report

        write_experiment_report(db, result.experiment_id, report, verdict=exp.verdict)
    invalid = [r for r in rows if not r["valid"]]
    if any_emulated(rows):
        warn(TCG_WARNING)
    if json_out:
        print_json([run_json(r, floors) for r in rows])
    else:
        # Piped output (make run, logs) is not cut to 80 columns: the table is the result.
        printer = out if out.is_terminal else Console(highlight=False, width=160)
        printer.print(runs_table(experiment, rows, floors, exp.verdict))
        note(f"stored as experiment {result.experiment_id} in {db}" + (f"; report: {report}" if report else ""))
    for r in invalid:
        warn(
            f"run {r['run_id']} ({r['dut_name']} @ {format_rate(r['rate_pps'])}) is invalid: "
            f"{'; '.join(r['invalid_reasons'])}"
        )
    if invalid:
        warn(f"{len(invalid)} of {len(rows)} runs are invalid: their figures cannot be trusted")
    raise typer.Exit(EXIT_PARTIAL if invalid else EXIT_OK)


def run_json(r: dict[str, Any], floors: dict) -> dict[str, Any]:
    """One run as `lowtail run --json` prints it (latency_ns as `lowtail analyze --json`)."""
    figures = r.get("figures")
    figures = figures if isinstance(figures, dict) else {}
    floor = floors.get((r["rate_pps"], r["frame_size"], r["burst"]))
    return {
        "run_id": r["run_id"],
        "experiment_id": r["experiment_id"],
        "dut": r["dut_name"],
        "kind": r["dut_kind"],
        "calibration": r["calibration"],
        "dut_config": r["dut_config"],
        "rate_pps": r["rate_pps"],
        "frame_size": r["frame_size"],
        "burst": r["burst"],
        "repetition": r["repetition"],
        "sent": r["sent"],
        "received": r["received"],
        "lost": r["lost"],
        "duplicates": r["duplicates"],
        "reordered": r["reordered"],
        "latency_ns": figures.get("latency_ns"),
        "valid": r["valid"],
        "invalid_reasons": r["invalid_reasons"],
        "analysis_id": r["analysis_id"],
        "series_path": r["series_path"],
        "generator": r["generator"],
        "capture": r["capture"],
        "containment": r["containment"],
        "virtualization": r.get("virtualization"),
        "dut_stats": r["dut_stats"],
        "energy": r["energy"],
        "calibration_floor": None
        if floor is None or r["calibration"]
        else {"run_id": floor["run_id"], "p50_ns": floor["lat_p50_ns"], "p99_999_ns": floor["lat_p99_999_ns"]},
        "started_at": r["started_at"],
        "finished_at": r["finished_at"],
    }


def runs_table(experiment: dict[str, Any], rows: list[dict[str, Any]], floors: dict, verdict: Any) -> Table:
    """The runs of an experiment as `lowtail run` prints them, each with its verdict."""
    t = Table(
        title=f"experiment {experiment['experiment_id']} · {experiment['name']} · verdict: {verdict.describe()}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    p99_999 = percentiles.by_key("p99_999").short
    for col, right in (
        ("DuT", False),
        ("rate", True),
        ("sent", True),
        ("lost", True),
        (percentiles.by_key("p50").short, True),
        (p99_999, True),
        ("max", True),
        (f"floor {p99_999}", True),
        ("verdict", False),
    ):
        t.add_column(col, justify="right" if right else "left")
    for r in rows:
        floor = floors.get((r["rate_pps"], r["frame_size"], r["burst"]))
        t.add_row(
            marked(r["dut_name"], r.get("virtualization")),
            format_rate(r["rate_pps"]),
            format_count(r["sent"]),
            format_count(r["lost"]),
            format_ns(r["lat_p50_ns"]),
            format_ns(r["lat_p99_999_ns"]),
            format_ns(r["lat_max_ns"]),
            "" if r["calibration"] else "–" if floor is None else format_ns(floor["lat_p99_999_ns"]),
            verdict.judge(r),
        )
    return t


@app.command(
    help="Run a latency experiment on a software testbed (network namespaces and veth links): "
    "every combination of the file's lists, each stored with its analysis. Without FILE, the "
    "embedded default experiment. Interrupted experiments resume where they stopped."
)
def run(
    file: Path | None = typer.Argument(None, help="Experiment file (TOML) [default: the embedded default]."),
    db: Path = db_option(),
    data_dir: Path | None = typer.Option(None, help=_DATA_HELP),
    report: Path | None = typer.Option(None, help="Also write the experiment's HTML report to this file."),
    fresh: bool = typer.Option(False, help="Start a new experiment even if an unfinished one of this file exists."),
    print_default: bool = typer.Option(False, help="Print the embedded default experiment file and exit."),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON (one object per run)."),
) -> None:
    """`lowtail run`."""
    from lowtail.experiment import spec

    if print_default:
        out.file.write(spec.default_text())
        return
    _sweep(spec.load(file), db, data_dir, fresh, json_out, report)


@app.command(
    help="Measure the testbed's own noise floor: the experiment's traffic over a plain veth wire, "
    "no DuT. Reports show it beside every result."
)
def calibrate(
    file: Path | None = typer.Argument(
        None, help="Experiment file whose traffic to use [default: the embedded default]."
    ),
    db: Path = db_option(),
    data_dir: Path | None = typer.Option(None, help=_DATA_HELP),
    report: Path | None = typer.Option(None, help="Also write the HTML report to this file."),
    fresh: bool = typer.Option(False, help="Start anew even if an unfinished calibration of this file exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON (one object per run)."),
) -> None:
    """`lowtail calibrate`."""
    from lowtail.experiment import spec

    exp = spec.load(file)
    exp = dataclasses.replace(
        exp, name=f"{exp.name} (calibration)", duts=[], calibrate=True, raw=exp.raw | {"calibration_only": True}
    )
    _sweep(exp, db, data_dir, fresh, json_out, report)


@experiment_app.command("list", help="List stored experiments, newest first.")
def list_experiments(
    db: Path = db_option(),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """`lowtail experiment list`."""
    from lowtail.store import open_store
    from lowtail.store import runs as runstore

    with open_store(db, read_only=True) as store:
        rows = runstore.list_experiments(store)
    if json_out:
        print_json(rows)
        return
    t = Table(box=None)
    for col in ("id", "name", "created", "status", "runs", "valid"):
        t.add_column(col, justify="right" if col in ("id", "runs", "valid") else "left")
    for r in rows:
        t.add_row(
            str(r["experiment_id"]),
            r["name"],
            f"{r['created_at']:%Y-%m-%d %H:%M}",
            r["status"],
            str(r["runs"]),
            str(r["valid_runs"]),
        )
    out.print(t)


@experiment_app.command("report", help="Write the HTML report of a stored experiment (an id, or 'latest').")
def experiment_report(
    experiment: str = typer.Argument("latest", help="Experiment id or 'latest'."),
    db: Path = db_option(),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="HTML file [default: lowtail-experiment-<id>.html]."
    ),
    budget: str | None = typer.Option(
        None, help="Latency budget of the verdict, e.g. 350us [default: the experiment file's, else 1ms]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail experiment report`."""
    from lowtail.report.experiment import write_experiment_report

    path = write_experiment_report(db, experiment, output, budget=budget)
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
