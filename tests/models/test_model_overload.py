"""The overload model against the URLLC studies' numbers (NOMS 2020, Tables II, IV, V), the knee of a
stored sweep, and the CLI around both."""

from __future__ import annotations

import os

import pytest
from model_helpers import add_analysis, add_experiment, add_run

from lowtail.core.errors import UserError
from lowtail.models.knee import SweepPoint, find_knee
from lowtail.models.overload import InterruptLoad, overload_model, parse_interrupt

# NOMS 2020, Table II: medians at 10 kpps (µs) of the bare forwarder (DPDK-l2fwd) and the applications,
# and the last rate without overload / first overloaded rate (kpps).
TABLE_II = {
    ("Snort-fwd", "HW"): {"base": 3.1, "e2e": 14.5, "last_ok": 80, "overloaded": 90},
    ("Snort-fwd", "VM"): {"base": 3.3, "e2e": 15.9, "last_ok": 80, "overloaded": 90},
    ("Snort-filter", "HW"): {"base": 3.1, "e2e": 17.4, "last_ok": 60, "overloaded": 70},
    ("Snort-filter", "VM"): {"base": 3.3, "e2e": 18.4, "last_ok": 60, "overloaded": 70},
}
# NOMS 2020, Table V: interrupts on the processing core (rate Hz, duration µs) and d_Σ (µs per s).
TABLE_V = {
    "HW": ([(166.7, 10.9), (83.3, 13.6)], 2949.9),
    "VM": ([(166.7, 17.5), (83.3, 19.2), (250.0, 17.5)], 8891.6),
}
# NOMS 2020, Table IV: t_CPU (µs) and R_max (kpps).
TABLE_IV = {
    ("Snort-fwd", "HW"): (11.4, 87.4),
    ("Snort-fwd", "VM"): (12.6, 78.7),
    ("Snort-filter", "HW"): (14.3, 69.7),
    ("Snort-filter", "VM"): (15.1, 65.6),
}


@pytest.mark.parametrize("scenario", sorted(TABLE_IV))
def test_table_iv_follows_from_tables_ii_and_v(scenario):
    app, mode = scenario
    measured = TABLE_II[scenario]
    irqs, d_sum_us = TABLE_V[mode]
    doc = overload_model(measured["base"] * 1e3, measured["e2e"] * 1e3, [InterruptLoad(r, d * 1e3) for r, d in irqs])
    t_cpu_us, r_max_kpps = TABLE_IV[scenario]
    assert doc["d_sum_ns_per_s"] / 1e3 == pytest.approx(d_sum_us, abs=0.05)
    assert doc["t_cpu_ns"] / 1e3 == pytest.approx(t_cpu_us, abs=1e-9)
    # The paper prints one decimal (87.46 appears as 87.4, 78.66 as 78.7).
    assert abs(doc["r_max_pps"] / 1e3 - r_max_kpps) <= 0.1


@pytest.mark.parametrize("scenario", sorted(TABLE_IV))
def test_r_max_is_a_lower_bound_of_the_measured_overload(scenario):
    """The URLLC studies' conclusion: R_max predicts the overload in three of four scenarios and
    is never above the first overloaded rate."""
    measured = TABLE_II[scenario]
    irqs, _ = TABLE_V[scenario[1]]
    r_max = (
        overload_model(measured["base"] * 1e3, measured["e2e"] * 1e3, [InterruptLoad(r, d * 1e3) for r, d in irqs])[
            "r_max_pps"
        ]
        / 1e3
    )
    assert r_max < measured["overloaded"]
    if scenario != ("Snort-fwd", "VM"):
        assert r_max > measured["last_ok"]


def test_interrupt_words():
    assert parse_interrupt("166.7Hz:10.9us") == InterruptLoad(166.7, 10_900)
    assert parse_interrupt("loc=250Hz:5.5us") == InterruptLoad(250.0, 5_500, "loc")
    for bad in ("250", "x:5us", "250Hz:abc", "-3Hz:5us", "166.7:10.9us", "loc=250Hz:5.5"):
        with pytest.raises(UserError):
            parse_interrupt(bad)


