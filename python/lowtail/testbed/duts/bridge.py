"""`kind = "bridge"`: a Linux bridge with the DuT's two interfaces as its ports."""

from __future__ import annotations

from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts.base import ALL_TESTBEDS, Dut, KindOptions
from lowtail.testbed.protocol import Testbed, dut_ports


class Bridge(Dut[KindOptions]):
    """Its own kind (no options), and the bridge nftables filters (`Bridge[NftablesOptions]`)."""

    kind = "bridge"
    testbeds = ALL_TESTBEDS

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        bridge = tb.dut_link_name("br")
        tb.dut_run(
            ["ip", "link", "add", bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"],
            what="creating the bridge",
            undo=["ip", "link", "del", bridge],
        )
        for port in dut_ports(tb):
            tb.dut_run(["ip", "link", "set", port, "master", bridge], what=f"adding {port} to the bridge")
        tb.dut_run(["ip", "link", "set", bridge, "up"], what="bringing the bridge up")
