"""`kind = "custom"`: any command the user names, with {in}, {out}, {netns}, {cpus}
substituted, and one-shot set-up (and, on real wiring, teardown) commands."""

from __future__ import annotations

import shlex
import string

import msgspec

from lowtail.testbed.containment import format_cpu_list
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import CustomOptions, DutOptions
from lowtail.testbed.duts.base import ALL_TESTBEDS, Dut
from lowtail.testbed.duts.options import PROCESS_OPTIONS, CommandsOption, DurationOption, StrOption
from lowtail.testbed.protocol import Testbed


class Custom(Dut[CustomOptions]):
    kind = "custom"
    Options = CustomOptions
    testbeds = ALL_TESTBEDS
    options = {
        "command": StrOption(help="a long-running program: the DuT ({in}, {out}, {netns}, {cpus} are substituted)"),
        "setup": CommandsOption(help="one-shot commands run in the DuT namespace first, e.g. tc or nft"),
        "teardown": CommandsOption(
            help="commands that undo `setup` on real wiring, run when the run ends however it ends "
            "(a namespace testbed needs none: its namespace goes)",
        ),
        "ready_timeout": DurationOption(help="how long the DuT may take to forward"),
        **PROCESS_OPTIONS,
    }
    PLACEHOLDERS = ("in", "out", "netns", "cpus")

    @classmethod
    def validate(cls, config: DutOptions) -> DutOptions:
        assert isinstance(config, CustomOptions)
        if not config.teardown_commands:
            # Left out when empty: the combination keys of custom DuTs stored before it existed stay the same.
            config = msgspec.structs.replace(config, teardown=msgspec.UNSET)
        if not config.command and not config.setup:
            raise ValueError("a custom DuT needs `command` (a program) or `setup` (commands), or both")
        for text in [config.command or "", *config.setup, *config.teardown_commands]:
            for _, field_name, _, _ in string.Formatter().parse(text):
                if field_name is not None and field_name not in cls.PLACEHOLDERS:
                    raise ValueError(
                        f"unknown placeholder {{{field_name}}} in {text!r} "
                        f"(known: {', '.join('{' + p + '}' for p in cls.PLACEHOLDERS)})"
                    )
        return config

    @property
    def ready_timeout_s(self) -> float:  # type: ignore[override]
        return DurationOption.seconds(self.config.ready_timeout)

    def _expand(self, template: str, tb: Testbed, plan: CoreRoles) -> list[str]:
        return shlex.split(
            template.format(
                **{
                    "in": tb.dut_in,
                    "out": tb.dut_out,
                    "netns": tb.dut_ns or "",
                    "cpus": format_cpu_list(self._cores(plan)),
                }
            )
        )

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        for template in self.config.teardown_commands:
            tb.dut_undo(self._expand(template, tb, plan))
        for template in self.config.setup:
            argv = self._expand(template, tb, plan)
            tb.dut_run(argv, what=f"DuT {self.name}: setup `{' '.join(argv)}`")
        if self.config.command:
            self._spawn(tb, plan, self._expand(self.config.command, tb, plan))
