"""lowtail from Python, for notebooks: `db = lowtail.open("lowtail.duckdb")`, then the
stored runs and analyses as pandas DataFrames (one row per run, its configuration axes as
columns), a run's matched latencies as an Arrow table or a NumPy array, and comparisons —
the document `lowtail compare --json` prints, plus DataFrames of it.

Every call opens the database for its own duration (read-only unless it stores something),
so a notebook never holds a lock that keeps `lowtail run` from writing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from lowtail.analyze.document import latency_of
from lowtail.core import percentiles
from lowtail.core.errors import UserError
from lowtail.core.labels import checked_label
from lowtail.store import axes
from lowtail.store.db import LATENCY_FIGURES, latency_column

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from lowtail.compare.document import ComparisonDocument
    from lowtail.experiment.document import RunRow
    from lowtail.explain.document import ExplainDocument
    from lowtail.models.aliasing import AliasingOptions
    from lowtail.models.document import AliasingDocument, EvtDocument, OverloadDocument, SimulateDocument
    from lowtail.models.evt import EvtOptions
    from lowtail.models.knee import KneeOptions, Knees
    from lowtail.models.overload import OverloadOptions
    from lowtail.models.simulate import SimulateOptions
    from lowtail.store import DbPath
    from lowtail.store.db import Store

# The latency figures of each run row (`<key>_ns` columns), in rank order.
_FIGURES = ("min", *percentiles.KEYS, "max")


@dataclass
class Comparison:
    """A comparison: `document` is what `lowtail compare --json` prints (`comparison_id` set
    once stored); the DataFrames are views of it, and `curves`/`cdf` what its page draws."""

    document: ComparisonDocument
    curves: pd.DataFrame = field(repr=False)
    cdf: pd.DataFrame = field(repr=False)

    @property
    def id(self) -> int:
        """The stored comparison's id (`db.comparison(c.id)` reads it back); ValueError when
        it was made with store=False."""
        found = self.document["comparison_id"]
        if found is None:
            raise ValueError("this comparison was not stored (store=False)")
        return found

    @property
    def configurations(self) -> pd.DataFrame:
        """One row per configuration: its axis values, repetitions, sent, lost, loss ratio,
        pooled percentiles (`p99_9_ns` …) with their interval bounds (`p99_9_lower_ns`,
        `p99_9_upper_ns`, `p99_9_resolvable`) and spread over repetitions (`p99_9_min_ns`,
        `p99_9_max_ns`), the worst repetition and the verdict."""
        import pandas as pd

        rows = []
        for c in self.document["configurations"]:
            row: dict[str, object] = {"configuration": c["index"], "label": c["label"], **c["key"]}
            row |= {k: c[k] for k in ("repetitions", "sent", "lost", "loss_ratio", "worst_repetition")}
            for key, value in (c["latency_ns"] or {}).items():
                row[f"{key}_ns" if key != "samples" else "samples"] = value
            for key, iv in (c["intervals"] or {}).items():
                row |= {f"{key}_lower_ns": iv["lower_ns"], f"{key}_upper_ns": iv["upper_ns"]}
                row[f"{key}_resolvable"] = iv["resolvable"]
            for key, s in c["spread"].items():
                row |= {f"{key}_min_ns": s["min"], f"{key}_max_ns": s["max"]}
            floor = c["floor"]["latency_ns"] if c["floor"] else {}
            row |= {f"floor_{k}_ns": v for k, v in floor.items() if k != "samples"}
            row |= {"verdict": c["verdict"]["status"], "verdict_reason": c["verdict"]["reason"], "runs": c["runs"]}
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def differences(self) -> pd.DataFrame:
        """Every pair of configurations at p99.9, p99.99 and p99.999: `resolved`, the lower
        and higher, the difference in ns, and the sentence."""
        import pandas as pd

        return pd.DataFrame([*self.document["differences"], *self.document["not_resolvable"]])

    @property
    def evt(self) -> pd.DataFrame:
        """EVT over runs: per configuration the models, share bounded, mean exceedances."""
        import pandas as pd

        return pd.DataFrame(self.document["evt"])

    @property
    def rates(self) -> pd.DataFrame:
        """Latency against rate: one row per (series, rate), with the series' knees."""
        import pandas as pd

        rows = []
        for s in self.document["rates"]:
            for p in s["points"]:
                row = {"series": s["label"], **s["key"], "rate_pps": p["rate_pps"], "loss_ratio": p["loss_ratio"]}
                row |= {f"{k}_ns" if k != "samples" else k: v for k, v in p["latency_ns"].items()}
                row |= {"verdict": p["verdict"], "knee_pps": [k["knee_pps"] for k in s["knees"]] or None}
                rows.append(row)
        return pd.DataFrame(rows)


