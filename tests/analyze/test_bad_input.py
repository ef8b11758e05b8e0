"""Bad input through the command line, as a user meets it: one line on stderr saying
what and how to fix, a non-zero exit where nothing could be computed, never a
traceback, and the database untouched by a failed analysis."""

from __future__ import annotations

import json
import os
import struct
import threading
import time

import craft
import duckdb
import pytest
from analyze_support import assert_clean_failure, run_cli, synth

SMALL = dict(packets=3_000, rate_pps=10_000)  # 0.3 s: analysed with --trim 0


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A valid pair, shared by the tests that pair it with a bad file."""
    return synth(tmp_path_factory.mktemp("good"), **SMALL)


def analyze_cli(pre, post, *extra, db=None):
    args = ["analyze", pre, post, "--trim", "0", *extra]
    args += ["--db", db] if db else ["--no-store"]
    return run_cli(*args)


def test_nonexistent_file(tmp_path, good):
    p = analyze_cli(tmp_path / "nope.pcap", good.post)
    assert_clean_failure(p, 2, "nope.pcap", "no such file")
    # the same from a real process (the other tests call the entry point in-process)
    p = run_cli("analyze", tmp_path / "nope.pcap", good.post, "--no-store", process=True)
    assert_clean_failure(p, 2, "nope.pcap", "no such file")


def test_directory_given_as_a_capture(tmp_path, good):
    p = analyze_cli(good.pre, tmp_path)
    assert_clean_failure(p, 2, str(tmp_path), "directory")


def test_unreadable_file(tmp_path, good):
    """Root reads any file regardless of its mode; a FIFO with no writer would block,
    so the unreadable case is a path through a regular file (ENOTDIR)."""
    (tmp_path / "plain").write_bytes(b"x")
    p = analyze_cli(tmp_path / "plain" / "pre.pcap", good.post)
    assert_clean_failure(p, 2, "pre.pcap")
    if os.geteuid() != 0:
        locked = tmp_path / "locked.pcap"
        locked.write_bytes(good.pre.read_bytes())
        locked.chmod(0)
        assert_clean_failure(analyze_cli(locked, good.post), 2, "locked.pcap", "permission")


def _feed_fifo(path, data: bytes, delay_s: float = 0.0) -> threading.Thread:
    """A writer that opens the FIFO after `delay_s`, writes `data` and closes it."""

    def write() -> None:
        time.sleep(delay_s)
        with open(path, "wb") as f:
            f.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("delay_s", [0.0, 1.0], ids=["writer-first", "writer-later"])
def test_fifo_is_read_as_a_stream(tmp_path, good, delay_s):
    """A FIFO is read as the stream it is (not "empty" because it has no size), whether
    its writer is there before the analysis opens it or comes a moment later."""
    fifo = tmp_path / "pre.fifo"
    os.mkfifo(fifo)
    writer = _feed_fifo(fifo, good.pre.read_bytes(), delay_s)
    p = analyze_cli(fifo, good.post, "--json")
    writer.join(5)
    assert p.returncode == 0, p.stderr
    whole = json.loads(analyze_cli(good.pre, good.post, "--json").stdout)
    doc = json.loads(p.stdout)
    assert doc["received"] == whole["received"] and doc["latency_ns"] == whole["latency_ns"]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_fifo_without_a_writer_is_refused_not_waited_for_forever(tmp_path, good):
    """No writer ever opens the FIFO: after a bounded wait, one line saying so (exit 2)."""
    fifo = tmp_path / "nobody.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    p = run_cli("analyze", fifo, good.post, "--no-store", process=True)
    assert time.monotonic() - started < 60
    assert_clean_failure(p, 2, "nobody.fifo", "FIFO", "no writer")


def test_fifo_whose_writer_sends_nothing_is_empty(tmp_path, good):
    fifo = tmp_path / "empty.fifo"
    os.mkfifo(fifo)
    writer = _feed_fifo(fifo, b"")
    assert_clean_failure(analyze_cli(fifo, good.post), 2, "empty.fifo", "empty")
    writer.join(5)


def test_device_is_refused_as_not_a_capture_file(good):
    """/dev/zero is no empty file: a device, refused for what it is (and never read)."""
    assert_clean_failure(analyze_cli("/dev/zero", good.post), 2, "/dev/zero", "character device")


def test_empty_file(tmp_path, good):
    (tmp_path / "empty.pcap").write_bytes(b"")
    assert_clean_failure(analyze_cli(tmp_path / "empty.pcap", good.post), 2, "empty.pcap", "empty")


@pytest.mark.parametrize(
    "content", [b"hello, this is not a capture at all\n" * 10, b"\x00\x01"], ids=["text", "two-bytes"]
)
def test_not_a_capture(tmp_path, good, content):
    (tmp_path / "notes.txt").write_bytes(content)
    assert_clean_failure(analyze_cli(good.pre, tmp_path / "notes.txt"), 2, "notes.txt", "not a capture")


@pytest.mark.parametrize("head,kind", [(craft.pcap([])[:13], "pcap"), (craft.pcapng([craft.Section()])[:20], "pcapng")])
def test_truncated_header(tmp_path, good, head, kind):
    (tmp_path / "cut.cap").write_bytes(head)
    assert_clean_failure(analyze_cli(tmp_path / "cut.cap", good.post), 2, "cut.cap", "truncated", kind)


def test_truncated_header_inside_compression(tmp_path, good):
    import gzip

    (tmp_path / "cut.pcap.gz").write_bytes(gzip.compress(craft.pcap([])[:10]))
    assert_clean_failure(analyze_cli(tmp_path / "cut.pcap.gz", good.post), 2, "cut.pcap.gz", "truncated")


def test_corrupt_compressed_stream(tmp_path, good):
    data = bytearray(good.pre.read_bytes())
    import gzip

    z = bytearray(gzip.compress(bytes(data)))
    z[len(z) // 2 : len(z) // 2 + 64] = b"\xff" * 64
    (tmp_path / "bad.pcap.gz").write_bytes(bytes(z))
    p = analyze_cli(tmp_path / "bad.pcap.gz", good.post)
    assert "Traceback" not in p.stderr
    assert p.returncode in (2, 3), p.stderr  # an error, or a result marked partial
    assert "bad.pcap.gz" in p.stderr


@pytest.mark.parametrize("linktype", [105, 127, 147])  # 802.11, radiotap, user-defined
def test_unsupported_link_type(tmp_path, good, linktype):
    (tmp_path / "wifi.pcap").write_bytes(craft.pcap([(0, b"\x00" * 60)], linktype=linktype))
    assert_clean_failure(analyze_cli(tmp_path / "wifi.pcap", good.post), 2, "wifi.pcap", "link type", str(linktype))


def test_unsupported_link_type_in_pcapng(tmp_path, good):
    s = craft.Section(interfaces=[craft.Interface(linktype=105)], blocks=[("epb", 0, 1, b"\x00" * 60)])
    (tmp_path / "wifi.pcapng").write_bytes(craft.pcapng([s]))
    assert_clean_failure(analyze_cli(tmp_path / "wifi.pcapng", good.post), 2, "wifi.pcapng", "link type")


def test_truncated_last_record_warns_and_goes_on(tmp_path):
    """A capture cut inside its last record (its writer killed): the records before it
    are analysed, one warning names the file, and the result says it is partial (exit 3)."""
    pair = synth(tmp_path, truncate_post_bytes=7, **SMALL)
    p = analyze_cli(pair.pre, pair.post, "--json")
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr
    assert json.loads(p.stdout)["partial"]
    warning_lines = [line for line in p.stderr.splitlines() if "truncated" in line]
    assert len(warning_lines) == 1 and "post.pcap" in warning_lines[0]


def test_swapped_pre_and_post_are_refused_and_nothing_is_stored(tmp_path, good):
    """POST given as PRE: every latency is negative. The analysis stops (exit 1) with a
    message that says so and by how much, and stores nothing (no analysis of 0 figures)."""
    db = tmp_path / "x.duckdb"
    p = analyze_cli(good.post, good.pre, db=db)
    line = assert_clean_failure(p, 1, "PRE and POST look swapped", "clocks differ by more than")
    assert any(unit in line for unit in ("ns", "µs", "ms")), line
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as c:
            assert c.execute("select count(*) from analyses").fetchone()[0] == 0


@pytest.mark.parametrize("offset_ns,refused", [(-3_400, False), (-3_600, True)])
def test_negative_latencies_a_minority_are_analysed_a_majority_refused(tmp_path, offset_ns, refused):
    """POST's clock behind PRE's: latencies of 3.3 µs + Exp(200 ns) come out negative for
    39 % of packets at −3.4 µs (analysed, with a warning), 78 % at −3.6 µs (refused)."""
    pair = synth(tmp_path, post_clock_offset_ns=offset_ns, **SMALL)
    p = analyze_cli(pair.pre, pair.post, "--json")
    if refused:
        assert_clean_failure(p, 1, "PRE and POST look swapped", "clocks differ by more than")
    else:
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert 0 < doc["negative"] < doc["received"] / 2
        assert any("negative latency" in w for w in doc["warnings"])


@pytest.mark.parametrize("option,value", [("--worst", "1000000000000"), ("--worst", "1000001")])
def test_absurd_sizes_are_refused_in_one_line(tmp_path, good, option, value):
    """A size that would allocate without bound (24 TB for 10^12 worst events) is refused
    by the options check: one line, exit 2, nothing allocated."""
    assert_clean_failure(analyze_cli(good.pre, good.post, option, value), 2, option, "at most")


def test_snap_length_cuts_every_id(tmp_path):
    pair = synth(tmp_path, snaplen=46, **SMALL)
    assert_clean_failure(analyze_cli(pair.pre, pair.post), 1, "snap length")


@pytest.mark.parametrize(
    "options,cause",
    [
        (["--id-offset", "12"], "--id-offset 0"),  # past the end of every datagram
        (["--id-offset", "8"], "--id-offset 0"),  # the padding: every packet has id 0
        (["--udp-port", "7"], "--udp-port"),
    ],
    ids=["offset-past-payload", "offset-into-padding", "wrong-port"],
)
def test_id_options_matching_almost_nothing(tmp_path, options, cause):
    """Id options under which (almost) no packet keeps an id of its own: the message
    says so and suggests the likely cause. (Options that misread the id but still give
    every packet a distinct value, such as the wrong byte order, match correctly.)"""
    pair = synth(tmp_path, **SMALL)
    p = analyze_cli(pair.pre, pair.post, *options)
    assert "Traceback" not in p.stderr
    assert cause in p.stderr, p.stderr


def test_id_options_matching_nothing_exit_non_zero(tmp_path):
    pair = synth(tmp_path, **SMALL)
    assert_clean_failure(analyze_cli(pair.pre, pair.post, "--udp-port", "7"), 1, "--udp-port")


def test_non_udp_traffic_only(tmp_path):
    frames = [(k * 1000, craft.tcp_frame()) for k in range(50)]
    for side in ("pre", "post"):
        (tmp_path / f"tcp-{side}.pcap").write_bytes(craft.pcap(frames))
    assert_clean_failure(analyze_cli(tmp_path / "tcp-pre.pcap", tmp_path / "tcp-post.pcap"), 1, "no UDP")


def test_pre_and_post_of_different_runs(tmp_path):
    a = synth(tmp_path, name="a", first_id=0, **SMALL)
    b = synth(tmp_path, name="b", first_id=10**12, **SMALL)
    p = analyze_cli(a.pre, b.post, "--json")
    assert "Traceback" not in p.stderr
    assert "were found in POST" in p.stderr and "same traffic" in p.stderr, p.stderr


def test_trim_longer_than_the_capture(tmp_path, good):
    p = run_cli("analyze", good.pre, good.post, "--trim", "5s", "--no-store")
    assert_clean_failure(p, 1, "trim", "--trim 0")
    assert "the 5.000 s warm-up trim removes every packet: PRE spans only 299.900 ms" in p.stderr


def test_one_capture_given_as_both_pre_and_post_is_refused(tmp_path, good):
    """It matched every packet with itself and printed a latency of 0 ns for all, exit 0;
    under another name (a hard link) too."""
    link = tmp_path / "post-by-another-name.pcap"
    os.link(good.pre, link)
    for post in (good.pre, link):
        p = analyze_cli(good.pre, post, db=tmp_path / "kept.duckdb")
        assert_clean_failure(p, 2, "PRE and POST are the same file", "pre.pcap")
    assert not (tmp_path / "kept.duckdb").exists(), "nothing was stored, no database made"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--id-width", "3"], "--id-width"),
        (["--export", "series.xlsx"], ".parquet or .csv"),
        (["--max-latency", "soon"], "duration"),
        # A horizon of 0 counted every packet lost (100 %), exit 0.
        (["--max-latency", "0s"], "--max-latency must be more than 0"),
        (["--trim", "-1"], "--trim"),
        (["--id-endian", "middle"], "--id-endian"),
    ],
)
def test_bad_options(tmp_path, good, args, needle):
    p = run_cli("analyze", good.pre, good.post, "--no-store", *args, cwd=tmp_path)
    assert "Traceback" not in p.stderr
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr


def test_moonsniff_file_without_its_name_or_option(tmp_path):
    pair = synth(tmp_path, format="moonsniff", id_width=4, suffix=".bin", **SMALL)
    assert_clean_failure(analyze_cli(pair.pre, pair.post), 2, "not a capture", "MoonSniff")
    assert analyze_cli(pair.pre, pair.post, "--moonsniff-records").returncode == 0


def test_a_failed_analysis_leaves_the_database_intact(tmp_path, good):
    db = tmp_path / "results.duckdb"
    ok = analyze_cli(good.pre, good.post, "--json", db=db)
    assert ok.returncode == 0, ok.stderr
    before = duckdb.connect(str(db), read_only=True)
    rows_before = {
        t: before.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("analyses", "analysis_percentiles", "analysis_histograms", "analysis_worst", "analysis_rates")
    }
    first = before.execute("SELECT * FROM analyses").fetchall()
    before.close()

    (tmp_path / "junk.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + b"\x00" * 5)
    for bad in (tmp_path / "junk.pcap", tmp_path / "missing.pcap"):
        p = analyze_cli(bad, good.post, db=db)
        assert p.returncode != 0 and "Traceback" not in p.stderr
    p = run_cli("analyze", good.pre, good.post, "--trim", "9s", "--db", db)
    assert p.returncode == 1

    after = duckdb.connect(str(db), read_only=True)
    assert after.execute("SELECT * FROM analyses").fetchall() == first
    for t, n in rows_before.items():
        assert after.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == n, t
    after.close()
    shown = run_cli("show", "latest", "--db", db, "--json")
    assert shown.returncode == 0, shown.stderr


def test_export_never_leaves_a_partial_file(tmp_path, good):
    out = tmp_path / "s.parquet"
    p = run_cli("analyze", good.pre, good.post, "--trim", "9s", "--no-store", "--export", out)
    assert p.returncode == 1
    assert not out.exists()
    assert not list(tmp_path.glob(".*partial"))


@pytest.mark.parametrize("option,name", [("--export", "s.csv"), ("--export", "s.parquet"), ("--hgrm", "d.hgrm")])
def test_an_output_where_no_file_can_be_created_is_refused_before_any_work(tmp_path, good, option, name):
    """/proc exists but takes no new file. Before, a CSV export failed after the analysis
    naming the writer's temporary file: "export: /proc/..s.csv.parquet.partial.partial: No
    such file or directory"."""
    p = analyze_cli(good.pre, good.post, option, f"/proc/{name}")
    assert_clean_failure(p, 2, f"{option} /proc/{name}: cannot write in /proc")
    ok = analyze_cli(good.pre, good.post, option, tmp_path / name)
    assert ok.returncode == 0, ok.stderr
    assert [f.name for f in tmp_path.iterdir()] == [name]  # the probe left nothing


