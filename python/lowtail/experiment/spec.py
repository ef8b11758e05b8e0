"""The experiment file: a TOML document whose lists span a sweep.

    [experiment]  name, duration ("auto" or a time), warmup, repetitions, calibrate, calibration, keep_captures,
                  trace (the kernel trace of the roles' cores that `lowtail explain` reads; default true)
    [traffic]     rates (list), frame_size, burst, flows (each a number or a list), udp_dst_port
    [cores]       generator, capture, housekeeping, dut (optional: the core plan)
    [verdict]     percentile, budget, max_loss (the URLLC verdict in reports)
    [trust]       max_stall, max_pacing_p99 (when the generator's pacing marks a run degraded)
    [testbed]     kind (namespaces, interfaces, hosts) and its wiring (testbed/wiring.py)
    [[dut]]       name, kind, the kind's options (a list sweeps over its values), and on
                  real wiring the DuT's `interfaces` (in, out)

Every mistake is a UserError naming the file and, where it can be found, the line.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from lowtail._native import FRAME_SIZES
from lowtail.errors import UserError
from lowtail.testbed import wiring
from lowtail.testbed.kinds import KINDS
from lowtail.units import parse_duration_ns
from lowtail.verdict import SETTINGS as VERDICT_SETTINGS
from lowtail.verdict import Verdict, VerdictSettingError, parse_verdict

DEFAULT_NAME = "default.toml"

_SECTIONS = {
    "experiment": {
        "name",
        "duration",
        "warmup",
        "repetitions",
        "calibrate",
        "calibration",
        "keep_captures",
        "drain",
        "trace",
    },
    "traffic": {"rates", "frame_size", "burst", "flows", "udp_dst_port"},
    "cores": {"generator", "capture", "housekeeping", "dut"},
    "verdict": set(VERDICT_SETTINGS),
    "trust": {"max_stall", "max_pacing_p99"},
    "testbed": None,  # checked by testbed/wiring.py
    "dut": None,  # checked by the kind
}
# Frame sizes on the wire, FCS included (RFC 2544): the frame crate's definition.
MIN_FRAME, MAX_FRAME = FRAME_SIZES
# `duration = "auto"`: each run measures long enough for the verdict's percentile at its own
# rate, with this much more (a few packets lost or at the trim's edge must not leave it
# one short: "inconclusive"), rounded up to AUTO_STEP_NS.
AUTO_DURATION = "auto"
AUTO_MARGIN = 1.1
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
    options: dict[str, Any]
    # The DuT's in and out interfaces on real wiring (an `interfaces` or `hosts` testbed).
    interfaces: tuple[str, ...] | None = None

    @property
    def calibration(self) -> bool:
        return self.kind == "wire"


WIRE = DutConfig("wire", "wire", {})


@dataclass(frozen=True)
class Combination:
    """One run: a DuT configuration, one traffic point, one repetition."""

    dut: DutConfig
    traffic: Traffic
    repetition: int

    @property
    def key(self) -> str:
        """Stable across invocations of the same experiment: resuming skips stored keys."""
        doc = {
            "dut": self.dut.name,
            "kind": self.dut.kind,
            "options": self.dut.options,
            "traffic": self.traffic.__dict__,
            "repetition": self.repetition,
        }
        if self.dut.interfaces:  # only then: the keys of runs stored before stay the same
            doc["interfaces"] = list(self.dut.interfaces)
        digest = hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
        t = self.traffic
        return f"{self.dut.name}/{t.rate_pps}pps/{t.frame_size}B/b{t.burst}/f{t.flows}/r{self.repetition}/{digest}"


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
    cores: dict[str, Any]
    verdict: Verdict
    trust: Trust
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
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

    def as_json(self) -> dict[str, Any]:
        return self.raw


# -- parsing -------------------------------------------------------------------------------------------


def default_text() -> str:
    """The embedded default experiment file (default.toml, packaged beside this module)."""
    return resources.files("lowtail.experiment").joinpath(DEFAULT_NAME).read_text()


def load(path: Path | None) -> Experiment:
    """Read an experiment file (None: the embedded default experiment)."""
    if path is None:
        return parse(default_text(), f"(embedded {DEFAULT_NAME})")
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such experiment file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the experiment file ({e})") from None
    return parse(text, str(path))


class _Where:
    """Turns a problem with a key into a message naming the file and the key's line."""

    def __init__(self, text: str, source: str):
        self.lines = text.splitlines()
        self.source = source

    def line_of(self, section: str, key: str | None, index: int = 0) -> int | None:
        """Line of `key` in the `index`-th `[section]`/`[[section]]` table (best effort)."""
        header = re.compile(rf"^\s*\[\[?\s*{re.escape(section)}\s*\]\]?\s*(#.*)?$")
        seen, inside = -1, False
        for number, line in enumerate(self.lines, 1):
            if re.match(r"^\s*\[", line):
                inside = bool(header.match(line))
                if inside:
                    seen += 1
                    if key is None and seen == index:
                        return number
                continue
            if inside and seen == index and key is not None and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
                return number
        return None

    def error(self, message: str, section: str, key: str | None = None, index: int = 0) -> UserError:
        line = self.line_of(section, key, index)
        where = f"{self.source} line {line}" if line else self.source
        return UserError(f"{where}: {message}")


