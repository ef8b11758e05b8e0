"""The experiment file: a TOML document whose lists span a sweep.

    [experiment]  name, duration ("auto" or a time), warmup, repetitions, calibrate, calibration, keep_captures,
                  trace (the kernel trace of the roles' cores that `lowtail explain` reads; default true)
    [traffic]     rates (list), frame_size, burst, flows, match_share (each a number or a list),
                  flow_weights (one per flow), udp_dst_port
    [cores]       generator, capture, housekeeping, dut (optional: the core plan)
    [verdict]     percentile, budget, max_loss (the URLLC verdict in reports)
    [trust]       max_stall, max_pacing_p99 (when the generator's pacing marks a run degraded)
    [testbed]     kind (namespaces, interfaces, hosts) and its wiring (testbed/wiring.py)
    [[dut]]       name, kind, the kind's options (a list sweeps over its values), and on
                  real wiring the DuT's `interfaces` (in, out)
    chain         (a top-level key, before the tables) the [[dut]] names in the order traffic
                  passes them, e.g. chain = ["fw", "ips", "fwd"]: every run measures them in
                  sequence, with a capture on every link (docs/chains.md)

Every mistake is a UserError naming the file and, where it can be found, the line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from lowtail._native import FRAME_SIZES, MAX_FLOW_WEIGHT, check_flow_weights
from lowtail.core import files, schema
from lowtail.core.errors import UserError
from lowtail.core.units import format_rate_setting, parse_duration_ns, parse_rate_pps
from lowtail.testbed import wiring
from lowtail.testbed.document import CHAIN, ChainOptions, DutOptions, Hop, NoOptions, options_json
from lowtail.testbed.duts import KINDS
from lowtail.verdict.judge import Verdict, VerdictSettingError, VerdictTable, parse_verdict

if TYPE_CHECKING:
    from lowtail.experiment.document import ExperimentFile
    from lowtail.testbed.cores import CoreChoices

DEFAULT_NAME = "default.toml"

# Frame sizes on the wire, FCS included (RFC 2544): the frame crate's definition.
MIN_FRAME, MAX_FRAME = FRAME_SIZES
# `duration = "auto"`: each run measures long enough for the verdict to be able to PASS at
# its own rate — the packets whose largest bounds the percentile at the verdict's confidence
# (`Verdict.packets_needed`, 299,572 for 99.999 % at 95 %) — times this margin: the
# dispersion a run of independent packets measures for itself (about 1.2, up to 1.6: the
# bound allows for its being estimated, see compare/intervals.py), and a few packets lost
# or at the trim's edge; rounded up to AUTO_STEP_NS.
AUTO_DURATION = "auto"
AUTO_MARGIN = 1.6
AUTO_STEP_NS = 100_000_000
MIN_DURATION_NS = 100_000_000


def auto_duration_ns(rate_pps: int, packets_needed: int) -> int:
    """The measured time a run at `rate_pps` needs for `packets_needed` packets after the
    warm-up, with AUTO_MARGIN to spare, in whole steps of AUTO_STEP_NS."""
    ns = packets_needed * AUTO_MARGIN / rate_pps * 1e9
    return max(MIN_DURATION_NS, -(-int(ns) // AUTO_STEP_NS) * AUTO_STEP_NS)


@dataclass(frozen=True)
class Traffic:
    rate_pps: int
    frame_size: int
    burst: int
    flows: int
    udp_dst_port: int
    # The share of packets (0 to 1, chosen by id) that carry the marker an IPS rule matches.
    match_share: float = 0.0
    # Each flow's weight, one per flow (empty: round robin): flow i sends weight i of every
    # sum-of-weights packets (lowtail_frame::FlowSchedule).
    flow_weights: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trust:
    """When a run is marked degraded: its figures stand (the PRE capture stamps every frame
    as it left), but the DuT did not get the traffic the file asked for.

    max_stall_ns: the longest a burst may leave after its due time. A generator kept off its
    core that long sends the overdue bursts back to back on its return: at rate r the DuT
    sees about r × stall frames at once instead of evenly spaced ones.
    max_pacing_p99_ns: the 99th percentile of the bursts' pacing error: beyond it more than
    1 % of the traffic left late enough to change what the DuT saw."""

    max_stall_ns: int = 1_000_000
    max_pacing_p99_ns: int = 100_000


@dataclass(frozen=True)
class DutConfig:
    name: str
    kind: str
    options: DutOptions  # the kind's struct (its `Dut.Options`), checked when the file was read
    # The DuT's in and out interfaces on real wiring (an `interfaces` or `hosts` testbed).
    interfaces: tuple[str, ...] | None = None
    # A chain (kind CHAIN): its DuTs in the order traffic passes them, each one configuration.
    hops: tuple[DutConfig, ...] = ()

    @property
    def calibration(self) -> bool:
        return self.kind == "wire"

    @property
    def parts(self) -> tuple[DutConfig, ...]:
        """The DuTs a run of this configuration starts: a chain's hops, else itself."""
        return self.hops or (self,)


