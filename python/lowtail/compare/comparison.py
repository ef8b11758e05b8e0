"""A comparison of stored runs: configurations (runs grouped by the axes that make them;
runs that share one are its repetitions), each with its pooled exact percentiles, their
confidence intervals, the spread over repetitions, the worst repetition, its verdict and
its noise floor; the differences between configurations; EVT over runs; latency against
rate. `compare` builds the document `lowtail compare --json` prints together with what its
page draws; `compare_and_store` stores both."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lowtail.analyze.document import IntervalDoc, latency_of
from lowtail.compare import differences as diffs
from lowtail.compare import evt_runs
from lowtail.compare import flows as flowcompare
from lowtail.compare import hops as hopcompare
from lowtail.compare.document import (
    CauseSummary,
    ComparisonDocument,
    ConfigurationCauses,
    ConfigurationDocument,
    EvtRunsRow,
    FloorDoc,
    HostStateDifference,
    PooledFigures,
    RateSeries,
    RepetitionDoc,
)
from lowtail.compare.intervals import DEFAULT_LEVEL, check_level
from lowtail.compare.pooling import Distribution, curve_fractions, pooled, read_run
from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.experiment.document import RunRow
from lowtail.host import state as hoststate
from lowtail.store import analyses as analysisstore
from lowtail.store import axes, selection
from lowtail.store import comparisons as comparestore
from lowtail.store import models as modelstore
from lowtail.store import runs as runstore
from lowtail.store.comparisons import CurvePoint, Member
from lowtail.store.db import Store, latency_figures_of
from lowtail.verdict.document import BudgetDocument
from lowtail.verdict.judge import (
    Judgement,
    Status,
    Verdict,
    VerdictRequest,
    VerdictSettingError,
    parse_verdict,
    unintended_loss,
)

# The percentiles of every configuration's figures (with the judged one, and max).
COMPARED = ("p50", "p99", "p99_9", "p99_99", "p99_999")

Progress = Callable[[int, int], None]


@dataclass
class CompareOptions:
    """What `lowtail compare` takes besides the selection."""

    by: list[str] | None = None  # axis names; None: the axes that vary among the runs
    # The budget every configuration is judged against, over the runs' own (none given:
    # each its own), and the confidence level of the intervals.
    verdict: VerdictRequest = field(default_factory=VerdictRequest)
    evt: bool = False  # fit (and store) the EVT models runs do not have yet
    floor: int | None = None  # the experiment whose calibration runs are every floor
    label: str | None = None

    @property
    def level(self) -> float:
        """The confidence level of the intervals (a fraction)."""
        return self.verdict.confidence if self.verdict.confidence is not None else DEFAULT_LEVEL


@dataclass
class _Drawn:
    """What the page draws of a comparison, gathered configuration by configuration."""

    curves: list[CurvePoint] = field(default_factory=list)
    cdf: list[tuple[int, float, int]] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)


@dataclass
class Comparison:
    """The document and what the page draws (see store.comparisons)."""

    document: ComparisonDocument
    curves: list[CurvePoint] = field(default_factory=list)
    cdf: list[tuple[int, float, int]] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)


def compare_and_store(
    store: Store, words: list[str], opts: CompareOptions, on_progress: Progress | None = None
) -> ComparisonDocument:
    """`compare`, stored; returns the document with its `comparison_id`."""
    c = compare(store, words, opts, on_progress)
    comparestore.save_comparison(
        store, c.document, words, c.document["by"], c.curves, c.cdf, c.members, label=opts.label
    )
    return c.document


def compare(store: Store, words: list[str], opts: CompareOptions, on_progress: Progress | None = None) -> Comparison:
    """Compare the runs a selection names (see `lowtail.store.selection`)."""
    try:
        check_level(opts.level)
    except ValueError as e:
        raise UserError(str(e)) from None
    rows = selection.select(store, words)
    duts = [r for r in rows if not r["calibration"]]
    left_out = [r for r in rows if r["calibration"]] if duts else []
    duts = duts or rows  # only calibration runs: the floors themselves are compared
    if axes.FLOW in (opts.by or []):
        duts = flowcompare.split_by_flow(store, duts)
    if axes.HOP in (opts.by or []):
        duts = hopcompare.split_by_hop(store, duts)
    by = axes.resolve(opts.by, duts) if opts.by else axes.configuration_axes(duts)
    if opts.floor is not None:
        runstore.check_calibration(store, opts.floor)
    notes: list[str] = []
    verdicts, common = _verdicts(store, duts, opts, notes)
    groups: dict[tuple[Any, ...], list[RunRow]] = {}
    for r in duts:
        groups.setdefault(axes.value_key(r, by), []).append(r)
    notes += _pooled_axes(groups.values(), by)
    out = _Drawn()
    counter = _Counter(sum(int(r.get("received") or 0) for r in duts), on_progress)
    floors = _Floors(store, opts.floor, counter)
    summaries = analysisstore.summary_bytes(store, [aid for r in duts if (aid := r.get("analysis_id")) is not None])
    configurations = []
    mixed: list[str] = []
    flow_distributions = flowcompare.FlowDistributions(counter)
    for index, members in enumerate(groups.values()):
        verdict, mixes = _configuration_verdict(members, verdicts, common)
        reader = _Reader(summaries, counter, flow_distributions)
        configurations.append(_configuration(index, members, by, verdict, opts.level, floors, reader, out))
        if mixes:
            mixed.append(configurations[-1]["label"])
    if common is None and len(set(verdicts.values())) > 1:
        notes.append(_budgets_note(verdicts, mixed))
    resolved, unresolved, family = diffs.differences(configurations, opts.level)
    notes += _few_repetitions(configurations)
    evt = _evt(store, configurations, opts.evt, notes)
    partial_reasons = [f"{c['label']}: {why}" for c in configurations for why in c["partial_reasons"]]
    document: ComparisonDocument = {
        "comparison_id": None,
        "selection": list(words),
        "by": [a.name for a in by],
        "axes": [{"name": a.name, "label": a.label} for a in by],
        "level": opts.level,
        "verdict": _verdict_doc(common) if common else None,
        "configurations": configurations,
        "differences": resolved,
        "not_resolvable": unresolved,
        "difference_family": family,
        "evt": evt,
        "rates": _rates(store, configurations, list(groups.values()), by),
        "left_out": [{"run_id": r["run_id"], "why": "calibration run: a floor, not a configuration"} for r in left_out],
        "causes": configuration_causes(store, configurations),
        "notes": notes,
        "partial": bool(partial_reasons),
        "partial_reasons": partial_reasons,
        # Runs of a VM under QEMU's emulator: their latencies are an emulator's (see core/virtualization.py).
        "emulated_runs": [r["run_id"] for r in duts if r.get("virtualization") == "tcg" and r["run_id"] is not None],
        "host_state_differences": host_state_differences(list(groups.values())),
    }
    return Comparison(document, out.curves, out.cdf, out.members)


def host_state_differences(groups: Sequence[Sequence[Mapping[str, Any]]]) -> list[HostStateDifference]:
    """Each pair of configurations (by index) whose runs' host-state fingerprints differ, with
    the settings that differ (the first fingerprint of each: a configuration's runs that differ
    among themselves are said in its own entry, `a_index == b_index`)."""
    states = [[r["host_state"] for r in runs if r.get("host_state")] for runs in groups]
    out: list[HostStateDifference] = []
    for i, mine in enumerate(states):
        if len({s["id"] for s in mine}) > 1:
            diff = hoststate.differing(mine[0]["settings"], mine[-1]["settings"])
            out.append({"a_index": i, "b_index": i, "settings": {k: list(v) for k, v in diff.items()}})
    for i, a in enumerate(states):
        for j in range(i + 1, len(states)):
            b = states[j]
            if a and b and a[0]["id"] != b[0]["id"]:
                diff = hoststate.differing(a[0]["settings"], b[0]["settings"])
                out.append({"a_index": i, "b_index": j, "settings": {k: list(v) for k, v in diff.items()}})
    return out


def _few_repetitions(configurations: Sequence[Mapping[str, Any]]) -> list[str]:
    """One note for the configurations whose run-to-run variation is not measured."""
    single = [c["label"] for c in configurations if c.get("latency_ns") and c["repetitions"] < 2]
    if not single or len(configurations) < 2:
        return []
    which = "every configuration" if len(single) == len(configurations) else ", ".join(single)
    return [
        f"one repetition of {which}: run-to-run variation is not measured, so no difference "
        f"involving {'it' if len(single) == 1 else 'them'} is called (`repetitions = 3` in the experiment file)"
    ]


def _pooled_axes(groups: Iterable[Sequence[Mapping[str, Any]]], by: list[axes.Axis]) -> list[str]:
    """What a `--by` leaving out a varying axis pools: runs that differ on it are taken as
    repetitions of one configuration, which the reader should know."""
    chosen = {a.name for a in by}
    # Each axis's values by how they are shown: free-form, the axis's own kind of value (sorted
    # in its own order where its values compare).
    mixed: dict[str, tuple[axes.Axis, dict[str, Any]]] = {}
    for members in groups:
        for axis in axes.varying(members, repetition=False):
            if axis.name not in chosen:
                values = mixed.setdefault(axis.name, (axis, {}))[1]
                values |= {axis.show(axis.read(r)): axis.read(r) for r in members if axis.present(r)}
    notes = []
    for axis, values in mixed.values():
        try:  # in the axis's own order (10 kpps before 100 kpps), else as text
            shown = sorted(values, key=lambda text: values[text])
        except TypeError:
            shown = sorted(values)
        notes.append(
            f"{axis.label} varies within configurations ({', '.join(shown)}): those runs are pooled as "
            f"repetitions; --by {','.join([*(a.name for a in by), axis.name])} keeps them apart"
        )
    return notes


# -- verdicts ---------------------------------------------------------------------------------


def _verdicts(
    store: Store, runs: Sequence[Mapping[str, Any]], opts: CompareOptions, notes: list[str]
) -> tuple[dict[int | None, Verdict], Verdict | None]:
    """The budget of each experiment (None: plain analyses) and the one all share (None
    when they differ): the one given on the command line, else each experiment's own."""
    eids = sorted({r["experiment_id"] for r in runs if r["experiment_id"] is not None})
    stored: dict[int | None, Verdict] = {
        eid: _parsed(table) for eid, table in runstore.verdict_settings(store, eids).items()
    }
    if opts.verdict.given:
        given = opts.verdict.over(next(iter(stored.values()), Verdict()))
        other = [eid for eid, v in stored.items() if v != given]
        if other:
            notes.append(
                f"experiment{'s' if len(other) > 1 else ''} {', '.join(map(str, other))} stored another budget "
                f"({'; '.join(sorted({stored[e].describe() for e in other}))}); every configuration is judged "
                f"against the one given: {given.describe()}"
            )
        return {eid: given for eid in [*eids, None]}, given
    distinct = {v for v in stored.values()}
    if len(distinct) > 1:  # said once the configurations are judged (`_budgets_note`)
        return {**stored, None: Verdict()}, None
    common = next(iter(distinct), Verdict())
    return {**stored, None: common}, common


