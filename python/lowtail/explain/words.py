"""How an explanation is said, on the terminal and on a page alike: each cause kind in words, a
cause's core, a source's interrupt rates per CPU.
Light (no numpy, no plotting): `lowtail explain` answering from the store loads only this."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lowtail.core.units import format_hz, format_ns, format_percent
from lowtail.explain.document import CauseDoc

# What each cause kind is called on a page (docs/explain.md describes them).
KIND_WORDS = {
    "preemption": "another task preempted the DuT",
    "interrupt": "an interrupt on the DuT's core",
    "softirq": "softirq work on the DuT's core",
    "aliasing": "a periodic interrupt beating with the traffic",
    "generator_stall": "the generator stalled (measurement artefact)",
    "timestamper_stall": "the timestamper stalled (measurement artefact)",
    "shared_core": "the testbed's own program took the DuT's core (measurement artefact)",
    "hypervisor": "the hypervisor took the CPU: steal time (measurement artefact)",
    "lowtail_process": "lowtail's own process took the DuT's core (measurement artefact)",
    "overload": "queueing from overload",
    "batching": "batching",
    "virtualization": "virtualization",
}


def hop_adds(added_ns: float) -> str:
    """What a hop adds to a chain's tail packets on average, above its own median: "3.762 ms",
    or "nothing" for a hop whose tail packets were under its median ("-463 ns" read as a
    figure wrongly signed)."""
    added = round(added_ns)
    return format_ns(added) if added > 0 else f"nothing ({format_ns(-added)} under its median)" if added else "nothing"


def could_hold(share: float, tail: str = "the tail") -> str:
    """What something explain could not see could hold of a tail: "could hold up to 12.5 % of
    the tail", or none of it when no unexplained tail packet flew while it happened ("up to
    0 %" read as if it were a bound)."""
    if share <= 0:
        return f"could hold none of {tail}: no unexplained tail packet was in flight then"
    return f"could hold up to {format_percent(share)} of {tail}"


def rates_lines(sampled: Mapping[str, Any]) -> list[str]:
    """A source's interrupt rates per CPU in a line each ("CPU 2: LOC 250 Hz, IWI 83.3 Hz")."""
    per_cpu: dict[int, list[str]] = {}
    for r in sampled.get("rates") or []:
        per_cpu.setdefault(r["cpu"], []).append(f"{r['kind']} {format_hz(r['rate_hz'])}")
    return [f"CPU {cpu}: {', '.join(kinds)}" for cpu, kinds in sorted(per_cpu.items())]


