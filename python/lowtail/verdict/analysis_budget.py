"""The budget a stored analysis is judged against wherever it is shown again (`lowtail show`,
`lowtail report`, `analyze --report`): light, so that `show` reads it without the plotting
stack a page loads."""

from __future__ import annotations

from dataclasses import dataclass

from lowtail.analyze.document import StoredAnalysis
from lowtail.experiment.document import RunRow
from lowtail.store import runs as runstore
from lowtail.store.db import Store
from lowtail.store.records import analysis_as_run
from lowtail.verdict.document import JudgementDocument
from lowtail.verdict.judge import Verdict, VerdictRequest, stored_verdict


@dataclass(frozen=True)
class AnalysisBudget:
    """The budget an analysis is judged against wherever it is shown again, the run it is
    judged as, and whose budget it is: the experiment's for a run's analysis, the one
    `analyze --budget` judged it against, what a page or `show` was asked for over either,
    else the default."""

    verdict: Verdict
    run: RunRow
    whose: str
    kept: JudgementDocument | None = None  # the judgement `analyze --budget` stored, as it printed it

    def judge(self) -> JudgementDocument:
        if self.kept is not None:
            return self.kept
        return self.verdict.judge(self.run).as_dict() | {"budget": self.verdict.describe()}

    @property
    def is_default(self) -> bool:
        return self.whose == _DEFAULT_BUDGET


_DEFAULT_BUDGET = "the default; `lowtail help budget`"


def analysis_budget(store: Store, doc: StoredAnalysis, asked: VerdictRequest | None = None) -> AnalysisBudget:
    """The budget of one stored analysis (see `AnalysisBudget`)."""
    found = runstore.select_runs(store, analysis_ids=[doc["analysis_id"]])
    if found:
        run = found[0]
        eid = int(run["experiment_id"] or 0)
        stored = stored_verdict(runstore.experiment(store, eid)["spec"])
        whose = f"experiment {eid}'s, run {run['run_id']}"
    else:
        run = analysis_as_run(doc)
        judged = doc["figures"].get("verdict")
        kept = Verdict.of_judgement(judged) if judged else None
        if kept is not None and not (asked is not None and asked.given):
            return AnalysisBudget(kept, run, "as `lowtail analyze --budget` judged it", judged)
        stored, whose = kept or Verdict(), _DEFAULT_BUDGET
    if asked is not None and asked.given:
        return AnalysisBudget(asked.over(stored), run, "as asked")
    return AnalysisBudget(stored, run, whose)
