"""`kind = "suricata"`: Suricata as an inline IPS between the DuT's two interfaces — the
security function of the URLLC IPS studies (Commun. Mag. 2020 and NOMS 2020 measured Snort 3,
JNSM 2023 Suricata), as a forwarder (`rules = "none"`) and as a filter (a rule set whose DNS
rules the traffic's UDP port 53 triggers, Commun. Mag. 2020, §"Measurement Setup").

Suricata runs in AF_PACKET IPS mode (`copy-mode: ips`, each interface copying to the
other) with the workers run mode: one thread per interface receives, decodes, inspects and
sends a frame on, pinned to the DuT's cores (`worker-cpu-set`); its management threads
(flow manager and recycler, statistics, the unix socket) and its main thread go to a
housekeeping core where the host has one off the DuT's cores. Its configuration is written
per run into the run's directory (`suricata.yaml`, stored with the run's data) and checked
with `suricata -T` before the sweep starts, so a rules file with a syntax error is one
clear error before any traffic. A run waits for Suricata's own "Engine started" before the
testbed's forwarding probe and the traffic.

Rule sets (`rules`):

    none        no rules: the IPS as a plain forwarder (every frame still decoded, its flow
                tracked, its application layer parsed)
    default     the rule files Debian's package ships in /etc/suricata/rules (decoder,
                stream and application-layer events; suricata-update, which fetches the
                Emerging Threats set, cannot reach the internet here)
    N           N generated rules on UDP port `port`, every one a candidate for every test
                frame and none matching (see `generate_rules`): the rule cost grows with N;
                the last of them matches the packets `[traffic] match_share` marks
    a file      the user's rules, copied into the run's data and hashed

`action` is what every rule of the set does when it matches: `alert` (the frame goes on,
an alert is counted and logged) or `drop` (it is dropped). Suricata's own counters are
stored with the run (`SuricataCounters`), and a run where Suricata's sockets dropped frames,
or where it saw fewer frames than were sent, is invalid and says so.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict

import msgspec

from lowtail import _native
from lowtail.core.errors import Failure, UserError
from lowtail.core.processes import exit_code, wait_for
from lowtail.core.terminal import shown
from lowtail.testbed.cores import DUT_RT_PRIORITY, CoreRoles, housekeeping_cores
from lowtail.testbed.document import DEFAULT_RULES, NO_RULES, DutCounters, DutOptions, RulesValue, SuricataOptions
from lowtail.testbed.duts.base import Dut
from lowtail.testbed.duts.options import (
    PROCESS_OPTIONS,
    ChoiceOption,
    DurationOption,
    IntOption,
    RuleSet,
    RulesOption,
)
from lowtail.testbed.process import Program
from lowtail.testbed.protocol import Testbed
from lowtail.testbed.system import tool
from lowtail.testbed.vm.image import ImageLayer

PACKAGE = "suricata"
DEBIAN_RULES = Path("/etc/suricata/rules")
CLASSIFICATION = Path("/etc/suricata/classification.config")
REFERENCE = Path("/etc/suricata/reference.config")
ACTIONS = ("alert", "drop")
# Rule ids of generated rules: the range local rules may use (1000000-1999999).
FIRST_SID = 1_000_000
READY_LINE = "Engine started"
# The most rules a set may hold, and what each costs Suricata 7 to load (`suricata -T` of
# generated rules here: 20,000 rules 159 MiB of peak memory, none 27 MiB: about 6.6 KiB each).
MAX_RULES = 100_000
BYTES_PER_RULE = 7 << 10
# How often a long `suricata -T` or start-up says it is still loading.
PROGRESS_EVERY_S = 10.0
CONFIG, STATS, ALERTS, LOG = "suricata.yaml", "suricata-stats.json", "eve.json", "suricata.log"


def suricata_binary() -> str:
    """The suricata program; UserError naming the package when it is missing."""
    return tool("suricata", PACKAGE)


class SuricataCounters(TypedDict):
    """Suricata's own counters of a run, from its statistics at exit (eve `stats`)."""

    packets: int  # frames decoded (the probe's frames included)
    udp: int  # UDP datagrams decoded: the test traffic
    kernel_packets: int  # frames its AF_PACKET sockets received
    kernel_drops: int  # frames the kernel dropped before Suricata read them
    alerts: int
    accepted: int  # frames sent on (IPS)
    blocked: int  # frames dropped by rules or for another reason (drop_reasons)
    drop_reasons: dict[str, int]  # the non-zero ones
    decoder_events: dict[str, int]  # the non-zero decoder events, by name
    rules_loaded: int
    rules_failed: int


