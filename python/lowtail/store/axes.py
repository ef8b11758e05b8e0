"""The configuration axes of a stored run, and which of them vary among runs.

A run's configuration is what was set for it: the DuT (name, kind, each of its options,
the containment it ran in, its virtualization), the traffic (rate, frame size, burst,
flows) and the host (kernel, host name); its repetition says which of several identical
runs it was. Tables of runs show every axis that varies among them (rows that differ only
in burst must not read alike), and a comparison groups runs by the same axes: runs that
agree on every configuration axis are repetitions of one configuration.

Selections name runs by these axes too (`dut=fwd`, `rate=50k`, `kernel~rt`, `batch=32`):
`find` resolves a name, `Axis.matches` compares a run's value with what a person typed.

The axes themselves are declared once, beside their columns, by the store
(`store/records.py`: `RUN_AXES`); this module adds a run's DuT options and reads the run
rows the store returns (`store.runs.runs`), nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lowtail.core.errors import UserError
from lowtail.store import records
from lowtail.store.records import show_value as _text

# The axis that tells repetitions of one configuration apart (not a configuration axis).
REPETITION = records.REPETITION_AXIS.name
# The experiment a run belongs to: `--by experiment` and `experiment=3`, never a default axis.
EXPERIMENT = records.EXPERIMENT_AXIS.name
# One flow of a run: `--by flow` compares the flows of the runs (each run split into them).
FLOW = records.FLOW_AXIS.name
HOP = records.HOP_AXIS.name
# Always shown by tables of runs, varying or not.
DUT, KIND, RATE, VIRTUALIZATION = "dut", "kind", "rate", "virtualization"
# DuT options with an axis of their own (containment: what was applied, from the run).
_OPTIONS_SHOWN_ELSEWHERE = ("containment",)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{text!r} is not a number") from None


# The operators of a filter: equal, not equal, contains (case-insensitive).
OPERATORS = ("!=", "~", "=")


@dataclass(frozen=True)
class Axis:
    """One axis: its name (as `compare --by` takes it), the heading of its column, how
    a run's value is read, how it is shown, and how a typed number is read for it."""

    name: str
    label: str
    read: Callable[[Mapping[str, Any]], Any]
    show: Callable[[Any], str] = _text
    option: str | None = None  # the DuT option it is, if it is one
    parse_number: Callable[[str], float] = _number

    def present(self, run: Mapping[str, Any]) -> bool:
        """Whether the run has this axis at all (a DuT option of another kind: no)."""
        return self.option is None or self.option in (run.get("dut_config") or {})

    def matches(self, run: Mapping[str, Any], op: str, text: str) -> bool:
        """Whether the run's value satisfies `op text` ("=", "!=" or "~", see OPERATORS):
        numbers compare as numbers (`rate=50k`), anything else as text, case-insensitively,
        against the stored value or the shown one (`virtualization=tcg`); "~" looks for
        `text` inside either. A run without the axis matches nothing but "!="."""
        if not self.present(run):
            return op == "!="
        value = self.read(run)
        texts = {_text(value).lower(), self.show(value).lower()}
        if op == "~":
            return any(text.lower() in t for t in texts)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            equal = text.lower() in texts or (value is None and text.lower() in ("none", ""))
        else:
            equal = value == self.parse_number(text)
        return equal != (op == "!=")


def _declared(axis: records.RunAxis) -> Axis:
    """The store's declaration of an axis as this module's Axis."""
    return Axis(axis.name, axis.label, axis.value, axis.show, parse_number=axis.number if axis.numeric else _number)


_FIXED: tuple[Axis, ...] = tuple(_declared(a) for a in records.RUN_AXES)
_REPETITION_AXIS = _declared(records.REPETITION_AXIS)
_EXPERIMENT_AXIS = _declared(records.EXPERIMENT_AXIS)
_HOST_STATE_AXIS = _declared(records.HOST_STATE_AXIS)
_FLOW_AXIS = _declared(records.FLOW_AXIS)
_HOP_AXIS = _declared(records.HOP_AXIS)
_FIXED_NAMES = {a.name for a in records.ALL_AXES}
# Where the DuT options go among the fixed axes: after the DuT's name and kind.
_OPTIONS_AFTER = 2


def option_axis_name(option: str) -> str:
    """The axis of a DuT option: its own name ("batch"), or "dut_<name>" where that would
    be a traffic axis's (testpmd's `burst` is not the traffic's)."""
    return f"dut_{option}" if option in _FIXED_NAMES else option


def _option_axis(option: str) -> Axis:
    return Axis(option_axis_name(option), option, lambda r: (r.get("dut_config") or {}).get(option), option=option)


