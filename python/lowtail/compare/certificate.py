"""The qualification record (`lowtail certify`): what a customer signs — per configuration
of the selected runs, the DuT and its configuration, the host it ran on, the packets, the
budget, the judged percentile with its interval, the verdict with its confidence, the
floor, the loss, whether runs were degraded or emulated — with the lowtail version and the
identity of the data (each analysis's captures: path, size, frames, when analysed).

The verdict is the comparison's (`compare.comparison`: the one rule of `verdict.py` on the
configuration's pooled packets), so a record never says other than `lowtail compare`,
`lowtail run` and the pages; the comparison it rests on is stored, and the record names it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lowtail import __version__
from lowtail.compare.comparison import CompareOptions, Progress, compare_and_store
from lowtail.documents import CertificateDocument, CertifiedConfiguration, ConfigurationDocument
from lowtail.store import analyses as analysisstore
from lowtail.store import runs as runstore
from lowtail.store.db import Store
from lowtail.verdict import Verdict


def certify_and_store(
    store: Store, words: list[str], opts: CompareOptions, on_progress: Progress | None = None
) -> CertificateDocument:
    """The record of the runs `words` select, on their comparison (computed and stored)."""
    comparison = compare_and_store(store, words, opts, on_progress)
    experiments = sorted({e for c in comparison["configurations"] for e in c["experiments"]})
    hosts = {eid: runstore.experiment(store, eid).get("host") or {} for eid in experiments}
    inputs = {
        row["analysis_id"]: row
        for row in analysisstore.analysis_inputs(
            store, [a for c in comparison["configurations"] for a in c["analyses"]]
        )
    }
    budget = comparison["verdict"]
    common_key = budget["key"] if budget is not None else None
    return {
        "lowtail_version": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "selection": list(words),
        "comparison_id": comparison["comparison_id"],
        "level": comparison["level"],
        "configurations": [_configuration(c, hosts, inputs, common_key) for c in comparison["configurations"]],
        "notes": list(comparison["notes"]),
        "partial": comparison["partial"],
        "partial_reasons": list(comparison["partial_reasons"]),
    }


def _configuration(
    c: ConfigurationDocument,
    hosts: Mapping[int, Mapping[str, Any]],
    inputs: Mapping[int, Mapping[str, Any]],
    common_key: str | None,
) -> CertifiedConfiguration:
    verdict = c["verdict"]
    # An invalid configuration is judged on no percentile: the selection's budget names it.
    key = verdict["percentile"] or common_key or Verdict().key
    latency = c["latency_ns"] or {}
    floor = c["floor"] or {}
    return {
        "label": c["label"],
        "configuration": dict(c["key_text"]),
        "runs": list(c["runs"]),
        "analyses": list(c["analyses"]),
        "repetitions": c["repetitions"],
        "packets": int(latency.get("samples") or 0),
        "sent": c["sent"],
        "lost": c["lost"],
        "loss_ratio": c["loss_ratio"],
        "percentile": key,
        "value_ns": latency.get(key),
        "interval": (c["intervals"] or {}).get(key),
        "verdict": verdict,
        "floor_ns": (floor.get("latency_ns") or {}).get(key),
        "degraded": list(c["degraded"]),
        "emulated": c["emulated"],
        "invalid_runs": list(c["invalid_runs"]),
        "hosts": [dict(hosts[e]) for e in c["experiments"] if e in hosts],
        "data": [_identity(inputs[a]) for a in c["analyses"] if a in inputs],
    }


def _identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """One analysis's data as a reader can check it again: its captures (path, bytes, frames),
    when and by which lowtail it was analysed."""
    sides = row.get("inputs") or {}
    return {
        "analysis_id": row["analysis_id"],
        "analysed_at": str(row.get("created_at")),
        "lowtail_version": row.get("lowtail_version"),
        "captures": {
            side: {k: (sides.get(side) or {}).get(k) for k in ("path", "bytes", "frames", "format")}
            for side in ("pre", "post")
        },
    }
