"""`lowtail import-captures`: a campaign of capture pairs made by other tools becomes a stored
experiment, its axes in the columns lowtail's own runs have, read by `experiment report`
like any other. Pairs made by `lowtail synth` (known answers) and by tcpdump on a veth
testbed; unpaired, unreadable and cut captures are named and the experiment is partial."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from lowtail.analyze.pair import analyze_options, analyze_pair

LOWTAIL = [sys.executable, "-m", "lowtail"]

SPEC = """
[import]
name = "external campaign"
pattern = "{dut}/{rate}pps-r{repetition}-{side}.pcap"
pre = "in"
post = "out"
[axes]
kernel = "6.1.0-rt"
containment = "container"
host = "dut-1"
frame_size = 64
[analysis]
trim = "0s"
"""


def lowtail(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LOWTAIL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def synth(pre: Path, post: Path, rate: int, seed: int, *extra: str) -> None:
    pre.parent.mkdir(parents=True, exist_ok=True)
    done = lowtail(
        pre.parent,
        "synth",
        str(pre),
        str(post),
        "--packets",
        "2000",
        "--rate",
        f"{rate}pps",
        "--seed",
        str(seed),
        *extra,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def campaign(tmp_path):
    """fwd and mirred at 10k and 20k pps, two repetitions each, as another tool names them,
    with what real campaign directories hold too: a compressed capture, a capture without its
    other half, one that is not a capture, and a README."""
    root = tmp_path / "campaign"
    for dut, latency in (("fwd", "30000"), ("mirred", "3000")):
        for rate in (10000, 20000):
            for rep in (0, 1):
                base = root / dut / f"{rate}pps-r{rep}"
                synth(
                    Path(f"{base}-in.pcap"),
                    Path(f"{base}-out.pcap"),
                    rate,
                    rep + 1,
                    "--set",
                    f"base_latency_ns={latency}",
                )
    subprocess.run(["zstd", "-q", "--rm", str(root / "mirred" / "20000pps-r1-out.pcap")], check=True)
    (root / "fwd" / "20000pps-r1-out.pcap").unlink()  # the unpaired one
    (root / "mirred" / "10000pps-r1-in.pcap").write_bytes(b"this is not a capture\n" * 10)
    (root / "README").write_text("captures of the firewall campaign\n")
    (tmp_path / "spec.toml").write_text(SPEC)
    return root


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_campaign_becomes_an_experiment_with_its_axes_and_says_what_it_left_out(tmp_path, campaign):
    done = lowtail(tmp_path, "import-captures", str(campaign), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 3, done.stderr  # partial
    doc = json.loads(done.stdout)
    assert doc["partial"] is True and doc["status"] == "partial"
    assert doc["unpaired"] == ["fwd/20000pps-r1-in.pcap: no POST capture to pair it with"]
    assert [f["pair"] for f in doc["failed"]] == ["10000pps-r1-in.pcap"]
    assert "mirred/10000pps-r1-in.pcap" in doc["failed"][0]["error"]
    assert doc["ignored"] == ["README"]
    assert "unpaired: fwd/20000pps-r1-in.pcap" in done.stderr and "not imported: 10000pps-r1-in.pcap" in done.stderr
    runs = doc["runs"]
    assert sorted((r["dut"], r["rate_pps"], r["repetition"]) for r in runs) == [
        ("fwd", 10000, 0),
        ("fwd", 10000, 1),
        ("fwd", 20000, 0),
        ("mirred", 10000, 0),
        ("mirred", 20000, 0),
        ("mirred", 20000, 1),  # its POST side compressed
    ]
    for r in runs:
        assert r["kind"] == "external" and r["frame_size"] == 64 and r["valid"]
        assert r["dut_config"] == {"kernel": "6.1.0-rt", "host": "dut-1"}
        assert r["containment"] == {"mode": "container"}
        assert r["testbed"]["kind"] == "imported" and r["testbed"]["axes"]["dut"] == r["dut"]
        assert Path(r["series_path"]).exists()
    # The figures are the pair's own: the same as analysing it directly.
    (fwd,) = [r for r in runs if (r["dut"], r["rate_pps"], r["repetition"]) == ("fwd", 10000, 0)]
    direct = analyze_pair(
        campaign / "fwd/10000pps-r0-in.pcap", campaign / "fwd/10000pps-r0-out.pcap", analyze_options(trim_ns=0)
    )
    assert fwd["latency_ns"] == direct["latency_ns"] and fwd["sent"] == direct["sent"] == 2000
    mirred = [r for r in runs if r["dut"] == "mirred"]
    assert all(m["latency_ns"]["p50"] < fwd["latency_ns"]["p50"] for m in mirred)

    report = lowtail(tmp_path, "experiment", "report", "latest", "--db", "t.duckdb", "-o", "r.html")
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "r.html").read_text()
    assert "imported from" in page and str(campaign) in page and "kernel=6.1.0-rt" in page
    listed = lowtail(tmp_path, "experiment", "list", "--db", "t.duckdb", "--json")
    assert json.loads(listed.stdout)[0]["status"] == "partial"

    # Importing again resumes: nothing is stored twice; the missing half, once there, is added.
    synth(campaign / "fwd/20000pps-r1-in.pcap", campaign / "fwd/20000pps-r1-out.pcap", 20000, 2)
    (campaign / "mirred/10000pps-r1-in.pcap").unlink()
    (campaign / "mirred/10000pps-r1-out.pcap").unlink()
    again = lowtail(tmp_path, "import-captures", str(campaign), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["experiment_id"] == 1 and doc["status"] == "finished" and len(doc["runs"]) == 7
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT combination_key) FROM runs").fetchone() == (7, 7)
    once_more = lowtail(tmp_path, "import-captures", str(campaign), "--spec", "spec.toml", "--db", "t.duckdb")
    assert once_more.returncode == 0 and "already stored as experiment 1" in once_more.stderr
    # Each device's verdict, as `lowtail run` ends (the import printed the table alone) and in
    # its JSON beside each run.
    devices = once_more.stdout.split("verdict per device (")[1].splitlines()[1:]
    assert {line.split()[0] for line in devices if line.strip()} == {"fwd", "mirred"}, once_more.stdout
    assert {r["dut"]: r["device_verdict"]["device"] for r in doc["runs"]} == {"fwd": "fwd", "mirred": "mirred"}


def test_a_cut_capture_is_imported_with_what_its_analysis_said(tmp_path):
    root = tmp_path / "c"
    synth(root / "a/5000pps-r0-in.pcap", root / "a/5000pps-r0-out.pcap", 5000, 1)
    post = root / "a/5000pps-r0-out.pcap"
    post.write_bytes(post.read_bytes()[:-30])  # cut inside the last record
    (tmp_path / "spec.toml").write_text(SPEC)
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (run,) = doc["runs"]
    assert run["received"] == 1999  # the cut record dropped, the rest measured
    said = [w["warning"] for w in doc["warnings"]]
    assert any("5000pps-r0-out.pcap: the last record is truncated" in w for w in said), said
    # A capture cut short gives partial figures (the readers' rule): the run says so.
    assert any("partial" in w for w in said) and not run["valid"], said
    assert "the last record is truncated" in done.stderr


@pytest.mark.parametrize(
    "spec, message",
    [
        ('[import]\npattern = "{dut}.pcap"\n', "pattern: needs {side}"),
        ('[import]\npattern = "{dut}-{dut}-{side}.pcap"\n', "{dut} appears twice"),
        ('[import]\npattern = "{side}.pcap"\n[axes]\nrate = "fast"\n', "[axes] rate: cannot read 'fast' as a rate"),
        ('[import]\npattern = "{side}.pcap"\n[analysis]\nid_width = 3\n', "[analysis] --id-width must be 4 or 8"),
        ('[import]\npattern = "{rate}-{side}.pcap"\n', "no file in"),
        ('[import]\npattern = "{side}.pcap"\n[nope]\n', "unknown section [nope]"),
    ],
)
def test_spec_mistakes_are_one_line_and_exit_2(tmp_path, spec, message):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.txt").write_text("")
    (tmp_path / "spec.toml").write_text(spec)
    done = lowtail(tmp_path, "import-captures", "c", "--spec", "spec.toml", "--db", "t.duckdb")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _root() -> bool:
    from lowtail.testbed.system import missing_capabilities

    return os.geteuid() == 0 and not missing_capabilities()


@pytest.mark.root
@pytest.mark.skipif(not _root() or shutil.which("tcpdump") is None, reason="needs root and tcpdump")
def test_pairs_made_by_tcpdump_on_a_veth_testbed(tmp_path):
    """tcpdump plays the external timestamper on lowtail's veth testbed (kernel-mirred in
    the DuT namespace), lowtail-gen the external generator."""
    from lowtail.core.binaries import find_binary
    from lowtail.testbed.duts.kernel_mirred import mirred_redirect
    from lowtail.testbed.topology import NamespacesTestbed

    root = tmp_path / "tcpdump"
    root.mkdir()
    with NamespacesTestbed(tmp_path / "tb") as tb:
        mirred_redirect(tb.dut_ns, tb.dut_in, tb.dut_out)
        dumps = []
        for side, iface in (("pre", tb.tx), ("post", tb.rx)):
            argv = [
                "ip",
                "netns",
                "exec",
                tb.lg_ns,
                "tcpdump",
                "-i",
                iface,
                "-n",
                "-U",
                "-s",
                "128",
                "-B",
                "16384",
                "--immediate-mode",
            ]
            argv += ["--time-stamp-precision", "nano", "-w", str(root / f"mirred_5kpps_{side}.pcap"), "udp"]
            dumps.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for dump in dumps:  # tcpdump says "listening on" once it captures
            assert "listening on" in dump.stderr.readline()
        gen = subprocess.run(
            [str(find_binary("lowtail-gen")), "--iface", f"{tb.tx}@{tb.lg_ns}", "--rate", "5000", "--count", "3000"],
            capture_output=True,
            text=True,
        )
        assert gen.returncode in (0, 3), gen.stderr
        time.sleep(0.3)
        for dump in dumps:
            dump.send_signal(signal.SIGINT)
            dump.wait(10)
    (tmp_path / "spec.toml").write_text(
        '[import]\npattern = "{dut}_{rate}pps_{side}.pcap"\n[axes]\nburst = 1\n[analysis]\ntrim = "0s"\n'
    )
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert (run["dut"], run["rate_pps"]) == ("mirred", 5000)
    assert run["sent"] == 3000 and run["lost"] <= 30
    assert 0 < run["latency_ns"]["min"] <= run["latency_ns"]["p50"] <= run["latency_ns"]["max"]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_repetitions_without_a_rate_in_their_names_are_one_configuration(tmp_path):
    """Issue 22: without {rate}, an import took each pair's measured rate as its axis, so
    repetitions of 2,000 and 2,003 packets became two configurations. The rate is now "not
    given" and they are repetitions of one; the measured rate stays with the run's traffic."""
    root = tmp_path / "campaign"
    for rep, packets in ((0, "2000"), (1, "2003")):
        pre, post = root / f"fwd-r{rep}-in.pcap", root / f"fwd-r{rep}-out.pcap"
        synth(pre, post, 10_000, rep + 1, "--packets", packets)
    (tmp_path / "spec.toml").write_text(
        '[import]\npattern = "{dut}-r{repetition}-{side}.pcap"\npre = "in"\npost = "out"\n[analysis]\ntrim = "0s"\n'
    )
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--json")
    assert done.returncode == 0, done.stderr
    assert {r["rate_pps"] for r in json.loads(done.stdout)["runs"]} == {0}
    compared = lowtail(tmp_path, "compare", "latest", "--db", "t.duckdb", "--json")
    assert compared.returncode in (0, 3), compared.stderr
    (configuration,) = json.loads(compared.stdout)["configurations"]
    assert configuration["repetitions"] == 2 and "kpps" not in configuration["label"]


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_experiment_report_takes_the_whole_verdict_request(tmp_path):
    """`experiment report` reads --budget, --percentile, --max-loss and --confidence as one
    request over the experiment file's verdict, as `compare` does: the page judges by all four."""
    campaign = tmp_path / "campaign"
    synth(campaign / "fwd/10000pps-r0-in.pcap", campaign / "fwd/10000pps-r0-out.pcap", 10000, 0)
    (tmp_path / "spec.toml").write_text(SPEC)
    imported = lowtail(tmp_path, "import-captures", str(campaign), "--spec", "spec.toml", "--db", "t.duckdb")
    assert imported.returncode == 0, imported.stderr
    asked = ["--budget", "2ms", "--percentile", "99.9", "--max-loss", "7", "--confidence", "99"]
    report = lowtail(tmp_path, "experiment", "report", "latest", "--db", "t.duckdb", "-o", "r.html", *asked)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "r.html").read_text()
    assert "99.9th percentile under 2.000 ms (99 % confidence), at most 7 lost" in page
    # A confidence no verdict reads is refused by name, before any page is written.
    bad = lowtail(
        tmp_path, "experiment", "report", "latest", "--db", "t.duckdb", "-o", "bad.html", "--confidence", "30"
    )
    assert bad.returncode == 2 and "--confidence" in bad.stderr and not (tmp_path / "bad.html").exists()