def core_text(cause: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    """A cause's core as a table shows it: "3", or "3 on root@db1" when the run was traced
    on other hosts too (each host has its own CPU 3)."""
    if cause.get("cpu") is None:
        return ""
    hosts = (doc.get("trace") or {}).get("hosts") or []
    if cause.get("host") and any(not h.get("local", True) for h in hosts):
        return f"{cause['cpu']} on {cause['host']}"
    return str(cause["cpu"])


# The causes that are the measurement's, not the DuT's: when they explain part of a tail, every
# surface says first that this host could not measure what was asked.
HYPERVISOR = "hypervisor"
OWN_PROCESS = "lowtail_process"
MEASUREMENT_KINDS = ("generator_stall", "timestamper_stall", "shared_core", OWN_PROCESS, HYPERVISOR)

# How the headline says each measurement artefact happened, and what to change for each.
ARTEFACT_WORDS = {
    "generator_stall": "the generator stalled",
    "timestamper_stall": "the timestamper stalled",
    "shared_core": "the {role} took the DuT's core",
    OWN_PROCESS: "lowtail's own process took the DuT's core",
    HYPERVISOR: "the hypervisor took CPU time from this machine (steal)",
}
ARTEFACT_REMEDIES = {
    ("generator_stall", "timestamper_stall"): "give the generator and the timestamper isolated cores of their own, "
    "stop other load on them, or lower the rate",
    ("shared_core",): "give the DuT cores of its own, apart from the generator's and the timestamper's ([cores])",
    (OWN_PROCESS,): "keep lowtail's own processes off the DuT's cores (a housekeeping core: [cores] housekeeping)",
    (HYPERVISOR,): "measure on dedicated vCPUs (no overcommitted host) or on bare metal",
}


def artefact_what(cause: CauseDoc) -> str:
    """What a measurement artefact names: the hypervisor by its CPUs, never a process's name."""
    if cause["kind"] == HYPERVISOR:
        return f"steal time on CPU {cause['cpu']}" if cause["cpu"] is not None else "steal time"
    return str(cause["evidence"].get("what", ""))


def headline(causes: list[CauseDoc]) -> str | None:
    """What every surface says first when the host could not measure what was asked: the
    measurement's own stalls, its own processes, or the hypervisor's steal explain part of the
    tail — each such cause with its own share, as its row of the table gives it."""
    artefacts = [c for c in causes if c["kind"] in MEASUREMENT_KINDS]
    if not artefacts:
        return None
    happened = "; ".join(
        f"{ARTEFACT_WORDS[c['kind']].format(role=c['role'])} ({artefact_what(c)}): {format_percent(c['share'])} of the tail"
        for c in artefacts
    )
    return (
        f"This host could not measure what was asked: {happened}. The tail is partly the measurement's, not "
        f"the DuT's: {_remedies(artefacts)}, then measure again."
    )


def runs_headline(causes_by_run: Mapping[int, list[CauseDoc]]) -> str | None:
    """The headline of several runs in one (a page's banner): each kind of artefact once, with
    the share of each run's tail it explains ("the generator stalled: 34.3 % of run 1's tail,
    22.8 % of run 2's"), the remedies once; which process or CPU it was is each run's own (its
    causes). None when no run's tail holds an artefact."""
    # Per kind of artefact, per run, the share of its tail (a run's causes of one kind — the
    # generator stalled for two reasons — add up: each tail packet is one cause's).
    shares: dict[str, dict[int, float]] = {}
    artefacts: list[CauseDoc] = []
    for run_id, causes in sorted(causes_by_run.items()):
        for c in causes:
            if c["kind"] in MEASUREMENT_KINDS:
                artefacts.append(c)
                per_run = shares.setdefault(ARTEFACT_WORDS[c["kind"]].format(role=c["role"]), {})
                per_run[run_id] = per_run.get(run_id, 0.0) + float(c["share"])
    if not artefacts:
        return None
    runs = sorted(r for r, causes in causes_by_run.items() if any(c["kind"] in MEASUREMENT_KINDS for c in causes))
    named = f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(map(str, runs))}"
    happened = "; ".join(f"{what}: {_shares_text(sorted(each.items()))}" for what, each in shares.items())
    return (
        f"This host could not measure what was asked in {named}: {happened}. Those tails are partly the "
        f"measurement's, not the DuT's: {_remedies(artefacts)}, then measure again."
    )


# Past this many runs, a kind of artefact gives the range of its shares rather than each run's.
SHARES_LISTED = 4


def _shares_text(each: list[tuple[int, float]]) -> str:
    """ "34.3 % of run 1's tail, 22.8 % of run 2's", or past `SHARES_LISTED` runs "11.1 % to
    34.3 % of the tails of 9 runs"."""
    if len(each) > SHARES_LISTED:
        low, high = min(s for _, s in each), max(s for _, s in each)
        return f"{format_percent(low)} to {format_percent(high)} of the tails of {len(each)} runs"
    first, *rest = each
    return ", ".join(
        [
            f"{format_percent(first[1])} of run {first[0]}'s tail",
            *(f"{format_percent(s)} of run {r}'s" for r, s in rest),
        ]
    )


def _remedies(artefacts: list[CauseDoc]) -> str:
    kinds = {c["kind"] for c in artefacts}
    return "; ".join(text for kind, text in ARTEFACT_REMEDIES.items() if kinds & set(kind))