def test_cli_overload_example_of_the_issue(cli, db, tmp_path):
    plot = tmp_path / "overload.png"
    r = cli(
        "model",
        "overload",
        "--t-transfer",
        "3.1us",
        "--t-e2e",
        "14.5us",
        "--irq",
        "166.7Hz:10.9us",
        "--irq",
        "83.3Hz:13.6us",
        "--json",
        "--db",
        db,
        "--plot",
        plot,
    )
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["t_cpu_ns"] == 11_400
    assert doc["d_sum_ns_per_s"] == pytest.approx(166.7 * 10_900 + 83.3 * 13_600)
    assert doc["r_max_pps"] == pytest.approx((1e9 - doc["d_sum_ns_per_s"]) / 11_400)
    assert plot.stat().st_size > 10_000
    shown = cli("model", "list", "--db", db, "--json").json()
    assert shown[0]["kind"] == "overload" and shown[0]["model_id"] == doc["model_id"]


def test_cli_overload_table_has_units(cli, db):
    r = cli(
        "model",
        "overload",
        "--t-transfer",
        "3.3us",
        "--t-e2e",
        "18.4us",
        "--irq",
        "166.7Hz:17.5us",
        "--irq",
        "83.3Hz:19.2us",
        "--irq",
        "250Hz:17.5us",
        "--no-store",
    )
    assert r.code == 0, r.err
    assert "15.100 µs" in r.out and "65.6 kpps" in r.out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--t-transfer", "14.5us", "--t-e2e", "3.1us"], "not above the bare forwarder"),
        # Medians in the unit that reads best ("2500.000 µs" before).
        (["--t-transfer", "2.5ms", "--t-e2e", "2ms"], "median (2.000 ms) is not above the bare forwarder's (2.500 ms)"),
        (["--t-transfer", "3.1us", "--t-e2e", "14.5us", "--irq", "1000000Hz:2us"], "no time for packets"),
        (
            ["--t-transfer", "3.1us", "--t-e2e", "14.5us", "--irq", "often:2us"],
            "cannot read 'often' as a rate of events",
        ),
        (["--t-e2e", "14.5us"], "--t-transfer or --baseline-run"),
    ],
)
def test_cli_overload_bad_input(cli, db, args, message):
    r = cli("model", "overload", *args, "--db", db)
    assert r.code == 2
    assert message in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


# -- the knee ------------------------------------------------------------------------------

# NOMS 2020, Table II, Snort-fwd (HW): loss and percentiles (µs) at three rates; the sweep adds the
# flat rates in between as the paper describes them.
SNORT_FWD_HW = [
    (10_000, 0.0, 14.5, 24.7, 33.1),
    (20_000, 0.0, 14.5, 25.0, 35.0),
    (40_000, 0.0, 14.5, 26.0, 38.0),
    (60_000, 0.0, 14.4, 28.0, 44.0),
    (80_000, 0.001, 14.4, 29.9, 47.7),
    (90_000, 0.033, 30_609.5, 30_834.8, 30_936.1),
    (100_000, 0.1, 31_000.0, 31_200.0, 31_300.0),
]


def _sweep_points():
    return [
        SweepPoint(
            i,
            rate,
            1_000_000,
            round(loss * 1_000_000),
            round(p50 * 1e3),
            round(p99 * 1e3),
            round(p5 * 1e3),
            round(p5 * 1e3),
        )
        for i, (rate, loss, p50, p99, p5) in enumerate(SNORT_FWD_HW)
    ]


def test_knee_of_the_noms_2020_sweep():
    knee = find_knee(_sweep_points())
    assert knee["knee_pps"] == 90_000 and knee["last_ok_pps"] == 80_000
    by_rate = {r["rate_pps"]: r for r in knee["rates"]}
    # 0.1 % start-up loss at 80 kpps is not overload; 90 kpps is, on both counts.
    assert not by_rate[80_000]["overloaded"]
    assert len(by_rate[90_000]["reasons"]) == 2


