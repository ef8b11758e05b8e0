"""A tune session as stored and printed: its changes, what was kept, what could be resolved.

JSON by nature (printed by `--json`, stored as JSON and read back through the store's
codec), typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from typing import TypedDict

from lowtail.explain.document import RemedyDoc
from lowtail.host.document import BootParamDocument, CorePlanSplit


class TuneChangeDocument(TypedDict):
    """One change `lowtail tune` proposed, tried, and kept or undid."""

    id: str  # what `--only` names
    setting: str  # what it changes, in words
    cause: str  # the cause in the measured tail it targets (or a guideline)
    remedy: RemedyDoc
    applied: list[str]  # each setting as applied ("vm.stat_interval: 1 → 3600")
    effect: str | None  # the before/after comparison's sentence at the judged percentile (None: not tried)
    improved: bool | None  # a resolvable improvement at the judged percentile
    harmed: list[str]  # the percentiles where it made a resolvable harm
    kept: bool | None  # None: not tried (a dry run, or the session stopped first)
    baseline: int | None  # the kept state measured again, its repetitions interleaved with `after`'s
    after: int | None  # the experiment measured with it applied
    comparison_id: int | None  # the stored comparison of baseline and after
    undo_file: str | None  # what undoes it, while it is kept


class TuneOwnerDocument(TypedDict):
    """The process running a tune session: a session left "running" whose owner is gone was
    killed outright, and the next `tune --yes` undoes the trial it was trying."""

    pid: int
    start: str | None  # /proc stat field 22: a pid used again is another process


class ResolutionDocument(TypedDict):
    """Whether an experiment's repetitions bound a percentile (compare/resolution.py): a
    difference there is judged only where each repetition's packets bound it."""

    percentile: str
    bounded: bool  # every repetition bounds it
    unbounded_runs: list[int]  # the runs whose packets do not
    packets_needed: int | None  # per repetition, at the clustering measured (None: unknown, or bounded)
    seconds_needed: int | None  # the same at the runs' rate
    why: str | None  # one sentence, with what to do; None when bounded


class BootParamWhy(BootParamDocument):
    """A boot parameter still worth setting, with the measured causes whose remedies ask for it."""

    causes: list[str]  # "<cause kind> on CPU <n>"


class TuneBootDocument(TypedDict):
    """The boot-time parameters still worth setting: host/plan.py's kernel_cmdline less what
    the running command line has, each with why, and the GRUB line that sets them."""

    plan: CorePlanSplit
    params: list[BootParamWhy]
    grub: str
    grub_steps: list[str]
    preempt_rt: bool
    notes: list[str]


class AfterRebootDocument(TypedDict):
    """`tune --after-reboot`: one later measurement against the session's before."""

    after: int  # its experiment
    comparison_id: int | None
    improved: bool
    harmed: list[str]
    effect: str
    cmdline: str  # the kernel command line it was measured under


class TuneDocument(TypedDict):
    """What `lowtail tune --json` prints and the store keeps (store/tune.py)."""

    tune_id: int | None
    spec: str  # the experiment file
    before: int  # the experiment measured before any change
    after: int | None  # the experiment that measured the kept set last (None: nothing kept)
    comparison_id: int | None  # the stored comparison of before and the last after (the page's curves)
    percentile: str  # the judged percentile's key
    changes: list[TuneChangeDocument]
    kept: list[str]  # the ids of the changes kept
    undone: list[str]  # the ids of the changes tried and undone
    boot: TuneBootDocument  # the boot-time parameters still worth setting
    dry_run: bool
    status: str  # planned | running | finished | interrupted | failed | killed
    after_reboot: list[AfterRebootDocument]  # `tune --after-reboot`: each later measurement against the before
    unseen: list[str]  # what explain could not see in the before runs (why a targeted change may be missing)
    owner: TuneOwnerDocument | None
    trial_undo_file: str | None  # the undo file of the trial in force while it is measured, else None
    resolution: ResolutionDocument | None  # whether the before's repetitions bound the judged percentile
