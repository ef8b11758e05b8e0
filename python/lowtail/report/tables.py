"""Tables of model results as a header and rows of text: the terminal (`lowtail model ...`)
and the HTML reports show the same ones, built here once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from lowtail.analyze.document import IntervalDoc
from lowtail.compare.document import UNBOUNDED
from lowtail.core import percentiles
from lowtail.core.units import (
    format_count,
    format_counted,
    format_hz,
    format_ns,
    format_ns_interval,
    format_ns_per_s,
    format_ns_range,
    format_percent,
    format_rate,
)
from lowtail.verdict.judge import unintended_loss

Table = tuple[list[str], list[list[str]]]

_KNEE_FIGURES = ("p50", "p99", "p99_999")


def knee_table(knee: Mapping[str, Any]) -> Table:
    """Per offered rate: loss, percentiles and whether the DuT was overloaded (and why).
    Overload is the DuT's capacity (loss, a queue that grows), not the budget: a rate can be
    "not overloaded" and still FAIL it, so the column says which it is about."""
    header = ["rate", "loss", *(percentiles.label(k) for k in _KNEE_FIGURES), "overload"]
    rows = [
        [
            format_rate(r["rate_pps"]),
            format_percent(r["loss"]),
            *(format_ns(r[f"{k}_ns"]) for k in _KNEE_FIGURES),
            _overload_text(r),
        ]
        for r in knee["rates"]
    ]
    return header, rows


def _overload_text(rate: Mapping[str, Any]) -> str:
    """ "overloaded: p99 125× the lowest rate's (on a degraded run: the host may be the cause)"."""
    text = ("overloaded: " + "; ".join(rate["reasons"])) if rate["overloaded"] else "not overloaded"
    degraded = rate.get("degraded_runs") or []
    if degraded and rate["overloaded"]:
        which = "a degraded run" if len(degraded) == 1 else "degraded runs"
        text += f" (on {which}: the host may be the cause)"
    return text


def overload_table(doc: Mapping[str, Any]) -> Table:
    """The overload model's figures: both medians, t_CPU, d_Σ and R_max."""
    return (
        ["bare median (2·t_transfer)", "t_e2e", "t_CPU", "d_Σ per s", "R_max"],
        [
            [
                format_ns(doc["t_transfer_ns"]),
                format_ns(doc["t_e2e_ns"]),
                format_ns(doc["t_cpu_ns"]),
                format_ns(doc["d_sum_ns_per_s"]),
                format_rate(doc["r_max_pps"]),
            ]
        ],
    )


def comparison_table(comparison: Mapping[str, Any]) -> Table:
    """A simulation against a measured run, percentile by percentile."""
    return (
        ["percentile", "measured", "predicted", "difference", "ratio"],
        [
            [
                percentiles.label(r["percentile"]),
                format_ns(r["measured_ns"]),
                format_ns(r["predicted_ns"]),
                format_ns(r["difference_ns"]),
                "–" if r["ratio"] is None else f"{r['ratio']:.3f}",
            ]
            for r in comparison["rows"]
        ],
    )


# -- comparisons (`lowtail compare`, and its page) ------------------------------------------

# Figures a narrow terminal leaves out first (higher: sooner); the judged percentile, the
# floor at it and the verdict always stay.
_COMPARISON_OPTIONAL = {"max": 6, "p99_9": 5, "p99": 4, "p99_99": 3, "p99_999": 3, "p50": 2, "reps": 1}
NOT_RESOLVABLE_MARK = "*"


def configurations_table(doc: Mapping[str, Any]) -> tuple[list[str], list[list[str]], dict[str, int]]:
    """NOMS 2020's Table II, of a comparison: per configuration its axis values, repetitions,
    loss, pooled percentiles (marked where the packets cannot bound them), maximum, the
    floor at the judged percentile and the verdict. Returns (header, rows, {heading:
    how soon a narrow terminal may leave the column out})."""
    configs = doc["configurations"]
    judged = _judged_keys(doc)
    keys = [k for k in percentiles.KEYS if k in {*_COMPARED_KEYS, *judged}]
    axes = doc["axes"] or [{"name": "dut", "label": "DuT"}]
    header = [a["label"] for a in axes] + ["reps", "loss"]
    header += [percentiles.by_key(k).short for k in keys] + ["max"]
    floor_heading = "floor\n" + (percentiles.by_key(judged[0]).short if len(judged) == 1 else "judged")
    header += [floor_heading, "verdict"]
    rows = []
    for c in configs:
        lat = c.get("latency_ns") or {}
        intervals = c.get("intervals") or {}
        values = [_axis_text(c, a, len(doc["axes"]) == 0) for a in axes]
        values += [str(c["repetitions"]), _loss(c)]
        for k in keys:
            mark = "" if not intervals.get(k) or intervals[k]["resolvable"] else NOT_RESOLVABLE_MARK
            values.append(format_ns(lat.get(k), 1) + mark)
        values.append(format_ns(lat.get("max"), 1))
        floor = (c.get("floor") or {}).get("latency_ns") or {}
        values.append(format_ns(floor.get(c["verdict"]["percentile"] or ""), 1) if floor else "–")
        values.append(c["verdict"]["label"])
        rows.append(values)
    optional = {
        percentiles.by_key(k).short: level for k, level in _COMPARISON_OPTIONAL.items() if k in keys and k not in judged
    }
    optional |= {"max": _COMPARISON_OPTIONAL["max"], "reps": _COMPARISON_OPTIONAL["reps"]}
    return header, rows, optional


_COMPARED_KEYS = ("p50", "p99", "p99_9", "p99_99", "p99_999")


def _judged_keys(doc: Mapping[str, Any]) -> list[str]:
    found = []
    for c in doc["configurations"]:
        key = c["verdict"].get("percentile")
        if key and key not in found:
            found.append(key)
    return found or ([doc["verdict"]["key"]] if doc.get("verdict") else [])


def _axis_text(c: Mapping[str, Any], axis: dict[str, str], by_nothing: bool) -> str:
    return str(c["label"] if by_nothing else c["key_text"].get(axis["name"], "–"))


def run_loss(run: Mapping[str, Any]) -> str:
    """A stored run's loss as its verdict counts it, with the packets its IPS dropped as its
    rule set meant beside it as what they are: "0 (+2,545 dropped as meant)". Every table of
    runs (the terminal's, the experiment page's) says a run's loss this way."""
    lost = unintended_loss(run)
    if lost is None:
        return "–"
    meant = int(run["lost"]) - lost
    return format_count(lost) if not meant else f"{format_count(lost)} (+{format_count(meant)} dropped as meant)"


def _loss(c: Mapping[str, Any]) -> str:
    """The loss the verdict counts; an IPS's intended drops beside it, as what they are."""
    if not c["sent"]:
        return "–"
    meant = int(c.get("intended_drops") or 0)
    lost = c["lost"] - meant
    loss = "0" if not lost else format_percent(lost / c["sent"], ".2g")
    return loss if not meant else f"{loss} (+{format_percent(meant / c['sent'], '.2g')} dropped as meant)"


# What a percentile its packets cannot bound reads as, beside its value.
NOT_RESOLVED = "not resolved"
MAX_NOT_RESOLVED = "max, not resolved"


def interval_text(value: int | None, interval: IntervalDoc | None, maximum: int | None) -> str:
    """A percentile's interval as tables show it: "16.015–16.078 µs", or why there is none:
    "max, not resolved" where the percentile is the packets' largest (p99.9999 of 100,000
    packets), "not resolved" where they do not bound it."""
    if not interval:
        return ""
    if interval.get("resolvable"):
        return format_ns_range(interval["lower_ns"], interval["upper_ns"])
    return MAX_NOT_RESOLVED if value is not None and value == maximum else NOT_RESOLVED