def _options(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The DuT options of these runs, in the order they first appear."""
    seen: dict[str, None] = {}
    for r in runs:
        for key in r.get("dut_config") or {}:
            if key not in _OPTIONS_SHOWN_ELSEWHERE:
                seen.setdefault(key)
    return list(seen)


def axes_of(runs: Iterable[Mapping[str, Any]], repetition: bool = True) -> list[Axis]:
    """Every axis of these runs, in table order: DuT name and kind, each DuT option, the
    containment, virtualization, traffic and host axes, then (unless left out) repetition."""
    runs = list(runs)
    options = [_option_axis(o) for o in _options(runs)]
    return [*_FIXED[:_OPTIONS_AFTER], *options, *_FIXED[_OPTIONS_AFTER:], *([_REPETITION_AXIS] if repetition else [])]


def configuration(run: Mapping[str, Any]) -> dict[str, object]:
    """The run's configuration: axis name → value (each axis's own kind of value, as it reads
    it), for every axis it has but repetition."""
    return {a.name: a.read(run) for a in axes_of([run], repetition=False) if a.present(run)}


def varying(runs: Iterable[Mapping[str, Any]], repetition: bool = True) -> list[Axis]:
    """The axes whose values differ among these runs (a DuT option counts among the runs
    that have it), in table order; repetition among them unless left out."""
    runs = list(runs)
    found = []
    for axis in axes_of(runs, repetition):
        values = {_hashable(axis.read(r)) for r in runs if axis.present(r)}
        if len(values) > 1:
            found.append(axis)
    return found


# Axes that describe the DuT named on the DUT axis: left out of a configuration's axes
# while the DuT's name already tells their value.
_OF_THE_DUT = tuple(a.name for a in records.RUN_AXES if a.of_the_dut)


def configuration_axes(runs: Iterable[Mapping[str, Any]]) -> list[Axis]:
    """The axes that make a configuration by default: those that vary among the runs, but
    the DuT's kind and virtualization where the DuT's name already tells them apart."""
    runs = list(runs)
    chosen = varying(runs, repetition=False)
    dut = next((a for a in chosen if a.name == DUT), None)
    if dut is None:
        return chosen
    return [a for a in chosen if a.name not in _OF_THE_DUT or not _determined(a, dut, runs)]


def _determined(axis: Axis, by: Axis, runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether each value of `by` comes with one value of `axis` only."""
    seen: dict[Any, Any] = {}
    for r in runs:
        key, value = _hashable(by.read(r)), _hashable(axis.read(r) if axis.present(r) else None)
        if seen.setdefault(key, value) != value:
            return False
    return True


def find(name: str, runs: Iterable[Mapping[str, Any]]) -> Axis | None:
    """The axis called `name` among these runs' axes (repetition, experiment, host state, flow
    and hop included), or None."""
    extra = [_EXPERIMENT_AXIS, _HOST_STATE_AXIS, _FLOW_AXIS, _HOP_AXIS]
    return next((a for a in [*axes_of(runs), *extra] if a.name == name), None)


def names(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of every axis of these runs, in table order: what `--by` and filters take."""
    return [a.name for a in axes_of(runs)]


def resolve(wanted: Iterable[str], runs: Iterable[Mapping[str, Any]]) -> list[Axis]:
    """The axes named in `wanted` (as `compare --by` gives them), in that order; UserError
    naming the ones these runs do not have, and the ones they do."""
    runs = list(runs)
    found, unknown = [], []
    for name in wanted:
        axis = find(name, runs)
        if axis is None:
            unknown.append(name)
        elif axis not in found:
            found.append(axis)
    if unknown:
        raise UserError(f"no axis {', '.join(map(repr, unknown))} among these runs (axes: {', '.join(names(runs))})")
    return found


def value_key(run: Mapping[str, Any], axes: Iterable[Axis]) -> tuple[Any, ...]:
    """The run's values on these axes as a hashable key (None where it lacks one): runs
    with equal keys are repetitions of one configuration."""
    return tuple(_hashable(a.read(run)) if a.present(run) else None for a in axes)


# Axes whose shown value names itself ("container", "10 kpps", "64 B"): a configuration's
# label shows them without their heading.
_SELF_EVIDENT = {a.name for a in records.RUN_AXES if a.self_evident}


def label(run: Mapping[str, Any], axes: Iterable[Axis]) -> str:
    """A configuration's short name from the run's values on these axes: "kernel · container
    · batch 32" (values that name themselves alone, the others after their heading; axes the
    run does not have, such as a VM's guest kernel for a bare forwarder, left out)."""
    parts = []
    for axis in axes:
        if not axis.present(run):
            continue
        value = axis.show(axis.read(run))
        parts.append(value if axis.name in _SELF_EVIDENT else f"{axis.label} {value}")
    return " · ".join(parts)


def describe(run: Mapping[str, Any], axes: Iterable[Axis]) -> str:
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
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    # Nested all the way down: a chain's `hops` option is a list of tables.
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value
