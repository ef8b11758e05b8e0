"""`lowtail testbed show|clean`: testbeds on this host, and the leftovers of killed runs."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import typer
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._output import note, out, print_json
from lowtail.core.terminal import shown

testbed_app = typer.Typer(
    help="Software testbeds on this host (network namespaces, veth links, cgroups).", no_args_is_help=True
)
app.add_typer(testbed_app, name="testbed")


class ShownTestbed(TypedDict):
    """One testbed as `testbed show --json` prints it."""

    tag: str
    owner_pid: int
    alive: bool
    netns: list[str]
    cgroups: list[str]
    state_file: str | None


@testbed_app.command(help="List lowtail testbeds on this host: running ones and leftovers of killed runs.")
def show(json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """`lowtail testbed show`."""
    from lowtail.testbed.registry import tag_owner, testbeds_on_host

    found = testbeds_on_host()
    rows: list[ShownTestbed] = [
        {
            "tag": tag,
            "owner_pid": tag_owner(tag),
            "alive": e.alive,
            "netns": e.netns,
            "cgroups": e.cgroups,
            "state_file": str(e.registry.file) if e.registry else None,
        }
        for tag, e in sorted(found.items())
    ]
    if json_out:
        print_json(rows)
        return
    if not rows:
        note("no lowtail testbeds on this host")
        return
    t = Table(box=None)
    for col in ("tag", "owner", "state", "namespaces", "cgroups"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["tag"],
            str(r["owner_pid"]),
            "running" if r["alive"] else "leftover (owner gone)",
            " ".join(r["netns"]) or "–",
            " ".join(r["cgroups"]) or "–",
        )
    out.print(t)


@testbed_app.command(
    help="Remove what killed runs left behind (namespaces, links, cgroups, processes, DPDK "
    "files, a DuT's set-up on your own interfaces). Only testbeds whose owner process is gone are touched: runs in progress, "
    "yours or anyone's, are left alone."
)
def clean(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would be removed."),
    json_out: bool = typer.Option(False, "--json", help="Print what was removed as JSON."),
) -> None:
    """`lowtail testbed clean`."""
    from lowtail.host.pending import pending
    from lowtail.testbed.registry import find_leftovers, remove_leftovers
    from lowtail.testbed.system import require_privileges

    require_privileges("lowtail testbed clean")
    changed = pending()
    undone = [_undo_left(Path(entry.undo_file), dry_run) for entry in changed]
    leftovers = find_leftovers() if dry_run else remove_leftovers()
    if json_out:
        key = "removed" if not dry_run else "would_remove"
        print_json({key: [left.describe() for left in leftovers], "host_changes": undone})
        return
    verb = "would remove" if dry_run else "removed"
    for entry, said in zip(changed, undone, strict=True):
        note(f"{said['result']}: host settings a killed {entry.command} left changed ({shown(entry.undo_file)})")
    for left in leftovers:
        note(f"{verb} {shown(left.summary())}")
    if not leftovers and not changed:
        note("nothing to clean: no leftovers of killed runs")


class UndoneLeftover(TypedDict):
    """A killed command's host changes, as `testbed clean --json` says what became of them."""

    undo_file: str
    result: str


def _undo_left(undo_file: Path, dry_run: bool) -> UndoneLeftover:
    """Undo a killed command's host changes from its undo file (host undo's checks: nothing
    changed since is overwritten); what became of them, in words."""
    from lowtail.core.errors import Failure, UserError
    from lowtail.host.apply import undo

    if dry_run:
        return {"undo_file": str(undo_file), "result": "would undo"}
    try:
        restored = undo(undo_file)
    except (UserError, Failure) as e:
        return {"undo_file": str(undo_file), "result": f"could not undo ({e})"}
    return {"undo_file": str(undo_file), "result": f"undid {len(restored)} setting(s)"}