def _parsed(table: Mapping[str, object]) -> Verdict:
    try:
        return parse_verdict(table, stored=True)
    except VerdictSettingError:  # a file stored by another version: the default budget
        return Verdict()


def _configuration_verdict(
    members: Sequence[Mapping[str, Any]], verdicts: dict[int | None, Verdict], common: Verdict | None
) -> tuple[Verdict, bool]:
    """The budget a configuration is judged against, and whether its runs stored different
    ones (it then takes its first experiment's)."""
    if common is not None:
        return common, False
    own = {verdicts.get(r["experiment_id"], Verdict()) for r in members}
    return verdicts.get(members[0]["experiment_id"], Verdict()), len(own) > 1


def _budgets_note(verdicts: dict[int | None, Verdict], mixed: Sequence[str]) -> str:
    """One line on runs stored with different budgets: how each configuration is judged, the
    ones whose own runs differ named in it (it was two lines that contradicted each other)."""
    stored = "; ".join(f"experiment {e}: {v.describe()}" for e, v in verdicts.items() if e is not None)
    within = (
        f"; {', '.join(mixed)} pool runs of different budgets and are judged against their first experiment's"
        if mixed
        else ""
    )
    return (
        f"the runs were stored with different budgets ({stored}): each configuration is judged against its "
        f"runs' own{within} (--budget/--percentile judge all against one)"
    )


