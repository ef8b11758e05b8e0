"""The `[testbed]` table of an experiment file: where the generator sends, where PRE and
POST are stamped, and where the DuT sits.

    kind = "namespaces"   lowtail builds the wiring: network namespaces and veth links (the default)
    kind = "interfaces"   the user's wiring on this host: named interfaces in its namespace
    kind = "hosts"        LoadGen, DuT and timestamper roles on other machines, reached by SSH

    [testbed]                          [testbed]
    kind = "interfaces"                kind = "hosts"
    generator = "eth1"                 identity = "id_ed25519"     # optional: ssh -i
    pre = "eth1"                       known_hosts = "known_hosts" # optional
    post = "eth4"                      [testbed.loadgen]
                                       ssh = "root@loadgen"
                                       interface = "eth1"
                                       [testbed.timestamper]
                                       ssh = "root@tap"
                                       pre = "eth1"
                                       post = "eth2"
                                       [testbed.dut]
                                       ssh = "root@dut"

A DuT on such wiring names its interfaces (`interfaces = ["eth2", "eth3"]`, in then out) or
is `kind = "external"`: outside lowtail's control.

One physical loop carries every link when `vlans` lists one VLAN id per link (HVNet's layout:
each packet crosses the wire once per link): `vlans = [10, 11, 12, 13]` for a chain of three
DuTs (PRE, the two links between them, POST; two ids for one DuT). The named interfaces are
then the loop's ends — the generator's, PRE's and POST's, and each DuT's in and out — and
lowtail makes a VLAN sub-interface `NAME.ID` on each for its link (docs/chains.md). Parsing raises `WiringError` with the key
at fault; the experiment file's parser adds the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from lowtail.core.errors import UserError
from lowtail.core.schema import unknown_key
from lowtail.core.units import parse_duration_ns
from lowtail.testbed.system import home_path

KINDS = ("namespaces", "interfaces", "hosts")
DEFAULT_WORKDIR = "/var/tmp/lowtail"
DEFAULT_SETTLE_NS = 1_000_000_000
DEFAULT_CONNECT_TIMEOUT_NS = 10_000_000_000
# The [testbed] keys that take a duration (with its unit, `lowtail help units`), and their defaults.
DURATION_KEYS = {"settle": DEFAULT_SETTLE_NS, "connect_timeout": DEFAULT_CONNECT_TIMEOUT_NS}
_IFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_MAC = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")


class WiringError(ValueError):
    """A mistake in the [testbed] table: `table` is the (dotted) table, `key` the key at fault."""

    def __init__(self, message: str, table: str = "testbed", key: str | None = None):
        super().__init__(message)
        self.table = table
        self.key = key


@dataclass(frozen=True)
class Namespaces:
    """lowtail's own software testbed (testbed/topology.py)."""

    kind: str = "namespaces"


@dataclass(frozen=True)
class Interfaces:
    """The user's wiring on this host: the generator's transmit interface and the
    timestamper's PRE and POST points, in this host's network namespace."""

    generator: str
    pre: str
    post: str
    dst_mac: str | None = None
    probe: bool = True
    settle_ns: int = DEFAULT_SETTLE_NS
    kind: str = "interfaces"
    # One VLAN id per link over one physical loop (PRE, the links between hops, POST), or None.
    vlans: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Ssh:
    """How the OpenSSH client reaches the hosts (files resolved beside the experiment file)."""

    identity: str | None = None
    known_hosts: str | None = None
    config: str | None = None
    connect_timeout_ns: int = DEFAULT_CONNECT_TIMEOUT_NS


@dataclass(frozen=True)
class Endpoint:
    """An interface on a host: `host` is an SSH destination (`user@name`, `ssh://user@name:port`)."""

    host: str
    interface: str


