"""The store's own errors (a module of their own: `store.db` raises them and `lowtail.store`
exports them, without an import cycle between the two)."""

from __future__ import annotations

from lowtail.core.errors import Failure


class DatabaseBusy(Failure):
    """Another process held the database for longer than a command waits for it."""


class DamagedDatabase(Failure):
    """The database file is damaged: lowtail does not write into it. The store's state, not
    the user's mistake: exit 1, whichever command finds it."""