WIRE = DutConfig("wire", "wire", NoOptions())


@dataclass(frozen=True)
class Combination:
    """One run: a DuT configuration, one traffic point, one repetition."""

    dut: DutConfig
    traffic: Traffic
    repetition: int

    @property
    def key(self) -> str:
        """Stable across invocations of the same experiment: resuming skips stored keys."""
        traffic = dict(self.traffic.__dict__)
        if not self.traffic.match_share:  # only then: the keys of runs stored before stay the same
            del traffic["match_share"]
        if self.traffic.flow_weights:
            traffic["flow_weights"] = list(self.traffic.flow_weights)
        else:  # only then: the keys of runs stored before stay the same
            del traffic["flow_weights"]
        doc = {
            "dut": self.dut.name,
            "kind": self.dut.kind,
            "options": options_json(self.dut.options),
            "traffic": traffic,
            "repetition": self.repetition,
        }
        if self.dut.interfaces:  # only then: the keys of runs stored before stay the same
            doc["interfaces"] = list(self.dut.interfaces)
        digest = hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
        t = self.traffic
        matching = f"/m{t.match_share:g}" if t.match_share else ""
        weighted = "w" if t.flow_weights else ""
        return (
            f"{self.dut.name}/{t.rate_pps}pps/{t.frame_size}B/b{t.burst}/f{t.flows}{weighted}{matching}"
            f"/r{self.repetition}/{digest}"
        )


@dataclass
class Experiment:
    name: str
    source: str
    duration_ns: int | None  # None: "auto", decided per rate by measured_ns
    warmup_ns: int
    drain_ns: int
    repetitions: int
    calibrate: bool
    # The experiment (an id in the same database) whose calibration runs are the floor,
    # instead of this one's own.
    calibration: int | None
    keep_captures: bool
    traffic: list[Traffic]
    duts: list[DutConfig]
    cores: CoreChoices  # the [cores] table: the roles the file pins, each a core (the DuT a list)
    verdict: Verdict
    trust: Trust
    raw: ExperimentFile = field(repr=False, default_factory=dict)
    testbed: wiring.Wiring = field(default_factory=wiring.Namespaces)
    # Record the kernel trace of the roles' cores during each run (trace/run.py).
    trace: bool = True

    def measured_ns(self, traffic: Traffic) -> int:
        """The measured time (after the warm-up) of a run at this traffic point: the file's
        duration, or with "auto" enough for the verdict's percentile at its rate."""
        if self.duration_ns is not None:
            return self.duration_ns
        return auto_duration_ns(traffic.rate_pps, self.verdict.packets_needed)

    def traffic_ns(self, traffic: Traffic) -> int:
        """How long traffic flows in a run at this point: warm-up, measured time, drain."""
        return self.warmup_ns + self.measured_ns(traffic) + self.drain_ns

    def combinations(self) -> list[Combination]:
        """Calibration first (the floor every result is read against), then each DuT
        configuration over every traffic point, `repetitions` times each."""
        duts = ([WIRE] if self.calibrate else []) + self.duts
        return [Combination(d, t, r) for d in duts for t in self.traffic for r in range(self.repetitions)]

    @property
    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def as_json(self) -> ExperimentFile:
        return self.raw


