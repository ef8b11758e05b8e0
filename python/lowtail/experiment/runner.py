"""The sweep: every combination of an experiment, measured, analysed and stored one by one.

Each run is stored as soon as it is analysed, in one transaction with its analysis, so an
interrupted experiment keeps what it finished; running the same file again resumes it,
skipping the combinations already stored (`runs.combination_key`).
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from lowtail.analyze.document import AnalyzeOptionsDocument, ChainDocument
from lowtail.analyze.hops import analyze_chain, hops_between
from lowtail.analyze.pair import AnalysisDocument, analyze_options, analyze_pair
from lowtail.core.binaries import find_binary
from lowtail.core.errors import DiskFull, Failure, Interrupted, UserError
from lowtail.core.units import format_rate
from lowtail.experiment import matching
from lowtail.experiment.document import MatchingDocument
from lowtail.experiment.hostinfo import host_metadata
from lowtail.experiment.live import LiveSample
from lowtail.experiment.measure import SNAPLEN, Outcome, frames_for, measure
from lowtail.experiment.spec import Combination, Experiment
from lowtail.explain.run import explain_run
from lowtail.host.document import HostMetadata, HostStateDocument
from lowtail.host.state import read_host_state
from lowtail.host.steal import STEAL_SOURCE
from lowtail.host.sysroot import SysRoot
from lowtail.models.knee import store_sweep_knees
from lowtail.store import DbPath, datadir, open_store
from lowtail.store import runs as runstore
from lowtail.store.chains import save_run_chain
from lowtail.store.db import Store, is_out_of_space
from lowtail.store.explain import save_run_trace
from lowtail.store.host import save_run_interrupts
from lowtail.store.records import RunRecord
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.document import options_json
from lowtail.testbed.duts import KINDS, make_dut
from lowtail.testbed.sessions import Session, open_session

# Bytes a captured frame takes on disk at most (record header + snapped frame), per side,
# plus one matched-series row; zstd usually saves most of it, the check does not count on it.
_CAPTURE_RECORD_BYTES = 16 + SNAPLEN
_SERIES_ROW_BYTES = 32
_DISK_MARGIN_BYTES = 64 << 20


@dataclass(frozen=True)
class StoredRun:
    """A run the sweep has just stored: its record and its id."""

    record: RunRecord
    run_id: int


@dataclass
class Progress:
    """What the runner tells its caller: the runs it is about to measure, a run started, its
    running figures (about once a second while its traffic flows), the run stored (with its
    id and analysis)."""

    on_plan: Callable[[list[Combination]], None] = lambda combos: None
    on_start: Callable[[int, int, Combination], None] = lambda i, n, c: None
    on_live: Callable[[LiveSample], None] = lambda sample: None
    on_done: Callable[[int, int, Combination, StoredRun], None] = lambda i, n, c, r: None


@dataclass
class SweepResult:
    experiment_id: int
    resumed_runs: int
    new_runs: int


def sweep_and_store(
    exp: Experiment,
    db: DbPath,
    data_dir: Path,
    *,
    fresh: bool = False,
    watch: Callable[[Store], AbstractContextManager[Progress]] | None = None,
    log: Callable[[str], None] = lambda message: None,
    warn: Callable[[str], None] = lambda message: None,
    part: Part | None = None,
) -> SweepResult:
    """`lowtail run`: the experiment's testbed session opened and everything it needs checked
    before anything is made, what killed runs left removed, then `run_experiment` into the
    database at `db`; `watch(store)` gives the progress callbacks for the sweep's duration."""
    with open_session(exp.testbed, log=log) as session:
        check_can_run(exp, session, log=log)
        _remove_leftovers(log, warn)
        with open_store(db) as store, watch(store) if watch else nullcontext(Progress()) as progress:
            return run_experiment(exp, store, data_dir, fresh=fresh, progress=progress, session=session, part=part)


