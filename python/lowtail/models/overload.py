"""The overload model of NOMS 2020 (section VI): a core spends t_CPU per packet and
d_Σ per second on interrupts, so it keeps up with at most

    R_max = (1 s − d_Σ) / t_CPU,   t_CPU = t_e2e − 2·t_transfer,   d_Σ = Σ rate_i · duration_i

packets per second. t_e2e is the application's median latency, 2·t_transfer the median of
the bare forwarder (the same path with no processing)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lowtail.core.errors import UserError
from lowtail.core.units import format_ns, parse_duration_ns, parse_frequency_hz
from lowtail.models.document import OverloadDocument
from lowtail.store.db import Store
from lowtail.store.models import OVERLOAD, ModelLinks, save_model
from lowtail.store.runs import run_figures, run_latency

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class InterruptLoad:
    """An interrupt kind hitting the processing core: how often and how long."""

    rate_hz: float
    duration_ns: float
    kind: str = ""

    @property
    def ns_per_s(self) -> float:
        """CPU time this kind takes per second."""
        return self.rate_hz * self.duration_ns


_IRQ = re.compile(r"^\s*(?:(?P<kind>[A-Za-z_][\w-]*)=)?(?P<rate>[^:=]+?)\s*:\s*(?P<dur>.+)$")


def parse_interrupt(text: str) -> InterruptLoad:
    """'166.7Hz:10.9us' or 'loc=166.7Hz:10.9us' (the interrupt rate and its duration, each
    with its unit)."""
    m = _IRQ.match(text)
    if not m:
        raise UserError(f"{text!r}: expected RATE:DURATION, e.g. 166.7Hz:10.9us or loc=250Hz:5.5us")
    rate = parse_frequency_hz(m.group("rate"), what=repr(text))
    duration = parse_duration_ns(m.group("dur"), what=repr(text))
    if rate <= 0:
        raise UserError(f"{text!r}: the rate must be positive")
    return InterruptLoad(rate, duration, m.group("kind") or "")


def overload_model(t_transfer_ns: float, t_e2e_ns: float, interrupts: Iterable[InterruptLoad]) -> OverloadDocument:
    """R_max and the figures behind it. t_transfer_ns is the bare forwarder's median
    (the URLLC studies' 2·t_transfer), t_e2e_ns the application's median."""
    irqs = list(interrupts)
    t_cpu = t_e2e_ns - t_transfer_ns
    if t_cpu <= 0:
        raise UserError(
            f"the application's median ({format_ns(t_e2e_ns)}) is not above the bare forwarder's "
            f"({format_ns(t_transfer_ns)}): there is no CPU time per packet to divide by"
        )
    d_sum = sum(i.ns_per_s for i in irqs)
    if d_sum >= NS_PER_S:
        raise UserError(f"the interrupts take {d_sum / 1e9:.3f} s of every second: the core has no time for packets")
    return {
        "t_transfer_ns": t_transfer_ns,
        "t_e2e_ns": t_e2e_ns,
        "t_cpu_ns": t_cpu,
        "d_sum_ns_per_s": d_sum,
        "interrupt_share": d_sum / NS_PER_S,
        "r_max_pps": (NS_PER_S - d_sum) / t_cpu,
        "interrupts": [{"rate_hz": i.rate_hz, "duration_ns": i.duration_ns, "kind": i.kind} for i in irqs],
    }


def read_interrupt_profile(path: Path, cpu: int | None = None) -> list[InterruptLoad]:
    """The interrupt loads of a JSON profile: what `lowtail noise --json` prints (the kinds
    of core `cpu` that have a duration; `cpu` may be left out when one core was probed), a
    list of {rate_hz, duration_ns[, kind]}, an object with such a list under "interrupts",
    or a mapping kind → {rate_hz, duration_ns}."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"--irq-profile {path}: cannot read it as JSON ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("cores"), list):
        return _noise_profile(path, data["cores"], cpu)
    items = data.get("interrupts", data) if isinstance(data, dict) else data
    if isinstance(items, dict) and all(isinstance(v, dict) for v in items.values()):
        items = [{"kind": k, **v} for k, v in items.items()]
    try:
        return [InterruptLoad(float(i["rate_hz"]), float(i["duration_ns"]), str(i.get("kind", ""))) for i in items]
    except (KeyError, TypeError, ValueError):
        raise UserError(
            f"--irq-profile {path}: every entry needs rate_hz and duration_ns (or give the JSON `lowtail noise "
            f"--json` prints)"
        ) from None


