"""`lowtail host audit | plan | apply | undo | snapshot`: check a host against the URLLC studies'
low-latency guidelines, write the boot parameters for a core plan, change what can be
changed at run time (and change it back)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._options import db_info
from lowtail.cli._output import EXIT_VERDICT_FAILED, note, out, print_json, warn
from lowtail.core.units import format_counted
from lowtail.store import DEFAULT_DB

if TYPE_CHECKING:
    from lowtail.host.document import AuditDocument
    from lowtail.host.facts import Host
    from lowtail.host.plan import CorePlan

host_app = typer.Typer(
    help="Audit and tune a Linux host for low latency (the URLLC studies' boot parameters and "
    "run-time settings), for a core plan of housekeeping and isolated (DuT) cores.",
    no_args_is_help=True,
)
app.add_typer(host_app, name="host")

_HK = typer.Option(None, "--housekeeping", help="CPUs for the OS and IRQs, e.g. 0 [default: the CPUs not isolated].")
_ISO = typer.Option(
    None,
    "--isolated",
    help="CPUs isolated for the DuT and the generator, e.g. 1-3 [default: isolcpus of the boot command line, else "
    "the cores a run's generator and DuT have to themselves: the one core plan of this host and --experiment].",
)
_EXPERIMENT = typer.Option(
    None,
    "--experiment",
    metavar="FILE",
    help="The experiment file whose [cores] the plan is for [default: the embedded default experiment's].",
)
_SYSROOT = typer.Option(
    None, "--sysroot", help="Read DIR/proc and DIR/sys instead of the live host (a `lowtail host snapshot`)."
)
_JSON = typer.Option(False, "--json", help="Print one JSON document instead of tables.")
_STYLE = {"pass": "green", "warn": "yellow", "fail": "red bold", "skip": "dim"}


def _host_and_plan(
    sysroot: Path | None, housekeeping: str | None, isolated: str | None, experiment: Path | None = None
) -> tuple[Host, CorePlan]:
    """The host and its one core plan (host/plan.py): the options', else the boot command
    line's, else the one a run of `experiment` (its [cores]) asks for — what `tune` and
    `explain` name too."""
    from lowtail.host.facts import Host
    from lowtail.host.plan import resolve_plan
    from lowtail.host.sysroot import SysRoot

    host = Host(SysRoot.open(sysroot))
    cores = None
    if experiment is not None:
        from lowtail.experiment import spec

        cores = spec.load(experiment).cores
    return host, resolve_plan(host, housekeeping, isolated, cores)


def _plan_line(plan: CorePlan) -> str:
    """The plan in a line, with which roles share a core and why (said once)."""
    return f"core plan: {plan} ({plan.source})" + (f"; {plan.shared}" if plan.shared else "")


@host_app.command(
    help="Check the host against the URLLC studies' guidelines (JNSM 2023, Table 1; Perf. Eval. 2024, Table 2; Commun. Mag. 2020, §IV): each "
    "check passes, warns or fails, with what was seen, why it matters and the remedy."
)
def audit(
    housekeeping: str | None = _HK,
    isolated: str | None = _ISO,
    experiment: Path | None = _EXPERIMENT,
    sysroot: Path | None = _SYSROOT,
    check: list[str] | None = typer.Option(None, "--check", help="Run only this check (repeatable; ids as in --json)."),
    why: bool = typer.Option(False, "--why", help="Also print why each check matters."),
    strict: bool = typer.Option(False, "--strict", help=f"Exit {EXIT_VERDICT_FAILED} when a check fails."),
    store: bool = typer.Option(False, "--store", help="Store the audit in the database."),
    db: Annotated[Path, db_info("Results database (with --store).")] = DEFAULT_DB,
    json_out: bool = _JSON,
) -> None:
    """`lowtail host audit`."""
    from lowtail.core.errors import UserError
    from lowtail.host.audit import CHECKS, audit_document, run_audit

    known = {cid for cid, _ in CHECKS}
    unknown = sorted(set(check or []) - known)
    if unknown:
        raise UserError(f"--check {unknown[0]}: no such check (known: {', '.join(sorted(known))})")
    host, plan = _host_and_plan(sysroot, housekeeping, isolated, experiment)
    checks = run_audit(host, plan, set(check) if check else None)
    doc = audit_document(host, plan, checks)
    if doc["unreadable"]:
        warn(
            f"{len(doc['unreadable'])} file(s) could not be read (e.g. {doc['unreadable'][0]}): run as root "
            "for a complete audit"
        )
    if store:
        from lowtail.store import open_store
        from lowtail.store.host import save_audit

        with open_store(db) as s:
            doc["audit_id"] = save_audit(s, doc)
    if json_out:
        print_json(doc)
    else:
        _print_audit(doc, why)
        if store:
            note(f"stored as audit {doc['audit_id']} in {db}")
    if strict and doc["summary"]["failed"]:
        raise typer.Exit(EXIT_VERDICT_FAILED)


def _print_audit(doc: AuditDocument, why: bool) -> None:
    s = doc["summary"]
    plan = doc["plan"]
    from lowtail.host.sysroot import format_cpulist

    note(
        f"{doc['host']} · kernel {doc['kernel']} · housekeeping {format_cpulist(plan['housekeeping'])}, "
        f"isolated {format_cpulist(plan['isolated'])} ({plan['source']})"
        + (f"; {plan['shared']}" if plan.get("shared") else "")
    )
    t = Table(box=None, pad_edge=False, show_header=False)
    t.add_column("status")
    t.add_column("check")
    t.add_column("observed, remedy", overflow="fold")
    for c in doc["checks"]:
        text = escape(c["observed"])
        if why:
            text += f"\n[dim]{escape(c['why'])}[/]"
        if c["remedy"]:
            text += f"\n→ {escape(c['remedy'])}"
        t.add_row(f"[{_STYLE[c['status']]}]{c['status']}[/]", c["id"], text)
    out.print(t)
    out.print(
        f"score {s['score']}/100: {s['passed']} pass, {s['warned']} warn, {s['failed']} fail, "
        f"{s['skipped']} not applicable"
    )


@host_app.command(
    help="Write the kernel command line for a core plan (the URLLC studies' tables) and the GRUB line "
    "that keeps the host's other parameters."
)
def plan(
    housekeeping: str | None = _HK,
    isolated: str | None = _ISO,
    experiment: Path | None = _EXPERIMENT,
    sysroot: Path | None = _SYSROOT,
    json_out: bool = _JSON,
    guest_vcpus: int | None = typer.Option(
        None,
        "--guest-vcpus",
        min=1,
        max=4096,  # Linux's largest NR_CPUS a guest would have; a larger number is a typo
        help="Instead: the guest_cmdline of a VM DuT with this many vCPUs (vCPU 0 housekeeping, the others isolated).",
    ),
) -> None:
    """`lowtail host plan`."""
    from lowtail.host.plan import guest_cmdline, kernel_cmdline
    from lowtail.host.sysroot import format_cpulist

    if guest_vcpus is not None:
        guest = guest_cmdline(guest_vcpus)
        if json_out:
            print_json(guest)
            return
        note(f"core plan of the guest: vCPU 0 housekeeping, {format_cpulist(guest['plan']['isolated'])} isolated")
        out.print('[[dut]] options of the VM (kind = "vm"):', markup=False)
        for line in guest["experiment_file"].splitlines():
            out.print(f"  {line}", markup=False)
        return
    host, core_plan = _host_and_plan(sysroot, housekeeping, isolated, experiment)
    doc = kernel_cmdline(host, core_plan)
    if json_out:
        print_json(doc)
        return
    note(_plan_line(core_plan))
    t = Table(box=None, pad_edge=False)
    for col in ("parameter", "purpose", "from"):
        t.add_column(col)
    for p in doc["params"]:
        t.add_row(escape(p["text"]), p["purpose"], p["source"])
    out.print(t)
    out.print("\nkernel command line (add):")
    out.print(f"  {doc['cmdline']}", markup=False)
    out.print(f"\n/etc/default/grub (keeps {len(doc['kept'])} parameter(s) from {doc['kept_from']}):")
    out.print(f"  {doc['grub']}", markup=False)
    for i, step in enumerate(doc["grub_steps"], 1):
        out.print(f"  {i}. {step}", markup=False)
    for n in doc["notes"]:
        note(f"note: {n}")


@host_app.command(
    help="Change the run-time settings of a core plan: IRQ affinities, vm.stat_interval, THP, KSM, "
    "governor and C-states of the DuT cores, timer migration, a cpuset for the DuT. Shows the "
    "changes only, unless --yes; then writes an undo file first and changes all or nothing."
)
def apply(
    housekeeping: str | None = _HK,
    isolated: str | None = _ISO,
    experiment: Path | None = _EXPERIMENT,
    sysroot: Path | None = _SYSROOT,
    yes: bool = typer.Option(False, "--yes", help="Make the changes (without it: a dry run that changes nothing)."),
    undo_file: Path = typer.Option(Path("lowtail-host-undo.json"), help="Where to record how to undo the changes."),
    cpuset: str = typer.Option("lowtail-dut", help="Name of the cpuset (cgroup) made for the DuT cores."),
    no_cpuset: bool = typer.Option(False, "--no-cpuset", help="Do not make a cpuset."),
    json_out: bool = _JSON,
) -> None:
    """`lowtail host apply`."""
    from dataclasses import asdict

    from lowtail.host.apply import apply_changes, normalized, planned_changes

    host, core_plan = _host_and_plan(sysroot, housekeeping, isolated, experiment)
    changes = planned_changes(host, core_plan, None if no_cpuset else cpuset)
    if yes and changes:
        changes = apply_changes(host.root, changes, core_plan, undo_file)
    doc = {
        "dry_run": not yes,
        "sysroot": None if host.root.live else str(host.root.root),
        "plan": core_plan.to_json(),
        "undo_file": str(undo_file) if yes and changes else None,
        "changes": [asdict(c) for c in changes],
    }
    if json_out:
        print_json(doc)
        return
    note(f"{_plan_line(core_plan)} on {host.root}")
    if not changes:
        out.print("nothing to change: the run-time settings already follow the plan")
        return
    t = Table(box=None, pad_edge=False)
    for col in ("setting", "now", "new") + (("result",) if yes else ()):
        t.add_column(col, overflow="fold")
    for c in changes:
        now = "–" if c.before is None else (normalized(c.compare, c.before) if c.compare == "selected" else c.before)
        row = [escape(c.setting), escape(now), escape(c.written or "(new directory)")]
        if yes:
            row.append(escape(c.status + (f": {c.note}" if c.note else "")))
        t.add_row(*row)
    out.print(t)
    if not yes:
        note(
            f"dry run: nothing changed. Make these {len(changes)} change(s) with --yes (an undo file is written first)."
        )
        return
    applied = sum(c.status == "applied" for c in changes)
    refused = [c for c in changes if c.status == "refused"]
    note(f"{applied} change(s) made; undo them with `lowtail host undo {undo_file}`")
    if refused:
        warn(
            f"the kernel refused {len(refused)} optional change(s), e.g. {refused[0].setting} "
            f"({refused[0].note}); those IRQs are managed by the kernel or per-CPU"
        )
    if not no_cpuset and any(c.kind == "mkdir" and c.status == "applied" for c in changes):
        mkdir = next(c for c in changes if c.kind == "mkdir")
        note(f"start the DuT in the cpuset: echo $PID > {host.root.path(mkdir.path)}/cgroup.procs")


@host_app.command(
    help="Restore what `lowtail host apply --yes` changed, from its undo file. Refuses, changing "
    "nothing, when a setting no longer holds what apply left there."
)
def undo(
    undo_file: Path = typer.Argument(Path("lowtail-host-undo.json"), help="The undo file apply wrote."),
    sysroot: Path | None = typer.Option(None, "--sysroot", help="Check the undo file was written for this sysroot."),
    force: bool = typer.Option(False, "--force", help="Restore even settings changed since apply."),
    json_out: bool = _JSON,
) -> None:
    """`lowtail host undo`."""
    from dataclasses import asdict

    from lowtail.host.apply import undo as undo_changes

    restored = undo_changes(undo_file, sysroot, force)
    if json_out:
        print_json({"undo_file": str(undo_file), "restored": [asdict(c) for c in restored]})
        return
    t = Table(box=None, pad_edge=False)
    for col in ("setting", "restored to"):
        t.add_column(col, overflow="fold")
    for c in restored:
        t.add_row(escape(c.setting), escape("(removed)" if c.kind == "mkdir" else (c.restore or "")))
    out.print(t)
    note(f"{len(restored)} setting(s) restored; {undo_file} renamed to {undo_file.name}.done")


@host_app.command(
    help="Copy what the audit reads from the live /proc and /sys into DIR, to audit it elsewhere with --sysroot DIR."
)
def snapshot(
    directory: Path = typer.Argument(..., help="A new (or empty) directory."),
    json_out: bool = _JSON,
) -> None:
    """`lowtail host snapshot`."""
    from lowtail.host.snapshot import write_snapshot

    doc = write_snapshot(directory)
    if doc["unreadable"]:
        warn(f"{len(doc['unreadable'])} file(s) could not be read (run as root for a complete snapshot)")
    if json_out:
        print_json(doc)
    else:
        out.print(
            f"{format_counted(doc['files'], 'file')} from {doc['host']} (kernel {doc['kernel']}) written to {directory}; "
            f"audit them with `lowtail host audit --sysroot {directory}`",
            markup=False,
        )