def parse(text: str, source: str) -> Experiment:
    """An experiment from the text of its TOML file; `source` names the file in errors."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # tomllib says "... (at line 7, column 12)": lead with the place, as compilers do.
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(e))
        if m:
            where = f"{source} line {m.group(1)}, column {m.group(2)}"
        elif "end of document" in str(e):
            where = f"{source} line {len(text.splitlines()) or 1} (end of file)"
        else:
            where = source
        raise UserError(f"{where}: not valid TOML: {reason}") from None
    w = _Where(text, source)
    for section, value in doc.items():
        if section not in _SECTIONS:
            raise w.error(
                f"unknown section [{section}] (known: {', '.join('[' + s + ']' for s in _SECTIONS)})", section
            )
        allowed = _SECTIONS[section]
        if allowed is not None:
            if not isinstance(value, dict):
                raise w.error(f"[{section}] must be a table", section)
            for key in value:
                if key not in allowed:
                    raise w.error(
                        f"unknown key {key!r} in [{section}] (known: {', '.join(sorted(allowed))})", section, key
                    )
    exp = doc.get("experiment", {})
    traffic = doc.get("traffic", {})

    def duration(key: str, default: str, minimum_ns: int) -> int:
        try:
            ns = parse_duration_ns(exp.get(key, default))
        except UserError as e:
            raise w.error(f"{key}: {e}", "experiment", key) from None
        if ns < minimum_ns:
            raise w.error(f"{key} must be at least {minimum_ns / 1e9:g} s", "experiment", key)
        return ns

    def number(table: dict[str, Any], section: str, key: str, default: Any, lo: int, hi: int, many: bool) -> list[int]:
        value = table.get(key, default)
        values = value if isinstance(value, list) else [value]
        if not many and isinstance(value, list):
            raise w.error(f"{key} takes one value, not a list", section, key)
        if not values:
            raise w.error(f"{key}: an empty list sweeps over nothing", section, key)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise w.error(f"{key} must be whole numbers from {lo:,} to {hi:,}, not {v!r}", section, key)
        return values

    name = exp.get("name", Path(source).stem if not source.startswith("(") else "default")
    if not isinstance(name, str) or not name.strip():
        raise w.error("name must be a non-empty string", "experiment", "name")
    if "rates" not in traffic:
        raise w.error("[traffic] needs `rates`, e.g. rates = [10000, 50000] (packets per second)", "traffic")
    rates = number(traffic, "traffic", "rates", None, 1, 100_000_000, many=True)
    frames = number(traffic, "traffic", "frame_size", 64, MIN_FRAME, MAX_FRAME, many=True)
    bursts = number(traffic, "traffic", "burst", 1, 1, 1_000_000, many=True)
    flows = number(traffic, "traffic", "flows", 1, 1, 65_535, many=True)
    (port,) = number(traffic, "traffic", "udp_dst_port", 53, 1, 65_535, many=False)
    points = [Traffic(r, f, b, n, port) for r, f, b, n in itertools.product(rates, frames, bursts, flows)]
    (repetitions,) = number(exp, "experiment", "repetitions", 1, 1, 1_000_000, many=False)
    for key in ("calibrate", "keep_captures", "trace"):
        if not isinstance(exp.get(key, True), bool):
            raise w.error(f"{key} must be true or false", "experiment", key)

    calibration = exp.get("calibration")
    if calibration is not None and (
        isinstance(calibration, bool) or not isinstance(calibration, int) or calibration < 1
    ):
        raise w.error(
            f"calibration must be an experiment id whose calibration runs are the floor (got {calibration!r})",
            "experiment",
            "calibration",
        )
    testbed = _parse_testbed(doc.get("testbed"), w)
    # A calibration run replaces the DuT with a wire, which lowtail can make only in its own testbed.
    calibrate = exp.get("calibrate", testbed.kind == "namespaces")
    if calibrate and testbed.kind != "namespaces":
        raise w.error(
            f"calibrate = true needs a wire in the DuT's place, which lowtail makes only on a namespaces testbed "
            f"(this one is {testbed.kind}): set calibrate = false, and calibrate on your wiring with a cable "
            f"as an external DuT",
            "experiment",
            "calibrate",
        )
    duts = _parse_duts(doc.get("dut", []), w, testbed)
    if not duts and not calibrate:
        raise w.error("nothing to run: add a [[dut]] table (or keep calibrate = true)", "experiment")
    return Experiment(
        name=name.strip(),
        source=source,
        duration_ns=None
        if exp.get("duration", AUTO_DURATION) == AUTO_DURATION
        else duration("duration", AUTO_DURATION, MIN_DURATION_NS),
        warmup_ns=duration("warmup", "1s", 0),
        drain_ns=duration("drain", "200ms", 0),
        repetitions=repetitions,
        calibrate=calibrate,
        calibration=calibration,
        keep_captures=exp.get("keep_captures", True),
        trace=exp.get("trace", True),
        traffic=points,
        duts=duts,
        # A hosts testbed's cores are the remote hosts': checked once they are reached.
        cores=_parse_cores(doc.get("cores", {}), w, check_here=testbed.kind != "hosts"),
        verdict=_parse_verdict(doc.get("verdict", {}), w),
        trust=_parse_trust(doc.get("trust", {}), w),
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
        if kind not in KINDS:
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
        if testbed.kind == "hosts" and any(o.get("containment", "bare") != "bare" for o in expanded):
            raise w.error(
                f"DuT {name!r}: containment on another host is not supported (only bare)", "dut", "containment", index
            )
        configs += [DutConfig(name, kind, options, interfaces) for options in expanded]
    return configs


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


def _parse_cores(table: dict[str, Any], w: _Where, check_here: bool = True) -> dict[str, Any]:
    from lowtail.testbed.cores import CoreRoles

    available = set(CoreRoles.available()) if check_here else None
    cores: dict[str, Any] = {}
    for key, value in table.items():
        values = value if key == "dut" else [value]
        if key == "dut" and not isinstance(value, list):
            raise w.error("dut takes a list of cores, e.g. dut = [1]", "cores", key)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (available is not None and v not in available):
                where = (
                    f"(available: {', '.join(map(str, sorted(available)))})"
                    if available is not None
                    else "(a core number)"
                )
                raise w.error(f"{key}: core {v!r} is not one this process may use {where}", "cores", key)
        cores[key] = value
    return cores


def _parse_verdict(table: dict[str, Any], w: _Where) -> Verdict:
    try:
        return parse_verdict(table)
    except VerdictSettingError as e:
        raise w.error(str(e), "verdict", e.key) from None


def _parse_trust(table: dict[str, Any], w: _Where) -> Trust:
    values = {}
    for key, field_name in (("max_stall", "max_stall_ns"), ("max_pacing_p99", "max_pacing_p99_ns")):
        if key in table:
            try:
                values[field_name] = parse_duration_ns(table[key])
            except UserError as e:
                raise w.error(f"{key}: {e}", "trust", key) from None
    return Trust(**values)
