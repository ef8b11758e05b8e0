"""Reports people read: plots and tables built only from the results database."""

from lowtail.report.analysis import write_analysis_report

__all__ = ["write_analysis_report"]
