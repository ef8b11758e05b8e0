"""What `lowtail import` reports of a bundle it imported (`lowtail import --json`).

JSON by nature, typed as `TypedDict`s: no cost at run time, one definition for every reader."""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict


class ImportOrigin(TypedDict):
    """Where an imported bundle came from, as each of its experiments records it."""

    host: str
    database: str
    bundle_id: str
    lowtail_version: str  # the lowtail that exported it
    exported_at: str


class ImportResult(TypedDict):
    """An import: whether the bundle's rows were here already (imported before, or every row
    brought by another bundle or measured here: `import_id` None), and the ids of its rows here."""

    already: bool
    bundle_id: str
    data_dir: NotRequired[str]  # where its series went (a new import)
    origin: NotRequired[ImportOrigin]  # a new import
    import_id: int | None
    imported_at: NotRequired[datetime]  # an import made before
    experiments: list[int]
    runs: list[int]
    analyses: list[int]
    models: list[int]
