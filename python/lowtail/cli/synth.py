"""`lowtail synth PRE POST`: write a synthetic capture pair with known answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from lowtail import _native
from lowtail.cli._app import app
from lowtail.cli._options import unit_info
from lowtail.cli._output import note, print_json
from lowtail.core import files, schema
from lowtail.core.errors import UserError
from lowtail.core.units import format_rate, format_rate_setting

# The model's defaults, from the native generator (their one owner): the help shows them.
DEFAULTS = json.loads(_native.synth_defaults())


def _option_name(path: tuple[str | int, ...]) -> str:
    """A model field as the command line sets it: `--rate`, or `--set loss`."""
    flags = {"rate_pps": "--rate", "packets": "--packets", "seed": "--seed"}
    key = str(path[0]) if path else ""
    return flags.get(key, f"--set {key}")


def _parse_value(raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


@app.command(
    help="Write a synthetic PRE/POST capture pair from a model device (latency, jitter, periodic "
    "interrupts, loss, duplicates, reordering) — for trying lowtail, for tests and benchmarks. "
    "Any model field can be set with --set key=value; --show-model lists them."
)
def synth(
    pre: Path | None = typer.Argument(None, help="PRE capture to write."),
    post: Path | None = typer.Argument(None, help="POST capture to write."),
    packets: int | None = typer.Option(None, min=1, help=f"Packets to send [default: {DEFAULTS['packets']}]."),
    rate: Annotated[
        float | None,
        unit_info(
            "--rate",
            "rate",
            None,
            f"Send rate, e.g. 50kpps [default: {format_rate_setting(DEFAULTS['rate_pps'])}].",
            whole=False,
        ),
    ] = None,
    format: str | None = typer.Option(
        None,
        help=f"pcap-ns, pcap-us, pcap-ns-be, pcap-us-be, pcapng, pcapng-be or moonsniff [default: {DEFAULTS['format']}].",
    ),
    compression: str | None = typer.Option(None, help=f"none, zstd or gzip [default: {DEFAULTS['compression']}]."),
    seed: int | None = typer.Option(None, help=f"Random seed [default: {DEFAULTS['seed']}]."),
    set_: list[str] = typer.Option(
        [], "--set", help="Any model field, e.g. --set loss=0.001 --set irq_durations_ns=[5500,8200]."
    ),
    truth: Path | None = typer.Option(None, help="Also write the per-packet ground truth (Parquet)."),
    show_model: bool = typer.Option(
        False, "--show-model", help="Print the model's fields and defaults as JSON and exit."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """`lowtail synth`."""
    if show_model:
        print_json(DEFAULTS)
        return
    if pre is None or post is None:
        raise UserError("synth needs PRE and POST file names (or --show-model)")
    if rate is not None and rate < 1:
        raise UserError(f"--rate {format_rate_setting(rate)}: a rate of at least 1pps")
    given = {"packets": packets, "rate_pps": rate, "format": format, "compression": compression, "seed": seed}
    spec = _model_spec(set_, given)
    outputs = (("PRE", pre), ("POST", post), ("--truth", truth))
    for what, path in outputs:
        if path is not None:
            files.check_output(path, what, over_captures=True)
    files.check_distinct_outputs(outputs)
    try:
        summary = json.loads(_native.synth_pair(str(pre), str(post), json.dumps(spec), str(truth) if truth else None))
    except _native.LowtailError as e:
        raise UserError(str(e)) from None
    if json_out:
        print_json(summary)
    else:
        merged = {**DEFAULTS, **spec}
        note(
            f"wrote {summary['packets']:,} packets at {format_rate(merged['rate_pps'])}: {pre} "
            f"({summary['pre_bytes']:,} B), {post} ({summary['post_bytes']:,} B); "
            f"{summary['lost']:,} lost, {summary['duplicates']:,} duplicated"
        )


def _model_spec(set_: list[str], given: Mapping[str, object]) -> dict[str, object]:
    """The model's fields the command sets: each --set key=value (a key of the model), then
    the options given (those not None). A number JSON cannot say (inf, nan) or one too large
    for 64 bits is refused here, by name: the values go to the native generator as JSON."""
    spec: dict[str, object] = {}  # the native model's fields (--show-model): it checks their values
    for item in set_:
        key, sep, value = item.partition("=")
        if not sep or key not in DEFAULTS:
            raise UserError(f"--set {item!r}: expected key=value with a key from --show-model")
        spec[key] = _parse_value(value)
    spec |= {name: chosen for name, chosen in given.items() if chosen is not None}
    schema.check_shape(spec, "synth", names=_option_name)
    return spec
