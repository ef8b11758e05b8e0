"""The device simulation from Python and the CLI: exact percentiles, the URLLC studies' batch
staircases (NOMS 2020, §V-D), drops at capacity, the knee it predicts, and the comparison with a
stored lowtail-fwd run."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from model_helpers import add_experiment, add_run, synth_and_analyze

from lowtail.core.errors import UserError
from lowtail.core.series import COLUMNS as SERIES_COLUMNS
from lowtail.models import simulate as sim


def test_nearest_rank_is_percentile_disc():
    values = np.arange(1, 11)
    quantiles = [Fraction(q) for q in ("0", "0.1", "0.15", "0.5", "0.99", "1")]
    assert [sim.nearest_rank(values, q) for q in quantiles] == [1, 1, 2, 5, 10, 10]
    # 99.9 % of 1000 values is the 999th, also when the percentile was typed as 99.9
    assert sim.nearest_rank(np.arange(1, 1001), Fraction("99.9") / 100) == 999


def test_staircases_of_the_noms_2020_batch_figure():
    """Snort-like: 15 µs per packet, batch 32, 10 kpps in bursts of 1 … 64 packets back to
    back. Each burst leaves in steps: one latency per batch, 64 packets in two steps of 32."""
    cdfs = {}
    for burst in (1, 4, 16, 32, 64):
        o = sim.run(
            {
                "packets": 64 * 200,
                "rate_pps": 10_000,
                "burst": burst,
                "batch": 32,
                "service": {"kind": "constant", "ns": 15_000},
            }
        )
        lat = o.latencies()
        values, counts = np.unique(lat, return_counts=True)
        cdfs[burst] = dict(zip(values.tolist(), counts.tolist()))
    assert cdfs[1] == {15_000: 64 * 200}
    # A burst taken whole: every packet waits for the whole batch.
    assert cdfs[16] == {16 * 15_000: 64 * 200}
    assert cdfs[64] == {32 * 15_000: 32 * 200, 64 * 15_000: 32 * 200}
    # Larger bursts, higher median: the blocking batch raises it (NOMS 2020, §V-D).
    medians = [np.median(np.repeat(list(c), list(c.values()))) for c in (cdfs[b] for b in (1, 4, 16, 32, 64))]
    assert medians == sorted(medians)


def test_small_batches_turn_the_staircase_into_a_line():
    """NOMS 2020, Fig. 5b: with batch 4 a 64-packet burst leaves in 16 equal steps, a CDF that grows
    linearly, and a lower median than with batch 32 (510 µs against 720 µs)."""
    spec = {"packets": 64 * 100, "rate_pps": 10_000, "burst": 64, "service": {"kind": "constant", "ns": 15_000}}
    lat4 = sim.run({**spec, "batch": 4}).latencies()
    values, counts = np.unique(lat4, return_counts=True)
    assert list(values) == [4 * 15_000 * k for k in range(1, 17)] and set(counts) == {400}
    assert np.median(lat4) < 0.75 * np.median(sim.run({**spec, "batch": 32}).latencies())


def test_first_packets_of_a_spread_burst_leave_early():
    """Back-to-back on a real wire is 67 ns apart: the first poll finds one packet, so a few
    packets of every burst have a low latency (the URLLC studies' 'few packets with lower latency')."""
    o = sim.run(
        {
            "packets": 32 * 100,
            "rate_pps": 10_000,
            "burst": 32,
            "burst_gap_ns": 67.2,
            "batch": 32,
            "service": {"kind": "constant", "ns": 15_000},
        }
    )
    lat = o.latencies().reshape(100, 32)
    assert (lat[:, 0] == 15_000).all() and (lat[:, 1:] > 15 * 15_000).all()


def test_poisson_queue_matches_mm1():
    o = sim.run(
        {
            "packets": 300_000,
            "rate_pps": 500_000,
            "arrivals": "poisson",
            "seed": 11,
            "service": {"kind": "exponential", "mean_ns": 1_000},
        }
    )
    figures = sim.latency_figures(o.latencies())
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert figures[key] == pytest.approx(-math.log(1 - q) / 0.5e-3, rel=0.05)


def test_predicted_knee_is_r_max_of_the_overload_model():
    """Work 20 µs per packet plus 250 Hz × 8 µs of interrupts: R_max = (1 s − 2 ms)/20 µs =
    49.9 kpps. Below it the queue stays short; above it the latency grows without bound."""
    from lowtail.models.overload import InterruptLoad, overload_model

    r_max = overload_model(0, 20_000, [InterruptLoad(250, 8_000)])["r_max_pps"]
    assert r_max == pytest.approx(49_900)
    p99 = {}
    for rate in (45_000, 49_000, 51_000, 55_000):
        o = sim.run(
            {
                "packets": 100_000,
                "rate_pps": rate,
                "service": {"kind": "constant", "ns": 20_000},
                "interrupts": [{"rate_hz": 250, "durations_ns": [8_000]}],
                "queue_capacity": 512,
            }
        )
        s = sim.summarize(o)
        p99[rate] = (s["latency_ns"]["p99"], s["loss"])
    assert p99[45_000][0] < 100_000 and p99[49_000][0] < 1_000_000 and p99[49_000][1] == 0
    assert p99[51_000][1] > 0.01 and p99[55_000][1] > 0.05
    assert p99[55_000][0] > 512 * 20_000 * 0.9


def test_service_and_interrupt_words():
    assert sim.parse_service("20us") == {"kind": "constant", "ns": 20_000}
    assert sim.parse_service("uniform:10us:30us") == {"kind": "uniform", "min_ns": 10_000, "max_ns": 30_000}
    assert sim.parse_service("lognormal:20us:0.3") == {"kind": "lognormal", "median_ns": 20_000, "sigma": 0.3}
    assert sim.parse_irq("250Hz:5.5us,8.2us") == {
        "rate_hz": 250.0,
        "durations_ns": [5_500, 8_200],
        "poisson": False,
        "phase_ns": 0,
    }
    assert sim.parse_irq("poisson@1kHz:2us@1ms")["poisson"] and sim.parse_irq("250Hz:5us@1ms")["phase_ns"] == 1_000_000
    for bare in ("250:5us", "250Hz:5", "250Hz:5us@1"):
        with pytest.raises(UserError, match="has no unit"):
            sim.parse_irq(bare)
    for bare in ("20", "exp:20", "uniform:10us:30"):
        with pytest.raises(UserError, match="has no unit"):
            sim.parse_service(bare)


def test_cli_simulate_drops_at_capacity(cli, db, tmp_path):
    plot, series = tmp_path / "sim.png", tmp_path / "sim.parquet"
    r = cli(
        "model",
        "simulate",
        "--rate",
        "100000pps",
        "--service",
        "12us",
        "--queue",
        "64",
        "--packets",
        "60000",
        "--json",
        "--db",
        db,
        "--plot",
        plot,
        "--export",
        series,
    )
    assert r.code == 0, r.err
    (case,) = r.json()["cases"]
    assert case["result"]["loss"] == pytest.approx(1 / 6, abs=0.003)
    assert case["result"]["latency_ns"]["p99"] <= 66 * 12_000
    assert plot.stat().st_size > 10_000
    import pyarrow.parquet as pq

    t = pq.read_table(series)
    assert t.column_names == list(SERIES_COLUMNS) and t.num_rows == case["result"]["delivered"]


def test_cli_simulate_says_the_rate_it_used_by_default(cli):
    """No --rate: the table says the spec's default rate it simulated (it said none)."""
    r = cli("model", "simulate", "--packets", "2000", "--no-store")
    assert r.code == 0, r.err
    assert r.out.startswith("predicted at 10 kpps (2,000 packets per case)"), r.out


def test_cli_simulate_exports_csv_as_it_exports_parquet(cli, tmp_path):
    import csv

    import pyarrow.parquet as pq

    args = ["model", "simulate", "--rate", "50kpps", "--service", "5us", "--packets", "5000", "--no-store", "--export"]
    parquet, table_csv = tmp_path / "sim.parquet", tmp_path / "sim.csv"
    assert cli(*args, parquet).code == 0
    r = cli(*args, table_csv)
    assert r.code == 0, r.err
    assert f"wrote {table_csv}" in r.err and not list(tmp_path.glob(".*"))
    t = pq.read_table(parquet)
    with open(table_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == t.column_names and len(rows) == t.num_rows
    assert [int(rows[-1][k]) for k in t.column_names] == [t.column(k)[-1].as_py() for k in t.column_names]


def test_cli_simulate_grid_and_table(cli, db):
    r = cli(
        "model",
        "simulate",
        "--burst",
        "1,64",
        "--batch",
        "4,32",
        "--service",
        "15us",
        "--packets",
        "6400",
        "--no-store",
    )
    assert r.code == 0, r.err
    assert "burst 64, batch 32" in r.out and "960.0 µs" in r.out


def test_cli_simulate_compared_with_a_stored_fwd_run(cli, db, tmp_path, store_at):
    """A run that behaves as the model says (constant 20 µs plus a fixed path, synthesised):
    with the base latency fitted at the median, every percentile agrees within the jitter."""
    a = synth_and_analyze(
        tmp_path, db, cli, "fwd", "base_latency_ns=25000", "jitter_ns=30", packets=50_000, rate=10_000
    )
    with store_at() as s:
        run_id = add_run(
            s,
            add_experiment(s),
            dut_kind="lowtail-fwd",
            dut_config={"work_ns": 20_000, "batch": 1},
            rate_pps=10_000,
            analysis_id=a["analysis_id"],
        )
    r = cli("model", "simulate", "--run", run_id, "--db", db, "--json")
    assert r.code == 0, r.err
    comp = r.json()["comparison"]
    assert comp["base_latency_source"] == "fitted at the median" and comp["work_ns"] == 20_000
    rows = {row["percentile"]: row for row in comp["rows"]}
    assert rows["p50"]["difference_ns"] == 0
    assert abs(rows["p99"]["difference_ns"]) < 200 and rows["max"]["measured_ns"] > rows["max"]["predicted_ns"]
    assert comp["measured_loss"] == 0 and comp["predicted_loss"] == 0
    r = cli("model", "simulate", "--run", run_id, "--db", db)
    assert r.code == 0 and "measured" in r.out and "predicted" in r.out
    # Percentiles as every table heads them ("p99_9" before: a key, not words).
    headings = [line.split("  ")[0].strip() for line in r.out.splitlines()]
    assert "99.9 %" in headings and "50 %" in headings and not any(h.startswith("p99_") for h in headings)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--service", "gauss:3"], "Invalid value for '--service': 'gauss:3': expected"),
        (["--burst", "0"], "values must be positive"),
        (["--irq", "250"], "'250': expected RATE:DURATION"),
        (["--rate", "1kpps", "--burst", "10", "--burst-gap", "2ms"], "lasts longer than"),
        (["--arrivals", "bursty"], "cbr or poisson"),
    ],
)
def test_cli_simulate_bad_input(cli, db, args, message):
    r = cli("model", "simulate", *args, "--db", db)
    assert r.code == 2 and message in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1


