"""`lowtail vm build`: the guest images of VM DuTs, built ahead of a run (a run builds what
it needs too, but a first build downloads a kernel package and takes a minute)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from lowtail.cli._app import app
from lowtail.cli._output import err, note, out, print_json

vm_app = typer.Typer(help='Guest images and acceleration of VM DuTs (kind = "vm").', no_args_is_help=True)
app.add_typer(vm_app, name="vm")


@vm_app.command(
    help="Build the guest images of the named kernels (vanilla: Debian's linux-image-amd64, rt: "
    "linux-image-rt-amd64, or a vmlinuz file) into the cache, or find them there, and probe whether "
    "guests run under KVM or only under TCG here."
)
def build(
    kernel: list[str] = typer.Option(["vanilla", "rt"], "--kernel", "-k", help="vanilla, rt or a vmlinuz path."),
    probe: bool = typer.Option(True, help="Also probe the acceleration (KVM or TCG) with the first image."),
    cache: Path | None = typer.Option(None, help="Cache directory [default: $LOWTAIL_CACHE_DIR or ~/.cache/lowtail]."),
    json_out: bool = typer.Option(False, "--json", help="Print the images as JSON."),
) -> None:
    """`lowtail vm build`."""
    from lowtail.core.files import cache_dir
    from lowtail.testbed.duts.vm import VirtualMachine
    from lowtail.testbed.vm.image import build_image
    from lowtail.testbed.vm.qemu import probe_acceleration

    VirtualMachine.check_available()
    cache = cache or cache_dir()
    rows = []
    with err.status("") if err.is_terminal and not json_out else _Quiet() as status:

        def progress(message: str) -> None:
            if status is not None:
                status.update(message)
            else:
                note(message)

        for choice in kernel:
            t0 = time.monotonic()
            image = build_image(choice, progress=progress, cache=cache)
            rows.append(
                {
                    "kernel": choice,
                    "release": image.kernel_release,
                    "package": image.info["kernel"].get("package"),
                    "version": image.info["kernel"].get("version"),
                    "image": image.key,
                    "directory": str(image.directory),
                    "boot_kernel": str(image.kernel),
                    "initrd_bytes": image.info["size_bytes"],
                    "seconds": round(time.monotonic() - t0, 1),
                }
            )
        accel = None
        if probe and rows:
            first = build_image(kernel[0], cache=cache)
            found = probe_acceleration(first.kernel, first.initrd, cache, progress)
            accel = {"name": found.name, "reason": found.reason}
    if json_out:
        print_json({"images": rows, "acceleration": accel})
        return
    _print_images(rows, cache, accel)


def _print_images(rows: Sequence[Mapping[str, Any]], cache: Path, accel: Mapping[str, str] | None) -> None:
    """The images built or found, the cache they are in and the acceleration probed."""
    t = Table(box=None)
    for col in ("kernel", "release", "package version", "image", "initramfs", "took"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["kernel"],
            r["release"],
            r["version"] or "–",
            r["image"],
            f"{r['initrd_bytes'] / 2**20:.1f} MiB",
            f"{r['seconds']:g} s",
        )
    out.print(t)
    note(f"cache: {cache}")
    if accel:
        note(f"acceleration: {accel['name'].upper()} ({accel['reason']})")


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
