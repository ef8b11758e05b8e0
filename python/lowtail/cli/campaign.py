"""`lowtail campaign analyze DIR`: every capture pair of a directory, analysed on a Dask cluster."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lowtail.analyze.pair import analyze_options
from lowtail.campaign import DEFAULT_PATTERN
from lowtail.cli._app import app
from lowtail.cli._options import Db, duration_info
from lowtail.cli._output import EXIT_OK, EXIT_PARTIAL, err, note, print_json, warn
from lowtail.cli.analyze import DEFAULTS, IdFormat
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.core.units import format_counted, format_ns
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.campaign.runner import CampaignResult
    from lowtail.campaign.runner import Progress as CampaignProgress

campaign_app = typer.Typer(
    help="Campaigns: many capture pairs analysed in parallel on a Dask cluster.", no_args_is_help=True
)
app.add_typer(campaign_app, name="campaign")


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[CampaignProgress], None] | None]:
    """A callback(Progress) that shows pairs done, packets/s over the cluster and the ETA on a
    terminal; a no-op when stderr is piped."""
    if not (enabled and err.is_terminal):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("{task.fields[eta]}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("pairs", total=None, rate="", eta="")

        def update(p: CampaignProgress) -> None:
            eta = "" if p.eta_s is None else f"ETA {p.eta_s:,.0f} s"
            bar.update(task, completed=p.done, total=p.total, rate=f"{p.packets_per_s:,.0f} packets/s", eta=eta)

        yield update


def _resume_command() -> str:
    """The command line that resumes this campaign: the one given."""
    return shlex.join(["lowtail", *sys.argv[1:]])


@campaign_app.command(
    "analyze",
    help="Analyse every PRE/POST pair of DIR (NAME-pre.EXT with NAME-post.EXT) on a Dask cluster: "
    "the user's (--scheduler) or a local one of this machine's cores. Workers read the captures "
    "where they lie and write each pair's matched series beside them (--series-dir); this process "
    "alone stores the figures. Run again to resume: pairs already stored are not analysed again.",
)
def campaign_analyze(
    directory: Path | None = typer.Argument(None, help="Directory of capture pairs."),
    from_db: bool = typer.Option(
        False, "--from-db", help="Instead of a directory: every capture pair the database has analysed, again."
    ),
    scheduler: str | None = typer.Option(
        None, help="Address of a Dask scheduler (tcp://HOST:8786) [default: a local cluster of this machine's cores]."
    ),
    pattern: str = typer.Option(
        DEFAULT_PATTERN, help="Regular expression over file names with groups (?P<name>…) and (?P<side>pre|post)."
    ),
    series_dir: Path | None = typer.Option(
        None, help="Where workers write each pair's matched series (NAME-series.parquet) [default: DIR]."
    ),
    series: bool = typer.Option(True, help="Write the matched series of every pair."),
    id_format: IdFormat | None = typer.Option(
        None, help="Preset: lowtail (u64 big-endian at 0) or moonsniff (u32 little-endian at 0)."
    ),
    trim_ns: Annotated[
        int,
        duration_info("--trim", DEFAULTS.trim_ns, "Warm-up to cut from the first PRE packet: 1s, 500ms; 0 keeps all."),
    ] = DEFAULTS.trim_ns,
    max_latency_ns: Annotated[
        int, duration_info("--max-latency", DEFAULTS.max_latency_ns, "Latencies above this count as losses.")
    ] = DEFAULTS.max_latency_ns,
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document (pairs, failed, workers)."),
) -> None:
    """`lowtail campaign analyze`."""
    from lowtail.campaign.pairs import choose_pairs
    from lowtail.campaign.runner import run_campaign

    if (directory is None) == (not from_db):
        raise UserError("campaign analyze needs a DIR or --from-db (one of them)")
    options = analyze_options(
        id_format=id_format.value if id_format else None,
        trim_ns=trim_ns,
        max_latency_ns=max_latency_ns,
    ).to_dict()
    options.pop("export", None)
    pairs, campaign = choose_pairs(directory, db, pattern, options, scheduler, series, series_dir)
    with _progress_bar(not json_out) as progress:
        result = run_campaign(db, pairs, campaign, on_progress=progress)
    _render(result, db, json_out)


def _render(result: CampaignResult, db: Path, json_out: bool) -> None:
    """The campaign's pairs (or one JSON document), what failed or stopped it; the exit code
    says whether it was interrupted or partial."""
    for f in result.failed:
        warn(f"{f['name']}: {f['error']}")
    if result.stopped:
        warn(f"{result.stopped}; what finished is stored in {db}. Resume with: {_resume_command()}")
    if json_out:
        print_json(result.as_dict())
    else:
        resumed = sum(p["resumed"] for p in result.pairs)
        for p in result.pairs:
            lat = p["latency_ns"] or {}
            note(
                f"{p['name']}: analysis {p['analysis_id']}, {p['sent']:,} sent, {p['lost']:,} lost, "
                f"p50 {format_ns(lat.get('p50'))}, max {format_ns(lat.get('max'))}"
                + (" (stored before)" if p["resumed"] else "")
            )
        note(
            f"campaign {result.campaign_id}: {format_counted(len(result.pairs), 'pair')} stored "
            f"({resumed} before this run), {len(result.failed)} failed, "
            f"on {format_counted(len(result.workers), 'worker')}; in {db}"
        )
    if result.failed and not result.pairs and not result.interrupted:
        raise typer.Exit(Failure.exit_code)  # nothing could be computed (each pair said why above)
    raise typer.Exit(Interrupted.exit_code if result.interrupted else EXIT_PARTIAL if result.partial else EXIT_OK)
