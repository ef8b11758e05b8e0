"""`lowtail model ...`: overload (R_max), the knee of a sweep, the EVT tail model,
interrupt aliasing, and the discrete-event device simulation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from lowtail import percentiles, series
from lowtail.cli._app import app
from lowtail.cli._options import db_option
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, byte_progress, note, out, print_json, warn
from lowtail.errors import UserError
from lowtail.percentiles import quantile_of_percent
from lowtail.report.tables import evt_tail_text
from lowtail.units import format_ns, format_ns_interval, format_p_value, format_percent, format_rate, parse_duration_ns

model_app = typer.Typer(
    help="Predict overload, model the latency tail (EVT), simulate interrupt aliasing and "
    "devices. Each command works on stored runs or on files, prints tables or --json, "
    "stores its result and can draw its plot.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(model_app, name="model")

JSON_HELP = "Print one JSON document instead of tables."
PLOT_HELP = "Write the plot to this PNG file."


@contextmanager
def _store(db: Path, needed: bool = True) -> Iterator[Any]:
    """The database, opened for writing (models store their results), or None when
    neither reading nor storing needs it."""
    if not needed:
        yield None
        return
    from lowtail.store import open_store

    with open_store(db) as s:
        yield s


def _save(store: Any, kind: str, inputs: dict[str, Any], result: dict[str, Any], **keys: Any) -> int | None:
    if store is None:
        return None
    from lowtail.store.models import save_model

    return save_model(store, kind, inputs, result, **keys)


def _plot(fig_fn, doc: dict[str, Any], path: Path | None) -> None:
    if path is None:
        return
    from lowtail.report.models import save_figure

    if path.suffix.lower() != ".png":
        raise UserError(f"--plot {path}: the file name must end in .png")
    save_figure(fig_fn(doc), path)
    note(f"wrote {path}")


def _finish(
    doc: dict[str, Any], json_out: bool, render, stored_id: int | None, db: Path, not_credible: list[str] = ()
) -> None:
    if stored_id is not None:
        doc["model_id"] = stored_id
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


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        t.add_row(*r)
    return t


# -- overload ----------------------------------------------------------------------------


@model_app.command(
    help="R_max = (1 s − d_Σ) / t_CPU, the highest rate the core keeps up with (NOMS 2020, "
    "section VI). t_CPU is the application's median latency minus the bare forwarder's "
    "(2·t_transfer); d_Σ sums rate × duration over the interrupts on the core. Give the "
    "medians directly or as stored runs."
)
def overload(
    t_transfer: str | None = typer.Option(
        None, help="Median latency of the bare forwarder (2·t_transfer), e.g. 3.1us."
    ),
    t_e2e: str | None = typer.Option(None, help="Median latency of the application, e.g. 14.5us."),
    baseline_run: int | None = typer.Option(None, help="Take 2·t_transfer from this stored run's median."),
    app_run: int | None = typer.Option(
        None, help="Take t_e2e from this stored run's median (and link the result to its experiment and DuT)."
    ),
    statistic: str = typer.Option(
        "p50",
        help="With stored runs: p50 (the URLLC studies' median) or min (the uncontended path, when a busy host queues even the lowest rate).",
    ),
    irq: list[str] = typer.Option(
        [],
        "--irq",
        help="RATE_HZ:DURATION of one interrupt kind on the core, e.g. 166.7:10.9us or loc=250:5.5us; repeatable.",
    ),
    irq_profile: Path | None = typer.Option(
        None,
        help="Interrupt profile as JSON: what `lowtail noise --json` prints, or a list of {rate_hz, duration_ns, kind}.",
    ),
    irq_cpu: int | None = typer.Option(
        None, help="The core of a `lowtail noise` profile to take [default: its only one]."
    ),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: str | None = typer.Option(None, help="A name for the stored result."),
    plot: Path | None = typer.Option(None, help=PLOT_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model overload`: R_max from two medians and the interrupt load."""
    from lowtail.models.overload import overload_of_runs, parse_interrupt, read_interrupt_profile
    from lowtail.report.models import overload_figure

    if (t_transfer is None) == (baseline_run is None):
        raise UserError("give the bare forwarder's median as --t-transfer or --baseline-run (one of them)")
    if (t_e2e is None) == (app_run is None):
        raise UserError("give the application's median as --t-e2e or --app-run (one of them)")
    if statistic not in ("p50", "min"):
        raise UserError(f"--statistic {statistic!r}: p50 or min")
    irqs = [parse_interrupt(i) for i in irq] + (read_interrupt_profile(irq_profile, irq_cpu) if irq_profile else [])
    with _store(db, store or baseline_run is not None or app_run is not None) as s:
        doc, keys = overload_of_runs(
            s,
            parse_duration_ns(t_transfer, "us") if t_transfer else None,
            parse_duration_ns(t_e2e, "us") if t_e2e else None,
            baseline_run,
            app_run,
            statistic,
            irqs,
        )
        inputs = {
            "t_transfer": t_transfer,
            "t_e2e": t_e2e,
            "baseline_run": baseline_run,
            "app_run": app_run,
            "statistic": statistic,
            "irq": irq,
            "irq_profile": str(irq_profile) if irq_profile else None,
            "irq_cpu": irq_cpu,
        }
        stored = _save(s if store else None, "overload", inputs, doc, label=label, **keys)
    _plot(overload_figure, doc, plot)

    def render(d: dict[str, Any]) -> None:
        from lowtail.report.tables import overload_table

        out.print(_table("overload model", *overload_table(d)))

    _finish(doc, json_out, render, stored, db)


