"""Reports people read: plots and tables built only from the results database.

`write_analysis_report` is loaded when first asked for: the pages' plotting and database
modules take a third of a second to import, and the command line imports this package's
small helpers (`report.explain`'s words, `report.tables`) for commands that draw no page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowtail.report.analysis import write_analysis_report

__all__ = ["write_analysis_report"]


def __getattr__(name: str) -> Any:
    if name == "write_analysis_report":
        from lowtail.report.analysis import write_analysis_report

        return write_analysis_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
