"""The qualification record (`lowtail certify`): what a customer signs — per configuration
of the selected runs, the device by name and kind with every option it was configured with
(a rule set with the hash of its rules, durations with their units), how it was contained
and on which cores, the kernel (and a VM's guest kernel); the traffic (rate, frame size,
burst, flows, measured time, repetitions); the host; the packets, the budget, the judged
percentile with its interval and the one-sided bounds exactly as the verdict used them; the
verdict with its confidence; the floor, the loss, degraded or emulated runs — with each
device's verdict over its configurations (verdict/device.py), the selection it was made
from, the lowtail version and the identity of the data (each analysis's captures: path,
size, frames, when analysed).

The verdict is the comparison's (`compare.comparison`: the one rule of `verdict/judge.py` on the
configuration's pooled packets), so a record never says other than `lowtail compare`,
`lowtail run` and the pages; the comparison it rests on is stored, and the record names it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from lowtail.compare.comparison import CompareOptions, Progress, compare, compare_and_store
from lowtail.compare.document import (
    AnalysisIdentity,
    CaptureIdentity,
    CertificateDocument,
    CertifiedBounds,
    CertifiedConfiguration,
    CertifiedDevice,
    CertifiedTraffic,
    ConfigurationDocument,
    RuleSetRecord,
)
from lowtail.core import percentiles
from lowtail.core.units import format_counted, format_ns, format_percent, format_rate
from lowtail.core.version import __version__
from lowtail.experiment.document import ExperimentHost, RunRow
from lowtail.store import analyses as analysisstore
from lowtail.store import runs as runstore
from lowtail.store.db import Store
from lowtail.store.records import show_value
from lowtail.verdict.device import Judged, device_verdicts
from lowtail.verdict.document import JudgementDocument
from lowtail.verdict.judge import Verdict

T = TypeVar("T")


def certify_and_store(
    store: Store, words: list[str], opts: CompareOptions, on_progress: Progress | None = None, save: bool = True
) -> CertificateDocument:
    """The record of the runs `words` select, on their comparison (computed, and stored
    unless `save` is false: its `comparison_id` is then None)."""
    comparison = (
        compare_and_store(store, words, opts, on_progress)
        if save
        else compare(store, words, opts, on_progress).document
    )
    configurations = comparison["configurations"]
    experiments = sorted({e for c in configurations for e in c["experiments"]})
    hosts: dict[int, ExperimentHost] = {eid: runstore.experiment(store, eid).get("host") or {} for eid in experiments}
    inputs = {
        row["analysis_id"]: row
        for row in analysisstore.analysis_inputs(store, [a for c in configurations for a in c["analyses"]])
    }
    run_ids = [r for c in configurations for r in c["runs"]]
    rows = {r["run_id"]: r for r in runstore.select_runs(store, run_ids=run_ids)} if run_ids else {}
    budget = comparison["verdict"]
    common_key = budget["key"] if budget is not None else None
    certified = [
        _configuration(c, hosts, inputs, common_key, [rows[i] for i in c["runs"] if i in rows]) for c in configurations
    ]
    devices = device_verdicts(
        [(c["device"]["name"], c["device"]["kind"], Judged(_within_device(c), c["verdict"])) for c in certified]
    )
    return {
        "lowtail_version": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "selection": list(words),
        "selected": _selected(configurations, experiments),
        "comparison_id": comparison["comparison_id"],
        "level": comparison["level"],
        "budget": budget["text"] if budget is not None else None,
        "devices": [d.as_dict() for d in devices],
        "configurations": certified,
        "notes": list(comparison["notes"]),
        "partial": comparison["partial"],
        "partial_reasons": list(comparison["partial_reasons"]),
    }


def _selected(configurations: Sequence[ConfigurationDocument], experiments: Sequence[int]) -> str:
    """What a selection came to: "6 runs of experiment 3 in 3 configurations"."""
    runs = sum(len(c["runs"]) for c in configurations)
    analyses = sum(len(c["analyses"]) for c in configurations) - runs
    of = (
        f" of experiment{'s' if len(experiments) != 1 else ''} {', '.join(map(str, experiments))}"
        if experiments
        else ""
    )
    plain = f" and {format_counted(analyses, 'plain analysis', 'plain analyses')}" if analyses > 0 else ""
    return f"{format_counted(runs, 'run')}{of}{plain}, in {format_counted(len(configurations), 'configuration')}"


def _within_device(c: CertifiedConfiguration) -> str:
    """What tells a configuration from its device's others: its label without the device's
    name, else its traffic."""
    own = {k: v for k, v in c["configuration"].items() if k not in ("dut", "kind")}
    if own:
        return " · ".join(f"{k} {v}" if k != "rate" else v for k, v in own.items())
    rate = c["traffic"]["rate_pps"]
    return format_rate(rate) if rate else c["label"]


def _configuration(
    c: ConfigurationDocument,
    hosts: Mapping[int, ExperimentHost],
    inputs: Mapping[int, Mapping[str, Any]],
    common_key: str | None,
    runs: Sequence[RunRow],
) -> CertifiedConfiguration:
    verdict = c["verdict"]
    # An invalid configuration is judged on no percentile: the selection's budget names it.
    key = verdict["percentile"] or common_key or Verdict().key
    latency = c["latency_ns"] or {}
    floor = c["floor"]
    floor_ns = floor["latency_ns"].get(key) if floor else None
    return {
        "label": c["label"],
        "configuration": dict(c["key_text"]),
        "device": _device(c, runs, [hosts[e] for e in c["experiments"] if e in hosts]),
        "traffic": _traffic(c, runs),
        "runs": list(c["runs"]),
        "analyses": list(c["analyses"]),
        "repetitions": c["repetitions"],
        "packets": int(latency.get("samples") or 0),
        "sent": c["sent"],
        "lost": c["lost"],
        "intended_drops": int(c.get("intended_drops") or 0),
        "loss_ratio": c["loss_ratio"],
        "percentile": key,
        "value_ns": latency.get(key),
        "interval": (c["intervals"] or {}).get(key),
        "bounds": judged_bounds(verdict),
        "verdict": verdict,
        "floor_ns": None if floor_ns is None else int(floor_ns),
        "degraded": list(c["degraded"]),
        "emulated": c["emulated"],
        "invalid_runs": list(c["invalid_runs"]),
        "hosts": [hosts[e].copy() for e in c["experiments"] if e in hosts],
        "data": [_identity(inputs[a]) for a in c["analyses"] if a in inputs],
    }


def judged_bounds(verdict: JudgementDocument) -> CertifiedBounds:
    """The judged percentile's one-sided bounds as the verdict used them, in words: a bound
    there is, or why there is none — never a dash beside a number."""
    name = percentiles.label(verdict["percentile"]) if verdict["percentile"] else "the judged percentile"
    lower, upper, sure = verdict["lower_ns"], verdict["upper_ns"], verdict["confidence"]
    if verdict["status"] in ("INVALID", "floor") or sure is None:
        text = f"not judged: {verdict['reason']}"
    elif lower is None and upper is None and not verdict["samples"]:
        text = f"none: {verdict['reason']}"
    else:
        at = format_percent(sure, "g")
        low = f"at least {format_ns(lower)}" if lower is not None else "no lower bound"
        high = (
            f"at most {format_ns(upper)}"
            if upper is not None
            else f"not bounded from above by {verdict['samples'] or 0:,} packets"
        )
        text = f"{name} {low} and {high}, each with {at} confidence"
    return {"confidence": sure, "lower_ns": lower, "upper_ns": upper, "text": text}


def _device(c: ConfigurationDocument, runs: Sequence[RunRow], hosts: Sequence[ExperimentHost]) -> CertifiedDevice:
    """The device of a configuration as its runs stored it (a plain analysis: its label)."""
    first: Mapping[str, Any] = runs[0] if runs else {}
    options = dict(first.get("dut_config") or {})
    rule_sets = _distinct([_rule_set(r) for r in runs if _rule_set(r)])
    shown = {k: _option_text(k, v, rule_sets) for k, v in options.items()}
    kernels = sorted({str(h["kernel"]) for h in hosts if h.get("kernel")})
    return {
        "name": str(first.get("dut_name") or c["label"]),
        "kind": str(first.get("dut_kind") or "analysis"),
        "options": options,
        "options_shown": shown,
        "rule_sets": rule_sets,
        "containment": _containment(runs),
        "cores": _cores(runs),
        "kernel": ", ".join(kernels) or None,
        "guest_kernel": str(options["guest_kernel"]) if options.get("guest_kernel") else None,
    }


def _rule_set(run: Mapping[str, Any]) -> RuleSetRecord:
    """What a run recorded of its rules (Suricata, a VM's guest IPS): the set and its hash."""
    stats = run.get("dut_stats") or {}
    found: RuleSetRecord = {}
    if "rules" in stats:
        found["rules"] = stats["rules"]
    if "files" in stats:
        found["files"] = stats["files"]
    if "port" in stats:
        found["port"] = stats["port"]
    if "sha256" in stats:
        found["sha256"] = stats["sha256"]
    return found


def _distinct(items: Sequence[T]) -> list[T]:
    out: list[T] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _option_text(key: str, value: Any, rule_sets: Sequence[Mapping[str, Any]]) -> str:
    """An option as the record shows it: its value as typed (durations carry their units),
    a rule set with the hash of the rules its runs loaded, an unset one as its default."""
    if value is None:
        return "not set: its default"
    text = show_value(value)
    if key == "rules":
        hashes = [f"sha256 {r['sha256']}" for r in rule_sets if r.get("sha256")]
        files = [format_counted(r["files"], "file") for r in rule_sets if r.get("files")]
        if isinstance(value, int):
            text = format_counted(value, "generated rule")
        return "; ".join([text, *files, *hashes])
    return text


def _containment(runs: Sequence[RunRow]) -> str:
    """How the device's processes were contained, as its runs recorded it."""
    seen = _distinct([dict(r.get("containment") or {}) for r in runs])
    if not seen:
        return "not recorded"
    parts = []
    for applied in seen:
        mode = str(applied.get("mode") or "bare")
        cpus = applied.get("cpus")
        where = f" on CPU {','.join(map(str, cpus))}" if cpus else ""
        extra = f", cgroup {applied['cgroup']}" if applied.get("cgroup") else ""
        parts.append(f"{mode}{where}{extra}")
    return "; ".join(parts)


def _cores(runs: Sequence[RunRow]) -> str:
    """The core plan the device's runs had: the DuT's cores and the testbed's roles."""
    plans = _distinct([dict((r.get("traffic") or {}).get("core_plan") or {}) for r in runs if r.get("traffic")])
    plans = [p for p in plans if p]
    if not plans:
        return "not recorded (runs not measured by lowtail's testbed)"
    return "; ".join(
        f"DuT on CPU {','.join(map(str, _cpus(p.get('dut'))))}, generator on CPU {p.get('generator')}, "
        f"timestamper on CPU {p.get('capture')}, housekeeping on CPU {p.get('housekeeping')}"
        for p in plans
    )


def _traffic(c: ConfigurationDocument, runs: Sequence[RunRow]) -> CertifiedTraffic:
    """The traffic of a configuration, from its runs (one value where they agree)."""

    def one(values: Sequence[Any]) -> Any:
        distinct = set(values)
        return distinct.pop() if len(distinct) == 1 else None

    return {
        "rate_pps": one([r.get("rate_pps") for r in runs]) if runs else None,
        "frame_size": one([r.get("frame_size") for r in runs]) if runs else None,
        "burst": one([r.get("burst") for r in runs]) if runs else None,
        "flows": one([(r.get("traffic") or {}).get("flows", 1) for r in runs]) if runs else None,
        "duration_ns": one([r.get("duration_ns") for r in runs]) if runs else None,
        "warmup_ns": one([r.get("warmup_ns") for r in runs]) if runs else None,
        "repetitions": c["repetitions"],
        "runs": len(c["runs"]) or len(c["analyses"]),
    }


def _cpus(value: object) -> list[object]:
    """A role's cores as a core plan stores them: a list, or one core."""
    return list(value) if isinstance(value, list) else [] if value is None else [value]


def _identity(row: Mapping[str, Any]) -> AnalysisIdentity:
    """One analysis's data as a reader can check it again: its captures (path, bytes, frames),
    when and by which lowtail it was analysed."""
    sides = row.get("inputs") or {}
    return {
        "analysis_id": row["analysis_id"],
        "analysed_at": _when(row.get("created_at")),
        "lowtail_version": row.get("lowtail_version"),
        "captures": {side: _capture(sides.get(side) or {}) for side in ("pre", "post")},
    }


def _when(created_at: object) -> str:
    """A stored time to the second ("2026-11-30 07:26:10"; the store keeps microseconds)."""
    return created_at.strftime("%Y-%m-%d %H:%M:%S") if isinstance(created_at, datetime) else str(created_at)


def _capture(side: Mapping[str, Any]) -> CaptureIdentity:
    return {
        "path": side.get("path"),
        "bytes": side.get("bytes"),
        "frames": side.get("frames"),
        "format": side.get("format"),
    }
