"""What crosses between Rust and Python crosses typed: the options are one native type
(names, defaults and checks in Rust), every error kind arrives as its own exception class
and becomes a lowtail error by class, and the facts both sides need (headline
percentiles, nearest rank, the series schema) come from the native module."""

from __future__ import annotations

import errno
import inspect
import math
import os
import subprocess
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analyze_support import PERCENTILES, run_cli, synth

from lowtail import _native
from lowtail.analyze.pair import AnalyzeOptions, analyze_options, analyze_pair, lowtail_error
from lowtail.core.errors import DiskFull, Failure, Interrupted, UserError
from lowtail.experiment.runner import is_disk_full
from lowtail.store.codec import ANALYSIS_OPTIONS

SMALL = {"packets": 15_000, "rate_pps": 10_000}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("good"), **SMALL)


# -- options ------------------------------------------------------------------------------


# Not stored: a finished analysis is the same under any memory limit (one past it stops).
NOT_STORED = {"max_memory_bytes"}


def test_options_keywords_properties_and_stored_keys_are_one_set():
    names = set(inspect.signature(AnalyzeOptions).parameters)
    stored = AnalyzeOptions().to_dict()
    assert set(stored) == names - NOT_STORED
    assert all(hasattr(AnalyzeOptions(), name) for name in NOT_STORED)
    assert all(getattr(AnalyzeOptions(), name) == value for name, value in stored.items())
    assert {"max_latency_ns", "worst", "trim_ns"} <= names


def test_the_id_fields_follow_the_preset_unless_given():
    ms = AnalyzeOptions(id_format="moonsniff")
    assert (ms.id_offset, ms.id_width, ms.id_endian) == (0, 4, "little")
    mixed = AnalyzeOptions(id_format="moonsniff", id_width=8, id_offset=6)
    assert (mixed.id_offset, mixed.id_width, mixed.id_endian) == (6, 8, "little")
    assert AnalyzeOptions().id_width == 8 and AnalyzeOptions().id_endian == "big"


def test_options_are_read_only():
    o = AnalyzeOptions(worst=7)
    with pytest.raises(AttributeError):
        o.worst = 8  # type: ignore[misc]
    assert o.worst == 7 and o == AnalyzeOptions(worst=7) and o != AnalyzeOptions()


@pytest.mark.parametrize(
    "values,needle",
    [
        ({"id_width": 3}, "--id-width must be 4 or 8, not 3"),
        ({"id_endian": "middle"}, "--id-endian"),
        ({"id_format": "pcap"}, "unknown id format"),
        ({"worst": -1}, "--worst must be at least 0"),
        ({"udp_port": 70000}, "--udp-port must be at most 65535"),
        ({"trim_ns": -1}, "--trim must be at least 0, not -1"),
        ({"max_latency_ns": 0}, "--max-latency must be more than 0"),
    ],
)
def test_bad_options_raise_the_options_class(values, needle):
    with pytest.raises(_native.OptionsError, match=needle) as caught:
        AnalyzeOptions(**values)
    assert isinstance(caught.value, _native.LowtailError) and caught.value.errno is None
    with pytest.raises(UserError, match=needle):
        analyze_options(**values)


def test_the_cli_defaults_are_the_native_ones(good, tmp_path):
    p = run_cli("analyze", good.pre, good.post, "--json", "--db", tmp_path / "db.duckdb")
    assert p.returncode == 0, p.stderr
    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    # Read as lowtail reads it back: the store's codec (which also keeps the document's version).
    stored = ANALYSIS_OPTIONS.decode(None, con.execute("SELECT options FROM analyses").fetchone()[0])
    assert stored == AnalyzeOptions().to_dict()


# -- errors -------------------------------------------------------------------------------


def run_native(pre, post, **options):
    return _native.Analyzer(str(pre), str(post), AnalyzeOptions(**options)).run()


def test_capture_errors_arrive_as_their_classes(tmp_path, good):
    junk, empty = tmp_path / "junk.pcap", tmp_path / "empty.pcap"
    junk.write_bytes(b"not a capture at all")
    empty.write_bytes(b"")
    cases = [
        (junk, _native.NotACaptureError),
        (empty, _native.EmptyCaptureError),
        (tmp_path / "missing.pcap", _native.CaptureIOError),
    ]
    for pre, cls in cases:
        with pytest.raises(cls) as caught:
            run_native(pre, good.post)
        assert isinstance(caught.value, _native.CaptureError)
    with pytest.raises(_native.CaptureIOError) as caught:
        run_native(tmp_path / "missing.pcap", good.post)
    assert caught.value.errno == errno.ENOENT


def test_nothing_to_analyse_is_a_failure_by_class(good):
    with pytest.raises(_native.NoPacketIdsError):
        run_native(good.pre, good.post, udp_port=7)
    with pytest.raises(_native.TrimRemovesAllError):
        run_native(good.pre, good.post, trim_ns=10**12)
    for options in ({"udp_port": 7}, {"trim_ns": 10**12}):
        with pytest.raises(Failure) as caught:
            analyze_pair(good.pre, good.post, AnalyzeOptions(**options))
        assert isinstance(caught.value.__cause__, _native.NothingToAnalyzeError)


def test_an_unreadable_capture_is_a_user_error(tmp_path, good):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(UserError, match="not a capture") as caught:
        analyze_pair(junk, good.post)
    assert isinstance(caught.value.__cause__, _native.NotACaptureError)


def test_an_export_that_cannot_be_created_carries_its_errno(tmp_path, good):
    target = tmp_path / "no-such-dir" / "series.parquet"
    with pytest.raises(UserError, match="export") as caught:
        analyze_pair(good.pre, good.post, AnalyzeOptions(export=target))
    cause = caught.value.__cause__
    assert isinstance(cause, _native.ExportError) and isinstance(cause, _native.OutputError)
    assert cause.errno == errno.ENOENT
    assert not is_disk_full(caught.value)


