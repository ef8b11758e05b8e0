"""Comparisons in the database (tables of schema/011_comparisons.sql): the document
`lowtail compare --json` prints, and per configuration what its page draws — percentile
curves (pooled, per repetition, the floor's), CDF points and the repetitions' worst events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from lowtail.compare.document import (
    ComparisonDocument,
    ComparisonListed,
    ConfigurationCurves,
    StoredComparison,
    WorstEventRow,
)
from lowtail.core.errors import UserError
from lowtail.core.version import __version__
from lowtail.store.codec import COMPARISON, COMPARISON_BY, COMPARISON_SELECTION
from lowtail.store.db import Store, newest_id, row_as_dict

# The sources of a comparison's percentile curves.
POOLED, REPETITION, FLOOR = "pooled", "repetition", "floor"


@dataclass(frozen=True)
class CurvePoint:
    """One point of a curve: `configuration`'s `source` (a repetition names its run and
    analysis) at `percentile` (0..1, 1 the maximum)."""

    configuration: int
    source: str
    run_id: int | None
    analysis_id: int | None
    percentile: float
    value_ns: int


@dataclass(frozen=True)
class Member:
    """One repetition of a configuration: its run (None for a plain analysis), its
    analysis, and the time its first packet was sent (the worst events' time zero)."""

    configuration: int
    run_id: int | None
    analysis_id: int
    start_ts_ns: int | None


def save_comparison(
    store: Store,
    document: ComparisonDocument,
    selection: list[str],
    by: list[str],
    curves: Iterable[CurvePoint],
    cdf: Iterable[tuple[int, float, int]],
    members: Iterable[Member],
    label: str | None = None,
) -> int:
    """Store a comparison (its document gets its `comparison_id`), its curves, its CDF
    points ((configuration, fraction, value_ns)) and the worst events of its members'
    analyses, in one transaction; returns its id."""
    curves, cdf = list(curves), list(cdf)
    with store.transaction():
        cid = int(store.con.execute("SELECT nextval('comparison_id_seq')").fetchone()[0])
        document["comparison_id"] = cid
        store.con.execute(
            "INSERT INTO comparisons (comparison_id, lowtail_version, label, selection, by_axes, document, partial) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                cid,
                __version__,
                label,
                COMPARISON_SELECTION.encode(selection),
                COMPARISON_BY.encode(by),
                COMPARISON.encode(document),
                bool(document.get("partial")),
            ],
        )
        if curves:
            columns = list(
                zip(*((c.configuration, c.source, c.run_id, c.analysis_id, c.percentile, c.value_ns) for c in curves))
            )
            store.con.execute(
                "INSERT INTO comparison_curves SELECT ?, unnest(?::INTEGER[]), unnest(?::VARCHAR[]), "
                "unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::DOUBLE[]), unnest(?::BIGINT[])",
                [cid, *map(list, columns)],
            )
        if cdf:
            configs, fractions, values = map(list, zip(*cdf))
            store.con.execute(
                "INSERT INTO comparison_cdf SELECT ?, unnest(?::INTEGER[]), unnest(?::DOUBLE[]), unnest(?::BIGINT[])",
                [cid, configs, fractions, values],
            )
        for m in members:
            store.con.execute(
                "INSERT INTO comparison_worst SELECT ?, ?, ?, analysis_id, pre_ts_ns - ?, latency_ns "
                "FROM analysis_worst WHERE analysis_id = ? ORDER BY pre_ts_ns",
                [cid, m.configuration, m.run_id, m.start_ts_ns or 0, m.analysis_id],
            )
    return cid


def comparison(store: Store, comparison_id: int | str) -> StoredComparison:
    """One stored comparison (an id, or 'latest'): its row, `document` decoded."""
    if comparison_id == "latest":
        newest = newest_id(store, "comparisons", "comparison_id")
        if newest is None:
            raise UserError(f"{store.path}: holds no comparisons yet (run `lowtail compare`)")
        comparison_id = newest
    try:
        cid = int(comparison_id)
    except ValueError:
        raise UserError(f"{comparison_id!r} is not a comparison id (a number, or 'latest')") from None
    found = row_as_dict(store.con.execute("SELECT * FROM comparisons WHERE comparison_id = ?", [cid]))
    if found is None:
        raise UserError(f"{store.path}: no comparison with id {cid}")
    where = f"comparison {cid}"
    found["selection"] = COMPARISON_SELECTION.decode(store, found["selection"], where)
    found["by_axes"] = COMPARISON_BY.decode(store, found["by_axes"], where)
    found["document"] = COMPARISON.decode(store, found["document"], where)
    return cast(StoredComparison, found)