def _verdict_doc(v: Verdict) -> BudgetDocument:
    return {
        "percentile": v.percentile.percent,
        "key": v.key,
        "budget_ns": v.budget_ns,
        "max_loss": v.max_loss,
        "text": v.describe(),
    }


# -- configurations ---------------------------------------------------------------------------


class _Counter:
    """Progress over every series read: rows done of the rows the analyses stored."""

    def __init__(self, total: int, callback: Progress | None):
        self.total, self.done, self.callback = total, 0, callback

    def __call__(self, rows: int) -> None:
        self.done += rows
        if self.callback:
            self.callback(self.done, max(self.total, self.done))


def _figure_keys(verdict: Verdict) -> list[str]:
    """COMPARED and the judged percentile, in rank order."""
    wanted = {*COMPARED, verdict.key}
    return [k for k in percentiles.KEYS if k in wanted]


def _stored_figures(run: Mapping[str, Any], keys: list[str]) -> PooledFigures:
    """A run's figures as its analysis stored them (when its series cannot be read)."""
    stored = latency_figures_of(run, [*keys, "max"]) | {"samples": latency_of(run.get("figures")).get("samples") or 0}
    return {k: None if v is None else int(v) for k, v in stored.items()}


class _Reader:
    """Runs' distributions from their stored summaries (else their series), counted for
    the progress bar."""

    def __init__(self, summaries: dict[int, bytes], counter: _Counter, flows: flowcompare.FlowDistributions):
        self.summaries, self.counter, self.flows = summaries, counter, flows

    def __call__(self, run: Mapping[str, Any]) -> Distribution:
        # The configuration's members are read as Mappings; a split row is a RunRow (parts.py).
        if run.get("flow_index") is not None:  # one flow of a run (`--by flow`)
            return self.flows(run)  # type: ignore[arg-type]
        if run.get("hop_series_path") is not None:  # one hop of a chain run (`--by hop`)
            return hopcompare.hop_distribution(run, self.counter)  # type: ignore[arg-type]
        return read_run(self.summaries.get(run["analysis_id"]), run.get("series_path"), self.counter)


