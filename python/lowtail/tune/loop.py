"""The tune loop: measure (or take a stored before), propose, and for each change (or all at
once) apply → measure again → compare → keep or undo.

Safety comes from host/apply.py: each trial is applied with its own undo file, written and
fsync'd before anything changes, all or nothing. A trial that does not make a resolvable
improvement at the judged percentile, or makes a resolvable harm at any percentile, is undone
at once; a kept one keeps its undo file (`lowtail host undo FILE` removes it later). A stop
signal at any phase (the first raises, later ones only note: core/signals.py) undoes the trial in
progress before the command ends, so the host is as before `tune` or holds only the kept set.

The comparison is `compare`'s (compare/differences.py: Student's t on the repetitions, Holm
over every percentile judged at once) between the current kept state and the trial, grouped
`--by experiment`; their repetitions are measured in turn (`_try`), so that a drift of the
host does not pass for a change's effect.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lowtail.compare.differences import FEWEST_REPETITIONS
from lowtail.compare.document import ComparisonDocument
from lowtail.compare.resolution import resolution
from lowtail.core import signals
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.experiment.runner import Part
from lowtail.experiment.spec import Experiment
from lowtail.explain.document import CauseDoc
from lowtail.host import pending, settings
from lowtail.host.apply import Change, apply_changes, read_setting, task_start, undo
from lowtail.host.facts import Host
from lowtail.host.plan import CorePlan, kernel_cmdline, resolve_plan
from lowtail.host.remedies import REMEDIES
from lowtail.host.sysroot import SysRoot
from lowtail.store import DbPath, default_data_dir, open_store
from lowtail.store import explain as explainstore
from lowtail.store import runs as runstore
from lowtail.store import tune as tunestore
from lowtail.store.db import Store
from lowtail.tune.document import BootParamWhy, TuneBootDocument, TuneChangeDocument, TuneDocument, TuneOwnerDocument
from lowtail.tune.proposals import Proposal, check_ids, propose, select

# The phases a session goes through, in order (`TuneHooks.phase` is told each; the fault tests
# stop the command at each).
PHASES = ("measure-before", "propose", "measure-baseline", "apply", "measure-after", "compare", "decide")
# The judged percentile when the experiment's verdict names one the differences do not judge.
FALLBACK_PERCENTILE = "p99_9"


@dataclass(frozen=True)
class TuneOptions:
    """What `lowtail tune` takes besides the experiment."""

    yes: bool = False  # apply (else: a dry run that measures and proposes only)
    one_by_one: bool = False  # one change per trial, to attribute each gain
    before: int | None = None  # a stored experiment as the before (else it is measured)
    only: tuple[str, ...] = ()  # the proposals to try, by id (all when empty)
    undo_dir: Path = Path(".")  # where the undo files of kept changes go
    data_dir: Path | None = None


@dataclass
class TuneHooks:
    """What the loop tells its caller."""

    log: Callable[[str], None] = lambda message: None
    warn: Callable[[str], None] = lambda message: None
    phase: Callable[[str], None] = lambda name: None


@dataclass
class _Trial:
    proposals: list[Proposal]
    undo_path: Path
    changes: list[Change] = field(default_factory=list)


def core_plan(exp: Experiment) -> CorePlan:
    """The one core plan of this host and experiment (host/plan.py, as `host plan` and `host
    audit` read it): what apply's changes and the boot parameters isolate."""
    return resolve_plan(Host(SysRoot.open(None)), cores=exp.cores)


def judged_key(exp: Experiment) -> str:
    """The percentile a change is judged at: the experiment's verdict's, when differences judge it."""
    from lowtail.compare.differences import JUDGED

    key = exp.verdict.key
    return key if key in JUDGED else FALLBACK_PERCENTILE


