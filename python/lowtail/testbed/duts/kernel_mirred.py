"""`kind = "kernel-mirred"`: the kernel forwards, tc's u32 classifier matching everything and
a mirred redirect in → out (also how the VM DuT joins its taps)."""

from __future__ import annotations

from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import NoOptions
from lowtail.testbed.duts.base import ALL_TESTBEDS, Dut
from lowtail.testbed.protocol import Testbed, dut_ports
from lowtail.testbed.system import tc


class KernelMirred(Dut[NoOptions]):
    kind = "kernel-mirred"
    testbeds = ALL_TESTBEDS

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        dut_in, dut_out = dut_ports(tb)
        tb.dut_run(
            ["tc", "qdisc", "add", "dev", dut_in, "ingress"],
            what="adding the ingress qdisc",
            undo=["tc", "qdisc", "del", "dev", dut_in, "ingress"],
        )
        tb.dut_run(mirred_filter(dut_in, dut_out), what=f"adding the u32 + mirred redirect {dut_in} → {dut_out}")


def mirred_filter(from_dev: str, to_dev: str) -> list[str]:
    """The tc command that sends every frame arriving on `from_dev` (which has an ingress
    qdisc) out of `to_dev`: a u32 classifier matching everything and a mirred redirect."""
    return [
        "tc",
        "filter",
        "add",
        "dev",
        from_dev,
        "parent",
        "ffff:",
        "protocol",
        "all",
        "u32",
        "match",
        "u32",
        "0",
        "0",
        "action",
        "mirred",
        "egress",
        "redirect",
        "dev",
        to_dev,
    ]


def mirred_redirect(ns: str, from_dev: str, to_dev: str) -> None:
    """Every frame arriving on `from_dev` in namespace `ns` leaves on `to_dev`."""
    tc("-n", ns, "qdisc", "add", "dev", from_dev, "ingress", what="adding the ingress qdisc")
    tc("-n", ns, *mirred_filter(from_dev, to_dev)[1:], what=f"adding the u32 + mirred redirect {from_dev} → {to_dev}")
