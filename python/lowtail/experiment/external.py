"""Campaigns of PRE/POST capture pairs made by other tools (MoonGen/MoonSniff, tcpdump, a
hardware timestamper), imported as a stored experiment (`lowtail import-captures`).

A small TOML file says what each pair is, by its file names:

    [import]
    name = "fw campaign"                                   # the experiment's name
    pattern = "{dut}-{rate}pps-r{repetition}-{side}.pcap"  # relative to the directory
    pre = "pre"                                            # the {side} values [default: pre, post]
    post = "post"
    [axes]                                                 # values every pair shares
    kernel = "6.1.0-rt"
    containment = "container"
    host = "dut-1"
    [analysis]                                             # as `lowtail analyze`'s options
    trim = "1s"
    id_format = "moonsniff"
    [verdict]                                              # as in an experiment file
    [interrupts]                                           # optional: /proc/interrupts samples per pair
    guest = "{dut}-{rate}pps-r{repetition}-irq-guest.csv"  # the guest's (a VM DuT), by the pairs' axes
    host = "{dut}-{rate}pps-r{repetition}-irq-host.csv"    # this host's, or the VM host's
    irq_period = "1s"                                      # how often the samples were taken
    dut_cpu = 2                                            # the DuT's CPU (the guest's with a guest file)
    host_cpu = 5                                           # with a guest: the VM host's CPU under the DuT

Every `{axis}` of the pattern becomes a value of the pair; files that differ only in
`{side}` are a pair; a name ending in .zst or .gz matches the pattern without it. Axes fill the columns of a run as lowtail's own runs have them — `dut`
(the DuT's name), `kind` (external unless given), `rate` (50kpps, 50k; in a file name the unit
may follow in the pattern, `{rate}pps`; "rate not given" when absent: a measured rate is no axis), `frame_size`, `burst`, `repetition`, `containment` — and every
other axis goes into the run's DuT options (`dut_config`), where comparisons find it; all
of them are kept under the run's `testbed.axes`.

One pair is analysed by `analyse_pair` and stored as a run by `store_pair`: the two halves
a campaign on many workers reuses (analysis where the data lies, storing in one process).

A pair's interrupt recordings ([interrupts]: files named by the pairs' axes, without {side};
experiment/irq_recordings.py reads both the studies' shape and lowtail's own) are stored as
the run's interrupt samples — the guest's as source "guest", the other as "host" — with what
was read of them (period, the DuT's CPU, wraps, resets) in the run's `testbed.interrupts`;
`lowtail explain` and `model aliasing` use them at their resolution. A pair whose recording
is missing or unreadable is stored without it, and the import says so.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec

from lowtail.analyze.document import AnalyzeOptionsDocument
from lowtail.analyze.pair import AnalysisDocument, analyze_options, analyze_pair
from lowtail.core import files, schema
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.core.units import parse_duration_ns
from lowtail.core.version import __version__
from lowtail.experiment.document import ExperimentFile, ExperimentHost
from lowtail.experiment.irq_recordings import read_recording
from lowtail.experiment.runner import is_disk_full
from lowtail.host.interrupts import InterruptSample
from lowtail.store import records
from lowtail.store import runs as runstore
from lowtail.store.db import Store
from lowtail.store.host import save_run_interrupts
from lowtail.store.records import RunRecord
from lowtail.testbed.document import TestbedDocument
from lowtail.verdict.judge import VerdictSettingError, VerdictTable, parse_verdict

SIDE = "side"
_COMPRESSED = re.compile(r"\.(zst|zstd|gz)$")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# `lowtail analyze`'s options by their [analysis] names (durations as people write them).
_ANALYSIS_KEYS = {
    "id_format": "id_format",
    "id_offset": "id_offset",
    "id_width": "id_width",
    "id_endian": "id_endian",
    "udp_port": "udp_port",
    "moonsniff_records": "moonsniff_records",
    "trim": "trim_ns",
    "max_latency": "max_latency_ns",
    "worst": "worst",
    "histogram_bins": "histogram_bins",
}


# A pair's configuration: axis name -> value, from its file name's pattern and the spec's [axes]
# (a declared axis's value parsed by it, `store.records.RUN_AXES`; any other is a DuT option,
# kept as given: a string, number or boolean).
AxisValues = dict[str, object]


@dataclass(frozen=True)
class ImportSpec:
    """What a campaign's files are: the pattern of their names, shared axes, analysis options."""

    source: str
    name: str | None
    pattern: str
    sides: dict[str, str]  # the {side} value in a file name -> "pre" | "post"
    axes: AxisValues
    analysis: dict[str, str | int | bool]  # AnalyzeOptions keyword arguments, checked
    raw: ExperimentFile = field(repr=False, default_factory=dict)  # the spec's tables as TOML read them
    interrupts: InterruptFiles | None = None

    def with_unit(self, axis: str, text: str) -> str:
        """A value read from a file name with the unit the pattern writes after it: with
        "{rate}pps", the file's "50000" is "50000pps" (a rate without its unit is refused,
        as everywhere: `lowtail help units`)."""
        if records.axis_named(axis) is not records.axis_named("rate"):
            return text
        after = self.pattern.partition("{" + axis + "}")[2]
        unit = re.match(r"[kKmMgG]?pps", after)
        return text + unit.group(0) if unit else text

    @property
    def regex(self) -> re.Pattern[str]:
        """The pattern as a regular expression over a path relative to the directory."""
        return _pattern_regex(self.pattern, self.sides)