def tune(exp: Experiment, spec: Path, db: DbPath, opts: TuneOptions, hooks: TuneHooks | None = None) -> TuneDocument:
    """One tune session; its document (stored as it goes)."""
    hooks = hooks or TuneHooks()
    if exp.repetitions < FEWEST_REPETITIONS:
        # compare calls no difference on fewer: a trial of 2 could never be kept.
        raise UserError(
            f"{spec}: tune compares repetitions (the repetition is the unit of a difference, and fewer than "
            f"{FEWEST_REPETITIONS} cannot show whether run-to-run variation is continuous or comes in levels): "
            f"set `repetitions = {FEWEST_REPETITIONS}` or more in [experiment]"
        )
    check_ids(opts.only)
    if exp.testbed.kind == "hosts":
        raise UserError(
            f"{spec}: tune changes this host's settings, and this experiment's DuT runs on another host "
            '([testbed] kind = "hosts"): run `lowtail tune` on the DuT\'s host, with a namespaces or interfaces testbed'
        )
    root = SysRoot.open(None)
    plan = core_plan(exp)
    if opts.before is not None:
        _check_same_experiment(db, exp, spec, opts.before)
    if opts.yes:
        recover_killed(db, hooks)
    hooks.phase("measure-before")
    before = opts.before if opts.before is not None else _measure(exp, db, opts, hooks, "before")
    hooks.phase("propose")
    with open_store(db) as store:
        runstore.experiment(store, before)  # a UserError when it is not stored
        causes = _causes(store, before)
        unseen = _unseen(store, before)
        resolved = resolution(store, before, judged_key(exp))
    if resolved["why"]:
        hooks.warn(f"{resolved['why']}; trials are measured as long as the before")
    proposals = propose(root, plan, causes)
    unknown = sorted(set(opts.only) - {p.id for p in proposals})
    if unknown:
        shown = ", ".join(p.id for p in proposals) or "none"
        raise UserError(f"--only {', '.join(unknown)}: not proposed for this host (proposed: {shown})")
    proposals = select(proposals, opts.only)
    doc = TuneDocument(
        tune_id=None,
        spec=str(spec),
        before=before,
        after=None,
        comparison_id=None,
        percentile=judged_key(exp),
        changes=[_planned(p) for p in proposals],
        kept=[],
        undone=[],
        boot=_boot(root, plan, causes),
        dry_run=not opts.yes,
        status="planned" if not opts.yes else "running",
        after_reboot=[],
        unseen=unseen,
        owner=_owner(root),
        trial_undo_file=None,
        resolution=resolved,
    )
    with open_store(db) as store:
        doc["tune_id"] = tunestore.create_session(store, doc)
    if not opts.yes or not proposals:
        doc["status"] = "planned" if not opts.yes else "finished"
        _save(db, doc)
        return doc
    groups = [[p] for p in proposals] if opts.one_by_one else [proposals]
    # Session ids are per database: the time keeps two databases' undo files apart.
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for n, group in enumerate(groups, 1):
        trial = _Trial(group, opts.undo_dir / f"lowtail-tune-{doc['tune_id']}-{n}-{stamp}.undo.json")
        try:
            _try(exp, db, opts, hooks, root, plan, doc, trial)
        except (KeyboardInterrupt, Interrupted) as e:
            _stop(root, doc, trial, db, e)
        except BaseException:
            # Any other failure (a full disk, a testbed that would not start): the trial goes too.
            hooks.warn(f"tune stopped: the change being tried {_abandon(doc, trial, db, 'failed')}")
            raise
    tried = [c["after"] for c in doc["changes"] if c["after"] is not None]
    last = doc["after"] if doc["after"] is not None else (tried[-1] if tried else None)
    if last is not None:
        with open_store(db) as store:
            doc["comparison_id"] = _compare(store, before, last, doc["percentile"]).get("comparison_id")
    doc["status"] = "finished"
    _save(db, doc)
    return doc


