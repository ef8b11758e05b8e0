"""`lowtail noise`: run the native probe (lowtail-noise) on chosen cores, read the
interrupt counters around it, and attribute the gaps to interrupt kinds.

The probe reads /proc/interrupts itself right before its loops start and right after
they end, so interrupt counts cover exactly the probed time. With periodic sampling on,
an InterruptSampler on a housekeeping core also records increments every interval; the
gap time in each interval, regressed on the increments of each kind, gives the typical
duration per kind — the interrupt profile (rate × duration per kind, summed: d_Σ) the
overload model R_max = (1 s − d_Σ) / t_CPU needs (NOMS 2020, §VI)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lowtail.core.binaries import find_binary
from lowtail.core.errors import Failure, Interrupted, UserError
from lowtail.host.document import (
    EnergyReading,
    InterruptKindLoad,
    NoiseAttribution,
    NoiseCore,
    NoiseDocument,
    ProbeOutput,
)
from lowtail.host.energy import EnergyMeter
from lowtail.host.facts import Host
from lowtail.host.interrupts import InterruptSample, InterruptSampler, diff, parse_interrupts
from lowtail.host.sysroot import SysRoot, format_cpulist

if TYPE_CHECKING:
    from lowtail.store import DbPath

# A kind counts as steady (a clock: LOC, IWI) when its count per interval varies this little;
# steady kinds cannot be told apart by regression and share one duration.
STEADY_CV = 0.25
# Interrupt handlers take microseconds (5.5-19 µs in the URLLC studies); a gap this long is the core
# given to something else — another task, RT throttling, the hypervisor — and is counted
# apart instead of being attributed to whatever interrupt happened nearby.
HANDLER_MAX_NS = 1_000_000


@dataclass
class NoiseOptions:
    cpus: list[int]
    duration_ns: int
    threshold_ns: int = 1_000
    interrupts: bool = True
    sample_interval_ns: int | None = None  # periodic sampling from a housekeeping core; None: before/after only
    housekeeping_cpu: int | None = None  # None: the first online CPU not probed
    top: int = 20
    fifo: int | None = None


def resolve_cpus(opts: NoiseOptions, host: Host) -> int | None:
    """Check the cores exist and are online; return the housekeeping CPU to use."""
    online = set(host.cpus_online)
    bad = sorted(set(opts.cpus) - online)
    if bad:
        raise UserError(
            f"CPU {format_cpulist(bad)} does not exist or is offline (online CPUs: {format_cpulist(online)})"
        )
    if opts.housekeeping_cpu is not None:
        if opts.housekeeping_cpu not in online:
            raise UserError(
                f"--housekeeping {opts.housekeeping_cpu}: no such online CPU (online CPUs: {format_cpulist(online)})"
            )
        return opts.housekeeping_cpu
    free = sorted(online - set(opts.cpus))
    return free[0] if free else None


def run_noise(opts: NoiseOptions, warn: Callable[[str], None] = lambda m: None) -> NoiseDocument:
    """Run the noise probe on the chosen cores (with the interrupt sampler and the energy
    meter) and attribute its gaps; the document `lowtail noise --json` prints."""
    host = Host(SysRoot("/"))
    housekeeping = resolve_cpus(opts, host)
    if housekeeping is None:
        warn("every online CPU is probed: the probe's main thread and the interrupt sampler share a probed core")
    elif housekeeping in opts.cpus:
        warn(f"housekeeping CPU {housekeeping} is also probed: its own reads show up as gaps there")
    binary = find_binary("lowtail-noise")
    sampler = None
    with tempfile.TemporaryDirectory(prefix="lowtail-noise-") as tmp:
        cmd = [
            str(binary),
            "--cpu",
            format_cpulist(opts.cpus),
            "--duration",
            f"{opts.duration_ns}ns",
            "--threshold-ns",
            str(opts.threshold_ns),
            "--top",
            str(opts.top),
            "--gaps-dir",
            tmp,
        ]
        if opts.interrupts:
            cmd += ["--interrupts", "/proc/interrupts"]
        if housekeeping is not None:
            cmd += ["--main-cpu", str(housekeeping)]
        if opts.fifo is not None:
            cmd += ["--rt-priority", str(opts.fifo)]
        energy = EnergyMeter().start()
        if opts.interrupts and opts.sample_interval_ns:
            sampler = InterruptSampler(opts.sample_interval_ns / 1e9, housekeeping).start()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, errtext = proc.communicate(timeout=opts.duration_ns / 1e9 + 120)
        except KeyboardInterrupt:
            proc.kill()
            proc.wait()
            if sampler:
                sampler.stop()
            raise Interrupted("interrupted: the noise probe was stopped, nothing measured") from None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise Failure("the noise probe did not finish in time (is the machine overloaded?)") from None
        samples = sampler.stop() if sampler else []
        energy_doc = energy.stop()
        if proc.returncode != 0:
            last = (errtext.strip().splitlines() or ["no message"])[-1]
            raise Failure(f"the noise probe failed: {last}")
        try:
            probe = msgspec.json.decode(out, type=ProbeOutput)
        except msgspec.DecodeError as e:  # lowtail's own program: a defect, said in one line
            raise Failure(f"the noise probe's output is not what this lowtail reads ({e})") from None
        gaps = {c["cpu"]: _read_gaps(Path(tmp) / f"cpu{c['cpu']}.gaps") for c in probe["cores"]}
    return build_result(probe, gaps, samples, sampler, opts, housekeeping, energy_doc, host)


def _read_gaps(path: Path) -> tuple[np.ndarray, np.ndarray]:
    raw = np.fromfile(path, dtype=np.dtype([("t", "<i8"), ("len", "<i8")]))
    return raw["t"].astype(np.int64), raw["len"].astype(np.int64)


def build_result(
    probe: ProbeOutput,
    gaps: dict[int, tuple[np.ndarray, np.ndarray]],
    samples: list[InterruptSample],
    sampler: InterruptSampler | None,
    opts: NoiseOptions,
    housekeeping: int | None,
    energy: EnergyReading,
    host: Host,
) -> NoiseDocument:
    """The noise document from the probe's output, its gaps and the interrupt samples:
    per core its figures, histogram, largest gaps and the interrupt profile behind them."""
    before = after = None
    start, end = probe["interrupts_before"], probe["interrupts_after"]
    if start and end:
        before = parse_interrupts(start["text"])
        after = parse_interrupts(end["text"])
        window_ns = end["t_ns"] - start["t_ns"]
        counts = diff(before, after)
    cores: list[NoiseCore] = []
    for core in probe["cores"]:
        cpu = core["cpu"]
        entry: NoiseCore = {
            "cpu": cpu,
            "gaps": core["gaps"],
            "rate_hz": core["rate_hz"],
            "max_ns": core["max_ns"],
            "p50_ns": core["p50_ns"],
            "p90_ns": core["p90_ns"],
            "p99_ns": core["p99_ns"],
            "p99_9_ns": core["p99_9_ns"],
            "noise_ns_per_s": core["noise_ns_per_s"],
            "gap_total_ns": core["gap_total_ns"],
            "loops": core["loops"],
            "min_loop_ns": core["min_loop_ns"],
            "dropped": core["dropped"],
            "start_ns": core["start_ns"],
            "duration_ns": core["duration_ns"],
            "histogram": core["histogram"],
            "largest": core["largest"],
            "interrupts": None,
        }
        if before is not None and after is not None:
            per_kind = exclusive({kind: n for (c, kind), n in counts.items() if c == cpu})
            intervals = _intervals(samples, sampler, cpu, core["start_ns"], core["start_ns"] + core["duration_ns"])
            t, lengths = gaps[cpu]
            profile = attribute(t, lengths, per_kind, intervals)
            loads: dict[str, InterruptKindLoad] = {
                kind: {
                    "count": n,
                    "rate_hz": n / (window_ns / 1e9),
                    "typical_ns": profile["typical_ns"].get(kind),
                    "description": CAL_BESIDES_TLB
                    if kind == "CAL" and "TLB" in per_kind
                    else after.descriptions.get(kind, kind),
                }
                for kind, n in sorted(per_kind.items(), key=lambda kv: -kv[1])
            }
            entry["interrupts"] = loads
            entry["d_sum_ns_per_s"] = sum(
                v["rate_hz"] * v["typical_ns"] for v in loads.values() if v["typical_ns"] is not None
            )
            entry["attribution"] = {
                "method": profile["method"],
                "intervals": profile["intervals"],
                "explained_share": profile["explained_share"],
                "long_gaps": profile["long_gaps"],
                "long_gap_total_ns": profile["long_gap_total_ns"],
            }
        cores.append(entry)
    costs = sorted(sampler.read_cpu_ns) if sampler else []
    return {
        "cpus": list(opts.cpus),
        "threshold_ns": probe["threshold_ns"],
        "duration_ns": probe["requested_duration_ns"],
        "housekeeping_cpu": housekeeping,
        "interrupts_sampled": before is not None,
        "sample_interval_ns": opts.sample_interval_ns if sampler else None,
        "sampler": {
            "reads": len(costs),
            "read_cpu_median_ns": costs[len(costs) // 2] if costs else None,
            "read_cpu_max_ns": costs[-1] if costs else None,
        }
        if sampler
        else None,
        "fifo": opts.fifo,
        "energy": energy,
        "host": {"kernel": host.release, "cmdline": host.cmdline, "cpu_model": host.cpuinfo.get("model name")},
        "cores": cores,
    }


def _intervals(
    samples: list[InterruptSample], sampler: InterruptSampler | None, cpu: int, start_ns: int, end_ns: int
) -> list[tuple[int, int, dict[str, int]]] | None:
    """The sampler's intervals that lie wholly inside the probed time, with the
    increments of each kind on `cpu`."""
    if sampler is None or len(sampler.sample_times_ns) < 2:
        return None
    times = sampler.sample_times_ns
    by_end: dict[int, dict[str, int]] = {}
    for s in samples:
        if s.cpu == cpu:
            by_end.setdefault(s.t_ns, {})[s.kind] = s.delta
    return [(a, b, exclusive(by_end.get(b, {}))) for a, b in zip(times, times[1:]) if a >= start_ns and b <= end_ns]


CAL_BESIDES_TLB = "function call IPIs besides TLB shootdowns"


def exclusive(counts: dict[str, int]) -> dict[str, int]:
    """Counts in which no interrupt appears twice. On x86 a TLB shootdown arrives as a
    function-call IPI and is counted in both CAL and TLB; CAL becomes the other function
    calls, so that Σ rate × duration counts each interrupt once."""
    if "CAL" in counts and "TLB" in counts:
        counts = dict(counts)
        rest = max(0, counts["CAL"] - counts["TLB"])
        if rest:
            counts["CAL"] = rest
        else:
            del counts["CAL"]
    return counts


class InterruptProfile(NoiseAttribution):
    """The typical duration of each interrupt kind on one core ("LOC" → ns; None where it
    could not be timed), and how it was found."""

    typical_ns: dict[str, float | None]


def _profile(
    typical_ns: dict[str, float | None],
    method: str,
    intervals: int,
    explained_share: float,
    long_gaps: int,
    long_gap_total_ns: int,
) -> InterruptProfile:
    return {
        "typical_ns": typical_ns,
        "method": method,
        "intervals": intervals,
        "explained_share": explained_share,
        "long_gaps": long_gaps,
        "long_gap_total_ns": long_gap_total_ns,
    }


def attribute(
    gap_t: np.ndarray,
    gap_len: np.ndarray,
    counts: dict[str, int],
    intervals: list[tuple[int, int, dict[str, int]]] | None,
) -> InterruptProfile:
    """Typical duration per interrupt kind on one core.

    Gaps of HANDLER_MAX_NS or more are not interrupt handlers and are only counted
    (`long_gaps`, `long_gap_total_ns`). With intervals (periodic samples): the shorter gaps'
    time in each interval is regressed, non-negatively, on the increments of each kind whose
    count varies between intervals, plus one shared term for the steady kinds (clock-driven,
    like LOC and IWI: their counts barely vary, so no regression can tell them apart).
    Without: the gaps are matched to interrupts by count — the N largest, N the number of
    interrupts — and every kind gets their median. `explained_share` is the part of the
    shorter gaps' time the profile accounts for."""
    long = gap_len >= HANDLER_MAX_NS
    long_gaps, long_gap_total_ns = int(long.sum()), int(gap_len[long].sum())
    gap_t, gap_len = gap_t[~long], gap_len[~long]
    total_gap = float(gap_len.sum())
    n_irq = sum(counts.values())
    if not counts:
        return _profile({}, "no interrupts", 0, 0.0, long_gaps, long_gap_total_ns)
    if intervals and len(intervals) >= 4:
        result = _regress(gap_t, gap_len, counts, intervals)
        if result is not None:
            typical_ns, method, explained_share = result
            return _profile(typical_ns, method, len(intervals), explained_share, long_gaps, long_gap_total_ns)
    k = min(n_irq, len(gap_len))
    typical = float(np.median(np.sort(gap_len)[-k:])) if k else None
    explained = (typical or 0.0) * n_irq
    return _profile(
        {kind: typical for kind in counts},
        "count-matched (kinds not separated)",
        len(intervals or []),
        min(1.0, explained / total_gap) if total_gap else 0.0,
        long_gaps,
        long_gap_total_ns,
    )


