"""The URLLC verdict: a budget (a percentile of latency under a bound, at most so many
packets lost), read from an experiment file's [verdict] table, and a run judged against it.

The experiment file, `lowtail run`'s table, the experiment report and comparisons all use
this one definition, so a run passes or fails the same way wherever it is shown.

How a run is judged, in this order:

- a calibration run is the floor, not judged; a run its instruments distrust is INVALID;
- more packets lost than the budget allows: FAIL (loss);
- the run's nearest-rank p-quantile at or above the bound: FAIL (latency), whatever the
  number of packets. With fewer packets than 1/(1−p) that quantile is their maximum (rank
  ⌈p·n⌉ = n), so one packet at the bound already breaks a budget no run of that size can
  show to be kept;
- otherwise, fewer packets than 1/(1−p): inconclusive (none reached the bound, but too few
  were seen to show the percentile under it);
- otherwise PASS.

Every judgement carries the reason a person reads and the figures it used."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any

import msgspec

from lowtail import percentiles, schema
from lowtail.documents import JudgementDocument
from lowtail.errors import UserError
from lowtail.units import format_count, format_ns, parse_duration_ns

# The keys of an experiment file's [verdict] table.
SETTINGS = ("percentile", "budget", "max_loss")


class VerdictTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The types of a [verdict] table (an experiment file's, an import spec's), checked by
    `lowtail.schema` before `parse_verdict` reads the values."""

    percentile: Annotated[int | float, schema.rule("must be a percentile such as 99.999")] | None = None
    budget: Annotated[str | int | float, schema.rule("must be a duration such as 350us or 1ms")] | None = None
    max_loss: Annotated[int, schema.rule("must be a whole number ≥ 0", ge=0, le=schema.INT64_MAX)] | None = None


class Status(enum.Enum):
    """What a run is judged: its value is how tables show it."""

    FLOOR = "floor"
    INVALID = "INVALID"
    FAIL = "FAIL"
    INCONCLUSIVE = "inconclusive"
    PASS = "PASS"


class Cause(enum.Enum):
    """What a FAIL broke."""

    LOSS = "loss"
    LATENCY = "latency"


class VerdictSettingError(ValueError):
    """A [verdict] setting that cannot be used; `key` names it, so the experiment file's
    reader can point at its line."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Judgement:
    """One run against the budget: the status, the reason in words, and the figures used."""

    status: Status
    reason: str
    cause: Cause | None = None
    percentile: percentiles.Percentile | None = None  # the judged one (its key in documents)
    value_ns: int | None = None  # the run's figure at that percentile
    budget_ns: int | None = None
    samples: int | None = None
    packets_needed: int | None = None
    lost: int | None = None
    max_loss: int | None = None
    # Why the run's traffic or set-up was not what the file asked for (stored with the
    # run): the verdict stands, marked as one that must be read with that in mind.
    degraded: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The short form tables show: "PASS", "FAIL: latency", "inconclusive", with
        ", degraded" when the run is marked so."""
        text = self.status.value + (f": {self.cause.value}" if self.cause else "")
        return text + (", degraded" if self.degraded else "")

    @property
    def explanation(self) -> str:
        """The reason, preceded by what degraded the run: what a footnote or a report says."""
        return "; ".join([*(f"degraded: {d}" for d in self.degraded), self.reason])

    def as_dict(self) -> JudgementDocument:
        """The judgement as `--json` prints it."""
        return {
            "status": self.status.value,
            "cause": self.cause.value if self.cause else None,
            "label": self.label,
            "reason": self.reason,
            "percentile": self.percentile.key if self.percentile is not None else "",
            "value_ns": self.value_ns,
            "budget_ns": self.budget_ns,
            "samples": self.samples,
            "packets_needed": self.packets_needed,
            "lost": self.lost,
            "max_loss": self.max_loss,
            "degraded": list(self.degraded),
        }


# The budget's percentile unless one is given.
DEFAULT_PERCENTILE = percentiles.by_key("p99_999")


