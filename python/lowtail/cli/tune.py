"""`lowtail tune EXP.toml`: measure, propose the remedies that fit what `explain` found,
apply them with host apply's undo, measure again, keep only what made a resolvable
improvement (tune/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import Db
from lowtail.cli._output import note, out, print_json, warn
from lowtail.core.errors import UserError
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.host.document import CorePlanSplit
    from lowtail.tune.document import TuneDocument


@app.command(
    help="From a bad tail to a verified fix: measure the experiment (or take --before ID), propose the run-time "
    "remedies that fit the causes `explain` found (and the studies' guidelines not in place), apply them with an "
    "undo file written first, measure again, and keep a change only when the comparison calls a resolvable "
    "improvement at the judged percentile without a resolvable harm; the rest is undone. Without --yes: a dry "
    "run that measures and proposes only. Boot-time tuning (isolcpus, nohz_full, rcu_nocbs, PREEMPT_RT) is "
    "planned with the GRUB line; after the reboot, `tune --after-reboot ID` measures again against the before."
)
def tune(
    file: Path = typer.Argument(..., help="Experiment file (TOML); `repetitions` 2 or more."),
    yes: bool = typer.Option(False, "--yes", help="Apply and measure (without it: a dry run that changes nothing)."),
    one_by_one: bool = typer.Option(
        False, "--one-by-one", help="Try one change at a time, each measured: attributes each gain."
    ),
    before: int | None = typer.Option(None, "--before", help="A stored experiment of FILE as the before."),
    only: str | None = typer.Option(None, "--only", help="Try only these proposals (ids, comma-separated)."),
    undo_dir: Path = typer.Option(Path("."), "--undo-dir", help="Where the undo files of kept changes go."),
    after_reboot: int | None = typer.Option(
        None, "--after-reboot", metavar="ID", help="Measure again against tune session ID's before (after a reboot)."
    ),
    report: Path | None = typer.Option(None, "-o", "--report", help="Write the before/after page to this file."),
    data_dir: Path | None = typer.Option(None, help="Where the runs' series go [default: beside the database]."),
    db: Db = DEFAULT_DB,
    json_out: bool = typer.Option(False, "--json", help="Print the session's document as JSON."),
) -> None:
    """`lowtail tune`."""
    from lowtail.experiment import spec
    from lowtail.tune.loop import TuneHooks, TuneOptions
    from lowtail.tune.loop import after_reboot as measure_after_reboot
    from lowtail.tune.loop import tune as run_tune

    if report is not None:
        from lowtail.core.files import check_distinct_outputs, check_output

        check_output(report, "--report")
        check_distinct_outputs((("--report", report),), (("FILE", file),))
    if not undo_dir.is_dir():
        raise UserError(f"--undo-dir {undo_dir}: no such directory")
    ids = tuple(w.strip() for w in (only or "").split(",") if w.strip())
    exp = spec.load(file)
    opts = TuneOptions(
        yes=yes, one_by_one=one_by_one, before=before, only=ids, undo_dir=undo_dir.resolve(), data_dir=data_dir
    )
    hooks = TuneHooks(log=(lambda m: None) if json_out else note, warn=warn)
    if after_reboot is not None:
        doc = measure_after_reboot(exp, db, after_reboot, opts, hooks)
    else:
        doc = run_tune(exp, file, db, opts, hooks)
    if report is not None:
        from lowtail.tune.page import write_tune_report

        write_tune_report(db, doc["tune_id"] or 0, report)
    if json_out:
        print_json(doc)
        return
    _show(doc)
    if report is not None:
        note(f"report: {report.resolve().as_uri()}")


def _plan_line(plan: CorePlanSplit) -> str:
    """The one core plan in a line, as `host plan` says it, with which roles share a core."""
    from lowtail.host.sysroot import format_cpulist

    line = (
        f"core plan: housekeeping {format_cpulist(plan['housekeeping'])}, isolated "
        f"{format_cpulist(plan['isolated'])} ({plan['source']})"
    )
    return line + (f"; {plan['shared']}" if plan.get("shared") else "")


def _show(doc: TuneDocument) -> None:
    t = Table(box=None, pad_edge=False)
    for col in ("id", "change", "cause", "effect", "result"):
        t.add_column(col, overflow="fold")
    for c in doc["changes"]:
        result = "planned" if c["kept"] is None else ("kept" if c["kept"] else "undone")
        t.add_row(escape(c["id"]), escape(c["setting"]), escape(c["cause"]), escape(c["effect"] or "–"), result)
    out.print(f"tune session {doc['tune_id']}: before = experiment {doc['before']}", markup=False)
    if doc["changes"]:
        out.print(t)
    else:
        out.print("nothing to change at run time: the host already follows the remedies that fit", markup=False)
    for u in doc.get("unseen") or []:
        note(f"explain could not see: {u}")
    for r in doc["after_reboot"]:
        out.print(f"after the reboot: experiment {r['after']}: {r['effect']}", markup=False)
    if doc["dry_run"] and doc["changes"]:
        note(f"dry run: nothing changed. Try these {len(doc['changes'])} change(s) with --yes (an undo file first).")
    kept = [c for c in doc["changes"] if c["kept"]]
    for c in kept:
        note(f"kept {c['id']}; undo it with `lowtail host undo {c['undo_file']}`")
    plan = doc["boot"].get("plan") or {}
    if plan:
        note(_plan_line(plan))
    params = doc["boot"].get("params", [])
    if params:
        out.print("\nboot-time parameters still worth setting (a reboot):", markup=False)
        for p in params:
            why = f" — {', '.join(p['causes'])} measured" if p["causes"] else ""
            out.print(f"  {p['text']}: {p['purpose']} ({p['source']}){why}", markup=False)
        out.print(f"  {doc['boot']['grub']}", markup=False)
        note(f"after the reboot: `lowtail tune {doc['spec']} --after-reboot {doc['tune_id']}`")
