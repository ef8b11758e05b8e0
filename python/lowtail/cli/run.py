"""`lowtail run`, `lowtail calibrate` and `lowtail experiment list|report`: latency
experiments on a software testbed, their storage and their report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from lowtail.cli._app import app
from lowtail.cli._live import Stored, sweep_progress, view_mode
from lowtail.cli._options import Db, Strict, duration_info, verdict_request
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, note, out, print_json, strict_exit, table_console, warn
from lowtail.cli._render import Column, columns_table, fit_columns
from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.core.files import check_distinct_outputs, check_output
from lowtail.core.terminal import escape
from lowtail.core.units import format_count, format_counted, format_ns, format_rate
from lowtail.core.virtualization import TCG_WARNING, any_emulated, marked
from lowtail.experiment import clocks
from lowtail.experiment.degraded import degraded_lines
from lowtail.experiment.document import ExperimentRow, RunRow
from lowtail.report import tables
from lowtail.store import DEFAULT_DB, axes
from lowtail.store.db import LATENCY_FIGURES, latency_column, latency_figures_of
from lowtail.verdict.judge import Judgement, Status, Verdict

if TYPE_CHECKING:
    from lowtail.analyze.document import ChainDocument
    from lowtail.experiment.runner import StoredRun
    from lowtail.store.runs import Floor
    from lowtail.verdict.device import DeviceVerdict

experiment_app = typer.Typer(help="Stored experiments: list them, write their report.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")

_CALIBRATION_HELP = "Read the runs against the calibration runs of this stored experiment (an id)"
_DATA_HELP = "Where captures and matched series go [default: lowtail-data beside the database]."


def _stored_runs_view(store: Any, exp: Any) -> Callable[[StoredRun], Stored]:
    """What the live view shows once a run is stored: the table of the experiment's runs
    so far (the final table's rows, as they come) and a line about the run."""
    from lowtail.store import runs as runstore

    def on_stored(run: StoredRun) -> Stored:
        view = runstore.experiment_runs(store, run.record.experiment_id)
        table = runs_table(view.experiment, view.runs, view.floor, exp.verdict)
        row = next((r for r in view.runs if r["run_id"] == run.run_id), None)
        return Stored(table, _run_line(row, exp.verdict) if row else f"run {run.run_id} stored")

    return on_stored


def _run_line(r: Mapping[str, Any], verdict: Any) -> str:
    """One stored run in a line: "kernel @ 20 kpps: PASS · lost 0 · p99.999 45.210 µs (run 17)"."""
    lat = ((r.get("figures") if isinstance(r.get("figures"), dict) else None) or {}).get("latency_ns") or {}
    judged = percentiles.by_key(verdict.key)
    return (
        f"{marked(r['dut_name'], r.get('virtualization'))} @ {format_rate(r['rate_pps'])}: {verdict.judge(r).label} · "
        f"lost {tables.run_loss(r)} · {judged.short} {format_ns(lat.get(verdict.key))} (run {r['run_id']})"
    )


def device_verdict_lines(rows: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[str]:
    """The experiment's answer, one line per device (report/experiment.experiment_devices:
    PASS only if every configuration of it passed, FAIL if any failed, else inconclusive
    with what is missing), as the page's cards say it."""
    from lowtail.experiment.page import experiment_devices

    return _device_lines(rows, experiment_devices(rows, verdict))


def print_runs(
    experiment: ExperimentRow,
    rows: Sequence[RunRow],
    floors: Floor,
    verdict: Verdict,
    judged: Sequence[DeviceVerdict],
    chains: Mapping[int, ChainDocument] | None = None,
) -> None:
    """An experiment's table of runs, the verdict per device and each chain run's hops, as
    `lowtail run`, `experiment show` and `import-captures` end (what degraded the runs is said
    before it, grouped by kind: `degraded_lines`)."""
    printer = table_console()
    printer.print(runs_table(experiment, rows, floors, verdict, width=printer.width, degraded_said=True))
    lines = _device_lines(rows, judged)
    if lines:
        printer.print(f"\nverdict per device ({verdict.describe()}):", markup=False, soft_wrap=True)
        for line in lines:
            printer.print(f"  {line}", markup=False, soft_wrap=True)
    for r in rows:
        if (chain := _chain_of(r, chains or {})) and r["run_id"] is not None:
            for line in chain_lines(r["run_id"], chain):
                printer.print(line, markup=False, soft_wrap=True)


def _device_lines(rows: Sequence[Mapping[str, Any]], devices: Sequence[DeviceVerdict]) -> list[str]:
    width = max((len(d.device) for d in devices), default=0)
    return [f"{marked(d.device, _virtualization(rows, d.device)):<{width}}  {d.summary()}" for d in devices]


def _virtualization(rows: Sequence[Mapping[str, Any]], device: str) -> str | None:
    return next((r.get("virtualization") for r in rows if r["dut_name"] == device and r.get("virtualization")), None)


def untrustworthy(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Why an experiment's result is partial or not to be trusted (exit 3), in one line with
    what to change; None when every run is valid and none degraded."""
    from lowtail.experiment.degraded import what_to_change

    invalid = [r for r in rows if not r["valid"]]
    degraded = [r for r in rows if r["valid"] and r.get("degraded_reasons")]
    if not invalid and not degraded:
        return None
    parts = []
    if invalid:
        parts.append(f"{len(invalid)} of {len(rows)} runs invalid (their figures cannot be trusted)")
    if degraded:
        every = "every run" if len(degraded) == len(rows) else f"{len(degraded)} of {len(rows)} runs"
        parts.append(f"{every} degraded (the traffic was not what the file asked for)")
    change = what_to_change(rows)
    if invalid:
        change.append("remove what made the invalid runs invalid (each says why) and run the experiment again")
    return f"not to be trusted as measured: {'; '.join(parts)}; to change: {'; '.join(change)}"


def show_experiment(
    experiment: ExperimentRow,
    rows: Sequence[RunRow],
    floors: Floor,
    verdict: Verdict,
    json_out: bool,
    chains: Mapping[int, ChainDocument] | None = None,
) -> Shown:
    """An experiment's runs as `lowtail run` ends: what a reader must know first (an
    emulator, two clocks, invalid and degraded runs), the table, the verdict per device (a
    chain's on the whole chain), each chain run's hops; or with `json_out` the runs, each
    with its device's verdict and a chain run's hops (`chain`). Returns the exit code — 3
    (partial) when any run is invalid or degraded (`untrustworthy` says why) — and each
    device's verdict status (what `--strict` gates on), the devices judged once."""
    from lowtail.experiment.page import experiment_devices

    chains = chains or {}
    judged = experiment_devices(rows, verdict)
    invalid = [r for r in rows if not r["valid"]]
    if any_emulated(rows):
        warn(TCG_WARNING)
    if clocks.any_two_clocks(rows):
        warn(clocks.TWO_CLOCKS_WARNING)
    for r in invalid:
        warn(
            f"run {r['run_id']} ({r['dut_name']} @ {format_rate(r['rate_pps'])}) is invalid: "
            f"{'; '.join(r['invalid_reasons'])}"
        )
    for line in degraded_lines(rows):  # said once per kind; the table's verdicts mark each run
        warn(line)
    if json_out:
        devices = {d.device: d.as_dict() for d in judged}
        print_json(
            [
                run_json(r, floors, verdict)
                | {"device_verdict": devices.get(r["dut_name"])}
                | ({"chain": chain} if (chain := _chain_of(r, chains)) else {})
                for r in rows
            ]
        )
    else:
        print_runs(experiment, rows, floors, verdict, judged, chains)
    reason = untrustworthy(rows)
    return Shown(EXIT_OK if reason is None else EXIT_PARTIAL, [d.status for d in judged], reason)


class Shown(NamedTuple):
    """What showing an experiment's runs ends with."""

    code: int
    #: Each device's verdict status over its runs.
    statuses: list[str]
    #: Why the result is partial (`untrustworthy`), None when it is not.
    untrustworthy: str | None


def _chain_of(run: RunRow, chains: Mapping[int, ChainDocument]) -> ChainDocument | None:
    """A chain run's hops, None for any other run (or a plain analysis, which has no run id)."""
    return chains.get(run["run_id"]) if run["run_id"] is not None else None


def chain_lines(run_id: int, chain: ChainDocument) -> list[str]:
    """A chain run's hops in a few lines (the page's table of them, `tables.chain_table`):
    each hop's latency, loss and share, and how the hops add up against the clock's bound."""
    header, rows = tables.chain_table(chain)
    lines = [f"\nrun {run_id}, hop by hop ({tables.chain_adds_up(chain)}):"]
    for hop, name, kind, p50, p99_9, worst, lost, share in rows:
        lines.append(
            f"  {hop}. {escape(name)} ({kind}): p50 {p50}, p99.9 {p99_9}, max {worst}, lost {lost}, "
            f"{header[-1]} {share}"
        )
    return lines + [f"  {escape(w)}" for w in chain["warnings"]]


def _sweep(
    exp: Any, db: Path, data_dir: Path | None, fresh: bool, json_out: bool, report: Path | None, strict: bool
) -> None:
    from lowtail.experiment.runner import sweep_and_store
    from lowtail.store import default_data_dir, open_store
    from lowtail.store import runs as runstore
    from lowtail.store.chains import run_chains

    if report is not None:  # a sweep is long: a report it could not write is said before it starts
        check_output(report, "--report")
        if Path(exp.source).is_file():  # a report over the experiment file would replace it
            check_distinct_outputs((("--report", report),), (("the experiment file", exp.source),))
    result = sweep_and_store(
        exp,
        db,
        data_dir or default_data_dir(db),
        fresh=fresh,
        watch=lambda store: sweep_progress(view_mode(json_out), exp, _stored_runs_view(store, exp)),
        log=note,
        warn=warn,
    )
    with open_store(db, read_only=True) as store:
        view = runstore.experiment_runs(store, result.experiment_id)
        chains = run_chains(store, [r["run_id"] for r in view.runs])
    experiment, rows, floors = view.experiment, view.runs, view.floor
    if result.resumed_runs:
        note(
            f"resumed experiment {result.experiment_id}: {format_counted(result.resumed_runs, 'run')} "
            f"{'was' if result.resumed_runs == 1 else 'were'} already stored, "
            f"{result.new_runs} measured now"
        )
    written = None
    if report:
        from lowtail.experiment.page import write_experiment_report

        written = write_experiment_report(db, result.experiment_id, report, verdict=exp.verdict)
    shown = show_experiment(experiment, rows, floors, exp.verdict, json_out, chains)
    if not json_out:
        note(f"stored as experiment {result.experiment_id} in {db}")
        if written:
            note(f"report: {written.resolve().as_uri()}")
    if shown.untrustworthy is not None:
        warn(shown.untrustworthy)  # the last line: why exit 3, and what to change
    raise typer.Exit(strict_exit(shown.code, shown.statuses, strict, json_out))


# How `lowtail run --json` names the run-row keys it does not print as they are: the DuT's
# name and kind as the experiment file gives them; the figures and latency columns not at all
# (its `latency_ns` gives them, as `lowtail analyze --json` does).
_PRINTED_AS = {"dut_name": "dut", "dut_kind": "kind"}
_NOT_PRINTED = frozenset({"figures", *(latency_column(k) for k in LATENCY_FIGURES)})


def run_json(r: RunRow, floors: Floor, verdict: Verdict) -> dict[str, object]:
    """One run as `lowtail run --json` prints it: every key of a stored run (`RunRow`, the one
    definition: a column added there is printed here), its latency figures as `lowtail analyze
    --json` gives them, its verdict and its calibration floor."""
    figures = r.get("figures")
    floor = floors.get((r["rate_pps"], r["frame_size"], r["burst"]))
    printed: dict[str, object] = {
        _PRINTED_AS.get(key, key): r.get(key) for key in RunRow.__annotations__ if key not in _NOT_PRINTED
    }
    return printed | {
        "latency_ns": figures["latency_ns"] if figures else None,
        "verdict": verdict.judge(r).as_dict(),
        "degraded_reasons": r.get("degraded_reasons") or [],
        # What became of the packets an IPS's rule matches (also under "traffic"), said at the top.
        "matching": (r.get("traffic") or {}).get("matching"),
        "calibration_floor": None
        if floor is None or r["calibration"]
        else {"run_id": floor["run_id"], "latency_ns": latency_figures_of(floor)},
    }


def _axes_beside_dut(rows: Sequence[Mapping[str, Any]]) -> list[axes.Axis]:
    """The axes that vary among the runs, each a column after the DuT's name: all but the
    name, the kind (the name's), the rate (always a column) and virtualization (marked)."""
    own = (axes.DUT, axes.KIND, axes.RATE, axes.VIRTUALIZATION)
    return [a for a in axes.varying(rows) if a.name not in own]


def runs_table(
    experiment: ExperimentRow,
    rows: Sequence[Mapping[str, Any]],
    floors: Floor,
    verdict: Verdict,
    width: int = 80,
    degraded_said: bool = False,
) -> Group:
    """The runs of an experiment as `lowtail run` prints them: every axis that varies among
    them, the median and the judged percentile beside the floor at it, the verdict; under
    the table why every run that did not plainly pass was judged as it was. Within `width`
    columns: `sent`, `max` and then the median are left out where they do not fit. With
    `degraded_said` (the caller says what degraded the runs once, grouped: degraded_lines),
    the notes leave it out: a degraded PASS needs no note, the others only their reason."""
    judged = verdict.judged
    median = percentiles.by_key("p50")

    def floor_of(r: Mapping[str, Any]) -> str:
        floor = floors.get((r["rate_pps"], r["frame_size"], r["burst"]))
        return "" if r["calibration"] else "–" if floor is None else format_ns(latency_figures_of(floor)[judged.key])

    judgements = [verdict.judge(r) for r in rows]
    columns = [
        Column("run", [str(r["run_id"]) for r in rows]),
        Column(
            "DuT",
            [clocks.marked(marked(r["dut_name"], r.get("virtualization")), r.get("testbed")) for r in rows],
            figure=False,
        ),
        *[
            Column(a.label, [a.show(a.read(r)) if a.present(r) else "" for r in rows], figure=False)
            for a in _axes_beside_dut(rows)
        ],
        Column("rate", [format_rate(r["rate_pps"]) for r in rows]),
        Column("sent", [format_count(r["sent"]) for r in rows], optional=3),
        Column("lost", [tables.run_loss(r) for r in rows]),
        *(
            [Column(median.short, [format_ns(r[latency_column(median.key)]) for r in rows], optional=1)]
            if judged != median
            else []
        ),
        Column(judged.short, [format_ns(r[latency_column(judged.key)]) for r in rows]),
        Column("max", [format_ns(r["lat_max_ns"]) for r in rows], optional=2),
        Column(f"floor\n{judged.short}", [floor_of(r) for r in rows]),
        Column("verdict", [j.label for j in judgements], figure=False),
    ]
    t = columns_table(
        f"experiment {experiment['experiment_id']} · {experiment['name']} · verdict: {verdict.describe()}",
        fit_columns(columns, width),
    )
    lines = _judgement_notes(rows, judgements, degraded_said)
    if not floors and not all(r["calibration"] for r in rows):
        lines.append(Text("no floor: the experiment has no calibration and names none (--calibration ID)"))
    matched = matching_table(rows, width)
    return Group(t, *lines, *((Text(""), matched) if matched is not None else ()))


def _judgement_notes(
    rows: Sequence[Mapping[str, Any]], judgements: Sequence[Judgement], degraded_said: bool
) -> list[Text]:
    """Why each run that did not plainly pass was judged as it was (`runs_table`); runs judged
    alike for the same reason share one note."""
    notes: dict[str, list[str]] = {}
    for r, judgement in zip(rows, judgements):
        if judgement.status not in (Status.FLOOR, Status.PASS) or (judgement.degraded and not degraded_said):
            why = judgement.reason if degraded_said else judgement.explanation
            notes.setdefault(f"({judgement.label}): {why}", []).append(str(r["run_id"]))
    return [Text(f"run{'s' if len(ids) > 1 else ''} {', '.join(ids)} {why}") for why, ids in notes.items()]


def matching_table(rows: Sequence[Mapping[str, Any]], width: int = 80) -> Table | None:
    """What the IPS did with the packets its rule matches (report/tables.py `matching_table`),
    as the terminal shows it; None when no run marked packets."""
    found = tables.matching_table(rows)
    if found is None:
        return None
    header, cells = found
    # The DuT's own counters, then the medians, give way first on a narrow terminal.
    optional = {"marked (whole run)": 2, "alerts": 2, "blocked": 2, "p50 matched": 1, "p50 other": 1}
    columns = [
        Column(h.replace(" ", "\n", 1) if h.startswith("p") or "(" in h else h, [row[i] for row in cells],
               figure=h != "action", optional=optional.get(h, 0))
        for i, h in enumerate(header)
    ]  # fmt: skip
    return columns_table(tables.MATCHING_TITLE, fit_columns(columns, width))


@app.command(
    help="Run a latency experiment: every combination of the file's lists, each stored with its "
    "analysis, on the file's [testbed] (network namespaces and veth links by default, or your own "
    "interfaces, or LoadGen, DuT and timestamper hosts reached by SSH); DuTs in sequence with `chain = [...]`, "
    "each hop measured and the verdict on the whole chain (docs/chains.md). Without FILE, the embedded "
    "default experiment. Interrupted experiments resume where they stopped."
)
def run(
    file: Path | None = typer.Argument(None, help="Experiment file (TOML) [default: the embedded default]."),
    db: Db = DEFAULT_DB,
    data_dir: Path | None = typer.Option(None, help=_DATA_HELP),
    report: Path | None = typer.Option(None, help="Also write the experiment's HTML report to this file."),
    fresh: bool = typer.Option(
        False, "--fresh", help="Start a new experiment even if an unfinished one of this file exists."
    ),
    print_default: bool = typer.Option(
        False, "--print-default", help="Print the embedded default experiment file and exit."
    ),
    print_example: str | None = typer.Option(
        None,
        metavar="NAME",
        help="Print an example experiment file and exit: ips (the 5G QoS study's Suricata IPS experiment), "
        "chain (a firewall, an IPS and a forwarder in sequence, a capture on every link).",
    ),
    calibration: int | None = typer.Option(
        None, help=_CALIBRATION_HELP + " [default: the file's `calibration`, else this experiment's own]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON (one object per run)."),
    strict: Strict = False,
) -> None:
    """`lowtail run`."""
    from lowtail.experiment import spec

    if print_default:
        out.file.write(spec.default_text())
        return
    if print_example is not None:
        out.file.write(spec.example_text(print_example))
        return
    exp = spec.load(file)
    if calibration is not None:
        exp = spec.with_calibration(exp, calibration)
    _sweep(exp, db, data_dir, fresh, json_out, report, strict)


@app.command(
    help="Measure the testbed's own noise floor: the experiment's traffic over a plain veth wire, "
    "no DuT. Reports show it beside every result."
)
def calibrate(
    file: Path | None = typer.Argument(
        None, help="Experiment file whose traffic to use [default: the embedded default]."
    ),
    db: Db = DEFAULT_DB,
    data_dir: Path | None = typer.Option(None, help=_DATA_HELP),
    report: Path | None = typer.Option(None, help="Also write the HTML report to this file."),
    fresh: bool = typer.Option(
        False, "--fresh", help="Start anew even if an unfinished calibration of this file exists."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON (one object per run)."),
) -> None:
    """`lowtail calibrate`."""
    from lowtail.experiment import spec

    exp = spec.load(file)
    if exp.testbed.kind != "namespaces":
        raise UserError(
            f"{exp.source}: `lowtail calibrate` measures lowtail's own veth wire; this experiment runs on "
            f"{exp.testbed.kind} wiring, whose floor is a run with a cable (or a loop) as an external DuT"
        )
    exp = dataclasses.replace(
        exp, name=f"{exp.name} (calibration)", duts=[], calibrate=True, raw=exp.raw | {"calibration_only": True}
    )
    _sweep(exp, db, data_dir, fresh, json_out, report, strict=False)  # floors are not verdicts


@experiment_app.command("list", help="List stored experiments, newest first.")
def list_experiments(
    db: Db = DEFAULT_DB,
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


@experiment_app.command(
    "show",
    help="Show a stored experiment (an id, or 'latest') as `lowtail run` ended it: its runs, the verdict per "
    "device, what degraded or invalidated runs; exit 3 when any run is invalid or degraded.",
)
def experiment_show(
    experiment: str = typer.Argument("latest", help="Experiment id or 'latest'."),
    db: Db = DEFAULT_DB,
    budget_ns: Annotated[
        int | None,
        duration_info(
            "--budget", None, "Latency budget of the verdict, e.g. 350us [default: the experiment file's, else 1ms]."
        ),
    ] = None,
    percentile: str | None = typer.Option(
        None, help="...at this percentile, e.g. 99.99 [default: the experiment file's, else 99.999]."
    ),
    calibration: int | None = typer.Option(
        None, help=_CALIBRATION_HELP + " [default: the one the experiment names, else its own]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the runs as JSON (one object per run)."),
    strict: Strict = False,
) -> None:
    """`lowtail experiment show`."""
    from lowtail.store import open_store
    from lowtail.store import runs as runstore
    from lowtail.store.chains import run_chains
    from lowtail.verdict.judge import stored_verdict

    with open_store(db, read_only=True) as store:
        stored = runstore.experiment(store, experiment)
        eid = stored["experiment_id"]
        if calibration is not None:
            runstore.check_calibration(store, calibration)
        source = calibration if calibration is not None else runstore.calibration_source(store, eid)
        floors = runstore.calibration_floor(store, eid, source)
        rows = runstore.runs(store, eid)
        chains = run_chains(store, [r["run_id"] for r in rows])
    verdict = stored_verdict(stored["spec"], verdict_request(budget_ns, percentile))
    shown = show_experiment(stored, rows, floors, verdict, json_out, chains)
    if shown.untrustworthy is not None:
        warn(shown.untrustworthy)
    raise typer.Exit(strict_exit(shown.code, shown.statuses, strict, json_out))


@experiment_app.command("report", help="Write the HTML report of a stored experiment (an id, or 'latest').")
def experiment_report(
    experiment: str = typer.Argument("latest", help="Experiment id or 'latest'."),
    db: Db = DEFAULT_DB,
    output: Path | None = typer.Option(
        None, "--output", "-o", help="HTML file [default: lowtail-experiment-<id>.html]."
    ),
    budget_ns: Annotated[
        int | None,
        duration_info(
            "--budget", None, "Latency budget of the verdict, e.g. 350us [default: the experiment file's, else 1ms]."
        ),
    ] = None,
    percentile: str | None = typer.Option(
        None, help="...at this percentile, e.g. 99.99 [default: the experiment file's, else 99.999]."
    ),
    max_loss: int | None = typer.Option(
        None, min=0, help="...with at most this many packets lost [default: the experiment file's, else 0]."
    ),
    confidence: str | None = typer.Option(
        None,
        help="Confidence level of the verdict's bounds and the intervals shown: 95, 95% or 0.95 "
        "[default: the experiment file's verdict's, else 95].",
    ),
    calibration: int | None = typer.Option(
        None, help=_CALIBRATION_HELP + " [default: the one the experiment names, else its own]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail experiment report`."""
    from lowtail.experiment.page import write_experiment_report

    if output is not None:  # before any work: a FIFO, device or directory is refused at once
        check_output(output, "--output")
    request = verdict_request(budget_ns, percentile, max_loss, confidence)
    path = write_experiment_report(db, experiment, output, request=request, calibration=calibration)
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