# -- Suricata's eve `stats` record, as far as lowtail reads it ------------------------------------
# Suricata 7 writes a few hundred counters; these structs name the ones `counters` keeps
# (msgspec skips the others). A section Suricata leaves out reads as zeros (`capture` is
# absent when it reads a capture file rather than interfaces); a counter of another type
# than this, or decoder events nested otherwise than by layer, is a Suricata whose
# statistics lowtail cannot read: `EveStatsError`, naming the counter.


class EveDecoder(msgspec.Struct):
    pkts: int = 0
    udp: int = 0
    event: dict[str, dict[str, int]] = {}  # layer → event name → count ("ipv4" → "trunc_pkt" → 2)


class EveCapture(msgspec.Struct):
    kernel_packets: int = 0
    kernel_drops: int = 0


class EveIps(msgspec.Struct):
    accepted: int = 0
    blocked: int = 0
    drop_reason: dict[str, int] = {}


class EveEngine(msgspec.Struct):
    rules_loaded: int = 0
    rules_failed: int = 0


class EveDetect(msgspec.Struct):
    alert: int = 0
    engines: list[EveEngine] = []


class EveStats(msgspec.Struct):
    """An eve `stats` record's "stats" object: the counters lowtail keeps."""

    decoder: EveDecoder = msgspec.field(default_factory=EveDecoder)
    capture: EveCapture = msgspec.field(default_factory=EveCapture)
    ips: EveIps = msgspec.field(default_factory=EveIps)
    detect: EveDetect = msgspec.field(default_factory=EveDetect)


class EveStatsError(Failure):
    """Suricata's statistics are not of the shape lowtail reads (another Suricata version)."""


def eve_stats(stats: object) -> EveStats:
    """An eve `stats` record's "stats" object read into the counters lowtail keeps."""
    try:
        return msgspec.convert(stats, EveStats)
    except msgspec.ValidationError as e:
        raise EveStatsError(f"Suricata's statistics are not of the shape lowtail reads (Suricata 7's): {e}") from None


def counters(stats: EveStats) -> SuricataCounters:
    """The counters lowtail keeps, from one eve `stats` record's "stats" object."""
    decoder, ips = stats.decoder, stats.ips
    engine = stats.detect.engines[0] if stats.detect.engines else EveEngine()
    return SuricataCounters(
        packets=decoder.pkts,
        udp=decoder.udp,
        kernel_packets=stats.capture.kernel_packets,
        kernel_drops=stats.capture.kernel_drops,
        alerts=stats.detect.alert,
        accepted=ips.accepted,
        blocked=ips.blocked,
        drop_reasons={k: v for k, v in ips.drop_reason.items() if v},
        decoder_events={
            f"{layer}.{name}": count
            for layer, events in decoder.event.items()
            for name, count in events.items()
            if count
        },
        rules_loaded=engine.rules_loaded,
        rules_failed=engine.rules_failed,
    )


def last_stats(text: str) -> EveStats | None:
    """The "stats" object of the last eve `stats` record in `text` (Suricata writes one as
    it exits, with the final totals); None when there is none. EveStatsError when it is not
    of the shape lowtail reads."""
    for line in reversed(text.splitlines()):
        try:
            record = msgspec.json.decode(line, type=dict[str, object])
        except msgspec.DecodeError:  # not JSON, or JSON but no object: not a record
            continue
        stats = record.get("stats")
        if isinstance(stats, dict):
            return eve_stats(stats)
    return None