class Database:
    """A lowtail results database (see `lowtail.open`)."""

    def __init__(self, path: DbPath = None):
        from lowtail.store import resolve_db

        self.path = resolve_db(path)
        if not self.path.exists():
            raise UserError(f"{self.path}: no such database")

    def __repr__(self) -> str:
        return f"lowtail.Database({str(self.path)!r})"

    @contextmanager
    def _store(self, write: bool = False) -> Iterator[Store]:
        from lowtail.store import open_store

        with open_store(self.path, read_only=not write) as store:
            yield store

    def runs(self, *selection: str) -> pd.DataFrame:
        """One row per stored run (those a selection names, e.g. `db.runs("3", "dut=fwd")`;
        all without one): ids, every configuration axis as a column, repetition,
        calibration, valid, sent/received/lost, loss ratio, the latency figures in ns
        (`p99_999_ns` …) and samples, the series file, why a run is invalid, its verdict
        against its experiment's budget (`verdict`, `verdict_reason`) and whether it is
        degraded (`degraded`, `degraded_reasons`). The columns are there when no run is."""
        import pandas as pd

        from lowtail.store import runs as runstore
        from lowtail.store import selection as sel
        from lowtail.verdict.judge import Verdict, parse_verdict

        with self._store() as store:
            rows = sel.select(store, list(selection)) if selection else _all_runs(store)
            eids = sorted({e for r in rows if (e := r.get("experiment_id")) is not None})
            budgets = {e: parse_verdict(t, stored=True) for e, t in runstore.verdict_settings(store, eids).items()}
        every = axes.axes_of([r for r in rows], repetition=False)
        columns = [
            *("run_id", "experiment_id", "analysis_id"),
            *(a.name for a in every),
            *("repetition", "calibration", "valid", "sent", "received", "lost", "loss_ratio"),
            *(f"{k}_ns" for k in _FIGURES),
            *("mean_ns", "samples", "series_path", "invalid_reasons"),
            *("verdict", "verdict_reason", "degraded", "degraded_reasons"),
        ]
        out = []
        for r in rows:
            row: dict[str, object] = {
                "run_id": r["run_id"],
                "experiment_id": r["experiment_id"],
                "analysis_id": r["analysis_id"],
            }
            row |= {a.name: (a.read(r) if a.present(r) else None) for a in every}
            row |= {k: r.get(k) for k in ("repetition", "calibration", "valid", "sent", "received", "lost")}
            sent = r.get("sent")
            row["loss_ratio"] = (r.get("lost") or 0) / sent if sent else None
            lat = latency_of(r.get("figures"))
            row |= {f"{k}_ns": lat.get(k) for k in _FIGURES} | {
                "mean_ns": lat.get("mean"),
                "samples": lat.get("samples"),
            }
            row |= {"series_path": r.get("series_path"), "invalid_reasons": r.get("invalid_reasons") or []}
            judged = budgets.get(r.get("experiment_id") or 0, Verdict()).judge(r)
            row |= {"verdict": judged.label, "verdict_reason": judged.reason}
            row |= {"degraded": bool(r.get("degraded_reasons")), "degraded_reasons": r.get("degraded_reasons") or []}
            out.append(row)
        return pd.DataFrame(out, columns=columns)

    def analyses(self) -> pd.DataFrame:
        """One row per stored analysis: its id, label, figures in ns, partial, series file,
        and — for an analysis of a run — the run's id and configuration axes."""
        import pandas as pd

        from lowtail.store import analyses as analysisstore

        with self._store() as store:
            rows = _all_runs(store)
            ids = _all_analysis_ids(store)
            plain = analysisstore.standalone_analyses(store, ids)
        by_analysis = {r["analysis_id"]: r for r in rows if r["analysis_id"] is not None}
        every = axes.axes_of(list(by_analysis.values()), repetition=True)
        columns = [
            *("analysis_id", "run_id", "label"),
            *(ax.name for ax in every),
            *("sent", "received", "lost", "partial", "series_path"),
            *(f"{k}_ns" for k in _FIGURES),
            "samples",
        ]
        out = []
        for a in [*by_analysis.values(), *plain]:
            run = a if a.get("run_id") else None
            lat = latency_of(a.get("figures"))
            row: dict[str, object] = {
                "analysis_id": a["analysis_id"],
                "run_id": a.get("run_id"),
                "label": a.get("label"),
            }
            row |= {ax.name: (ax.read(run) if run and ax.present(run) else None) for ax in every}
            row |= {k: a.get(k) for k in ("sent", "received", "lost", "partial", "series_path")}
            row |= {f"{k}_ns": lat.get(k) for k in _FIGURES} | {"samples": lat.get("samples")}
            out.append(row)
        return pd.DataFrame(out, columns=columns).sort_values("analysis_id", ignore_index=True)

    def flows(self) -> pd.DataFrame:
        """One row per flow of every stored analysis that told flows apart: its analysis and
        run (None for `lowtail analyze`'s), what told the flows apart (`flow_key`), the flow's
        index in the matched series (`flow`, the series' column) and its label (`key`:
        "10.0.0.1:49152 > 10.0.0.2:53"), sent/received/lost/negative, samples, and the
        latency figures in ns (exact, as the pooled ones; they add up to them)."""
        from lowtail.store.analyses import every_flow

        with self._store() as store:
            rows = every_flow(store)
        columns = [
            *("analysis_id", "run_id", "flow_key", "flow", "key", "sent", "received", "lost", "negative", "samples"),
            *(f"{k}_ns" for k in (*_FIGURES, "mean", "stddev")),
        ]
        return _stored_frame(rows, columns, {"key": "flow_label"})

    def hops(self) -> pd.DataFrame:
        """One row per hop of every stored chain run, in the order traffic meets them: its
        run and experiment, hop number (1 first), the DuT's name and kind, sent/received/lost,
        p50/p99/p99.9/max and mean in ns, its share of the chain's mean latency (the hops' add
        up to 1) and its matched series."""
        from lowtail.store.chains import every_hop

        with self._store() as store:
            rows = every_hop(store)
        columns = [
            *("run_id", "experiment_id", "hop", "name", "kind", "sent", "received", "lost"),
            *(f"{k}_ns" for k in ("p50", "p99", "p99_9", "max", "mean")),
            *("share", "series_path"),
        ]
        return _stored_frame(rows, columns)

    @overload
    def latencies(self, run_id: int, format: Literal["arrow"] = "arrow") -> pa.Table: ...
    @overload
    def latencies(self, run_id: int, format: Literal["numpy"]) -> np.ndarray: ...

    def latencies(self, run_id: int, format: Literal["arrow", "numpy"] = "arrow") -> pa.Table | np.ndarray:
        """A run's matched series: the Arrow table (id, pre_ts_ns, post_ts_ns, latency_ns, flow,
        in PRE order), or with format="numpy" its latencies (int64 ns)."""
        import numpy as np
        import pyarrow.parquet as pq

        from lowtail.core import series
        from lowtail.store.models import series_source

        with self._store() as store:
            path = series_source(store, f"run:{int(run_id)}").path
        if format == "numpy":
            parts = list(series.iter_latencies(path))
            return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        if format != "arrow":
            raise ValueError(f"format is 'arrow' or 'numpy', not {format!r}")
        return pq.read_table(path)

    def compare(
        self,
        *selection: str,
        by: list[str] | str | None = None,
        budget: str | None = None,
        percentile: float | str | None = None,
        confidence: float | str = 0.95,
        evt: bool = False,
        floor: int | None = None,
        label: str | None = None,
        store: bool = True,
    ) -> Comparison:
        """Compare the runs a selection names, as `lowtail compare` does (the same
        document), and store it unless `store=False`. `by`: axis names (a list or
        "dut,containment"); `budget`, `percentile` and `confidence` (of the intervals: 0.95,
        95 or "95%") as `lowtail compare` takes them, one `VerdictRequest`."""
        from lowtail.compare.comparison import CompareOptions, compare
        from lowtail.store import comparisons as comparestore
        from lowtail.verdict.judge import VerdictRequest

        label = checked_label(label)
        opts = CompareOptions(
            by=[b.strip() for b in by.split(",")] if isinstance(by, str) else by,
            verdict=VerdictRequest.parse(budget, percentile, confidence=confidence),
            evt=evt,
            floor=floor,
            label=label,
        )
        words = list(selection)
        with self._store(write=store or evt) as s:
            c = compare(s, words, opts)
            if store:
                comparestore.save_comparison(s, c.document, words, c.document["by"], c.curves, c.cdf, c.members, label)
        return Comparison(c.document, _curves_frame(c.curves), _cdf_frame(c.cdf))

    def explain(self, run: int | str = "latest", above: str | None = None) -> ExplainDocument:
        """Why a stored run's tail is what it is, as `lowtail explain RUN --json` prints it:
        the tail packets (above the budget when the run fails it, else above p99.9; `above`
        a percentile "p99" or a latency "500us"), the causes ranked with evidence and remedy,
        the unexplained share, what could not be seen. The stored explanation, as the command
        answers (worked out and stored first when there is none; another tail on request)."""
        from lowtail.explain.asked import latency_above
        from lowtail.explain.stored import stored_or_explained
        from lowtail.store.explain import run_id_of

        threshold = latency_above(above) if above is not None else None
        with self._store(write=True) as s:
            return stored_or_explained(s, run_id_of(s, str(run)), threshold)

    # -- models: the calls `lowtail model ...` makes, each result stored unless store=False --------

    def overload(self, options: OverloadOptions, *, store: bool = True, label: str | None = None) -> OverloadDocument:
        """R_max from two medians (given, or stored runs') and the interrupt load, as `lowtail
        model overload --json` prints it (`model_id` set once stored)."""
        from lowtail.models.overload import overload_and_store

        label = checked_label(label)
        with self._store(write=store) as s:
            return overload_and_store(s, options, save=store, label=label)

    def knee(self, options: KneeOptions | None = None, *, store: bool = True) -> Knees:
        """The knee of each DuT's sweep in a stored experiment (the newest by default)."""
        from lowtail.models.knee import KneeOptions, knee_and_store

        with self._store(write=store) as s:
            return knee_and_store(s, options or KneeOptions(), save=store)

    def evt(
        self,
        source: str | int,
        options: EvtOptions | None = None,
        *,
        rate_pps: float | None = None,
        store: bool = True,
        label: str | None = None,
    ) -> EvtDocument:
        """The EVT tail model of a run (its id, "run:12"), "analysis:7" or a Parquet series file."""
        from lowtail.models.evt import evt_and_store

        label = checked_label(label)
        with self._store(write=store) as s:
            return evt_and_store(s, str(source), options, rate_pps=rate_pps, save=store, label=label)

    def aliasing(self, options: AliasingOptions | None = None, *, store: bool = True) -> AliasingDocument:
        """Periodic interrupts against constant-rate traffic: the worst-N pattern (against a
        stored run when `options.run` names one)."""
        from lowtail.models.aliasing import AliasingOptions, aliasing_and_store

        with self._store(write=store) as s:
            return aliasing_and_store(s, options or AliasingOptions(), save=store)

    def simulate(
        self, options: SimulateOptions | None = None, *, store: bool = True, label: str | None = None
    ) -> SimulateDocument:
        """The discrete-event model of a device, each case of `options` (against a stored
        lowtail-fwd run when `options.run` names one)."""
        from lowtail.models.simulate import SimulateOptions, simulate_and_store

        label = checked_label(label)
        with self._store(write=store) as s:
            return simulate_and_store(s, options or SimulateOptions(), save=store, label=label)

    def comparison(self, comparison_id: int | str = "latest") -> Comparison:
        """A stored comparison (an id, or 'latest')."""
        import pandas as pd

        from lowtail.store import comparisons as comparestore

        with self._store() as store:
            row = comparestore.comparison(store, comparison_id)
            cid = row["comparison_id"]
            curves = comparestore.comparison_curves(store, cid)
            cdf = comparestore.comparison_cdf(store, cid)
        rows: list[tuple[int, str, int | None, float, int]] = []
        for config, entry in curves.items():
            rows += [(config, comparestore.POOLED, None, p, v) for p, v in entry["pooled"]]
            rows += [(config, comparestore.FLOOR, None, p, v) for p, v in entry["floor"]]
            for aid, points in entry["repetitions"].items():
                rows += [(config, comparestore.REPETITION, aid, p, v) for p, v in points]
        frame = pd.DataFrame(rows, columns=["configuration", "source", "analysis_id", "percentile", "value_ns"])
        cdf_rows = [(config, f, v) for config, points in cdf.items() for f, v in points]
        return Comparison(
            row["document"], frame, pd.DataFrame(cdf_rows, columns=["configuration", "fraction", "value_ns"])
        )


