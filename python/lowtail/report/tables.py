"""Tables of model results as a header and rows of text: the terminal (`lowtail model ...`)
and the HTML reports show the same ones, built here once."""

from __future__ import annotations

from typing import Any

from lowtail import percentiles
from lowtail.units import format_ns, format_percent, format_rate

Table = tuple[list[str], list[list[str]]]

_KNEE_FIGURES = ("p50", "p99", "p99_999")


def knee_table(knee: dict[str, Any]) -> Table:
    """Per offered rate: loss, percentiles and whether the DuT was overloaded (and why)."""
    header = ["rate", "loss", *(percentiles.label(k) for k in _KNEE_FIGURES), "state"]
    rows = [
        [
            format_rate(r["rate_pps"]),
            format_percent(r["loss"]),
            *(format_ns(r[f"{k}_ns"]) for k in _KNEE_FIGURES),
            ("overloaded: " + "; ".join(r["reasons"])) if r["overloaded"] else "ok",
        ]
        for r in knee["rates"]
    ]
    return header, rows


def overload_table(doc: dict[str, Any]) -> Table:
    """The overload model's figures: both medians, t_CPU, d_Σ and R_max."""
    return (
        ["2·t_transfer", "t_e2e", "t_CPU", "d_Σ per s", "R_max"],
        [
            [
                format_ns(doc["t_transfer_ns"]),
                format_ns(doc["t_e2e_ns"]),
                format_ns(doc["t_cpu_ns"]),
                format_ns(doc["d_sum_ns_per_s"]),
                format_rate(doc["r_max_pps"]),
            ]
        ],
    )


def comparison_table(comparison: dict[str, Any]) -> Table:
    """A simulation against a measured run, percentile by percentile."""
    return (
        ["percentile", "measured", "predicted", "difference", "ratio"],
        [
            [
                r["percentile"],
                format_ns(r["measured_ns"]),
                format_ns(r["predicted_ns"]),
                format_ns(r["difference_ns"]),
                "–" if r["ratio"] is None else f"{r['ratio']:.3f}",
            ]
            for r in comparison["rows"]
        ],
    )
