"""Analyses in the database (tables of schema/001_analyses.sql): the headline figures as
columns of `analyses`, the bulky results (percentile rows, histogram bins, worst events,
per-second rates) in narrow tables keyed by `analysis_id`; the latencies' summary, what
pooling and intervals read instead of the series, in `analysis_summaries` (016_summaries.sql);
each flow's packets and figures in `analysis_flows` (022_flows.sql)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lowtail.analyze.document import (
    NOT_FIGURES,
    AnalysisDocument,
    AnalysisFigures,
    AnalysisInputs,
    AnalysisInputsRow,
    AnalysisListRow,
    AnalyzeOptionsDocument,
    StoredAnalysis,
    StoredCaptureSide,
)
from lowtail.core.series import SUMMARY_FORMAT
from lowtail.core.version import __version__
from lowtail.store.codec import ANALYSIS_FIGURES, ANALYSIS_INPUTS, ANALYSIS_OPTIONS, ANALYSIS_WARNINGS
from lowtail.store.db import (
    LATENCY_FIGURES,
    Store,
    latency_column,
    latency_columns,
    latency_columns_of,
    latency_figures_of,
    row_as_dict,
    rows_as_dicts,
    stored_id,
)

if TYPE_CHECKING:
    from lowtail.analyze.document import AnalysisDocument, AnalyzeOptionsDocument, FlowDocument, FlowsDocument
    from lowtail.experiment.document import RunRow


HISTOGRAM_KINDS = ("latency", "jitter_pre", "jitter_post")
SIDES = ("pre", "post")


# What makes two stored analyses the same one: the captures (paths, and per side format,
# size and frames), the options, the label, where the series went, and every figure but how
# long the analysis took.
_IDENTITY = ("pre_path", "post_path", "label", "series_path")
_NOT_A_FIGURE = ("elapsed_s",)


def identical_analysis(
    store: Store, a: AnalysisDocument, options: AnalyzeOptionsDocument, label: str | None = None
) -> int | None:
    """The id of a stored analysis this one would repeat exactly (the same captures read the
    same way, the same figures), or None: `lowtail analyze` run twice stores it once."""
    row = _row(a, options, label)
    candidates = store.con.execute(
        f"SELECT analysis_id, options, inputs, figures FROM analyses WHERE "
        f"{' AND '.join(f'{c} IS NOT DISTINCT FROM ?' for c in _IDENTITY)} ORDER BY analysis_id",
        [row[c] for c in _IDENTITY],
    ).fetchall()

    def figures(text: object, analysis_id: object = None) -> dict[str, object]:
        stored = ANALYSIS_FIGURES.decode(store, text, f"analysis {analysis_id}" if analysis_id else None)
        return {k: v for k, v in stored.items() if k not in _NOT_A_FIGURE}

    mine = (ANALYSIS_OPTIONS.decode(store, row["options"]), ANALYSIS_INPUTS.decode(store, row["inputs"]))
    for analysis_id, stored_options, inputs, stored_figures in candidates:
        where = f"analysis {analysis_id}"
        if (
            ANALYSIS_OPTIONS.decode(store, stored_options, where),
            ANALYSIS_INPUTS.decode(store, inputs, where),
        ) == mine:
            if figures(stored_figures, analysis_id) == figures(row["figures"]):
                return int(analysis_id)
    return None


def save_analysis(store: Store, a: AnalysisDocument, options: AnalyzeOptionsDocument, label: str | None = None) -> int:
    """Store one analysis document (as `lowtail analyze --json` prints it)."""
    row = _row(a, options, label)
    with store.transaction():
        (analysis_id,) = store.con.execute(
            f"INSERT INTO analyses ({', '.join(row)}) VALUES ({', '.join('?' * len(row))}) RETURNING analysis_id",
            list(row.values()),
        ).fetchone()
        _save_bulk(store, analysis_id, a)
        summary = a.get("summary")
        if summary is not None:
            store.con.execute(
                "INSERT INTO analysis_summaries VALUES (?, ?, ?)",
                [analysis_id, SUMMARY_FORMAT, summary.to_bytes()],
            )
    return int(analysis_id)


def _row(a: AnalysisDocument, options: AnalyzeOptionsDocument, label: str | None) -> dict[str, object]:
    """The `analyses` row of an analysis document: column -> the value DuckDB is given for it."""
    lat = a.get("latency_ns") or {}
    sides = {"pre": a["pre"], "post": a["post"]}
    inputs = AnalysisInputs(
        pre=cast(StoredCaptureSide, {k: v for k, v in sides["pre"].items() if k != "per_second"}),
        post=cast(StoredCaptureSide, {k: v for k, v in sides["post"].items() if k != "per_second"}),
    )
    figures = cast(AnalysisFigures, {k: v for k, v in a.items() if k not in NOT_FIGURES})
    row: dict[str, object] = {
        "lowtail_version": __version__,
        "label": label,
        "pre_path": str(Path(a["pre"]["path"]).resolve()),
        "post_path": str(Path(a["post"]["path"]).resolve()),
        "options": ANALYSIS_OPTIONS.encode(options),
        "sent": a["sent"],
        "received": a["received"],
        "lost": a["lost"],
        "duplicates": a["duplicates"],
        "reordered": a["reordered"],
        "foreign_frames": a["foreign"],
        "negative": a["negative"],
        "unmatched": a["unmatched"],
        "trim_ns": a["trim_ns"],
        "start_ts_ns": a.get("start_ts_ns"),
        "duration_ns": a["duration_ns"],
        **latency_columns_of(lat),
        "partial": a["partial"],
        "warnings": ANALYSIS_WARNINGS.encode(a["warnings"]),
        "series_path": a.get("export_path"),
        "hgrm": a["hgrm"],
        "inputs": ANALYSIS_INPUTS.encode(inputs),
        "figures": ANALYSIS_FIGURES.encode(figures),
    }
    return row


def _column(values: list[Any]) -> str:
    """One column of a bulk insert, as the JSON array `_unnest` reads: DuckDB parses 5,000
    worst events from JSON in a third of the time it takes to take them as Python lists (a
    list parameter is converted element by element)."""
    return json.dumps(values)


def _unnest(sql_type: str) -> str:
    """The rows of a column passed by `_column`, as `sql_type`."""
    return f"unnest(from_json(?, '[\"{sql_type}\"]'))"


def _save_bulk(store: Store, analysis_id: int, a: AnalysisDocument) -> None:
    rows = a["percentiles"]
    store.con.execute(
        f"INSERT INTO analysis_percentiles SELECT ?, {_unnest('DOUBLE')}, {_unnest('BIGINT')}, {_unnest('BIGINT')}",
        [
            analysis_id,
            _column([r["percentile"] for r in rows]),
            _column([r["value_ns"] for r in rows]),
            _column([r["total_count"] for r in rows]),
        ],
    )
    histograms = {
        "latency": a["latency_histogram"],
        "jitter_pre": a["jitter_pre_histogram"],
        "jitter_post": a["jitter_post_histogram"],
    }
    # Every histogram in one statement, as every side's rates below: a statement costs DuckDB
    # about 2 ms whatever its rows, a tenth of storing an analysis.
    bins = [(kind, b) for kind, kind_bins in histograms.items() for b in kind_bins]
    store.con.execute(
        f"INSERT INTO analysis_histograms SELECT ?, {_unnest('VARCHAR')}, "
        f"{_unnest('BIGINT')}, {_unnest('BIGINT')}, {_unnest('BIGINT')}",
        [
            analysis_id,
            _column([kind for kind, _ in bins]),
            _column([b["lo_ns"] for _, b in bins]),
            _column([b["hi_ns"] for _, b in bins]),
            _column([b["count"] for _, b in bins]),
        ],
    )
    worst = a["worst"]
    store.con.execute(
        f"INSERT INTO analysis_worst SELECT ?, {_unnest('BIGINT')}, {_unnest('BIGINT')}, {_unnest('UBIGINT')}",
        [
            analysis_id,
            _column([w["pre_ts_ns"] for w in worst]),
            _column([w["latency_ns"] for w in worst]),
            _column([w["id"] for w in worst]),
        ],
    )
    sides = [("pre", a["pre"]["per_second"]), ("post", a["post"]["per_second"])]
    store.con.execute(
        f"INSERT INTO analysis_rates SELECT ?, {_unnest('VARCHAR')}, {_unnest('BIGINT')}, {_unnest('BIGINT')}",
        [
            analysis_id,
            _column([side for side, counts in sides for _ in counts]),
            _column([second for _, counts in sides for second in range(len(counts))]),
            _column([n for _, counts in sides for n in counts]),
        ],
    )
    flows = a.get("flows")
    if flows:
        _save_flows(store, analysis_id, flows)


# The columns of `analysis_flows` after its key, in the order `_save_flows` fills them.
_FLOW_COUNTS = ("sent", "received", "lost", "negative")


def _save_flows(store: Store, analysis_id: int, flows: FlowsDocument) -> None:
    """Each flow as a row of `analysis_flows`, the key in `analysis_flow_keys`."""
    store.con.execute(
        "INSERT INTO analysis_flow_keys VALUES (?, ?, ?)", [analysis_id, flows["key"], flows["overflowed"]]
    )
    rows = flows["flows"]
    if not rows:
        return
    figures = [f["latency_ns"] or {} for f in rows]
    types = {"mean": "DOUBLE", "stddev": "DOUBLE"}
    columns = [
        _column([f["flow"] for f in rows]),
        _column([f["key"] for f in rows]),
        *(_column([f[c] for f in rows]) for c in _FLOW_COUNTS),  # type: ignore[literal-required]
        _column([int(lat.get("samples") or 0) for lat in figures]),
        *(_column([lat.get(k) for lat in figures]) for k in LATENCY_FIGURES),
    ]
    kinds = ["INTEGER", "VARCHAR", *("BIGINT" for _ in _FLOW_COUNTS), "BIGINT"]
    kinds += [types.get(k, "BIGINT") for k in LATENCY_FIGURES]
    store.con.execute(
        f"INSERT INTO analysis_flows SELECT ?, {', '.join(_unnest(k) for k in kinds)}",
        [analysis_id, *columns],
    )


def every_flow(store: Store) -> list[dict[str, Any]]:
    """Every stored analysis's flows in one list (the Python API's `flows()`): per flow its
    analysis, the run that analysis is of (None for a plain analysis), what told the flows
    apart, its label, counts and latency columns (`lat_<figure>_ns`), in analysis and flow
    order."""
    return rows_as_dicts(
        store.con.execute(
            f"""SELECT f.analysis_id, r.run_id, k.flow_key, f.flow, f.flow_label,
                       {", ".join(f"f.{c}" for c in _FLOW_COUNTS)}, f.samples, {latency_columns("f")}
                FROM analysis_flows f JOIN analysis_flow_keys k USING (analysis_id)
                LEFT JOIN runs r ON r.analysis_id = f.analysis_id
                ORDER BY f.analysis_id, f.flow"""
        )
    )


def analysis_flows(store: Store, analysis_id: int) -> FlowsDocument | None:
    """An analysis's flows as its document had them (in flow order), or None for an
    analysis stored before flows were told apart."""
    key = store.con.execute(
        "SELECT flow_key, overflowed FROM analysis_flow_keys WHERE analysis_id = ?", [int(analysis_id)]
    ).fetchone()
    if key is None:
        return None
    rows = rows_as_dicts(
        store.con.execute(
            f"SELECT flow, flow_label, {', '.join(_FLOW_COUNTS)}, samples, {latency_columns()} "
            "FROM analysis_flows WHERE analysis_id = ? ORDER BY flow",
            [int(analysis_id)],
        )
    )
    flows: list[FlowDocument] = []
    for row in rows:
        latency = {**latency_figures_of(row), "samples": row["samples"]} if row["samples"] else None
        flows.append(
            {
                "flow": int(row["flow"]),
                "key": row["flow_label"],
                "sent": int(row["sent"]),
                "received": int(row["received"]),
                "lost": int(row["lost"]),
                "negative": int(row["negative"]),
                "latency_ns": latency,
            }
        )
    return {"key": key[0], "overflowed": bool(key[1]), "flows": flows}


def summary_bytes(store: Store, analysis_ids: list[int]) -> dict[int, bytes]:
    """The stored summaries of these analyses (those that have one), as bytes."""
    if not analysis_ids:
        return {}
    rows = store.con.execute(
        "SELECT analysis_id, summary FROM analysis_summaries WHERE list_contains(?::BIGINT[], analysis_id)",
        [list(map(int, analysis_ids))],
    ).fetchall()
    return {aid: bytes(blob) for aid, blob in rows}


def latency_summary(store: Store, analysis_id: int) -> tuple[int | None, int | None, int | None]:
    """(latencies, least, greatest) of an analysis: what its exported series must hold."""
    found = store.con.execute(
        "SELECT CAST(json_extract(figures, '$.latency_ns.samples') AS BIGINT), lat_min_ns, lat_max_ns "
        "FROM analyses WHERE analysis_id = ?",
        [int(analysis_id)],
    ).fetchone()
    return found if found is not None else (None, None, None)


# The most rows of one analysis's HDR distribution and worst events a page reads: a page draws
# them as points, and a bundle may carry a million worst events per analysis.
PAGE_ROWS = 10_000


def analysis(store: Store, analysis_id: int | str, most: int | None = None) -> StoredAnalysis:
    """One stored analysis (an id, or 'latest'): its row plus the bulky tables, as plain
    Python values; `most` bounds the HDR rows and worst events read (see `percentile_rows`,
    `worst_events`)."""
    aid = stored_id(store, analysis_id, "analyses", "analysis_id", "analyses", "see `lowtail list`")
    doc = row_as_dict(store.con.execute("SELECT * FROM analyses WHERE analysis_id = ?", [aid]))
    assert doc is not None
    where = f"analysis {aid}"
    doc["options"] = ANALYSIS_OPTIONS.decode(store, doc["options"], where)
    doc["warnings"] = ANALYSIS_WARNINGS.decode(store, doc["warnings"], where)
    doc["inputs"] = ANALYSIS_INPUTS.decode(store, doc["inputs"], where)
    doc["figures"] = ANALYSIS_FIGURES.decode(store, doc["figures"], where)
    doc["percentiles"] = percentile_rows(store, aid, most)
    doc["histograms"] = {
        kind: store.con.execute(
            "SELECT lo_ns, hi_ns, count FROM analysis_histograms WHERE analysis_id = ? AND kind = ? ORDER BY lo_ns",
            [aid, kind],
        ).fetchall()
        for kind in HISTOGRAM_KINDS
    }
    doc["worst"] = worst_events(store, aid, most)
    doc["flows"] = analysis_flows(store, aid)
    doc["rates"] = {
        side: [
            c
            for (c,) in store.con.execute(
                "SELECT packets FROM analysis_rates WHERE analysis_id = ? AND side = ? ORDER BY second", [aid, side]
            ).fetchall()
        ]
        for side in SIDES
    }
    return cast(StoredAnalysis, doc)


def percentile_rows(store: Store, analysis_id: int, most: int | None = None) -> list[tuple[float, int, int]]:
    """(percentile in 0..1, value_ns, total_count) of an analysis's HDR distribution; with
    `most`, at most about that many rows, evenly thinned, the first and last always kept."""
    if most is None:
        return store.con.execute(
            "SELECT percentile, value_ns, total_count FROM analysis_percentiles "
            "WHERE analysis_id = ? ORDER BY percentile, value_ns",
            [analysis_id],
        ).fetchall()
    return store.con.execute(
        """SELECT percentile, value_ns, total_count FROM (
               SELECT *, row_number() OVER (ORDER BY percentile, value_ns) AS k, count(*) OVER () AS n
               FROM analysis_percentiles WHERE analysis_id = ?)
           WHERE n <= ? OR k = 1 OR k = n OR k % ceil(n / ?) = 0
           ORDER BY percentile, value_ns""",
        [analysis_id, most, most],
    ).fetchall()


def percentile_curve(store: Store, analysis_id: int | None, most: int | None = PAGE_ROWS) -> list[tuple[float, int]]:
    """(percentile in 0..1, value_ns) of an analysis's HDR distribution (at most about `most`
    points); empty without one."""
    if analysis_id is None:
        return []
    return [(p, v) for p, v, _ in percentile_rows(store, analysis_id, most)]


def worst_events(store: Store, analysis_id: int, most: int | None = None) -> list[tuple[int, int, int]]:
    """(pre_ts_ns, latency_ns, packet_id) of an analysis's worst events, in time order; with
    `most`, only the `most` largest latencies."""
    return store.con.execute(
        "SELECT pre_ts_ns, latency_ns, packet_id FROM (SELECT * FROM analysis_worst WHERE analysis_id = ? "
        "ORDER BY latency_ns DESC, pre_ts_ns LIMIT ?) ORDER BY pre_ts_ns",
        [analysis_id, most if most is not None else 2**62],
    ).fetchall()


def list_analyses(store: Store, limit: int = 50) -> list[AnalysisListRow]:
    """The newest analyses with the figures `lowtail list` shows."""
    return [
        AnalysisListRow(
            analysis_id=aid,
            created_at=created_at,
            label=label,
            sent=sent,
            received=received,
            lost=lost,
            lat_p50_ns=p50,
            lat_p99_999_ns=p99_999,
            lat_max_ns=most,
            partial=partial,
            pre_path=pre_path,
        )
        for aid, created_at, label, sent, received, lost, p50, p99_999, most, partial, pre_path in store.con.execute(
            """SELECT analysis_id, created_at, label, sent, received, lost, lat_p50_ns, lat_p99_999_ns, lat_max_ns,
                      partial, pre_path FROM analyses ORDER BY analysis_id DESC LIMIT ?""",
            [limit],
        ).fetchall()
    ]


def analysis_inputs(store: Store, analysis_ids: list[int]) -> list[AnalysisInputsRow]:
    """What identifies these analyses' data: their captures as read (`inputs`, per side:
    path, format, bytes, frames), when and by which lowtail they were analysed."""
    if not analysis_ids:
        return []
    rows = rows_as_dicts(
        store.con.execute(
            """SELECT analysis_id, created_at, lowtail_version, inputs FROM analyses
               WHERE list_contains(?::BIGINT[], analysis_id) ORDER BY analysis_id""",
            [list(map(int, analysis_ids))],
        )
    )
    for row in rows:
        row["inputs"] = ANALYSIS_INPUTS.decode(store, row["inputs"], f"analysis {row['analysis_id']}")
    return cast(list[AnalysisInputsRow], rows)


def standalone_analyses(store: Store, analysis_ids: list[int]) -> list[RunRow]:
    """Those of these analyses that belong to no run (`lowtail analyze`), with the columns
    a run row has of its analysis (figures and warnings decoded)."""
    if not analysis_ids:
        return []
    rows = rows_as_dicts(
        store.con.execute(
            f"""SELECT a.analysis_id, a.label, a.created_at, a.sent, a.received, a.lost, a.duplicates, a.reordered,
                       {", ".join(latency_column(k) for k in LATENCY_FIGURES)}, a.partial, a.warnings, a.figures,
                       a.start_ts_ns, a.duration_ns, a.series_path
                FROM analyses a
                WHERE list_contains(?::BIGINT[], a.analysis_id)
                  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.analysis_id = a.analysis_id)
                ORDER BY a.analysis_id""",
            [list(map(int, analysis_ids))],
        )
    )
    for row in rows:
        where = f"analysis {row['analysis_id']}"
        row["warnings"] = ANALYSIS_WARNINGS.decode(store, row["warnings"], where)
        row["figures"] = ANALYSIS_FIGURES.decode(store, row["figures"], where)
    return cast("list[RunRow]", rows)
