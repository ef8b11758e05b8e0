"""Host audits, noise probes, interrupt profiles and run interrupt samples in the database
(tables in schema/003_host.sql). Each save is one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lowtail.host.document import AuditDocument, InterruptProfileRow, StoredNoiseCore, StoredNoiseRun
from lowtail.store.codec import AUDIT_PLAN, NOISE_ATTRIBUTION, NOISE_CPUS, NOISE_ENERGY, NOISE_HOST, NOISE_SAMPLER
from lowtail.store.db import Store, stored_id

if TYPE_CHECKING:
    from lowtail.host.document import NoiseDocument


def _insert_many(store: Store, sql: str, rows: list[list[Any]]) -> None:
    if rows:
        store.con.executemany(sql, rows)


def save_audit(store: Store, doc: AuditDocument) -> int:
    """Store one audit document (as `lowtail host audit --json` prints it)."""
    s = doc["summary"]
    with store.transaction():
        (audit_id,) = store.con.execute(
            """INSERT INTO host_audits (host, kernel, cmdline, plan, score, passed, warned, failed, skipped)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING audit_id""",
            [
                doc["host"],
                doc["kernel"],
                doc["cmdline"],
                AUDIT_PLAN.encode(dict(doc["plan"])),
                s["score"],
                s["passed"],
                s["warned"],
                s["failed"],
                s["skipped"],
            ],
        ).fetchone()
        _insert_many(
            store,
            "INSERT INTO host_audit_checks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                [audit_id, i, c["id"], c["category"], c["status"], c["observed"], c["expected"], c["why"], c["remedy"]]
                for i, c in enumerate(doc["checks"])
            ],
        )
    return int(audit_id)


def save_noise_run(store: Store, result: NoiseDocument, label: str | None = None) -> int:
    """Store one `lowtail noise` result: the run, per-core figures, gap histograms, the
    largest gaps and the interrupt profile."""
    with store.transaction():
        (rid,) = store.con.execute(
            """INSERT INTO noise_runs (label, host, cpus, housekeeping_cpu, duration_ns, threshold_ns,
                   sample_interval_ns, sampler, energy)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING noise_run_id""",
            [
                label,
                NOISE_HOST.encode(result["host"]),
                NOISE_CPUS.encode(result["cpus"]),
                result["housekeeping_cpu"],
                result["duration_ns"],
                result["threshold_ns"],
                result["sample_interval_ns"],
                NOISE_SAMPLER.encode(result["sampler"] or None),
                NOISE_ENERGY.encode(result["energy"]),
            ],
        ).fetchone()
        for c in result["cores"]:
            store.con.execute(
                "INSERT INTO noise_cores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    rid,
                    c["cpu"],
                    c["start_ns"],
                    c["duration_ns"],
                    c["loops"],
                    c["min_loop_ns"],
                    c["gaps"],
                    c["rate_hz"],
                    c["noise_ns_per_s"],
                    c["max_ns"],
                    c["p50_ns"],
                    c["p90_ns"],
                    c["p99_ns"],
                    c["p99_9_ns"],
                    c.get("d_sum_ns_per_s"),
                    NOISE_ATTRIBUTION.encode(c.get("attribution")),
                ],
            )
            _insert_many(
                store,
                "INSERT INTO noise_histograms VALUES (?, ?, ?, ?, ?)",
                [[rid, c["cpu"], b["lo_ns"], b["hi_ns"], b["count"]] for b in c["histogram"]],
            )
            _insert_many(
                store,
                "INSERT INTO noise_largest_gaps VALUES (?, ?, ?, ?)",
                [[rid, c["cpu"], g["t_ns"], g["gap_ns"]] for g in c["largest"]],
            )
            _insert_many(
                store,
                "INSERT INTO interrupt_profiles VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    [rid, c["cpu"], kind, v["description"], v["count"], v["rate_hz"], v["typical_ns"]]
                    for kind, v in (c.get("interrupts") or {}).items()
                ],
            )
    return int(rid)


def save_run_interrupts(store: Store, run_id: int, samples: Iterable[Any], source: str = "host") -> int:
    """Store the interrupt samples of one run (`lowtail run`): the host's InterruptSampler's,
    or (source "guest") a VM guest's; returns how many."""
    samples = list(samples)
    with store.transaction():
        store.con.execute(
            "INSERT INTO run_interrupts (run_id, t_ns, cpu, kind, delta, interval_ns, source) "
            "SELECT ?, unnest(?::BIGINT[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[]), "
            "unnest(?::BIGINT[]), unnest(?::BIGINT[]), ?",
            [
                run_id,
                [s.t_ns for s in samples],
                [s.cpu for s in samples],
                [s.kind for s in samples],
                [s.delta for s in samples],
                [s.interval_ns for s in samples],
                source,
            ],
        )
    return len(samples)