def test_a_cancelled_analysis_is_its_own_class(good):
    analyzer = _native.Analyzer(str(good.pre), str(good.post), AnalyzeOptions())
    analyzer.cancel()
    with pytest.raises(_native.CancelledError):
        analyzer.run()
    assert isinstance(lowtail_error(_native.CancelledError("analysis cancelled")), Interrupted)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_told_by_errno(tmp_path):
    pair = synth(tmp_path, packets=60_000, rate_pps=100_000, jitter_ns=5000.0)  # 0.6 s: analysed untrimmed
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "lowtail-test-full", str(full)], check=True)
    try:
        with pytest.raises(DiskFull) as caught:  # the machine's state (exit 1), not bad input
            analyze_pair(pair.pre, pair.post, AnalyzeOptions(trim_ns=0, export=full / "series.parquet"))
        assert isinstance(caught.value.__cause__, _native.ExportError)
        assert caught.value.__cause__.errno == errno.ENOSPC
        assert is_disk_full(caught.value)
        assert list(full.iterdir()) == []  # the partial file is removed
    finally:
        subprocess.run(["umount", str(full)], check=True)


def test_spec_errors_are_their_class(tmp_path):
    with pytest.raises(_native.SpecError, match="bad synth spec"):
        _native.synth_pair(str(tmp_path / "a"), str(tmp_path / "b"), '{"packets": "many"}')
    with pytest.raises(_native.SpecError, match="probability"):
        _native.synth_pair(str(tmp_path / "a"), str(tmp_path / "b"), '{"loss": 2}')
    with pytest.raises(_native.SpecError, match="bad simulation spec"):
        _native.simulate_device('{"no_such_field": 1}')
    with pytest.raises(_native.OutputError) as caught:
        _native.synth_pair(str(tmp_path / "none" / "a"), str(tmp_path / "b"), "{}")
    assert caught.value.errno == errno.ENOENT


# -- shared facts -------------------------------------------------------------------------


def test_headline_percentiles_are_the_reported_ones(good):
    """The native list carries each percentile exactly (a Fraction), in table order."""
    assert _native.HEADLINE_PERCENTILES == tuple(PERCENTILES)
    assert all(isinstance(q, Fraction) for _, q in _native.HEADLINE_PERCENTILES)
    lat = analyze_pair(good.pre, good.post)["latency_ns"]
    assert [k for k in lat if k.startswith("p")] == [k for k, _ in _native.HEADLINE_PERCENTILES]


def exact_rank(q: Fraction, n: int) -> int:
    """The nearest rank by the definition, in exact arithmetic: ⌈q·n⌉, clamped to 1…n."""
    return min(n, max(1, math.ceil(q * n)))


def test_nearest_rank_is_exact():
    """⌈q·n⌉ of the exact percentile: 99.9 % of 1000 samples is rank 999, never 1000 (a
    percentile carried as a float, float("99.9") / 100 = 0.9990000000000001, ranks one up)."""
    assert _native.nearest_rank(Fraction("99.9") / 100, 1000) == 999
    assert math.ceil(float("99.9") / 100 * 1000) == 1000  # the float way, for contrast
    quantiles = [Fraction(0), Fraction(1, 10), Fraction(1, 3), Fraction(2, 3), Fraction(1)]
    quantiles += [Fraction(p) / 100 for p in ("99.5", "99.9", "99.95", "99.99", "99.999", "99.9999", "12.345")]
    for n in (1, 2, 3, 7, 100, 999, 1000, 3000, 100_000, 170_000_000, 2**62):
        for q in quantiles:
            assert _native.nearest_rank(q, n) == exact_rank(q, n), (q, n)
    assert _native.nearest_rank(1, 5) == 5  # an int is a fraction too


@pytest.mark.parametrize("q", [0.999, Fraction(3, 2), Fraction(-1, 2), "99.9"])
def test_nearest_rank_refuses_floats_and_fractions_outside_0_1(q):
    """A float cannot hold most percentiles exactly: it is refused, not rounded."""
    with pytest.raises((TypeError, ValueError)):
        _native.nearest_rank(q, 10)


def test_exact_ranks_equal_percentile_disc_for_every_headline_percentile():
    """PostgreSQL's percentile_disc ranks at ceil(q·n) in double precision, with q the
    double nearest the percentile. For the headline percentiles that equals the exact rank
    for every n up to 4 million (checked here; and, once, up to 4·10^8), so the figures stay
    equal to SQL's: the benchmark's PostgreSQL baseline needs no exact arithmetic of its own."""
    n = np.arange(1, 4_000_001, dtype=np.int64)
    for _, q in _native.HEADLINE_PERCENTILES:
        exact = (q.numerator * n + q.denominator - 1) // q.denominator  # ⌈q·n⌉ in integers
        double = np.ceil(float(q) * n.astype(np.float64)).astype(np.int64)
        assert np.array_equal(exact, double), (q, n[exact != double][:5])
        for k in (1, 999, 1000, 12_345, 3_999_999):  # the integer formula is ⌈q·n⌉
            assert exact[k - 1] == exact_rank(q, k) == _native.nearest_rank(q, k)


def test_the_exported_series_has_the_native_schema(tmp_path, good):
    out = tmp_path / "series.parquet"
    analyze_pair(good.pre, good.post, AnalyzeOptions(export=out))
    want = pa.schema([pa.field(name, pa.type_for_alias(ty), nullable=False) for name, ty in _native.SERIES_COLUMNS])
    assert pq.read_schema(out).remove_metadata() == want
