"""Interrupt recordings in the URLLC studies' shape, made here from known counts: a header of
`<IRQ>_<description>_CPU<n>` columns, then one row of cumulative counts per sample,
semicolon-separated, no timestamp column, a field left empty where a CPU has no such line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# The studies' column names for the kinds these tests use.
COLUMNS = {
    "LOC": "LOC_Local_timer_interrupts",
    "IWI": "IWI_IRQ_work_interrupts",
    "CAL": "CAL_Function_call_interrupts",
    "TLB": "TLB_TLB_shootdowns",
    "RES": "RES_Rescheduling_interrupts",
    "33:virtio0-input.0": "33_PCI-MSI_32769-edge_virtio0-input.0",
}


def study_file(
    increments: Mapping[tuple[str, int], Sequence[int]],
    start: Mapping[tuple[str, int], int] | None = None,
    missing: set[tuple[str, int]] = frozenset(),  # type: ignore[assignment]
    wrap_at: int | None = None,
) -> str:
    """The text of a recording: for each (kind, cpu) its increment in each sample period
    (the first row is the counter before them), starting from `start` (0 by default); the
    (kind, cpu) in `missing` have a column of empty fields (the CPU lacks that line); with
    `wrap_at` the counters are printed modulo it (a 32-bit counter wrapping)."""
    keys = sorted(set(increments) | set(missing))
    header = ";".join(f"{COLUMNS[k]}_CPU{cpu}" for k, cpu in keys)
    periods = max((len(v) for v in increments.values()), default=0)
    rows = []
    totals = {key: (start or {}).get(key, 0) for key in keys}
    for i in range(periods + 1):
        fields = []
        for key in keys:
            if key in missing:
                fields.append("")
                continue
            if i:
                totals[key] += increments[key][i - 1]
            value = totals[key] if wrap_at is None else totals[key] % wrap_at
            fields.append(str(value))
        rows.append(";".join(fields))
    return "\n".join([header, *rows]) + "\n"
