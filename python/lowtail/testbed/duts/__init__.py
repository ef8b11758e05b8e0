"""Every DuT kind an experiment file may name, by its `kind`, one module each: the kernel's
forwarders (kernel_mirred, bridge), lowtail's own (lowtail_fwd), DPDK's testpmd, custom
commands, the network functions (nftables, ovs, suricata), the virtual machine (vm) and,
on real wiring, external devices. A new network function is one module here (a `Dut`
subclass with its options, see base.py and options.py) added to `KINDS`, and one test."""

from __future__ import annotations

from typing import Any

from lowtail.testbed.duts.base import Dut, Wire
from lowtail.testbed.duts.bridge import Bridge
from lowtail.testbed.duts.chain import CHAIN, Chain
from lowtail.testbed.duts.custom import Custom
from lowtail.testbed.duts.external import External
from lowtail.testbed.duts.kernel_mirred import KernelMirred
from lowtail.testbed.duts.lowtail_fwd import LowtailFwd
from lowtail.testbed.duts.nftables import Nftables
from lowtail.testbed.duts.ovs import OpenVSwitch
from lowtail.testbed.duts.suricata import Suricata
from lowtail.testbed.duts.testpmd import DpdkTestpmd
from lowtail.testbed.duts.vm import VirtualMachine

KINDS: dict[str, type[Dut]] = {
    cls.kind: cls
    for cls in (
        KernelMirred,
        Bridge,
        LowtailFwd,
        DpdkTestpmd,
        Custom,
        Nftables,
        OpenVSwitch,
        Suricata,
        VirtualMachine,
        External,
    )
}


def make_dut(kind: str, name: str, config: dict[str, Any]) -> Dut:
    """The DuT of a kind ("wire" for calibration, "chain" for a chain of DuTs, duts/chain.py)
    with its configuration."""
    if kind == CHAIN:
        return Chain(name, config, make_dut)
    return (Wire if kind == "wire" else KINDS[kind])(name, config)