def _stored_frame(
    rows: list[dict[str, Any]], columns: list[str], renamed: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Rows as the store reads them, as a DataFrame of `columns`: a latency figure's column
    (`p99_9_ns`) read from the store's (`lat_p99_9_ns`), one `renamed` from the store column
    it names, every other by its own name."""
    import pandas as pd

    def stored(column: str) -> str:
        figure = column.removesuffix("_ns")
        return (renamed or {}).get(column) or (latency_column(figure) if figure in LATENCY_FIGURES else column)

    sources = {c: stored(c) for c in columns}
    return pd.DataFrame([{c: r[sources[c]] for c in columns} for r in rows], columns=columns)


def _all_runs(store: Store) -> list[RunRow]:
    from lowtail.store import runs as runstore

    return runstore.select_runs(store)


def _all_analysis_ids(store: Store) -> list[int]:
    from lowtail.store.analyses import list_analyses

    return [a["analysis_id"] for a in list_analyses(store, limit=1_000_000_000)]


def _curves_frame(curves: list[Any]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        [(c.configuration, c.source, c.analysis_id, c.percentile, c.value_ns) for c in curves],
        columns=["configuration", "source", "analysis_id", "percentile", "value_ns"],
    )


def _cdf_frame(cdf: list[tuple[int, float, int]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(cdf, columns=["configuration", "fraction", "value_ns"])
