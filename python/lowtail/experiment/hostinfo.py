"""What a reader of the results must know about the machine they came from."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

from lowtail import __version__
from lowtail.testbed.containment import cpuset_hierarchy
from lowtail.testbed.cores import CorePlan


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_metadata(plan: CorePlan) -> dict[str, Any]:
    cpuset = cpuset_hierarchy()
    try:
        kernel_cmdline = Path("/proc/cmdline").read_text().strip()
    except OSError:
        kernel_cmdline = None
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "kernel_cmdline": kernel_cmdline,
        "cpu_model": _cpu_model(),
        "cpus_online": os.cpu_count(),
        "cpus_available": CorePlan.available(),
        "core_plan": plan.as_dict(),
        "cgroup_cpuset": {"version": cpuset.version, "root": str(cpuset.root)} if cpuset else None,
        "lowtail_version": __version__,
        "python": platform.python_version(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }
