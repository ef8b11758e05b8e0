"""The URLLC verdict: a budget (a percentile of latency under a bound, at most so many
packets lost, judged at a confidence), read from an experiment file's [verdict] table, and
a run — or a configuration's pooled runs, or a plain analysis — judged against it.

`lowtail run`'s table, the experiment report, comparisons, `analyze --budget`, the
qualification record and the Python API all use this one rule, so a run passes or fails
the same way wherever it is shown. It judges the one-sided confidence bounds every
analysis stores with its figures (`intervals.bounds`, at the verdict's confidence; see
`compare.intervals`, which allows for clustered packets), in this order:

- a calibration run is the floor, not judged; a run its instruments distrust is INVALID;
- more packets lost than the budget allows: FAIL (loss) — packets an IPS's drop rule meant
  to remove (`[traffic] match_share`, `unintended_loss`) are not loss;
- the percentile's lower bound at or above the budget: FAIL (latency) — with that
  confidence, the percentile breaks the budget;
- its upper bound under the budget: PASS — with that confidence, it keeps it. With no
  packet above the budget, 99.999 % needs about 300,000 independent packets for that
  at 95 % (more when they cluster);
- otherwise inconclusive, with the exact count of packets that reach the budget and how
  many packets more (and how long at the run's rate) a run would need to be decided about
  half the time, if the share of packets over the budget stays as measured (the median
  length that decides: docs/statistics.md, §2).

Every judgement carries the reason a person reads and the figures it used."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import msgspec

from lowtail.core import confidence as bounds
from lowtail.core import percentiles, schema
from lowtail.core.errors import UserError
from lowtail.core.units import format_count, format_ns, format_percent, format_rate, parse_duration_ns
from lowtail.experiment.document import ExperimentFile
from lowtail.verdict.document import JudgementDocument

# The keys of an experiment file's [verdict] table.
SETTINGS = ("percentile", "budget", "max_loss", "confidence")
# The confidence of a verdict unless the file says otherwise: its bounds are one-sided at it.
DEFAULT_CONFIDENCE = 0.95


class VerdictTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The types of a [verdict] table (an experiment file's, an import spec's), checked by
    `lowtail.core.schema` before `parse_verdict` reads the values."""

    percentile: Annotated[int | float, schema.rule("must be a percentile such as 99.999")] | None = None
    budget: Annotated[schema.UnitValue, schema.with_unit("duration")] | None = None
    max_loss: Annotated[int, schema.rule("must be a whole number ≥ 0", ge=0, le=schema.INT64_MAX)] | None = None
    confidence: Annotated[int | float | str, schema.rule("must be a confidence such as 95, '95%' or 0.95")] | None = (
        None
    )


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


class _Measured(TypedDict):
    """The figures a judgement used (`Judgement`'s fields of the same names)."""

    percentile: percentiles.Percentile
    value_ns: int | None
    budget_ns: int
    samples: int
    packets_needed: int | None
    lost: int | None
    max_loss: int
    degraded: tuple[str, ...]
    confidence: float
    lower_ns: int | None
    upper_ns: int | None


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
    confidence: float | None = None
    # The judged percentile's one-sided bounds at that confidence (None: not bounded there).
    lower_ns: int | None = None
    upper_ns: int | None = None
    # Inconclusive: packets beyond `samples` that would decide it, and how long they take.
    more_packets: int | None = None
    more_seconds: float | None = None

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
            "confidence": self.confidence,
            "lower_ns": self.lower_ns,
            "upper_ns": self.upper_ns,
            "more_packets": self.more_packets,
            "more_seconds": self.more_seconds,
        }


# The budget's percentile unless one is given.
DEFAULT_PERCENTILE = percentiles.by_key("p99_999")


@dataclass(frozen=True)
class Verdict:
    """The URLLC budget: the `percentile` of latency under `budget_ns` with `confidence`
    (a fraction: the verdict judges one-sided bounds at it), at most `max_loss` lost. The
    percentile is a headline one, exact (a percent given as a number, 99.99, is read as the
    headline percentile it names; ValueError for any other)."""

    percentile: percentiles.Percentile = DEFAULT_PERCENTILE
    budget_ns: int = 1_000_000
    max_loss: int = 0
    confidence: float = DEFAULT_CONFIDENCE

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
    def tail(self) -> float:
        """The error a verdict allows on each side: 1 − confidence."""
        return 1.0 - self.confidence

    @property
    def packets_needed(self) -> int:
        """The fewest independent packets that can PASS: their largest is then the upper
        bound of the percentile at the verdict's confidence (299,572 for 99.999 % at 95 %)."""
        return bounds.packets_to_bound(self.judged.quantile, self.tail)

    @classmethod
    def of_judgement(cls, judged: Mapping[str, Any]) -> Verdict | None:
        """The budget a stored judgement was made against (`analyze --budget` keeps its
        judgement with the figures, not its options); None when the judgement does not name
        a whole budget (written by another version, or not by lowtail)."""
        try:
            return cls(
                percentiles.by_key(str(judged["percentile"])),
                _budget_setting(f"{int(judged['budget_ns'])}ns"),
                _max_loss_setting(judged["max_loss"]),
                parse_confidence(judged["confidence"]),
            )
        except (KeyError, TypeError, ValueError, VerdictSettingError):
            return None

    def judge(self, run: Mapping[str, Any]) -> Judgement:
        """A stored run (with its analysis figures) against the budget."""
        degraded = tuple(run.get("degraded_reasons") or ())
        # An invalid calibration run is no floor either: it is judged INVALID first.
        if not run["valid"] or run.get("analysis_id") is None:
            reasons = "; ".join(run.get("invalid_reasons") or []) or "the run has no analysis"
            return Judgement(Status.INVALID, f"not to be trusted: {reasons}", degraded=degraded)
        if run["calibration"]:
            return Judgement(Status.FLOOR, "calibration: the same traffic over a plain wire, the testbed's floor")
        figures = run.get("figures") or {}
        lat = figures.get("latency_ns") or {}
        return self.judge_figures(
            int(lat.get("samples") or 0),
            lat.get(self.key),
            unintended_loss(run),
            run.get("sent"),
            degraded,
            figures.get("intervals"),
            run.get("rate_pps"),
        )

    def judge_figures(
        self,
        samples: int,
        value: int | None,
        lost: int | None,
        sent: int | None,
        degraded: tuple[str, ...] = (),
        intervals: Mapping[str, Any] | None = None,
        rate_pps: float | None = None,
    ) -> Judgement:
        """Measured figures against the budget: `samples` latencies whose nearest-rank value
        at the judged percentile is `value`, `lost` of `sent` packets lost, and the bounds
        document of those latencies (`compare.intervals.bounds_document`). What a run is
        judged by, and a comparison's configuration by its pooled repetitions."""
        stored = (intervals or {}).get("bounds", {}).get(self.key) if intervals else None
        same_confidence = intervals is not None and math.isclose(intervals.get("confidence", 0.0), self.confidence)
        bound = stored if same_confidence else None
        # The packets that can bound the percentile from above at the clustering measured:
        # the interval's own figure, where there is one (independent packets' otherwise).
        needed = (bound or {}).get("packets_needed") or self.packets_needed
        figures = _Measured(
            percentile=self.percentile,
            value_ns=value,
            budget_ns=self.budget_ns,
            samples=samples,
            packets_needed=needed,
            lost=lost,
            max_loss=self.max_loss,
            degraded=degraded,
            confidence=self.confidence,
            lower_ns=(bound or {}).get("lower_ns"),
            upper_ns=(bound or {}).get("upper_ns"),
        )
        name, limit, sure = self.judged.label, format_ns(self.budget_ns), format_percent(self.confidence, "g")
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
        if bound is None:
            return Judgement(
                Status.INCONCLUSIVE,
                f"no confidence bounds at {sure} were stored with these figures (analysed by an earlier lowtail, "
                f"or at another confidence): `lowtail compare` computes them again from the stored latencies",
                **figures,
            )
        lower, upper = bound.get("lower_ns"), bound.get("upper_ns")
        loss = "no loss" if not lost else f"{lost:,} lost"
        if lower is not None and lower >= self.budget_ns:
            return Judgement(
                Status.FAIL,
                f"{name} is at least {format_ns(lower)} with {sure} confidence, not under {limit} "
                f"({format_ns(value)} measured, {samples:,} packets)",
                Cause.LATENCY,
                **figures,
            )
        if upper is not None and upper < self.budget_ns:
            return Judgement(
                Status.PASS,
                f"{name} is at most {format_ns(upper)} with {sure} confidence, under {limit} "
                f"({format_ns(value)} measured, {samples:,} packets, {loss})",
                **figures,
            )
        return self._inconclusive(samples, value, bound, intervals or {}, rate_pps, figures)

    def _inconclusive(
        self,
        samples: int,
        value: int,
        bound: Mapping[str, Any],
        intervals: Mapping[str, Any],
        rate_pps: float | None,
        figures: _Measured,
    ) -> Judgement:
        """Neither bound decides: what is known, and about how many packets more would decide."""
        name, limit, sure = self.judged.label, format_ns(self.budget_ns), format_percent(self.confidence, "g")
        upper = bound.get("upper_ns")
        known = (
            f"{name} is {format_ns(value)}, at most {format_ns(upper)} with {sure} confidence"
            if upper is not None
            else f"{name} is {format_ns(value)}, not bounded from above at {sure} confidence by {samples:,} packets"
        )
        dispersion = bound.get("dispersion")
        if dispersion is None:  # the series wanders: more of one run does not help
            why = bound.get("why") or "the latency wanders more slowly than one run can show"
            return Judgement(Status.INCONCLUSIVE, f"{known}; {why}", **figures)
        reached = packets_reaching(intervals, samples, self.budget_ns)
        share = reached / samples
        reaching = (
            f"{int(reached):,} of {samples:,} packets ({format_percent(share, '.3g')})"
            if float(reached).is_integer()
            else f"about {format_percent(share, '.3g')} of the packets"
        )
        q = self.judged.quantile
        total = (
            bounds.packets_to_pass(q, share, dispersion, self.tail)
            if value < self.budget_ns
            else bounds.packets_to_fail(q, share, dispersion, self.tail)
        )
        if total is None:
            return Judgement(
                Status.INCONCLUSIVE,
                f"{known}; {reaching} reach {limit}, as many as the budget allows: no number of packets will decide it",
                **figures,
            )
        # `total` is the length at which a run whose share over the budget is this run's is
        # decided: about half the runs of that length are (docs/statistics.md, §2).
        more = max(1, total - samples)
        seconds = more / rate_pps if rate_pps else None
        at = f" ({_seconds(seconds)} at {format_rate(rate_pps)})" if seconds is not None and rate_pps else ""
        clustered = f", their clustering as measured (D = {dispersion:.1f})" if dispersion > 1.05 else ""
        return Judgement(
            Status.INCONCLUSIVE,
            f"{known}, budget {limit}; {reaching} reach it: a run about {more:,} packets longer{at} would be "
            f"decided about half the time, if that share stays as measured{clustered}",
            **figures,
            more_packets=more,
            more_seconds=seconds,
        )

    def describe(self) -> str:
        """The budget in words: "99.999th percentile under 1.000 ms (95 % confidence), no loss"."""
        loss = "no loss" if self.max_loss == 0 else f"at most {self.max_loss} lost"
        sure = format_percent(self.confidence, "g")
        return f"{self.percentile.digits}th percentile under {format_ns(self.budget_ns)} ({sure} confidence), {loss}"


def _seconds(seconds: float) -> str:
    """A duration of measuring in seconds as people read it ("3.2 s", "2 min 05 s")."""
    from lowtail.core.units import format_minutes

    return f"{seconds:.1f} s" if seconds < 60 else format_minutes(seconds)


def packets_reaching(intervals: Mapping[str, Any], samples: int, budget_ns: int) -> float:
    """The packets at or above `budget_ns`: exactly (a whole number) from the count a bounds
    document keeps for the budget it was made for, or from its exceedance ladder where the
    ladder knows it exactly (no packet, or a value it holds); else interpolated between the
    ladder's values (a document made for another budget, or by an earlier lowtail)."""
    kept = next((int(c) for b, c in intervals.get("reach") or [] if b == budget_ns), None)
    if kept is not None:
        return kept
    ladder = intervals.get("above") or []
    exact = {v: c for v, c in ladder}
    if not ladder or budget_ns - 1 >= ladder[-1][0]:
        return 0
    if budget_ns - 1 in exact:
        return int(exact[budget_ns - 1])
    return share_at_or_above(ladder, samples, budget_ns) * samples


def share_at_or_above(ladder: list[list[int]], samples: int, budget_ns: int) -> float:
    """About what share of the packets reach `budget_ns`, from a bounds document's
    exceedance ladder ([value, packets above it], ascending): exact at the ladder's values,
    interpolated between them (they are ~1.25× apart in packets). Only for documents that
    lack the exact count (`packets_reaching`)."""
    if not ladder or samples <= 0:
        return 0.0
    below = budget_ns - 1  # packets at or above the budget are those above budget − 1
    if below >= ladder[-1][0]:
        return 0.0
    if below < ladder[0][0]:
        return ladder[0][1] / samples
    for (v0, c0), (v1, c1) in zip(ladder, ladder[1:]):
        if v0 <= below < v1:
            return (c0 - (c0 - c1) * (below - v0) / (v1 - v0)) / samples
    return 0.0


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


def _budget_setting(value: Any, stored: bool = False) -> int:
    """The budget with its unit ("350us"). `stored`: a table an older lowtail stored, which
    read a bare number as seconds (`budget = 350`: 350 s), is read as it was then."""
    bare = isinstance(value, (int, float)) and not isinstance(value, bool)
    bare = bare or (isinstance(value, str) and re.fullmatch(r"\s*[0-9]*\.?[0-9]+\s*", value) is not None)
    if stored and bare and math.isfinite(float(value)) and 0 <= float(value) * 1e9 <= 2**63 - 1:
        return round(float(value) * 1e9)  # what the experiment was measured and judged against
    try:
        return parse_duration_ns(value, what="budget")
    except UserError as e:
        raise VerdictSettingError(str(e), "budget") from None


def unintended_loss(run: Mapping[str, Any]) -> int | None:
    """The packets a stored run lost that its IPS did not mean to drop: what `max_loss`
    counts. A marked packet a drop rule removed (`traffic.matching.intended_drops`,
    experiment/matching.py) is the filter working; every other lost packet is loss."""
    lost = run.get("lost")
    matching = (run.get("traffic") or {}).get("matching")
    if lost is None or not matching:
        return None if lost is None else int(lost)
    return int(lost) - int(matching.get("intended_drops") or 0)


def _max_loss_setting(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VerdictSettingError(f"max_loss must be a whole number ≥ 0 (got {value!r})", "max_loss")
    return value


def parse_verdict(table: Mapping[str, object], stored: bool = False) -> Verdict:
    """The budget of a [verdict] table (missing keys take the defaults). Raises
    VerdictSettingError naming the key at fault. `stored`: a table kept with an experiment,
    read as the lowtail that stored it read it (a bare budget in seconds)."""
    return Verdict(
        _percentile_setting(table.get("percentile", DEFAULT_PERCENTILE.digits)),
        _budget_setting(table.get("budget", "1ms"), stored),
        _max_loss_setting(table.get("max_loss", Verdict.max_loss)),
        parse_confidence(table.get("confidence", DEFAULT_CONFIDENCE)),
    )


@dataclass(frozen=True)
class VerdictRequest:
    """A verdict asked for, as one unit, by the command line (`--budget`, `--percentile`,
    `--max-loss`, `--confidence`), the Python API and the pages: each part given replaces
    the stored budget's (an experiment file's [verdict], else the default); `confidence` is
    the level of the verdict's bounds and of the intervals shown with it, a fraction (0.95)."""

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
            self.confidence if self.confidence is not None else stored.confidence,
        )


def parse_confidence(value: object) -> float:
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
    # Under 50 % a one-sided lower bound would lie above the upper one: no verdict reads so.
    if isinstance(value, bool) or not 0.5 <= level < 1.0:
        raise VerdictSettingError(f"a confidence level lies between 50 and 100 % (got {value!r})", "confidence")
    return level


def stored_verdict(spec: ExperimentFile, request: VerdictRequest | None = None) -> Verdict:
    """The verdict of a stored experiment file, with what a request asks for over it. A
    file stored by another version whose settings no longer parse falls back to the
    default budget."""
    table = spec.get("verdict", {})
    try:
        verdict = parse_verdict(table, stored=True) if isinstance(table, dict) else Verdict()
    except Exception:  # a spec stored by another version: fall back to the default budget
        verdict = Verdict()
    return request.over(verdict) if request is not None else verdict
