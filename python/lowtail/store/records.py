"""A run as the store keeps it, and the configuration axes of a run, each declared once
beside the column that holds it.

`RunRecord` is one row of the `runs` table (002_runs.sql and the files that added columns):
the experiment runner, the importer of external captures and a plain analysis selected as
a run all build their runs through it, so a column has one owner.

`RUN_AXES` declares every configuration axis of a run once: its name (as `compare --by`,
filters and import-spec patterns take it), the run-row key that holds it (a column, or a
derived one joined from the experiment's host), how it is read, parsed from text and shown,
and what an imported run or a plain analysis holds for it. `store/axes.py` (tables, `--by`,
filters), `store/selection.py` (plain analyses as runs) and `experiment/external.py` (import
specs) read these declarations: adding an axis is a column here (and its schema file) plus
the code that measures it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from lowtail.core.errors import UserError
from lowtail.core.units import format_rate, parse_rate_pps
from lowtail.experiment.document import TrafficDocument
from lowtail.testbed.document import CaptureStatistics, Containment, DutCounters, GeneratorStatistics, StoredDutOptions

if TYPE_CHECKING:
    from lowtail.experiment.document import RunRow
    from lowtail.host.document import EnergyReading, HostStateDocument
    from lowtail.testbed.document import TestbedDocument

# Columns stored as JSON text (decoded again when read).
JSON_COLUMNS = (
    "dut_config",
    "invalid_reasons",
    "degraded_reasons",
    "generator",
    "capture",
    "containment",
    "energy",
    "traffic",
    "dut_stats",
    "capture_paths",
    "testbed",
    "host_state",
)


@dataclass(frozen=True)
class RunRecord:
    """One run as stored: what was configured, what was measured around the captures (the
    figures are its analysis, stored beside it), and whether it can be trusted."""

    experiment_id: int
    combination_key: str  # stable per configuration and repetition: resuming skips stored keys
    dut_name: str
    dut_kind: str
    rate_pps: int
    frame_size: int
    burst: int
    repetition: int
    duration_ns: int
    warmup_ns: int
    started_at: datetime
    finished_at: datetime | None
    valid: bool
    # The DuT's options as stored (dut_config: its kind's struct as JSON, `options_json`; an
    # imported run's axes), and open maps, each DuT kind's own keys (testbed/duts): how it was
    # contained (containment) and what it measured of itself (dut_stats).
    dut_config: StoredDutOptions = field(default_factory=dict)
    calibration: bool = False
    series_path: str | None = None
    invalid_reasons: list[str] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)
    generator: GeneratorStatistics = field(default_factory=lambda: GeneratorStatistics())
    capture: CaptureStatistics = field(default_factory=lambda: CaptureStatistics())
    containment: Containment = field(default_factory=dict)
    virtualization: str | None = None
    testbed: TestbedDocument | None = None
    energy: EnergyReading | None = None
    dut_stats: DutCounters | None = None
    capture_paths: list[str] = field(default_factory=list)
    traffic: TrafficDocument = field(default_factory=lambda: TrafficDocument())
    host_state: HostStateDocument | None = None  # the host's tuning when the run started (host/state.py)
    # Not a column: the label its analysis is stored with.
    label: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> RunRecord:
        """A record from a mapping of the same fields (a TypeError names a field it does not have)."""
        return cls(**row)

    def columns(self) -> dict[str, object]:
        """The record as the `runs` columns it fills (JSON columns still as Python values)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "label"}


# -- the configuration axes ------------------------------------------------------------------


def _show_rate(pps: float | None) -> str:
    """The configured rate ("100 kpps"), or that none was given (a plain analysis without
    `--rate`, an import without `{rate}`): a measured rate is never shown as the axis."""
    return format_rate(pps) if pps else "rate not given"


def show_value(value: Any) -> str:
    """An axis value as tables show it ("–" for none, lists comma-separated)."""
    if value is None:
        return "–"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict) and {"path", "sha256"} <= set(value):
        # A rule set from a file (nftables, suricata `rules`): its name and content hash.
        return f"{str(value['path']).rsplit('/', 1)[-1]} (sha {str(value['sha256'])[:8]})"
    return str(value)


# The largest whole-number axis value (frame size, burst, flows, repetition: 32-bit columns).
WHOLE_AXIS_MAX = 2**31 - 1