def invalid_reasons(found: SuricataCounters | None, frames_sent: int) -> list[str]:
    """Why Suricata's own counters make a run untrustworthy: frames its sockets lost in the
    kernel, frames it never saw, frames it dropped for another reason than a rule."""
    if found is None:
        return ["Suricata wrote no statistics: whether it saw every frame is unknown"]
    reasons = []
    if found["kernel_drops"]:
        reasons.append(
            f"Suricata's AF_PACKET sockets dropped {found['kernel_drops']:,} frames in the kernel "
            f"(capture.kernel_drops): it fell behind the traffic"
        )
    if found["udp"] < frames_sent:
        reasons.append(f"Suricata saw {found['udp']:,} of the {frames_sent:,} frames sent (decoder.udp)")
    other = {k: v for k, v in found["drop_reasons"].items() if k != "rules"}
    if other:
        said = ", ".join(f"{k} {v:,}" for k, v in sorted(other.items()))
        reasons.append(f"Suricata dropped frames for other reasons than its rules ({said})")
    return reasons


# -- rules ----------------------------------------------------------------------------------------


# One generated rule in this many is a candidate for every test frame (see generate_rules).
CANDIDATE_EVERY = 16
# The rule id of the rule that matches the marked packets (`[traffic] match_share`): the last
# of the local range, above every generated rule's (at most MAX_RULES from FIRST_SID).
MARKER_SID = 1_999_999


def marker_rule(action: str, port: int) -> str:
    """The rule every generated rule set ends with: it matches the packets the generator marks
    (`[traffic] match_share`: the marker right after the id, `_native.MATCH_MARKER`) and none
    other, so alerts (or drops) count exactly the marked packets."""
    marker = "|" + " ".join(f"{b:02X}" for b in _native.MATCH_MARKER) + "|"
    return (
        f'{action} udp any any -> any {port} (msg:"lowtail match marker"; content:"{marker}"; '
        f"offset:{_native.MATCH_MARKER_OFFSET}; depth:{len(_native.MATCH_MARKER)}; sid:{MARKER_SID}; rev:1;)\n"
    )


def marker_rule_action(statistics: Mapping[str, object]) -> str | None:
    """What a run's Suricata did to marked packets, from its stored statistics: its `action`
    where its rule set was generated (and so holds `marker_rule`), else None (no rule of
    lowtail's matches them: no rules, Debian's, a file of the user's, or another kind)."""
    rules = statistics.get("rules")
    if statistics.get("program") != "suricata" or isinstance(rules, bool) or not isinstance(rules, int) or rules < 1:
        return None
    action = statistics.get("action")
    return str(action) if action in ACTIONS else None


def generate_rules(count: int, action: str, port: int) -> str:
    """`count` rules on UDP port `port`: `count − 1` that Suricata evaluates against the test
    traffic and that match none of it (no alert, no drop, only their cost), and last
    `marker_rule`, which matches only the packets `[traffic] match_share` marks (none unless
    asked). `count` is what Suricata loads, as a rule set of that size.

    The test traffic's UDP payload is lowtail's 64-bit big-endian sequence id followed by
    zeros (crates/lowtail-frame), so its first four bytes are zero for the first 2³² frames.
    Suricata's multi-pattern prefilter keeps a rule for full inspection only when the rule's
    fast pattern occurs in the frame. One rule in `CANDIDATE_EVERY` has those four zero bytes
    as its fast pattern: it is a candidate for every frame and is checked in full — by a second
    content that is not there or, every other time, a regular expression that fails at its
    last literal. The others have a fast pattern the traffic never carries, which the
    prefilter discards. So a frame meets N/16 full rule checks and an automaton of N patterns,
    as a frame meets a few rules of a large real rule set, and the cost grows with N (a full
    check costs about 0.2 µs of Suricata 7's time here: 1,000 rules are about 13 µs a frame)."""
    lines = []
    for i in range(count - 1):
        if i % CANDIDATE_EVERY == 0:
            check = (
                f'content:"|00 00 00 00|"; depth:4; fast_pattern; content:"lowtail-{i}"; distance:0;'
                if i % (2 * CANDIDATE_EVERY) == 0
                else f'content:"|00 00 00 00|"; depth:4; fast_pattern; pcre:"/^.{{8}}\\x00*lowtail-{i}/s";'
            )
        else:
            check = f'content:"lowtail-rule-{i}";'
        lines.append(
            f'{action} udp any any -> any {port} (msg:"lowtail generated rule {i}"; {check} '
            f"sid:{FIRST_SID + i}; rev:1;)"
        )
    return "".join(f"{line}\n" for line in lines) + (marker_rule(action, port) if count else "")


