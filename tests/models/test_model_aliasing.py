"""Interrupt/traffic aliasing: the URLLC studies' 250 Hz against 10 kpps pattern, its period as
the beat frequency predicts, and the overlay on a real (synthetic-capture) run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from model_helpers import add_experiment, add_run, synth_and_analyze

from lowtail.core.errors import UserError
from lowtail.models import aliasing as al


def _episodes(times_s: np.ndarray) -> np.ndarray:
    """Start times of the bursts of hits: gaps much longer than the spacing inside one."""
    gaps = np.diff(times_s)
    long = gaps > 20 * np.median(gaps)
    return np.r_[times_s[0], times_s[1:][long]]


@pytest.mark.parametrize("rate, period_s", [(10_000.5, 2.0), (10_001.0, 1.0), (9_999.75, 4.0)])
def test_pattern_repeats_with_the_beat_period(rate, period_s):
    spec = al.AliasingSpec(rate_pps=rate, duration_s=20.0, worst=100_000)
    doc = al.simulate(spec)
    assert doc["pattern_period_s"] == pytest.approx(period_s)
    w = np.array(doc["worst"])
    hits = w[w[:, 1] > spec.base_latency_ns]
    starts = _episodes(hits[:, 0] / 1e9)
    assert np.median(np.diff(starts)) == pytest.approx(period_s, rel=0.01)


def test_the_stored_spec_is_every_parameter_of_the_model():
    # AliasingSpec.as_document writes its fields out for the typed document: one left out
    # (or a field added to the spec and not to the document) would be lost from stored results.
    spec = al.AliasingSpec(rate_pps=10_001.0, irq_durations_ns=[4_000.0], service_ns=700.0, jitter_ns=5.0, seed=3)
    assert al.simulate(dataclasses.replace(spec, duration_s=0.1))["spec"] == dataclasses.asdict(
        dataclasses.replace(spec, duration_s=0.1)
    )


def test_the_papers_parameters_give_two_regular_sawtooth_lines():
    """250 Hz interrupts of 5.5/8.2 µs against 10 kpps (Commun. Mag. 2020, §V-B; NOMS 2020, §V-C): every delayed packet
    lies on one of two lines, starting at base + 5.5 µs and base + 8.2 µs, falling linearly."""
    spec = al.AliasingSpec(rate_pps=10_000.5, duration_s=30.0)
    doc = al.simulate(spec)
    assert doc["undersampled"] and doc["harmonic"] == 40
    w = np.array(doc["worst"])
    hits = w[w[:, 1] > spec.base_latency_ns]
    excess = hits[:, 1] - spec.base_latency_ns
    # Interrupt k (from 0 at the first packet) lasts 5.5 µs when k is even, 8.2 µs when odd.
    odd = np.floor(hits[:, 0] / 4e6) % 2 == 1
    assert 8_000 < excess[odd].max() <= 8_200 and 5_300 < excess[~odd].max() <= 5_500
    # Within one episode each line rises by the same step per interrupt of its kind: the packet
    # grid slides by (f_pkt/f_irq − 40) · 100 µs = 0.2 µs per interrupt, 0.4 µs per 8 ms.
    # (The packet at time 0 meets the first interrupt: the first full episode starts later.)
    t1 = hits[hits[:, 0] > 0.1e9, 0].min()
    episode = (hits[:, 0] >= t1) & (hits[:, 0] < t1 + 0.5e9)
    for line in (hits[episode & odd], hits[episode & ~odd]):
        coef = np.polyfit(line[:, 0], line[:, 1], 1)
        assert abs(coef[0] * 8e6) == pytest.approx(400, rel=0.01)
        assert np.abs(line[:, 1] - np.polyval(coef, line[:, 0])).max() < 1.0


def test_locked_clocks_give_flat_lines():
    # Each interrupt starts 2 µs before a packet arrives, every time.
    doc = al.simulate(al.AliasingSpec(rate_pps=10_000.0, irq_phase_ns=98_000.0, duration_s=5.0))
    assert doc["pattern_period_s"] is None
    w = np.array(doc["worst"])
    assert set(np.unique(w[w[:, 1] > 3_100, 1])) == {3_100 + 5_500 - 2_000, 3_100 + 8_200 - 2_000}


def test_an_interrupt_during_processing_delays_by_its_length():
    spec = al.AliasingSpec(irq_durations_ns=[5_000.0], service_ns=1_000.0, base_latency_ns=0.0)
    t = np.array([3_999_500.0, 4_000_500.0, 10_000.0])  # interrupt at 4 ms: during, after start, far away
    assert list(al.latency_at(t, spec)) == [1_000 + 5_000, 1_000 + 4_500, 1_000]


def test_fit_recovers_an_interrupt_clock_from_its_worst_events():
    true = al.AliasingSpec(
        rate_pps=10_000.5, irq_rate_hz=250.0 * (1 + 40e-6), irq_phase_ns=1_234_567.0, duration_offset=1
    )
    times = np.arange(300_000) * 1e9 / 10_000.5
    lat = al.latency_at(times, true) + np.random.default_rng(1).exponential(100.0, len(times))
    worst = np.argsort(lat)[-5000:]
    fit = al.fit_interrupt_clock(times[worst], lat[worst], al.AliasingSpec(rate_pps=10_000.5))
    assert fit["offset_ppm"] == pytest.approx(40.0, abs=0.05)
    assert fit["irq_phase_ns"] == pytest.approx(1_234_567.0, abs=300)
    assert fit["duration_offset"] == 1 and fit["median_error_ns"] < 200


def test_cli_aliasing_overlay_on_a_stored_run(cli, db, tmp_path, store_at):
    """Synthetic captures with 250 Hz interrupts of 5.5/8.2 µs at 10 000.5 pps, analysed:
    the fitted clock is the synthesiser's 250 Hz and the model matches the measured events."""
    a = synth_and_analyze(
        tmp_path,
        db,
        cli,
        "irq",
        "irq_period_ns=4000000",
        "irq_durations_ns=[5500,8200]",
        "base_latency_ns=3100",
        "jitter_ns=50",
        packets=120_000,
        rate=10_000.5,
    )
    with store_at() as s:
        run_id = add_run(s, add_experiment(s), dut_kind="custom", rate_pps=10_000, analysis_id=a["analysis_id"])
    plot = tmp_path / "alias.png"
    r = cli("model", "aliasing", "--run", run_id, "--db", db, "--json", "--plot", plot)
    assert r.code == 0, r.err
    doc = r.json()
    assert abs(doc["fit"]["offset_ppm"]) < 2 and doc["fit"]["median_error_ns"] < 300
    assert doc["model"]["beat_hz"] == pytest.approx(0.5, abs=0.02)
    assert plot.stat().st_size > 10_000
    r = cli("model", "aliasing", "--duration", "5s", "--no-store")
    assert r.code == 0, r.err
    assert "beat 0 Hz" in r.out and "pattern period ∞" in r.out


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_locked_clocks_are_fitted_as_locked(cli, db, tmp_path, store_at):
    """100 kpps against 250 Hz exactly (400 packets per interrupt, every interrupt at a
    packet's arrival): the delayed packets form flat lines, and so must the fitted model,
    as the nominal clock without a fit does (the fit once found -9.1 ppm and a 5.6 µs error)."""
    a = synth_and_analyze(
        tmp_path,
        db,
        cli,
        "locked",
        "irq_period_ns=4000000",
        "irq_durations_ns=[5500,8200]",
        "base_latency_ns=3100",
        "jitter_ns=50",
        packets=400_000,
        rate=100_000.0,
    )
    with store_at() as s:
        run_id = add_run(s, add_experiment(s), dut_kind="custom", rate_pps=100_000, analysis_id=a["analysis_id"])
    fitted = cli("model", "aliasing", "--run", run_id, "--db", db, "--json", "--no-store").json()
    nominal = cli("model", "aliasing", "--run", run_id, "--db", db, "--json", "--no-store", "--no-fit").json()
    assert fitted["fit"]["locked"] is True and fitted["fit"]["offset_ppm"] == pytest.approx(0, abs=1e-6)
    assert fitted["fit"]["median_error_ns"] < 300, fitted["fit"]
    assert fitted["model"]["pattern_period_s"] is None and nominal["model"]["pattern_period_s"] is None
    # The same flat lines: the delayed packets' levels agree with the measured ones.
    levels = sorted({round(v / 1_000) for _, v in fitted["model"]["worst"] if v > 3_100 + 3_000})
    measured = sorted({round(v / 1_000) for _, v in fitted["measured"]["worst"] if v > 3_100 + 3_000})
    assert levels and set(levels) <= {m + d for m in measured for d in (-1, 0, 1)}