def _configuration(
    index: int,
    members: Sequence[Mapping[str, Any]],
    by: list[axes.Axis],
    verdict: Verdict,
    level: float,
    floors: _Floors,
    read: _Reader,
    out: _Drawn,
) -> ConfigurationDocument:
    keys = _figure_keys(verdict)
    valid = [r for r in members if r["valid"] and r.get("analysis_id") is not None]
    invalid = [r for r in members if r not in valid]
    partial: list[str] = []
    dists: dict[int, Distribution] = {}
    per_run: list[RepetitionDoc] = []
    for r in valid:
        try:
            dists[r["analysis_id"]] = read(r)
        except UserError as e:
            partial.append(f"{_name(r)} left out of the pooled figures: {e}")
        d = dists.get(r["analysis_id"])
        figures = d.figures([*keys, "max"]) if d is not None else _stored_figures(r, keys)
        own = _intervals(r, d, keys, level)
        per_run.append(
            {
                "resolvable": {k: bool(iv and iv["resolvable"]) for k, iv in own.items()},
                "intervals": {k: [iv["lower_ns"], iv["upper_ns"]] if iv else None for k, iv in own.items()},
                "run_id": r["run_id"],
                "analysis_id": r["analysis_id"],
                "experiment_id": r["experiment_id"],
                "repetition": r["repetition"],
                "sent": r.get("sent"),
                "lost": r.get("lost"),
                "latency_ns": figures,
                "verdict": verdict.judge(r).label,
                "degraded": list(r.get("degraded_reasons") or []),
            }
        )
    pool = pooled(dists.values()) if dists else None
    first = members[0]
    key = {a.name: (a.read(first) if a.present(first) else None) for a in by}
    label = axes.label(first, by) if by else first["dut_name"]
    sent = sum(int(r.get("sent") or 0) for r in valid)
    lost = sum(int(r.get("lost") or 0) for r in valid)
    # What the budget's max_loss counts: the loss an IPS did not mean (its intended drops are not loss).
    unintended = sum(int(unintended_loss(r) or 0) for r in valid)
    latency = pool.figures([*keys, "max"]) if pool is not None and pool.samples else None
    bounds = (
        pool.bounds(keys, level, verdict.confidence, [verdict.budget_ns]) if pool is not None and pool.samples else None
    )
    degraded = sorted({d for r in valid for d in (r.get("degraded_reasons") or [])})
    if not valid:
        reasons = "; ".join(f"{_name(r)}: {'; '.join(r.get('invalid_reasons') or ['no analysis'])}" for r in invalid)
        judgement = Judgement(Status.INVALID, f"no run to trust: {reasons}")
    else:
        rates = {r.get("rate_pps") for r in valid}
        judgement = verdict.judge_figures(
            (latency["samples"] or 0) if latency else 0,
            (latency or {}).get(verdict.key),
            unintended,
            sent,
            tuple(degraded),
            dict(bounds) if bounds else None,
            rates.pop() if len(rates) == 1 else None,
        )
    floor = floors.of(valid, keys)
    doc: ConfigurationDocument = {
        "index": index,
        "label": label,
        "key": key,
        "key_text": {a.name: a.show(a.read(first)) if a.present(first) else "–" for a in by},
        "runs": [r["run_id"] for r in valid if r["run_id"] is not None],
        "analyses": [r["analysis_id"] for r in valid],
        "experiments": sorted({r["experiment_id"] for r in valid if r["experiment_id"] is not None}),
        "repetitions": len(valid),
        "sent": sent,
        "lost": lost,
        "loss_ratio": lost / sent if sent else None,
        "intended_drops": lost - unintended,
        "latency_ns": latency,
        "intervals": bounds["percentiles"] if bounds else None,
        "spread": _spread([p["latency_ns"] for p in per_run], [*keys, "max"]),
        "per_run": per_run,
        "worst_repetition": _worst(per_run, verdict.key),
        "verdict": judgement.as_dict() | {"budget": verdict.describe()},
        "floor": floor.document if floor else None,
        "invalid_runs": [{"run_id": r["run_id"], "reasons": r.get("invalid_reasons") or []} for r in invalid],
        "degraded": degraded,
        "emulated": any(r.get("virtualization") == "tcg" for r in valid),
        "partial_reasons": partial,
    }
    if pool is not None and pool.samples:
        grid = curve_fractions(pool.samples)
        out.curves += [CurvePoint(index, comparestore.POOLED, None, None, p, v) for p, v in pool.curve(grid)]
        for r in valid:
            d = dists.get(r["analysis_id"])
            if d is not None and d.samples:
                out.curves += [
                    CurvePoint(index, comparestore.REPETITION, r["run_id"], r["analysis_id"], p, v)
                    for p, v in d.curve(grid)
                ]
        if floor and floor.distribution.samples:
            out.curves += [
                CurvePoint(index, comparestore.FLOOR, None, None, p, v) for p, v in floor.distribution.curve(grid)
            ]
        out.cdf += [(index, f, v) for f, v in pool.cdf()]
    out.members += [Member(index, r["run_id"], r["analysis_id"], r.get("start_ts_ns")) for r in valid]
    return doc