def _remove_leftovers(log: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """What killed runs left in the kernel (their owner is dead) goes before a run starts:
    their real-time programs and cgroups would spoil its measurements."""
    from lowtail.testbed.registry import remove_leftovers

    try:
        for left in remove_leftovers():
            log(f"removed what a killed run left: {left.summary()}")
    except Failure as e:
        warn(f"could not remove what a killed run left ({e}); `lowtail testbed show` lists it")


def check_can_run(exp: Experiment, session: Session, log: Callable[[str], None] = lambda message: None) -> None:
    """Everything that would stop the sweep part-way, found (and slow one-time work, such
    as building a guest image, done) before it starts; `log` tells what is being done."""
    find_binary("lowtail-gen")
    find_binary("lowtail-cap")
    duts = [part for d in exp.duts for part in d.parts]  # a chain's hops are DuTs of their own kinds
    session.check([d.interfaces for d in duts])
    for kind in sorted({d.kind for d in duts}):
        KINDS[kind].check_available()
    plan = session.plan(exp.cores)
    for dut in duts:
        make_dut(dut.kind, dut.name, dut.options).check_plan(plan)
    for dut in duts:
        KINDS[dut.kind].prepare(dut.options, log)


@dataclass(frozen=True)
class Part:
    """One repetition of an experiment measured into a given experiment (a new one when
    `into` is None): how `tune` interleaves the repetitions of two experiments, so that a
    drift of the host falls on both alike."""

    repetition: int
    into: int | None = None


def run_experiment(
    exp: Experiment,
    store: Store,
    data_dir: Path,
    fresh: bool = False,
    progress: Progress | None = None,
    session: Session | None = None,
    part: Part | None = None,
) -> SweepResult:
    """Measure, analyse and store every combination not stored yet (resuming the latest
    unfinished experiment of the same file unless `fresh`; only `part`'s repetition, into its
    experiment, when given), then store the sweep's knee once every combination is stored.
    `session` holds the testbed kind (opened here when not given, and checked either way)."""
    if session is None:
        with open_session(exp.testbed) as own:
            return run_experiment(exp, store, data_dir, fresh, progress, own, part)
    progress = progress or Progress()
    check_can_run(exp, session)
    plan = session.plan(exp.cores)
    if exp.calibration is not None:
        runstore.check_calibration(store, exp.calibration)

    def host() -> HostMetadata:
        found = host_metadata(plan)
        found["testbed"] = exp.testbed.kind
        roles = session.hosts()
        if roles:
            found["roles"] = roles
        return found

    into = part.into if part is not None else None
    target = datadir.create_or_resume(
        store, data_dir, exp.name, exp.as_json(), exp.spec_hash, host, fresh or part is not None, into
    )
    eid, data_dir = target.experiment_id, target.folder
    if exp.calibration is not None:
        runstore.set_calibration(store, eid, exp.calibration)
    done = runstore.done_keys(store, eid)
    combos = exp.combinations()
    todo = [(i, c) for i, c in enumerate(combos) if c.key not in done]
    if part is not None:
        todo = [(i, c) for i, c in todo if c.repetition == part.repetition]
    progress.on_plan([combo for _, combo in todo])
    try:
        for n, (index, combo) in enumerate(todo):
            progress.on_start(n, len(todo), combo)
            run = _run_one(exp, combo, index, plan, store, eid, data_dir, session, progress.on_live)
            progress.on_done(n, len(todo), combo, run)
    except (KeyboardInterrupt, Interrupted):
        runstore.set_status(store, eid, "interrupted")
        stored = len(runstore.done_keys(store, eid))
        raise Interrupted(
            f"interrupted: {stored} of {len(combos)} runs of experiment {eid} are stored; "
            f"run the same command again to resume"
        ) from None
    except BaseException as e:
        runstore.set_status(store, eid, "failed")
        if is_disk_full(e):
            raise Failure(
                f"disk full while writing results ({e}); free some space and run the same command "
                f"again to resume (finished runs are kept)"
            ) from None
        raise
    if len(runstore.done_keys(store, eid)) < len(combos):
        return SweepResult(eid, resumed_runs=len(combos) - len(todo), new_runs=len(todo))  # a part: more to come
    runstore.set_status(store, eid, "finished")
    store_sweep_knees(store, eid)
    return SweepResult(eid, resumed_runs=len(combos) - len(todo), new_runs=len(todo))


def is_disk_full(e: BaseException | None) -> bool:
    """ENOSPC anywhere in the chain of causes: OSError and lowtail's native errors carry the
    errno; DuckDB's errors say it in their message (is_out_of_space)."""
    while e is not None:
        if isinstance(e, DiskFull) or getattr(e, "errno", None) == errno.ENOSPC:
            return True
        if is_out_of_space(e):
            return True
        e = e.__cause__
    return False


def _check_disk(exp: Experiment, combo: Combination, run_dir: Path, session: Session) -> None:
    frames = frames_for(exp, combo)
    # A chain captures every link (one more than its hops) and writes each hop's series too.
    hops = len(combo.dut.hops)
    captures, series = (hops + 1, hops + 1) if hops else (2, 1)
    need = frames * (captures * _CAPTURE_RECORD_BYTES + series * _SERIES_ROW_BYTES) + _DISK_MARGIN_BYTES
    session.check_disk(frames * captures * _CAPTURE_RECORD_BYTES + _DISK_MARGIN_BYTES)
    probe = run_dir
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise Failure(
            f"not enough disk space in {probe} for the next run: it needs about {need >> 20} MiB and "
            f"{free >> 20} MiB are free; free some space (or pass --data-dir) and run the same command "
            f"again to resume (finished runs are kept)"
        )


def _run_one(
    exp: Experiment,
    combo: Combination,
    index: int,
    plan: CoreRoles,
    store: Store,
    eid: int,
    data_dir: Path,
    session: Session,
    on_live: Callable[[LiveSample], None],
) -> StoredRun:
    store.release()  # the database is free for other commands (`lowtail list`) while the run measures
    t = combo.traffic
    run_dir = data_dir / f"{index:04d}-{combo.dut.name}-{t.rate_pps}pps-{t.frame_size}B-b{t.burst}-r{combo.repetition}"
    shutil.rmtree(run_dir, ignore_errors=True)  # what a killed attempt left half-written
    _check_disk(exp, combo, run_dir, session)
    run_dir.mkdir(parents=True)
    host_state = _host_state(exp, plan)
    try:
        outcome = measure(exp, combo, plan, run_dir, session, on_live)
        analysis, options = _analyze(exp, combo, outcome, run_dir)
        chain = _analyze_chain(exp, combo, outcome, run_dir, analysis)
        matching = _matching(combo, outcome, analysis)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    captures = [str(p) for p in (outcome.pre, *outcome.links, outcome.post) if p and p.exists()]
    if not exp.keep_captures:
        for p in captures:
            Path(p).unlink()
        captures = []
    record = RunRecord(
        label=f"{exp.name}: {combo.dut.name} @ {format_rate(t.rate_pps)}"
        + (f" #{combo.repetition}" if exp.repetitions > 1 else ""),
        experiment_id=eid,
        combination_key=combo.key,
        dut_name=combo.dut.name,
        dut_kind=combo.dut.kind,
        dut_config=options_json(combo.dut.options),
        calibration=combo.dut.calibration,
        rate_pps=t.rate_pps,
        frame_size=t.frame_size,
        burst=t.burst,
        repetition=combo.repetition,
        duration_ns=exp.measured_ns(t),
        warmup_ns=exp.warmup_ns,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        series_path=analysis.get("export_path") if analysis else None,
        valid=not outcome.invalid_reasons,
        invalid_reasons=outcome.invalid_reasons,
        degraded_reasons=outcome.degraded_reasons,
        generator=outcome.generator,
        capture=outcome.capture,
        containment=outcome.containment,
        virtualization=outcome.virtualization,
        testbed=outcome.testbed,
        energy=outcome.energy,
        dut_stats=outcome.dut_stats,
        capture_paths=captures,
        traffic={
            "flows": t.flows,
            **({"flow_weights": list(t.flow_weights)} if t.flow_weights else {}),
            "udp_dst_port": t.udp_dst_port,
            "frames_planned": outcome.frames_planned,
            "core_plan": plan.as_dict(),
            **({"match_share": t.match_share} if t.match_share else {}),
            **({"matching": matching} if matching is not None else {}),
        },
        host_state=host_state,
    )
    with store.transaction():
        run_id = runstore.save_run(store, record, analysis, options)
        _save_interrupts(store, run_id, outcome)
        if outcome.trace is not None:
            save_run_trace(store, run_id, outcome.trace)
        if chain is not None:
            save_run_chain(store, run_id, chain)
    if analysis is not None and analysis.get("export_path"):
        explain_run(store, run_id)  # the causes of its tail, stored for the report and `compare`
    return StoredRun(record, run_id)


def _host_state(exp: Experiment, plan: CoreRoles) -> HostStateDocument | None:
    """The fingerprint of this host's tuning as the run starts (none for a DuT on another
    host: this host's settings are not the ones its tail depends on)."""
    if exp.testbed.kind == "hosts":
        return None
    cores = {plan.housekeeping, plan.generator, plan.capture, *plan.dut}
    return read_host_state(SysRoot.open(None), cores)


def _analyze(
    exp: Experiment, combo: Combination, outcome: Outcome, run_dir: Path
) -> tuple[AnalysisDocument | None, AnalyzeOptionsDocument]:
    """The analysis of the run's captures; None (and a reason) when there is nothing to analyse."""
    options = analyze_options(
        trim_ns=exp.warmup_ns, udp_port=combo.traffic.udp_dst_port, export=run_dir / "series.parquet"
    )
    if outcome.pre is None or outcome.post is None or not outcome.pre.exists():
        return None, options.to_dict()
    try:
        return analyze_pair(
            outcome.pre, outcome.post, options, confidence=exp.verdict.confidence, budgets=[exp.verdict.budget_ns]
        ), options.to_dict()
    except (UserError, Failure) as e:
        if is_disk_full(e):
            raise
        outcome.invalid_reasons.append(f"the captures could not be analysed: {e}")
        return None, options.to_dict()


def _analyze_chain(
    exp: Experiment, combo: Combination, outcome: Outcome, run_dir: Path, analysis: AnalysisDocument | None
) -> ChainDocument | None:
    """A chain run's hops (analyze/hops.py), None for a single DuT or when the chain's own
    captures could not be analysed (the run says why); a hop that cannot be analysed makes
    the run invalid, as its end-to-end analysis would."""
    if not combo.dut.hops or analysis is None or outcome.pre is None or outcome.post is None:
        return None
    sides = [("pre", outcome.pre), *((p.name.removesuffix(".pcap.zst"), p) for p in outcome.links)]
    hops = hops_between([(h.name, h.kind) for h in combo.dut.hops], [*sides, ("post", outcome.post)])
    series = analysis.get("export_path")
    try:
        return analyze_chain(hops, Path(series) if series else None, run_dir, exp.warmup_ns, combo.traffic.udp_dst_port)
    except (UserError, Failure) as e:
        if is_disk_full(e):
            raise
        outcome.invalid_reasons.append(f"the chain's hops could not be analysed: {e}")
        return None


def _matching(combo: Combination, outcome: Outcome, analysis: AnalysisDocument | None) -> MatchingDocument | None:
    """What became of the packets the IPS rule matches (`[traffic] match_share`), with the
    DuT's counters checked against them: a disagreement is a reason on the outcome."""
    if not combo.traffic.match_share or analysis is None:
        return None
    doc, unknown = matching.account(combo.traffic.match_share, outcome.generator, analysis, outcome.dut_stats)
    outcome.degraded_reasons.extend(unknown)
    if doc is not None:
        invalid, degraded = matching.disagreements(doc)
        outcome.invalid_reasons.extend(invalid)
        outcome.degraded_reasons.extend(degraded)
    return doc


def _save_interrupts(store: Store, run_id: int, outcome: Outcome) -> None:
    if outcome.interrupts:
        save_run_interrupts(store, run_id, outcome.interrupts)
    if outcome.guest_interrupts:
        save_run_interrupts(store, run_id, outcome.guest_interrupts, source="guest")
    if outcome.steal:
        save_run_interrupts(store, run_id, outcome.steal, source=STEAL_SOURCE)