def test_a_host_or_kernel_given_as_a_number_is_stored_as_its_text(tmp_path):
    """[axes] host = 5 (a lab's machines numbered, not named) is the experiment's host "5".
    Before: an internal error (exit 70) storing the experiment's host, whose hostname and
    kernel are text."""
    root = tmp_path / "c"
    synth(root / "fwd-in.pcap", root / "fwd-out.pcap", 10_000, 1)
    (tmp_path / "spec.toml").write_text(
        '[import]\npattern = "{dut}-{side}.pcap"\npre = "in"\npost = "out"\n'
        '[axes]\nhost = 5\nkernel = 6.1\n[analysis]\ntrim = "0s"\n'
    )
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb")
    assert done.returncode == 0, done.stderr
    from lowtail.store import open_store
    from lowtail.store import runs as runstore

    with open_store(tmp_path / "t.duckdb", read_only=True) as store:
        host = runstore.experiment(store, "latest")["host"]
    assert (host["hostname"], host["kernel"], host.get("axes")) == ("5", "6.1", {"host": 5, "kernel": 6.1})


def test_one_pair_and_one_file_left_out_are_said_in_the_singular(tmp_path):
    """The notes of an import count in words that agree ("1 pairs imported", "1 files do not
    match" before)."""
    root = tmp_path / "one"
    synth(root / "fwd" / "20000pps-r1-in.pcap", root / "fwd" / "20000pps-r1-out.pcap", 20000, 1)
    (root / "README").write_text("one pair\n")
    (tmp_path / "spec.toml").write_text(SPEC)
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb")
    assert done.returncode == 0, done.stderr
    assert "stored as experiment 1 in t.duckdb: 1 pair imported" in done.stderr, done.stderr
    assert "1 file does not match the pattern and was ignored: README" in done.stderr, done.stderr


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_an_import_gates_on_its_verdicts_with_strict(tmp_path):
    """The import prints each device's verdict now; `--strict` gates on them as `lowtail run`
    does (4 for a FAIL), where before it had no such option."""
    root = tmp_path / "campaign"
    synth(root / "slow-r0-in.pcap", root / "slow-r0-out.pcap", 10_000, 1, "--packets", "3000")
    (tmp_path / "spec.toml").write_text(
        '[import]\npattern = "{dut}-r{repetition}-{side}.pcap"\npre = "in"\npost = "out"\n[analysis]\ntrim = "0s"\n'
        '[verdict]\npercentile = 50\nbudget = "1us"\n'
    )
    done = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb", "--strict")
    assert done.returncode == 4, done.stderr
    assert "slow  FAIL" in done.stdout and "--strict: the verdict is FAIL" in done.stderr
    again = lowtail(tmp_path, "import-captures", str(root), "--spec", "spec.toml", "--db", "t.duckdb")
    assert again.returncode == 0, again.stderr  # without it, a verdict is a result