@dataclass(frozen=True)
class Verdict:
    """The URLLC budget: the `percentile` of latency under `budget_ns`, at most `max_loss`
    lost. The percentile is a headline one, exact (a percent given as a number, 99.99, is
    read as the headline percentile it names; ValueError for any other)."""

    percentile: percentiles.Percentile = DEFAULT_PERCENTILE
    budget_ns: int = 1_000_000
    max_loss: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.percentile, percentiles.Percentile):
            object.__setattr__(self, "percentile", headline_percentile(self.percentile))

    @property
    def judged(self) -> percentiles.Percentile:
        """The headline percentile the budget is about."""
        return self.percentile

    @property
    def key(self) -> str:
        """The percentile's key in an analysis's `latency_ns` ("p99_999")."""
        return self.percentile.key

    @property
    def packets_needed(self) -> int:
        """The fewest packets whose nearest-rank percentile is not their maximum: ⌈p·n⌉ < n
        exactly when n ≥ 1/(1−p) (computed from the percent's digits, exactly)."""
        return math.ceil(1 / (1 - Fraction(self.judged.digits) / 100))

    def judge(self, run: Mapping[str, Any]) -> Judgement:
        """A stored run (with its analysis figures) against the budget."""
        degraded = tuple(run.get("degraded_reasons") or ())
        # An invalid calibration run is no floor either: it is judged INVALID first.
        if not run["valid"] or run.get("analysis_id") is None:
            reasons = "; ".join(run.get("invalid_reasons") or []) or "the run has no analysis"
            return Judgement(Status.INVALID, f"not to be trusted: {reasons}", degraded=degraded)
        if run["calibration"]:
            return Judgement(Status.FLOOR, "calibration: the same traffic over a plain wire, the testbed's floor")
        lat = (run.get("figures") or {}).get("latency_ns") or {}
        return self.judge_figures(
            int(lat.get("samples") or 0), lat.get(self.key), run.get("lost"), run.get("sent"), degraded
        )

    def judge_figures(
        self, samples: int, value: int | None, lost: int | None, sent: int | None, degraded: tuple[str, ...] = ()
    ) -> Judgement:
        """Measured figures against the budget: `samples` latencies whose nearest-rank value
        at the judged percentile is `value`, `lost` of `sent` packets lost. What a run is
        judged by, and a comparison's configuration by its pooled repetitions."""
        figures: dict[str, Any] = dict(
            percentile=self.percentile,
            value_ns=value,
            budget_ns=self.budget_ns,
            samples=samples,
            packets_needed=self.packets_needed,
            lost=lost,
            max_loss=self.max_loss,
            degraded=degraded,
        )
        name, bound = self.judged.label, format_ns(self.budget_ns)
        if lost is not None and lost > self.max_loss:
            allowed = "none" if self.max_loss == 0 else f"at most {self.max_loss:,}"
            return Judgement(
                Status.FAIL,
                f"{lost:,} of {format_count(sent)} packets lost; the budget allows {allowed}",
                Cause.LOSS,
                **figures,
            )
        if samples == 0 or value is None:
            return Judgement(Status.INCONCLUSIVE, "no packet arrived: no latency to judge", **figures)
        if value >= self.budget_ns:
            few = (
                f"; with fewer than {self.packets_needed:,} packets the {name} is their maximum"
                if samples < self.packets_needed
                else ""
            )
            return Judgement(
                Status.FAIL,
                f"{name} is {format_ns(value)}, not under {bound} ({samples:,} packets{few})",
                Cause.LATENCY,
                **figures,
            )
        if samples < self.packets_needed:
            return Judgement(
                Status.INCONCLUSIVE,
                f"{samples:,} packets; {name} needs {self.packets_needed:,}, and none reached {bound} "
                f"(max {format_ns(value)})",
                **figures,
            )
        loss = "no loss" if not lost else f"{lost:,} lost"
        return Judgement(
            Status.PASS, f"{name} is {format_ns(value)}, under {bound} ({samples:,} packets, {loss})", **figures
        )

    def why_inconclusive(self) -> str:
        """Why a run is inconclusive, in a few words: "under 100,000 packets after the warm-up"."""
        return f"under {self.packets_needed:,} packets after the warm-up"

    def describe(self) -> str:
        """The budget in words: "99.999th percentile under 1.000 ms, no loss"."""
        loss = "no loss" if self.max_loss == 0 else f"at most {self.max_loss} lost"
        return f"{self.percentile.digits}th percentile under {format_ns(self.budget_ns)}, {loss}"


# -- reading a budget: an experiment file's [verdict], or a request over the stored one ----------


def headline_percentile(value: Any) -> percentiles.Percentile:
    """The headline percentile a percent names (99.99, "99.99"); ValueError for any other."""
    try:
        quantile = percentiles.quantile_of_percent(value)
    except (TypeError, ValueError, ZeroDivisionError):
        quantile = None
    found = next((p for p in percentiles.HEADLINE if p.quantile == quantile), None)
    if isinstance(value, bool) or found is None:
        raise ValueError(
            f"percentile must be one of the exact percentiles lowtail computes: "
            f"{', '.join(p.digits for p in percentiles.HEADLINE)} (got {value!r})"
        )
    return found