# -- knee --------------------------------------------------------------------------------


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
    r_max: float | None = typer.Option(
        None, help="Predicted R_max in packets/s [default: the latest stored overload model of the experiment and DuT]."
    ),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    plot: Path | None = typer.Option(
        None, help="Write the latency-versus-rate plot here (PNG; one DuT, or DUT inserted before the suffix)."
    ),
    report: Path | None = typer.Option(None, help="Also write an HTML page with the table and the plot."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model knee`: the first overloaded rate of a stored sweep, per DuT."""
    from lowtail.models.knee import sweep_knees
    from lowtail.report.models import latency_vs_rate_figure

    if report and not store:
        raise UserError("--report needs the result stored (drop --no-store): reports show stored results")
    from lowtail.store import runs as runstore

    with _store(db) as s:
        if experiment_ref == "latest":
            experiment = runstore.latest_swept_experiment(s)
        else:
            experiment = runstore.experiment(s, experiment_ref)["experiment_id"]
        docs = sweep_knees(s, experiment, dut, loss_limit, growth, r_max, save=store)
    if plot:
        for doc in docs:
            target = plot if len(docs) == 1 else plot.with_name(f"{plot.stem}-{doc['dut']}{plot.suffix}")
            _plot(lambda d: latency_vs_rate_figure(d, f"{d['dut']}: latency versus rate"), doc, target)
    if report:
        from lowtail.report.models import knee_section
        from lowtail.report.page import Page
        from lowtail.store import open_store

        with open_store(db, read_only=True) as s:
            page = Page(title=f"lowtail — rate sweep of experiment {experiment}")
            knee_section(page, s, experiment, dut)
        note(f"wrote {page.write(report)}")
    if json_out:
        print_json(docs)
        return
    from lowtail.report.tables import knee_table

    for doc in docs:
        out.print(_table(f"{doc['dut']} (experiment {experiment})", *knee_table(doc)))
        line = (
            f"knee: {format_rate(doc['knee_pps'])} (last rate without overload: "
            f"{format_rate(doc['last_ok_pps']) if doc['last_ok_pps'] else '–'})"
            if doc["knee_pps"] is not None
            else "no overloaded rate in this sweep"
        )
        if doc["r_max_pps"] is not None:
            line += f"; predicted R_max {format_rate(doc['r_max_pps'])}"
        out.print(line)
        if doc.get("model_id") is not None:
            note(f"stored as model {doc['model_id']} in {db}")


# -- evt ---------------------------------------------------------------------------------


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
    rate: float | None = typer.Option(
        None, help="Packet rate for the wall-clock horizons [default: measured from the series]."
    ),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: str | None = typer.Option(None, help="A name for the stored result."),
    plot: Path | None = typer.Option(None, help="Write the return-level and QQ plots to this PNG file."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model evt`: the extreme-value model of a series' tail."""
    from lowtail.models.evt import EvtOptions, evt_of_source, parse_thresholds
    from lowtail.report.models import evt_figure
    from lowtail.store.models import series_source

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
    is_file = Path(input).exists()
    with _store(db, store or not is_file) as s:
        src = series_source(s, input)
        with byte_progress("reading the series") as progress:
            doc = evt_of_source(src, opts, rate_pps=rate, on_progress=progress)
        inputs = {"input": input, "series": src.path, **doc["options"], "rate": rate}
        stored = _save(
            s if store else None,
            "evt",
            inputs,
            doc,
            label=label,
            run_id=src.run_id,
            analysis_id=src.analysis_id,
            source=src.label,
        )
    _plot(evt_figure, doc, plot)

    def render(d: dict[str, Any]) -> None:
        note(
            f"{d['source']}: {d['samples']:,} samples, fit on the first {d['fit_samples']:,}, "
            f"validated on the last {d['validation_samples']:,}"
        )
        rows = [
            [
                f"{t['percentile']:g} %",
                format_ns(t["threshold_ns"]),
                f"{t['exceedances']:,}",
                format_ns(t["sigma_ns"], 1) if t["sigma_ns"] is not None else "–",
                f"{t['xi']:.3f}" if t["xi"] is not None else "–",
                f"{t['xi_ci'][0]:.3f}…{t['xi_ci'][1]:.3f}" if t["xi_ci"] else "–",
                f"{t['js_divergence']:.4g}" if t["js_divergence"] is not None else "–",
                "◀" if t["percentile"] == d["threshold_percentile"] else "",
            ]
            for t in d["thresholds"]
        ]
        out.print(
            _table(
                "thresholds (◀ chosen: lowest Jensen–Shannon divergence)",
                ["threshold", "value", "exceedances", "σ", "ξ", f"ξ {d['confidence'] * 100:g} %", "JS", ""],
                rows,
            )
        )
        for t in d["thresholds"]:
            if t["note"]:
                out.print(f"  {t['percentile']:g} %: {t['note']}")
        tail = evt_tail_text(d)
        out.print(f"tail: {tail}")
        levels = [
            [
                f"{int(float(m)):,} packets",
                format_ns(r["level_ns"]) if r["level_ns"] is not None else "below threshold",
                format_ns_interval(r["ci_ns"]),
            ]
            for m, r in d["return_levels"].items()
        ]
        levels += [
            [
                f"{name} at {format_rate(d['rate_pps'])}",
                format_ns(h["level_ns"]) if h["level_ns"] is not None else "–",
                format_ns_interval(h["ci_ns"]),
            ]
            for name, h in d["horizons"].items()
        ]
        out.print(_table("return levels", ["period", "level", "interval"], levels))
        v = d["validation"]
        out.print(
            f"validation: {v['exceedances']} exceedance event(s) ({v['exceedance_samples']} packets) of "
            f"{format_ns(v['return_level_ns'])}, the level for {v['samples']:,} packets (expected: 1)"
        )
        st = d["stationarity"]
        out.print(
            f"stationarity: ADF p = {format_p_value(st['adf_p'])}, "
            f"KPSS p = {format_p_value(st['kpss_p'], st.get('kpss_p_bound'))}"
            f" → {st['verdict']} ({st['series']})"
        )

    _finish(doc, json_out, render, stored, db, not_credible=doc.get("warnings", []))


# -- aliasing ----------------------------------------------------------------------------


@model_app.command(
    help="Simulate periodic interrupts against constant-rate traffic and print the worst-N "
    "pattern they make (Commun. Mag. 2020, §V-B; NOMS 2020, §V-C). With --run, the interrupt clock is fitted "
    "to the run's delayed packets and the model is drawn over its worst events."
)
def aliasing(
    rate: float | None = typer.Option(None, help="Packet rate [default: 10000, or the run's]."),
    irq_rate: float = typer.Option(250.0, help="Interrupt rate in Hz (nominal, with --run)."),
    irq_durations: str = typer.Option("5.5us,8.2us", help="Durations of successive interrupts, cycled."),
    duration: str | None = typer.Option(None, help="Simulated time [default: 30s, or the run's]."),
    base_latency: str | None = typer.Option(
        None, help="Latency of an undisturbed packet [default: 3.1us, or the run's median]."
    ),
    service: str = typer.Option(
        "0ns", help="The packet's own processing time (an interrupt starting during it delays it)."
    ),
    phase: str = typer.Option("0ns", help="Time of the first interrupt after the first packet."),
    worst: int = typer.Option(5000, min=1, help="How many worst events to keep."),
    jitter: str = typer.Option(
        "100ns", help="Mean of an exponential noise added to every packet (the body's band in the plot)."
    ),
    run: str | None = typer.Option(None, "--run", help="A stored run (12, run:12) or analysis:ID to overlay."),
    fit: bool = typer.Option(True, help="With --run: fit the interrupt frequency and phase to the run."),
    max_ppm: float = typer.Option(500.0, help="With --fit: search the interrupt clock within ± this many ppm."),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    plot: Path | None = typer.Option(None, help=PLOT_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model aliasing`: the worst-N pattern of interrupts against constant-rate traffic."""
    from lowtail.models import aliasing as al
    from lowtail.report.models import aliasing_figure

    spec = al.AliasingSpec(
        irq_rate_hz=irq_rate,
        irq_durations_ns=[float(parse_duration_ns(d, "us")) for d in irq_durations.split(",") if d.strip()],
        service_ns=float(parse_duration_ns(service, "ns")),
        irq_phase_ns=float(parse_duration_ns(phase, "ns")),
        worst=worst,
        jitter_ns=float(parse_duration_ns(jitter, "ns")),
    )
    with _store(db, store or run is not None) as s:
        measured, keys = None, {}
        if run is not None:
            measured, keys = al.measured_worst(s, run)
            al.with_measurement(spec, measured)
        if rate is not None:
            spec.rate_pps = rate
        if duration is not None:
            spec.duration_s = parse_duration_ns(duration) / 1e9
        if base_latency is not None:
            spec.base_latency_ns = float(parse_duration_ns(base_latency, "us"))
        doc = al.aliasing_model(spec, measured, fit, max_ppm)
        stored = _save(
            s if store else None,
            "aliasing",
            {"irq_rate": irq_rate, "irq_durations": irq_durations, "run": run, "fit": fit},
            doc,
            source=keys.get("source"),
            run_id=keys.get("run_id"),
            analysis_id=keys.get("analysis_id"),
        )
    _plot(aliasing_figure, doc, plot)

    def render(d: dict[str, Any]) -> None:
        m = d["model"]
        period = (
            "∞ (the phase stands still)" if m["pattern_period_s"] is None else format_ns(m["pattern_period_s"] * 1e9)
        )
        out.print(
            f"{m['spec']['rate_pps']:,.6g} pps traffic against {m['spec']['irq_rate_hz']:.6f} Hz interrupts "
            f"of {', '.join(format_ns(x) for x in m['spec']['irq_durations_ns'])}: beat {m['beat_hz']:.6g} Hz "
            f"(harmonic {m['harmonic']}), pattern period {period}; "
            f"{m['packets_delayed']:,} of {m['packets']:,} packets delayed"
            + ("; undersampled: the regular lines appear" if m["undersampled"] else "")
        )
        if d["fit"]:
            f = d["fit"]
            out.print(
                f"fitted interrupt clock: {f['irq_rate_hz']:.6f} Hz ({f['offset_ppm']:+.2f} ppm"
                + (", locked to the traffic" if f.get("locked") else "")
                + f"), first at "
                f"{format_ns(f['irq_phase_ns'])}, median error {format_ns(f['median_error_ns'])} over "
                f"{f['delayed_packets']} delayed packets"
            )

    _finish(doc, json_out, render, stored, db)


# -- simulate ----------------------------------------------------------------------------


@model_app.command(
    help="Discrete-event model of a device: arrivals (constant rate or Poisson, bursts), a "
    "service-time distribution, a batch policy that releases a batch only when all of it is "
    "processed, interrupts, and a bounded queue (drops). Predicts the latency distribution "
    "and loss; lists in --rate/--burst/--batch simulate every combination. With --run, the "
    "model of a stored lowtail-fwd run (its rate, burst, work_ns, batch) is compared with "
    "what was measured, percentile by percentile."
)
def simulate(
    rate: str | None = typer.Option(
        None, help="Offered rate(s) in packets/s, e.g. 10000 or 10000,50000 [default: 10000]."
    ),
    packets: int | None = typer.Option(
        None, min=1, help="Packets per case [default: 100000, with --run: the run's, at most 2 million]."
    ),
    duration: str | None = typer.Option(None, help="Instead of --packets: simulated time per case, e.g. 10s."),
    arrivals: str = typer.Option("cbr", help="cbr (constant rate) or poisson."),
    burst: str | None = typer.Option(None, help="Packets per burst, or a list: 1,4,16,32,64 [default: 1]."),
    burst_gap: str = typer.Option("0ns", help="Gap between packets of a burst (wire time of one frame)."),
    service: str = typer.Option(
        "2us",
        help="CPU time per packet: 20us, const:20us, exp:20us, uniform:10us:30us, normal:20us:2us, lognormal:20us:0.3.",
    ),
    batch: str | None = typer.Option(None, help="Batch size(s) [default: 1]."),
    batch_overhead: str = typer.Option("0ns", help="Fixed cost of each poll that takes a batch."),
    queue: int = typer.Option(
        0, min=0, help="Receive queue capacity in packets (0 = unbounded); arrivals beyond it are dropped."
    ),
    base_latency: str | None = typer.Option(
        None,
        help="Latency outside the core (wire, NIC, both directions) [default: 0; with --run: fitted at the median].",
    ),
    irq: list[str] = typer.Option(
        [], "--irq", help="Interrupts: RATE:DUR[,DUR...][@PHASE], e.g. 250:5.5us,8.2us; poisson@1000:2us; repeatable."
    ),
    seed: int = typer.Option(1, help="Random seed."),
    spec_file: Path | None = typer.Option(
        None, "--spec", help="A JSON model spec (its keys: see --show-spec); options given override it."
    ),
    show_spec: bool = typer.Option(False, help="Print the model's fields and defaults as JSON and exit."),
    run: int | None = typer.Option(None, "--run", help="Compare with this stored lowtail-fwd run."),
    overhead: str = typer.Option("0ns", help="With --run: per-packet cost of the forwarder besides work_ns."),
    baseline_run: int | None = typer.Option(
        None, help="With --run: take the base latency from this run's median (2·t_transfer)."
    ),
    export: Path | None = typer.Option(
        None, help=f"Write the first case's series ({series.columns_text()}) to FILE.parquet or FILE.csv."
    ),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: str | None = typer.Option(None, help="A name for the stored result."),
    plot: Path | None = typer.Option(None, help=PLOT_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """`lowtail model simulate`: the discrete-event model of a device, optionally against a run."""
    from lowtail.models import simulate as sim
    from lowtail.report.models import simulate_figure

    if show_spec:
        print_json(sim.defaults())
        return
    if arrivals not in ("cbr", "poisson"):
        raise UserError(f"--arrivals {arrivals!r}: cbr or poisson")
    if export is not None:
        series.check_export_path(export)
    base: dict[str, Any] = {}
    if spec_file:
        try:
            base = json.loads(spec_file.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"--spec {spec_file}: cannot read it as JSON ({e})") from None
    base.update(
        arrivals=arrivals,
        burst_gap_ns=float(parse_duration_ns(burst_gap, "ns")),
        seed=seed,
        batch_overhead_ns=float(parse_duration_ns(batch_overhead, "ns")),
        queue_capacity=queue,
    )
    if not spec_file or service != "2us":
        base["service"] = sim.parse_service(service)
    if irq:
        base["interrupts"] = [sim.parse_irq(i) for i in irq]
    if base_latency is not None:
        base["base_latency_ns"] = parse_duration_ns(base_latency, "us")

    measured_run = None
    with _store(db, store or run is not None) as s:
        if run is not None:
            measured_run, for_run = sim.spec_of_stored_run(
                s, run, float(parse_duration_ns(overhead, "ns")), packets, seed, baseline_run
            )
            base.update(for_run)
        rates = [float(r) for r in sim.int_list(rate, "--rate")] if rate else [base.get("rate_pps", 10_000.0)]
        bursts = sim.int_list(burst, "--burst") if burst else [base.get("burst", 1)]
        batches = sim.int_list(batch, "--batch") if batch else [base.get("batch", 1)]
        cases = sim.simulate_cases(
            base,
            rates,
            bursts,
            batches,
            parse_duration_ns(duration) if duration is not None else None,
            packets,
            measured_run,
            series.parquet_path_for(export) if export else None,
        )
        if export is not None:
            series.finish_export(export)
            note(f"wrote {export}")
        doc: dict[str, Any] = {"cases": cases, "comparison": None, "partial": False}
        keys = {}
        if measured_run is not None:
            doc["comparison"] = sim.comparison(run, measured_run, cases, baseline_run)
            keys = {
                "run_id": run,
                "analysis_id": measured_run["analysis_id"],
                "experiment_id": measured_run["experiment_id"],
                "dut_name": measured_run["dut_name"],
                "source": f"run {run}",
            }
        inputs = {
            "base": base,
            "rates": rates,
            "bursts": bursts,
            "batches": batches,
            "run": run,
            "baseline_run": baseline_run,
            "overhead": overhead,
        }
        stored = _save(s if store else None, "simulate", inputs, doc, label=label, **keys)
    _plot(simulate_figure, doc, plot)

    def render(d: dict[str, Any]) -> None:
        from lowtail.report.tables import comparison_table

        figures = percentiles.labelled("min", "p50", "p99", "p99_999", "max")
        rows = []
        for c in d["cases"]:
            res, lat = c["result"], c["result"]["latency_ns"] or {}
            rows.append(
                [
                    c["label"],
                    format_percent(res["loss"]),
                    format_percent(res["utilisation"] or 0, ".1f"),
                    *(format_ns(lat.get(k), 1) for k, _ in figures),
                ]
            )
        out.print(
            _table(
                f"predicted ({d['cases'][0]['result']['offered']:,} packets per case)",
                ["case", "loss", "core busy", *(label for _, label in figures)],
                rows,
            )
        )
        comp = d["comparison"]
        if comp:
            out.print(
                _table(
                    f"run {comp['run_id']} ({comp['dut']}, {format_rate(comp['rate_pps'])}, work "
                    f"{format_ns(comp['work_ns'])}, batch {comp['batch']}): base latency "
                    f"{format_ns(comp['base_latency_ns'])} ({comp['base_latency_source']})",
                    *comparison_table(comp),
                )
            )
            ml = comp["measured_loss"]
            out.print(
                f"loss: measured {'–' if ml is None else format_percent(ml)}, "
                f"predicted {format_percent(comp['predicted_loss'])}"
            )

    _finish(doc, json_out, render, stored, db)


# -- stored results ------------------------------------------------------------------------


@model_app.command("list", help="List stored model results, newest first.")
def list_(
    kind: str | None = typer.Option(None, help="Only this kind: overload, knee, evt, aliasing, simulate."),
    limit: int = typer.Option(50, min=1, help="How many to show."),
    db: Path = db_option(),
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
    out.print(
        _table(
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
    db: Path = db_option(),
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file [default: lowtail-model-<id>.html]."),
    json_out: bool = typer.Option(False, "--json", help="Print the written path as JSON."),
) -> None:
    """`lowtail model report`."""
    from lowtail.report.models import write_model_report

    path = write_model_report(db, model, output or Path(f"lowtail-model-{model}.html"))
    if json_out:
        print_json({"report": str(path)})
    else:
        note(f"wrote {path}")