def _whole(value: Any) -> int:
    """A whole-number axis value as typed (a file name's, an import spec's, a filter's)."""
    # [0-9]: ASCII digits; "²".isdigit() is true, and int("²") fails.
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not re.fullmatch(r"[0-9]{1,10}", text) or int(text) > WHOLE_AXIS_MAX:
        raise UserError(f"must be a whole number from 0 to {WHOLE_AXIS_MAX:,}, not {value!r}")
    return int(text)


def _as_given(value: Any) -> Any:
    return value


def _containment(row: Mapping[str, Any]) -> Any:
    return (row.get("containment") or {}).get("mode", "bare")


def _flows(row: Mapping[str, Any]) -> Any:
    return (row.get("traffic") or {}).get("flows", 1)


def _match_share(row: Mapping[str, Any]) -> Any:
    return (row.get("traffic") or {}).get("match_share", 0)


def _share(value: Any) -> float:
    """A share typed for a filter (`match_share=0.1`): a number from 0 to 1."""
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise UserError(f"must be a number from 0 to 1, not {value!r}") from None
    if not 0 <= share <= 1:
        raise UserError(f"must be a number from 0 to 1, not {value!r}")
    return share


@dataclass(frozen=True)
class RunAxis:
    """One configuration axis of a run, declared beside the run-row key that holds it."""

    name: str  # as `compare --by`, filters and import-spec patterns name it
    label: str  # the heading of its column in tables
    column: str  # the run-row key that holds it: a runs column, or a derived one (`sql`)
    read: Callable[[Mapping[str, Any]], Any] | None = None  # its value in a run row [default: row[column]]
    show: Callable[[Any], str] = show_value
    parse: Callable[[Any], Any] = _as_given  # a value as typed: import specs, file names
    numeric: bool = False  # filters compare numbers (`rate=50kpps`, `burst=16`) through `parse`
    pattern: str = r"[^/]+?"  # what it matches in an import spec's file-name pattern
    sql: str | None = None  # a derived column's expression in the runs query (`e`: its experiment)
    # An imported pair's value for the column (None: not a column of an imported run; an
    # imported value of this axis is one of its DuT options), and the value when not given.
    imported: Callable[[Any], Any] | None = None
    import_default: Any = None
    absent: Any = None  # the run-row value of a plain analysis, which has no run
    self_evident: bool = False  # its shown value names itself: labels leave the heading out
    of_the_dut: bool = False  # describes the DuT: left out where the DuT's name tells it

    def value(self, row: Mapping[str, Any]) -> Any:
        """The axis's value in a run row."""
        return self.read(row) if self.read is not None else row.get(self.column)

    def number(self, text: str) -> float:
        """A typed number for a numeric filter (UserError when it is none)."""
        try:
            return float(self.parse(text))
        except UserError as e:  # its reader's own words: a rate without its unit, say
            raise UserError(f"{self.name}={text}: {e}") from None
        except (ValueError, TypeError):
            raise UserError(f"{text!r} is not a number") from None


def _imported_rate(value: Any) -> int:
    """An imported pair's rate: read already (a file name's or the spec's [axes], with its
    unit) into packets per second."""
    return value if isinstance(value, int) and not isinstance(value, bool) else parse_rate_pps(value, what="rate")


def _frame(value: Any) -> str:
    return "–" if value is None else f"{value} B"


def _frame_bytes(value: Any) -> int:
    """A frame size as typed, or as tables show it ("128", "128B", "128 B"): what `_frame`
    writes reads back."""
    return _whole(value.removesuffix("B").rstrip() if isinstance(value, str) else value)


def _virtualization(value: Any) -> str:
    return str(value or "none").upper()