def _try(
    exp: Experiment,
    db: DbPath,
    opts: TuneOptions,
    hooks: TuneHooks,
    root: SysRoot,
    plan: CorePlan,
    doc: TuneDocument,
    trial: _Trial,
) -> None:
    """One trial, its repetitions interleaved with the kept state's: for each repetition the
    host as kept so far is measured, then the trial is applied and measured, then undone —
    all but the last, which stays applied until the decision. A drift of the host (another
    tenant's load starting, a warming cache) then falls on both experiments alike instead of
    passing for the change's effect. Compared, then kept or undone."""
    ids = [p.id for p in trial.proposals]
    entries = [c for c in doc["changes"] if c["id"] in ids]
    trial.changes = [c for p in trial.proposals for c in p.changes]
    baseline: int | None = None
    after: int | None = None
    reps = exp.repetitions
    for rep in range(reps):
        of = f"repetition {rep + 1} of {reps}"
        hooks.phase("measure-baseline")
        baseline = _measure(exp, db, opts, hooks, f"as kept so far ({of})", Part(rep, baseline))
        _apply(root, plan, db, doc, trial, hooks)
        hooks.phase("measure-after")
        after = _measure(exp, db, opts, hooks, f"with {', '.join(ids)} ({of})", Part(rep, after))
        if rep + 1 < reps:
            _undo(db, doc, trial)
    assert baseline is not None and after is not None  # repetitions >= 2, checked by tune()
    for entry in entries:
        entry["applied"] = [a for p in trial.proposals if p.id == entry["id"] for a in _applied(p)]
    hooks.phase("compare")
    with open_store(db) as store:
        comparison = _compare(store, baseline, after, doc["percentile"])
    improved, harmed, effect = decide(comparison, baseline, after, doc["percentile"])
    hooks.phase("decide")
    keep = improved and not harmed
    for entry in entries:
        entry["effect"], entry["improved"], entry["harmed"], entry["kept"] = effect, improved, harmed, keep
        entry["baseline"], entry["after"], entry["comparison_id"] = baseline, after, comparison.get("comparison_id")
        entry["undo_file"] = str(trial.undo_path) if keep else None
    if keep:
        pending.release(trial.undo_path)  # kept on purpose: no longer a change in flight
        doc["kept"] += ids
        doc["after"] = after
        doc["trial_undo_file"] = None
        hooks.log(f"kept {', '.join(ids)}: {effect}")
    else:
        _undo(db, doc, trial)
        doc["undone"] += ids
        hooks.log(f"undid {', '.join(ids)}: {effect}" + (f"; harm at {', '.join(harmed)}" if harmed else ""))
    _save(db, doc)


def _apply(root: SysRoot, plan: CorePlan, db: DbPath, doc: TuneDocument, trial: _Trial, hooks: TuneHooks) -> None:
    """Apply the trial (again), its undo file named in the stored session first: a tune killed
    outright (SIGKILL) leaves it for the next `tune --yes` to undo (recover_killed)."""
    hooks.phase("apply")
    for ch in _as_now(root, trial.changes):
        ch.status, ch.after, ch.note = "planned", None, ""
    hooks.log(f"applying {', '.join(p.id for p in trial.proposals)} (undo file {trial.undo_path})")
    doc["trial_undo_file"] = str(trial.undo_path)
    _save(db, doc)
    apply_changes(root, trial.changes, plan, trial.undo_path, command="tune")


def _undo(db: DbPath, doc: TuneDocument, trial: _Trial) -> None:
    """Undo the trial in force (every signal held until it is undone and recorded)."""
    with signals.held():
        undo(trial.undo_path)
        doc["trial_undo_file"] = None
        _save(db, doc)


