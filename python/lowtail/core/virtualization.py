"""What a run's virtualization means for its latencies. A VM DuT (testbed/vm) records
`kvm` or `tcg` with its run; `lowtail run` and the experiment report both say this when a
run was emulated, from here, so the testbed and the report need not know each other."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Said wherever VM runs under TCG are shown (`lowtail run`, the experiment report).
TCG_WARNING = (
    "VM runs marked TCG ran under QEMU's emulator (KVM does not work on this host): their latencies are an "
    "emulator's, many times those of a virtual machine on a real host. Compare them with each other, not "
    "with bare-metal or container runs."
)


def marked(label: str, virtualization: str | None) -> str:
    """A DuT's label with its run's virtualization ("vm-rt [TCG]"), as every table of runs shows it."""
    return f"{label} [{virtualization.upper()}]" if virtualization else label


def any_emulated(runs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of these stored runs ran under QEMU's emulator (TCG)."""
    return any(r.get("virtualization") == "tcg" for r in runs)