def test_knee_latency_growth_alone_counts():
    points = [SweepPoint(1, 10, 100, 0, 10, 20, 30, 30), SweepPoint(2, 20, 100, 0, 10, 250, 300, 300)]
    assert find_knee(points)["knee_pps"] == 20
    assert find_knee(points, growth_limit=20)["knee_pps"] is None


def _stored_sweep(store, rows=SNORT_FWD_HW, dut="snort"):
    eid = add_experiment(store)
    for rate, loss, p50, p99, p5 in rows:
        aid = add_analysis(
            store,
            sent=100_000,
            lost=round(loss * 100_000),
            p50=round(p50 * 1e3),
            p99=round(p99 * 1e3),
            p99_999=round(p5 * 1e3),
        )
        add_run(store, eid, dut_name=dut, dut_kind="custom", rate_pps=rate, analysis_id=aid)
    return eid


def test_cli_knee_on_a_stored_sweep_with_r_max(cli, db, store_at, tmp_path):
    with store_at() as s:
        eid = _stored_sweep(s)
        baseline_eid = add_experiment(s, "bare")
        base_run = add_run(
            s,
            baseline_eid,
            dut_name="l2fwd",
            dut_kind="custom",
            analysis_id=add_analysis(s, sent=100_000, lost=0, p50=3_100, p99=3_400, min_ns=2_900),
        )
        app_run = s.con.execute("SELECT min(run_id) FROM runs WHERE experiment_id = ?", [eid]).fetchone()[0]
    r = cli(
        "model",
        "overload",
        "--baseline-run",
        base_run,
        "--app-run",
        app_run,
        "--irq",
        "166.7Hz:10.9us",
        "--irq",
        "83.3Hz:13.6us",
        "--db",
        db,
        "--json",
    )
    assert r.code == 0, r.err
    assert r.json()["r_max_pps"] == pytest.approx(87_460, abs=5)
    # On a busy host even the lowest rate queues: the minimum is the uncontended path.
    r = cli(
        "model",
        "overload",
        "--baseline-run",
        base_run,
        "--app-run",
        app_run,
        "--statistic",
        "min",
        "--db",
        db,
        "--json",
        "--no-store",
    )
    assert r.code == 0, r.err
    assert r.json()["statistic"] == "min" and r.json()["t_cpu_ns"] == 14_500 - 2_900
    plot, report = tmp_path / "knee.png", tmp_path / "sweep.html"
    r = cli("model", "knee", eid, "--db", db, "--json", "--plot", plot, "--report", report)
    assert r.code == 0, r.err
    (doc,) = r.json()
    assert doc["dut"] == "snort" and doc["knee_pps"] == 90_000 and doc["last_ok_pps"] == 80_000
    assert doc["r_max_pps"] == pytest.approx(87_460, abs=5)
    assert plot.stat().st_size > 10_000
    html = report.read_text()
    assert "R_max" in html and "90 kpps" in html and "class='lt-plot-spec'" in html


def test_cli_knee_latest_is_the_newest_sweep_of_a_dut_not_a_calibration(cli, db, store_at):
    with store_at() as s:
        eid = _stored_sweep(s)
        wire_only = add_experiment(s, "calibration")  # what `lowtail calibrate` stores
        aid = add_analysis(s, sent=100_000, lost=0, p50=3_000, p99=4_000)
        add_run(s, wire_only, dut_name="wire", dut_kind="wire", analysis_id=aid)
        s.con.execute("UPDATE runs SET calibration = true WHERE experiment_id = ?", [wire_only])
    r = cli("model", "knee", "--db", db, "--json", "--no-store")
    assert r.code == 0, r.err
    assert {doc["experiment_id"] for doc in r.json()} == {eid} and eid < wire_only