def _intervals(
    run: Mapping[str, Any], d: Distribution | None, keys: list[str], level: float
) -> dict[str, IntervalDoc | None]:
    """A repetition's own interval of each percentile (whether its packets bound it, and its
    sampling error): as its analysis stored it at this level, else computed from its
    distribution (one native call for all of them)."""
    stored = (run.get("figures") or {}).get("intervals") or {}
    if stored.get("level") == level and all(k in stored.get("percentiles", {}) for k in keys):
        return {k: stored["percentiles"][k] for k in keys}
    if d is None or not d.samples:
        return dict.fromkeys(keys)
    computed = d.bounds(keys, level, DEFAULT_LEVEL)["percentiles"]
    return {k: computed[k] for k in keys}


def _name(run: Mapping[str, Any]) -> str:
    return f"run {run['run_id']}" if run["run_id"] is not None else f"analysis {run['analysis_id']}"


def _spread(figures: list[PooledFigures], keys: list[str]) -> dict[str, dict[str, int | float | None]]:
    """Each figure's min and max over the repetitions."""
    out: dict[str, dict[str, int | float | None]] = {}
    for k in keys:
        values = [v for f in figures if (v := f.get(k)) is not None]
        out[k] = {"min": min(values), "max": max(values)} if values else {"min": None, "max": None}
    return out


def _worst(per_run: list[RepetitionDoc], key: str) -> int | None:
    """The repetition with the worst judged percentile (then the worst maximum): the one
    Perf. Eval. 2024 keeps of its repetitions."""
    ranked = [p for p in per_run if p["latency_ns"].get(key) is not None]
    if not ranked:
        return None
    worst = max(ranked, key=lambda p: (p["latency_ns"][key], p["latency_ns"].get("max") or 0))
    found = worst["run_id"] if worst["run_id"] is not None else worst["analysis_id"]
    return None if found is None else int(found)


