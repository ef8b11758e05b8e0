"""The configuration axes of stored runs: which vary, and tables that show every one of
them, so that runs differing only in burst (or a DuT option) do not read alike."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from test_store_and_report import run_row  # noqa: E402  (tests/experiment is on the path)

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_pair
from lowtail.cli.run import runs_table
from lowtail.experiment.page import write_experiment_report
from lowtail.store import axes, open_store
from lowtail.store import runs as runstore
from lowtail.verdict.judge import Verdict

# (DuT, kind, burst, DuT options): two kernel runs that differ only in burst, two
# forwarder runs that differ only in batch, a testpmd whose own `burst` is not the traffic's.
RUNS = [
    ("wire", "wire", 1, {}),
    ("kernel", "kernel-mirred", 1, {}),
    ("kernel", "kernel-mirred", 16, {}),
    ("fwd", "lowtail-fwd", 1, {"batch": 1, "work_ns": 1000, "containment": "bare"}),
    ("fwd", "lowtail-fwd", 1, {"batch": 32, "work_ns": 1000, "containment": "bare"}),
    ("pmd", "dpdk-testpmd", 1, {"burst": 32, "containment": "container"}),
]


# The devices make run's verdict lines name, one line each, and the configurations each names.
DEVICES = ["kernel", "fwd", "pmd"]
CONFIGURATIONS = [["burst 1 · 10 kpps", "burst 16 · 10 kpps"], ["batch 1 · 10 kpps", "batch 32 · 10 kpps"], ["10 kpps"]]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("axes")
    db = tmp / "a.duckdb"
    pre, post = tmp / "pre.pcap", tmp / "post.pcap"
    spec = {"packets": 2_000, "rate_pps": 10_000.0, "base_latency_ns": 20_000, "jitter_ns": 0.0, "loss": 0.0}
    _native.synth_pair(str(pre), str(post), json.dumps(spec | {"seed": 1}))
    with open_store(db) as store:
        eid = runstore.create_experiment(store, "axes", {}, "ha", {"kernel": "6.1.0-test", "hostname": "h"}, str(tmp))
        for i, (name, kind, burst, options) in enumerate(RUNS):
            export = AnalyzeOptions(trim_ns=0, export=str(tmp / f"{i}.parquet"))
            row = run_row(eid, name, kind) | {"combination_key": str(i), "burst": burst, "dut_config": options}
            row["containment"] = {"mode": options.get("containment", "bare")}
            runstore.save_run(store, row, analyze_pair(pre, post, export), export.to_dict())
        rows = runstore.runs(store, eid)
        experiment = runstore.experiment(store, eid)
    return db, experiment, rows


def test_the_axes_that_vary_and_a_runs_configuration(stored):
    _, _, rows = stored
    names = [a.name for a in axes.varying(rows)]
    # The kind follows the DuT; work_ns is the same wherever it is set; kernel and host are
    # the experiment's own; testpmd's burst is its own axis, not the traffic's.
    assert names == ["dut", "kind", "batch", "containment", "burst"]
    pmd = axes.configuration(rows[-1])
    assert pmd["dut_burst"] == 32 and pmd["burst"] == 1 and pmd["containment"] == "container"
    assert pmd["kernel"] == "6.1.0-test" and pmd["host"] == "h" and "repetition" not in pmd
    assert "batch" not in pmd and axes.configuration(rows[3])["batch"] == 1
    assert axes.varying(rows[1:3], repetition=False)[0].name == "burst"


def test_tables_tell_apart_runs_that_differ_only_in_burst_or_an_option(stored, tmp_path):
    db, experiment, rows = stored
    console = Console(width=80, record=True, highlight=False)
    console.print(runs_table(experiment, rows, {}, Verdict(), width=80))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in "".join(lines)
    header = next(line for line in lines if line.startswith("run "))
    assert header.split()[:5] == ["run", "DuT", "batch", "containment", "burst"]

    def without_run_id(name: str) -> list[list[str]]:
        return [line.split()[1:] for line in lines if line.split()[1:2] == [name]]

    kernel, fwd = without_run_id("kernel"), without_run_id("fwd")
    assert kernel[0][:3] == ["kernel", "bare", "1"] and kernel[1][:3] == ["kernel", "bare", "16"]
    assert fwd[0][:4] == ["fwd", "1", "bare", "1"] and fwd[1][:4] == ["fwd", "32", "bare", "1"]
    html = write_experiment_report(db, experiment["experiment_id"], tmp_path / "a.html").read_text()
    summary = html[html.index("<h2 id='verdict'>Verdict</h2>") : html.index("</table>", html.index("id='verdict'"))]
    for heading in ("<th>burst</th>", "<th>batch</th>", "<th>containment</th>"):
        assert heading in summary
    assert "burst 16" in html  # in the run's own heading


def test_the_verdict_lines_name_each_configuration_of_a_device(stored):
    """make run's answer, one line per device naming each of its configurations: runs of
    one DuT name that differ in an option (a guest kernel, a rule count, here a batch) or in
    burst are told apart by what differs among them, not written with a rate twice."""
    from lowtail.cli.run import device_verdict_lines

    _, _, rows = stored
    lines = device_verdict_lines(rows, Verdict())
    assert [line.split("  ")[0].strip() for line in lines] == DEVICES
    for line, configurations in zip(lines, CONFIGURATIONS):
        assert all(c in line for c in configurations), line


def test_repetitions_of_a_configuration_are_one_configuration_of_its_device(stored):
    """Seen in a hosts experiment of two repetitions: "mirred rep.=0 …" and "mirred rep.=1 …",
    as if each repetition were a configuration of its own."""
    from lowtail.cli.run import device_verdict_lines

    _, _, rows = stored
    again = [r | {"run_id": r["run_id"] + 100, "repetition": 1} for r in rows]
    lines = device_verdict_lines([*rows, *again], Verdict())
    assert [line.split("  ")[0].strip() for line in lines] == DEVICES
    assert not any("rep." in line for line in lines), lines
    for line, configurations in zip(lines, CONFIGURATIONS):
        outcomes = line.split(" · to decide")[0]
        assert all(outcomes.count(c) == 1 for c in configurations), line


def test_a_configurations_label_leaves_out_axes_it_does_not_have(stored):
    """A comparison of a bare forwarder with a VM names the forwarder without "guest_kernel –":
    axes a run does not have are left out of its label."""
    _, _, rows = stored
    by = axes.varying(rows)
    kernel, fwd = axes.label(rows[1], by), axes.label(rows[3], by)
    assert "–" not in kernel and "batch" not in kernel, kernel
    assert "batch 1" in fwd, fwd
