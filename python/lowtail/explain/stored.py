"""The stored explanation answers when it can: a run is explained once (when it is stored, or
the first time it is asked for) and `lowtail explain RUN` then reads the answer from the store
— without loading what works an explanation out (numpy, pyarrow: half a second) unless it
must. A stored explanation answers when it is of this version of the method (`asked.VERSION`)
and of the tail asked for (the run's own, or an `--above` that names the same rule)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from lowtail.explain.asked import VERSION, rule_of
from lowtail.store.explain import explanation

if TYPE_CHECKING:
    from lowtail.explain.document import ExplainDocument
    from lowtail.store.db import Store


def stored_or_explained(store: Store, run_id: int, above: int | Fraction | None = None) -> ExplainDocument:
    """A run's explanation: the stored one when it answers the question, else worked out now
    (and stored when it is of the run's own tail)."""
    stored = explanation(store, run_id)
    if stored is not None and stored.get("version") == VERSION:
        if above is None or stored["tail"]["rule"] == rule_of(above):
            return stored
    store.release()  # loading what computes takes half a second: the database is free meanwhile
    from lowtail.explain.run import explain_run

    return explain_run(store, run_id, above)