def test_cli_aliasing_bad_input(cli, db, store_at):
    r = cli("model", "aliasing", "--irq-durations", "5ms", "--irq-rate", "250Hz", "--no-store")
    assert r.code == 2 and "an interrupt of 5.000 ms does not fit in its period, 4.000 ms at 250 Hz" in r.err
    r = cli("model", "aliasing", "--run", "run:x", "--db", db)
    assert r.code == 2 and "no such database" in r.err and not db.exists()  # a mistyped --db stays unmade
    with store_at():
        pass
    r = cli("model", "aliasing", "--run", "run:x", "--db", db)
    assert r.code == 2 and "run id" in r.err


def test_a_fit_that_misses_the_delayed_packets_says_so():
    """Delays at random times (not a periodic interrupt's): the best clock still misses them
    by far more than half the shortest interrupt, and the fit says its pattern explains
    nothing (it reported a 2.1 ms median error without a word)."""
    rng = np.random.default_rng(5)
    times = np.sort(rng.uniform(0, 10e9, 2_000))
    lat = 3_100 + rng.uniform(6_000, 2_000_000, len(times))
    fit = al.fit_interrupt_clock(times, lat, al.AliasingSpec(rate_pps=10_000.0))
    assert fit["median_error_ns"] > 0.5 * 5_500
    assert fit["warning"] and "does not explain them" in fit["warning"]


