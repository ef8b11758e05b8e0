"""`kind = "nftables"`: a firewall. The DuT namespace bridges in0 and out0 (as the bridge DuT
does) and every forwarded frame passes an nftables chain on the bridge's forward hook: the
firewall analogue of the URLLC studies' forwarder-against-filter comparison (a sweep over `rules`).

Bridging rather than routing: the test traffic is addressed to the generator's other port,
so the DuT forwards it without being its IP next hop; nftables' bridge family filters those
frames natively (no br_netfilter). A user's ruleset must hook the bridge family's forward
chain to see the traffic.

Generated rules, `rules = N` of a `rule_kind`:

    ports   N rules `udp dport P drop` for ports the traffic does not use: each frame is
            compared with all N and matches none (a linear rule list's worst case)
    set     one rule `ip saddr @blocked drop` over a set of N addresses: one hash lookup
    match   N rules `udp dport <traffic port> counter`: every frame matches every rule and
            goes on, as the IPS rules of "5G QoS: Impact of Security Functions on Latency"
            matched its UDP port 53 traffic without dropping any

The last rule counts what passed (a named counter) and accepts.
"""

from __future__ import annotations

import ipaddress
import json
import time
from pathlib import Path

from lowtail.core.errors import Failure, UserError
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import NO_RULES, DutCounters, DutOptions, NftablesOptions, RuleFile
from lowtail.testbed.duts.bridge import Bridge
from lowtail.testbed.duts.options import ChoiceOption, IntOption, RuleSet, RulesOption, StrOption
from lowtail.testbed.protocol import Testbed, dut_namespace
from lowtail.testbed.system import names_file, sh, tool

RULE_KINDS = ("ports", "set", "match")
TABLE = "lowtail"
# Addresses of the `set` rule kind: the shared address space (RFC 6598), never the test
# traffic's (RFC 2544's 198.18.0.0/15).
_SET_BASE = ipaddress.IPv4Address("100.64.0.0")
_FIRST_PORT = 1024


# The most rules a set may hold, and what each costs `nft` to load (`nft -c -f` of 20,000
# generated port rules here: 72 MiB of peak memory, one rule 26 MiB: about 2.4 KiB each).
MAX_RULES = 100_000
BYTES_PER_RULE = 2500


def _nft() -> str:
    return tool("nft", "nftables")


class Nftables(Bridge[NftablesOptions]):
    kind = "nftables"
    Options = NftablesOptions
    options = {
        "rules": RulesOption(
            named=(NO_RULES,),
            maximum=MAX_RULES,
            bytes_per_rule=BYTES_PER_RULE,
            help='how many rules to generate (rule_kind says which), "none", or an nftables ruleset file '
            f"(bridge family, forward hook; copied into the run's data); at most {MAX_RULES:,} rules "
            f"(about {MAX_RULES * BYTES_PER_RULE >> 20} MiB of memory while nft loads them)",
        ),
        "rule_kind": ChoiceOption(
            choices=RULE_KINDS,
            help="ports (N non-matching port rules), set (one rule over a set of N addresses) or "
            "match (N rules matching the traffic's UDP port)",
        ),
        "port": IntOption(minimum=1, help="the traffic's UDP destination port, as [traffic] udp_dst_port"),
        "ruleset": StrOption(help="an older spelling of rules = FILE (not copied into the run's data)"),
    }

    @classmethod
    def validate(cls, config: DutOptions) -> DutOptions:
        assert isinstance(config, NftablesOptions)
        if config.port > 65_535:
            raise ValueError(f"option 'port' must be a UDP port (1 to 65535), not {config.port}")
        if config.ruleset is not None and not names_file(config.ruleset):
            raise ValueError(f"option 'ruleset': no such file {config.ruleset!r}")
        return config

    @classmethod
    def check_available(cls) -> None:
        _nft()

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        super().start(tb, plan)  # the bridge
        rules = RuleSet.of(self.config.rules)
        if self.config.ruleset:
            path = Path(self.config.ruleset).expanduser().resolve()
        elif rules.path is not None:
            path = rules.copy_into(tb.work_dir)
        else:
            path = tb.work_dir / "ruleset.nft"
            path.write_text(generate_ruleset(rules.count or 0, self.config.rule_kind, self.config.port))
        t0 = time.monotonic()
        sh(
            tool("ip"),
            "netns",
            "exec",
            dut_namespace(tb),
            _nft(),
            "-f",
            str(path),
            what=f"DuT {self.name}: loading the nftables ruleset {path.name}",
            timeout=300.0,
        )
        self.load_s = time.monotonic() - t0
        self.ns = dut_namespace(tb)

    def stop(self) -> DutCounters:
        stats: DutCounters = {"ruleset_load_s": round(self.load_s, 3)}
        if not self.config.ruleset and not isinstance(self.config.rules, RuleFile):
            stats |= {"rules": self.config.rules, "rule_kind": self.config.rule_kind}
            passed = _counter(self.ns, "passed")
            if passed is not None:
                stats["passed"] = passed
        return stats


def generate_ruleset(rules: int, rule_kind: str, port: int) -> str:
    """The ruleset text of `rules` rules of `rule_kind` (see the module's docstring)."""
    if rule_kind not in RULE_KINDS:
        raise UserError(f"unknown rule_kind {rule_kind!r} (known: {', '.join(RULE_KINDS)})")
    lines = [f"table bridge {TABLE} {{", "  counter passed { }"]
    if rule_kind == "set":
        if rules:
            elements = ", ".join(str(_SET_BASE + i) for i in range(rules))
            lines.append(f"  set blocked {{ type ipv4_addr; elements = {{ {elements} }} }}")
        else:
            lines.append("  set blocked { type ipv4_addr; }")
    lines += ["  chain forward {", "    type filter hook forward priority filter; policy accept;"]
    if rule_kind == "ports":
        ports = [p for p in range(_FIRST_PORT, 65_536) if p != port]
        lines += [f"    udp dport {ports[i % len(ports)]} drop" for i in range(rules)]
    elif rule_kind == "set":
        lines.append("    ip saddr @blocked drop")
    else:
        lines += [f"    udp dport {port} counter" for _ in range(rules)]
    lines += ['    counter name "passed" accept', "  }", "}"]
    return "\n".join(lines) + "\n"


def _counter(ns: str, name: str) -> int | None:
    done = sh(
        tool("ip"),
        "netns",
        "exec",
        ns,
        _nft(),
        "-j",
        "list",
        "counter",
        "bridge",
        TABLE,
        name,
        what="reading the nftables counter",
        check=False,
    )
    if done.returncode != 0:
        return None
    try:
        for item in json.loads(done.stdout)["nftables"]:
            if "counter" in item:
                return int(item["counter"]["packets"])
    except (ValueError, KeyError, TypeError):
        raise Failure(f"nft printed a counter lowtail cannot read: {done.stdout[:200]}") from None
    return None