def test_cli_knee_bad_experiment(cli, db, store_at):
    with store_at():  # an empty database
        pass
    r = cli("model", "knee", "--db", db)
    assert r.code == 2 and "holds no experiment with a valid run of a DuT" in r.err
    with store_at() as s:
        add_experiment(s)
    r = cli("model", "knee", "999", "--db", db)
    assert r.code == 2 and "none of its experiments has id 999" in r.err
    r = cli("model", "knee", "1", "--db", db)
    assert r.code == 2 and "no valid analysed runs" in r.err


def test_experiment_report_shows_the_knee_and_r_max(cli, db, store_at, tmp_path):
    """The sweep's own report (lowtail experiment report) carries the latency-versus-rate plot."""
    from lowtail.experiment.page import write_experiment_report
    from lowtail.models.knee import store_sweep_knees

    with store_at() as s:
        eid = _stored_sweep(s)
        store_sweep_knees(s, eid)  # the model step `lowtail run` ends with (the report only reads)
        app_run = s.con.execute("SELECT min(run_id) FROM runs WHERE experiment_id = ?", [eid]).fetchone()[0]
    r = cli(
        "model",
        "overload",
        "--t-transfer",
        "3.1us",
        "--app-run",
        app_run,
        "--irq",
        "166.7Hz:10.9us",
        "--irq",
        "83.3Hz:13.6us",
        "--db",
        db,
    )
    assert r.code == 0, r.err
    html = write_experiment_report(db, eid, tmp_path / "exp.html").read_text()
    assert "Latency versus rate — snort" in html
    assert "measured knee (first overloaded rate): <b>90 kpps</b>" in html and "R_max: <b>87.5 kpps</b>" in html