def _noise_profile(path: Path, cores: list[Any], cpu: int | None) -> list[InterruptLoad]:
    """The loads of one core of a `lowtail noise --json` document: each kind's rate and the
    typical duration the probe attributed to it (kinds it could not time are left out,
    as the probe's own d_Σ leaves them out)."""
    probed = [c.get("cpu") for c in cores if isinstance(c, dict)]
    if not probed:
        raise UserError(f"--irq-profile {path}: the noise probe probed no core")
    if cpu is None and len(probed) > 1:
        raise UserError(
            f"--irq-profile {path}: the probe covers cores {', '.join(map(str, probed))}: choose one with --irq-cpu"
        )
    core = next((c for c in cores if isinstance(c, dict) and c.get("cpu") == (probed[0] if cpu is None else cpu)), None)
    if core is None:
        which = f"core {probed[0]} only" if len(probed) == 1 else f"cores {', '.join(map(str, probed))}"
        raise UserError(f"--irq-profile {path}: the noise probe probed {which}, not core {cpu}")
    kinds = core.get("interrupts")
    if not isinstance(kinds, dict):
        raise UserError(f"--irq-profile {path}: core {core['cpu']} was probed without interrupts (--no-interrupts)")
    loads = [
        InterruptLoad(float(v["rate_hz"]), float(v["typical_ns"]), str(kind))
        for kind, v in kinds.items()
        if isinstance(v, dict) and v.get("typical_ns") is not None
    ]
    if not loads:
        raise UserError(
            f"--irq-profile {path}: no interrupt kind with a duration on core {core['cpu']} (probe longer, with "
            f"--sample-interval, so that the probe can tell the kinds' durations apart)"
        )
    return loads


# The statistics a stored run's median may be taken as: the URLLC studies' median, or the
# minimum (the uncontended path, when a busy host queues even the lowest rate).
STATISTICS = ("p50", "min")


@dataclass(frozen=True)
class OverloadOptions:
    """What the overload model is computed from: each median given (ns) or taken from a
    stored run, and the interrupt loads on the core."""

    t_transfer_ns: int | None = None  # the bare forwarder's median (2·t_transfer)
    t_e2e_ns: int | None = None  # the application's median
    baseline_run: int | None = None  # ... or the bare forwarder's stored run
    app_run: int | None = None  # ... or the application's (the result is linked to its experiment and DuT)
    statistic: str = "p50"  # of a stored run: p50 or min
    interrupts: tuple[InterruptLoad, ...] = ()

    def check(self) -> None:
        """UserError unless each median has exactly one source and the statistic is known."""
        if (self.t_transfer_ns is None) == (self.baseline_run is None):
            raise UserError("give the bare forwarder's median as --t-transfer or --baseline-run (one of them)")
        if (self.t_e2e_ns is None) == (self.app_run is None):
            raise UserError("give the application's median as --t-e2e or --app-run (one of them)")
        if self.statistic not in STATISTICS:
            raise UserError(f"--statistic {self.statistic!r}: {' or '.join(STATISTICS)}")

    @property
    def reads_runs(self) -> bool:
        """Whether a median comes from a stored run (the database is then needed)."""
        return self.baseline_run is not None or self.app_run is not None


def overload_and_store(
    store: Store | None, opts: OverloadOptions, *, save: bool = True, label: str | None = None
) -> OverloadDocument:
    """The overload model of `opts` (`overload_of_runs`), stored as an `overload` model
    result when `save` (the document then carries its `model_id`)."""
    opts.check()
    doc, keys = overload_of_runs(
        store, opts.t_transfer_ns, opts.t_e2e_ns, opts.baseline_run, opts.app_run, opts.statistic, opts.interrupts
    )
    if save:
        doc["model_id"] = save_model(_needs(store), OVERLOAD, asdict(opts), doc, label=label, **keys)
    return doc


def _needs(store: Store | None) -> Store:
    if store is None:
        raise UserError("a stored run needs the database (--db)")
    return store


def _given(value: int | None, options: str) -> int:
    if value is None:
        raise UserError(f"give {options}")
    return value


def overload_of_runs(
    store: Store | None,
    t_transfer_ns: int | None,
    t_e2e_ns: int | None,
    baseline_run: int | None,
    app_run: int | None,
    statistic: str,
    interrupts: Iterable[InterruptLoad],
) -> tuple[OverloadDocument, ModelLinks]:
    """The overload model with each median given, or taken from a stored run (its
    `statistic`: p50, or min for the uncontended path). Returns the document and, when the
    application's median comes from a run, the experiment, DuT and run to link it to."""
    keys: ModelLinks = {}
    if t_transfer_ns is not None:
        base = t_transfer_ns
    else:
        base = run_latency(_needs(store), _given(baseline_run, "--t-transfer or --baseline-run"), statistic)
    if t_e2e_ns is not None:
        e2e = t_e2e_ns
    else:
        store, app_run = _needs(store), _given(app_run, "--t-e2e or --app-run")
        e2e = run_latency(store, app_run, statistic)
        run = run_figures(store, app_run)
        keys = {"experiment_id": run["experiment_id"], "dut_name": run["dut_name"], "run_id": app_run}
    doc = overload_model(base, e2e, interrupts)
    doc["statistic"] = statistic if baseline_run is not None or app_run is not None else None
    return doc, keys