def not_resolvable_note(doc: Mapping[str, Any], shown: set[str] | None = None) -> str | None:
    """The footnote of the mark: which percentiles these packets cannot bound, and how
    many packets would (None when every shown one is bounded). `shown`: the headings of the
    percentile columns a narrow table kept (all when None)."""
    counted: dict[str, int] = {}  # the most packets any configuration needs
    wandering: set[str] = set()  # no count of packets bounds it: the series wanders between time blocks
    for c in doc["configurations"]:
        _unresolved(c.get("intervals") or {}, counted, wandering, shown)
    if not counted and not wandering:
        return None
    level = f"{100 * doc['level']:g} %"
    return (
        f"{NOT_RESOLVABLE_MARK} inconclusive: these packets do not bound this percentile at {level} confidence "
        f"(pooled over the repetitions, {_what_bounds(counted, wandering)})"
    )


def unresolved_note(intervals: Mapping[str, Any] | None, each: str = "`--json` gives each one's reason") -> str | None:
    """Under one analysis's table of percentiles, why those marked "not resolved" are: how
    many packets would bound each, or that more packets alone would not (None when every one
    is bounded, or no intervals were computed); `each`: where the whole reason of each is."""
    if not intervals:
        return None
    counted: dict[str, int] = {}
    wandering: set[str] = set()
    _unresolved(intervals.get("percentiles") or {}, counted, wandering, None)
    if not counted and not wandering:
        return None
    return (
        f"not resolved: these {format_count(int(intervals['samples']))} packets do not bound it at "
        f"{100 * intervals['level']:g} % confidence ({_what_bounds(counted, wandering)}; "
        f"{each})"
    )


def _unresolved(
    intervals: Mapping[str, Any], counted: dict[str, int], wandering: set[str], shown: set[str] | None
) -> None:
    """Add the percentiles these intervals do not bound: to `counted` with the most packets
    that would, to `wandering` where no count of packets would (the series wanders between
    time blocks)."""
    for k, iv in intervals.items():
        if not iv["resolvable"] and (shown is None or percentiles.by_key(k).short in shown):
            if iv["packets_needed"] is None:
                wandering.add(k)
            else:
                counted[k] = max(counted.get(k, 0), iv["packets_needed"])


def _what_bounds(counted: Mapping[str, int], wandering: AbstractSet[str]) -> str:
    """ "p99.99 takes 499,995, p99.999 takes 1,441,377, p50 wanders between time blocks: more
    packets alone do not bound it" ("… in some" where others of its kind need a count)."""
    return ", ".join(
        [f"{percentiles.by_key(k).short} takes {n:,}" for k, n in sorted(counted.items(), key=lambda x: x[1])]
        + [
            f"{percentiles.by_key(k).short} wanders between time blocks{' in some' if k in counted else ''}: "
            "more packets alone do not bound it"
            for k in sorted(wandering, key=lambda k: percentiles.by_key(k).quantile)
        ]
    )


def evt_tail_text(doc: Mapping[str, Any]) -> str:
    """What an EVT fit says of the tail's end: "bounded (ξ < 0 at 95 %): upper end 61.0 µs",
    or "not shown bounded: ξ = −0.042, 95 % interval −0.120…0.036" — bounded only when ξ's
    whole interval lies below 0 and the series holds no latency above the fitted end."""
    level = f"{100 * doc['confidence']:g} %"
    if doc["bounded"]:
        return f"bounded (ξ < 0 at {level}): upper end {format_ns(doc['endpoint_ns'])}"
    ci = doc.get("xi_ci")
    interval = f", {level} interval {ci[0]:.3f}…{ci[1]:.3f}" if ci else ", no interval"
    refuted = doc.get("refuted_by_ns")
    beyond = f"; the series holds {format_ns(refuted)}, above the fitted tail's end" if refuted else ""
    return f"not shown bounded: ξ = {doc['xi']:.3f}{interval}{beyond}"