_ACTION_WORD = re.compile(r"^(\s*#?\s*)(alert|drop)(\s)", re.MULTILINE)


def with_action(rules_text: str, action: str) -> str:
    """The rules with every alert/drop rule's action set to `action` (pass, reject and
    comments stay as they are)."""
    return _ACTION_WORD.sub(lambda m: f"{m.group(1)}{action}{m.group(3)}", rules_text)


class RuleSetRecord(TypedDict, total=False):
    """What a run records of its rule set, among Suricata's statistics: which set, and the
    SHA-256 of the rules as loaded (what a qualification record names the set by)."""

    rules: Required[int | str]  # the number generated, "none", "default", or the user's file's name
    port: int  # generated rules: the UDP port they inspect
    files: int  # "default": how many of Debian's rule files
    sha256: str


@dataclass(frozen=True)
class PreparedRules:
    """A rule set made ready for one Suricata: its files (in the run's directory) and what
    the run records of it."""

    files: list[Path]
    description: RuleSetRecord
    sources: dict[str, str] = field(default_factory=dict)  # file written → the file it came from


def prepare_rules(value: RulesValue, action: str, port: int, directory: Path) -> PreparedRules:
    """The rule files of a `rules` value, written into `directory` with `action` applied."""
    rules = RuleSet.of(value)
    directory.mkdir(parents=True, exist_ok=True)
    if rules.named == NO_RULES:
        return PreparedRules([], {"rules": NO_RULES})
    if rules.count is not None:
        path = directory / "generated.rules"
        text = generate_rules(rules.count, action, port)
        path.write_text(text)
        # The hash of the rules as loaded: what a qualification record names the rule set by.
        return PreparedRules(
            [path], {"rules": rules.count, "port": port, "sha256": hashlib.sha256(text.encode()).hexdigest()}
        )
    if rules.named == DEFAULT_RULES:
        sources = default_rule_files()
        files = []
        digest = hashlib.sha256()
        for source in sources:
            text = source.read_text(errors="replace")
            digest.update(source.name.encode() + b"\0" + text.encode())
            target = directory / source.name
            target.write_text(with_action(text, action))
            files.append(target)
        written = {str(t): str(f) for t, f in zip(files, sources)}
        return PreparedRules(
            files, {"rules": DEFAULT_RULES, "files": len(files), "sha256": digest.hexdigest()}, written
        )
    copied = rules.copy_into(directory)  # a file's rule set has its hash: checked against it here
    assert rules.sha256 is not None
    copied.write_text(with_action(copied.read_text(errors="replace"), action))
    return PreparedRules(
        [copied], {"rules": Path(rules.path or "").name, "sha256": rules.sha256}, {str(copied): str(rules.path)}
    )


def default_rule_files() -> list[Path]:
    """The rule files Debian's suricata package ships."""
    files = sorted(Path(p) for p in glob.glob(str(DEBIAN_RULES / "*.rules")))
    if not files:
        raise UserError(
            f'rules = "default" needs the rule files of Debian\'s suricata package in {DEBIAN_RULES}, and there are '
            f"none: reinstall the package {PACKAGE}"
        )
    return files


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuricataSettings:
    """What one Suricata's configuration depends on."""

    interfaces: tuple[str, str]  # in, out: frames are copied in → out (and out → in)
    worker_cpus: list[int]
    management_cpus: list[int]
    log_dir: str
    rule_files: list[str]
    threads: int = 1