def run_interrupts(store: Store, run_id: int, source: str = "host") -> list[tuple[int, int, str, int, int]]:
    """(t_ns, cpu, kind, delta, interval_ns) of one run, in time order: the host's, or
    (source "guest") those its VM guest sent."""
    return store.con.execute(
        "SELECT t_ns, cpu, kind, delta, interval_ns FROM run_interrupts WHERE run_id = ? AND source = ? "
        "ORDER BY t_ns, cpu, kind",
        [run_id, source],
    ).fetchall()


def _resolve_noise_id(store: Store, noise_run_id: int | str) -> int:
    return stored_id(store, noise_run_id, "noise_runs", "noise_run_id", "noise runs", "run `lowtail noise`")


def interrupt_profile(
    store: Store, noise_run_id: int | str = "latest", cpu: int | None = None
) -> list[InterruptProfileRow]:
    """The interrupt profile measured by a noise run: per CPU and kind, rate (Hz) and
    typical duration (ns) — the inputs of the overload model's d_Σ = Σ rate × duration."""
    rid = _resolve_noise_id(store, noise_run_id)
    cur = store.con.execute(
        "SELECT cpu, kind, description, count, rate_hz, typical_ns FROM interrupt_profiles WHERE noise_run_id = ? "
        "AND (? IS NULL OR cpu = ?) ORDER BY cpu, rate_hz DESC",
        [rid, cpu, cpu],
    )
    return [
        InterruptProfileRow(cpu=c, kind=k, description=d, count=n, rate_hz=hz, typical_ns=ns)
        for c, k, d, n, hz, ns in cur.fetchall()
    ]


def noise_run(store: Store, noise_run_id: int | str = "latest") -> StoredNoiseRun:
    """One stored noise run with its cores, histograms, largest gaps and profile."""
    rid = _resolve_noise_id(store, noise_run_id)
    q = store.con.execute
    (
        created_at,
        label,
        host,
        cpus,
        housekeeping_cpu,
        duration_ns,
        threshold_ns,
        sample_interval_ns,
        sampler,
        energy,
    ) = q(
        "SELECT created_at, label, host, cpus, housekeeping_cpu, duration_ns, threshold_ns, sample_interval_ns, "
        "sampler, energy FROM noise_runs WHERE noise_run_id = ?",
        [rid],
    ).fetchone()
    where = f"noise run {rid}"
    cores: list[StoredNoiseCore] = []
    found = q(f"SELECT {', '.join(_NOISE_CORE_COLUMNS)} FROM noise_cores WHERE noise_run_id = ? ORDER BY cpu", [rid])
    for row in found.fetchall():
        core = dict(zip(_NOISE_CORE_COLUMNS, row))
        cpu = int(core["cpu"])
        cores.append(
            StoredNoiseCore(
                noise_run_id=rid,
                cpu=cpu,
                start_ns=core["start_ns"],
                duration_ns=core["duration_ns"],
                loops=core["loops"],
                min_loop_ns=core["min_loop_ns"],
                gaps=core["gaps"],
                rate_hz=core["rate_hz"],
                noise_ns_per_s=core["noise_ns_per_s"],
                max_ns=core["max_ns"],
                p50_ns=core["p50_ns"],
                p90_ns=core["p90_ns"],
                p99_ns=core["p99_ns"],
                p99_9_ns=core["p99_9_ns"],
                d_sum_ns_per_s=core["d_sum_ns_per_s"],
                attribution=NOISE_ATTRIBUTION.decode(store, core["attribution"] or None, f"{where}, CPU {cpu}"),
                histogram=q(
                    "SELECT lo_ns, hi_ns, count FROM noise_histograms WHERE noise_run_id = ? AND cpu = ? "
                    "ORDER BY lo_ns",
                    [rid, cpu],
                ).fetchall(),
                largest=q(
                    "SELECT t_ns, gap_ns FROM noise_largest_gaps WHERE noise_run_id = ? AND cpu = ? ORDER BY t_ns",
                    [rid, cpu],
                ).fetchall(),
                interrupts=interrupt_profile(store, rid, cpu),
            )
        )
    return StoredNoiseRun(
        noise_run_id=rid,
        created_at=created_at,
        label=label,
        host=NOISE_HOST.decode(store, host, where),
        cpus=NOISE_CPUS.decode(store, cpus, where) if cpus is not None else None,
        housekeeping_cpu=housekeeping_cpu,
        duration_ns=duration_ns,
        threshold_ns=threshold_ns,
        sample_interval_ns=sample_interval_ns,
        sampler=NOISE_SAMPLER.decode(store, sampler, where),
        energy=NOISE_ENERGY.decode(store, energy, where),
        cores=cores,
    )


# The `noise_cores` columns (003_host.sql) a stored noise run's core is read from.
_NOISE_CORE_COLUMNS = (
    "cpu",
    "start_ns",
    "duration_ns",
    "loops",
    "min_loop_ns",
    "gaps",
    "rate_hz",
    "noise_ns_per_s",
    "max_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p99_9_ns",
    "d_sum_ns_per_s",
    "attribution",
)