def evt_table(doc: Mapping[str, Any]) -> Table:
    """EVT over runs (Perf. Eval. 2024, Tables 4–5): per configuration its models,
    the share shown bounded (ξ's interval below 0) and the mean validation exceedances
    (1 expected)."""
    header = ["configuration", "reps", "models", "bounded", "exceedances", "mean ξ"]
    rows = [
        [
            r["label"],
            str(r["repetitions"]),
            str(r["models"]),
            "–" if r["bounded_share"] is None else format_percent(r["bounded_share"], ".3g"),
            "–" if r["mean_exceedances"] is None else f"{r['mean_exceedances']:.2f}",
            "–" if r["mean_xi"] is None else f"{r['mean_xi']:.3f}",
        ]
        for r in doc["evt"]
    ]
    return header, rows


def causes_table(doc: Mapping[str, Any]) -> Table:
    """`compare`'s causes column: per configuration the causes of its tail that its runs'
    stored explanations name (`lowtail explain`), with their mean share of the tail."""
    header = ["configuration", "explained runs", "causes of the tail (share of its packets)"]
    rows = [
        [
            c["label"],
            str(c["explained_runs"]),
            "; ".join(
                f"{k['kind'].replace('_', ' ')} on the {k['role']}"
                + (f" ({k['what']})" if k["what"] else "")
                + f" {format_percent(k['share'])}"
                for k in c["causes"]
            )
            or ("none above the floor" if c["explained_runs"] else "not explained yet"),
        ]
        for c in doc.get("causes") or []
    ]
    return header, rows


def cause_headline(doc: Mapping[str, Any]) -> str | None:
    """The first stored headline of a comparison's runs: the host could not measure what was asked."""
    return next((c["headline"] for c in doc.get("causes") or [] if c["headline"]), None)


def rates_table(doc: Mapping[str, Any]) -> Table:
    """Latency against rate: per series (a configuration without its rate) each rate's loss
    and judged percentile, and the knee and predicted R_max its sweeps stored."""
    key = doc["verdict"]["key"] if doc.get("verdict") else "p99_999"
    header = ["series", "rate", "loss", percentiles.by_key(key).short, "verdict", "knee", "R_max"]
    rows = []
    for s in doc["rates"]:
        knees = s["knees"]
        knee = (
            ", ".join(
                (format_rate(k["knee_pps"]) if k["knee_pps"] else "none")
                + (f" (all {k['dut']} runs)" if k.get("other_runs") else "")
                for k in knees
            )
            or "–"
        )
        r_max = ", ".join(format_rate(k["r_max_pps"]) for k in knees if k["r_max_pps"]) or "–"
        for i, p in enumerate(s["points"]):
            rows.append(
                [
                    s["label"] if i == 0 else "",
                    format_rate(p["rate_pps"]),
                    "–" if p["loss_ratio"] is None else format_percent(p["loss_ratio"], ".2g"),
                    format_ns(p["latency_ns"].get(key), 1),
                    p["verdict"],
                    knee if i == 0 else "",
                    r_max if i == 0 else "",
                ]
            )
    return header, rows


# -- the noise probe (`lowtail noise` in the terminal, and its page) ----------------------------


