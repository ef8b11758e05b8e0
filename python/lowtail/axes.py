"""The configuration axes of a stored run, and which of them vary among runs.

A run's configuration is what was set for it: the DuT (name, kind, each of its options,
the containment it ran in, its virtualization), the traffic (rate, frame size, burst,
flows) and the host (kernel, host name); its repetition says which of several identical
runs it was. Tables of runs show every axis that varies among them (rows that differ only
in burst must not read alike), and a comparison groups runs by the same axes: runs that
agree on every configuration axis are repetitions of one configuration.

This module reads the run rows the store returns (`store.runs.runs`) and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lowtail.units import format_rate

# The axis that tells repetitions of one configuration apart (not a configuration axis).
REPETITION = "repetition"
# Always shown by tables of runs, varying or not.
DUT, KIND, RATE, VIRTUALIZATION = "dut", "kind", "rate", "virtualization"
# DuT options with an axis of their own (containment: what was applied, from the run).
_OPTIONS_SHOWN_ELSEWHERE = ("containment",)


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


@dataclass(frozen=True)
class Axis:
    """One axis: its name (as `compare --by` takes it), the heading of its column, how
    a run's value is read, and how it is shown."""

    name: str
    label: str
    read: Callable[[dict[str, Any]], Any]
    show: Callable[[Any], str] = _text
    option: str | None = None  # the DuT option it is, if it is one

    def present(self, run: dict[str, Any]) -> bool:
        """Whether the run has this axis at all (a DuT option of another kind: no)."""
        return self.option is None or self.option in (run.get("dut_config") or {})


def _traffic(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("traffic") or {}


_FIXED: tuple[Axis, ...] = (
    Axis(DUT, "DuT", lambda r: r["dut_name"]),
    Axis(KIND, "kind", lambda r: r["dut_kind"]),
    Axis("containment", "containment", lambda r: (r.get("containment") or {}).get("mode", "bare")),
    Axis(VIRTUALIZATION, "virtualization", lambda r: r.get("virtualization"), lambda v: (v or "none").upper()),
    Axis(RATE, "rate", lambda r: r["rate_pps"], format_rate),
    Axis("frame_size", "frame", lambda r: r["frame_size"], lambda v: f"{v} B"),
    Axis("burst", "burst", lambda r: r["burst"]),
    Axis("flows", "flows", lambda r: _traffic(r).get("flows", 1)),
    Axis("kernel", "kernel", lambda r: r.get("kernel")),
    Axis("host", "host", lambda r: r.get("hostname")),
)
_REPETITION_AXIS = Axis(REPETITION, "rep.", lambda r: r["repetition"])
_FIXED_NAMES = {a.name for a in _FIXED} | {REPETITION}
# Where the DuT options go among the fixed axes: after the DuT's name and kind.
_OPTIONS_AFTER = 2


def option_axis_name(option: str) -> str:
    """The axis of a DuT option: its own name ("batch"), or "dut_<name>" where that would
    be a traffic axis's (testpmd's `burst` is not the traffic's)."""
    return f"dut_{option}" if option in _FIXED_NAMES else option


def _option_axis(option: str) -> Axis:
    return Axis(option_axis_name(option), option, lambda r: (r.get("dut_config") or {}).get(option), option=option)


def _options(runs: Iterable[dict[str, Any]]) -> list[str]:
    """The DuT options of these runs, in the order they first appear."""
    seen: dict[str, None] = {}
    for r in runs:
        for key in r.get("dut_config") or {}:
            if key not in _OPTIONS_SHOWN_ELSEWHERE:
                seen.setdefault(key)
    return list(seen)


def axes_of(runs: Iterable[dict[str, Any]], repetition: bool = True) -> list[Axis]:
    """Every axis of these runs, in table order: DuT name and kind, each DuT option, the
    containment, virtualization, traffic and host axes, then (unless left out) repetition."""
    runs = list(runs)
    options = [_option_axis(o) for o in _options(runs)]
    return [*_FIXED[:_OPTIONS_AFTER], *options, *_FIXED[_OPTIONS_AFTER:], *([_REPETITION_AXIS] if repetition else [])]


def configuration(run: dict[str, Any]) -> dict[str, Any]:
    """The run's configuration: axis name → value, for every axis it has but repetition."""
    return {a.name: a.read(run) for a in axes_of([run], repetition=False) if a.present(run)}


def varying(runs: Iterable[dict[str, Any]], repetition: bool = True) -> list[Axis]:
    """The axes whose values differ among these runs (a DuT option counts among the runs
    that have it), in table order; repetition among them unless left out."""
    runs = list(runs)
    found = []
    for axis in axes_of(runs, repetition):
        values = {_hashable(axis.read(r)) for r in runs if axis.present(r)}
        if len(values) > 1:
            found.append(axis)
    return found


def describe(run: dict[str, Any], axes: Iterable[Axis]) -> str:
    """The run's values on these axes in words ("burst 16 · 128 B"), leaving out axes it
    does not have."""
    parts = []
    for axis in axes:
        if not axis.present(run):
            continue
        value = axis.show(axis.read(run))
        parts.append(value if axis.name == "frame_size" else f"{axis.label} {value}")
    return " · ".join(parts)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
