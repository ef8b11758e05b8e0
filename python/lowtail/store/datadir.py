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
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import msgspec

from lowtail.analyze.document import latency_of
from lowtail.core.errors import UserError
from lowtail.store import runs
from lowtail.store.db import Store

if TYPE_CHECKING:
    from lowtail.experiment.document import ExperimentFile, ExperimentRow, ExperimentStatus
    from lowtail.host.document import HostMetadata

IDENTITY_FILE = "lowtail-data.json"


def experiment_dir(store: Store, root: Path, experiment_id: int) -> Path:
    """Where a new experiment's runs go: `<root>/experiment-<id>-<database id prefix>`."""
    identity = store.database_id
    assert identity is not None, "a database opened for writing has its identity"
    return Path(root) / f"experiment-{experiment_id}-{identity[:8]}"


class FolderIdentity(TypedDict):
    """What an experiment's folder says of its owner (its identity file)."""

    database_id: str | None
    database: str
    experiment_id: int
    experiment_created_at: str


def _identity(store: Store, experiment: ExperimentRow) -> FolderIdentity:
    return FolderIdentity(
        database_id=store.database_id,
        database=str(store.path.resolve()),
        experiment_id=experiment["experiment_id"],
        experiment_created_at=str(experiment["created_at"]),
    )


