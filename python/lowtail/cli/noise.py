"""`lowtail noise`: how often, and for how long, something takes the DuT cores away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import db_option
from lowtail.cli._output import note, out, print_json, warn
from lowtail.host.interrupts import DEFAULT_INTERVAL_S
from lowtail.units import format_ns, format_ns_per_s, parse_duration_ns


@app.command(
    help="Measure OS noise: a native probe pinned to each core spins on the monotonic clock and records "
    "every gap above a threshold (like osnoise, sysjitter, hiccups), while /proc/interrupts is read "
    "around it (and periodically from a housekeeping core) to name the interrupt kinds behind the "
    "gaps: the interrupt profile (rate and duration per kind) of the overload model's d_Σ."
)
def noise(
    cpus: str | None = typer.Option(
        None,
        "--cpus",
        help="Cores to probe, e.g. 1-3 [default: isolcpus of the boot command line, else every CPU but the first].",
    ),
    duration: str = typer.Option("5s", help="How long to probe (all cores at once)."),
    threshold: str = typer.Option("1us", help="Gaps longer than this are recorded."),
    interrupts: bool = typer.Option(True, help="Read /proc/interrupts around the probe and attribute the gaps."),
    sample_interval: str = typer.Option(
        f"{DEFAULT_INTERVAL_S * 1000:g}ms",
        help="Also sample interrupts this often from the housekeeping core, to "
        "tell kinds apart ('0': before and after only).",
    ),
    housekeeping: int | None = typer.Option(
        None, help="CPU for the sampler and the probe's main thread [default: the first CPU not probed]."
    ),
    fifo: int | None = typer.Option(None, min=1, max=99, help="Run the probe under SCHED_FIFO at this priority."),
    top: int = typer.Option(20, min=0, help="How many of the largest gaps to keep per core, with their times."),
    db: Path = db_option(),
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: str | None = typer.Option(None, help="A name for this probe in the database."),
    report: Path | None = typer.Option(None, help="Also write an HTML report to this file."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """`lowtail noise`."""
    from lowtail.errors import UserError
    from lowtail.host.facts import Host
    from lowtail.host.noise import NoiseOptions, run_noise
    from lowtail.host.plan import resolve_plan
    from lowtail.host.sysroot import SysRoot, parse_cpulist

    if cpus is None:
        chosen = list(resolve_plan(Host(SysRoot("/"))).isolated)
    else:
        chosen = parse_cpulist(cpus, "--cpus")
    duration_ns = parse_duration_ns(duration)
    threshold_ns = parse_duration_ns(threshold, default_unit="us")
    interval_ns = parse_duration_ns(sample_interval)
    if duration_ns <= 0:
        raise UserError(f"--duration {duration}: must be positive")
    if report and not store:
        raise UserError("--report needs the result stored (drop --no-store)")
    opts = NoiseOptions(
        cpus=chosen,
        duration_ns=duration_ns,
        threshold_ns=threshold_ns,
        interrupts=interrupts,
        sample_interval_ns=interval_ns or None,
        housekeeping_cpu=housekeeping,
        top=top,
        fifo=fifo,
    )
    if not json_out:
        note(
            f"probing CPU {cpus or ','.join(map(str, chosen))} for {format_ns(duration_ns)} "
            f"(gaps above {format_ns(threshold_ns)})…"
        )
    result = run_noise(opts, warn=warn)
    if store:
        from lowtail.store import open_store
        from lowtail.store.host import save_noise_run

        with open_store(db) as s:
            result["noise_run_id"] = save_noise_run(s, result, label=label)
    if report:
        from lowtail.report.interrupts import write_noise_report

        write_noise_report(db, result["noise_run_id"], report)
    if json_out:
        print_json(result)
        return
    _print_noise(result)
    if store:
        note(f"stored as noise run {result['noise_run_id']} in {db}")


def _print_noise(r: dict[str, Any]) -> None:
    from lowtail.host.energy import describe

    t = Table(title="gaps (exact nearest rank over the gaps)", title_justify="left", box=None, pad_edge=False)
    for col in ("cpu", "gaps", "rate", "lost time", "p50", "p99", "max", "loop"):
        t.add_column(col, justify="right")
    for c in r["cores"]:
        t.add_row(
            str(c["cpu"]),
            f"{c['gaps']:,}",
            f"{c['rate_hz']:,.1f} /s",
            format_ns_per_s(c["noise_ns_per_s"]),
            format_ns(c["p50_ns"]),
            format_ns(c["p99_ns"]),
            format_ns(c["max_ns"]),
            format_ns(c["min_loop_ns"]),
        )
    out.print(t)
    for c in r["cores"]:
        if c["interrupts"] is None:
            continue
        a = c["attribution"]
        t = Table(
            title=f"CPU {c['cpu']} interrupts ({a['method']}; explains "
            f"{100 * a['explained_share']:.0f} % of the time in gaps under 1 ms)",
            title_justify="left",
            box=None,
            pad_edge=False,
        )
        for col in ("kind", "what", "count", "rate", "typical duration"):
            t.add_column(col, justify="left" if col in ("kind", "what") else "right")
        for kind, v in c["interrupts"].items():
            t.add_row(
                escape(kind),
                escape(v["description"]),
                f"{v['count']:,}",
                f"{v['rate_hz']:,.1f} Hz",
                format_ns(v["typical_ns"]),
            )
        if not c["interrupts"]:
            t.add_row("–", "no interrupts on this core while probed", "0", "", "")
        out.print(t)
        out.print(
            f"  d_Σ = Σ rate × duration = {c['d_sum_ns_per_s'] / 1e3:,.1f} µs per second "
            f"(measured lost time {format_ns_per_s(c['noise_ns_per_s'])})"
        )
        if a["long_gaps"]:
            out.print(
                f"  {a['long_gaps']:,} gaps of 1 ms or more ({format_ns(a['long_gap_total_ns'])} in all) are "
                "not interrupt handlers: other tasks, RT throttling or the hypervisor took the core"
            )
    out.print(f"energy: {describe(r['energy'])}", markup=False)
