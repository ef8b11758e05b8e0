"""EVT over runs (Perf. Eval. 2024, Tables 4–5): per configuration, how many of its
repetitions' tail models are shown bounded (ξ's confidence interval below 0: a finite return
level for any return period; a negative estimate alone is not)
and how often, on average, each model's validation part exceeded its return level (1 is
what a good model expects). Read from the stored `model evt` results of each run; `fit`
fits and stores the missing ones."""

from __future__ import annotations

from lowtail.compare.document import ConfigurationDocument, EvtRunsRow
from lowtail.core.errors import UserError
from lowtail.models.document import EvtDocument
from lowtail.store import models as modelstore
from lowtail.store.db import Store

EvtModels = dict[int, modelstore.StoredModel[EvtDocument]]


def run_models(store: Store, run_ids: list[int], fit: bool) -> tuple[EvtModels, dict[int, str]]:
    """The newest stored EVT result of each run, fitting (and storing) missing ones when
    `fit`: ({run_id: stored model row}, {run_id: why it has none})."""
    found: EvtModels = {}
    missing: dict[int, str] = {}
    for rid in run_ids:
        row = modelstore.latest_model(store, modelstore.EVT, run_id=rid)
        if row is None and fit:
            try:
                row = _fit(store, rid)
            except UserError as e:
                missing[rid] = str(e)
                continue
        if row is None:
            missing[rid] = "no stored `model evt` result (--evt fits one)"
        else:
            found[rid] = row
    return found, missing


def _fit(store: Store, run_id: int) -> modelstore.StoredModel[EvtDocument]:
    from lowtail.models.evt import EvtOptions, evt_of_source

    src = modelstore.series_source(store, f"run:{run_id}")
    doc = evt_of_source(src, EvtOptions())
    inputs = {"input": f"run:{run_id}", "series": src.path, **doc["options"], "rate": None}
    model_id = modelstore.save_model(
        store,
        modelstore.EVT,
        inputs,
        doc,
        run_id=run_id,
        analysis_id=src.analysis_id,
        source=src.label,
        label="lowtail compare --evt",
    )
    return modelstore.model_result(store, model_id, modelstore.EVT)


def table_row(configuration: ConfigurationDocument, models: EvtModels, missing: dict[int, str]) -> EvtRunsRow:
    """One configuration's row: repetitions, models, share bounded, mean validation
    exceedances (expected: 1), mean ξ, and the runs without a model and why."""
    rows = [models[r] for r in configuration["runs"] if r in models]
    results = [m["result"] for m in rows]
    exceedances = [r["validation"]["exceedances"] for r in results if r.get("validation")]
    bounded = sum(bool(r.get("bounded")) for r in results)
    return {
        "configuration": configuration["index"],
        "label": configuration["label"],
        "repetitions": configuration["repetitions"],
        "models": len(results),
        "model_ids": [m["model_id"] for m in rows],
        "bounded": bounded,
        "bounded_share": bounded / len(results) if results else None,
        "mean_exceedances": sum(exceedances) / len(exceedances) if exceedances else None,
        "expected_exceedances": 1.0,
        "mean_xi": sum(r["xi"] for r in results) / len(results) if results else None,
        "not_credible": sum(r.get("credible") is False for r in results),
        "missing": [{"run_id": r, "why": missing[r]} for r in configuration["runs"] if r in missing],
    }
