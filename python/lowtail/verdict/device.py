"""A device's verdict, defined once (docs/statistics.md, "A device's verdict").

A device — one `[[dut]]` of an experiment, by its name — is measured in several
configurations: its option sweeps (rule sets, containment …) × the traffic points (rates,
frame sizes, bursts, flows), each judged on its own by `verdict/judge.py` (a run, or a
configuration's pooled repetitions). The device's answer is built from those judgements and
from nothing else:

- **FAIL** if any configuration fails (a loss, or a percentile whose lower bound breaks the
  budget): the device does not keep the budget in that configuration;
- **PASS** only if every configuration the experiment names passes: an intersection-union
  test, so the chance of PASS for a device that breaks the budget in any one configuration
  is at most 1 − confidence, however many configurations there are;
- otherwise **inconclusive**, saying what is missing: each configuration that could not
  decide (the packets more it needs) or that could not be trusted (an invalid run) —
  **INVALID** when none of them could be trusted.

Calibration runs (the floor) are not part of any device. The headline card of a page, the
closing lines of `lowtail run`, its `--json`, and `lowtail certify` all read this, so no card
shows PASS over a configuration that did not pass."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lowtail.core.units import format_count, format_seconds
from lowtail.verdict.document import DeviceVerdictDocument, JudgementDocument

PASS, FAIL, INCONCLUSIVE, INVALID, FLOOR = "PASS", "FAIL", "inconclusive", "INVALID", "floor"


def combined_status(statuses: Iterable[str]) -> str:
    """The status of several configurations taken together (the rule above): FAIL if any
    fails, PASS only if all pass, INVALID when none could be trusted, else inconclusive.
    Floors are not judged; nothing judged at all is inconclusive."""
    found = [s for s in statuses if s != FLOOR]
    if FAIL in found:
        return FAIL
    if found and all(s == PASS for s in found):
        return PASS
    if found and all(s == INVALID for s in found):
        return INVALID
    return INCONCLUSIVE


@dataclass(frozen=True)
class Judged:
    """One configuration of a device as a surface judged it: what tells it from the
    device's other configurations ("50 kpps", "rules=1000 · 20 kpps"), and its judgement."""

    label: str
    judgement: JudgementDocument