def test_cli_simulate_run_must_be_a_forwarder(cli, db, store_at, tmp_path):
    from model_helpers import add_analysis

    with store_at() as s:
        aid = add_analysis(s, sent=1000, lost=0, p50=5_000, p99=6_000)
        run_id = add_run(s, add_experiment(s), dut_kind="bridge", analysis_id=aid)
    r = cli("model", "simulate", "--run", run_id, "--db", db)
    assert r.code == 2 and "needs a lowtail-fwd run" in r.err


def test_cli_simulate_plot_draws_cases_whose_latency_is_constant(cli, db):
    """The staircase's burst 1 and 16 (one latency each): a CDF that rises at one value
    must still be drawn, as the vertical step it is."""
    from lowtail.models.page import simulate_figure

    args = ["model", "simulate", "--burst", "1,16,64", "--batch", "32", "--service", "15us", "--packets", "6400"]
    doc = cli(*args, "--no-store", "--json").json()
    constant = [c["label"] for c in doc["cases"] if len(c["result"]["cdf"]) == 1]
    assert len(constant) == 2
    figure = simulate_figure(doc)
    drawn = {trace.name: trace for trace in figure.data}
    for label in constant:
        ys = list(drawn[label].y)
        assert min(ys) == 0.0 and max(ys) == 1.0, label  # from none to all packets at its one latency


def test_cli_simulate_plot_into_a_missing_directory_creates_nothing(cli, db, tmp_path):
    """`--plot /nonexistent/p.png` is the user's mistake: one line, exit 2, and no new
    directory (the plot used to create the whole missing tree)."""
    plot = tmp_path / "nonexistent" / "sim.png"
    r = cli("model", "simulate", "--service", "12us", "--packets", "1000", "--db", db, "--plot", plot)
    assert r.code == 2, r.err
    assert "does not exist" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not plot.parent.exists()