@dataclass(frozen=True)
class Hosts:
    """Roles on separate machines. PRE and POST on one host are stamped by one timestamper
    (one clock); `post` on another host is stamped there (the run records both clocks)."""

    generator: Endpoint
    pre: Endpoint
    post: Endpoint
    dut_host: str | None
    ssh: Ssh
    workdirs: dict[str, str] = field(default_factory=dict)  # host -> directory for lowtail's files
    dst_mac: str | None = None
    settle_ns: int = DEFAULT_SETTLE_NS
    kind: str = "hosts"

    @property
    def hosts(self) -> list[str]:
        """Every host of the wiring, each once, in role order."""
        found = [self.generator.host, self.pre.host, self.post.host] + ([self.dut_host] if self.dut_host else [])
        return list(dict.fromkeys(found))

    def workdir(self, host: str) -> str:
        """Where lowtail keeps its programs and a run's files on `host`."""
        return self.workdirs.get(host, DEFAULT_WORKDIR)


Wiring = Namespaces | Interfaces | Hosts


# A table as TOML read it, before its checks: what its keys hold is not known yet, and each
# check below narrows the value it reads (`isinstance`) before using it.
RawTable = Mapping[str, object]


def parse(table: object, base: Path) -> Wiring:
    """The wiring a [testbed] table declares; `base` is the directory relative file names
    (identity, known_hosts, ssh_config) are read from."""
    if table is None:
        return Namespaces()
    if not _is_table(table):
        raise WiringError("[testbed] must be a table")
    kind = table.get("kind", "namespaces")
    if kind not in KINDS:
        raise WiringError(f"unknown testbed kind {kind!r} (known: {', '.join(KINDS)})", key="kind")
    if kind == "namespaces":
        _only(table, "testbed", {"kind"})
        return Namespaces()
    if kind == "interfaces":
        return _interfaces(table)
    return _hosts(table, base)


def _is_table(value: object) -> TypeGuard[RawTable]:
    """Whether `value` is a TOML table (TOML's keys are strings)."""
    return isinstance(value, dict) and all(isinstance(key, str) for key in value)


def _only(table: RawTable, name: str, allowed: set[str]) -> None:
    for key in table:
        if key not in allowed:
            raise WiringError(unknown_key(key, allowed, f"[{name}]"), name, key)


def interface_name(value: object, table: str, key: str) -> str:
    """An interface name as the kernel allows it; WiringError otherwise."""
    if not isinstance(value, str) or not _IFACE.match(value):
        raise WiringError(
            f"{key} must name an interface (up to 15 letters, digits, '-', '_', '.'), not {value!r}", table, key
        )
    return value


def _required(table: RawTable, name: str, key: str) -> object:
    if key not in table:
        raise WiringError(f"[{name}] needs `{key}`", name, None)
    return table[key]


def _duration(table: RawTable, name: str, key: str) -> int:
    if key not in table:
        return DURATION_KEYS[key]
    try:
        return parse_duration_ns(table[key], what=key)
    except UserError as e:
        raise WiringError(str(e), name, key) from None


def _mac(table: RawTable, name: str) -> str | None:
    mac = table.get("dst_mac")
    if mac is None:
        return None
    if not isinstance(mac, str) or not _MAC.match(mac):
        raise WiringError(f"dst_mac must be a MAC address like 02:00:00:00:00:01, not {mac!r}", name, "dst_mac")
    return mac


def _interfaces(table: RawTable) -> Interfaces:
    _only(table, "testbed", {"kind", "generator", "pre", "post", "dst_mac", "probe", "settle", "vlans"})
    points = {
        key: interface_name(_required(table, "testbed", key), "testbed", key) for key in ("generator", "pre", "post")
    }
    probe = table.get("probe", True)
    if not isinstance(probe, bool):
        raise WiringError("probe must be true or false", key="probe")
    return Interfaces(
        **points,
        dst_mac=_mac(table, "testbed"),
        probe=probe,
        settle_ns=_duration(table, "testbed", "settle"),
        vlans=_vlans(table.get("vlans")),
    )


MAX_VLAN = 4094