def _as_now(root: SysRoot, changes: list[Change]) -> list[Change]:
    """The changes with what they restore read as the trial starts, not when they were
    proposed: a later trial's undo must give back what an earlier kept trial set (a thread
    `other-tasks` moved, then named again by `move-pid-N`), never what was there before it."""
    for ch in changes:
        if ch.kind == "mkdir":
            continue
        now = read_setting(root, ch)
        if now is not None:
            # What gives `now` back, in the kernel's own form: THP's selected word, never
            # its whole "always [madvise] never" line (which the kernel refuses).
            ch.before, ch.restore = now, settings.restore_text(ch.compare, now)
    return changes


def _owner(root: SysRoot) -> TuneOwnerDocument:
    pid = os.getpid()
    return TuneOwnerDocument(pid=pid, start=task_start(root, f"proc/{pid}"))


def _owner_gone(root: SysRoot, owner: Mapping[str, Any] | None) -> bool:
    if not owner or not isinstance(owner.get("pid"), int):
        return False  # a session stored before owners were recorded: not ours to judge
    return task_start(root, f"proc/{owner['pid']}") != owner.get("start")


def recover_killed(db: DbPath, hooks: TuneHooks) -> list[int]:
    """Sessions left "running" by a tune that was killed outright (SIGKILL, a lost machine
    session): the trial it was trying is undone from its undo file (what it had kept stays,
    with its own undo files), the session is marked "killed", and the user is told. The ids."""
    root = SysRoot.open(None)
    recovered: list[int] = []
    with open_store(db) as store:
        running = [s["tune_id"] for s in tunestore.sessions(store) if s["status"] == "running"]
        docs = [tunestore.session(store, t) for t in running]
    for doc in docs:
        if not _owner_gone(root, doc.get("owner")):
            continue
        trial = doc.get("trial_undo_file")
        what = "no change was being tried"
        if trial and Path(trial).exists():
            try:
                with signals.held():
                    undo(Path(trial), force=True)
                what = f"the change it was trying is undone ({trial})"
            except (UserError, Failure) as e:
                what = f"the change it was trying is not undone ({e}): run `lowtail host undo {trial}`"
        doc["status"], doc["trial_undo_file"] = "killed", None
        _save(db, doc)
        kept = ", ".join(doc["kept"]) or "nothing"
        hooks.warn(f"tune session {doc['tune_id']} was killed while running: {what}; what it kept stays: {kept}")
        recovered.append(int(doc["tune_id"] or 0))
    return recovered


def _check_same_experiment(db: DbPath, exp: Experiment, spec: Path, before: int) -> None:
    """`--before` is a measurement of this very experiment file (the same spec hash):
    another experiment's runs would make every difference a difference of experiments."""
    with open_store(db) as store:
        stored = runstore.experiment(store, before)
    if stored.get("spec_hash") != exp.spec_hash:
        raise UserError(
            f"--before {before}: experiment {before} ({stored.get('name')}) was not measured from {spec} as it is now "
            "(its file differs): give an experiment measured from this file, or leave --before out to measure one"
        )


def _unseen(store: Store, experiment_id: int) -> list[str]:
    """What explain could not see in the before runs, in words: each thing their explanations
    list as unseen (the hypervisor's steal on a CPU, untraced cores, no kernel trace, invisible
    VM exits) once, with the largest share of a tail it could hold and the runs. A targeted
    change missing from the proposals has its reason here."""
    from lowtail.explain.words import could_hold

    runs = runstore.runs(store, experiment_id)
    ids = [rid for r in runs if not r.get("calibration") and (rid := r.get("run_id")) is not None]
    found: dict[tuple[Any, ...], tuple[str, float, list[int]]] = {}
    for run_id in ids:
        doc = explainstore.explanation(store, run_id)
        entries: list[Mapping[str, Any]] | None = list((doc or {}).get("unseen") or []) if doc else None
        if entries is None:
            entries = [{"kind": "not_explained", "what": "the run was not explained", "share": 1.0, "cpu": None}]
        for u in entries:
            key = (
                u["kind"],
                u.get("cpu"),
                u.get("role"),
                u.get("host"),
                "" if u["kind"] == "hypervisor" else u["what"],
            )
            label = f"the hypervisor's steal time on CPU {u['cpu']}" if u["kind"] == "hypervisor" else u["what"]
            _, share, where = found.get(key, (label, 0.0, []))
            found[key] = (label, max(share, float(u["share"])), [*where, run_id])
    return [
        f"{label} ({could_hold(share, 'a tail')}; runs {', '.join(map(str, where))})"
        + ("; no cause of theirs could be targeted" if key[0] in ("no_trace", "not_explained") else "")
        for key, (label, share, where) in found.items()
    ]