# In table order. DuT options (dut_config) are axes too, placed after the first two.
RUN_AXES: tuple[RunAxis, ...] = (
    RunAxis("dut", "DuT", "dut_name", imported=str, import_default="external", self_evident=True),
    RunAxis("kind", "kind", "dut_kind", imported=str, import_default="external", self_evident=True, of_the_dut=True),
    RunAxis(
        "containment",
        "containment",
        "containment",
        read=_containment,
        imported=lambda v: {"mode": str(v)},
        import_default="unknown",
        absent={},
        self_evident=True,
    ),
    RunAxis(
        "virtualization", "virtualization", "virtualization", show=_virtualization, self_evident=True, of_the_dut=True
    ),
    RunAxis(
        "rate",
        "rate",
        "rate_pps",
        show=_show_rate,
        parse=parse_rate_pps,
        numeric=True,
        pattern=r"[0-9]*\.?[0-9]+[kKmMgG]?",
        # as every rate is read ("50k"); not given: 0, "rate not given" (`experiment/external.py`;
        # never a measured rate)
        imported=_imported_rate,
        self_evident=True,
    ),
    RunAxis(
        "frame_size",
        "frame",
        "frame_size",
        show=_frame,
        parse=_frame_bytes,
        numeric=True,
        pattern="[0-9]+",
        imported=int,
        import_default=0,  # not known
        self_evident=True,
    ),
    RunAxis("burst", "burst", "burst", parse=_whole, numeric=True, pattern="[0-9]+", imported=int, import_default=1),
    RunAxis("flows", "flows", "traffic", read=_flows, parse=_whole, numeric=True, absent={}),
    RunAxis("match_share", "matched", "traffic", read=_match_share, parse=_share, numeric=True, absent={}),
    RunAxis("kernel", "kernel", "kernel", sql="json_extract_string(e.host, '$.kernel')", self_evident=True),
    RunAxis("host", "host", "hostname", sql="json_extract_string(e.host, '$.hostname')", self_evident=True),
)
# Which of several identical runs a run was: not a configuration axis.
REPETITION_AXIS = RunAxis(
    "repetition", "rep.", "repetition", parse=_whole, numeric=True, pattern="[0-9]+", imported=int,
    import_default=0, absent=0,
)  # fmt: skip
# The experiment a run belongs to: for `--by experiment` and `experiment=3`, never part of a
# configuration by default (runs of several experiments pool as repetitions).
EXPERIMENT_AXIS = RunAxis("experiment", "experiment", "experiment_id", parse=_whole, numeric=True)


def _host_state(row: Mapping[str, Any]) -> Any:
    return (row.get("host_state") or {}).get("id")


# The host's tuning when a run started (host/state.py's short id): `--by host_state` and
# `host_state=ID`, never part of a configuration by default (an IRQ that appears between two
# repetitions must not split them); `lowtail tune` compares by it.
HOST_STATE_AXIS = RunAxis("host_state", "host state", "host_state", read=_host_state, absent=None)

# One flow of a run (store/analyses.py's `analysis_flows`, by its label): `compare --by flow`
# splits each run into its flows (compare/flows.py), never part of a configuration by default.
FLOW_AXIS = RunAxis("flow", "flow", "flow", absent=None)
# One hop of a chain run (store/chains.py, "1. fw"): `compare --by hop` splits each chain run
# into its hops (compare/hops.py), never part of a configuration by default.
HOP_AXIS = RunAxis("hop", "hop", "hop", absent=None)

ALL_AXES: tuple[RunAxis, ...] = (*RUN_AXES, REPETITION_AXIS, EXPERIMENT_AXIS, HOST_STATE_AXIS, FLOW_AXIS, HOP_AXIS)
# The axes an import spec fills columns of (the others become DuT options).
IMPORTED_AXES: tuple[RunAxis, ...] = tuple(a for a in ALL_AXES if a.imported is not None)
DERIVED_AXES: tuple[RunAxis, ...] = tuple(a for a in ALL_AXES if a.sql is not None)


def axis_named(name: str) -> RunAxis | None:
    """The declared axis called `name` (DuT options are not declared: they are the run's own)."""
    return next((a for a in ALL_AXES if a.name == name), None)


def derived_columns_sql() -> str:
    """The derived axis columns of the runs query: `expression AS column`, comma-separated."""
    return ", ".join(f"{a.sql} AS {a.column}" for a in DERIVED_AXES)


def analysis_as_run(analysis: Mapping[str, Any]) -> RunRow:
    """A plain analysis (`lowtail analyze`, no run) as a run row, with every axis column at its
    absent value: no experiment, no DuT settings, its own label as DuT, and the rate it was
    sent at when `analyze --rate` said (a measured rate is a measurement, never an axis: runs
    of 100,001 and 100,002 packets a second are repetitions of one 100 kpps configuration)."""
    nominal = (analysis.get("figures") or {}).get("nominal_rate_pps")
    rate = round(nominal) if nominal else None
    row: dict[str, object] = {
        **analysis,
        **{a.column: a.absent for a in ALL_AXES},
        "run_id": None,
        "dut_name": analysis.get("label") or f"analysis {analysis['analysis_id']}",
        "dut_kind": "analysis",
        "dut_config": {},
        "calibration": False,
        "valid": True,
        "invalid_reasons": [],
        "rate_pps": rate,
    }
    # An analysis row has the run row's figure columns; the run's own ones are set above.
    return cast("RunRow", row)