def config_text(s: SuricataSettings) -> str:
    """suricata.yaml for an inline IPS between two interfaces (YAML 1.1 in flow style: JSON
    is a valid document for Suricata's parser, so no YAML writer is needed)."""
    a, b = s.interfaces
    af_packet = [
        {
            "interface": here,
            "threads": s.threads,
            "cluster-id": cluster,
            "cluster-type": "cluster_flow",
            "defrag": "no",
            "copy-mode": "ips",
            "copy-iface": there,
            "use-mmap": "yes",
            # IPS mode works on TPACKET_V2 rings only; 8k frames: 0.8 s at 10 kpps.
            "tpacket-v3": "no",
            "ring-size": 8192,
            "checksum-checks": "no",
        }
        for here, there, cluster in ((a, b, 98), (b, a, 97))
    ]
    doc: dict[str, object] = {
        "vars": {
            "address-groups": {
                "HOME_NET": "any",
                "EXTERNAL_NET": "any",
                **{k: "$HOME_NET" for k in ("HTTP_SERVERS", "SMTP_SERVERS", "SQL_SERVERS", "DNS_SERVERS")},
                **{k: "$HOME_NET" for k in ("TELNET_SERVERS", "AIM_SERVERS", "DC_SERVERS", "DNP3_SERVER")},
                **{k: "$HOME_NET" for k in ("DNP3_CLIENT", "MODBUS_CLIENT", "MODBUS_SERVER", "ENIP_CLIENT")},
                "ENIP_SERVER": "$HOME_NET",
            },
            "port-groups": {
                "HTTP_PORTS": "80",
                "SHELLCODE_PORTS": "!80",
                "ORACLE_PORTS": "1521",
                "SSH_PORTS": "22",
                "DNP3_PORTS": "20000",
                "MODBUS_PORTS": "502",
                "FILE_DATA_PORTS": "[$HTTP_PORTS,110,143]",
                "FTP_PORTS": "21",
                "GENEVE_PORTS": "6081",
                "VXLAN_PORTS": "4789",
                "TEREDO_PORTS": "3544",
            },
        },
        "default-log-dir": s.log_dir,
        "default-rule-path": s.log_dir,
        "rule-files": s.rule_files,
        "classification-file": str(CLASSIFICATION),
        "reference-config-file": str(REFERENCE),
        "runmode": "workers",
        "af-packet": af_packet,
        "app-layer": {
            "protocols": {
                name: {"enabled": "yes", "detection-enabled": "yes", "detection-ports": {"dp": port}}
                for name, port in (("modbus", 502), ("dnp3", 20000))
            }
        },
        # Memory a small testbed (or a 256 MiB guest) can give; far above what the test
        # traffic's one flow per UDP source port needs.
        "flow": {"memcap": "32mb", "hash-size": 4096, "prealloc": 1000},
        "stream": {"memcap": "32mb", "reassembly": {"memcap": "64mb"}},
        "defrag": {"memcap": "8mb"},
        "threading": {
            "set-cpu-affinity": "yes",
            "cpu-affinity": [
                {"management-cpu-set": {"cpu": s.management_cpus}},
                {
                    "worker-cpu-set": {
                        "cpu": s.worker_cpus,
                        "mode": "exclusive" if len(s.worker_cpus) > 1 else "balanced",
                        "prio": {"default": "high"},
                    }
                },
            ],
        },
        # Statistics once a second and at exit: the final totals are what a run stores.
        "stats": {"enabled": "yes", "interval": 1},
        "outputs": [
            {
                "eve-log": {
                    "enabled": "yes",
                    "filetype": "regular",
                    "filename": ALERTS,
                    "types": [{"alert": {"payload": "no", "packet": "no", "metadata": "no"}}],
                }
            },
            {
                "eve-log": {
                    "enabled": "yes",
                    "filetype": "regular",
                    "filename": STATS,
                    "types": [{"stats": {"totals": "yes", "threads": "no", "deltas": "no"}}],
                }
            },
        ],
        "logging": {
            "default-log-level": "notice",
            "outputs": [
                {"console": {"enabled": "yes"}},
                {"file": {"enabled": "yes", "level": "info", "filename": LOG}},
            ],
        },
    }
    return "%YAML 1.1\n---\n" + json.dumps(doc, indent=1) + "\n"


_BAD_SIGNATURE = re.compile(r'error parsing signature "(?P<rule>.*)" from file (?P<file>\S+) at line (?P<line>\d+)')