@dataclass(frozen=True)
class InterruptFiles:
    """[interrupts]: each pair's interrupt recordings by file-name pattern (source "guest" and
    "host"), how often they were sampled, and the DuT's CPU in them."""

    patterns: dict[str, str]  # source -> pattern over the pairs' axes
    period_ns: int
    dut_cpu: int | None
    host_cpu: int | None

    def cpu_of(self, source: str) -> int | None:
        """The DuT's CPU in the recording of `source`: the guest's, or the host's when there is
        no guest recording (with one, the host's CPU under the DuT is `host_cpu`)."""
        if source == "guest" or "guest" not in self.patterns:
            return self.dut_cpu
        return self.host_cpu


def _pattern_regex(pattern: str, sides: Mapping[str, str]) -> re.Pattern[str]:
    """A file-name pattern as a regular expression over a path relative to the directory."""
    parts, last = [], 0
    for m in _PLACEHOLDER.finditer(pattern):
        axis = m.group(1)
        parts.append(re.escape(pattern[last : m.start()]))
        if axis == SIDE:
            body = "|".join(re.escape(s) for s in sorted(sides, key=len, reverse=True))
        else:
            # Numbers for the numeric axes (the store declares each), else up to the next literal text.
            declared = records.axis_named(axis)
            body = declared.pattern if declared is not None and declared.imported else r"[^/]+?"
        parts.append(f"(?P<{axis}>{body})")
        last = m.end()
    parts.append(re.escape(pattern[last:]))
    return re.compile("".join(parts))


_Text = Annotated[str, schema.rule("must be a non-empty string", min_length=1, max_length=1000)]
_AxisValue = Annotated[str | int | float | bool, schema.rule("must be a string, number or boolean")]


class _ImportTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pattern: Annotated[
        str, schema.rule('needs a file-name pattern, e.g. "{dut}-{rate}pps-r{repetition}-{side}.pcap"', min_length=1)
    ]
    name: _Text | None = None
    pre: _Text = "pre"
    post: _Text = "post"


class _AnalysisTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`lowtail analyze`'s options by their [analysis] names; the native options check ranges."""

    id_format: _Text | None = None
    id_offset: Annotated[int, schema.rule("must be a whole number ≥ 0", ge=0, le=schema.INT64_MAX)] | None = None
    id_width: Annotated[int, schema.rule("must be 4 or 8", ge=0, le=64)] | None = None
    id_endian: _Text | None = None
    udp_port: Annotated[int, schema.rule("must be a port from 0 to 65,535", ge=0, le=65_535)] | None = None
    moonsniff_records: Annotated[bool, schema.rule("must be true or false")] | None = None
    trim: Annotated[schema.UnitValue, schema.with_unit("duration")] | None = None
    max_latency: Annotated[schema.UnitValue, schema.with_unit("duration")] | None = None
    worst: Annotated[int, schema.rule("must be a whole number ≥ 0", ge=0, le=schema.INT64_MAX)] | None = None
    histogram_bins: Annotated[int, schema.rule("must be a whole number ≥ 1", ge=1, le=schema.INT64_MAX)] | None = None


