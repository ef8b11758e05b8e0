"""A verdict as it is stored and printed: a budget, a judgement, a device's verdict.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import NotRequired, TypedDict

# -- a verdict (`verdict.Judgement.as_dict`) and a comparison (`lowtail compare --json`) -------


class JudgementDocument(TypedDict):
    """One run or configuration judged against a budget."""

    status: str
    cause: str | None
    label: str
    reason: str
    percentile: str  # the judged percentile's key, "p99_999"
    value_ns: int | None
    budget_ns: int | None
    samples: int | None
    packets_needed: int | None
    lost: int | None
    max_loss: int | None
    degraded: list[str]
    # The confidence of the judged one-sided bounds, and the bounds (None: not bounded there).
    confidence: float | None
    lower_ns: int | None
    upper_ns: int | None
    # Inconclusive: about how many more packets would decide it, and how long they take.
    more_packets: int | None
    more_seconds: float | None
    budget: NotRequired[str]  # the budget in words (a comparison's configuration, analyze --budget)


class DeviceConfigurationVerdict(TypedDict):
    """One configuration of a device, as its device's verdict lists it."""

    label: str  # what tells it from the device's others ("50 kpps")
    status: str
    verdict: str  # the judgement's short form ("FAIL: latency", "PASS, degraded")


class DeviceVerdictDocument(TypedDict):
    """A device's verdict over its configurations (verdict/device.py): PASS only if every
    configuration passes, FAIL if any fails, else inconclusive with what is missing."""

    device: str
    kind: str
    status: str
    summary: str
    missing: list[str]
    degraded: int  # configurations judged on degraded runs
    configurations: list[DeviceConfigurationVerdict]


class BudgetDocument(TypedDict):
    """The budget every configuration of a comparison is judged against."""

    percentile: float
    key: str
    budget_ns: int
    max_loss: int
    text: str
