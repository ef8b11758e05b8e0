"""Degraded runs said once: one line per kind of reason over an experiment's runs, stored
as `lowtail run` stores them, read back through the store."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_store_and_report import run_row, synthetic_analysis  # noqa: E402

from lowtail.experiment.degraded import degraded_lines
from lowtail.experiment.page import write_experiment_report
from lowtail.store import open_store
from lowtail.store import runs as runstore

STALL = "generator stalled {} (over [trust] max_stall 1.000 ms; p99 pacing error 4.1 µs)"


def _stored_runs(tmp_path: Path) -> tuple[Path, int]:
    db = tmp_path / "d.duckdb"
    analysis_doc, opts = synthetic_analysis(tmp_path, "k", 40_000, packets=2_000)
    with open_store(db) as store:
        eid = runstore.create_experiment(store, "stalls", {}, "h", {"kernel": "k"}, str(tmp_path))
        for i, stall_ns in enumerate((1_170_000, 28_000_000, None, 11_000_000)):
            row = run_row(eid, "kernel", "kernel-mirred", rate=20_000 + i)
            if stall_ns:
                # The generator's pacing error as lowtail-gen writes it: a whole time summary.
                pacing = {"samples": 2_000, "min": 0, "mean": 900.0, "p50": 600, "p90": 2_000, "p99": 4_100}
                pacing |= {"p99_9": 9_000, "p99_99": stall_ns, "max": stall_ns}
                row["generator"] = {"kept_up": True, "pacing_error_ns": pacing}
                row["degraded_reasons"] = [STALL.format(stall_ns)]
            runstore.save_run(store, row, analysis_doc, opts)
    return db, eid


def test_three_stalled_runs_are_one_line(tmp_path: Path) -> None:
    """Stalls of 1.17, 28 and 11 ms on three of four runs: one line with their range and
    runs, at the end of `lowtail run` and in the page's banner (each said once per run)."""
    db, eid = _stored_runs(tmp_path)
    with open_store(db, read_only=True) as store:
        rows = runstore.experiment_runs(store, eid).runs
    lines = degraded_lines(rows)
    assert len(lines) == 1, lines
    assert lines[0].startswith("3 of 4 runs degraded: generator stalled 1.170–28.000 ms (runs ")
    page = write_experiment_report(db, eid, tmp_path / "e.html").read_text()
    banner = page.split("class='banner warn'>", 1)[1].split("</div>", 1)[0]
    assert banner.count("generator stalled") == 1  # was once per run
