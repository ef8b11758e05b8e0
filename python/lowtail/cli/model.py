"""`lowtail model ...`: overload (R_max), the knee of a sweep, the EVT tail model,
interrupt aliasing, and the discrete-event device simulation. Each command reads its options,
calls the model's `*_and_store` (models/) and shows the result: the orchestration is the
library's, shared with `lowtail.open()`'s Database."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from lowtail.cli._app import app
from lowtail.cli._options import Db, SpecType, duration_info, label_info, unit_info
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, byte_progress, note, out, print_json, warn
from lowtail.core import series
from lowtail.core.errors import UserError
from lowtail.core.percentiles import quantile_of_percent
from lowtail.core.schema import INT64_MAX
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.models.document import InterruptSource, ServiceTime
    from lowtail.models.overload import InterruptLoad
    from lowtail.store.db import Store

model_app = typer.Typer(
    help="Predict overload, model the latency tail (EVT), simulate interrupt aliasing and "
    "devices. Each command works on stored runs or on files, prints tables or --json, "
    "stores its result and can draw its plot.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(model_app, name="model")

JSON_HELP = "Print one JSON document instead of tables."
ModelLabel = Annotated[str | None, label_info("A name for the stored result.")]
PLOT_HELP = "Write the plot to this PNG file."


@contextmanager
def _store(db: Path, needed: bool = True, reads: bool = True) -> Iterator[Store | None]:
    """The database, opened for writing (models store their results), or None when
    neither reading nor storing needs it; when the model `reads` what is stored, one that
    exists (a model of a series file may make the database it stores into)."""
    if not needed:
        yield None
        return
    from lowtail.store import open_store

    with open_store(db, create=not reads) as s:
        yield s


# A model's document: each command's is its own TypedDict (lowtail.models.document).
Doc = TypeVar("Doc", bound=Mapping[str, Any])


def _plot(figure: Callable[[Doc], Any], doc: Doc, path: Path | None) -> None:
    if path is None:
        return
    from lowtail.models.page import save_figure

    if path.suffix.lower() != ".png":
        raise UserError(f"--plot {path}: the file name must end in .png")
    save_figure(figure(doc), path)
    note(f"wrote {path}")


def _finish(
    doc: Doc,
    json_out: bool,
    render: Callable[[Doc], None],
    db: Path,
    not_credible: Sequence[str] = (),
) -> None:
    stored_id = doc.get("model_id")
    if json_out:
        print_json(doc)
    else:
        render(doc)
        if stored_id is not None:
            note(f"stored as model {stored_id} in {db}")
    for reason in not_credible:
        warn(f"not credible: {reason}")
    if doc.get("partial"):
        warn("partial result: " + "; ".join(doc.get("partial_reasons", [])))
        raise typer.Exit(EXIT_PARTIAL)
    raise typer.Exit(EXIT_OK)


def _overload_irq(text: str) -> InterruptLoad:
    from lowtail.models.overload import parse_interrupt

    return parse_interrupt(text)


def _service(text: str) -> ServiceTime:
    from lowtail.models.simulate import parse_service

    return parse_service(text)


def _simulate_irq(text: str) -> InterruptSource:
    from lowtail.models.simulate import parse_irq

    return parse_irq(text)


# -- overload --------------------------------------------------------------------------


@model_app.command(
    help="R_max = (1 s − d_Σ) / t_CPU, the highest rate the core keeps up with (NOMS 2020, "
    "section VI). t_CPU is the application's median latency minus the bare forwarder's "
    "(2·t_transfer); d_Σ sums rate × duration over the interrupts on the core. Give the "
    "medians directly or as stored runs."
)
def overload(
    t_transfer_ns: Annotated[
        int | None,
        duration_info("--t-transfer", None, "Median latency of the bare forwarder (2·t_transfer), e.g. 3.1us."),
    ] = None,
    t_e2e_ns: Annotated[
        int | None, duration_info("--t-e2e", None, "Median latency of the application, e.g. 14.5us.")
    ] = None,
    baseline_run: int | None = typer.Option(None, help="Take 2·t_transfer from this stored run's median."),
    app_run: int | None = typer.Option(
        None, help="Take t_e2e from this stored run's median (and link the result to its experiment and DuT)."
    ),
    statistic: str = typer.Option(
        "p50",
        help="With stored runs: p50 (the URLLC studies' median) or min (the uncontended path, when a busy host queues even the lowest rate).",
    ),
    irqs: list[Any] = typer.Option(
        [],
        "--irq",
        click_type=SpecType(_overload_irq, ("N:10.9us", "166.7Hz:N", "loc=N:5.5us")),
        help="RATE:DURATION of one interrupt kind on the core, e.g. 166.7Hz:10.9us or loc=250Hz:5.5us; repeatable.",
    ),
    irq_profile: Path | None = typer.Option(
        None,
        help="Interrupt profile as JSON: what `lowtail noise --json` prints, or a list of {rate_hz, duration_ns, kind}.",
    ),
    irq_cpu: int | None = typer.Option(
        None, help="The core of a `lowtail noise` profile to take [default: its only one]."
    ),
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: ModelLabel = None,
    plot: Path | None = typer.Option(None, help=PLOT_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model overload`: R_max from two medians and the interrupt load."""
    from lowtail.cli._model_render import overload_lines
    from lowtail.models.overload import OverloadOptions, overload_and_store, read_interrupt_profile
    from lowtail.models.page import overload_figure

    irqs = list(irqs) + (read_interrupt_profile(irq_profile, irq_cpu) if irq_profile else [])
    opts = OverloadOptions(t_transfer_ns, t_e2e_ns, baseline_run, app_run, statistic, tuple(irqs))
    opts.check()
    with _store(db, store or opts.reads_runs, reads=opts.reads_runs) as s:
        doc = overload_and_store(s, opts, save=store, label=label)
    _plot(overload_figure, doc, plot)
    _finish(doc, json_out, overload_lines, db)