@dataclass(frozen=True)
class DeviceVerdict:
    """A device and the judgements of its configurations."""

    device: str
    kind: str
    parts: tuple[Judged, ...]

    @property
    def status(self) -> str:
        return combined_status(p.judgement["status"] for p in self.parts)

    @property
    def degraded(self) -> int:
        """How many of its configurations' judgements stand on degraded runs."""
        return sum(bool(p.judgement["degraded"]) for p in self.parts)

    def outcomes(self) -> str:
        """Each judgement's label with the configurations that got it, worst first: "FAIL:
        latency at 100 kpps; inconclusive at 50 kpps; PASS at 20 kpps". A configuration
        judged once per repetition whose runs were judged apart says how many got which
        ("PASS at 20 kpps (2 of 3 runs)")."""
        judged = [p for p in self.parts if p.judgement["status"] != FLOOR]
        runs = {label: sum(p.label == label for p in judged) for label in dict.fromkeys(p.label for p in judged)}
        order = {FAIL: 0, INVALID: 1, INCONCLUSIVE: 2, PASS: 3}
        by_label: dict[str, dict[str, int]] = {}
        for p in sorted(judged, key=lambda p: order.get(p.judgement["status"], 4)):
            where = by_label.setdefault(p.judgement["label"], {})
            where[p.label] = where.get(p.label, 0) + 1
        return "; ".join(
            f"{verdict} at "
            + ", ".join(
                label if got == runs[label] else f"{label} ({got} of {runs[label]} runs)"
                for label, got in where.items()
            )
            for verdict, where in by_label.items()
        )

    def missing(self) -> list[str]:
        """What keeps an inconclusive device from a verdict, one entry per configuration that
        did not decide: the packets more it needs (and how long they take), or why it could
        not be trusted or judged."""
        if self.status not in (INCONCLUSIVE, INVALID):
            return []
        if not any(p.judgement["status"] != FLOOR for p in self.parts):
            return ["no configuration of it was judged"]
        out: dict[str, tuple[int, str]] = {}  # per configuration, the most any of its runs needs
        for p in self.parts:
            j = p.judgement
            seconds = j.get("more_seconds")
            if j["status"] == INCONCLUSIVE and j.get("more_packets"):
                took = f" ({format_seconds(seconds)} at its rate)" if seconds else ""
                need = (
                    j["more_packets"] or 0,
                    f"{p.label}: about {format_count(j['more_packets'])} more packets{took}, "
                    "decided about half the time",
                )
            elif j["status"] == INCONCLUSIVE and (j.get("packets_needed") or 0) > (j.get("samples") or 0) > 0:
                # Its bound's own count (stalls too few to measure, the maximum): what a longer run
                # must hold; the whole reason is the judgement's, shown beside it.
                needed, samples = int(j["packets_needed"] or 0), int(j["samples"] or 0)
                times = needed / samples
                need = (
                    needed - samples,
                    f"{p.label}: a run of about {format_count(needed)} packets "
                    f"({f'{times:,.0f}' if times >= 10 else f'{times:.2g}'}× this one) can bound it",
                )
            elif j["status"] == INCONCLUSIVE:
                need = (-1, f"{p.label}: {j['reason']}")
            elif j["status"] == INVALID:
                need = (-2, f"{p.label}: no run to trust ({j['reason']})")
            else:
                continue
            if p.label not in out or need[0] > out[p.label][0]:
                out[p.label] = need
        return [text for _, text in out.values()]

    def summary(self) -> str:
        """The device's answer in one line: "inconclusive — PASS at 100 kpps; inconclusive at
        20 kpps · to decide: 20 kpps: about 120,000 more packets (6 s at its rate), decided about
        half the time"."""
        labels = {p.judgement["label"] for p in self.parts if p.judgement["status"] != FLOOR}
        label = labels.pop() if len(labels) == 1 else ""
        if self.status == PASS and not self.degraded:
            head = f"PASS in every configuration ({', '.join(dict.fromkeys(p.label for p in self.parts))})"
        elif label.startswith(self.status):
            # One label for every configuration: the status said once ("inconclusive — degraded at
            # 10 kpps, 20 kpps", not "inconclusive — inconclusive, degraded at …").
            rest = label[len(self.status) :].lstrip(",: ")
            head = self.status + (f" — {rest}" if rest else "") + self.outcomes()[len(label) :]
        else:
            head = f"{self.status} — {self.outcomes()}"
        missing = self.missing()
        degraded = f" · {self.degraded} of {len(self.parts)} on degraded runs" if self.degraded else ""
        return head + (f" · to decide: {'; '.join(missing)}" if missing else "") + degraded

    def as_dict(self) -> DeviceVerdictDocument:
        """The device's verdict as `--json` prints it."""
        return {
            "device": self.device,
            "kind": self.kind,
            "status": self.status,
            "summary": self.summary(),
            "missing": self.missing(),
            "degraded": self.degraded,
            "configurations": [
                {"label": p.label, "status": p.judgement["status"], "verdict": p.judgement["label"]}
                for p in self.parts
                if p.judgement["status"] != FLOOR
            ],
        }


def device_verdicts(judged: Sequence[tuple[str, str, Judged]]) -> list[DeviceVerdict]:
    """The verdict of each device, from (device name, its kind, one judged configuration)
    in the order the devices first appear."""
    parts: dict[tuple[str, str], list[Judged]] = {}
    for device, kind, part in judged:
        parts.setdefault((device, kind), []).append(part)
    return [DeviceVerdict(device, kind, tuple(p)) for (device, kind), p in parts.items()]
