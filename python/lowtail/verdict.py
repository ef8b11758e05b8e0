"""The URLLC verdict: a budget (a percentile of latency under a bound, at most so many
packets lost), read from an experiment file's [verdict] table, and a run judged against it.

The experiment file, `lowtail run`'s table and the experiment report all use this one
definition, so a run passes or fails the same way wherever it is shown."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lowtail import percentiles
from lowtail.errors import UserError
from lowtail.units import format_ns, parse_duration_ns

# The keys of an experiment file's [verdict] table.
SETTINGS = ("percentile", "budget", "max_loss")

# What a run can be judged, in the order the checks are made.
INVALID = "INVALID"
FLOOR = "floor"
FAIL_LOSS = "FAIL: loss"
INCONCLUSIVE = "inconclusive"
FAIL_LATENCY = "FAIL: latency"
PASS = "PASS"


class VerdictSettingError(ValueError):
    """A [verdict] setting that cannot be used; `key` names it, so the experiment file's
    reader can point at its line."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Verdict:
    """The URLLC budget: the `percentile` of latency under `budget_ns`, at most `max_loss` lost."""

    percentile: float = 99.999
    budget_ns: int = 1_000_000
    max_loss: int = 0

    @property
    def key(self) -> str:
        """The percentile's key in an analysis's `latency_ns` ("p99_999")."""
        return percentiles.by_percent(self.percentile).key

    @property
    def packets_needed(self) -> int:
        """Packets a run needs for its percentile to be more than its maximum."""
        return round(1 / (1 - self.percentile / 100))

    def judge(self, run: dict[str, Any]) -> str:
        """A stored run (with its analysis figures) against the budget: INVALID (a calibration
        run too: it is no floor then), floor (calibration), FAIL: loss, inconclusive (fewer
        packets than the percentile needs), FAIL: latency, or PASS."""
        if not run["valid"] or run.get("analysis_id") is None:
            return INVALID
        if run["calibration"]:
            return FLOOR
        if run["lost"] is not None and run["lost"] > self.max_loss:
            return FAIL_LOSS
        lat = (run.get("figures") or {}).get("latency_ns") or {}
        if not lat or lat.get("samples", 0) < self.packets_needed:
            return INCONCLUSIVE
        value = lat.get(self.key)
        return FAIL_LATENCY if value is None or value >= self.budget_ns else PASS

    def why_inconclusive(self) -> str:
        """Why a run is inconclusive, in a few words: "under 100,000 packets after the warm-up"."""
        return f"under {self.packets_needed:,} packets after the warm-up"

    def describe(self) -> str:
        """The budget in words: "99.999th percentile under 1.000 ms, no loss"."""
        loss = "no loss" if self.max_loss == 0 else f"at most {self.max_loss} lost"
        return f"{self.percentile:g}th percentile under {format_ns(self.budget_ns)}, {loss}"


def parse_verdict(table: dict[str, Any]) -> Verdict:
    """The budget of a [verdict] table (missing keys take the defaults). Raises
    VerdictSettingError naming the key at fault."""
    percentile = table.get("percentile", Verdict.percentile)
    if percentiles.by_percent(percentile) is None:
        raise VerdictSettingError(
            f"percentile must be one of the exact percentiles lowtail computes: "
            f"{', '.join(f'{p.percent:g}' for p in percentiles.HEADLINE)} (got {percentile!r})",
            "percentile",
        )
    try:
        budget = parse_duration_ns(table.get("budget", "1ms"), default_unit="s")
    except UserError as e:
        raise VerdictSettingError(f"budget: {e}", "budget") from None
    max_loss = table.get("max_loss", Verdict.max_loss)
    if isinstance(max_loss, bool) or not isinstance(max_loss, int) or max_loss < 0:
        raise VerdictSettingError(f"max_loss must be a whole number ≥ 0 (got {max_loss!r})", "max_loss")
    return Verdict(float(percentile), budget, max_loss)


def stored_verdict(spec: dict[str, Any], budget: str | None = None) -> Verdict:
    """The verdict of a stored experiment file, with an optional budget given on the
    command line. A file stored by another version whose settings no longer parse falls
    back to the default budget."""
    try:
        verdict = parse_verdict(spec.get("verdict", {}))
    except Exception:  # a spec stored by another version: fall back to the default budget
        verdict = Verdict()
    if budget is not None:
        verdict = dataclasses.replace(verdict, budget_ns=parse_duration_ns(budget))
    return verdict
