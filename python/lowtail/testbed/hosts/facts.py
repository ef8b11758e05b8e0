"""What a host is, read in one SSH command, and whether it can play its roles.

The facts are stored with the experiment (every role's host: kernel, boot parameters, CPU,
the login's capabilities, its interfaces, its PTP hardware clocks and time daemons) and
decide, before the first run, whether a role can run there: the interfaces it names exist
and are up, the login has the capabilities the role's programs need, lowtail's work
directory can be written.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from lowtail.core.errors import UserError
from lowtail.host.document import HostSummary
from lowtail.host.sysroot import parse_cpulist
from lowtail.testbed.hosts.ssh import SshHost
from lowtail.testbed.interfaces import interface_problem
from lowtail.testbed.sites import TIME_DAEMONS

# Capabilities (bit numbers) each role's programs need: packet sockets (NET_RAW), the DuT's
# tc/ip set-up and hardware stamping (NET_ADMIN), real-time and nice scheduling (SYS_NICE).
_CAPABILITIES = {12: "CAP_NET_ADMIN", 13: "CAP_NET_RAW", 23: "CAP_SYS_NICE"}
ROLE_NEEDS = {
    "the generator": ("CAP_NET_RAW", "CAP_SYS_NICE"),
    "the timestamper": ("CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_SYS_NICE"),
    "the DuT": ("CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_NICE"),
}

_SCRIPT = r"""
say() { printf '%s=%s\n' "$1" "$2"; }
say hostname "$(cat /proc/sys/kernel/hostname)"
say boot_id "$(cat /proc/sys/kernel/random/boot_id)"
say kernel "$(uname -r)"
say kernel_version "$(uname -v)"
say kernel_cmdline "$(cat /proc/cmdline)"
say cpu_model "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')"
say cpus_online "$(cat /sys/devices/system/cpu/online)"
say cpus_available "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
say isolated "$(cat /sys/devices/system/cpu/isolated 2>/dev/null)"
say capeff "$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)"
say user "$(id -un)"
for i in $IFACES; do
  d=/sys/class/net/$i
  [ -e "$d" ] || continue
  for a in flags carrier address operstate; do say "if.$i.$a" "$(cat "$d/$a" 2>/dev/null)"; done
done
for p in /sys/class/ptp/ptp*; do [ -e "$p" ] && say "ptp.${p##*/}" "$(cat "$p/clock_name")"; done
say time_daemons "$(cat /proc/[0-9]*/comm 2>/dev/null | grep -x -E "$TIME_DAEMONS" | sort -u | tr '\n' ' ')"
if command -v pmc >/dev/null 2>&1; then
  say ptp_port_state "$(pmc -u -b 0 -t 1 'GET PORT_DATA_SET' 2>/dev/null | sed -n 's/^[[:space:]]*portState[[:space:]]*//p' | head -n1)"
fi
if mkdir -p "$WORKDIR" 2>/dev/null && [ -w "$WORKDIR" ]; then
  say workdir_free_kib "$(df -Pk "$WORKDIR" | awk 'NR==2 {print $4}')"
else
  say workdir_error "cannot create or write $WORKDIR"
