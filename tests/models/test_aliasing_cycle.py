"""`model aliasing --run` on a run with interrupt samples fits the run's own interrupt cycle —
which kinds, at which rates — instead of a default pattern, and its overlay has the measured
lines' slope.

The known truth: a synthetic pair whose DuT takes a local timer tick every 4.00008 ms
(249.995 Hz) of 5.5 µs, every third one with IRQ work after it (8.2 µs in all: 83.33 Hz),
against 10 kpps; beside it the studies' guest recording of those ticks on CPU 2, a count per
second, imported with `import-captures`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "experiment"))
from irq_files import study_file  # noqa: E402

from lowtail.models import aliasing as al  # noqa: E402

LOWTAIL = [sys.executable, "-m", "lowtail"]
RATE = 10_000
SECONDS = 30
TICK_NS = 4_000_080
DURATIONS = [5_500, 5_500, 8_200]  # the synthesiser's tick k lasts DURATIONS[k % 3]
START_NS = 1_700_000_000_000_000_000  # the synthesiser's first packet
SPEC = """
[import]
pattern = "fwd-{side}.pcap"
[analysis]
trim = "0s"
worst = 5000
[interrupts]
guest = "fwd-irq.csv"
irq_period = "1s"
dut_cpu = 2
"""


def lowtail(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _ticks_per_second() -> tuple[list[int], list[int]]:
    """The synthesiser's ticks (at multiples of TICK_NS since the epoch) in each second from
    its first packet, and those of them with IRQ work after them."""
    first = -(-START_NS // TICK_NS)
    k = np.arange(first, (START_NS + SECONDS * 1_000_000_000) // TICK_NS + 1)
    second = (k * TICK_NS - START_NS) // 1_000_000_000
    keep = second < SECONDS
    loc = np.bincount(second[keep], minlength=SECONDS)
    iwi = np.bincount(second[keep & (k % 3 == 2)], minlength=SECONDS)
    return loc.tolist(), iwi.tolist()


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    tmp = tmp_path_factory.mktemp("cycle")
    root = tmp / "study"
    root.mkdir()
    done = lowtail(
        root, "synth", "fwd-pre.pcap", "fwd-post.pcap", "--packets", str(RATE * SECONDS), "--rate", f"{RATE}pps",
        "--set", f"irq_period_ns={TICK_NS}", "--set", f"irq_durations_ns={json.dumps(DURATIONS)}",
        "--set", "base_latency_ns=3300", "--set", "jitter_ns=100",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    loc, iwi = _ticks_per_second()
    text = study_file({("LOC", 2): loc, ("IWI", 2): iwi, ("LOC", 3): [250] * SECONDS}, missing={("IWI", 3)})
    (root / "fwd-irq.csv").write_text(text)
    (tmp / "spec.toml").write_text(SPEC)
    done = lowtail(tmp, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    return tmp, run["run_id"]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_the_runs_own_cycle_is_fitted_and_its_lines_have_the_measured_slope(imported):
    tmp, run_id = imported
    done = lowtail(tmp, "model", "aliasing", "--run", str(run_id), "--db", "t.duckdb", "--json", "--no-store")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    cycle = doc["cycle"]
    truth = 1e9 / TICK_NS
    # Which vectors, which rates: the timer and IRQ work on every third tick, within 0.1 %.
    assert cycle["source"] == "guest" and cycle["cpu"] == 2 and cycle["base"] == "LOC"
    assert abs(cycle["base_rate_hz"] / truth - 1) < 1e-3
    (iwi,) = cycle["companions"]
    assert iwi["kind"] == "IWI" and iwi["every"] == 3 and abs(iwi["rate_hz"] / (truth / 3) - 1) < 1e-3
    assert cycle["cycle"] == ["LOC", "LOC", "LOC+IWI"]
    assert "not when each fired" in cycle["resolution"]
    # Its durations, fitted to the delayed packets: about the truth's.
    short, long_ = min(cycle["durations_ns"]), max(cycle["durations_ns"])
    assert abs(long_ - 8_200) < 500 and abs(short - 5_500) < 1_000, cycle["durations_ns"]
    # The clock in the capture's clock, and the overlay's lines against the measured ones.
    assert abs(doc["fit"]["irq_rate_hz"] / truth - 1) * 1e6 < 2, doc["fit"]
    slopes = doc["slopes"]
    measured, model = slopes["measured_ns_per_s"], slopes["model_ns_per_s"]
    assert measured and model and abs(model / measured - 1) < 0.1, slopes
    text = lowtail(tmp, "model", "aliasing", "--run", str(run_id), "--db", "t.duckdb", "--no-store")
    assert "ticks LOC, LOC, LOC+IWI" in text.stdout and "lines: measured" in text.stdout, text.stdout


def test_the_slope_estimate_reads_a_known_pattern():
    """The lines of a pattern whose beat is known: 0.2 Hz at 10 kpps slides 20 µs a second."""
    spec = al.AliasingSpec(rate_pps=10_000.0, irq_rate_hz=1e9 / TICK_NS, irq_durations_ns=[5_500.0, 5_500.0, 8_200.0])
    spec.duration_s, spec.jitter_ns = 30.0, 100.0
    doc = al.simulate(spec)
    slope = al.worst_slope(doc["worst"], spec.base_latency_ns)
    expected = doc["beat_hz"] / spec.rate_pps  # ns of latency per ns
    assert slope is not None and abs(abs(slope) / expected - 1) < 0.05, (slope, expected)


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_without_samples_the_given_pattern_is_used(imported):
    """--irq-rate given: the run's cycle is not looked for; the document has no cycle."""
    tmp, run_id = imported
    done = lowtail(
        tmp,
        "model",
        "aliasing",
        "--run",
        str(run_id),
        "--db",
        "t.duckdb",
        "--json",
        "--no-store",
        "--irq-rate",
        "250Hz",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert "cycle" not in doc and doc["model"]["spec"]["irq_durations_ns"] == [5_500.0, 8_200.0]