# -- parsing -------------------------------------------------------------------------------------------


def default_text() -> str:
    """The embedded default experiment file (default.toml, packaged beside this module)."""
    return resources.files("lowtail.experiment").joinpath(DEFAULT_NAME).read_text()


def example_names() -> list[str]:
    """The example experiment files packaged in experiment/examples/ (`--print-example NAME`)."""
    folder = resources.files("lowtail.experiment").joinpath("examples")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def example_text(name: str) -> str:
    """An example experiment file; UserError naming the examples there are."""
    if name not in example_names():
        raise UserError(f"no example {name!r} (examples: {', '.join(example_names())})")
    return resources.files("lowtail.experiment").joinpath("examples", f"{name}.toml").read_text()


def load(path: Path | None) -> Experiment:
    """Read an experiment file (None: the embedded default experiment)."""
    if path is None:
        return parse(default_text(), f"(embedded {DEFAULT_NAME})")
    data = files.read_input(path, "experiment file", schema.MAX_TEXT_BYTES)
    return parse(schema.decode_text(data, str(path)), str(path))


def _name(path: schema.Path) -> str:
    """A field as the experiment file's messages name it: `[traffic]` for a table, the key
    (`frame_size`) for a key of a table, with what lies under it (`testbed.loadgen.ssh`)."""
    keys = [p for p in path if isinstance(p, str)]
    if len(path) == 1:
        return f"[{path[0]}]"
    if len(keys) <= 2:
        return keys[-1] if keys else "(the file)"
    return ".".join(keys[1:])


class _Where:
    """Turns a problem with a key into a message naming the file and the key's line."""

    def __init__(self, text: str, source: str):
        self.lines = schema.TomlLines(text)
        self.source = source

    def line_of(self, section: str, key: str | None, index: int = 0) -> int | None:
        """Line of `key` in the `index`-th `[section]`/`[[section]]` table (best effort)."""
        tables: list[str | int] = list(section.split("."))
        path: schema.Path = (tables[0], index, *tables[1:]) if index else tuple(tables)
        return self.lines.line((*path, key) if key is not None else path)

    def error(self, message: str, section: str, key: str | None = None, index: int = 0) -> UserError:
        line = self.line_of(section, key, index)
        return schema.InputError(self.source, message, line, (section, *([key] if key else [])))

    def convert(self, doc: Any, type_: Any, prefix: schema.Path = ()) -> Any:
        """`doc` (found at `prefix` in the file) as `type_`, or the error at its line."""
        return schema.convert(doc, type_, self.source, self.lines.line, prefix, _name)


# -- the file's tables as types (msgspec: strict, unknown keys refused, ranges) ----------------


# A sweep's list may not be empty; its items say their own rule.
_NOT_EMPTY = schema.rule(": an empty list sweeps over nothing", min_length=1)
MAX_RATE = 100_000_000
MAX_RUNS = 100_000  # runs one file may declare: more is a typo (or an attack), not a sweep
# A rate with its unit ("50kpps", "50k", "1.2Mpps"): read by units.parse_rate_pps, the reader
# options and selections use, then held to 1 … MAX_RATE (`_rates`).
_Rate = Annotated[schema.UnitValue, schema.with_unit("rate")]
_FrameSize = Annotated[
    int, schema.rule(f"must be whole numbers from {MIN_FRAME:,} to {MAX_FRAME:,}", ge=MIN_FRAME, le=MAX_FRAME)
]
_Burst = Annotated[int, schema.rule("must be whole numbers from 1 to 1,000,000", ge=1, le=1_000_000)]
_Flows = Annotated[int, schema.rule("must be whole numbers from 1 to 65,535", ge=1, le=65_535)]
_FlowWeight = Annotated[
    int, schema.rule(f"must be whole numbers from 1 to {MAX_FLOW_WEIGHT:,}", ge=1, le=MAX_FLOW_WEIGHT)
]
_Share = Annotated[
    float, schema.rule("must be numbers from 0 to 1 (the share of packets an IPS rule matches)", ge=0, le=1)
]
_Port = Annotated[int, schema.rule("must be a whole number from 1 to 65,535", ge=1, le=65_535)]
_Repetitions = Annotated[int, schema.rule("must be a whole number from 1 to 1,000,000", ge=1, le=1_000_000)]
_Duration = Annotated[schema.UnitValue, schema.with_unit("duration")]
_Flag = Annotated[bool, schema.rule("must be true or false")]
_ExperimentId = Annotated[
    int, schema.rule("must be an experiment id whose calibration runs are the floor", ge=1, le=schema.INT64_MAX)
]
_Name = Annotated[str, schema.rule("must be a non-empty string", min_length=1, max_length=200)]
# The most DuTs one chain may hold: each is a namespace, a DuT and a captured link.
MAX_HOPS = 16


