"""Every DuT kind an experiment file may name, by its `kind`, one module each: the kernel's
forwarders (kernel_mirred, bridge), lowtail's own (lowtail_fwd), DPDK's testpmd, custom
commands, the network functions (nftables, ovs, suricata), the virtual machine (vm) and,
on real wiring, external devices. A new network function is one module here (a `Dut`
subclass with its option table, see base.py and options.py) added to `KINDS`, its options'
struct in testbed/document.py (`DUT_OPTIONS`), and one test."""

from __future__ import annotations

from typing import Any

from lowtail.testbed.document import ChainOptions, DutOptions, options_from_json
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

__all__ = ["KINDS", "make_dut", "options_from_json"]

KINDS: dict[str, type[Dut[Any]]] = {
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


def make_dut(kind: str, name: str, config: DutOptions) -> Dut[Any]:
    """The DuT of a kind ("wire" for calibration, "chain" for a chain of DuTs, duts/chain.py)
    with its configuration."""
    if kind == CHAIN:
        assert isinstance(config, ChainOptions)
        return Chain(name, config, make_dut)
    cls: type[Dut[Any]] = Wire if kind == "wire" else KINDS[kind]
    return cls(name, config)
