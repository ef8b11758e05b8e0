"""A verdict per device, defined once (verdict/device.py, docs/statistics.md "A device's
verdict"): PASS only if every configuration of it passes, FAIL if any fails, else
inconclusive with what is missing — and every surface says the same: the experiment page's
headline card, the terminal's closing lines, the JSON, and the qualification record (its
JSON, its terminal lines and its page's cards).

Before: the default experiment's page showed the device `kernel` as a green PASS over two
inconclusive runs of three ("PASS at one rate" was a sweep's answer), and `lowtail run` gave
a verdict per rate but none per device.

The PASS rule is an intersection-union test: checked below by simulation, on configurations
whose true percentile is known, against the error rates docs/statistics.md states."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from compare_support import experiment, store_run
from scipy.stats import binom

from lowtail.core import confidence
from lowtail.store import open_store
from lowtail.verdict.device import FAIL, INCONCLUSIVE, PASS, combined_status

LOWTAIL = [sys.executable, "-m", "lowtail"]
BUDGET = {"percentile": 99.9, "budget": "1ms"}
ENOUGH, TOO_FEW = 30_000, 400  # packets: enough to bound p99.9 under 1 ms, and too few
# device → (kind, one configuration per rate: what its synthetic run is made to be)
DEVICES = {
    "fwd": ("lowtail-fwd", {10_000: "pass", 20_000: "inconclusive", 50_000: "fail"}),
    "kernel": ("kernel-mirred", {10_000: "inconclusive", 20_000: "inconclusive", 50_000: "pass"}),
    "bridge": ("bridge", {10_000: "pass", 20_000: "pass", 50_000: "pass"}),
}
EXPECTED = {"fwd": FAIL, "kernel": INCONCLUSIVE, "bridge": PASS}
_RUN = {
    "pass": {"packets": ENOUGH},
    "inconclusive": {"packets": TOO_FEW},
    "fail": {"packets": ENOUGH, "base_latency_ns": 2_000_000},
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """An experiment of three devices, each in three configurations (rates) stored as real
    synthetic runs: one configuration PASS, one inconclusive, one FAIL for `fwd`; the issue's
    `kernel` (inconclusive, inconclusive, PASS); `bridge` passing at every rate."""
    tmp = tmp_path_factory.mktemp("mixed")
    db = tmp / "m.duckdb"
    with open_store(db) as store:
        eid = experiment(store, "mixed", BUDGET)
        for device, (kind, rates) in DEVICES.items():
            for rate, outcome in rates.items():
                store_run(store, tmp, eid, device, kind=kind, rate=rate, seed=rate // 1000, **_RUN[outcome])
    return db


def lowtail(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LOWTAIL, *args, "--db", str(db)], cwd=db.parent, capture_output=True, text=True, timeout=300
    )


def cards(page: Path) -> dict[str, str]:
    """Each verdict card of a page: its title's device name → its status."""
    text = page.read_text()
    found = re.findall(
        r"<div class='lt-card \w+'><div class='name'>([^<]*)</div><div class='status'>([^<]*)</div>", text
    )
    return {html.unescape(name).split(" (")[0]: status for name, status in found}


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_every_surface_gives_each_device_the_same_verdict(mixed):
    # The experiment page's headline cards.
    page = mixed.parent / "experiment.html"
    assert lowtail(mixed, "experiment", "report", "1", "-o", str(page)).returncode == 0
    assert cards(page) == EXPECTED

    # The terminal's closing lines (`lowtail run` ends with the same function).
    shown = lowtail(mixed, "experiment", "show", "1")
    assert shown.returncode == 0, shown.stderr
    closing = shown.stdout.split("verdict per device")[1].splitlines()[1:]
    terminal = {line.split()[0]: line.split()[1] for line in closing if line.strip()}
    assert terminal == EXPECTED, shown.stdout

    # The JSON: every run carries its device's verdict.
    runs = json.loads(lowtail(mixed, "experiment", "show", "1", "--json").stdout)
    assert {r["dut"]: r["device_verdict"]["status"] for r in runs} == EXPECTED

    # The qualification record: its JSON, its terminal lines, its page.
    record = mixed.parent / "record.html"
    certified = lowtail(mixed, "certify", "1", "--json", "-o", str(record))
    assert certified.returncode == 0, certified.stderr
    doc = json.loads(certified.stdout)
    assert {d["device"]: d["status"] for d in doc["devices"]} == EXPECTED
    assert cards(record) == EXPECTED
    said = lowtail(mixed, "certify", "1").stdout.split("verdict per device")[1].splitlines()[1:]
    assert {line.split()[0]: line.split()[1] for line in said if line.strip()} == EXPECTED

    # An inconclusive device says what is missing, on every surface: the packets more.
    kernel = next(d for d in doc["devices"] if d["device"] == "kernel")
    assert len(kernel["missing"]) == 2 and all("more packets" in m for m in kernel["missing"]), kernel
    assert "more packets" in next(line for line in closing if line.split()[0] == "kernel")
    assert "to decide" in page.read_text() and "more packets" in page.read_text()
    # A FAIL names the configuration that failed, and the one that did not decide.
    fwd = next(line for line in closing if line.split()[0] == "fwd")
    assert "FAIL: latency at 50 kpps" in fwd and "inconclusive at 20 kpps" in fwd and "PASS at 10 kpps" in fwd


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_card_never_shows_pass_over_a_run_that_did_not_pass(mixed):
    """The rule holds for every card of every page, a comparison's rate sweep included (it
    was "PASS" when one rate passed)."""
    page = mixed.parent / "comparison.html"
    done = lowtail(mixed, "compare", "1", "--by", "dut,rate", "-o", str(page))
    assert done.returncode == 0, done.stderr
    found = cards(page)
    assert found and all(status != PASS or name == "bridge" for name, status in found.items()), found


# -- the rule's error rates, by simulation ------------------------------------------------------------

SIMULATIONS = 2_000
PACKETS = 2_000
Q = Fraction(99, 100)
CONFIDENCE = 0.95


def _judge(samples: np.ndarray, budget: float) -> str:
    """One configuration judged as the verdict judges independent packets: its percentile's
    one-sided order-statistic bounds at the confidence against the budget."""
    ranks = confidence.rank_interval(len(samples), Q, 2 * CONFIDENCE - 1)
    ordered = np.sort(samples)
    if ordered[ranks.lower - 1] >= budget:
        return FAIL
    if ranks.upper <= len(samples) and ordered[ranks.upper - 1] < budget:
        return PASS
    return INCONCLUSIVE


def _device_statuses(truths: list[float], rng: np.random.Generator) -> list[str]:
    """The device's verdict in each simulation: configurations of exponential latencies
    whose true 99th percentiles are `truths`, judged against a budget of 1.0."""
    out = []
    for _ in range(SIMULATIONS):
        statuses = []
        for truth in truths:
            scale = truth / -math.log(1 - float(Q))
            statuses.append(_judge(rng.exponential(scale, PACKETS), 1.0))
        out.append(combined_status(statuses))
    return out


def at_most(observed: int, stated: float, n: int = SIMULATIONS) -> bool:
    """Whether `observed` of `n` is consistent with a rate of at most `stated` (a run of
    simulations that shows more less than 1 % of the time fails)."""
    return binom.sf(observed - 1, n, stated) >= 0.01


def test_pass_for_a_device_that_breaks_the_budget_in_one_configuration_is_rare():
    """An intersection-union test: one configuration exactly at the budget (its worst case),
    two far under it — PASS in at most 1 − confidence of the simulations, as stated."""
    statuses = _device_statuses([1.0, 0.5, 0.5], np.random.default_rng(33))
    passed = statuses.count(PASS)
    assert at_most(passed, 1 - CONFIDENCE), passed
    assert passed > 0  # the rule is not vacuous: at the budget exactly, it passes by chance


def test_fail_for_a_device_that_keeps_the_budget_is_at_most_k_times_the_error():
    """Three configurations each exactly at the budget's edge from below (the worst case for
    a false FAIL): FAIL in at most 3 × (1 − confidence) of the simulations, as stated."""
    statuses = _device_statuses([0.999, 0.999, 0.999], np.random.default_rng(34))
    failed = statuses.count(FAIL)
    assert at_most(failed, 3 * (1 - CONFIDENCE)), failed
    assert failed > SIMULATIONS * (1 - CONFIDENCE)  # more than one configuration's alone: the bound is k × it


def test_a_device_that_keeps_the_budget_with_room_passes():
    statuses = _device_statuses([0.6, 0.6, 0.6], np.random.default_rng(35))
    assert statuses.count(PASS) > 0.9 * SIMULATIONS and statuses.count(FAIL) == 0


def test_a_device_judged_alike_everywhere_says_its_status_once():
    """The chain example's closing line read "inconclusive — inconclusive, degraded at 10 kpps,
    20 kpps"; the status stays the line's first word (the tables read it so)."""
    from lowtail.verdict.device import DeviceVerdict, Judged

    def judged(label: str, status: str, where: str) -> Judged:
        return Judged(where, {"status": status, "label": label, "degraded": [], "more_packets": None, "reason": "r"})  # type: ignore[typeddict-item]

    alike = DeviceVerdict(
        "chain",
        "chain",
        (
            judged("inconclusive, degraded", INCONCLUSIVE, "10 kpps"),
            judged("inconclusive, degraded", INCONCLUSIVE, "20 kpps"),
        ),
    )
    assert alike.summary().startswith("inconclusive — degraded at 10 kpps, 20 kpps · to decide: ")
    plain = DeviceVerdict("k", "kernel-mirred", (judged("inconclusive", INCONCLUSIVE, "10 kpps"),))
    assert plain.summary().startswith("inconclusive at 10 kpps · to decide: ")
    failed = DeviceVerdict("f", "lowtail-fwd", (judged("FAIL: latency", FAIL, "50 kpps"),))
    assert failed.summary() == "FAIL — latency at 50 kpps"
    mixed = DeviceVerdict(
        "f", "lowtail-fwd", (judged("FAIL: latency", FAIL, "50 kpps"), judged("PASS", PASS, "10 kpps"))
    )
    assert mixed.summary() == "FAIL — FAIL: latency at 50 kpps; PASS at 10 kpps"


def test_a_configuration_too_short_to_bound_says_how_long_a_run_would_be():
    """The chain's card repeated each run's whole reason under "to decide" (a wall of text in a
    card's width); a bound that needs more packets than the run had says how many."""
    from lowtail.verdict.device import DeviceVerdict, Judged

    short = {"status": INCONCLUSIVE, "label": "inconclusive", "degraded": [], "more_packets": None}
    few = Judged("10 kpps", {**short, "reason": "5 clusters …", "packets_needed": 299_997, "samples": 99_999})  # type: ignore[typeddict-item]
    wanders = Judged("20 kpps", {**short, "reason": "it wanders", "packets_needed": None, "samples": 199_999})  # type: ignore[typeddict-item]
    device = DeviceVerdict("chain", "chain", (few, wanders))
    assert device.missing() == [
        "10 kpps: a run of about 299,997 packets (3× this one) can bound it",
        "20 kpps: it wanders",
    ]
    many = {**short, "reason": "max", "packets_needed": 14_413_793, "samples": 99_999}
    assert DeviceVerdict("d", "k", (Judged("50 kpps", many),)).missing() == [  # type: ignore[arg-type]
        "50 kpps: a run of about 14,413,793 packets (144× this one) can bound it"
    ]