# -- floors -----------------------------------------------------------------------------------


@dataclass
class _Floor:
    distribution: Distribution
    document: FloorDoc


class _Floors:
    """The floor of each configuration: the calibration runs of the same traffic (rate,
    frame size, burst) from the experiment named by --floor, else the one each run's
    experiment names, else its own — pooled like a configuration's repetitions, with the
    spread over them. Read once per set of calibration runs."""

    def __init__(self, store: Store, source: int | None, counter: _Counter):
        self.store, self.source, self.counter = store, source, counter
        self.cache: dict[tuple[int, ...], _Floor | None] = {}

    def of(self, runs: Sequence[Mapping[str, Any]], keys: list[str]) -> _Floor | None:
        calibration: dict[int, RunRow] = {}
        for r in runs:
            if r["experiment_id"] is None or r["calibration"]:
                continue
            source = (
                self.source if self.source is not None else runstore.calibration_source(self.store, r["experiment_id"])
            )
            for c in runstore.calibration_runs(self.store, source, r["rate_pps"], r["frame_size"], r["burst"]):
                if c["run_id"] is not None:  # calibration runs are stored runs
                    calibration[c["run_id"]] = c
        if not calibration:
            return None
        ids = tuple(sorted(calibration))
        if ids not in self.cache:
            self.cache[ids] = self._read([calibration[i] for i in ids], keys)
        return self.cache[ids]

    def _read(self, runs: Sequence[Mapping[str, Any]], keys: list[str]) -> _Floor | None:
        dists: list[Distribution] = []
        figures: list[PooledFigures] = []
        stored = analysisstore.summary_bytes(self.store, [r["analysis_id"] for r in runs])
        for r in runs:
            try:
                d = read_run(stored.get(r["analysis_id"]), r.get("series_path"), self.counter)
            except UserError:
                d = None
            if d is not None:
                dists.append(d)
            figures.append(d.figures([*keys, "max"]) if d else _stored_figures(r, keys))
        pool = pooled(dists)
        spread = _spread(figures, [*keys, "max"])
        for s in spread.values():
            lo, hi = s["min"], s["max"]
            s["width_ns"] = hi - lo if len(figures) > 1 and lo is not None and hi is not None else None
        document: FloorDoc = {
            "runs": [r["run_id"] for r in runs],
            "experiments": sorted({r["experiment_id"] for r in runs}),
            "repetitions": len(runs),
            "latency_ns": pool.figures([*keys, "max"]) if pool.samples else figures[0],
            "spread": spread,
            "text": _floor_text(runs),
        }
        return _Floor(pool, document)


def _floor_text(runs: Sequence[Mapping[str, Any]]) -> str:
    eids = sorted({r["experiment_id"] for r in runs})
    which = ", ".join(map(str, eids))
    return (
        f"the same traffic over a plain wire: calibration run{'s' if len(runs) > 1 else ''} "
        f"{', '.join(str(r['run_id']) for r in runs)} of experiment{'s' if len(eids) > 1 else ''} {which}"
    )


# -- EVT and rates ----------------------------------------------------------------------------


def _evt(store: Store, configurations: list[ConfigurationDocument], fit: bool, notes: list[str]) -> list[EvtRunsRow]:
    run_ids = [r for c in configurations for r in c["runs"]]
    models, missing = evt_runs.run_models(store, run_ids, fit)
    if not models:
        if fit and missing:
            rid, why = next(iter(missing.items()))
            notes.append(f"--evt fitted no model: run {rid}: {why}" + (" (and alike)" if len(missing) > 1 else ""))
        elif fit:
            notes.append(
                "--evt fitted no model: EVT over runs reads stored runs, and these are plain analyses "
                "(`lowtail model evt analysis:N` fits one)"
            )
        else:
            notes.append("no run has a stored EVT model: the EVT table is empty (--evt fits them)")
        return []
    return [evt_runs.table_row(c, models, missing) for c in configurations]


@dataclass
class _RateSeriesBuilt:
    """A rate series while it is gathered: its document and the sweeps and runs it holds."""

    document: RateSeries
    sweeps: set[tuple[int, str]] = field(default_factory=set)
    runs: set[int] = field(default_factory=set)