class _ExperimentTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: _Name | None = None
    duration: _Duration = AUTO_DURATION
    warmup: _Duration = "1s"
    drain: _Duration = "200ms"
    repetitions: _Repetitions = 1
    calibrate: _Flag | None = None
    calibration: _ExperimentId | None = None
    keep_captures: _Flag = True
    trace: _Flag = True


class _TrafficTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    rates: Annotated[list[_Rate], _NOT_EMPTY] | _Rate
    frame_size: _FrameSize | Annotated[list[_FrameSize], _NOT_EMPTY] = 64
    burst: _Burst | Annotated[list[_Burst], _NOT_EMPTY] = 1
    flows: _Flows | Annotated[list[_Flows], _NOT_EMPTY] = 1
    match_share: _Share | Annotated[list[_Share], _NOT_EMPTY] = 0.0
    flow_weights: Annotated[list[_FlowWeight], _NOT_EMPTY] | None = None
    udp_dst_port: _Port = 53


_Core = Annotated[int, schema.rule("must be a core number", ge=0, le=65_535)]


class _CoresTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    generator: _Core | None = None
    capture: _Core | None = None
    housekeeping: _Core | None = None
    dut: Annotated[list[_Core], schema.rule("takes a list of cores, e.g. dut = [1]")] | None = None


class _TrustTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    max_stall: _Duration | None = None
    max_pacing_p99: _Duration | None = None


class _ExperimentFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    experiment: _ExperimentTable = msgspec.field(default_factory=_ExperimentTable)
    traffic: Annotated[dict[str, object], schema.rule("must be a table")] = msgspec.field(default_factory=dict)
    cores: _CoresTable = msgspec.field(default_factory=_CoresTable)
    verdict: VerdictTable = msgspec.field(default_factory=VerdictTable)
    trust: _TrustTable = msgspec.field(default_factory=_TrustTable)
    testbed: Annotated[dict[str, object], schema.rule("must be a table")] | None = None  # testbed/wiring.py
    dut: Annotated[list[dict[str, object]], schema.rule(": DuTs are declared as [[dut]] tables (double brackets)")] = (
        msgspec.field(default_factory=list)
    )  # checked by each kind
    chain: (
        Annotated[
            list[Annotated[str, schema.rule("must name [[dut]] tables", min_length=1, max_length=40)]],
            schema.rule('must list [[dut]] names in order, e.g. chain = ["fw", "ips", "fwd"]', max_length=MAX_HOPS),
        ]
        | None
    ) = None


_SECTIONS = _ExperimentFile.__struct_fields__
# `chain` is a key of the file itself, not a table.
_TABLES = tuple(s for s in _SECTIONS if s != CHAIN)


