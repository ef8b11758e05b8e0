"""The command as a user runs it: `lowtail analyze --json` keys and values, the table
output, `--export`, the rows stored in DuckDB, and `lowtail list/show/report` reading
them back."""

from __future__ import annotations

import json
import os
import subprocess

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from analyze_support import PERCENTILES, expected_from_truth, run_cli, synth

SPEC = dict(
    packets=30_000,
    rate_pps=20_000,
    loss=0.002,
    loss_burst=3,
    duplicate=0.002,
    reorder=0.003,
    reorder_delay_ns=120_000,
    foreign=0.005,
    spike_probability=0.001,
    spike_ns=30_000,
    seed=21,
)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """One pair analysed through the command line into a fresh database."""
    d = tmp_path_factory.mktemp("cli")
    pair = synth(d, compression="zstd", suffix=".pcap.zst", **SPEC)
    db, series = d / "results.duckdb", d / "series.parquet"
    p = run_cli(
        "analyze",
        pair.pre,
        pair.post,
        "--json",
        "--db",
        db,
        "--export",
        series,
        "--label",
        "first",
        "--hgrm",
        d / "dist.hgrm",
        cwd=d,
        process=True,
    )
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    return pair, db, series, json.loads(p.stdout), d


def test_json_document(stored):
    pair, _, _, doc, _ = stored
    want = expected_from_truth(pair)
    for key in ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative"):
        assert doc[key] == want.counts[key], key
        assert isinstance(doc[key], int)
    assert doc["trim_ns"] == 1_000_000_000
    assert isinstance(doc["warnings"], list)
    lat = doc["latency_ns"]
    assert set(lat) >= {"min", "mean", "max"} | {k for k, _ in PERCENTILES}
    for key in ("min", "max", *(k for k, _ in PERCENTILES)):
        assert lat[key] == want.latency[key] and isinstance(lat[key], int), key
    assert isinstance(lat["mean"], float) and lat["mean"] == pytest.approx(want.latency["mean"])
    assert isinstance(doc["analysis_id"], int)


def test_one_json_document_on_stdout(stored):
    """--json prints exactly one JSON document and nothing else on stdout."""
    pair, db, _, _, d = stored
    p = run_cli("analyze", pair.pre, pair.post, "--json", "--no-store", cwd=d, process=True)
    assert p.returncode == 0
    json.loads(p.stdout)
    assert p.stdout.strip().count("\n") == 0