def test_corrupt_record_length_mid_file_is_partial(tmp_path, good):
    """A record length that cannot be right, half-way through: the figures up to there,
    marked partial (exit 3), with a warning saying so."""
    data = bytearray(good.pre.read_bytes())
    at = 24 + (16 + 60) * 1500  # the 1500th record header of 60-byte frames
    assert struct.unpack_from("<I", data, at + 8)[0] == 60
    struct.pack_into("<I", data, at + 8, 0x7FFF_FFFF)
    (tmp_path / "broken.pcap").write_bytes(bytes(data))
    p = analyze_cli(tmp_path / "broken.pcap", good.post, "--json")
    assert "Traceback" not in p.stderr
    assert p.returncode == 3, p.stderr
    assert "partial" in p.stderr.lower() and "broken.pcap" in p.stderr


def test_no_traceback_for_a_database_that_is_not_one(tmp_path, good):
    (tmp_path / "not.duckdb").write_text("plain text, not a database")
    p = analyze_cli(good.pre, good.post, db=tmp_path / "not.duckdb")
    assert_clean_failure(p, 2, "not.duckdb")
    p = run_cli("show", "latest", "--db", tmp_path / "nothing-here.duckdb")
    assert_clean_failure(p, 2, "nothing-here.duckdb")


@pytest.mark.parametrize("compression,suffix", [("zstd", ".pcap.zst"), ("gzip", ".pcap.gz")])
def test_truncated_compressed_capture(tmp_path, compression, suffix):
    """A compressed capture cut short (its writer killed): what it holds is analysed,
    with a warning that it ends early, as for a plain file cut short."""
    pair = synth(tmp_path, compression=compression, suffix=suffix, **SMALL)
    data = pair.post.read_bytes()
    pair.post.write_bytes(data[: len(data) * 2 // 3])
    p = analyze_cli(pair.pre, pair.post, "--json")
    assert "Traceback" not in p.stderr
    assert p.returncode in (0, 3), p.stderr
    doc = json.loads(p.stdout)
    assert 0 < doc["received"] < doc["sent"]
    assert any(word in p.stderr for word in ("truncated", "ends early")), p.stderr


@pytest.mark.parametrize(
    "extra,named",
    [
        (["--percentile", "99.9"], "--percentile judges"),
        (["--percentile", "nan"], "--percentile judges"),
        (["--max-loss", "3", "--confidence", "90"], "--max-loss and --confidence judge"),
    ],
    ids=["percentile", "not-a-percentile", "loss-and-confidence"],
)
def test_a_verdict_option_without_a_budget_is_refused_not_ignored(good, extra, named):
    """Before: `analyze --percentile 99.9` (even `--percentile nan`) without --budget printed the
    analysis with exit 0, the option silently ignored, as if it had judged something."""
    p = analyze_cli(good.pre, good.post, *extra)
    assert_clean_failure(p, 2, named, "give --budget too")
    # With --budget the same option judges (or, not being a percentile, is refused as such).
    with_budget = analyze_cli(good.pre, good.post, "--budget", "1ms", *extra[:2])
    if extra[1] == "nan":
        assert_clean_failure(with_budget, 2, "--percentile: percentile must be one of")
    else:
        assert with_budget.returncode in (0, 3) and "verdict:" in with_budget.stdout, with_budget.stderr


@pytest.mark.parametrize(
    "command",
    [["compare", "analysis:1", "analysis:2"], ["certify", "analysis:1", "--budget", "10us"], ["explain", "1"],
     ["model", "evt", "1"], ["model", "knee"], ["compare", "1", "--no-store"]],
    ids=["compare", "certify", "explain", "model-evt", "model-knee", "compare-no-store"],
)  # fmt: skip
def test_a_command_that_reads_the_database_never_makes_an_empty_one(tmp_path, command):
    """Before: `compare`, `certify`, `explain` and `model` with a mistyped --db made an empty
    database there and said "no analysis with id 1" (or "no run"), as if the file had been
    searched; `list` and `report` said "no such database". Now all of them say the latter."""
    missing = tmp_path / "typo.duckdb"
    p = run_cli(*command, "--db", missing, cwd=tmp_path)
    assert_clean_failure(p, 2, "typo.duckdb: no such database")
    assert list(tmp_path.iterdir()) == []


def test_a_label_for_an_analysis_not_stored_is_refused(good):
    """Before: `analyze --no-store --label x` ran with exit 0 and the label went nowhere."""
    p = analyze_cli(good.pre, good.post, "--label", "x")
    assert_clean_failure(p, 2, "--label names the analysis in the database")


def test_a_bare_number_that_names_an_analysis_is_said_how_to_name_it(tmp_path, good):
    """After two `lowtail analyze` runs, `list` shows ids 1 and 2; `compare 1 2` reads a bare
    number as an experiment and said only "no experiment with id 1, 2"."""
    db = tmp_path / "two.duckdb"
    other = synth(tmp_path, "other", seed=2, **SMALL)
    for pair in (good, other):
        assert analyze_cli(pair.pre, pair.post, db=db).returncode == 0
    p = run_cli("compare", "1", "2", "--db", db)
    assert_clean_failure(p, 2, "no experiment with id 1, 2 (there are analyses 1, 2: write analysis:1 analysis:2)")
    p = run_cli("certify", "2", "--db", db)
    assert_clean_failure(p, 2, "no experiment with id 2 (there is an analysis 2: write analysis:2)")
    p = run_cli("model", "evt", "1", "--db", db)
    assert_clean_failure(p, 2, "no run with id 1 (there is an analysis 1: write analysis:1)")
    # explain takes runs alone (it reads their kernel trace): it says why an analysis will not do.
    p = run_cli("explain", "2", "--db", db)
    assert_clean_failure(p, 2, "no run with id 2 (analysis 2 is of captures alone: explain reads the kernel trace")
    # Only when every id is one: no guess otherwise.
    p = run_cli("compare", "1", "7", "--db", db)
    assert_clean_failure(p, 2, "no experiment with id 1, 7")
    assert "write" not in p.stderr