def _sweep(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _flow_weights(traffic: _TrafficTable, w: _Where) -> tuple[int, ...]:
    """`[traffic] flow_weights`: one per flow, for one number of flows (a sweep over `flows`
    would need weights per point)."""
    if traffic.flow_weights is None:
        return ()
    if isinstance(traffic.flows, list):
        raise w.error("flow_weights needs one number of flows, not a sweep over flows", "traffic", "flow_weights")
    if len(traffic.flow_weights) != traffic.flows:
        raise w.error(
            f"flow_weights has {len(traffic.flow_weights)} weights for {traffic.flows} flows: one per flow",
            "traffic",
            "flow_weights",
        )
    try:
        check_flow_weights(traffic.flow_weights)
    except ValueError as e:
        raise w.error(str(e), "traffic", "flow_weights") from None
    return tuple(traffic.flow_weights)


def _rate(value: schema.UnitValue, w: _Where) -> int:
    """One of [traffic] rates in packets per second, 1 … MAX_RATE."""
    try:
        rate = parse_rate_pps(value, what="rates")
    except UserError as e:
        raise w.error(str(e), "traffic", "rates") from None
    if not 1 <= rate <= MAX_RATE:
        raise w.error(f"rates must be from 1pps to {format_rate_setting(MAX_RATE)}, not {value!r}", "traffic", "rates")
    return rate


def with_calibration(exp: Experiment, calibration: int) -> Experiment:
    """The experiment with another's calibration runs as its floor (`run --calibration ID`):
    it then measures no calibration of its own, as a file naming one does not."""
    return dataclasses.replace(exp, calibration=calibration, calibrate=False)


def parse(text: str, source: str) -> Experiment:
    """An experiment from the text of its TOML file; `source` names the file in errors."""
    doc = schema.load_toml(text, source)
    w = _Where(text, source)
    for section in doc:
        if section not in _SECTIONS:
            known = ", ".join("[" + s + "]" for s in _TABLES)
            import difflib  # only when a section is mistyped

            close = difflib.get_close_matches(section, list(_TABLES), n=1)
            hint = f"did you mean [{close[0]}]? " if close else ""
            raise w.error(f"unknown section [{section}] ({hint}known: {known})", section)
    if isinstance(doc.get("dut"), dict):
        raise w.error("DuTs are declared as [[dut]] tables (double brackets)", "dut")
    tables: _ExperimentFile = w.convert(doc, _ExperimentFile)
    exp = tables.experiment
    try:
        traffic: _TrafficTable = w.convert(tables.traffic, _TrafficTable, ("traffic",))
    except schema.InputError as e:
        if e.path == ("traffic",) and e.reason.endswith("needs `rates`"):
            raise w.error('[traffic] needs `rates`, e.g. rates = ["10kpps", "50kpps"]', "traffic") from None
        raise

    def duration(key: str, value: schema.UnitValue, minimum_ns: int) -> int:
        try:
            ns = parse_duration_ns(value, what=key)
        except UserError as e:
            raise w.error(str(e), "experiment", key) from None
        if ns < minimum_ns:
            raise w.error(f"{key} must be at least {minimum_ns / 1e9:g} s", "experiment", key)
        return ns

    name = exp.name if exp.name is not None else (Path(source).stem if not source.startswith("(") else "default")
    if not name.strip():
        raise w.error("name must be a non-empty string", "experiment", "name")
    rates = [_rate(v, w) for v in _sweep(traffic.rates)]
    sweep = [rates, *(_sweep(v) for v in (traffic.frame_size, traffic.burst, traffic.flows, traffic.match_share))]
    if math.prod(map(len, sweep)) > MAX_RUNS:  # counted before the points are built
        raise w.error(
            f"[traffic] sweeps over {math.prod(map(len, sweep)):,} traffic points; lowtail runs at most {MAX_RUNS:,} "
            f"from one file",
            "traffic",
        )
    weights = _flow_weights(traffic, w)
    points = [
        Traffic(r, f, b, n, traffic.udp_dst_port, float(m), weights) for r, f, b, n, m in itertools.product(*sweep)
    ]
    testbed = _parse_testbed(doc.get("testbed"), w)
    # A calibration run replaces the DuT with a wire, which lowtail can make only in its own testbed.
    # A calibration run replaces the DuT with a wire, which lowtail can make only in its own
    # testbed; an experiment naming another's calibration as its floor measures none of its own.
    calibrate = exp.calibrate if exp.calibrate is not None else testbed.kind == "namespaces" and exp.calibration is None
    if calibrate and exp.calibration is not None:
        raise w.error(
            f"calibrate = true and calibration = {exp.calibration} ask for two floors: keep calibration = "
            f"{exp.calibration} (experiment {exp.calibration}'s calibration runs) or calibrate = true (measure one now)",
            "experiment",
            "calibrate",
        )
    if calibrate and testbed.kind != "namespaces":
        raise w.error(
            f"calibrate = true needs a wire in the DuT's place, which lowtail makes only on a namespaces testbed "
            f"(this one is {testbed.kind}): set calibrate = false, and calibrate on your wiring with a cable "
            f"as an external DuT",
            "experiment",
            "calibrate",
        )
    duts = _parse_duts(tables.dut, w, testbed)
    if tables.chain is not None:
        duts = _parse_chain(tables.chain, duts, w, testbed)
    if isinstance(testbed, wiring.Interfaces) and testbed.vlans is not None:
        _check_vlans(testbed, testbed.vlans, duts, tables.chain, w)
    if not duts and not calibrate:
        raise w.error("nothing to run: add a [[dut]] table (or keep calibrate = true)", "experiment")
    runs = len(points) * (len(duts) + calibrate) * exp.repetitions
    if runs > MAX_RUNS:
        raise w.error(
            f"the file declares {runs:,} runs (traffic points × DuT configurations × repetitions); "
            f"lowtail runs at most {MAX_RUNS:,} from one file",
            "experiment",
        )
    return Experiment(
        name=name.strip(),
        source=source,
        duration_ns=None if exp.duration == AUTO_DURATION else duration("duration", exp.duration, MIN_DURATION_NS),
        warmup_ns=duration("warmup", exp.warmup, 0),
        drain_ns=duration("drain", exp.drain, 0),
        repetitions=exp.repetitions,
        calibrate=calibrate,
        calibration=exp.calibration,
        keep_captures=exp.keep_captures,
        trace=exp.trace,
        traffic=points,
        duts=duts,
        # A hosts testbed's cores are the remote hosts': checked once they are reached.
        cores=_parse_cores(_table(doc, "cores"), w, check_here=testbed.kind != "hosts"),
        verdict=_parse_verdict(_table(doc, "verdict"), w),
        trust=_parse_trust(tables.trust, w),
        raw=doc,
        testbed=testbed,
    )


def _parse_testbed(table: Any, w: _Where) -> wiring.Wiring:
    base = Path(w.source).parent if not w.source.startswith("(") else Path.cwd()
    try:
        return wiring.parse(table, base)
    except wiring.WiringError as e:
        raise w.error(str(e), e.table, e.key) from None


def _parse_duts(tables: Any, w: _Where, testbed: wiring.Wiring) -> list[DutConfig]:
    if not isinstance(tables, list):
        raise w.error("DuTs are declared as [[dut]] tables (double brackets)", "dut")
    configs: list[DutConfig] = []
    names: set[str] = set()
    for index, table in enumerate(tables):
        table = dict(table)
        # Each list where one value is expected sweeps over its values: their product is the
        # number of configurations, counted before the kind builds them.
        product = math.prod(len(v) for v in table.values() if isinstance(v, list) and v)
        if product > MAX_RUNS:
            raise w.error(
                f"[[dut]] {index + 1} sweeps over {product:,} configurations; lowtail runs at most {MAX_RUNS:,} "
                f"from one file",
                "dut",
                None,
                index,
            )
        name, kind = table.pop("name", None), table.pop("kind", None)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}", name):
            raise w.error(
                f"every [[dut]] needs a name of letters, digits, '-', '_', '.' (got {name!r})",
                "dut",
                "name" if name is not None else None,
                index,
            )
        if name in names or name == "wire":
            raise w.error(
                f"DuT name {name!r} is {'reserved for calibration' if name == 'wire' else 'used twice'}",
                "dut",
                "name",
                index,
            )
        names.add(name)
        if not isinstance(kind, str) or kind not in KINDS:
            raise w.error(
                f"DuT {name!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})",
                "dut",
                "kind" if kind is not None else None,
                index,
            )
        cls = KINDS[kind]
        interfaces = _dut_interfaces(table.pop("interfaces", None), name, cls, testbed, w, index)
        try:
            expanded = cls.expand(table)
        except ValueError as e:
            bad_key = next((k for k in table if repr(k) in str(e)), None)
            raise w.error(f"DuT {name!r} ({kind}): {e}", "dut", bad_key, index) from None
        if testbed.kind == "hosts" and any(o.contained() for o in expanded):
            raise w.error(
                f"DuT {name!r}: containment on another host is not supported (only bare)", "dut", "containment", index
            )
        configs += [DutConfig(name, kind, options, interfaces) for options in expanded]
    return configs