def check_config(
    config: Path,
    sources: dict[str, str] | None = None,
    timeout_s: float = 600.0,
    log: Callable[[str], None] | None = None,
) -> None:
    """`suricata -T`, at most `timeout_s` (the DuT's ready_timeout; `log` told every
    PROGRESS_EVERY_S that it is still loading): UserError with Suricata's own first error —
    for a rule, its file and line and why (`sources` maps the rule files as written for
    Suricata to the user's own) — when it would not start with this configuration and its
    rules. A rule's text is never repeated: a file named by mistake is not shown."""
    done = _run_with_progress([suricata_binary(), "-T", "-c", str(config)], timeout_s, log)
    if done.returncode == 0:
        return
    errors = [
        line.removeprefix("E: ").strip() for line in (done.stdout + done.stderr).splitlines() if line.startswith("E:")
    ]
    more = f" (Suricata wrote {len(errors) - 1} more error lines)" if len(errors) > 1 else ""
    for index, line in enumerate(errors):
        bad = _BAD_SIGNATURE.search(line)
        if bad is None:
            continue
        reasons = [e for e in errors[:index] if "error parsing signature" not in e]
        reason = _without_quotes(reasons[-1].partition(": ")[2]) if reasons else "a rule it cannot parse"
        where = (sources or {}).get(bad["file"], bad["file"])
        raise UserError(
            f"Suricata refuses the rule set: {shown(where)} at line {bad['line']}: {shown(_shorten(reason, 200))}{more}"
        )
    detail = errors[0] if errors else (done.stdout + done.stderr).strip() or f"exit code {done.returncode}"
    raise UserError(f"Suricata refuses its configuration: {shown(_shorten(_without_quotes(detail)))}{more}")


def _without_quotes(text: str) -> str:
    """Suricata's words without what it quotes (a keyword or a value of the rule's line)."""
    return re.sub(r"(['\"`]).*?\1", "…", text)


def _run_with_progress(
    argv: list[str], timeout_s: float, log: Callable[[str], None] | None
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to its end, at most `timeout_s` (then stopped, and UserError), saying every
    PROGRESS_EVERY_S through `log` that it is still at work."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        try:
            while True:
                left = timeout_s - (time.monotonic() - started)
                if left <= 0:
                    raise UserError(
                        f"`suricata -T` did not finish loading the rule set within ready_timeout "
                        f"({timeout_s:g} s): give the DuT a longer ready_timeout, or fewer rules"
                    )
                if wait_for(process, min(left, PROGRESS_EVERY_S)) is not None:
                    break
                if log is not None:
                    log(
                        f"suricata -T still loading the rule set ({time.monotonic() - started:.0f} s of at most {timeout_s:g} s)"
                    )
        finally:
            if exit_code(process) is None:
                process.kill()
                wait_for(process)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, process.returncode, out.read(), err.read())


def _shorten(line: str, limit: int = 400) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- the DuT kind -------------------------------------------------------------------------------


def check_port(port: int) -> None:
    """ValueError for a `port` beyond UDP's (the option's own check holds it ≥ 1)."""
    if port > 65_535:
        raise ValueError(f"option 'port' must be a UDP port (1 to 65535), not {port}")


def check_rule_set(rules: RulesValue, action: str, port: int, timeout_s: float, log: Callable[[str], None]) -> None:
    """A rule set checked by `suricata -T` before any run (once per rule set, action and port)."""
    key = json.dumps(msgspec.to_builtins([rules, action, port]), sort_keys=True)
    if key in _CHECKED:
        return
    log(f"checking Suricata's rule set {RuleSet.of(rules).label()} (suricata -T)")
    with tempfile.TemporaryDirectory(prefix="lowtail-suricata-") as tmp:
        prepared = prepare_rules(rules, action, port, Path(tmp))
        settings = SuricataSettings(("in0", "out0"), [0], [0], tmp, [str(f) for f in prepared.files])
        (Path(tmp) / CONFIG).write_text(config_text(settings))
        check_config(Path(tmp) / CONFIG, prepared.sources, timeout_s, log)
    _CHECKED.add(key)