fi
for t in ip tc taskset; do say "tool.$t" "$(command -v $t)"; done
"""


@dataclass(frozen=True)
class HostFacts:
    """What a host said of itself (each a line of the script above; None where it said
    nothing): who it is, its kernel and cores, the login's capabilities, the interfaces its
    roles use (name → flags, carrier, address, operstate: the /sys/class/net files that
    exist), its PTP clocks (ptpN → name), the tools found (name → path) and lowtail's work
    directory."""

    hostname: str | None = None
    boot_id: str | None = None
    kernel: str | None = None
    kernel_version: str | None = None
    kernel_cmdline: str | None = None
    cpu_model: str | None = None
    cpus_online: str | None = None  # a CPU list, as the kernel writes it
    cpus_available: str | None = None
    isolated: str | None = None
    capeff: str | None = None  # the login's effective capabilities, hexadecimal
    user: str | None = None
    time_daemons: str | None = None  # space-separated
    ptp_port_state: str | None = None
    workdir_free_kib: str | None = None
    workdir_error: str | None = None
    interfaces: dict[str, dict[str, str]] = field(default_factory=dict)
    ptp_clocks: dict[str, str] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)


def read_facts(host: SshHost, workdir: str, interfaces: list[str]) -> HostFacts:
    """The host's facts, for the interfaces its roles use; lowtail's work directory made."""
    env = (
        f"IFACES={shlex.quote(' '.join(interfaces))}; WORKDIR={shlex.quote(workdir)}; "
        f"TIME_DAEMONS={shlex.quote('|'.join(TIME_DAEMONS))}; "
    )
    done = host.run(env + _SCRIPT, what="reading what the host is")
    return parse_facts(done.stdout.decode(errors="replace"))


_SAID = (
    "hostname",
    "boot_id",
    "kernel",
    "kernel_version",
    "kernel_cmdline",
    "cpu_model",
    "cpus_online",
    "cpus_available",
    "isolated",
    "capeff",
    "user",
    "time_daemons",
    "ptp_port_state",
    "workdir_free_kib",
    "workdir_error",
)


def parse_facts(text: str) -> HostFacts:
    """The script's `key=value` lines: interfaces (`if.NAME.FILE`), PTP clocks (`ptp.NAME`)
    and tools (`tool.NAME`) by name, the rest by key (an unknown key is left out)."""
    said: dict[str, str] = {}
    interfaces: dict[str, dict[str, str]] = {}
    ptp_clocks: dict[str, str] = {}
    tools: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key.startswith("if."):
            name, _, attribute = key[3:].rpartition(".")
            interfaces.setdefault(name, {})[attribute] = value
        elif key.startswith("ptp."):
            ptp_clocks[key[4:]] = value
        elif key.startswith("tool."):
            tools[key[5:]] = value
        elif key in _SAID:
            said[key] = value
    return HostFacts(**said, interfaces=interfaces, ptp_clocks=ptp_clocks, tools=tools)


def missing_capabilities(facts: HostFacts, role: str) -> list[str]:
    """The capabilities `role` needs that the host's login lacks."""
    effective = int(facts.capeff or "0", 16)
    held = {name for bit, name in _CAPABILITIES.items() if effective >> bit & 1}
    return [c for c in ROLE_NEEDS[role] if c not in held]


def check_role(host: SshHost, facts: HostFacts, role: str, interfaces: dict[str, str]) -> list[str]:
    """Why `host` cannot play `role` with these interfaces (name -> their role in words)."""
    problems = []
    missing = missing_capabilities(facts, role)
    if missing:
        problems.append(
            f"host {host.label}: the login ({facts.user}) lacks {', '.join(missing)}, which {role} needs "
            f"(log in as root, on a host or container that grants them)"
        )
    for name, what in interfaces.items():
        state = facts.interfaces.get(name, {})
        problem = interface_problem(name, what, state.get, where=f" on {host.label}")
        if problem:
            problems.append(problem)
    if facts.workdir_error:
        problems.append(f"host {host.label}: {facts.workdir_error}")
    return problems


def require_tools(host: SshHost, facts: HostFacts, tools: tuple[str, ...]) -> None:
    """UserError naming a command the host lacks (iproute2 for DuT set-up)."""
    missing = [t for t in tools if not facts.tools.get(t)]
    if missing:
        raise UserError(f"host {host.label} lacks {', '.join(missing)}: install iproute2 and util-linux there")


def cpus(facts: HostFacts) -> list[int]:
    """The cores a login on the host may use."""
    return sorted(parse_cpulist(facts.cpus_available or facts.cpus_online or "0"))


def isolated(facts: HostFacts) -> set[int]:
    """The cores the host's kernel isolates."""
    return set(parse_cpulist(facts.isolated or ""))


def summary(facts: HostFacts) -> HostSummary:
    """The facts stored with an experiment (host metadata, like this host's)."""
    return {
        "hostname": facts.hostname,
        "boot_id": facts.boot_id,
        "kernel": facts.kernel,
        "kernel_version": facts.kernel_version,
        "kernel_cmdline": facts.kernel_cmdline,
        "cpu_model": facts.cpu_model,
        "user": facts.user,
        "cpus_online": len(parse_cpulist(facts.cpus_online or "0")),
        "cpus_available": cpus(facts),
        "isolated": facts.isolated or "",
        "interfaces": facts.interfaces,
        "ptp_clocks": facts.ptp_clocks,
        "time_daemons": (facts.time_daemons or "").split(),
        "ptp_port_state": facts.ptp_port_state,
    }