_Cpu = Annotated[int, schema.rule("must be a CPU number (a whole number from 0 to 99,999)", ge=0, le=99_999)]


class _InterruptsTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """[interrupts]: the pairs' interrupt recordings."""

    guest: _Text | None = None
    host: _Text | None = None
    irq_period: Annotated[str, schema.rule('must be a duration such as "1s"', min_length=1, max_length=100)] | None = (
        None
    )
    dut_cpu: _Cpu | None = None
    host_cpu: _Cpu | None = None


class _SpecFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    # Optional here so that a spec without it gets the example, not msgspec's words.
    import_: _ImportTable | None = msgspec.field(default=None, name="import")
    axes: dict[str, object] = msgspec.field(default_factory=dict)  # each value converted on its own
    analysis: _AnalysisTable = msgspec.field(default_factory=_AnalysisTable)
    verdict: VerdictTable = msgspec.field(default_factory=VerdictTable)
    interrupts: _InterruptsTable | None = None


_SPEC_SECTIONS = ("import", "axes", "analysis", "verdict", "interrupts")


def _spec_name(path: schema.Path) -> str:
    keys = [str(p) for p in path if isinstance(p, str)]
    if len(path) == 1:
        return f"[{path[0]}]"
    return f"[{keys[0]}] {'.'.join(keys[1:])}" if len(keys) > 1 else "(the spec)"


def load_spec(path: Path) -> ImportSpec:
    """Read an import spec; a UserError names the file, the line and what is wrong."""
    data = files.read_input(path, "import spec", schema.MAX_TEXT_BYTES)
    text = schema.decode_text(data, str(path))
    return parse_spec(schema.load_toml(text, str(path)), str(path), schema.TomlLines(text).line)


def parse_spec(doc: dict[str, object], source: str, locate: schema.Locator | None = None) -> ImportSpec:
    """An import spec from its TOML document; `source` names it in errors, `locate` finds a
    field's line."""

    def bad(message: str, *path: str | int) -> UserError:
        return schema.InputError(source, message, locate(path) if locate and path else None, path)

    for section in doc:
        if section not in _SPEC_SECTIONS:
            raise bad(
                f"unknown section [{section}] (known: [import], [axes], [analysis], [verdict], [interrupts])", section
            )
    tables: _SpecFile = schema.convert(doc, _SpecFile, source, locate, names=_spec_name)
    table = tables.import_
    if table is None:
        raise bad('[import] needs `pattern`, e.g. pattern = "{dut}-{rate}pps-r{repetition}-{side}.pcap"')
    pattern = table.pattern
    axes_in_pattern = _PLACEHOLDER.findall(pattern)
    for axis in axes_in_pattern:
        if not _AXIS_NAME.match(axis):
            raise bad(f"pattern: {{{axis}}} is not an axis name (letters, digits and _)", "import", "pattern")
    if SIDE not in axes_in_pattern:
        raise bad("pattern: needs {side}, the part of a file name that tells PRE from POST", "import", "pattern")
    repeated = {a for a in axes_in_pattern if axes_in_pattern.count(a) > 1}
    if repeated:
        raise bad(f"pattern: {{{sorted(repeated)[0]}}} appears twice", "import", "pattern")
    sides = {table.pre: "pre", table.post: "post"}
    if len(sides) != 2:
        raise bad("[import] pre and post must be two different non-empty names", "import", "post")
    if table.name is not None and not table.name.strip():
        raise bad("[import] name must be a non-empty string", "import", "name")
    axes: AxisValues = {}
    for axis, value in tables.axes.items():
        if not _AXIS_NAME.match(axis) or axis == SIDE:
            raise bad(f"[axes] {axis!r} is not an axis name", "axes", axis)
        if axis in axes_in_pattern:
            raise bad(f"[axes] {axis} is also in the pattern: give it in one place", "axes", axis)
        value = schema.convert(value, _AxisValue, source, locate, ("axes", axis), _spec_name)
        try:
            axes[axis] = _axis_value(axis, value)
        except UserError as e:
            raise bad(f"[axes] {axis}: {e}", "axes", axis) from None
    analysis: dict[str, str | int | bool] = {}
    for key, value in msgspec.structs.asdict(tables.analysis).items():
        if value is None:
            continue
        try:
            analysis[_ANALYSIS_KEYS[key]] = (
                parse_duration_ns(value, what=f"[analysis] {key}") if key in ("trim", "max_latency") else value
            )
        except UserError as e:
            raise bad(str(e), "analysis", key) from None
    try:
        analyze_options(**analysis)  # out-of-range values: one error now, not one per pair
    except UserError as e:
        raise bad(f"[analysis] {e}", "analysis") from None
    try:
        verdict = doc.get("verdict", {})  # a table: the conversion above checked it is one
        parse_verdict(verdict if isinstance(verdict, dict) else {})
    except VerdictSettingError as e:
        raise bad(f"[verdict] {e}", "verdict", e.key) from None
    name = table.name.strip() if table.name else None
    interrupts = None if tables.interrupts is None else _interrupt_files(tables.interrupts, axes_in_pattern, bad)
    return ImportSpec(source, name, pattern, sides, axes, analysis, raw=doc, interrupts=interrupts)


