"""Energy from the RAPL counters Linux exposes under /sys/class/powercap.

The URLLC studies price low latency in watts: with power saving off the idle server drew 48 %
more (Commun. Mag. 2020, §VI; NOMS 2020, §V-E). Where RAPL exists, each run and noise probe records the energy
it used and its mean power; elsewhere the figures say "not available" and why.

Zones: intel-rapl:N are the packages (and on some machines psys, the whole platform);
intel-rapl:N:M their parts (core, uncore, dram). AMD's driver uses the same names. The
total counts packages plus DRAM (DRAM is not part of the package figure), or psys alone
when there are no package zones; every zone is also given by itself."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lowtail.host.document import EnergyReading

POWERCAP = Path("/sys/class/powercap")


@dataclass
class _Zone:
    key: str  # "package-0", "package-0/dram"
    name: str  # the zone's own name file
    path: Path
    max_range_uj: int


class EnergyMeter:
    """m = EnergyMeter(); m.start(); ...; m.stop() -> {"available", "joules", "mean_w",
    "domains", "duration_ns", "reason"}."""

    def __init__(self, powercap_root: str | Path = POWERCAP):
        self.root = Path(powercap_root)
        self._zones: list[_Zone] = []
        self._start: dict[str, int] = {}
        self._t0 = 0
        self._reason: str | None = None

    def _find_zones(self) -> list[_Zone]:
        if not self.root.is_dir():
            self._reason = f"no RAPL energy counters ({self.root} does not exist on this host)"
            return []
        zones: list[_Zone] = []
        dirs = sorted(d for d in self.root.iterdir() if d.name.startswith("intel-rapl:"))
        names = {d.name: _read(d / "name") or d.name for d in dirs}
        for d in dirs:
            parts = d.name.split(":")
            parent = names.get(":".join(parts[:2])) if len(parts) > 2 else None
            key = f"{parent}/{names[d.name]}" if parent else names[d.name]
            zones.append(_Zone(key, names[d.name], d / "energy_uj", int(_read(d / "max_energy_range_uj") or 0)))
        if not zones:
            self._reason = f"no RAPL energy counters ({self.root} has no intel-rapl zones)"
        return zones

    def start(self) -> EnergyMeter:
        self._zones = self._find_zones()
        self._start = {}
        for z in self._zones:
            try:
                self._start[z.key] = int(z.path.read_text())
            except PermissionError:
                self._reason = f"RAPL counters are readable by root only ({z.path})"
                self._zones = []
                break
            except (OSError, ValueError) as e:
                self._reason = f"cannot read {z.path}: {e}"
                self._zones = []
                break
        self._t0 = time.monotonic_ns()
        return self

    def stop(self) -> EnergyReading:
        duration = time.monotonic_ns() - self._t0
        if not self._zones:
            return {
                "available": False,
                "joules": None,
                "mean_w": None,
                "domains": {},
                "duration_ns": duration,
                "reason": self._reason or "not started",
            }
        domains: dict[str, float] = {}
        for z in self._zones:
            try:
                now = int(z.path.read_text())
            except (OSError, ValueError) as e:
                return {
                    "available": False,
                    "joules": None,
                    "mean_w": None,
                    "domains": {},
                    "duration_ns": duration,
                    "reason": f"cannot read {z.path}: {e}",
                }
            delta = now - self._start[z.key]
            if delta < 0:  # the counter wrapped (at max_energy_range_uj)
                delta += z.max_range_uj
            domains[z.key] = delta / 1e6
        joules = _total(domains)
        return {
            "available": True,
            "joules": joules,
            "mean_w": joules / (duration / 1e9) if duration else None,
            "domains": domains,
            "duration_ns": duration,
            "reason": None,
        }


def _total(domains: dict[str, float]) -> float:
    top = {k: v for k, v in domains.items() if "/" not in k}
    packages = sum(v for k, v in top.items() if k.startswith("package"))
    dram = sum(v for k, v in domains.items() if k.split("/")[-1] == "dram")
    if packages or dram:
        return packages + dram
    return sum(v for k, v in top.items() if k.startswith("psys")) or sum(top.values())


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None