class Suricata(Dut[SuricataOptions]):
    kind = "suricata"
    Options = SuricataOptions
    options = {
        "rules": RulesOption(
            named=(NO_RULES, DEFAULT_RULES),
            maximum=MAX_RULES,
            bytes_per_rule=BYTES_PER_RULE,
            help='"none" (a plain forwarder), "default" (the rules Debian\'s package ships), a number of '
            "generated rules that every test frame is checked against, or a rules file (copied into the run's data); "
            f"at most {MAX_RULES:,} rules (about {MAX_RULES * BYTES_PER_RULE >> 20} MiB of Suricata's memory)",
        ),
        "action": ChoiceOption(choices=ACTIONS, help="what a matching rule does: alert (forward, count) or drop"),
        "port": IntOption(
            minimum=1, help="the UDP destination port generated rules inspect, as [traffic] udp_dst_port"
        ),
        "threads": IntOption(minimum=1, help="worker threads per interface"),
        "ready_timeout": DurationOption(help="how long Suricata may take to load its rules"),
        **PROCESS_OPTIONS,
    }

    def __init__(self, name: str, config: SuricataOptions):
        super().__init__(name, config)
        self.log_dir: Path | None = None
        self.rules: PreparedRules | None = None
        self.load_s: float | None = None
        self.not_ready: str | None = None  # why start-up ended without "Engine started"

    @classmethod
    def validate(cls, config: DutOptions) -> DutOptions:
        assert isinstance(config, SuricataOptions)
        check_port(config.port)
        return config

    @classmethod
    def check_available(cls) -> None:
        suricata_binary()

    @classmethod
    def prepare(cls, config: DutOptions, log: Callable[[str], None]) -> None:
        """The rule set checked by `suricata -T` before any run (once per configuration)."""
        assert isinstance(config, SuricataOptions)
        check_rule_set(config.rules, config.action, config.port, DurationOption.seconds(config.ready_timeout), log)

    @property
    def ready_timeout_s(self) -> float:  # type: ignore[override]
        return DurationOption.seconds(self.config.ready_timeout)

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        self.log_dir = tb.work_dir / "suricata"
        self.rules = prepare_rules(self.config.rules, self.config.action, self.config.port, self.log_dir)
        workers = self._cores(plan)
        contained = self.config.contained()
        # A container's cpuset holds only the DuT's cores: its management threads stay there.
        management = workers if contained else housekeeping_cores(plan, workers)
        assert tb.dut_in is not None and tb.dut_out is not None
        settings = SuricataSettings(
            (tb.dut_in, tb.dut_out),
            workers,
            management,
            str(self.log_dir),
            [str(f) for f in self.rules.files],
            self.config.threads,
        )
        config = self.log_dir / CONFIG
        config.write_text(config_text(settings))
        argv = [
            suricata_binary(),
            "-c",
            str(config),
            "--af-packet",
            "-k",
            "none",
            "--pidfile",
            str(self.log_dir / "pid"),
        ]
        if not contained:
            # The main thread (and every thread Suricata does not pin itself) off the DuT's cores.
            argv = [tool("taskset", "util-linux"), "-c", ",".join(map(str, management)), *argv]
        t0 = time.monotonic()
        self._spawn(tb, plan, argv, stats=None, pin_with_taskset=False)
        self._wait_engine_started()
        self.load_s = time.monotonic() - t0
        pid = (self.containment.get("namespaces") or {}).get("contained_pid") or self._program().pid
        # Winding down, its threads wait for each other: under SCHED_FIFO on a shared core the
        # workers starved the main thread for 30 s. Ordinary again before the stop signal.
        self._program().before_stop = lambda: worker_threads_realtime(pid, None)
        self.containment |= {
            "cpus": workers,
            "management_cpus": management,
            "management_shares_worker_cores": bool(set(management) & set(workers)),
            "scheduling": worker_threads_realtime(pid, DUT_RT_PRIORITY),
            "config": str(config),
        }

    def _program(self) -> Program:
        assert self.program is not None
        return self.program

    def _wait_engine_started(self) -> None:
        """Until Suricata says "Engine started" (its rules loaded, its threads running), at
        most ready_timeout; the caller's forwarding probe then says whether frames get
        through — at once, when the rules did not load in time (`failure`)."""
        program = self._program()
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline and program.running():
            try:
                if READY_LINE in program.log.read_text(errors="replace"):
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        if program.running():
            self.not_ready = (
                f"the DuT {self.name} (suricata) did not finish loading its rules within ready_timeout "
                f"({self.ready_timeout_s:g} s): give it a longer ready_timeout, or fewer rules"
            )

    def failure(self) -> str | None:
        return self.not_ready or super().failure()

    def stop(self) -> DutCounters:
        """Suricata stopped (SIGINT: it writes its final statistics), and what the run keeps."""
        if self.program is None:
            return {}
        self.program.stop(grace_s=30.0)
        stats: DutCounters = {"program": "suricata", "action": self.config.action}
        if self.rules is not None:
            stats |= self.rules.description
        if self.load_s is not None:
            stats["start_s"] = round(self.load_s, 3)
        text = ""
        if self.log_dir is not None and (self.log_dir / STATS).exists():
            text = (self.log_dir / STATS).read_text(errors="replace")
        final = last_stats(text)
        if final is not None:
            stats["suricata"] = dict(counters(final))
        return stats

    def invalid_reasons(self, statistics: DutCounters, frames_sent: int) -> list[str]:
        found = statistics.get("suricata")
        return invalid_reasons(found, frames_sent)


