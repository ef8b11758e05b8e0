"""Every DuT kind an experiment file may name, by its `kind`: the kernel's and lowtail's own
forwarders (duts.py), the network functions (nftables, Open vSwitch) and the virtual machine,
each in its own module."""

from __future__ import annotations

from typing import Any

from lowtail.testbed.duts import Bridge, Custom, DpdkTestpmd, Dut, External, KernelMirred, LowtailFwd, Wire
from lowtail.testbed.nft import Nftables
from lowtail.testbed.ovs import OpenVSwitch
from lowtail.testbed.vm.dut import VirtualMachine

KINDS: dict[str, type[Dut]] = {
    cls.kind: cls
    for cls in (KernelMirred, Bridge, LowtailFwd, DpdkTestpmd, Custom, Nftables, OpenVSwitch, VirtualMachine, External)
}


def make_dut(kind: str, name: str, config: dict[str, Any]) -> Dut:
    """The DuT of a kind ("wire" for calibration) with its configuration."""
    return (Wire if kind == "wire" else KINDS[kind])(name, config)
