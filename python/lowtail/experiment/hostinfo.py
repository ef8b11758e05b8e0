"""What a reader of the results must know about the machine they came from."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from lowtail.core.version import __version__
from lowtail.host.document import HostMetadata
from lowtail.host.facts import Host
from lowtail.host.sysroot import SysRoot
from lowtail.testbed.containment import cpuset_hierarchy
from lowtail.testbed.cores import CoreRoles


def host_metadata(plan: CoreRoles) -> HostMetadata:
    """The host an experiment runs on, stored with it: kernel, boot parameters, CPU, the
    cores of each role, cpusets, lowtail's version and the command."""
    host = Host(SysRoot("/"))
    cpuset = cpuset_hierarchy()
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "kernel_cmdline": host.root.read("proc/cmdline"),
        "cpu_model": host.cpuinfo.get("model name") or platform.processor() or "unknown",
        "cpus_online": os.cpu_count(),
        "cpus_available": CoreRoles.available(),
        "core_plan": plan.as_dict(),
        "cgroup_cpuset": {"version": cpuset.version, "root": str(cpuset.root)} if cpuset else None,
        "lowtail_version": __version__,
        "python": platform.python_version(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }
