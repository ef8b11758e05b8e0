"""The qualification record stands alone: for every DuT kind, its page and its JSON name the
device by name and kind, every option that defines it (a Suricata rule set with the hash of
its rules, its action, containment, the kernel — a VM's guest kernel — and the cores), the
traffic (rate, frame size, burst, flows, measured time, repetitions), the selection it was
made from, counts that are counts, and the judged percentile's one-sided bounds exactly as
the verdict used them.

Before: `lowtail certify 1 dut=ips` said only "rate 20 kpps": the word suricata, its rule
set and action appeared nowhere; "runs: 3 (1 repetition(s))" printed a run id where a count
belongs; "its one-sided bounds at 95 %: –" stood beside a verdict that said "at least
990.771 µs".

The runs are real synthetic captures analysed and stored as runs of each kind, with the
options each kind's own declarations fill in (`Dut.expand`); one test certifies a run the
namespace testbed really measured (as root)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from compare_support import analysed, experiment

from lowtail.core.units import format_ns
from lowtail.store import open_store
from lowtail.store import runs as runstore
from lowtail.store.records import show_value
from lowtail.testbed.document import options_json
from lowtail.testbed.duts import KINDS

LOWTAIL = [sys.executable, "-m", "lowtail"]
CORE_PLAN = {"housekeeping": 0, "generator": 1, "capture": 0, "dut": [2]}
RULES_SHA = "ab" * 32
# What each kind is configured with beyond its defaults (a kind's required options).
RAW = {
    "custom": {"command": "tc qdisc add dev {in} ingress", "ready_timeout": "90s"},
    "suricata": {"rules": 1000, "action": "drop", "containment": "container"},
    "vm": {"guest_forwarder": "suricata", "rules": 100, "memory": 512, "guest_kernel": "rt"},
    "nftables": {"rules": 10},
    "lowtail-fwd": {"work_ns": 2000, "batch": 32},
    "external": {"description": "a hardware firewall"},
}


def _store(store, tmp: Path, eid: int, kind: str, repetition: int) -> int:
    options = options_json(KINDS[kind].expand(RAW.get(kind, {}))[0])
    doc, opts = analysed(tmp, f"{kind}-{repetition}", packets=20_000, rate_pps=20_000.0, seed=repetition + 1)
    stats = {"rules": options["rules"], "port": 53, "sha256": RULES_SHA} if "rules" in options else {}
    contained = options.get("containment", "bare")
    row = {
        "label": f"{kind}-{repetition}",
        "experiment_id": eid,
        "combination_key": f"{kind}-{repetition}",
        "dut_name": f"my-{kind}",
        "dut_kind": kind,
        "dut_config": options,
        "calibration": False,
        "rate_pps": 20_000,
        "frame_size": 128,
        "burst": 4,
        "repetition": repetition,
        "duration_ns": 5_000_000_000,
        "warmup_ns": 1_000_000_000,
        "started_at": datetime.now(),
        "finished_at": datetime.now(),
        "series_path": doc["export_path"],
        "valid": True,
        "invalid_reasons": [],
        "generator": {"kept_up": True},
        "capture": {"interfaces": []},
        "containment": {"mode": contained, "cpus": [2]}
        | ({"cgroup": "/sys/fs/cgroup/lowtail-x"} if contained == "container" else {}),
        "energy": None,
        "dut_stats": stats,
        "capture_paths": [],
        "traffic": {"flows": 4, "udp_dst_port": 53, "core_plan": CORE_PLAN},
    }
    return runstore.save_run(store, row, doc, opts)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """One experiment per DuT kind, two repetitions each, judged at p99.9 under 1 ms."""
    tmp = tmp_path_factory.mktemp("kinds")
    db = tmp / "k.duckdb"
    ids = {}
    with open_store(db) as store:
        for kind in KINDS:
            eid = experiment(store, kind, {"percentile": 99.9, "budget": "1ms"})
            for repetition in (0, 1):
                _store(store, tmp, eid, kind, repetition)
            ids[kind] = eid
    return db, ids


def certify(db: Path, *words: str) -> tuple[dict, str]:
    page = db.parent / f"record-{'-'.join(words)}.html"
    done = subprocess.run(
        [*LOWTAIL, "certify", *words, "--db", str(db), "--json", "-o", str(page)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
    return json.loads(done.stdout), re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_record_of_each_kind_names_what_was_certified(stored, kind):
    db, ids = stored
    doc, page = certify(db, str(ids[kind]))
    (c,) = doc["configurations"]
    device = c["device"]
    options = options_json(KINDS[kind].expand(RAW.get(kind, {}))[0])

    # The device by name and kind, on the page and in the JSON.
    assert (device["name"], device["kind"]) == (f"my-{kind}", kind)
    assert f"my-{kind} (kind {kind})" in page
    assert doc["devices"][0]["device"] == f"my-{kind}" and doc["devices"][0]["kind"] == kind

    # Every option that defines it, as typed (durations with their units).
    assert device["options"] == options
    for key, value in options.items():
        shown = device["options_shown"][key]
        assert f"{key}: {shown}" in page, (key, shown)
        if value is not None and key != "rules":
            assert show_value(value) in shown
    if "ready_timeout" in options:
        assert re.fullmatch(r"\d+(s|min|ms)", device["options_shown"]["ready_timeout"])
    if kind in ("suricata", "vm"):  # the rule set with the hash of its rules, the action
        assert RULES_SHA in device["options_shown"]["rules"] and RULES_SHA in page
        assert f"{options['rules']:,} generated rules" in page
    if kind == "suricata":
        assert "action: drop" in page and "container on CPU 2, cgroup /sys/fs/cgroup/lowtail-x" in page
    if kind == "vm":
        assert device["guest_kernel"] == "rt" and "guest kernel rt" in page
    assert device["kernel"] == "6.1.0-rt" and "kernel 6.1.0-rt" in page
    assert "DuT on CPU 2, generator on CPU 1, timestamper on CPU 0, housekeeping on CPU 0" in page

    # The traffic.
    assert c["traffic"] == {
        "rate_pps": 20_000,
        "frame_size": 128,
        "burst": 4,
        "flows": 4,
        "duration_ns": 5_000_000_000,
        "warmup_ns": 1_000_000_000,
        "repetitions": 2,
        "runs": 2,
    }
    assert (
        "20 kpps, 128 B frames on the wire, bursts of 4, 4 flows; 5.000 s measured per run after 1.000 s of warm-up"
        in page
    )

    # Counts that are counts, and the selection it was made from.
    assert f"2 runs (runs {', '.join(map(str, c['runs']))}), 2 repetitions" in page
    assert (
        doc["selection"] == [str(ids[kind])]
        and doc["selected"] == f"2 runs of experiment {ids[kind]}, in 1 configuration"
    )
    assert doc["selected"] in page

    # The judged percentile's one-sided bounds, exactly as the verdict used them.
    verdict, bounds = c["verdict"], c["bounds"]
    assert (bounds["lower_ns"], bounds["upper_ns"], bounds["confidence"]) == (
        verdict["lower_ns"],
        verdict["upper_ns"],
        verdict["confidence"],
    )
    assert verdict["status"] == "PASS" and f"at most {format_ns(verdict['upper_ns'])}" in bounds["text"]
    assert f"at least {format_ns(verdict['lower_ns'])}" in bounds["text"]
    row = page.split("its one-sided bounds (what the verdict judged)")[1].split(" budget ")[0]
    assert bounds["text"] in row and "–" not in row


def test_a_bound_the_verdict_did_not_have_is_said_in_words():
    """A FAIL judged on its lower bound alone, an inconclusive percentile not bounded from
    above: never a dash beside a number."""
    from lowtail.compare.certificate import judged_bounds

    base = {"percentile": "p99_999", "confidence": 0.95, "samples": 50_000, "reason": "…", "status": "FAIL"}
    failed = judged_bounds(base | {"lower_ns": 990_771, "upper_ns": None})  # type: ignore[arg-type]
    assert failed["text"] == (
        "99.999 % at least 990.771 µs and not bounded from above by 50,000 packets, each with 95 % confidence"
    )
    invalid = judged_bounds(base | {"status": "INVALID", "lower_ns": None, "upper_ns": None, "reason": "no analysis"})  # type: ignore[arg-type]
    assert invalid["text"] == "not judged: no analysis"


@pytest.mark.skipif(os.geteuid() != 0, reason="builds a testbed of network namespaces: needs root")
def test_the_record_of_a_run_the_testbed_measured(tmp_path):
    """A real Suricata run on the namespace testbed (generated rules, drop), certified: the
    record names what ran — the rule set with the hash Suricata's rules were loaded with,
    the action, the kernel it ran on, the cores of the run's plan, the traffic."""
    import shutil

    if shutil.which("suricata") is None:
        pytest.skip("needs Suricata")
    toml = tmp_path / "ips.toml"
    toml.write_text(
        '[experiment]\nname = "ips"\nduration = "1s"\nwarmup = "200ms"\ncalibrate = false\n'
        '[traffic]\nrates = ["2kpps"]\nframe_size = 128\nburst = 2\nflows = 3\n'
        '[verdict]\npercentile = 99\nbudget = "50ms"\n'
        '[[dut]]\nname = "ips"\nkind = "suricata"\nrules = 20\naction = "drop"\n'
    )
    db = tmp_path / "r.duckdb"
    ran = subprocess.run(
        [*LOWTAIL, "run", str(toml), "--db", str(db), "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode in (0, 3), ran.stderr  # 3: degraded on a busy host, still certified
    doc, page = certify(db, "1", "dut=ips")
    (c,) = doc["configurations"]
    device = c["device"]
    assert (device["name"], device["kind"]) == ("ips", "suricata") and "ips (kind suricata)" in page
    (rules,) = device["rule_sets"]
    assert rules["rules"] == 20 and len(rules["sha256"]) == 64 and rules["sha256"] in page
    assert "action: drop" in page and "ready_timeout: 3min" in page
    assert device["kernel"] == os.uname().release and device["kernel"] in page
    assert device["cores"].startswith("DuT on CPU") and device["cores"] in page
    assert c["traffic"]["rate_pps"] == 2_000 and c["traffic"]["flows"] == 3
    assert (
        "2 kpps, 128 B frames on the wire, bursts of 2, 3 flows; 1.000 s measured per run after 200.000 ms of warm-up"
        in page
    )
    assert "1 run (run 1), 1 repetition" in page
    assert c["bounds"]["text"] in page


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_experiment_page_shows_a_duration_option_as_typed(stored, tmp_path):
    """It printed `ready_timeout=180000000000` (nanoseconds): the one unit writer now."""
    db, ids = stored
    page = tmp_path / "e.html"
    done = subprocess.run(
        [*LOWTAIL, "experiment", "report", str(ids["suricata"]), "--db", str(db), "-o", str(page)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "ready_timeout=3min" in text and "180000000000" not in text


def test_the_records_host_facts_are_in_words():
    """The Host section printed the stored mapping ("core_plan {'housekeeping': 1, 'generator':
    1, 'capture': 0, 'dut': [0]}") under its key: a customer signs words."""
    from lowtail.compare.certificate_page import _hosts

    host = {
        "hostname": "lab1",
        "kernel_cmdline": "isolcpus=2",
        "cpu_model": "AMD EPYC",
        "core_plan": {"housekeeping": 0, "generator": 1, "capture": 0, "dut": [2, 3]},
    }
    html = _hosts([{"hosts": [host]}])  # a configuration as far as the Host section reads it
    assert "<td>core plan</td><td class='text'>housekeeping 0, generator 1, capture 0, DuT 2, 3</td>" in html
    assert "<td>kernel command line</td>" in html and "<td>CPU model</td>" in html
    assert "{" not in html and "core_plan" not in html


def test_a_record_not_stored_says_so_and_one_budget_is_said_once(stored):
    """`certify --no-store` printed "comparison None" in the record's first line, and every
    card repeated the budget the line above the cards says."""
    db, ids = stored
    page = db.parent / "unstored.html"
    done = subprocess.run(
        [*LOWTAIL, "certify", str(ids["bridge"]), "--no-store", "--db", str(db), "-o", str(page)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())))
    assert "comparison None" not in text and "a comparison not stored" in text
    budget = "99.9th percentile under 1.000 ms (95 % confidence), no loss"
    assert f"Budget: {budget}" in text and text.count(budget) == 1 + text.count(f"budget {budget}")
    # When each analysis was made, to the second (the store's microseconds were printed).
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(lowtail ", text) and not re.search(r":\d\d\.\d{6}", text)