# -- knee ------------------------------------------------------------------------------


@model_app.command(
    help="Find the knee of a stored rate sweep: the first rate at which the DuT is overloaded "
    "(loss above --loss-limit, or a 99th percentile above --growth times that of the lowest "
    "rate), and put the predicted R_max beside it in the latency-versus-rate plot."
)
def knee(
    experiment_ref: str = typer.Argument(
        "latest",
        metavar="EXPERIMENT",
        help="Experiment id, or 'latest': the newest with a valid run of a DuT (see `lowtail experiment list`).",
    ),
    dut: str | None = typer.Option(None, help="Only this DuT of the experiment [default: each]."),
    loss_limit: float = typer.Option(1.0, min=0.0, help="Loss in percent above which a run is overloaded."),
    growth: float = typer.Option(
        10.0, min=1.0, help="Overloaded when the 99th percentile exceeds this multiple of the lowest rate's."
    ),
    r_max: Annotated[
        float | None,
        unit_info(
            "--r-max",
            "rate",
            None,
            "Predicted R_max, e.g. 80kpps [default: the latest stored overload model of the experiment and DuT].",
            whole=False,
        ),
    ] = None,
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the result in the database."),
    plot: Path | None = typer.Option(
        None, help="Write the latency-versus-rate plot here (PNG; one DuT, or DUT inserted before the suffix)."
    ),
    report: Path | None = typer.Option(None, help="Also write an HTML page with the table and the plot."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model knee`: the first overloaded rate of a stored sweep, per DuT."""
    from lowtail.cli._model_render import knee_lines
    from lowtail.models.knee import KneeOptions, knee_and_store
    from lowtail.models.page import latency_vs_rate_figure, write_knee_report

    if report and not store:
        raise UserError("--report needs the result stored (drop --no-store): reports show stored results")
    with _store(db) as s:
        assert s is not None
        knees = knee_and_store(s, KneeOptions(experiment_ref, dut, loss_limit, growth, r_max), save=store)
    for doc in knees.documents:
        one = (
            plot
            if plot is None or len(knees.documents) == 1
            else plot.with_name(f"{plot.stem}-{doc['dut']}{plot.suffix}")
        )
        _plot(lambda d: latency_vs_rate_figure(d, f"{d['dut']}: latency versus rate"), doc, one)
    if report:
        note(f"wrote {write_knee_report(db, knees.experiment_id, dut, report)}")
    if json_out:
        print_json(knees.documents)
        return
    for doc in knees.documents:
        knee_lines(doc, db)


# -- evt -------------------------------------------------------------------------------


@model_app.command(
    help="Extreme-value model of the latency tail (Perf. Eval. 2024, section 6): peaks over threshold, a "
    "generalized Pareto fit by maximum likelihood with intervals, the threshold chosen by "
    "Jensen–Shannon divergence, return levels per packets and per wall-clock horizon, the "
    "upper end of a bounded tail, validation on the later part of the series, ADF/KPSS. INPUT is "
    f"a Parquet series ({series.PRE_TS}, {series.LATENCY} in time order), a run id (12 or run:12) or "
    "analysis:ID."
)
def evt(
    input: str = typer.Argument(..., help="Parquet series, run id, or analysis:ID."),
    fit_fraction: float = typer.Option(
        20.0, help="Percent of the series (the first part) the model is fitted on; the rest validates it."
    ),
    thresholds: str = typer.Option(
        "99.5,99.9,99.95,99.99,99.999", help="Candidate thresholds, as percentiles of the fit part."
    ),
    min_exceedances: int = typer.Option(50, help="Fewest samples above a threshold for a fit."),
    js_bins: int = typer.Option(20, help="Equal-probability bins for the Jensen–Shannon divergence."),
    confidence: float = typer.Option(95.0, help="Confidence level of the intervals, in percent."),
    decluster: int = typer.Option(1, help="Validation exceedances at most this many packets apart count as one event."),
    rate: Annotated[
        float | None,
        unit_info(
            "--rate",
            "rate",
            None,
            "Packet rate for the wall-clock horizons, e.g. 100kpps [default: measured from the series].",
            whole=False,
        ),
    ] = None,
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: ModelLabel = None,
    plot: Path | None = typer.Option(None, help="Write the return-level and QQ plots to this PNG file."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model evt`: the extreme-value model of a series' tail."""
    from lowtail.cli._model_render import evt_tables
    from lowtail.models.evt import EvtOptions, evt_and_store, parse_thresholds
    from lowtail.models.page import evt_figure
    from lowtail.store.models import stored_input

    try:
        fit_quantile = quantile_of_percent(fit_fraction)
    except ValueError:
        raise UserError(f"--fit-fraction {fit_fraction}: not a finite percentage") from None
    opts = EvtOptions(
        fit_fraction=fit_quantile,
        thresholds=parse_thresholds(thresholds),
        min_exceedances=min_exceedances,
        js_bins=js_bins,
        confidence=confidence / 100.0,
        decluster_packets=decluster,
    )
    reads = stored_input(input) is not None  # a mistyped file is said before any database is opened
    with (
        _store(db, store or reads, reads=reads) as s,
        byte_progress("reading the series") as progress,
    ):
        doc = evt_and_store(s, input, opts, rate_pps=rate, save=store, label=label, on_progress=progress)
    _plot(evt_figure, doc, plot)
    _finish(doc, json_out, evt_tables, db, not_credible=doc.get("warnings", []))


# -- flows -----------------------------------------------------------------------------


@model_app.command(
    help="Each flow's latency tail by extreme value theory (after Helm, Wiedner, Carle: Flow-level tail "
    "latency estimation and verification based on extreme value theory, CNSM 2022): every flow of a "
    f"matched series ({series.FLOW} column) fitted from its exceedances on its first packets, checked "
    "against its held-out packets; flows whose data cannot support a tail model are named. INPUT is a "
    "Parquet series, a run id (12 or run:12) or analysis:ID."
)
def flows(
    input: str = typer.Argument(..., help="Parquet series, run id, or analysis:ID."),
    fit_fraction: float = typer.Option(50.0, help="Percent of each flow's packets (the first) the model is fitted on."),
    # A percentile, named so (a bare `--threshold 99` would read as a latency: docs/units).
    threshold: str = typer.Option(
        "99", "--threshold-percentile", help="The threshold, as a percentile of each flow's fitted packets."
    ),
    min_exceedances: int = typer.Option(30, help="Fewest exceedances a flow's fit is made from."),
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: ModelLabel = None,
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model flows`: each flow's tail, estimated and verified."""
    from lowtail.cli._model_render import flow_tails_table
    from lowtail.models.flow_evt import FlowEvtOptions, flow_tails_and_store
    from lowtail.store.models import stored_input

    try:
        fit_quantile, threshold_quantile = quantile_of_percent(fit_fraction), quantile_of_percent(threshold)
    except ValueError as e:
        raise UserError(f"--fit-fraction / --threshold-percentile: {e}") from None
    opts = FlowEvtOptions(
        fit_fraction=float(fit_quantile), threshold=threshold_quantile, min_exceedances=min_exceedances
    )
    reads = stored_input(input) is not None
    with _store(db, store or reads, reads=reads) as s:
        doc = flow_tails_and_store(s, input, opts, save=store, label=label)
    _finish(doc, json_out, flow_tails_table, db)


# The options of `lowtail model aliasing` and `lowtail model simulate`, each declared once;
# with Annotated the default follows `=` in the signature.
StoreResult = Annotated[bool, typer.Option(help="Store the result in the database.")]
Plot = Annotated[Path | None, typer.Option(help=PLOT_HELP)]
JsonOut = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


# -- aliasing --------------------------------------------------------------------------

AliasingRate = Annotated[
    float | None, unit_info("--rate", "rate", None, "Packet rate [default: 10kpps, or the run's].", whole=False)
]
IrqRate = Annotated[
    float | None,
    unit_info(
        "--irq-rate",
        "frequency",
        None,
        "Interrupt rate (nominal, with --run) [default: 250Hz, or the run's timer from its samples].",
    ),
]
IrqDurations = Annotated[
    Any,
    unit_info(
        "--irq-durations",
        "duration",
        None,
        "Durations of successive interrupts, cycled [default: 5.5us,8.2us]; against a run with interrupt "
        "samples, two durations are the timer's alone and with its companion [default: fitted to the run].",
        many=True,
    ),
]
AliasingDuration = Annotated[
    int | None, duration_info("--duration", None, "Simulated time [default: 30s, or the run's].")
]
AliasingBaseLatency = Annotated[
    int | None,
    duration_info("--base-latency", None, "Latency of an undisturbed packet [default: 3.1us, or the run's median]."),
]
AliasingService = Annotated[
    int, duration_info("--service", 0, "The packet's own processing time (an interrupt starting during it delays it).")
]
Phase = Annotated[int, duration_info("--phase", 0, "Time of the first interrupt after the first packet.")]
AliasingWorst = Annotated[int, typer.Option(min=1, help="How many worst events to keep.")]
Jitter = Annotated[
    int,
    duration_info("--jitter", 100, "Mean of an exponential noise added to every packet (the body's band in the plot)."),
]
OverlayRun = Annotated[str | None, typer.Option("--run", help="A stored run (12, run:12) or analysis:ID to overlay.")]
Fit = Annotated[bool, typer.Option(help="With --run: fit the interrupt frequency and phase to the run.")]
MaxPpm = Annotated[float, typer.Option(help="With --fit: search the interrupt clock within ± this many ppm.")]


@model_app.command(
    help="Simulate periodic interrupts against constant-rate traffic and print the worst-N "
    "pattern they make (Commun. Mag. 2020, §V-B; NOMS 2020, §V-C). With --run, the interrupt clock is fitted "
    "to the run's delayed packets and the model is drawn over its worst events; a run with interrupt samples "
    "(its own, or an imported recording) gives the interrupt cycle on the DuT's CPU: the timer's rate and the "
    "kinds that come with every k-th tick (e.g. timer, timer, timer + IRQ work), their durations fitted unless "
    "given. The slopes of the measured and modelled lines are printed side by side."
)
def aliasing(
    rate: AliasingRate = None,
    irq_rate: IrqRate = None,
    irq_durations: IrqDurations = None,
    duration_ns: AliasingDuration = None,
    base_latency_ns: AliasingBaseLatency = None,
    service_ns: AliasingService = 0,
    phase_ns: Phase = 0,
    worst: AliasingWorst = 5000,
    jitter_ns: Jitter = 100,
    run: OverlayRun = None,
    fit: Fit = True,
    max_ppm: MaxPpm = 500.0,
    db: Db = DEFAULT_DB,
    store: StoreResult = True,
    plot: Plot = None,
    json_out: JsonOut = False,
) -> None:
    """`lowtail model aliasing`: the worst-N pattern of interrupts against constant-rate traffic."""
    from lowtail.cli._model_render import aliasing_lines
    from lowtail.models.aliasing import AliasingOptions, AliasingSpec, aliasing_and_store
    from lowtail.models.page import aliasing_figure

    spec = AliasingSpec(
        service_ns=float(service_ns),
        irq_phase_ns=float(phase_ns),
        worst=worst,
        jitter_ns=float(jitter_ns),
    )
    opts = AliasingOptions(
        spec,
        run,
        fit,
        max_ppm,
        rate_pps=float(rate) if rate is not None else None,
        duration_s=duration_ns / 1e9 if duration_ns is not None else None,
        base_latency_ns=float(base_latency_ns) if base_latency_ns is not None else None,
        irq_rate_hz=irq_rate,
        irq_durations_ns=[float(d) for d in irq_durations] if irq_durations is not None else None,
    )
    with _store(db, store or run is not None, reads=run is not None) as s:
        doc = aliasing_and_store(s, opts, save=store)
    _plot(aliasing_figure, doc, plot)
    _finish(doc, json_out, aliasing_lines, db)


# -- simulate --------------------------------------------------------------------------

SimulateRates = Annotated[
    Any,
    unit_info(
        "--rate",
        "rate",
        None,
        "Offered rate(s), e.g. 10kpps or 10kpps,50kpps [default: 10kpps].",
        many=True,
        whole=False,
    ),
]
Packets = Annotated[
    int | None,
    # The simulation's own check names its limit (100 million); past 64 bits it never sees the number.
    typer.Option(
        min=1, max=INT64_MAX, help="Packets per case [default: 100000, with --run: the run's, at most 2 million]."
    ),
]
SimulateDuration = Annotated[
    int | None, duration_info("--duration", None, "Instead of --packets: simulated time per case, e.g. 10s.")
]
Arrivals = Annotated[str, typer.Option(help="cbr (constant rate) or poisson.")]
Burst = Annotated[str | None, typer.Option(help="Packets per burst, or a list: 1,4,16,32,64 [default: 1].")]
BurstGap = Annotated[int, duration_info("--burst-gap", 0, "Gap between packets of a burst (wire time of one frame).")]
Service = Annotated[
    Any,
    typer.Option(
        click_type=SpecType(_service, ("N", "exp:N", "uniform:10us:N", "lognormal:N:0.3")),
        help="CPU time per packet: 20us, const:20us, exp:20us, uniform:10us:30us, normal:20us:2us, "
        "lognormal:20us:0.3 [default: 2us].",
    ),
]
Batch = Annotated[str | None, typer.Option(help="Batch size(s) [default: 1].")]
BatchOverhead = Annotated[int, duration_info("--batch-overhead", 0, "Fixed cost of each poll that takes a batch.")]
Queue = Annotated[
    int,
    typer.Option(
        min=0, max=INT64_MAX, help="Receive queue capacity in packets (0 = unbounded); arrivals beyond it are dropped."
    ),
]
SimulateBaseLatency = Annotated[
    int | None,
    duration_info(
        "--base-latency",
        None,
        "Latency outside the core (wire, NIC, both directions) [default: 0; with --run: fitted at the median].",
    ),
]
SimulateIrqs = Annotated[
    list[Any],
    typer.Option(
        "--irq",
        click_type=SpecType(_simulate_irq, ("N:5.5us", "250Hz:N", "250Hz:5.5us,N", "250Hz:5us@N")),
        help="Interrupts: RATE:DUR[,DUR...][@PHASE], e.g. 250Hz:5.5us,8.2us; poisson@1kHz:2us; repeatable.",
    ),
]
Seed = Annotated[int, typer.Option(help="Random seed.")]
SpecFile = Annotated[
    Path | None,
    typer.Option("--spec", help="A JSON model spec (its keys: see --show-spec); options given override it."),
]
ShowSpec = Annotated[bool, typer.Option("--show-spec", help="Print the model's fields and defaults as JSON and exit.")]
SimulateRun = Annotated[int | None, typer.Option("--run", help="Compare with this stored lowtail-fwd run.")]
Overhead = Annotated[
    int, duration_info("--overhead", 0, "With --run: per-packet cost of the forwarder besides work_ns.")
]
BaselineRun = Annotated[
    int | None, typer.Option(help="With --run: take the base latency from this run's median (2·t_transfer).")
]
SimulateExport = Annotated[
    Path | None,
    typer.Option(help=f"Write the first case's series ({series.columns_text()}) to FILE.parquet or FILE.csv."),
]


@model_app.command(
    help="Discrete-event model of a device: arrivals (constant rate or Poisson, bursts), a "
    "service-time distribution, a batch policy that releases a batch only when all of it is "
    "processed, interrupts, and a bounded queue (drops). Predicts the latency distribution "
    "and loss; lists in --rate/--burst/--batch simulate every combination. With --run, the "
    "model of a stored lowtail-fwd run (its rate, burst, work_ns, batch) is compared with "
    "what was measured, percentile by percentile."
)
def simulate(
    rates: SimulateRates = None,
    packets: Packets = None,
    duration_ns: SimulateDuration = None,
    arrivals: Arrivals = "cbr",
    burst: Burst = None,
    burst_gap_ns: BurstGap = 0,
    service: Service = None,
    batch: Batch = None,
    batch_overhead_ns: BatchOverhead = 0,
    queue: Queue = 0,
    base_latency_ns: SimulateBaseLatency = None,
    irqs: SimulateIrqs = [],  # noqa: B006 (typer's default, read and never changed)
    seed: Seed = 1,
    spec_file: SpecFile = None,
    show_spec: ShowSpec = False,
    run: SimulateRun = None,
    overhead_ns: Overhead = 0,
    baseline_run: BaselineRun = None,
    export: SimulateExport = None,
    db: Db = DEFAULT_DB,
    store: StoreResult = True,
    label: ModelLabel = None,
    plot: Plot = None,
    json_out: JsonOut = False,
) -> None:
    """`lowtail model simulate`: the discrete-event model of a device, optionally against a run."""
    from lowtail.cli._model_render import simulate_tables
    from lowtail.models import simulate as sim
    from lowtail.models.page import simulate_figure

    if show_spec:
        print_json(sim.defaults())
        return
    base = sim.device_spec(
        spec_file,
        arrivals=arrivals,
        burst_gap_ns=float(burst_gap_ns),
        seed=seed,
        batch_overhead_ns=float(batch_overhead_ns),
        queue_capacity=queue,
        service=service,
        interrupts=list(irqs),
        base_latency_ns=base_latency_ns,
    )
    cases = sim.sweep_axes(rates, burst, batch)
    opts = sim.SimulateOptions(base, *cases, duration_ns, packets, run, float(overhead_ns), baseline_run, export)
    with _store(db, store or run is not None, reads=run is not None) as s:
        doc = sim.simulate_and_store(s, opts, save=store, label=label)
    if export is not None:
        note(f"wrote {export}")
    _plot(simulate_figure, doc, plot)
    _finish(doc, json_out, simulate_tables, db)


# -- stored results ------------------------------------------------------------------------


@model_app.command("list", help="List stored model results, newest first.")
def list_(
    kind: str | None = typer.Option(None, help="Only this kind: overload, knee, evt, aliasing, simulate."),
    limit: int = typer.Option(50, min=1, max=1_000_000, help="How many to show."),
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model list`."""
    from lowtail.store import open_store
    from lowtail.store.models import list_models

    with open_store(db, read_only=True) as s:
        rows = list_models(s, kind, limit)
    if json_out:
        print_json([{k: v for k, v in r.items() if k != "result"} for r in rows])
        return
    from lowtail.cli._model_render import table

    out.print(
        table(
            "model results",
            ["id", "created", "kind", "source", "label", "partial"],
            [
                [
                    str(r["model_id"]),
                    f"{r['created_at']:%Y-%m-%d %H:%M}",
                    r["kind"],
                    r["source"] or "",
                    r["label"] or "",
                    "yes" if r["partial"] else "",
                ]
                for r in rows
            ],
        )
    )


@model_app.command(help="Write an HTML page of one stored model result (an id, or 'latest').")
def report(
    model: str = typer.Argument("latest", help="Model id or 'latest'."),
    db: Db = DEFAULT_DB,
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file [default: lowtail-model-<id>.html]."),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail model report`."""
    from lowtail.models.page import write_model_report

    path = write_model_report(db, model, output or Path(f"lowtail-model-{model}.html"))
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