def test_a_good_fit_says_nothing_more():
    true = al.AliasingSpec(rate_pps=10_000.5, irq_rate_hz=250.0 * (1 + 20e-6))
    times = np.arange(100_000) * 1e9 / 10_000.5
    lat = al.latency_at(times, true)
    worst = np.argsort(lat)[-2_000:]
    assert al.fit_interrupt_clock(times[worst], lat[worst], al.AliasingSpec(rate_pps=10_000.5))["warning"] is None


def test_stalls_longer_than_a_tick_are_not_fitted_as_the_interrupt_cycle():
    """`model aliasing --run` of make run's fwd at 100 kpps, whose packets waited behind 21 ms
    stalls: "an interrupt of 21712489 ns does not fit in a period of 2179294 ns at
    458.8642297732465 Hz" — the durations were fitted to stalls that are no interrupt's."""
    rng = np.random.default_rng(9)
    times = np.sort(rng.uniform(0, 10e9, 500))
    measured = {
        "worst": [[t, 3_100 + rng.uniform(15e6, 22e6)] for t in times],
        "rate_pps": 100_000.0,
        "duration_ns": 10_000_000_000,
        "base_latency_ns": 3_100.0,
        "analysis_id": 1,
    }
    spec = al.AliasingSpec(rate_pps=100_000.0, irq_rate_hz=458.864, base_latency_ns=3_100.0)
    with pytest.raises(
        UserError, match=r"wait up to 2[0-9]\.[0-9]{3} ms .* longer than the interrupt period \(2\.179 ms"
    ):
        al.fitted_levels(spec, measured, ["LOC"], 200.0)