def test_table_output_has_units(stored):
    pair, _, _, doc, d = stored
    p = run_cli("analyze", pair.pre, pair.post, "--no-store", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "µs" in p.stdout and "99.9999 %" in p.stdout
    assert f"{doc['sent']:,}" in p.stdout
    assert "trim 1.000 s" in p.stderr


def test_export_and_hgrm_files(stored):
    pair, _, series, doc, d = stored
    want = expected_from_truth(pair)
    t = pq.read_table(series)
    assert t.column_names == ["id", "pre_ts_ns", "post_ts_ns", "latency_ns", "flow"]
    for col in t.column_names:
        np.testing.assert_array_equal(t.column(col).to_numpy(), want.series[col])
    hgrm = (d / "dist.hgrm").read_text()
    assert hgrm == doc["hgrm"]
    assert "#[Max" in hgrm and f"Total count    = {doc['latency_ns']['samples']:>12}" in hgrm


def test_stored_rows(stored):
    pair, db, series, doc, _ = stored
    want = expected_from_truth(pair)
    con = duckdb.connect(str(db), read_only=True)
    row = con.execute(
        """SELECT label, sent, received, lost, duplicates, reordered, foreign_frames, negative, trim_ns,
                                lat_min_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_p99_9_ns, lat_p99_99_ns,
                                lat_p99_999_ns, lat_p99_9999_ns, lat_max_ns, lat_mean_ns, partial, series_path,
                                options, inputs
                         FROM analyses WHERE analysis_id = ?""",
        [doc["analysis_id"]],
    ).fetchone()
    c, lat = want.counts, want.latency
    assert row[:9] == (
        "first",
        c["sent"],
        c["received"],
        c["lost"],
        c["duplicates"],
        c["reordered"],
        c["foreign"],
        c["negative"],
        1_000_000_000,
    )
    assert row[9:18] == (lat["min"], *(lat[k] for k, _ in PERCENTILES), lat["max"])
    assert row[18] == pytest.approx(lat["mean"])
    assert row[19] is False
    assert row[20] == str(series)
    assert json.loads(row[21])["trim_ns"] == 1_000_000_000
    inputs = json.loads(row[22])
    assert inputs["pre"]["format"] == "pcap-ns" and inputs["pre"]["compression"] == "zstd"
    aid = doc["analysis_id"]
    n_worst = con.execute(
        "SELECT count(*), max(latency_ns) FROM analysis_worst WHERE analysis_id = ?", [aid]
    ).fetchone()
    assert n_worst == (min(5000, c["received"] - c["negative"]), lat["max"])
    pct = con.execute("SELECT max(total_count) FROM analysis_percentiles WHERE analysis_id = ?", [aid]).fetchone()[0]
    assert pct == len(want.series["id"])
    hist = con.execute(
        "SELECT sum(count) FROM analysis_histograms WHERE analysis_id = ? AND kind = 'latency'", [aid]
    ).fetchone()[0]
    assert hist == len(want.series["id"])
    rates = con.execute(
        "SELECT sum(packets) FROM analysis_rates WHERE analysis_id = ? AND side = 'pre'", [aid]
    ).fetchone()[0]
    assert rates == SPEC["packets"]
    con.close()


def test_every_histogram_and_both_sides_rates_read_back_as_printed(stored):
    """Stored in one statement each (every kind's bins, both sides' seconds): each row keeps
    its kind or side, its order, and its value."""
    from lowtail.store import open_store
    from lowtail.store.analyses import analysis

    _, db, _, doc, _ = stored
    with open_store(db, read_only=True) as s:
        back = analysis(s, doc["analysis_id"])
    for kind in ("latency", "jitter_pre", "jitter_post"):
        printed = [(b["lo_ns"], b["hi_ns"], b["count"]) for b in doc[f"{kind}_histogram"]]
        assert printed and back["histograms"][kind] == printed, kind
    for side in ("pre", "post"):
        assert back["rates"][side] == doc[side]["per_second"], side


def test_list_and_show_read_it_back(stored):
    pair, db, _, doc, d = stored
    p = run_cli("list", "--db", db, "--json", cwd=d)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    mine = [r for r in rows if r["analysis_id"] == doc["analysis_id"]]
    assert (
        len(mine) == 1 and mine[0]["sent"] == doc["sent"] and mine[0]["lat_p99_999_ns"] == doc["latency_ns"]["p99_999"]
    )
    p = run_cli("list", "--db", db, cwd=d)
    assert p.returncode == 0 and "first" in p.stdout and "µs" in p.stdout

    p = run_cli("show", str(doc["analysis_id"]), "--db", db, "--json", cwd=d)
    assert p.returncode == 0, p.stderr
    shown = json.loads(p.stdout)
    for key in ("sent", "received", "lost", "duplicates", "reordered", "foreign", "negative", "trim_ns"):
        assert shown[key] == doc[key], key
    assert shown["latency_ns"] == doc["latency_ns"]
    p = run_cli("show", "latest", "--db", db, cwd=d)
    assert p.returncode == 0 and "µs" in p.stdout
    assert_missing = run_cli("show", "999999", "--db", db, cwd=d)
    assert assert_missing.returncode == 2 and "Traceback" not in assert_missing.stderr


def test_report(stored):
    pair, db, _, doc, d = stored
    out = d / "report.html"
    p = run_cli("report", str(doc["analysis_id"]), "--db", db, "-o", out, "--json", cwd=d)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["report"] == str(out)
    html = out.read_text()
    assert html.count("class='lt-plot-spec'") >= 5  # HDR, histogram, worst events, rates, inter-arrivals
    assert f"{doc['sent']:,}" in html
    assert f"{doc['latency_ns']['p99_999'] / 1e3:.3f} µs" in html


def test_report_into_a_missing_directory_creates_nothing(stored, tmp_path):
    """`--report /nonexistent/r.html`: one line, exit 2, and no directory the user did not
    ask for (lowtail used to create the whole missing tree)."""
    pair, db, _, doc, d = stored
    missing = tmp_path / "nonexistent" / "deeper"
    p = run_cli("report", str(doc["analysis_id"]), "--db", db, "-o", missing / "r.html", cwd=d)
    assert p.returncode == 2, p.stderr
    assert "does not exist" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "nonexistent").exists()
    (tmp_path / "file").write_text("")
    p = run_cli("report", str(doc["analysis_id"]), "--db", db, "-o", tmp_path / "file" / "r.html", cwd=d)
    assert p.returncode == 2 and "is not a directory" in p.stderr, p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_report_on_a_full_disk_leaves_nothing_behind(stored, tmp_path):
    """A report that does not fit: one line, exit 1, and neither a 0-byte report nor the
    hidden temporary file it was written to."""
    pair, db, _, doc, d = stored
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "lowtail-test-full", str(full)], check=True)
    try:
        p = run_cli("report", str(doc["analysis_id"]), "--db", db, "-o", full / "r.html", cwd=d)
        assert p.returncode == 1, p.stderr
        assert "disk is full" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert list(full.iterdir()) == []
    finally:
        subprocess.run(["umount", str(full)], check=True)