def _interrupt_files(table: _InterruptsTable, pair_axes: list[str], bad: Callable[..., UserError]) -> InterruptFiles:
    """[interrupts] checked: at least one pattern, each naming only axes of the pairs' pattern
    (a recording belongs to the pairs whose axes it names), a sampling period, and a DuT CPU."""
    patterns = {source: p for source, p in (("guest", table.guest), ("host", table.host)) if p is not None}
    if not patterns:
        raise bad('[interrupts] needs `guest` or `host`: the pattern of each pair\'s recording file, e.g. '
                  'host = "{dut}-{rate}pps-r{repetition}-irq.csv"', "interrupts")  # fmt: skip
    for source, p in patterns.items():
        named = _PLACEHOLDER.findall(p)
        unknown = [a for a in named if a == SIDE or a not in pair_axes]
        if unknown:
            raise bad(
                f"[interrupts] {source}: {{{unknown[0]}}} is not an axis of the captures' pattern "
                f"({', '.join('{' + a + '}' for a in pair_axes if a != SIDE)})",
                "interrupts",
                source,
            )
    if table.irq_period is None:
        raise bad('[interrupts] needs irq_period, how often the samples were taken (e.g. "1s")', "interrupts")
    try:
        period = parse_duration_ns(table.irq_period, what="[interrupts] irq_period")
    except UserError as e:
        raise bad(str(e), "interrupts", "irq_period") from None
    if not 1_000_000 <= period <= 3_600 * 1_000_000_000:
        raise bad("[interrupts] irq_period must be between 1ms and 1h", "interrupts", "irq_period")
    if table.dut_cpu is None:
        raise bad("[interrupts] needs dut_cpu, the CPU the DuT ran on in the recording", "interrupts")
    if table.host_cpu is not None and "guest" not in patterns:
        raise bad(
            "[interrupts] host_cpu is the VM host's CPU under a guest: give `guest` too", "interrupts", "host_cpu"
        )
    return InterruptFiles(patterns, period, table.dut_cpu, table.host_cpu)


def _axis_value(axis: str, value: Any) -> Any:
    """A value of an axis as the run stores it: the declared axes that are columns of an
    imported run parse theirs (`rate` 50k, whole numbers: ASCII digits, in range); any other
    is kept as given."""
    declared = records.axis_named(axis)
    return declared.parse(value) if declared is not None and declared.imported else value


# -- finding the pairs ---------------------------------------------------------------------------


