"""`lowtail noise`: how often, and for how long, something takes the DuT cores away."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import Db, duration_info, label_info
from lowtail.cli._output import note, out, print_json, warn
from lowtail.core.units import format_ns, format_ns_per_s
from lowtail.host.interrupts import DEFAULT_INTERVAL_S
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.host.document import NoiseDocument

# The options' defaults, each named once: the signature takes it and the help shows it.
PROBE_NS = 5_000_000_000
THRESHOLD_NS = 1_000
SAMPLE_INTERVAL_NS = round(DEFAULT_INTERVAL_S * 1e9)

SampleInterval = Annotated[
    int,
    duration_info(
        "--sample-interval",
        SAMPLE_INTERVAL_NS,
        "Also sample interrupts this often from the housekeeping core, to tell kinds apart (0: before and after only).",
    ),
]


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
    duration_ns: Annotated[
        int, duration_info("--duration", PROBE_NS, "How long to probe (all cores at once).")
    ] = PROBE_NS,
    threshold_ns: Annotated[
        int, duration_info("--threshold", THRESHOLD_NS, "Gaps longer than this are recorded.")
    ] = THRESHOLD_NS,
    interrupts: bool = typer.Option(True, help="Read /proc/interrupts around the probe and attribute the gaps."),
    sample_interval_ns: SampleInterval = SAMPLE_INTERVAL_NS,
    housekeeping: int | None = typer.Option(
        None, help="CPU for the sampler and the probe's main thread [default: the first CPU not probed]."
    ),
    fifo: int | None = typer.Option(None, min=1, max=99, help="Run the probe under SCHED_FIFO at this priority."),
    top: int = typer.Option(
        20, min=0, max=1_000_000, help="How many of the largest gaps to keep per core, with their times."
    ),
    db: Db = DEFAULT_DB,
    store: bool = typer.Option(True, help="Store the result in the database."),
    label: Annotated[str | None, label_info("A name for this probe in the database.")] = None,
    report: Path | None = typer.Option(None, help="Also write an HTML report to this file."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """`lowtail noise`."""
    from lowtail.core.errors import UserError
    from lowtail.host.noise import NoiseOptions, default_cpus, noise_and_store
    from lowtail.host.sysroot import parse_cpulist

    chosen = parse_cpulist(cpus, "--cpus") if cpus is not None else default_cpus()
    if duration_ns <= 0:
        raise UserError("--duration 0: must be positive")
    if report and not store:
        raise UserError("--report needs the result stored (drop --no-store)")
    opts = NoiseOptions(
        cpus=chosen,
        duration_ns=duration_ns,
        threshold_ns=threshold_ns,
        interrupts=interrupts,
        sample_interval_ns=sample_interval_ns or None,
        housekeeping_cpu=housekeeping,
        top=top,
        fifo=fifo,
    )
    if not json_out:
        note(
            f"probing CPU {cpus or ','.join(map(str, chosen))} for {format_ns(duration_ns)} "
            f"(gaps above {format_ns(threshold_ns)})…"
        )
    result = noise_and_store(opts, db, save=store, label=label, warn=warn)
    _finish(result, db, store, report, json_out)


def _finish(result: NoiseDocument, db: Path, store: bool, report: Path | None, json_out: bool) -> None:
    """The report written when asked, then the result: one JSON document, or its tables and
    where it was stored."""
    if report:
        from lowtail.report.interrupts import write_noise_report

        write_noise_report(db, result["noise_run_id"], report)
    if json_out:
        print_json(result)
        return
    _print_noise(result)
    if store:
        note(f"stored as noise run {result['noise_run_id']} in {db}")


def _table(title: str, table: tuple[list[str], list[list[str]]], left: int = 0) -> Table:
    header, rows = table
    t = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for i, col in enumerate(header):
        t.add_column(col, justify="left" if i < left else "right")
    for row in rows:
        t.add_row(*map(escape, row))
    return t


def _print_noise(r: NoiseDocument) -> None:
    from lowtail.host.document import describe_energy as describe
    from lowtail.report.tables import interrupt_profile_table, noise_table

    out.print(_table("gaps (exact nearest rank over the gaps)", noise_table(r["cores"])))
    for c in r["cores"]:
        if c["interrupts"] is None:
            continue
        a = c["attribution"]
        title = (
            f"CPU {c['cpu']} interrupts ({a['method']}; explains "
            f"{100 * a['explained_share']:.0f} % of the time in gaps under 1 ms)"
        )
        profile = interrupt_profile_table(c["interrupts"].items())
        if not c["interrupts"]:
            profile[1].append(["–", "no interrupts on this core while probed", "0", "", ""])
        out.print(_table(title, profile, left=2))
        out.print(
            f"  d_Σ = Σ rate × duration = {format_ns_per_s(c['d_sum_ns_per_s'])} "
            f"(measured lost time {format_ns_per_s(c['noise_ns_per_s'])})"
        )
        if a["long_gaps"]:
            out.print(
                f"  {a['long_gaps']:,} gaps of 1 ms or more ({format_ns(a['long_gap_total_ns'])} in all) are "
                "not interrupt handlers: other tasks, RT throttling or the hypervisor took the core"
            )
    out.print(f"energy: {describe(r['energy'])}", markup=False)