def _abandon(doc: TuneDocument, trial: _Trial, db: DbPath, status: str) -> str:
    """Undo the trial in progress (not what was kept), with every signal held; store the
    session with `status`; what became of the trial, in words."""
    tried = {p.id for p in trial.proposals} - set(doc["kept"])
    with signals.held():
        what = "not in force (never applied, or rolled back by apply)"
        if trial.undo_path.exists() and tried:
            what = "undone"
            try:
                undo(trial.undo_path, force=True)
            except (UserError, Failure) as e:
                what = f"not undone ({e}): run `lowtail host undo {trial.undo_path}`"
        if not what.startswith("not undone"):
            doc["trial_undo_file"] = None
        doc["status"] = status
        _save(db, doc)
    return f"({', '.join(sorted(tried)) or '–'}) is {what}"


def _stop(root: SysRoot, doc: TuneDocument, trial: _Trial, db: DbPath, cause: BaseException) -> None:
    """Stopped during a trial (a later signal only notes, core/signals.py): the trial undone, the
    session stored as interrupted, and what the host holds said."""
    what = _abandon(doc, trial, db, "interrupted")
    kept = ", ".join(doc["kept"]) or "nothing"
    raise Interrupted(
        f"interrupted: the change being tried {what}; "
        f"the host holds what tune kept: {kept} (tune session {doc['tune_id']})"
    ) from None


def _measure(
    exp: Experiment, db: DbPath, opts: TuneOptions, hooks: TuneHooks, what: str, part: Part | None = None
) -> int:
    """Measure the experiment (a new one; only `part`'s repetition, into its experiment, when given)."""
    from lowtail.experiment.runner import sweep_and_store
    from lowtail.store import resolve_db

    hooks.log(f"measuring {exp.name} {what}")
    data_dir = opts.data_dir or default_data_dir(resolve_db(db))
    result = sweep_and_store(exp, db, data_dir, fresh=True, log=hooks.log, warn=hooks.warn, part=part)
    return result.experiment_id


def _causes(store: Store, experiment_id: int) -> list[CauseDoc]:
    """The causes explain stored for the experiment's runs (the DuT's, not calibration's)."""
    rows = [r for r in runstore.runs(store, experiment_id) if not r.get("calibration")]
    out: list[CauseDoc] = []
    for r in rows:
        run_id = r.get("run_id")
        if run_id is None:
            continue
        found = explainstore.explanation(store, run_id)
        out += [c.copy() for c in found["causes"]] if found else []
    return out


def _compare(store: Store, baseline: int, after: int, key: str) -> ComparisonDocument:
    from lowtail.compare.comparison import CompareOptions, compare_and_store

    opts = CompareOptions(by=["experiment"], label=f"tune: experiment {baseline} against {after}")
    return compare_and_store(store, [str(baseline), str(after)], opts)


