"""What a database owns on disk: the data directory of each experiment (its runs' captures
and matched series), tied to the database by an identity stored in both.

Experiment ids start at 1 in every database, so a folder named by the id alone is shared
by every database of a directory. Each database therefore has an identity (a random id,
`database_identity`, 007_identity.sql); an experiment's folder carries its first eight hex
digits in its name (`experiment-3-5f2a9c1e`) and, in `lowtail-data.json`, the whole id,
the experiment's id and when it was created. Nothing is written into or deleted from a
folder whose identity file names another experiment (a copy of the database keeps its
identity: the creation time tells its experiments apart).

Series stored by older versions had no such folder: whether a series file is still the one
its analysis was made from is checked against the analysis (row count, least and greatest
latency, from the Parquet footer) before a model reads it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lowtail.errors import UserError
from lowtail.store.db import Store

IDENTITY_FILE = "lowtail-data.json"


def experiment_dir(store: Store, root: Path, experiment_id: int) -> Path:
    """Where a new experiment's runs go: `<root>/experiment-<id>-<database id prefix>`."""
    identity = store.database_id
    assert identity is not None, "a database opened for writing has its identity"
    return Path(root) / f"experiment-{experiment_id}-{identity[:8]}"


def _identity(store: Store, experiment: dict[str, Any]) -> dict[str, Any]:
    return {
        "database_id": store.database_id,
        "database": str(store.path.resolve()),
        "experiment_id": experiment["experiment_id"],
        "experiment_created_at": str(experiment["created_at"]),
    }


def read_identity(folder: Path) -> dict[str, Any] | None:
    """The identity file of an experiment's folder; None when there is none (or unreadable)."""
    try:
        found: dict[str, Any] = json.loads((Path(folder) / IDENTITY_FILE).read_text())
        return found
    except (OSError, ValueError):
        return None


def claim(store: Store, folder: Path, experiment: dict[str, Any], adopt: bool = False) -> None:
    """Make `folder` the experiment's own (create it with its identity file), or check that
    it already is. UserError when it belongs to another experiment or database, or holds
    files no identity vouches for (unless `adopt`: the caller checked them): they are left
    as they are."""
    folder = Path(folder)
    mine = _identity(store, experiment)
    found = read_identity(folder)
    if found is not None:
        if all(found.get(k) == mine[k] for k in ("database_id", "experiment_id", "experiment_created_at")):
            return
        raise UserError(
            f"{folder} belongs to experiment {found.get('experiment_id')} of another database "
            f"({found.get('database')}, created {found.get('experiment_created_at')}): lowtail neither writes "
            f"into nor deletes it; give this database another --data-dir"
        )
    if not adopt and folder.exists() and any(folder.iterdir()):
        raise UserError(
            f"{folder} already holds files that no lowtail database claims: lowtail neither writes into "
            f"nor deletes them; move them away or give another --data-dir"
        )
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{IDENTITY_FILE}.tmp"
    tmp.write_text(json.dumps(mine, indent=1) + "\n")
    os.replace(tmp, folder / IDENTITY_FILE)


def series_problem(
    store: Store, path: str | Path, samples: int | None, lat_min: int | None, lat_max: int | None
) -> str | None:
    """Why the series file at `path` is not the one an analysis of `samples` latencies from
    `lat_min` to `lat_max` exported, or None when it is: another database's folder, or
    figures that disagree (an older lowtail let one database's experiment rewrite another's)."""
    path = Path(path)
    for folder in list(path.parents)[:2]:
        found = read_identity(folder)
        if found is not None and found.get("database_id") != store.database_id:
            return f"its series {path} lies in a folder of another database ({found.get('database')})"
    try:
        rows, low, high = _latency_summary(path)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        return f"its series {path} cannot be read as Parquet ({str(e).splitlines()[0]})"
    if samples is None:
        return None
    # A footer without statistics cannot tell the latencies apart: the count still can.
    agree = rows == samples and (low is None or rows == 0 or (low, high) == (lat_min, lat_max))
    if not agree:
        return (
            f"its series {path} does not match its stored analysis ({rows:,} latencies from {low} to {high} ns "
            f"in the file, {samples:,} from {lat_min} to {lat_max} ns stored): it was rewritten, probably by "
            f"another database's experiment in the same data directory; refusing to model it"
        )
    return None


def _latency_summary(path: Path) -> tuple[int, int | None, int | None]:
    """Rows and least/greatest latency of a matched series, from its Parquet footer."""
    from lowtail.series import LATENCY, column_range

    return column_range(path, LATENCY)