def _regress(
    gap_t: np.ndarray,
    gap_len: np.ndarray,
    counts: dict[str, int],
    intervals: list[tuple[int, int, dict[str, int]]],
) -> tuple[dict[str, float | None], str, float] | None:
    """Typical duration per kind, the method's name and the share explained; None when the
    intervals are too few for the kinds to separate."""
    from scipy.optimize import nnls

    kinds = sorted(counts)
    n = np.array([[iv[2].get(k, 0) for k in kinds] for iv in intervals], dtype=float)
    edges = np.array([iv[0] for iv in intervals] + [intervals[-1][1]], dtype=np.int64)
    idx = np.searchsorted(edges, gap_t, side="right") - 1
    inside = (idx >= 0) & (idx < len(intervals)) & (gap_t < edges[-1])
    g = np.bincount(idx[inside], weights=gap_len[inside].astype(float), minlength=len(intervals))
    mean = n.mean(axis=0)
    cv = np.divide(n.std(axis=0), mean, out=np.zeros_like(mean), where=mean > 0)
    steady = [i for i, k in enumerate(kinds) if mean[i] > 0 and cv[i] < STEADY_CV]
    varying = [i for i, k in enumerate(kinds) if mean[i] > 0 and cv[i] >= STEADY_CV]
    columns = [n[:, i] for i in varying]
    if steady:
        columns.append(n[:, steady].sum(axis=1))
    if not columns or len(intervals) < 3 * len(columns):
        return None
    x = np.column_stack(columns)
    coef, _ = nnls(x, g)
    typical: dict[str, float | None] = {k: None for k in kinds}
    for j, i in enumerate(varying):
        typical[kinds[i]] = float(coef[j])
    for i in steady:
        typical[kinds[i]] = float(coef[-1])
    fitted = float((x @ coef).sum())
    total = float(g.sum())
    method = "interval regression" + (
        f" ({', '.join(kinds[i] for i in steady)} share one duration)" if len(steady) > 1 else ""
    )
    return typical, method, min(1.0, fitted / total) if total else 0.0


def default_cpus() -> list[int]:
    """The cores to probe when none are named: the isolated ones of this host's core plan
    (isolcpus of the boot command line, else every CPU but the first)."""
    from lowtail.host.plan import resolve_plan

    return list(resolve_plan(Host(SysRoot("/"))).isolated)


def noise_and_store(
    opts: NoiseOptions,
    db: DbPath,
    *,
    save: bool = True,
    label: str | None = None,
    warn: Callable[[str], None] = lambda m: None,
) -> NoiseDocument:
    """The noise probe of `opts` (`run_noise`), stored in the database at `db` when `save`
    (opened only once the probe is over); the document then carries its `noise_run_id`."""
    result = run_noise(opts, warn=warn)
    if save:
        from lowtail.store import open_store
        from lowtail.store.host import save_noise_run

        with open_store(db) as s:
            result["noise_run_id"] = save_noise_run(s, result, label=label)
    return result