def _parse_chain(names: list[str], duts: list[DutConfig], w: _Where, testbed: wiring.Wiring) -> list[DutConfig]:
    """The chain's configurations: its DuTs in order, one configuration of each per chain
    (a [[dut]] that sweeps makes one chain per value, their product over the hops)."""
    declared = list(dict.fromkeys(d.name for d in duts))
    for name in names:
        if name not in declared:
            known = ", ".join(repr(n) for n in declared) or "none: declare each as a [[dut]] table"
            hint = schema.did_you_mean(name, declared)
            raise w.error(f"chain names {name!r}, which no [[dut]] declares ({hint}declared: {known})", CHAIN, None)
    if len(names) < 2:
        raise w.error(
            f"a chain needs at least two DuTs (this one has {len(names)}); for one DuT leave `chain` out", CHAIN, None
        )
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise w.error(
            f"chain names {repeated!r} {names.count(repeated)} times: each hop is a DuT of its own, "
            f"declare another [[dut]] with its own name",
            CHAIN,
            None,
        )
    unused = [n for n in declared if n not in names]
    if unused:
        raise w.error(
            f"[[dut]] {', '.join(map(repr, unused))} {'is' if len(unused) == 1 else 'are'} not in the chain: "
            f"with `chain` every DuT is a hop (add it to the chain or remove its table)",
            CHAIN,
            None,
        )
    if testbed.kind == "hosts":
        raise w.error(
            'a chain runs on the namespaces testbed or on this host\'s interfaces ([testbed] kind = "interfaces" '
            "with one VLAN id per link), not on a hosts testbed",
            CHAIN,
            None,
        )
    if isinstance(testbed, wiring.Interfaces) and testbed.vlans is None:
        raise w.error(
            f"a chain on real wiring has one VLAN id per link over one physical loop: [testbed] vlans = "
            f"[...] with {len(names) + 1} ids (PRE, the links between the DuTs, POST)",
            CHAIN,
            None,
        )
    configurations = [[d for d in duts if d.name == name] for name in names]
    if math.prod(map(len, configurations)) > MAX_RUNS:
        raise w.error(f"the chain's DuTs sweep over more than {MAX_RUNS:,} configurations", CHAIN, None)
    return [chain_config(hops) for hops in itertools.product(*configurations)]


