"""`kind = "ovs"`: Open vSwitch with the userspace datapath (`datapath_type=netdev`: no
openvswitch kernel module is needed), in0 and out0 as the ports of one bridge.

Each run has its own OVS: ovsdb-server with a fresh database and ovs-vswitchd, both
started by lowtail inside the DuT namespace, with their database, sockets, logs and run
directory in /run/lowtail/<tag>/ovs (OVS_RUNDIR and friends point there: nothing touches
the host's /var/run/openvswitch or a system OVS). They are the testbed's programs, so they
are stopped with it and found by `lowtail testbed clean` after a killed run.

Flows: `flows` in ovs-ofctl's add-flow syntax, or by default one port-to-port flow
(in_port=in0 → out0). ovs-vswitchd is the DuT process (pinned, or in a container).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from lowtail.core.errors import Failure
from lowtail.testbed.cores import DUT_RT_PRIORITY, CoreRoles
from lowtail.testbed.document import DutCounters, OvsOptions
from lowtail.testbed.duts.base import Dut
from lowtail.testbed.duts.options import PROCESS_OPTIONS, CommandsOption
from lowtail.testbed.process import Program, make_realtime
from lowtail.testbed.protocol import Testbed, dut_ports
from lowtail.testbed.system import sh, tool

PACKAGE = "openvswitch-switch"
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
BRIDGE = "br0"


def _ovs(name: str) -> str:
    return tool(name, PACKAGE)


class OpenVSwitch(Dut[OvsOptions]):
    kind = "ovs"
    Options = OvsOptions
    ready_timeout_s = 30.0
    options = {
        "flows": CommandsOption(
            help="OpenFlow flows (ovs-ofctl add-flow syntax) [default: in_port=in0,actions=output:out0]"
        ),
        **PROCESS_OPTIONS,
    }

    @classmethod
    def check_available(cls) -> None:
        for program in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl"):
            _ovs(program)
        if not SCHEMA.exists():
            raise Failure(f"{SCHEMA} is missing: reinstall the Debian package {PACKAGE}")

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        run = Path("/run/lowtail") / tb.tag
        tb.own_path(run)
        self.dir = run / "ovs"
        self.dir.mkdir(parents=True, exist_ok=True)
        env = [
            "env",
            *(f"{var}={self.dir}" for var in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR")),
        ]
        db, db_sock = self.dir / "conf.db", self.dir / "db.sock"
        sh(_ovs("ovsdb-tool"), "create", str(db), str(SCHEMA), what="creating the OVS database")
        self.ovsdb = tb.spawn(
            f"dut-{self.name}-ovsdb",
            tb.dut_ns,
            [
                *env,
                _ovs("ovsdb-server"),
                str(db),
                f"--remote=punix:{db_sock}",
                f"--unixctl={self.dir / 'ovsdb-server.ctl'}",
                f"--log-file={self.dir / 'ovsdb-server.log'}",
                "--no-chdir",
            ],
            cpus=[plan.housekeeping],
        )
        self._wait_socket(db_sock, self.ovsdb)
        self.vsctl("--no-wait", "init")
        self._spawn(
            tb,
            plan,
            [
                *env,
                _ovs("ovs-vswitchd"),
                f"unix:{db_sock}",
                f"--unixctl={self.dir / 'ovs-vswitchd.ctl'}",
                f"--log-file={self.dir / 'ovs-vswitchd.log'}",
                "--no-chdir",
            ],
        )
        dut_in, dut_out = dut_ports(tb)
        self.vsctl(
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "--",
            "add-port",
            BRIDGE,
            dut_in,
            "--",
            "add-port",
            BRIDGE,
            dut_out,
        )
        self.ofctl("del-flows")
        for flow in self.config.flows or [f"in_port={dut_in},actions=output:{dut_out}"]:
            self.ofctl("add-flow", flow)
        # ovs-vswitchd polls its userspace ports from threads that sleep when idle: real-time,
        # like the other DuT processes (on a busy host it otherwise waits tens of ms per turn).
        pid = self.containment.get("namespaces", {}).get("contained_pid") or self.started.pid
        self.containment["scheduling"] = make_realtime(pid, DUT_RT_PRIORITY)

    def _wait_socket(self, path: Path, program: Program, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if not program.running():
                raise Failure(f"ovsdb-server did not start: {program.exit_message()}")
            if time.monotonic() > deadline:
                raise Failure(f"ovsdb-server did not open {path} within {timeout_s:g} s")
            time.sleep(0.02)

    def vsctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return sh(
            _ovs("ovs-vsctl"),
            f"--db=unix:{self.dir / 'db.sock'}",
            "--timeout=20",
            *args,
            what=f"DuT {self.name}: ovs-vsctl {' '.join(args)}",
        )

    def ofctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return sh(
            _ovs("ovs-ofctl"),
            args[0],
            f"unix:{self.dir / f'{BRIDGE}.mgmt'}",
            *args[1:],
            what=f"DuT {self.name}: ovs-ofctl {' '.join(args)}",
        )

    def failure(self) -> str | None:
        own = super().failure()
        if own:
            return own
        ovsdb = getattr(self, "ovsdb", None)
        if ovsdb is not None and ovsdb.died():
            return f"the DuT {self.name} (ovs): {ovsdb.exit_message()}"
        return None

    def stop(self) -> DutCounters:
        """The flows' packet counts, then ovs-vswitchd and ovsdb-server stop (in that order)."""
        stats: DutCounters = {}
        if self.program is not None and self.program.running():
            done = sh(
                _ovs("ovs-ofctl"),
                "dump-flows",
                f"unix:{self.dir / f'{BRIDGE}.mgmt'}",
                what="reading the OVS flows",
                check=False,
            )
            stats["flow_packets"] = [int(n) for n in re.findall(r"n_packets=(\d+)", done.stdout)]
        super().stop()
        if getattr(self, "ovsdb", None) is not None:
            self.ovsdb.stop()
        return stats