_CHECKED: set[str] = set()


# -- inside a VM's guest (duts/vm.py, vm/guest-init.sh) -------------------------------------------

GUEST_DIR = "etc/lowtail/suricata"
GUEST_LOG_DIR = "/tmp/suricata"
# The guest's init replaces these with the names of the interfaces it finds by MAC address.
GUEST_IN, GUEST_OUT = "@IN@", "@OUT@"
# Suricata, its decoders' state and the initramfs that holds it, in the guest's memory.
GUEST_MEMORY_MIB = 512


def guest_layer(
    rules_value: RulesValue, action: str, port: int, worker_cpu: int, management_cpu: int
) -> tuple[ImageLayer, RuleSetRecord]:
    """What a VM guest needs to run Suricata with this rule set, action and port — the program
    (its libraries come along), Debian's classification and reference files, the rules with
    their action applied, and the configuration (its interfaces filled in by the guest) —
    and what a run records of the rule set."""
    with tempfile.TemporaryDirectory(prefix="lowtail-suricata-") as tmp:
        rules = prepare_rules(rules_value, action, port, Path(tmp))
        data = {f"{GUEST_DIR}/{f.name}": f.read_bytes() for f in rules.files}
    settings = SuricataSettings(
        (GUEST_IN, GUEST_OUT),
        [worker_cpu],
        [management_cpu],
        GUEST_LOG_DIR,
        [f"/{name}" for name in data],
    )
    data[f"{GUEST_DIR}/{CONFIG}"] = config_text(settings).encode()
    for path in (CLASSIFICATION, REFERENCE):
        data[str(path).lstrip("/")] = path.read_bytes()
    programs = {"usr/bin/suricata": Path(suricata_binary()), "usr/bin/chrt": Path(tool("chrt", "util-linux"))}
    return ImageLayer("suricata", programs, data), rules.description


def from_guest(report: Mapping[str, object], action: str, rules: RuleSetRecord | None) -> DutCounters:
    """What a guest's Suricata reported (its last eve stats record, `@stats {"program":
    "suricata", "eve": …}`) as the statistics a bare Suricata run stores (`rules`: what the
    run records of its rule set). EveStatsError when the record is not of the shape lowtail reads."""
    stats: DutCounters = {"program": "suricata", "action": action, **(rules or {})}
    eve = report.get("eve")
    if isinstance(eve, dict) and isinstance(eve.get("stats"), dict):
        stats["suricata"] = dict(counters(eve_stats(eve["stats"])))
    return stats


def worker_threads_realtime(pid: int, priority: int | None) -> str:
    """Suricata's worker threads ("W#01-in0", …) to SCHED_FIFO at `priority` (the DuT's, as
    lowtail's other DuTs run; they sleep in poll() while no frame comes), or back to ordinary
    scheduling (None). Its management threads stay ordinary. What was applied, in words."""
    policy, param = (os.SCHED_FIFO, os.sched_param(priority)) if priority else (os.SCHED_OTHER, os.sched_param(0))
    done = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return "ordinary (Suricata had ended)"
    for tid in tids:
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        if not name.startswith("W#"):
            continue
        try:
            os.sched_setscheduler(int(tid), policy, param)
            done.append(name)
        except ProcessLookupError:
            continue
        except OSError as e:
            return f"ordinary (SCHED_FIFO refused: {e.strerror})"
    if not done and priority:
        raise Failure("Suricata started no worker threads (W#…): its log says why")
    return f"workers SCHED_FIFO {priority}" if priority else "ordinary"