@dataclass
class Pair:
    """One PRE/POST pair of a campaign and its axis values."""

    axes: AxisValues
    pre: Path
    post: Path
    # Its interrupt recordings by source ("guest", "host"), where the spec names them.
    interrupts: dict[str, Path] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Stable across imports of the same campaign: resuming skips stored keys."""
        return "import/" + "/".join(f"{k}={self.axes[k]}" for k in sorted(self.axes))

    @property
    def label(self) -> str:
        """The pair as messages name it: its PRE file."""
        return self.pre.name


@dataclass
class Campaign:
    """The pairs of a directory, and the files that make no pair."""

    pairs: list[Pair] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)  # one line per capture without its other half
    ignored: list[str] = field(default_factory=list)  # files whose names do not match the pattern


def find_pairs(directory: Path, spec: ImportSpec) -> Campaign:
    """The pairs of `directory` (searched recursively) by the spec's pattern."""
    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory")
    regex = spec.regex
    halves: dict[tuple[tuple[str, Any], ...], dict[str, list[Path]]] = {}
    campaign = Campaign()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory).as_posix()
        # Compressed captures read like plain ones: their names match the plain pattern too.
        m = regex.fullmatch(relative) or regex.fullmatch(_COMPRESSED.sub("", relative))
        if m is None:
            campaign.ignored.append(relative)
            continue
        try:
            values = {
                axis: _axis_value(axis, spec.with_unit(axis, v)) for axis, v in m.groupdict().items() if axis != SIDE
            }
        except UserError as e:
            campaign.unpaired.append(f"{relative}: {e}")
            continue
        side = spec.sides[m.group(SIDE)]
        halves.setdefault(tuple(sorted(values.items())), {}).setdefault(side, []).append(path)
    for key, sides in halves.items():
        names = {side: ", ".join(p.relative_to(directory).as_posix() for p in paths) for side, paths in sides.items()}
        if any(len(paths) > 1 for paths in sides.values()):
            campaign.unpaired.append(f"{'; '.join(names.values())}: more than one file for the same side of one pair")
        elif set(sides) != {"pre", "post"}:
            (have,) = sides
            missing = "POST" if have == "pre" else "PRE"
            campaign.unpaired.append(f"{names[have]}: no {missing} capture to pair it with")
        else:
            campaign.pairs.append(Pair(dict(key) | spec.axes, sides["pre"][0], sides["post"][0]))
    if spec.interrupts is not None:
        _find_recordings(directory, spec.interrupts, campaign.pairs, campaign)
    return campaign


def _find_recordings(directory: Path, irq: InterruptFiles, pairs: list[Pair], campaign: Campaign) -> None:
    """Each pair's interrupt recordings: the file of each source whose name carries the pair's
    values of the axes its pattern names. The files are no captures: taken out of `ignored`."""
    taken: set[str] = set()
    for source, pattern in irq.patterns.items():
        regex = _pattern_regex(pattern, {})
        found: dict[tuple[tuple[str, Any], ...], Path] = {}
        for relative in campaign.ignored:
            m = regex.fullmatch(relative)
            if m is not None:
                values = {axis: _axis_value(axis, v) for axis, v in m.groupdict().items()}
                found[tuple(sorted(values.items()))] = directory / relative
                taken.add(relative)
        axes = _PLACEHOLDER.findall(pattern)
        for pair in pairs:
            path = found.get(tuple(sorted((a, pair.axes[a]) for a in axes if a in pair.axes)))
            if path is not None:
                pair.interrupts[source] = path
    campaign.ignored = [f for f in campaign.ignored if f not in taken]


# -- one pair: analysed, then stored -------------------------------------------------------------


def analyse_pair(pair: Pair, spec: ImportSpec, series: Path | None) -> tuple[AnalysisDocument, AnalyzeOptionsDocument]:
    """The analysis of one pair (its matched series written to `series`) and the options it
    used. Raises UserError for an unreadable capture, Failure when it holds nothing to
    measure, Interrupted on Ctrl-C: runs wherever the captures are."""
    options = analyze_options(**spec.analysis, export=series)
    return analyze_pair(pair.pre, pair.post, options), options.to_dict()