def _percentile_setting(value: Any) -> percentiles.Percentile:
    try:
        return headline_percentile(value)
    except ValueError as e:
        raise VerdictSettingError(str(e), "percentile") from None


def _budget_setting(value: Any) -> int:
    try:
        return parse_duration_ns(value, default_unit="s")
    except UserError as e:
        raise VerdictSettingError(f"budget: {e}", "budget") from None


def _max_loss_setting(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VerdictSettingError(f"max_loss must be a whole number ≥ 0 (got {value!r})", "max_loss")
    return value


def parse_verdict(table: dict[str, Any]) -> Verdict:
    """The budget of a [verdict] table (missing keys take the defaults). Raises
    VerdictSettingError naming the key at fault."""
    return Verdict(
        _percentile_setting(table.get("percentile", DEFAULT_PERCENTILE.digits)),
        _budget_setting(table.get("budget", "1ms")),
        _max_loss_setting(table.get("max_loss", Verdict.max_loss)),
    )


@dataclass(frozen=True)
class VerdictRequest:
    """A verdict asked for, as one unit, by the command line (`--budget`, `--percentile`,
    `--max-loss`, `--confidence`), the Python API and the pages: each part given replaces
    the stored budget's (an experiment file's [verdict], else the default); `confidence` is
    the level of the intervals it is read with, a fraction (0.95)."""

    budget_ns: int | None = None
    percentile: percentiles.Percentile | None = None
    max_loss: int | None = None
    confidence: float | None = None

    @classmethod
    def parse(
        cls,
        budget: str | int | None = None,
        percentile: str | float | None = None,
        max_loss: int | None = None,
        confidence: str | float | None = None,
    ) -> VerdictRequest:
        """The request from what a person typed ("350us", "99.99", 0, "95" or "95%" or
        "0.95"); UserError naming the option at fault."""
        try:
            return cls(
                _budget_setting(budget) if budget is not None else None,
                _percentile_setting(percentile) if percentile is not None else None,
                _max_loss_setting(max_loss) if max_loss is not None else None,
                parse_confidence(confidence) if confidence is not None else None,
            )
        except VerdictSettingError as e:
            raise UserError(f"--{e.key.replace('_', '-')}: {e}") from None

    @property
    def given(self) -> bool:
        """Whether any part of the budget is asked for (the confidence is not a budget's)."""
        return self.budget_ns is not None or self.percentile is not None or self.max_loss is not None

    def over(self, stored: Verdict) -> Verdict:
        """The budget asked for: the stored one with the parts given replaced."""
        return Verdict(
            self.percentile if self.percentile is not None else stored.percentile,
            self.budget_ns if self.budget_ns is not None else stored.budget_ns,
            self.max_loss if self.max_loss is not None else stored.max_loss,
        )


def parse_confidence(value: str | float) -> float:
    """A confidence level as a fraction: "95", "95%" and 95 are percents, "0.95" and 0.95
    a fraction already. VerdictSettingError unless it lies strictly between 0 and 1."""
    text = str(value).strip()
    percent = text.endswith("%")
    digits = text.removesuffix("%").strip()
    # ASCII only: float() would read "١٢" (Arabic-Indic digits) as 12.
    if not isinstance(value, (int, float)) and not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?", digits):
        raise VerdictSettingError(f"{value!r} is not a confidence level (95, 95% or 0.95)", "confidence")
    try:
        number = float(digits)
    except ValueError:
        raise VerdictSettingError(f"{value!r} is not a confidence level (95, 95% or 0.95)", "confidence") from None
    level = number / 100 if percent or number > 1 else number
    if not 0.0 < level < 1.0:
        raise VerdictSettingError(f"a confidence level lies between 0 and 100 % (got {value!r})", "confidence")
    return level


def stored_verdict(spec: dict[str, Any], request: VerdictRequest | None = None) -> Verdict:
    """The verdict of a stored experiment file, with what a request asks for over it. A
    file stored by another version whose settings no longer parse falls back to the
    default budget."""
    try:
        verdict = parse_verdict(spec.get("verdict", {}))
    except Exception:  # a spec stored by another version: fall back to the default budget
        verdict = Verdict()
    return request.over(verdict) if request is not None else verdict