def comparison_curves(store: Store, comparison_id: int) -> dict[int, ConfigurationCurves]:
    """Per configuration: `pooled` and `floor` as [(percentile, value_ns)], `repetitions`
    as {analysis_id: [(percentile, value_ns)]} and `band` as [(percentile, min, max)] over
    the repetitions, every list in percentile order."""
    out: dict[int, ConfigurationCurves] = {}
    rows = store.con.execute(
        "SELECT configuration, source, analysis_id, percentile, value_ns FROM comparison_curves "
        "WHERE comparison_id = ? ORDER BY configuration, source, analysis_id, percentile",
        [comparison_id],
    ).fetchall()
    for config, source, analysis_id, p, v in rows:
        entry = out.setdefault(config, ConfigurationCurves(pooled=[], floor=[], repetitions={}, band=[]))
        if source == REPETITION:
            entry["repetitions"].setdefault(analysis_id, []).append((p, v))
        else:
            (entry["pooled"] if source == POOLED else entry["floor"]).append((p, v))
    for config, lo, hi, p in store.con.execute(
        "SELECT configuration, min(value_ns), max(value_ns), percentile FROM comparison_curves "
        "WHERE comparison_id = ? AND source = ? GROUP BY configuration, percentile ORDER BY configuration, percentile",
        [comparison_id, REPETITION],
    ).fetchall():
        out[config]["band"].append((p, lo, hi))
    return out


def comparison_cdf(store: Store, comparison_id: int) -> dict[int, list[tuple[float, int]]]:
    """Per configuration: (fraction, value_ns) of its pooled packets, in fraction order."""
    out: dict[int, list[tuple[float, int]]] = {}
    for config, fraction, value in store.con.execute(
        "SELECT configuration, fraction, value_ns FROM comparison_cdf WHERE comparison_id = ? "
        "ORDER BY configuration, fraction",
        [comparison_id],
    ).fetchall():
        out.setdefault(config, []).append((fraction, value))
    return out


def comparison_worst(store: Store, comparison_id: int) -> dict[int, list[WorstEventRow]]:
    """Per configuration: its repetitions' worst events (run_id, analysis_id, t_ns since the
    repetition's first packet, latency_ns), in time order within each repetition."""
    out: dict[int, list[WorstEventRow]] = {}
    for config, run_id, analysis_id, t_ns, latency_ns in store.con.execute(
        "SELECT configuration, run_id, analysis_id, t_ns, latency_ns FROM comparison_worst "
        "WHERE comparison_id = ? ORDER BY configuration, analysis_id, t_ns",
        [comparison_id],
    ).fetchall():
        out.setdefault(config, []).append(
            WorstEventRow(run_id=run_id, analysis_id=analysis_id, t_ns=t_ns, latency_ns=latency_ns)
        )
    return out


def list_comparisons(store: Store, limit: int = 50) -> list[ComparisonListed]:
    """The newest comparisons: id, when, label, selection, axes, configurations, partial."""
    return [
        ComparisonListed(
            comparison_id=comparison_id,
            created_at=created_at,
            label=label,
            selection=COMPARISON_SELECTION.decode(store, selection, f"comparison {comparison_id}"),
            by_axes=COMPARISON_BY.decode(store, by_axes, f"comparison {comparison_id}"),
            configurations=configurations,
            partial=partial,
        )
        for comparison_id, created_at, label, selection, by_axes, configurations, partial in store.con.execute(
            """SELECT comparison_id, created_at, label, selection, by_axes,
                      json_array_length(document, '$.configurations') AS configurations, partial
               FROM comparisons ORDER BY comparison_id DESC LIMIT ?""",
            [limit],
        ).fetchall()
    ]