def _rates(
    store: Store,
    configurations: list[ConfigurationDocument],
    groups: Sequence[Sequence[Mapping[str, Any]]],
    by: list[axes.Axis],
) -> list[RateSeries]:
    """Latency against rate: one series per configuration without its rate (the DuT and
    whatever else makes it), one point per configuration whose runs share a rate, and the
    knee and predicted R_max each series' sweeps have stored (`lowtail model knee`)."""
    others = [a for a in by if a.name != axes.RATE]
    series: dict[tuple[Any, ...], _RateSeriesBuilt] = {}
    for c, members in zip(configurations, groups):
        rates, latency = {r["rate_pps"] for r in members}, c["latency_ns"]
        if not latency or len(rates) != 1 or None in rates:  # one configured rate, known
            continue
        first = members[0]
        entry = series.setdefault(
            axes.value_key(first, others),
            _RateSeriesBuilt(
                {
                    "label": axes.label(first, others) if others else first["dut_name"],
                    "key": {a.name: a.read(first) if a.present(first) else None for a in others},
                    "points": [],
                    "knees": [],
                }
            ),
        )
        entry.document["points"].append(
            {
                "configuration": c["index"],
                "rate_pps": rates.pop(),
                "sent": c["sent"],
                "lost": c["lost"],
                "loss_ratio": c["loss_ratio"],
                "latency_ns": latency,
                "verdict": c["verdict"]["status"],
            }
        )
        entry.sweeps |= {(r["experiment_id"], r["dut_name"]) for r in members if r["experiment_id"] is not None}
        entry.runs |= {r["run_id"] for r in members if r["run_id"] is not None}
    for entry in series.values():
        entry.document["points"].sort(key=lambda p: p["rate_pps"])
        for eid, dut in sorted(entry.sweeps):
            knee = modelstore.latest_model(store, modelstore.KNEE, experiment_id=eid, dut_name=dut)
            if knee:
                r = knee["result"]
                swept = {rid for row in r.get("rates", []) for rid in row.get("runs", [])}
                entry.document["knees"].append(
                    {
                        "experiment_id": eid,
                        "dut": dut,
                        "model_id": knee["model_id"],
                        "knee_pps": r.get("knee_pps"),
                        "last_ok_pps": r.get("last_ok_pps"),
                        "r_max_pps": r.get("r_max_pps"),
                        # The knee model sweeps every run of the DuT's name: it speaks for
                        # this series alone only when it read no other run.
                        "other_runs": sorted(r for r in swept - entry.runs if r is not None),
                    }
                )
    return [entry.document for entry in series.values()]


CAUSES_SHOWN = 3  # causes per configuration in `compare`'s causes column


def configuration_causes(store: Store, configurations: Sequence[ConfigurationDocument]) -> list[ConfigurationCauses]:
    """Each configuration's causes of the tail, from its runs' stored explanations
    (`lowtail explain`): a cause's share is the tail packets it keeps over all the tail packets
    of the explained runs (a configuration of one run shows that run's stored share), the first
    few kept; the first run's headline, naming the run, when the host could not measure what
    was asked in one of them."""
    from lowtail.store.explain import causes_of, headlines, tail_packets

    run_ids = [r for c in configurations for r in c["runs"]]
    stored, said, tails = causes_of(store, run_ids), headlines(store, run_ids), tail_packets(store, run_ids)
    out: list[ConfigurationCauses] = []
    for c in configurations:
        explained = [r for r in c["runs"] if r in tails]
        whole = sum(tails[r] for r in explained)
        kept: dict[tuple[str, str, str | None], list[int]] = {}
        for r in explained:
            for cause in stored.get(r, []):
                # The share stored is the cause's packets over the run's: the count back, exactly.
                packets = round(cause["share"] * tails[r])
                kept.setdefault((cause["kind"], cause["role"], cause["what"]), []).append(packets)
        summaries = [
            CauseSummary(kind=k, role=role, what=what, share=sum(v) / whole if whole else 0.0, runs=len(v))
            for (k, role, what), v in kept.items()
        ]
        summaries.sort(key=lambda s: (-s["share"], s["kind"]))
        headline = next((f"run {r}: {said[r]}" for r in c["runs"] if r in said), None)
        out.append(
            ConfigurationCauses(
                index=c["index"],
                label=c["label"],
                explained_runs=len(explained),
                causes=summaries[:CAUSES_SHOWN],
                headline=headline,
            )
        )
    return out