def test_experiment_report_reads_the_knee_and_says_when_none_is_stored(db, store_at, tmp_path):
    """The report draws only what is stored: without a stored knee it says how to find one,
    and once the model step has run, the knee it stored (the DuT swept at one rate has none)."""
    from lowtail.experiment.page import write_experiment_report
    from lowtail.models.knee import store_sweep_knees
    from lowtail.store.models import list_models

    with store_at() as s:
        eid = _stored_sweep(s)
        single = add_analysis(s, sent=100_000, lost=0, p50=3_000, p99=4_000)
        add_run(s, eid, dut_name="l2fwd", dut_kind="custom", rate_pps=10_000, analysis_id=single)
    html = write_experiment_report(db, eid, tmp_path / "before.html").read_text()
    assert "Latency versus rate — snort" in html and f"lowtail model knee {eid}" in html
    assert "measured knee" not in html and "Latency versus rate — l2fwd" not in html
    with store_at() as s:
        store_sweep_knees(s, eid)
        knees = list_models(s, "knee")
    assert [k["dut_name"] for k in knees] == ["snort"] and knees[0]["result"]["knee_pps"] == 90_000
    html = write_experiment_report(db, eid, tmp_path / "after.html").read_text()
    assert "measured knee (first overloaded rate): <b>90 kpps</b>" in html


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0), reason="probes CPU 1")
def test_cli_overload_takes_the_profile_lowtail_noise_prints(cli, db, tmp_path):
    """`lowtail noise --json` on this machine, then its document as --irq-profile: the
    probed core's kinds with a duration, d_Σ as the noise probe computed it."""
    probe = cli(
        *("noise", "--cpus", "1", "--housekeeping", "0", "--duration", "1s", "--sample-interval", "100ms"),
        *("--no-store", "--json"),
    )
    assert probe.code == 0, probe.err
    profile = tmp_path / "noise.json"
    profile.write_text(probe.out)
    (core,) = probe.json()["cores"]
    timed = {k: v for k, v in core["interrupts"].items() if v["typical_ns"] is not None}
    args = ["model", "overload", "--t-transfer", "3.1us", "--t-e2e", "14.5us", "--no-store", "--json"]
    r = cli(*args, "--irq-profile", profile)
    if not timed:
        assert r.code == 2 and "no interrupt kind with a duration on core 1" in r.err, r.err
        return
    assert r.code == 0, r.err
    doc = r.json()
    assert {i["kind"] for i in doc["interrupts"]} == set(timed)
    assert doc["d_sum_ns_per_s"] == pytest.approx(core["d_sum_ns_per_s"])
    # The probed core, named: the same; another: said which there are.
    assert cli(*args, "--irq-profile", profile, "--irq-cpu", "1").json()["d_sum_ns_per_s"] == doc["d_sum_ns_per_s"]
    other = cli(*args, "--irq-profile", profile, "--irq-cpu", "0")
    assert other.code == 2 and "probed core 1 only" in other.err


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"cores": []}', "probed no core"),
        ('{"cores": [{"cpu": 1, "interrupts": null}]}', "without interrupts"),
        ('{"cpus": [1], "cores": 3}', "every entry needs rate_hz and duration_ns"),
        ("[1, 2]", "every entry needs rate_hz and duration_ns"),
        ('{"loc": 5}', "every entry needs rate_hz and duration_ns"),
    ],
)
def test_cli_overload_bad_profiles_are_one_line(cli, db, tmp_path, content, message):
    profile = tmp_path / "p.json"
    profile.write_text(content)
    r = cli("model", "overload", "--t-transfer", "3.1us", "--t-e2e", "14.5us", "--no-store", "--irq-profile", profile)
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_cli_knee_keeps_each_configuration_of_a_dut_its_own_sweep(cli, db, store_at):
    """Issue 22: `model knee` grouped runs by DuT name only, so a vanilla-guest and an
    rt-guest sweep of one VM DuT became one (p50 from one, p99.999 from the other)."""
    with store_at() as s:
        eid = add_experiment(s)
        for guest, p99 in (("vanilla", 40_000), ("rt", 9_000)):
            for rate in (10_000, 20_000):
                aid = add_analysis(s, sent=100_000, lost=0, p50=5_000, p99=p99, p99_999=p99 * 2)
                add_run(s, eid, dut_name="vm", dut_config={"guest_kernel": guest}, rate_pps=rate, analysis_id=aid)
    r = cli("model", "knee", eid, "--db", db, "--json", "--no-store")
    assert r.code == 0, r.err
    docs = {doc["dut"]: doc for doc in r.json()}
    assert set(docs) == {"vm · guest_kernel vanilla", "vm · guest_kernel rt"}, set(docs)
    for name, doc in docs.items():
        # Each sweep holds its own two rates, one run each.
        assert [row["rate_pps"] for row in doc["rates"]] == [10_000, 20_000], (name, doc["rates"])


def test_cli_knee_says_when_an_overloaded_rate_rests_on_a_degraded_run(cli, db, store_at):
    """make run's fwd sweep: "overloaded: p99 125× the lowest rate's" at 100 kpps, on a run
    whose generator stalled 6 ms: the table says the host may be the cause."""
    with store_at() as s:
        eid = _stored_sweep(s)
        knee_run = s.con.execute(
            "SELECT r.run_id FROM runs r WHERE experiment_id = ? AND rate_pps = 90000", [eid]
        ).fetchone()[0]
        s.con.execute(
            "UPDATE runs SET degraded_reasons = ? WHERE run_id = ?", ['["generator stalled 6.349 ms"]', knee_run]
        )
    r = cli("model", "knee", eid, "--db", db, "--json", "--no-store")
    assert r.code == 0, r.err
    (doc,) = r.json()
    by_rate = {row["rate_pps"]: row for row in doc["rates"]}
    assert by_rate[90_000]["degraded_runs"] == [knee_run] and by_rate[80_000]["degraded_runs"] == []
    r = cli("model", "knee", eid, "--db", db, "--no-store")
    assert r.code == 0, r.err
    assert "(on a degraded run: the host may be the cause)" in " ".join(r.out.split()), r.out