def _check_vlans(
    testbed: wiring.Interfaces, vlans: tuple[int, ...], duts: list[DutConfig], chain: list[str] | None, w: _Where
) -> None:
    """One VLAN id per link: two for one DuT, one more than a chain's DuTs; every VLAN
    sub-interface's name one the kernel takes."""
    links = len(chain) + 1 if chain else 2
    if len(vlans) != links:
        what = f"a chain of {len(chain)} DuTs has {links} links" if chain else "one DuT has two links (PRE, POST)"
        raise w.error(f"vlans lists {len(vlans)} ids: {what}, one VLAN id each", "testbed", "vlans")
    try:
        for parent in (testbed.generator, testbed.pre, testbed.post):
            for vlan in vlans:
                wiring.vlan_interface(parent, vlan)
        for dut in duts:
            for hop in dut.parts:
                for parent in hop.interfaces or ():
                    for vlan in vlans:
                        wiring.vlan_interface(parent, vlan)
    except wiring.WiringError as e:
        raise w.error(str(e), "testbed", "vlans") from None


def chain_config(hops: tuple[DutConfig, ...]) -> DutConfig:
    """One configuration of a chain: named after its hops ("fw+ips+fwd"), its options each
    hop's name, kind and options (what the run's combination key and the stored run hold)."""
    return DutConfig(
        "+".join(h.name for h in hops),
        CHAIN,
        ChainOptions(hops=[Hop(h.name, h.kind, h.options) for h in hops]),
        hops=hops,
    )