def test_analyses_accumulate(tmp_path):
    """A second analysis adds rows; the first stays as it was."""
    pair = synth(tmp_path, packets=5_000, rate_pps=10_000)
    db = tmp_path / "r.duckdb"
    docs = []
    for trim in ("0", "200ms"):
        p = run_cli("analyze", pair.pre, pair.post, "--trim", trim, "--db", db, "--json")
        assert p.returncode == 0, p.stderr
        docs.append(json.loads(p.stdout))
    assert docs[1]["analysis_id"] == docs[0]["analysis_id"] + 1
    con = duckdb.connect(str(db), read_only=True)
    got = con.execute("SELECT analysis_id, sent, trim_ns FROM analyses ORDER BY analysis_id").fetchall()
    assert got == [(d["analysis_id"], d["sent"], d["trim_ns"]) for d in docs]
    con.close()


def test_the_json_percentiles_read_as_written(tmp_path):
    """The HDR distribution's percentiles printed as 0.30000000000000004 (sums of float
    steps); they are the values the .hgrm text writes, to 12 decimals."""
    pair = synth(tmp_path, packets=5_000, rate_pps=10_000)
    done = run_cli("analyze", pair.pre, pair.post, "--trim", "0", "--no-store", "--json")
    rows = json.loads(done.stdout)["percentiles"]
    assert any(r["percentile"] == 0.3 for r in rows)
    assert all(len(repr(r["percentile"]).partition(".")[2]) <= 12 for r in rows), [r["percentile"] for r in rows]
    assert "0.30000000000000004" not in done.stdout


def test_the_same_analysis_twice_is_stored_once(tmp_path):
    """Two identical `lowtail analyze` commands stored two identical rows; the second now
    says it was stored already, and names its id. Another option is another analysis."""
    pair = synth(tmp_path, packets=5_000, rate_pps=10_000)
    db = tmp_path / "once.duckdb"
    first = run_cli("analyze", pair.pre, pair.post, "--trim", "0", "--db", db, "--json")
    again = run_cli("analyze", pair.pre, pair.post, "--trim", "0", "--db", db)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    stored = json.loads(first.stdout)["analysis_id"]
    assert f"already stored as analysis {stored} in {db}" in again.stderr and "not stored again" in again.stderr
    other = run_cli("analyze", pair.pre, pair.post, "--trim", "100ms", "--db", db, "--json")
    assert json.loads(other.stdout)["analysis_id"] == stored + 1
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM analyses").fetchone() == (2,)
    con.close()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--set", "ipv6=true"], "frame"),
        (["--format", "bogus"], "bogus"),
        (["--compression", "bogus"], "bogus"),
        (["--set", "rate_pps=-1"], "rate_pps"),
    ],
    ids=["ipv6-in-64-bytes", "format", "compression", "rate"],
)
def test_synth_that_fails_leaves_existing_files_alone(tmp_path, args, needle):
    """`lowtail synth` checks everything before it writes, writes beside the targets and
    renames at the end: a failure leaves the files that were there as they were, and no
    temporary file behind."""
    pre, post = tmp_path / "p.pcap", tmp_path / "q.pcap"
    assert run_cli("synth", pre, post, "--packets", "100").returncode == 0
    before = {f.name: f.read_bytes() for f in (pre, post)}
    p = run_cli("synth", pre, post, "--packets", "100", *args)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert {f.name: f.read_bytes() for f in (pre, post)} == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["p.pcap", "q.pcap"]


def test_synth_replaces_both_files_when_it_succeeds(tmp_path):
    pre, post, truth = tmp_path / "p.pcap", tmp_path / "q.pcap", tmp_path / "t.parquet"
    assert run_cli("synth", pre, post, "--packets", "100").returncode == 0
    first = pre.read_bytes()
    assert run_cli("synth", pre, post, "--packets", "200", "--truth", truth).returncode == 0
    assert len(pre.read_bytes()) > len(first) and truth.stat().st_size > 0
    assert sorted(f.name for f in tmp_path.iterdir()) == ["p.pcap", "q.pcap", "t.parquet"]


def test_percentiles_the_packets_cannot_support_are_printed_as_such(tmp_path):
    """Issue 22: `analyze` of 100,000 packets printed p99.9999 (which is the maximum) and
    p99.999 without a caveat. Now the first reads "max, not resolved" and the second "not
    resolved"; `--budget` at 99.999 % is not PASS, and --rate is what it was sent at."""
    pair = synth(tmp_path, packets=100_000, rate_pps=100_000.0, base_latency_ns=10_000, jitter_ns=500.0, seed=3)
    r = run_cli(
        "analyze", pair.pre, pair.post, "--trim", "0", "--no-store", "--rate", "100k", "--budget", "1ms",
        "--percentile", "99.999",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("99.99")}
    assert rows["99.9999"].rstrip().endswith("max, not resolved"), rows
    assert rows["99.999"].rstrip().endswith("not resolved") and "max," not in rows["99.999"], rows
    assert "sent at 100 kpps" in r.stderr and "(measured)" not in r.stderr  # the header: a note
    assert "verdict: inconclusive" in r.stdout  # 100,000 packets cannot show p99.999 under any budget
