"""`kind = "external"` (real wiring): a device outside lowtail's control — a switch, an
appliance, a program the user runs. Nothing to start: the run measures whatever it does."""

from __future__ import annotations

from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import ExternalOptions
from lowtail.testbed.duts.base import Dut
from lowtail.testbed.duts.options import TextOption
from lowtail.testbed.protocol import Testbed


class External(Dut[ExternalOptions]):
    """A DuT on the user's wiring that lowtail neither starts nor stops (a switch, an
    appliance, a program the user runs): the run measures whatever it does."""

    kind = "external"
    Options = ExternalOptions
    testbeds = ("interfaces", "hosts")
    options = {"description": TextOption(help="what the device is, for the record")}

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        pass
