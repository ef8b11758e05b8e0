"""Open the database, create what is missing, store and load analyses."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from lowtail import __version__
from lowtail.errors import UserError

DEFAULT_DB = "lowtail.duckdb"

_BULKY = ("percentiles", "latency_histogram", "jitter_pre_histogram", "jitter_post_histogram", "worst", "hgrm")


def _schema_statements() -> list[str]:
    """Every schema file in order; each is idempotent (CREATE ... IF NOT EXISTS)."""
    folder = resources.files("lowtail.store").joinpath("schema")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [f.read_text() for f in files]


class Store:
    """A results database. Writes happen in one transaction each: a failure leaves what
    was stored before untouched."""

    def __init__(self, path: str | Path, read_only: bool = False):
        self.path = Path(path)
        self._tx_depth = 0
        if read_only and not self.path.exists():
            raise UserError(f"{self.path}: no such database (run an analysis first, or pass --db)")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as e:
            raise UserError(f"{self.path}: cannot open the database: {str(e).splitlines()[0]}") from None
        except duckdb.Error as e:
            raise UserError(f"{self.path}: not a lowtail database ({str(e).splitlines()[0]})") from None
        if not read_only:
            for sql in _schema_statements():
                self.con.execute(sql)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self) -> _Transaction:
        """A transaction; nested ones join the outermost (one commit for the whole write)."""
        return _Transaction(self)

    # -- analyses ---------------------------------------------------------------

    def save_analysis(self, a: dict[str, Any], options: dict[str, Any], label: str | None = None) -> int:
        """Store one analysis document (as `lowtail analyze --json` prints it)."""
        lat = a.get("latency_ns") or {}
        inputs = {side: {k: v for k, v in a[side].items() if k != "per_second"} for side in ("pre", "post")}
        figures = {k: v for k, v in a.items() if k not in _BULKY and k not in ("pre", "post")}
        with self.transaction():
            (analysis_id,) = self.con.execute(
                """INSERT INTO analyses (lowtail_version, label, pre_path, post_path, options, sent, received,
                       lost, duplicates, reordered, foreign_frames, negative, unmatched, trim_ns, start_ts_ns,
                       duration_ns, lat_min_ns, lat_mean_ns, lat_stddev_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns,
                       lat_p99_9_ns, lat_p99_99_ns, lat_p99_999_ns, lat_p99_9999_ns, lat_max_ns, partial,
                       warnings, series_path, hgrm, inputs, figures)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   RETURNING analysis_id""",
                [
                    __version__,
                    label,
                    str(Path(a["pre"]["path"]).resolve()),
                    str(Path(a["post"]["path"]).resolve()),
                    json.dumps(options),
                    a["sent"],
                    a["received"],
                    a["lost"],
                    a["duplicates"],
                    a["reordered"],
                    a["foreign"],
                    a["negative"],
                    a["unmatched"],
                    a["trim_ns"],
                    a.get("start_ts_ns"),
                    a["duration_ns"],
                    lat.get("min"),
                    lat.get("mean"),
                    lat.get("stddev"),
                    lat.get("p50"),
                    lat.get("p90"),
                    lat.get("p99"),
                    lat.get("p99_9"),
                    lat.get("p99_99"),
                    lat.get("p99_999"),
                    lat.get("p99_9999"),
                    lat.get("max"),
                    a["partial"],
                    json.dumps(a["warnings"]),
                    a.get("export_path"),
                    a["hgrm"],
                    json.dumps(inputs),
                    json.dumps(figures),
                ],
            ).fetchone()
            self._save_bulk(analysis_id, a)
        return analysis_id

    def _save_bulk(self, analysis_id: int, a: dict[str, Any]) -> None:
        rows = a["percentiles"]
        self.con.execute(
            "INSERT INTO analysis_percentiles SELECT ?, unnest(?::DOUBLE[]), unnest(?::BIGINT[]), unnest(?::BIGINT[])",
            [
                analysis_id,
                [r["percentile"] for r in rows],
                [r["value_ns"] for r in rows],
                [r["total_count"] for r in rows],
            ],
        )
        for kind in ("latency", "jitter_pre", "jitter_post"):
            bins = a[f"{kind}_histogram"]
            self.con.execute(
                "INSERT INTO analysis_histograms SELECT ?, ?, unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::BIGINT[])",
                [analysis_id, kind, [b["lo_ns"] for b in bins], [b["hi_ns"] for b in bins], [b["count"] for b in bins]],
            )
        worst = a["worst"]
        self.con.execute(
            "INSERT INTO analysis_worst SELECT ?, unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::UBIGINT[])",
            [analysis_id, [w["pre_ts_ns"] for w in worst], [w["latency_ns"] for w in worst], [w["id"] for w in worst]],
        )
        for side in ("pre", "post"):
            counts = a[side]["per_second"]
            self.con.execute(
                "INSERT INTO analysis_rates SELECT ?, ?, unnest(range(?)), unnest(?::BIGINT[])",
                [analysis_id, side, len(counts), counts],
            )

    def analysis(self, analysis_id: int | str) -> dict[str, Any]:
        """One stored analysis: its row plus the bulky tables, as plain Python values."""
        if analysis_id == "latest":
            row = self.con.execute("SELECT max(analysis_id) FROM analyses").fetchone()
            if row is None or row[0] is None:
                raise UserError(f"{self.path}: holds no analyses yet")
            analysis_id = row[0]
        cur = self.con.execute("SELECT * FROM analyses WHERE analysis_id = ?", [int(analysis_id)])
        row = cur.fetchone()
        if row is None:
            raise UserError(f"{self.path}: no analysis with id {analysis_id} (see `lowtail list`)")
        doc = dict(zip([d[0] for d in cur.description], row))
        for key in ("options", "warnings", "inputs", "figures"):
            doc[key] = json.loads(doc[key])
        aid = doc["analysis_id"]
        q = self.con.execute
        doc["percentiles"] = q(
            "SELECT percentile, value_ns, total_count FROM analysis_percentiles "
            "WHERE analysis_id = ? ORDER BY percentile, value_ns",
            [aid],
        ).fetchall()
        doc["histograms"] = {}
        for kind in ("latency", "jitter_pre", "jitter_post"):
            doc["histograms"][kind] = q(
                "SELECT lo_ns, hi_ns, count FROM analysis_histograms WHERE analysis_id = ? AND kind = ? ORDER BY lo_ns",
                [aid, kind],
            ).fetchall()
        doc["worst"] = q(
            "SELECT pre_ts_ns, latency_ns, packet_id FROM analysis_worst WHERE analysis_id = ? ORDER BY pre_ts_ns",
            [aid],
        ).fetchall()
        doc["rates"] = {
            side: [
                c
                for (c,) in q(
                    "SELECT packets FROM analysis_rates WHERE analysis_id = ? AND side = ? ORDER BY second", [aid, side]
                ).fetchall()
            ]
            for side in ("pre", "post")
        }
        return doc

    def list_analyses(self, limit: int = 50) -> list[dict[str, Any]]:
        cur = self.con.execute(
            """SELECT analysis_id, created_at, label, sent, received, lost, lat_p50_ns, lat_p99_999_ns, lat_max_ns,
                      partial, pre_path FROM analyses ORDER BY analysis_id DESC LIMIT ?""",
            [limit],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


class _Transaction:
    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> None:
        if self.store._tx_depth == 0:
            self.store.con.execute("BEGIN TRANSACTION")
        self.store._tx_depth += 1

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.store._tx_depth -= 1
        if self.store._tx_depth == 0:
            self.store.con.execute("ROLLBACK" if exc_type else "COMMIT")


def open_store(path: str | Path | None, read_only: bool = False) -> Store:
    return Store(path or DEFAULT_DB, read_only=read_only)
