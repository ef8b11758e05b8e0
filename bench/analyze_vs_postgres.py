"""`make bench`: `lowtail analyze` against the URLLC studies' PostgreSQL pipeline.

One generated capture pair, three contestants, each run as whole processes and repeated:

  * the page-cache floor: `cat PRE POST > /dev/null` with both files cached;
  * lowtail: `lowtail analyze PRE POST --db TMP` (default options: figures stored in DuckDB);
  * the baseline: dpkt parses both captures into rows that go into PostgreSQL with COPY,
    then one psql process computes the same figures in SQL (bench/baseline.sql).

Both pipelines' figures are compared in the first repetition and must be identical, or
the run fails. Then the
memory part: a 100-million-packet pair is generated, analysed by lowtail once with its
peak resident set size measured, and deleted.

Then the large part: a 20-million-packet pair analysed by lowtail (best of two) and by the
baseline once, with their figures compared again.

Then the campaign part (bench/campaign_scaling.py): N pairs analysed by `lowtail campaign
analyze` on a Dask cluster of 1 worker, then of 2 workers: the speed-up beside the ideal.

Targets (issues 2, 14 and 34): lowtail at least 100× faster than the baseline end to end on
the 2-million-packet pair with at most 0.15 s of start-up and storing on top of its
analysis, at least 300× on the 20-million-packet pair and within 2× its page-cache read,
within 2× the page-cache read and under 1 GiB resident on the 100-million-packet pair
(`compare` of three 5M repetitions within 0.7 s: bench/summary_speed.py; the same ratios
against `cat` as a gate that fails: bench/regression.py).

Configuration (flags override the environment):
  --packets / BENCH_PACKETS                 packets per side of the timed pair [2000000]
  --rate / BENCH_RATE                       their send rate, pps [100000]
  --repeat / BENCH_REPEAT                   repetitions of each timed pipeline [3]
  --large-packets / BENCH_LARGE_PACKETS     packets per side of the large pair, 0 skips [20000000]
  --memory-packets / BENCH_MEMORY_PACKETS   packets per side of the memory pair, 0 skips [100000000]
  --memory-rate / BENCH_MEMORY_RATE         its send rate, pps [1000000]
  --campaign-pairs / BENCH_CAMPAIGN_PAIRS   pairs of the campaign on 1 and 2 Dask workers, 0 skips [8]
  --campaign-packets / BENCH_CAMPAIGN_PACKETS  packets per side of each campaign pair [2000000]
  --workdir / BENCH_WORKDIR                 where the captures go [a new directory in /tmp]
  --out                                     where the results go [bench/out]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import dpkt

import pg_baseline
import regression
from campaign_scaling import render_campaign, run_campaign_scaling
from pg_baseline import BaselineError, StageTiming, TempPostgres

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "out"
GiB = 1 << 30

TARGET_SPEEDUP = 100.0
TARGET_LARGE_SPEEDUP = 300.0  # on the 20-million-packet pair
TARGET_FLOOR_RATIO = 2.0  # on the 100-million-packet pair
TARGET_OVERHEAD_S = 0.15  # start-up and storing on top of the analysis, 2-million-packet pair
TARGET_RSS_BYTES = 1 * GiB
FLOOR_READS = 5
LARGE_RUNS = 2  # cat and lowtail each on the 100-million-packet pair (best time, largest RSS)

# A device with a little of everything, so that every figure is non-trivial: loss in
# short bursts, duplicates, reordering, periodic interrupts that shape the tail (the one
# model of every speed figure: bench/regression.py's).
MODEL = dict(regression.MODEL)
ANALYSIS_DEFAULTS = {"trim_ns": 1_000_000_000, "horizon_ns": 10_000_000_000, "worst_n": 5000, "bins": 100}


@dataclass
class Config:
    packets: int
    rate: float
    repeat: int
    large_packets: int
    memory_packets: int
    memory_rate: float
    campaign_pairs: int
    campaign_packets: int
    workdir: Path | None
    out: Path
    json: bool
    model: dict = field(default_factory=lambda: dict(MODEL))


def parse_args(argv: list[str]) -> Config:
    env = os.environ.get
    title, _, details = __doc__.partition("\n\n")
    p = argparse.ArgumentParser(description=title, epilog=details, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--packets", type=int, default=int(env("BENCH_PACKETS", 2_000_000)))
    p.add_argument("--rate", type=float, default=float(env("BENCH_RATE", 100_000)))
    p.add_argument("--repeat", type=int, default=int(env("BENCH_REPEAT", 3)))
    p.add_argument("--large-packets", type=int, default=int(env("BENCH_LARGE_PACKETS", 20_000_000)))
    p.add_argument("--memory-packets", type=int, default=int(env("BENCH_MEMORY_PACKETS", 100_000_000)))
    p.add_argument("--memory-rate", type=float, default=float(env("BENCH_MEMORY_RATE", 1_000_000)))
    p.add_argument("--campaign-pairs", type=int, default=int(env("BENCH_CAMPAIGN_PAIRS", 8)))
    p.add_argument("--campaign-packets", type=int, default=int(env("BENCH_CAMPAIGN_PACKETS", 2_000_000)))
    p.add_argument("--workdir", type=Path, default=Path(env("BENCH_WORKDIR")) if env("BENCH_WORKDIR") else None)
    p.add_argument("--out", type=Path, default=OUT_DIR)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    a = p.parse_args(argv)
    if a.packets < 1 or a.repeat < 1 or a.memory_packets < 0 or a.large_packets < 0:
        p.error("--packets and --repeat must be positive, --large-packets and --memory-packets at least 0")
    return Config(
        a.packets,
        a.rate,
        a.repeat,
        a.large_packets,
        a.memory_packets,
        a.memory_rate,
        a.campaign_pairs,
        a.campaign_packets,
        a.workdir,
        a.out,
        a.json,
    )


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def lowtail_command() -> str:
    beside = Path(sys.executable).parent / "lowtail"
    found = str(beside) if beside.exists() else shutil.which("lowtail")
    if not found:
        raise BaselineError("the lowtail command is not installed: run `make build`")
    return found


def timed_process(argv: list[str]) -> StageTiming:
    """Run one whole process to its end: wall time, CPU time and peak RSS (from wait4)."""
    started = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return pg_baseline.wait_timed([p], started)


def synth_pair(pre: Path, post: Path, packets: int, rate: float, model: dict) -> tuple[dict, float]:
    argv = [
        lowtail_command(),
        "synth",
        str(pre),
        str(post),
        "--packets",
        str(packets),
        "--rate",
        f"{rate:g}pps",
        "--format",
        "pcap-ns",
        "--json",
    ]
    for key, value in model.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    started = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        raise BaselineError(f"lowtail synth failed: {r.stderr.strip()}")
    return json.loads(r.stdout), time.perf_counter() - started


def page_cache_read(pre: Path, post: Path, reads: int = FLOOR_READS) -> StageTiming:
    """Best of several `cat PRE POST > /dev/null` once both files are cached."""
    timed_process(["cat", str(pre), str(post)])
    return min((timed_process(["cat", str(pre), str(post)]) for _ in range(reads)), key=lambda t: t.seconds)


def lowtail_analyze(pre: Path, post: Path, workdir: Path) -> StageTiming:
    db = workdir / f"lowtail-{os.getpid()}.duckdb"
    try:
        return timed_process([lowtail_command(), "analyze", str(pre), str(post), "--db", str(db)])
    finally:
        for leftover in workdir.glob(db.name + "*"):
            leftover.unlink()


def lowtail_figures(pre: Path, post: Path) -> dict:
    r = subprocess.run(
        [
            lowtail_command(),
            "analyze",
            str(pre),
            str(post),
            "--no-store",
            "--json",
            "--worst",
            str(ANALYSIS_DEFAULTS["worst_n"]),
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        raise BaselineError(f"lowtail analyze failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def summary(values: list[float]) -> dict:
    return {"best": min(values), "median": statistics.median(values), "all": values}


def run_speed(cfg: Config, workdir: Path) -> dict:
    pre, post = workdir / "pre.pcap", workdir / "post.pcap"
    say(f"generating {cfg.packets:,} packets per side at {cfg.rate:,.0f} pps")
    synth, synth_s = synth_pair(pre, post, cfg.packets, cfg.rate, cfg.model)
    floor, ours, load, sql = [], [], [], []
    with TempPostgres() as pg:
        server = pg.version()
        for rep in range(1, cfg.repeat + 1):
            floor.append(page_cache_read(pre, post).seconds)
            say(f"run {rep}/{cfg.repeat}: page-cache read {floor[-1]:.3f} s")
            ours.append(lowtail_analyze(pre, post, workdir).seconds)
            say(f"run {rep}/{cfg.repeat}: lowtail analyze {ours[-1]:.3f} s")
            load.append(pg_baseline.load_pair(pg, pre, post).seconds)
            say(f"run {rep}/{cfg.repeat}: baseline parse+load {load[-1]:.1f} s")
            sql_timing, sql_doc = pg_baseline.analyze_in_sql(pg, **ANALYSIS_DEFAULTS)
            sql.append(sql_timing.seconds)
            say(f"run {rep}/{cfg.repeat}: baseline SQL {sql[-1]:.1f} s")
            if rep == 1:
                checked = lowtail_figures(pre, post)
                check_identical(sql_doc, checked)
            # Emptied at once: the server's background work on millions of loaded rows
            # (autovacuum's analyze, the checkpointer) must not run beside the next timings.
            pg.reset()
    for f in (pre, post):
        f.unlink()
    total = [a + b for a, b in zip(load, sql)]
    return {
        "packets_per_side": cfg.packets,
        "rate_pps": cfg.rate,
        "model": cfg.model,
        "pre_bytes": synth["pre_bytes"],
        "post_bytes": synth["post_bytes"],
        "lost": synth["lost"],
        "duplicates": synth["duplicates"],
        "synth_seconds": synth_s,
        "postgres": server,
        "dpkt": dpkt.__version__,
        "repeat": cfg.repeat,
        "page_cache_read_s": summary(floor),
        "lowtail_s": summary(ours),
        "baseline_load_s": summary(load),
        "baseline_sql_s": summary(sql),
        "baseline_total_s": summary(total),
        "figures_identical": True,
        "lowtail_analysis_s": checked["elapsed_s"],
    }


def run_large(cfg: Config, workdir: Path) -> dict:
    """The 20-million-packet pair: lowtail twice (best), the baseline once (ten times the
    rows of the timed pair: minutes), their figures compared."""
    pre, post = workdir / "large-pre.pcap", workdir / "large-post.pcap"
    try:
        say(f"large pair: generating {cfg.large_packets:,} packets per side at {cfg.rate:,.0f} pps")
        synth, _ = synth_pair(pre, post, cfg.large_packets, cfg.rate, cfg.model)
        floor = page_cache_read(pre, post, reads=LARGE_RUNS)
        ours = min((lowtail_analyze(pre, post, workdir) for _ in range(LARGE_RUNS)), key=lambda t: t.seconds)
        say(f"large pair: lowtail analyze {ours.seconds:.2f} s (best of {LARGE_RUNS}); the baseline takes minutes")
        with TempPostgres() as pg:
            load = pg_baseline.load_pair(pg, pre, post)
            say(f"large pair: baseline parse+load {load.seconds:.0f} s")
            sql, sql_doc = pg_baseline.analyze_in_sql(pg, **ANALYSIS_DEFAULTS)
            say(f"large pair: baseline SQL {sql.seconds:.0f} s")
        check_identical(sql_doc, lowtail_figures(pre, post))
    finally:
        for f in (pre, post):
            f.unlink(missing_ok=True)
    return {
        "packets_per_side": cfg.large_packets,
        "rate_pps": cfg.rate,
        "pre_bytes": synth["pre_bytes"],
        "post_bytes": synth["post_bytes"],
        "lowtail_s": ours.seconds,
        "page_cache_read_s": floor.seconds,
        "baseline_load_s": load.seconds,
        "baseline_sql_s": sql.seconds,
        "baseline_total_s": load.seconds + sql.seconds,
        "figures_identical": True,
    }


def check_identical(sql_doc: dict, lowtail_doc: dict) -> None:
    diffs = pg_baseline.differences(sql_doc, lowtail_doc)
    if diffs:
        raise BaselineError("the baseline and lowtail disagree:\n  " + "\n  ".join(diffs))
    lat = lowtail_doc["latency_ns"]
    say(
        f"figures identical: {lowtail_doc['sent']:,} sent, {lowtail_doc['received']:,} received, "
        f"{lowtail_doc['lost']:,} lost, {lowtail_doc['duplicates']:,} duplicates, "
        f"{lowtail_doc['reordered']:,} reordered, p99.9999 {lat['p99_9999']} ns, max {lat['max']} ns"
    )


def run_memory(cfg: Config, workdir: Path, bytes_per_packet: float) -> dict:
    need = int(2 * cfg.memory_packets * bytes_per_packet * 1.02)
    free = shutil.disk_usage(workdir).free
    result = {"packets_per_side": cfg.memory_packets, "rate_pps": cfg.memory_rate, "needs_bytes": need}
    if free < need:
        return {**result, "skipped": f"needs {need / 1e9:.1f} GB free in {workdir}, has {free / 1e9:.1f} GB"}
    pre, post = workdir / "mem-pre.pcap", workdir / "mem-post.pcap"
    try:
        say(f"generating {cfg.memory_packets:,} packets per side at {cfg.memory_rate:,.0f} pps ({need / 1e9:.1f} GB)")
        synth, synth_s = synth_pair(pre, post, cfg.memory_packets, cfg.memory_rate, cfg.model)
        # The same floor at a size where start-up costs vanish (if the pair fits the page cache).
        floor = page_cache_read(pre, post, reads=LARGE_RUNS)
        say(f"read from the page cache in {floor.seconds:.1f} s; analysing it {LARGE_RUNS} times, measuring peak RSS")
        runs = [lowtail_analyze(pre, post, workdir) for _ in range(LARGE_RUNS)]
        run = replace(min(runs, key=lambda t: t.seconds), max_rss_bytes=max(t.max_rss_bytes for t in runs))
    finally:
        for f in (pre, post):
            f.unlink(missing_ok=True)
    return {
        **result,
        "pre_bytes": synth["pre_bytes"],
        "post_bytes": synth["post_bytes"],
        "synth_seconds": synth_s,
        "lowtail_s": run.seconds,
        "lowtail_cpu_s": run.cpu_seconds,
        "max_rss_bytes": run.max_rss_bytes,
        "page_cache_read_s": floor.seconds,
    }


def run_campaign(cfg: Config, workdir: Path) -> dict:
    say(f"campaign: {cfg.campaign_pairs} pairs of {cfg.campaign_packets:,} packets on 1, then 2 dask workers")
    return run_campaign_scaling(
        lowtail_command(), synth_pair, workdir, cfg.campaign_pairs, cfg.campaign_packets, cfg.rate, cfg.model
    )


def verdicts(speed: dict, memory: dict, large: dict) -> dict:
    best = {k: speed[k]["best"] for k in ("lowtail_s", "baseline_total_s", "page_cache_read_s")}
    median = {k: speed[k]["median"] for k in best}
    out = {
        "speedup_best": best["baseline_total_s"] / best["lowtail_s"],
        "speedup_median": median["baseline_total_s"] / median["lowtail_s"],
        "floor_ratio_best": best["lowtail_s"] / best["page_cache_read_s"],
        "floor_ratio_median": median["lowtail_s"] / median["page_cache_read_s"],
        "memory_met": None,
    }
    out["speedup_met"] = out["speedup_best"] >= TARGET_SPEEDUP
    out["overhead_s"] = best["lowtail_s"] - speed["lowtail_analysis_s"]
    out["overhead_met"] = out["overhead_s"] <= TARGET_OVERHEAD_S
    if large:
        out["large_speedup"] = large["baseline_total_s"] / large["lowtail_s"]
        out["large_speedup_met"] = out["large_speedup"] >= TARGET_LARGE_SPEEDUP
        out["large_read_ratio"] = large["lowtail_s"] / large["page_cache_read_s"]
        out["large_read_met"] = out["large_read_ratio"] <= TARGET_FLOOR_RATIO
    if "max_rss_bytes" in memory:
        out["memory_met"] = memory["max_rss_bytes"] < TARGET_RSS_BYTES
        out["large_floor_ratio"] = memory["lowtail_s"] / memory["page_cache_read_s"]
        out["large_floor_met"] = out["large_floor_ratio"] <= TARGET_FLOOR_RATIO
    return out


def yes_no(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not measured"}[met]


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def render(doc: dict) -> str:
    s, m, v = doc["speed"], doc["memory"], doc["verdicts"]
    ours = s["lowtail_s"]["best"]
    lines = [
        "lowtail analyze vs cat and the PostgreSQL baseline (2M and 20M pairs), and campaigns on 1 vs 2 Dask workers "
        "(issues 2 and 14)",
        f"  commit {doc['commit']}; {doc['cpus']} CPUs; load average {doc['load_before']} before, "
        f"{doc['load_after']} after (other work on the machine makes timings noisy)",
        f"  pair: {s['packets_per_side']:,} packets per side at {s['rate_pps']:,.0f} pps, 64-byte frames, pcap-ns "
        f"(PRE {megabytes(s['pre_bytes'])}, POST {megabytes(s['post_bytes'])}); "
        f"{s['lost']:,} lost, {s['duplicates']:,} duplicated",
        f"  model: {', '.join(f'{k}={json.dumps(val)}' for k, val in s['model'].items())}",
        f"  baseline: dpkt {s['dpkt']} → COPY → PostgreSQL {s['postgres']}, then bench/baseline.sql in psql",
        "  lowtail: `lowtail analyze PRE POST --db TMP` (default options, stored in DuckDB)",
        f"  {s['repeat']} interleaved repetitions; page-cache read = best of {FLOOR_READS} "
        f"`cat PRE POST > /dev/null` per repetition",
        "",
        f"  {'':36}{'best':>11}{'median':>11}{'÷ lowtail':>11}",
    ]
    rows = [
        ("page-cache read (cat, both files)", "page_cache_read_s"),
        ("lowtail analyze", "lowtail_s"),
        ("baseline, end to end", "baseline_total_s"),
        ("  parse + load (dpkt → COPY)", "baseline_load_s"),
        ("  SQL (psql baseline.sql)", "baseline_sql_s"),
    ]
    for label, key in rows:
        t = s[key]
        lines.append(f"  {label:36}{t['best']:>9.3f} s{t['median']:>9.3f} s{t['best'] / ours:>10.2f}×")
    lines += [
        f"  (lowtail's in-process analysis time, `elapsed_s` of its untimed --json check run: "
        f"{s['lowtail_analysis_s']:.3f} s; the timed runs add process start-up, imports, the DuckDB store)",
        "",
        f"  figures: identical (counts, min/max, 7 percentiles, histograms, worst "
        f"{ANALYSIS_DEFAULTS['worst_n']}, per-second rates; mean and stddev to 1e-12 and 1e-9)",
        "",
        "  targets (judged on best times; medians in brackets)",
    ]

    def target(label, value, met):
        return f"    {label:46}{value:>30}  met: {yes_no(met)}"

    lines += [
        target(
            f"lowtail ≥ {TARGET_SPEEDUP:.0f}× faster than the baseline",
            f"{v['speedup_best']:.1f}×  ({v['speedup_median']:.1f}×)",
            v["speedup_met"],
        ),
        target(
            f"start-up + storing ≤ {TARGET_OVERHEAD_S} s, this pair",
            f"{s['lowtail_s']['best']:.3f} − {s['lowtail_analysis_s']:.3f} s = {v['overhead_s']:.3f} s",
            v["overhead_met"],
        ),
    ]
    g = doc.get("large") or {}
    if g:
        lines += [
            target(
                f"lowtail ≥ {TARGET_LARGE_SPEEDUP:.0f}× faster, {g['packets_per_side']:,}-packet pair",
                f"{g['baseline_total_s']:.0f} s / {g['lowtail_s']:.2f} s = {v['large_speedup']:.0f}×",
                v["large_speedup_met"],
            ),
            target(
                f"lowtail ≤ {TARGET_FLOOR_RATIO:.0f}× the page-cache read, that pair",
                f"{g['lowtail_s']:.2f} s / {g['page_cache_read_s']:.3f} s = {v['large_read_ratio']:.2f}×",
                v["large_read_met"],
            ),
            f"      PRE {megabytes(g['pre_bytes'])}, POST {megabytes(g['post_bytes'])}; baseline parse + load "
            f"{g['baseline_load_s']:.0f} s, SQL {g['baseline_sql_s']:.0f} s (once); lowtail best of {LARGE_RUNS}; "
            "figures identical",
        ]
    else:
        lines.append("    the large pair: not measured (BENCH_LARGE_PACKETS=0)")
    if "max_rss_bytes" in m:
        lines += [
            target(
                f"peak RSS < {TARGET_RSS_BYTES / GiB:.0f} GiB, {m['packets_per_side']:,}-packet pair",
                f"{m['max_rss_bytes'] / GiB:.3f} GiB ({m['max_rss_bytes'] / 2**20:,.0f} MiB)",
                v["memory_met"],
            ),
            f"      at {m['rate_pps']:,.0f} pps, PRE {megabytes(m['pre_bytes'])}, POST {megabytes(m['post_bytes'])}: "
            f"lowtail analyze {m['lowtail_s']:.1f} s wall, {m['lowtail_cpu_s']:.1f} s CPU "
            f"(a pair this large may not fit the page cache); generated in {m['synth_seconds']:.0f} s",
            target(
                f"lowtail ≤ {TARGET_FLOOR_RATIO:.0f}× the page-cache read, that pair",
                f"{m['lowtail_s']:.1f} s / {m['page_cache_read_s']:.1f} s = {v['large_floor_ratio']:.1f}×",
                v["large_floor_met"],
            ),
            f"      (best of {LARGE_RUNS} runs each; start-up — Python, imports, the DuckDB store — weighs less the larger the pair)",
        ]
    elif "skipped" in m:
        lines.append(f"    peak RSS on a {m['packets_per_side']:,}-packet pair: skipped ({m['skipped']})")
    else:
        lines.append("    peak RSS: not measured (BENCH_MEMORY_PACKETS=0)")
    if doc.get("campaign"):
        lines += ["", *render_campaign(doc["campaign"])]
    return "\n".join(lines)


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def git_commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    return (r.stdout.strip() or "unknown") + ("+dirty" if dirty else "")


def raise_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so that clean-up runs as on Ctrl-C."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)
    raise_on_sigterm()
    reason = pg_baseline.postgres_available()
    if reason:
        say(f"cannot run the baseline: {reason}")
        return 1
    workdir = Path(tempfile.mkdtemp(prefix=f"lowtail-pgbench-{os.getpid()}-", dir=cfg.workdir))
    doc = {
        "commit": git_commit(),
        "cpus": os.cpu_count(),
        "load_before": load_average(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        doc["speed"] = run_speed(cfg, workdir)
        per_packet = (doc["speed"]["pre_bytes"] + doc["speed"]["post_bytes"]) / (2 * cfg.packets)
        doc["large"] = run_large(cfg, workdir) if cfg.large_packets else {}
        doc["memory"] = run_memory(cfg, workdir, per_packet) if cfg.memory_packets else {}
        doc["campaign"] = run_campaign(cfg, workdir) if cfg.campaign_pairs else {}
    except BaselineError as e:
        say(f"failed: {e}")
        return 1
    except KeyboardInterrupt:
        say("interrupted: nothing measured was kept")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    doc["load_after"] = load_average()
    doc["verdicts"] = verdicts(doc["speed"], doc["memory"], doc["large"])
    text = render(doc)
    cfg.out.mkdir(parents=True, exist_ok=True)
    stamp = doc["started"].replace(":", "").replace("+00:00", "Z").replace("+0000", "Z")
    (cfg.out / f"analyze_vs_postgres-{stamp}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (cfg.out / f"analyze_vs_postgres-{stamp}.txt").write_text(text + "\n")
    print(json.dumps(doc, indent=2) if cfg.json else text)
    say(f"results written to {cfg.out}/analyze_vs_postgres-{stamp}.{{txt,json}}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