def _vlans(value: object) -> tuple[int, ...] | None:
    """`vlans`: distinct VLAN ids 1 … 4094, one per link."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) < 2:
        raise WiringError(
            "vlans takes one VLAN id per link, PRE first and POST last, e.g. vlans = [10, 11] for one DuT", key="vlans"
        )
    ids: list[int] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_VLAN:
            raise WiringError(f"vlans: {v!r} is not a VLAN id (a whole number from 1 to {MAX_VLAN})", key="vlans")
        ids.append(v)
    repeated = next((v for v in ids if ids.count(v) > 1), None)
    if repeated is not None:
        raise WiringError(f"vlans: VLAN {repeated} is given twice: each link has its own", key="vlans")
    return tuple(ids)


def vlan_interface(parent: str, vlan: int) -> str:
    """The VLAN sub-interface of `parent` for `vlan` (`eth1.10`); WiringError when the name
    would be longer than the kernel allows."""
    name = f"{parent}.{vlan}"
    if len(name) > 15:
        raise WiringError(
            f"the VLAN sub-interface {name} would be longer than 15 characters: name the interface shorter "
            f"(an altname does not help: VLAN sub-interfaces are named after the interface)",
            key="vlans",
        )
    return name


_ROLE_KEYS = {
    "loadgen": {"ssh", "interface", "workdir"},
    "timestamper": {"ssh", "pre", "post", "post_ssh", "workdir"},
    "dut": {"ssh", "workdir"},
}


def _hosts(table: RawTable, base: Path) -> Hosts:
    _only(
        table,
        "testbed",
        {"kind", "identity", "known_hosts", "ssh_config", "connect_timeout", "settle", "dst_mac", *_ROLE_KEYS},
    )
    roles: dict[str, RawTable] = {}
    for role, keys in _ROLE_KEYS.items():
        name = f"testbed.{role}"
        value = table.get(role)
        if value is None:
            if role == "dut":
                continue
            raise WiringError(f"a hosts testbed needs a [{name}] table with `ssh` ({', '.join(sorted(keys))})")
        if not _is_table(value):
            raise WiringError(f"[{name}] must be a table", name)
        _only(value, name, keys)
        roles[role] = value

    def host(role: str, key: str = "ssh") -> str:
        value = _required(roles[role], f"testbed.{role}", key)
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value) or value.startswith("-"):
            raise WiringError(
                f"{key} must be an SSH destination such as root@host, not {value!r}", f"testbed.{role}", key
            )
        return value

    def iface(role: str, key: str) -> str:
        return interface_name(_required(roles[role], f"testbed.{role}", key), f"testbed.{role}", key)

    ts_host = host("timestamper")
    post_host = host("timestamper", "post_ssh") if "post_ssh" in roles["timestamper"] else ts_host
    workdirs: dict[str, str] = {}
    for role, value in roles.items():
        if "workdir" not in value:
            continue
        where = value["workdir"]
        if not isinstance(where, str) or not where.startswith("/"):
            raise WiringError(f"workdir must be an absolute path, not {where!r}", f"testbed.{role}", "workdir")
        for h in [host(role)] + ([post_host] if role == "timestamper" else []):
            if workdirs.setdefault(h, where) != where:
                raise WiringError(f"host {h} is given two workdirs", f"testbed.{role}", "workdir")
    return Hosts(
        generator=Endpoint(host("loadgen"), iface("loadgen", "interface")),
        pre=Endpoint(ts_host, iface("timestamper", "pre")),
        post=Endpoint(post_host, iface("timestamper", "post")),
        dut_host=host("dut") if "dut" in roles else None,
        ssh=Ssh(
            identity=_file(table, "identity", base),
            known_hosts=_file(table, "known_hosts", base, must_exist=False),
            config=_file(table, "ssh_config", base),
            connect_timeout_ns=_duration(table, "testbed", "connect_timeout"),
        ),
        workdirs=workdirs,
        dst_mac=_mac(table, "testbed"),
        settle_ns=_duration(table, "testbed", "settle"),
    )


def _file(table: RawTable, key: str, base: Path, must_exist: bool = True) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise WiringError(f"{key} must be a file name", key=key)
    try:
        path = (base / home_path(value)).resolve()
    except ValueError as e:
        raise WiringError(f"{key}: {e}", key=key) from None
    if must_exist and not path.is_file():
        raise WiringError(f"{key}: no such file: {path}", key=key)
    return str(path)