def decide(comparison: Mapping[str, Any], baseline: int, after: int, key: str) -> tuple[bool, list[str], str]:
    """(a resolvable improvement at `key`, the percentiles of a resolvable harm, the sentence)
    from the comparison of the baseline's and the trial's experiments."""
    index = {c["key"].get("experiment"): c["index"] for c in comparison["configurations"]}
    a, b = index.get(baseline), index.get(after)
    improved, harmed, effect = False, [], None
    for d in comparison["differences"]:
        if {d["a_index"], d["b_index"]} != {a, b}:
            continue
        after_lower = (d["ratio"] < 1) == (d["a_index"] == a)  # ratio is b over a
        if d["percentile"] == key and after_lower:
            improved, effect = True, d["text"]
        elif not after_lower:
            harmed.append(d["percentile"])
    if effect is None:
        effect = next(
            (
                d.get("text") or d.get("why") or ""
                for d in comparison["not_resolvable"]
                if d["percentile"] == key and {d["a_index"], d["b_index"]} == {a, b}
            ),
            f"no resolvable difference at {key}",
        )
        if harmed:
            effect = next(d["text"] for d in comparison["differences"] if d["percentile"] == harmed[0])
    return improved, harmed, str(effect)


def _applied(p: Proposal) -> list[str]:
    return [f"{c.setting}: {c.before} → {c.after if c.after is not None else c.written}" for c in p.changes]


def _planned(p: Proposal) -> TuneChangeDocument:
    return TuneChangeDocument(
        id=p.id,
        setting=p.setting,
        cause=p.cause,
        remedy=p.remedy.doc(),
        applied=[f"{c.setting}: {c.before} → {c.written}" for c in p.changes],
        effect=None,
        improved=None,
        harmed=[],
        kept=None,
        baseline=None,
        after=None,
        comparison_id=None,
        undo_file=None,
    )


def _boot(root: SysRoot, plan: CorePlan, causes: Sequence[CauseDoc]) -> TuneBootDocument:
    """The boot-time parameters still worth setting: the plan's, less what the running
    command line has, each with the remedies of the measured causes that ask for it."""
    host = Host(root)
    line = kernel_cmdline(host, plan)
    booted = set(host.params)
    why: dict[str, list[str]] = {}
    for c in causes:
        for name in (c.get("remedy") or {}).get("boot_parameters", []):
            why.setdefault(name, [])
            reason = f"{c.get('kind')} on CPU {c.get('cpu')}"
            if reason not in why[name]:
                why[name].append(reason)
    params: list[BootParamWhy] = [
        {**p, "causes": why.get(p["name"], [])} for p in line["params"] if p["name"] not in booted
    ]
    params.sort(key=lambda p: (not p["causes"], 0))
    rt = REMEDIES["isolate-dut-cores"]
    return {
        "plan": line["plan"],
        "params": params,
        "grub": line["grub"],
        "grub_steps": line["grub_steps"],
        "preempt_rt": host.preempt_rt,
        "notes": line["notes"]
        + ([] if host.preempt_rt else [f"a PREEMPT_RT kernel bounds how long the kernel holds a core ({rt.source})"]),
    }


def _save(db: DbPath, doc: TuneDocument) -> None:
    with signals.held(), open_store(db) as store:
        tunestore.save_session(store, doc)


def after_reboot(
    exp: Experiment, db: DbPath, tune_id: int, opts: TuneOptions, hooks: TuneHooks | None = None
) -> TuneDocument:
    """`tune --after-reboot ID`: the session's experiment measured again (after boot-time
    tuning) and compared with its stored before; the session's document with the result added."""
    hooks = hooks or TuneHooks()
    with open_store(db) as store:
        doc = tunestore.session(store, tune_id)
    before = doc["before"]
    hooks.phase("measure-after")
    after = _measure(exp, db, opts, hooks, "after the reboot")
    with open_store(db) as store:
        comparison = _compare(store, before, after, doc["percentile"])
    improved, harmed, effect = decide(comparison, before, after, doc["percentile"])
    doc["comparison_id"] = comparison.get("comparison_id")
    doc["after_reboot"].append(
        {
            "after": after,
            "comparison_id": comparison.get("comparison_id"),
            "improved": improved,
            "harmed": harmed,
            "effect": effect,
            "cmdline": Host(SysRoot.open(None)).cmdline,
        }
    )
    _save(db, doc)
    return doc