def read_identity(folder: Path) -> dict[str, object] | None:
    """The identity file of an experiment's folder, as it is (another lowtail's may hold other
    keys: it is only compared); None when there is none (or unreadable)."""
    try:
        found = json.loads((Path(folder) / IDENTITY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def claim(store: Store, folder: Path, experiment: ExperimentRow, adopt: bool = False) -> None:
    """Make `folder` the experiment's own (create it with its identity file), or check that
    it already is. UserError when it belongs to another experiment or database, or holds
    files no identity vouches for (unless `adopt`: the caller checked them): they are left
    as they are."""
    folder = Path(folder)
    mine = _identity(store, experiment)
    found = read_identity(folder)
    if found is not None:
        owner = (found.get("database_id"), found.get("experiment_id"), found.get("experiment_created_at"))
        if owner == (mine["database_id"], mine["experiment_id"], mine["experiment_created_at"]):
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
    from lowtail.core.series import LATENCY, column_range

    return column_range(path, LATENCY)


@dataclass(frozen=True)
class ExperimentFolder:
    """The experiment a sweep writes into, and its folder (claimed)."""

    experiment_id: int
    folder: Path
    resumed: bool


def create_or_resume(
    store: Store,
    root: Path,
    name: str,
    spec: ExperimentFile,
    spec_hash: str,
    host: Callable[[], HostMetadata],
    fresh: bool = False,
    into: int | None = None,
) -> ExperimentFolder:
    """The experiment a sweep of this file writes into, with its folder under `root` claimed:
    the latest unfinished one of the same file (`spec_hash`) resumed unless `fresh` — its
    folder checked to be still its own, one an older lowtail wrote (no identity file) adopted
    only when every stored run's series still matches its analysis — else a new one (`host()`
    its metadata), created in the transaction that claims its folder, so that a folder that is
    not ours leaves no experiment behind. UserError names a folder that cannot be used.
    `into`: that experiment resumed (it must be of the same file), whatever `fresh` says."""
    if into is not None:
        into_row = runs.experiment(store, into)
        if into_row["spec_hash"] != spec_hash:
            raise UserError(f"experiment {into} was not measured from this experiment file: no runs of it are added")
        existing: ExperimentStatus | None = into_row
    else:
        existing = None if fresh else runs.resumable_experiment(store, spec_hash)
    if existing:
        eid = int(existing["experiment_id"])
        folder = Path(existing["data_dir"]) if existing["data_dir"] else experiment_dir(store, root, eid)
        _claim_resumed(store, folder, eid)
        runs.set_status(store, eid, "running")
        return ExperimentFolder(eid, folder, resumed=True)
    with store.transaction():
        eid = runs.create_experiment(store, name, spec, spec_hash, host(), "")
        folder = experiment_dir(store, root, eid)
        claim(store, folder, runs.experiment(store, eid))
        runs.set_data_dir(store, eid, str(folder.resolve()))
    return ExperimentFolder(eid, folder, resumed=False)


def _claim_resumed(store: Store, folder: Path, eid: int) -> None:
    """Check that a resumed experiment's folder is still its own. One written by an older
    lowtail has no identity file: it is adopted only when every stored run's series still
    matches its analysis (another database's experiment may have rewritten it)."""
    experiment = runs.experiment(store, eid)
    adopt = read_identity(folder) is None
    if adopt:
        for r in runs.runs(store, eid):
            if r["series_path"] and Path(r["series_path"]).exists():
                samples = latency_of(r.get("figures")).get("samples")
                count = None if samples is None else int(samples)
                problem = series_problem(store, r["series_path"], count, r["lat_min_ns"], r["lat_max_ns"])
                if problem:
                    raise UserError(f"cannot resume experiment {eid}: run {r['run_id']}: {problem}")
    claim(store, folder, experiment, adopt=adopt)


# -- imports in progress, and what killed ones left ------------------------------------------------

# A bundle is unpacked into a staging folder of the data directory, its series then moved into
# the import's folder; both carry their owner (pid and start time, the database) until the
# import is committed, so that the next import removes what a killed one left and never what
# a live one is writing.
IMPORT_STAGING_PREFIX = ".lowtail-import-"
IMPORT_FOLDER_PREFIX = "import-"
IMPORT_OWNER_FILE = ".lowtail-import-owner.json"


def import_folder(store: Store, root: Path, prefix: str) -> Path:
    """A new folder `<root>/<prefix>XXXX` owned by this process's import into `store`."""
    import tempfile

    from lowtail.core.processes import this_process

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    pid, start = this_process()
    owner = {"pid": pid, "start_time": start, "database_id": store.database_id, "database": str(store.path.resolve())}
    try:
        (folder / IMPORT_OWNER_FILE).write_text(json.dumps(owner) + "\n")
    except BaseException:  # a full disk: no folder without its owner is left behind
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def release_import_folder(folder: Path) -> None:
    """The import that made `folder` is committed: the folder is its database's now."""
    (Path(folder) / IMPORT_OWNER_FILE).unlink(missing_ok=True)


def clean_import_leftovers(store: Store, root: Path) -> list[Path]:
    """Remove the staging and import folders in `root` that imports into this database left
    when they were killed (their owner is dead and no import of the database names them);
    returns what was removed. Another database's leftovers are its own next import's to
    remove; a live import's folders are never touched."""

    from lowtail.core.processes import is_alive

    root = Path(root)
    if not root.is_dir():
        return []
    referenced = {str(Path(d).resolve()) for (d,) in store.con.execute("SELECT data_dir FROM imports").fetchall()}
    removed = []
    for folder in sorted([*root.glob(f"{IMPORT_STAGING_PREFIX}*"), *root.glob(f"{IMPORT_FOLDER_PREFIX}*")]):
        owner = _import_owner(folder)
        if owner is None and _stale_staging(folder):
            # A staging folder whose owner file was never written (a full disk as it was
            # made): nobody's to finish, and no database names it.
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            continue
        if owner is None or owner.get("database_id") != store.database_id:
            continue
        if is_alive(int(owner.get("pid", 0)), owner.get("start_time")):
            continue
        if str(folder.resolve()) in referenced:  # killed after its commit: the database's now
            release_import_folder(folder)
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


# How long a staging folder may be without its owner file before it counts as left behind
# (an import writes it right after making the folder).
_OWNERLESS_GRACE_S = 60.0


def _stale_staging(folder: Path) -> bool:
    import time

    if not folder.name.startswith(IMPORT_STAGING_PREFIX) or folder.is_symlink() or not folder.is_dir():
        return False
    try:
        return time.time() - folder.stat().st_mtime > _OWNERLESS_GRACE_S
    except OSError:
        return False


class _ImportOwner(TypedDict, total=False):
    """An import folder's owner file (`import_folder`): the process making it and its database."""

    pid: int
    start_time: int | None
    database_id: str
    database: str


def _import_owner(folder: Path) -> _ImportOwner | None:
    """The folder's owner as its file says; None without one, or with one not of its shape."""
    try:
        return msgspec.json.decode((folder / IMPORT_OWNER_FILE).read_bytes(), type=_ImportOwner)
    except (OSError, ValueError):  # msgspec's decode and validation errors are ValueErrors
        return None