def run_record(
    pair: Pair,
    analysis: Mapping[str, Any],
    experiment_id: int,
    experiment_name: str,
    recordings: Mapping[str, Mapping[str, Any]] | None = None,
) -> RunRecord:
    """The run an analysed pair becomes, with the columns lowtail's own runs have: each axis
    the store declares as a column of an imported run from the pair's value (or its default),
    every other axis one of the run's DuT options; what was read of its interrupt recordings
    (`PairRecordings.facts`) under its testbed's `interrupts`."""
    axes = pair.axes
    columns = {
        a.column: a.imported(axes.get(a.name, a.import_default))
        for a in records.IMPORTED_AXES
        if a.imported is not None and (a.name in axes or a.import_default is not None)
    }
    # Not given: no rate axis ("rate not given"), never the rate the PRE capture shows — a
    # measured rate differs between repetitions of one configuration and would split it. The
    # measurement is kept with the run's traffic.
    span = analysis.get("duration_ns") or 0
    measured = round((analysis["sent"] - 1) * 1e9 / span) if span > 0 and analysis["sent"] > 1 else None
    if "rate" not in axes:
        columns["rate_pps"] = 0
    start = analysis.get("start_ts_ns") or 0
    imported = {a.name for a in records.IMPORTED_AXES}
    return RunRecord(
        **columns,
        label=f"{experiment_name}: {pair.label}",
        experiment_id=experiment_id,
        combination_key=pair.key,
        dut_config={k: v for k, v in axes.items() if k not in imported},
        calibration=False,
        duration_ns=analysis.get("duration_ns") or 0,
        warmup_ns=analysis.get("trim_ns") or 0,
        started_at=datetime.fromtimestamp(start / 1e9),
        finished_at=datetime.fromtimestamp((start + (analysis.get("duration_ns") or 0)) / 1e9),
        series_path=analysis.get("export_path"),
        valid=not analysis.get("partial", False),
        invalid_reasons=[f"the analysis is partial: {'; '.join(analysis.get('warnings', []))}"]
        if analysis.get("partial")
        else [],
        dut_stats={},
        capture_paths=[str(pair.pre.resolve()), str(pair.post.resolve())],
        traffic={"rate_given": "rate" in axes, "measured_rate_pps": measured},
        testbed=_testbed(pair, recordings),
    )


def _testbed(pair: Pair, recordings: Mapping[str, Mapping[str, Any]] | None) -> TestbedDocument:
    """An imported run's testbed: its captures, the axes read from their names, what was read of
    its interrupt recordings."""
    doc = TestbedDocument(kind="imported", axes=pair.axes, pre=str(pair.pre.resolve()), post=str(pair.post.resolve()))
    if recordings:
        doc["interrupts"] = {source: dict(facts) for source, facts in recordings.items()}
    return doc


@dataclass
class PairRecordings:
    """A pair's interrupt recordings as read: each source's samples and facts, and what could
    not be read (one line each)."""

    samples: dict[str, list[InterruptSample]] = field(default_factory=dict)
    facts: dict[str, dict[str, object]] = field(default_factory=dict)  # irq_recordings' facts, by source
    problems: list[str] = field(default_factory=list)


def read_recordings(pair: Pair, spec: ImportSpec, analysis: Mapping[str, Any]) -> PairRecordings:
    """The pair's interrupt recordings ([interrupts]), the studies' rows placed every period
    from the pair's first PRE timestamp. A missing or unreadable file is a problem said, not a
    failure of the pair: its captures are stored without that recording."""
    out = PairRecordings()
    irq = spec.interrupts
    if irq is None:
        return out
    t0 = int(analysis.get("start_ts_ns") or 0)
    for source in irq.patterns:
        path = pair.interrupts.get(source)
        if path is None:
            out.problems.append(f"no {source} interrupt recording matches [interrupts] {source}")
            continue
        try:
            recording = read_recording(path, t0, irq.period_ns)
        except UserError as e:
            out.problems.append(f"{source} interrupt recording not imported: {e}")
            continue
        out.samples[source] = recording.samples
        out.facts[source] = recording.facts() | {
            "file": str(path.resolve()),
            "dut_cpu": irq.cpu_of(source),
            "placed_from_ns": t0 if recording.shape == "studies" else None,
        }
    return out


def store_pair(
    store: Store,
    experiment_id: int,
    experiment_name: str,
    pair: Pair,
    analysis: AnalysisDocument,
    options: AnalyzeOptionsDocument,
    recordings: PairRecordings | None = None,
) -> int:
    """Store an analysed pair as a run of the experiment, with its interrupt recordings as the
    run's interrupt samples (run, analysis and samples in one transaction)."""
    recordings = recordings or PairRecordings()
    record = run_record(pair, analysis, experiment_id, experiment_name, recordings.facts)
    with store.transaction():
        run_id = runstore.save_run(store, record, analysis, options)
        for source, samples in recordings.samples.items():
            save_run_interrupts(store, run_id, samples, source)
    return run_id


# -- the whole campaign --------------------------------------------------------------------------


@dataclass
class ImportResult:
    experiment_id: int
    imported: int
    resumed: int
    failed: list[tuple[str, str]]  # (pair, why)
    unpaired: list[str]
    ignored: list[str]
    already: bool = False  # the same campaign was imported before: nothing done
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (pair, what its analysis said)

    @property
    def partial(self) -> bool:
        """Whether some capture of the campaign is not in the experiment."""
        return bool(self.failed or self.unpaired)


