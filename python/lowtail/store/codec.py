"""The store's typed codec: every JSON column lowtail writes is written from its document type
(the `TypedDict`s of `<stage>/document.py`) and read back into it, validated (msgspec), so no
stored document comes back untyped and a damaged one ends the command with one line.

Each column is declared once here, as a `Column`: where it is, its shape, what a NULL reads as,
and its version with the upgrades of its older shapes — the one place that knows what earlier
lowtails stored. A document (a JSON object) is written with its column's version under
`VERSION_KEY`; one stored before the codec has none and is version 1. Reading a document runs
the upgrades from its version to the current one, then validates it against its type (the
version key is no field of any document: validation leaves it out).

Free-form maps (a DuT kind's containment and statistics, the experiment file's tables, QEMU's
JSON, a model's inputs) are declared with their open shape and are never versioned: their keys
are their owners'. A run's DuT options are kept as the JSON object of its kind's options
struct: which struct is told by another column (`runs.dut_kind`), so a reader that wants them
typed reads them with `testbed.document.options_from_json`, where their older shapes are
upgraded. A model result is typed by its kind but, stored as it always was, unversioned
(`Column.versioned`)."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from lowtail.analyze.document import AnalysisFigures, AnalysisInputs, AnalyzeOptionsDocument, ChainDocument
from lowtail.compare.document import ComparisonDocument
from lowtail.core.terminal import shown
from lowtail.experiment.document import ExperimentFile, ExperimentHost, TrafficDocument
from lowtail.explain.document import ExplainDocument
from lowtail.host.document import EnergyReading, HostStateDocument, NoiseAttribution, NoiseHost, SamplerCost
from lowtail.models.document import (
    AliasingDocument,
    EvtDocument,
    FlowTailsDocument,
    KneeDocument,
    OverloadDocument,
    SimulateDocument,
)
from lowtail.store.errors import DamagedDatabase
from lowtail.testbed.document import (
    CaptureStatistics,
    Containment,
    DutCounters,
    GeneratorStatistics,
    StoredDutOptions,
    TestbedDocument,
)
from lowtail.trace.document import TraceDocument
from lowtail.tune.document import TuneDocument

if TYPE_CHECKING:
    from lowtail.store.db import Store

T = TypeVar("T")

# The key a stored document carries its column's version under.
VERSION_KEY = "document_version"

# One step from a version of a document to the next (the dict is the stored JSON object).
Upgrade = Callable[[dict[str, object]], dict[str, object]]


def plain(value: object) -> object:
    """numpy scalars and arrays, paths and times as JSON values (what `json.dumps` is given
    beside the documents' own values)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _is_document(shape: object) -> bool:
    """Whether a column's shape is (or may be) a typed document: a TypedDict, alone or with None."""
    if typing.is_typeddict(shape):
        return True
    if typing.get_origin(shape) in (typing.Union, types.UnionType):
        return any(typing.is_typeddict(a) for a in typing.get_args(shape))
    return False


@dataclass(frozen=True)
class Column(Generic[T]):
    """One JSON column: `where` (table.column, as the one-line error names it), its `shape`
    (the type it is read back into), what a NULL reads as (`when_null`; None: a NULL is None,
    which the shape then allows), and the upgrades of its older documents in version order
    (`upgrades[0]` turns version 1 into 2)."""

    where: str
    shape: Any
    when_null: Callable[[], T] | None = None
    upgrades: tuple[Upgrade, ...] = ()
    # False: a document stored as it was before the codec, with no version key (a column whose
    # stored text must keep its shape: a model result); it has no upgrades then.
    versioned: bool = True

    def __post_init__(self) -> None:
        assert self.versioned or not self.upgrades, f"{self.where}: an unversioned column cannot be upgraded"

    @property
    def version(self) -> int:
        return 1 + len(self.upgrades)

    def encode(self, value: T | None) -> str | None:
        """The column's text for `value` (None: NULL), checked to read back as its type: a
        document that would not is lowtail's own mistake, raised as a TypeError before
        anything is written (never a stored document no reader can read)."""
        if value is None:
            return None
        stored: object = value
        if isinstance(value, dict) and self.versioned and _is_document(self.shape):
            stored = {**value, VERSION_KEY: self.version}  # no field of the type: validation leaves it out
        text = json.dumps(stored, default=plain)
        try:
            msgspec.convert(json.loads(text), self.shape)
        except msgspec.ValidationError as e:
            raise TypeError(f"{self.where}: the document to store is not of its type ({e})") from None
        return text

    def decode(self, store: Store | None, raw: object, row: object = None) -> T:
        """The stored text (`raw`: the cell as DuckDB hands it back) read back into the column's
        type, upgraded from its version; a cell that is not JSON text or not of the type is
        `DamagedDatabase`, one line naming the column and the row (`row`: "run 12")."""
        if raw is None:
            if self.when_null is not None:
                return self.when_null()
            raw = "null"
        if not isinstance(raw, (str, bytes)):
            raise self.damaged(store, row, TypeError(f"holds a {type(raw).__name__}, not JSON text"))
        try:
            value = json.loads(raw)  # the standard library reads the NaN an older lowtail wrote
            if isinstance(value, dict) and self.versioned and _is_document(self.shape):
                value = self._upgraded(value)
            found: T = msgspec.convert(value, self.shape)
            return found
        except msgspec.ValidationError as e:
            if not self.versioned and isinstance(value, dict) and str(e).startswith("Object missing required field"):
                # An unversioned document an older lowtail wrote before a field was added: read as
                # stored (what every reader got before its type was declared), never lost.
                return typing.cast(T, value)
            raise self.damaged(store, row, e) from None
        except ValueError as e:
            raise self.damaged(store, row, e) from None

    def decode_text(self, raw: str | bytes | None) -> T:
        """`decode` with no store to name (a bundle's or another database's rows)."""
        return self.decode(None, raw)

    def _upgraded(self, value: dict[str, object]) -> dict[str, object]:
        stored = value.pop(VERSION_KEY, 1)
        if not isinstance(stored, int) or not 1 <= stored <= self.version:
            raise ValueError(f"it is of version {stored!r}, this lowtail reads up to {self.version}")
        for upgrade in self.upgrades[stored - 1 :]:
            value = upgrade(value)
        return value

    def damaged(self, store: Store | None, row: object, e: Exception) -> DamagedDatabase:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        where = f"{store.path}: " if store is not None else ""
        of = f" of {row}" if row is not None else ""
        return DamagedDatabase(
            f"{where}the stored {self.where}{of} is damaged ({shown(detail[:200])}); lowtail leaves it as it is"
        )


# -- the older shapes, each upgraded once, here ------------------------------------------------


def _figures_before_the_codec(doc: dict[str, object]) -> dict[str, object]:
    """An analysis stored by a lowtail before a figure existed: the figure reads as zero (a
    count), or none where it may be none."""
    for name, value in _FIGURES_ABSENT.items():
        doc.setdefault(name, value)
    return doc


_FIGURES_ABSENT: dict[str, object] = {
    **dict.fromkeys(("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative"), 0),
    **dict.fromkeys(("unmatched", "pre_duplicates", "trimmed_pre", "trimmed_post", "trim_ns", "horizon_ns"), 0),
    **dict.fromkeys(("start_ts_ns", "duration_ns", "latency_ns", "export_path"), None),
    "warnings": [],
    "partial": False,
    "export_rows": 0,
    "elapsed_s": 0.0,
}


def _trace_before_the_codec(doc: dict[str, object]) -> dict[str, object]:
    """A trace stored before roles had hosts and before what was not traced had its own
    entries: a role without a host has host "" (the one host of its trace file is then its
    own, explain/run.py); an untraced entry that is not a role's entry is left out."""
    roles = doc.get("roles")
    if isinstance(roles, dict):
        doc["roles"] = {name: {"host": ""} | role if isinstance(role, dict) else role for name, role in roles.items()}
    untraced = doc.get("untraced")
    if isinstance(untraced, list):
        doc["untraced"] = [u for u in untraced if isinstance(u, dict)]
    return doc


# -- every JSON column ---------------------------------------------------------------------------

# analyses (001_analyses.sql)
ANALYSIS_OPTIONS = Column[AnalyzeOptionsDocument]("analyses.options", AnalyzeOptionsDocument)
ANALYSIS_WARNINGS = Column[list[str]]("analyses.warnings", list[str], when_null=list)
ANALYSIS_INPUTS = Column[AnalysisInputs]("analyses.inputs", AnalysisInputs)
ANALYSIS_FIGURES = Column[AnalysisFigures]("analyses.figures", AnalysisFigures, upgrades=(_figures_before_the_codec,))

# experiments (002_runs.sql, 012_bundles.sql): the experiment file as read (its tables, each
# its own section's keys), the host, where a bundle brought it from.
EXPERIMENT_SPEC = Column[ExperimentFile]("experiments.spec", ExperimentFile, when_null=dict)
EXPERIMENT_HOST = Column[ExperimentHost]("experiments.host", ExperimentHost, when_null=ExperimentHost)
# where a bundle brought it from: free-form, as each lowtail's import wrote it (the bundle's
# origin, the import, the experiment's old id and its own earlier origin, nested).
EXPERIMENT_ORIGIN = Column["dict[str, object] | None"]("experiments.origin", dict[str, object] | None)

# runs (002_runs.sql and the files that added columns): the DuT's options as their JSON object
# (typed by its kind: `options_from_json`), the DuT kind's open maps, the rest typed.
RUN_COLUMNS: dict[str, Column[Any]] = {
    "dut_config": Column[StoredDutOptions]("runs.dut_config", StoredDutOptions, when_null=dict),
    "invalid_reasons": Column[list[str]]("runs.invalid_reasons", list[str], when_null=list),
    "degraded_reasons": Column[list[str]]("runs.degraded_reasons", list[str], when_null=list),  # NULL: before 008
    "generator": Column[GeneratorStatistics]("runs.generator", GeneratorStatistics, when_null=GeneratorStatistics),
    "capture": Column[CaptureStatistics]("runs.capture", CaptureStatistics, when_null=CaptureStatistics),
    "containment": Column[Containment]("runs.containment", Containment, when_null=dict),
    "energy": Column["EnergyReading | None"]("runs.energy", EnergyReading | None),
    "traffic": Column[TrafficDocument]("runs.traffic", TrafficDocument, when_null=TrafficDocument),
    "dut_stats": Column["DutCounters | None"]("runs.dut_stats", DutCounters | None),
    "capture_paths": Column[list[str]]("runs.capture_paths", list[str], when_null=list),
    "testbed": Column["TestbedDocument | None"]("runs.testbed", TestbedDocument | None),
    "host_state": Column["HostStateDocument | None"]("runs.host_state", HostStateDocument | None),
}

# run_traces, run_explanations (017_explain.sql)
RUN_TRACE = Column[TraceDocument]("run_traces.document", TraceDocument, upgrades=(_trace_before_the_codec,))
EXPLANATION = Column[ExplainDocument]("run_explanations.document", ExplainDocument)

# run_chains (021_chains.sql): a chain run's hops and how they add up.
RUN_CHAIN = Column[ChainDocument]("run_chains.document", ChainDocument)

# tune_sessions (019_host_state.sql)
TUNE_SESSION = Column[TuneDocument]("tune_sessions.document", TuneDocument)

# comparisons (011_comparisons.sql)
COMPARISON_SELECTION = Column[list[str]]("comparisons.selection", list[str], when_null=list)
COMPARISON_BY = Column[list[str]]("comparisons.by_axes", list[str], when_null=list)
COMPARISON = Column[ComparisonDocument]("comparisons.document", ComparisonDocument)

# campaigns (010_campaigns.sql)
CAMPAIGN_OPTIONS = Column[AnalyzeOptionsDocument]("campaigns.options", AnalyzeOptionsDocument)

# noise runs (003_host.sql)
NOISE_HOST = Column["NoiseHost | None"]("noise_runs.host", NoiseHost | None)
NOISE_CPUS = Column[list[int]]("noise_runs.cpus", list[int], when_null=list)
NOISE_SAMPLER = Column["SamplerCost | None"]("noise_runs.sampler", SamplerCost | None)
NOISE_ENERGY = Column["EnergyReading | None"]("noise_runs.energy", EnergyReading | None)
NOISE_ATTRIBUTION = Column["NoiseAttribution | None"]("noise_cores.attribution", NoiseAttribution | None)

# model_results (004_models.sql): each kind's inputs (its options, an open map: the kind's
# own keys) and its document (models/document.py), by kind, as stored since 004 (unversioned).
MODEL_INPUTS = Column[dict[str, object]]("model_results.inputs", dict[str, object], when_null=dict)


def _model_result(shape: type[T]) -> Column[T]:
    return Column[T]("model_results.result", shape, versioned=False)


MODEL_RESULTS: dict[str, Column[Any]] = {
    "overload": _model_result(OverloadDocument),
    "knee": _model_result(KneeDocument),
    "evt": _model_result(EvtDocument),
    "flows": _model_result(FlowTailsDocument),
    "aliasing": _model_result(AliasingDocument),
    "simulate": _model_result(SimulateDocument),
}

# host_audits (003_host.sql): the core plan the audit judged against (host/plan.py's to_json).
AUDIT_PLAN = Column[dict[str, object]]("host_audits.plan", dict[str, object], when_null=dict)

# imports (012_bundles.sql): where a bundle came from and its manifest, as bundle/manifest.py
# read and checked them (its msgspec structs, as JSON).
IMPORT_ORIGIN = Column[dict[str, object]]("imports.origin", dict[str, object], when_null=dict)
IMPORT_MANIFEST = Column[dict[str, object]]("imports.manifest", dict[str, object], when_null=dict)

# Every column above: a JSON column of the schema that is not here fails tests/store/test_codec.py.
COLUMNS: tuple[Column[Any], ...] = (
    *(c for c in list(globals().values()) if isinstance(c, Column)),
    *RUN_COLUMNS.values(),
    *MODEL_RESULTS.values(),
)