def _dut_interfaces(
    value: Any, name: str, cls: Any, testbed: wiring.Wiring, w: _Where, index: int
) -> tuple[str, ...] | None:
    """A DuT's in and out interfaces: named on real wiring, made by lowtail on its own."""
    if testbed.kind not in cls.testbeds:
        needs = " or ".join(cls.testbeds)
        raise w.error(
            f"DuT {name!r}: kind {cls.kind} runs on a {needs} testbed, not on this {testbed.kind} one",
            "dut",
            "kind",
            index,
        )
    if testbed.kind == "namespaces":
        if value is not None:
            raise w.error(
                f'DuT {name!r}: interfaces are named only on real wiring ([testbed] kind = "interfaces" or '
                f'"hosts"); on the namespaces testbed the DuT gets in0 and out0',
                "dut",
                "interfaces",
                index,
            )
        return None
    if value is None:
        if cls.kind == "external":
            return None
        raise w.error(
            f"DuT {name!r}: on real wiring a DuT names the interfaces it forwards between, "
            f'e.g. interfaces = ["eth2", "eth3"] (in, out)',
            "dut",
            None,
            index,
        )
    if not isinstance(value, list) or len(value) != 2:
        raise w.error(f"DuT {name!r}: interfaces takes two names (in, out), not {value!r}", "dut", "interfaces", index)
    try:
        return tuple(wiring.interface_name(v, "dut", "interfaces") for v in value)
    except wiring.WiringError as e:
        raise w.error(f"DuT {name!r}: {e}", "dut", "interfaces", index) from None


def _table(doc: Mapping[str, object], name: str) -> Mapping[str, object]:
    """One table of the file as TOML read it ({} where the file has none): its keys are
    checked by the table's own parser."""
    table = doc.get(name, {})
    return table if isinstance(table, dict) else {}


def _parse_cores(table: Mapping[str, object], w: _Where, check_here: bool = True) -> dict[str, int | list[int]]:
    from lowtail.testbed.cores import CoreRoles

    available = set(CoreRoles.available()) if check_here else None
    cores: dict[str, int | list[int]] = {}
    for key, value in table.items():
        if key == "dut" and not isinstance(value, list):
            raise w.error("dut takes a list of cores, e.g. dut = [1]", "cores", key)
        values: list[object] = value if key == "dut" and isinstance(value, list) else [value]
        checked: list[int] = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (available is not None and v not in available):
                where = (
                    f"(available: {', '.join(map(str, sorted(available)))})"
                    if available is not None
                    else "(a core number)"
                )
                raise w.error(f"{key}: core {v!r} is not one this process may use {where}", "cores", key)
            checked.append(v)
        cores[key] = checked if key == "dut" else checked[0]
    return cores


def _parse_verdict(table: Mapping[str, object], w: _Where) -> Verdict:
    try:
        return parse_verdict(table)
    except VerdictSettingError as e:
        raise w.error(str(e), "verdict", e.key) from None


def _parse_trust(table: _TrustTable, w: _Where) -> Trust:
    values = {}
    for key, field_name, given in (
        ("max_stall", "max_stall_ns", table.max_stall),
        ("max_pacing_p99", "max_pacing_p99_ns", table.max_pacing_p99),
    ):
        if given is not None:
            try:
                values[field_name] = parse_duration_ns(given, what=key)
            except UserError as e:
                raise w.error(str(e), "trust", key) from None
    return Trust(**values)