def noise_table(cores: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Per probed core: its gaps (exact nearest rank over them), the time they took, the
    shortest loop and d_Σ, the interrupts' share of it."""
    header = ["CPU", "gaps", "rate", "lost time", "p50", "p99", "p99.9", "max", "loop", "d_Σ (interrupts)"]
    rows = [
        [
            str(c["cpu"]),
            f"{c['gaps']:,}",
            f"{c['rate_hz']:,.1f} /s",
            format_ns_per_s(c["noise_ns_per_s"]),
            format_ns(c["p50_ns"]),
            format_ns(c["p99_ns"]),
            format_ns(c["p99_9_ns"]),
            format_ns(c["max_ns"]),
            format_ns(c["min_loop_ns"]),
            format_ns_per_s(c["d_sum_ns_per_s"]) if c.get("d_sum_ns_per_s") is not None else "–",
        ]
        for c in cores
    ]
    return header, rows


def interrupt_profile_table(profile: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """A core's interrupt profile, one row per (kind, {description, count, rate_hz, typical_ns})."""
    header = ["kind", "what", "count", "rate", "typical duration"]
    rows = [
        [kind, v["description"], f"{v['count']:,}", format_hz(v["rate_hz"]), format_ns(v["typical_ns"])]
        for kind, v in profile
    ]
    return header, rows


# -- differences, as the terminal and the page list them ---------------------------------


def by_size(found: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Differences largest first (those without a size last, in their order)."""
    return sorted(found, key=lambda d: -abs(d.get("difference_ns") or 0))


def shared_notes(found: Sequence[Mapping[str, Any]]) -> list[str]:
    """The notes of a list of differences, each once ("one repetition of …" was said per line)."""
    return list(dict.fromkeys(str(d["note"]) for d in found if d.get("note")))


def unjudged_lines(doc: Mapping[str, Any]) -> list[str]:
    """The percentiles a comparison left unjudged because a repetition's packets do not bound
    them (the terminal's lines and the page's): one line per set of configurations (named up
    to four, else counted); the table's mark pointed at only where the pooled figures carry
    it too (a repetition's packets may not bound a percentile that the repetitions pooled do)."""
    lines: list[str] = []
    unbounded: dict[str, set[str]] = {}
    for d in doc["not_resolvable"]:
        if d["reason"] == UNBOUNDED:
            unbounded.setdefault(d["percentile"], set()).update(
                c["label"]
                for c in doc["configurations"]
                if c["index"] in (d["a_index"], d["b_index"])
                and not all((r.get("resolvable") or {}).get(d["percentile"]) for r in c["per_run"])
            )
    pooled_unbounded = {
        (c["label"], k)
        for c in doc["configurations"]
        for k, iv in (c.get("intervals") or {}).items()
        if not iv["resolvable"]
    }
    by_which: dict[tuple[str, bool], list[str]] = {}
    for key, labels in sorted(unbounded.items(), key=lambda item: percentiles.by_key(item[0]).quantile):
        every = len(labels) == len(doc["configurations"]) > 1
        which = (
            "any configuration"
            if every
            else ", ".join(sorted(labels))
            if len(labels) <= 4
            else f"{len(labels)} configurations"
        )
        marked = all((label, key) in pooled_unbounded for label in labels)
        by_which.setdefault((which, marked), []).append(percentiles.by_key(key).short)
    for (which, marked), shorts in by_which.items():
        lines.append(
            f"{', '.join(shorts)}: not judged for {which}: the packets of a repetition do not bound "
            f"{'it' if len(shorts) == 1 else 'them'}" + (f" ({NOT_RESOLVABLE_MARK} above)" if marked else "")
        )
    return lines


def not_called_by_reason(pairs: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """Pairs not called, grouped by why (a reason many pairs share is said once, with its
    pairs after it), the reason of the most pairs first."""
    groups: dict[str, list[str]] = {}
    for d in pairs:
        pair = f"{d['a']} and {d['b']} at {percentiles.by_key(d['percentile']).short}"
        groups.setdefault(str(d.get("why") or d.get("reason") or "not called"), []).append(pair)
    return sorted(groups.items(), key=lambda group: -len(group[1]))


MATCHING_TITLE = "packets the IPS rule matches (match_share): those it dropped as meant are not loss"


def matching_table(runs: Iterable[Mapping[str, Any]]) -> Table | None:
    """What an IPS did with the packets its rule matches (`[traffic] match_share`), one row per
    run that marked packets (None when none did): how many were marked and arrived after the
    warm-up, how many the rule dropped as meant, the loss beside them that the verdict counts;
    the packets marked over the whole run beside the DuT's own alert and block counters (which
    count the warm-up too); the latency of matching packets beside the others'."""
    marked = [(r, m) for r in runs if (m := (r.get("traffic") or {}).get("matching"))]
    if not marked:
        return None

    def latency(m: Mapping[str, Any], side: str, key: str) -> str:
        return format_ns((m["latency_ns"].get(side) or {}).get(key))

    header = ["run", "action", "matched", "arrived", "dropped (meant)", "lost (not meant)", "marked (whole run)"]
    header += ["alerts", "blocked"]
    shown = [percentiles.by_key(key).short for key in percentiles.MATCHING_PERCENTILES]
    header += [f"{p} {side}" for p in shown for side in ("matched", "other")]
    header += [f"matched − other at {shown[0]}", *(f"at {p}" for p in shown[1:])]
    rows = [
        [
            str(r["run_id"]),
            m["action"] or "no rule",
            format_count(m["matched_sent"]),
            format_count(m["matched_arrived"]),
            format_count(m["intended_drops"]),
            format_count(m["unintended_loss"]),
            format_count(m["generated"]),
            format_count(m["dut_alerts"]),
            format_count(m["dut_blocked"]),
            *(latency(m, side, key) for key in percentiles.MATCHING_PERCENTILES for side in ("matched", "unmatched")),
            # A filter that dropped every matching packet leaves nothing to compare: said so,
            # rather than "not resolved (0 blocks)" as if the run were too short.
            *(
                difference_text(d) if m["matched_arrived"] else "none arrived"
                for d in _differences_at(m, percentiles.MATCHING_PERCENTILES)
            ),
        ]
        for r, m in marked
    ]
    return header, rows


def _differences_at(m: Mapping[str, Any], keys: tuple[str, ...]) -> list[Mapping[str, Any] | None]:
    found = {d["percentile"]: d for d in m.get("difference") or []}
    return [found.get(key) for key in keys]


def difference_text(d: Mapping[str, Any] | None) -> str:
    """Matching packets against the others at one percentile, as called from the run's time
    blocks (experiment/matching.py): "slower by 48.600 µs (40.100 µs … 55.000 µs)", "no
    difference shown (−2.000 µs … 3.100 µs)", "not resolved (6 blocks)"; "–" for runs stored
    before the difference was called."""
    if d is None:
        return "–"
    interval = format_ns_interval([d["low_ns"], d["high_ns"]]) if d["low_ns"] is not None else None
    if d["called"] in ("slower", "faster"):
        return f"{d['called']} by {format_ns(abs(d['median_ns']))} ({interval})"
    if d["called"] == "no difference shown":
        return f"no difference shown ({interval})"
    return f"{d['called']} ({format_counted(d['blocks'], 'block')})"


def chain_adds_up(chain: Mapping[str, Any]) -> str:
    """How a chain run's hops add up against the clock's bound, in a clause."""
    mismatch, bound = chain["sum_mismatch_ns"], chain["clock"]["bound_ns"]
    if mismatch is None:
        return "the hops could not be added up"
    over = f"over {chain['packets_compared']:,} packets"
    if mismatch == 0:
        return f"the hops add up to the end-to-end latency exactly {over}"
    return (
        f"the hops add up to the end-to-end latency within {format_ns(mismatch)} "
        f"(the clocks allow {format_ns(bound)}) {over}"
    )


CHAIN_HEADER = ["hop", "DuT", "kind", "p50", "p99.9", "max", "lost", "share of the chain's latency"]


def chain_table(chain: Mapping[str, Any]) -> Table:
    """A chain run's hops, one row each in the order traffic meets them: latency, loss and
    the hop's share of the chain's mean latency."""
    rows = []
    for hop in chain["hops"]:
        latency = hop["latency_ns"] or {}
        rows.append(
            [
                str(hop["hop"]),
                hop["name"],
                hop["kind"],
                format_ns(latency.get("p50")),
                format_ns(latency.get("p99_9")),
                format_ns(latency.get("max")),
                format_count(hop["lost"]),
                "–" if hop["share"] is None else f"{100 * hop['share']:.1f} %",
            ]
        )
    return CHAIN_HEADER, rows