def campaign_hash(directory: Path, spec: ImportSpec) -> str:
    """Identifies one campaign (its directory and spec) for resuming."""
    doc = {"directory": str(directory.resolve()), "spec": spec.raw}
    return "import-" + hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def import_campaign(
    store: Store,
    directory: Path,
    spec: ImportSpec,
    data_dir: Path,
    fresh: bool = False,
    on_pair: Callable[[int, int, Pair], None] = lambda i, n, p: None,
) -> ImportResult:
    """Analyse and store every pair of `directory` not stored yet as runs of one experiment
    (resuming an unfinished import of the same campaign unless `fresh`). Pairs that cannot be
    read are reported and left out; the experiment is then `partial`."""
    campaign = find_pairs(directory, spec)
    if not campaign.pairs and not campaign.unpaired:
        shown = ", ".join(campaign.ignored[:5]) + (" …" if len(campaign.ignored) > 5 else "")
        raise UserError(
            f"no file in {directory} matches the pattern {spec.pattern!r}" + (f" (its files: {shown})" if shown else "")
        )
    spec_hash = campaign_hash(directory, spec)
    latest = None if fresh else runstore.latest_experiment(store, spec_hash)
    if latest is not None and latest["status"] == "finished":
        return ImportResult(latest["experiment_id"], 0, 0, [], campaign.unpaired, campaign.ignored, already=True)
    name = spec.name or directory.resolve().name
    if latest is not None:
        eid = latest["experiment_id"]
        runstore.set_status(store, eid, "running")
    else:
        eid = runstore.create_experiment(
            store,
            name,
            spec.raw | {"imported": {"directory": str(directory.resolve()), "pattern": spec.pattern}},
            spec_hash,
            _host(directory, spec),
            "",
        )
        runstore.set_data_dir(store, eid, str((data_dir / f"experiment-{eid}").resolve()))
    name = runstore.experiment(store, eid)["name"]
    done = runstore.done_keys(store, eid)
    todo = [p for p in campaign.pairs if p.key not in done]
    failed: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    series_dir = data_dir / f"experiment-{eid}"
    try:
        for i, pair in enumerate(todo):
            on_pair(i, len(todo), pair)
            series_dir.mkdir(parents=True, exist_ok=True)
            series = series_dir / f"{_safe(pair.key)}.parquet"
            try:
                analysis, options = analyse_pair(pair, spec, series)
            except (UserError, Failure) as e:
                if is_disk_full(e):  # the disk, not the pair: stop (what is stored stays)
                    raise Failure(
                        f"disk full while writing results ({e}); free some space and run the same command again "
                        f"to resume (imported pairs are kept)"
                    ) from None
                failed.append((pair.label, str(e)))
                continue
            recordings = read_recordings(pair, spec, analysis)
            store_pair(store, eid, name, pair, analysis, options, recordings)
            warnings += [(pair.label, w) for w in [*analysis.get("warnings", []), *recordings.problems]]
    except (KeyboardInterrupt, Interrupted):
        runstore.set_status(store, eid, "interrupted")
        raise Interrupted(
            f"interrupted: {len(runstore.done_keys(store, eid))} of {len(campaign.pairs)} pairs of experiment {eid} "
            f"are stored; run the same command again to resume"
        ) from None
    except BaseException:
        runstore.set_status(store, eid, "failed")
        raise
    result = ImportResult(
        eid,
        len(todo) - len(failed),
        len(campaign.pairs) - len(todo),
        failed,
        campaign.unpaired,
        campaign.ignored,
        warnings=warnings,
    )
    runstore.set_status(store, eid, "partial" if result.partial else "finished")
    return result


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", key)


def _text(value: object) -> str | None:
    """An axis value as the host's text field it fills ("host", "kernel"; None when not given)."""
    return None if value is None else str(value)


def _host(directory: Path, spec: ImportSpec) -> ExperimentHost:
    """What is known of where the captures came from: the directory and the shared axes."""
    axes = spec.axes
    return {
        "imported_from": str(directory.resolve()),
        "axes": axes,
        "hostname": _text(axes.get("host")),
        "kernel": _text(axes.get("kernel")),
        "testbed": "imported",
        "lowtail_version": __version__,
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }
