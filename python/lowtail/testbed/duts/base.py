"""The base of every DuT kind (`Dut`) and the calibration's no-DuT (`Wire`). A DuT sets
itself up between the testbed's `dut_in` (traffic arrives) and `dut_out` (traffic leaves) —
in0 and out0 of the DuT namespace, or the interfaces a DuT names on real wiring — says
whether it has crashed, and hands back its own statistics when stopped. Kinds that run on
real wiring set themselves up through the testbed (`dut_run`, `dut_binary`, `dut_path`),
which runs the commands where the DuT is (a namespace, this host, another host) and undoes
them after. What a DuT may ask of a testbed is `lowtail.testbed.protocol.Testbed`.

What a run stores of its DuT goes through one place, `Dut.facts()`: the DuT's own
statistics, how it was contained, the virtualization, the files it ran with (a generated
configuration, a copied rules file) and the reasons its own counters make the run invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, Generic, TypedDict, TypeVar

import msgspec

from lowtail.core.errors import Failure, UserError
from lowtail.core.schema import did_you_mean
from lowtail.host.interrupts import InterruptSample
from lowtail.testbed.container import recorded_namespaces
from lowtail.testbed.cores import BUSY_WAIT_NICE, CoreRoles
from lowtail.testbed.document import Containment, DutCounters, DutOptions, NoOptions, ProcessOptions
from lowtail.testbed.duts.options import Option
from lowtail.testbed.process import Program
from lowtail.testbed.protocol import Testbed


class DutFacts(TypedDict):
    """What a run stores of its DuT (runs.dut_stats, containment, virtualization, the
    reasons the DuT's own counters give to distrust the run)."""

    statistics: DutCounters
    containment: Containment
    virtualization: str | None
    invalid_reasons: list[str]


ALL_TESTBEDS = ("namespaces", "interfaces", "hosts")

KindOptions = TypeVar("KindOptions", bound=DutOptions)


class Dut(Generic[KindOptions]):
    kind: ClassVar[str]
    options: ClassVar[dict[str, Option]] = {}
    # The kind's checked configuration: a struct whose fields are `options`.
    Options: ClassVar[type[DutOptions]] = NoOptions
    # The testbed kinds (testbed/wiring.py) this DuT can be set up on.
    testbeds: ClassVar[tuple[str, ...]] = ("namespaces",)
    ready_timeout_s: float = 10.0
    # kvm | tcg for a DuT that is a virtual machine (set when it starts), None otherwise.
    virtualization: str | None = None

    def __init__(self, name: str, config: KindOptions):
        if not isinstance(config, self.Options):
            raise TypeError(f"the DuT {name} ({self.kind}) is configured by {self.Options.__name__}, not {config!r}")
        self.name = name
        self.config: KindOptions = config
        self.program: Program | None = None
        self.containment: Containment = {"mode": "bare"}

    @classmethod
    def expand(cls, raw: Mapping[str, object]) -> list[DutOptions]:
        """The configurations a `[[dut]]` table stands for (`raw`: the table as TOML read it,
        free-form until checked here): a list where one value is expected sweeps over its
        values (lists of lists for list-valued options). ValueError names an unknown option
        or a bad value."""
        axes: list[tuple[str, list[object]]] = []
        for key, value in raw.items():
            opt = cls.options.get(key)
            if opt is None:
                known = ", ".join(cls.options) or "none: it runs inside the kernel"
                hint = did_you_mean(key, cls.options)
                raise ValueError(f"unknown option {key!r} for kind {cls.kind} ({hint}its options: {known})")
            points = _points(opt, value)
            if not points:
                raise ValueError(f"option {key!r}: an empty list sweeps over nothing")
            checked: list[object] = []
            for v in points:
                try:
                    checked.append(opt.check(v))
                except ValueError as e:
                    raise ValueError(f"option {key!r} {e}") from None
            axes.append((key, checked))
        # Each option's checked value (of the type its `Option.check` returns), not yet the struct.
        configs: list[dict[str, object]] = [{}]
        for key, values in axes:
            configs = [c | {key: v} for c in configs for v in values]
        return [cls.validate(cls.typed(c)) for c in configs]

    @classmethod
    def typed(cls, checked: Mapping[str, object]) -> DutOptions:
        """A configuration whose given options were checked, as the kind's struct (the others
        their defaults; a value of the wrong type here is lowtail's own mistake: its check
        let it through)."""
        try:
            return msgspec.convert(checked, cls.Options)
        except msgspec.ValidationError as e:
            raise TypeError(f"kind {cls.kind}: a checked configuration is not a {cls.Options.__name__}: {e}") from None

    @classmethod
    def validate(cls, config: DutOptions) -> DutOptions:
        """Check one complete configuration (defaults filled in)."""
        return config

    @classmethod
    def check_available(cls) -> None:
        """UserError when what this kind needs is not installed."""

    @classmethod
    def prepare(cls, config: DutOptions, log: Callable[[str], None]) -> None:
        """Slow one-time work for a configuration (building a guest image), done before the
        sweep starts; `log` says what is being done."""

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        raise NotImplementedError

    @property
    def started(self) -> Program:
        """The DuT's program, once `start` spawned it (asked before: a Failure that says so)."""
        if self.program is None:
            raise Failure(f"the DuT {self.name} ({self.kind}) has no program running: it was not started")
        return self.program

    def failure(self) -> str | None:
        """Why the DuT is no longer forwarding, when its process ended by itself."""
        if self.program is not None and self.program.died():
            return f"the DuT {self.name} ({self.kind}): {self.program.exit_message()}"
        return None

    def stop(self) -> DutCounters:
        """Stop the DuT; its own statistics (empty when it keeps none)."""
        if self.program is None:
            return {}
        self.program.stop()
        return self.program.statistics() or {}

    def invalid_reasons(self, statistics: DutCounters, frames_sent: int) -> list[str]:
        """Why the DuT's own counters (`statistics`, what `stop` returned) make the run
        untrustworthy, given the frames the generator sent: none for a DuT that keeps none."""
        return []

    def facts(self, statistics: DutCounters, frames_sent: int | None) -> DutFacts:
        """What the run stores of this DuT once it stopped (see the module's docstring);
        `frames_sent` is None when no traffic was sent (the DuT never got ready)."""
        return DutFacts(
            statistics=statistics,
            containment=self.containment,
            virtualization=self.virtualization,
            invalid_reasons=[] if frames_sent is None else self.invalid_reasons(statistics, frames_sent),
        )

    def guest_interrupts(self, start_ns: int, end_ns: int) -> list[InterruptSample]:
        """Interrupt samples from inside the DuT (a VM's guest) in a time window, if it has any."""
        return []

    # -- the core plan -------------------------------------------------------------------------

    def busy_polls(self, plan: CoreRoles, isolated: set[int] | None = None) -> bool:
        """Whether the DuT's program polls without ever sleeping on these cores."""
        return False

    def check_plan(self, plan: CoreRoles, isolated: set[int] | None = None) -> None:
        """UserError for a core plan that defeats the measurement: a DuT that never sleeps
        on the generator's core (each would take the core from the other: neither the
        offered traffic nor the DuT would be what is measured)."""
        cores = self._cores(plan)
        if self.busy_polls(plan, isolated) and plan.generator in cores and len(CoreRoles.available()) > 1:
            raise UserError(
                f"DuT {self.name} ({self.kind}) busy-polls and would run on core {plan.generator}, the "
                f"generator's: each would take the core from the other; give it other cores (cpus = [...]) "
                f"or move the generator ([cores] generator = ...)"
            )

    def core_plan_warnings(self, plan: CoreRoles, isolated: set[int] | None = None) -> list[str]:
        """What the plan does to the measurement, stored with the run: a DuT that never
        sleeps on a core the testbed's own programs use."""
        if not self.busy_polls(plan, isolated):
            return []
        warnings = []
        for core in self._cores(plan):
            roles = plan.roles_on(core)
            if roles:
                warnings.append(
                    f"core plan: {self.kind} busy-polls on core {core}, which {' and '.join(roles)} also "
                    f"use{'' if len(roles) > 1 else 's'} ({len(CoreRoles.available())} cores available): it runs "
                    f"at nice {BUSY_WAIT_NICE} and its latencies include the slices they take"
                )
        return warnings

    # -- helpers for DuTs that run a process ----------------------------------------------------

    def _cores(self, plan: CoreRoles) -> list[int]:
        return self.config.dut_cpus() or plan.dut

    def _spawn(
        self, tb: Testbed, plan: CoreRoles, argv: list[str], stats: Path | None = None, pin_with_taskset: bool = True
    ) -> Program:
        cores = self._cores(plan)
        if isinstance(self.config, ProcessOptions) and self.config.contained():
            reservation = self.config.memory_reservation
            cgroups, applied = tb.container_cgroups(cores, reservation << 20)
            self.program = tb.spawn(f"dut-{self.name}", tb.dut_ns, argv, stats=stats, cgroup=cgroups, container=True)
            self.containment = {
                "mode": "container",
                "cpus": cores,
                "cgroup": str(cgroups[0]),
                **applied,
                "namespaces": recorded_namespaces(self.program.pid),
            }
            return self.program
        self.containment = {"mode": "bare", "cpus": cores if pin_with_taskset else None}
        self.program = tb.spawn(
            f"dut-{self.name}", tb.dut_ns, argv, stats=stats, cpus=cores if pin_with_taskset else None
        )
        return self.program


def _points(opt: Option, value: object) -> list[object]:
    """The values a `[[dut]]` key sweeps over: the list given where one value is expected
    (a list of lists for a list-valued option), else the one value given."""
    if isinstance(value, list) and (not opt.list_valued or (value and all(isinstance(v, list) for v in value))):
        return value
    return [value]


class Wire(Dut[NoOptions]):
    """Calibration: no DuT at all."""

    kind = "wire"

    def start(self, tb: Testbed, plan: CoreRoles) -> None:
        assert tb.wire
