"""lowtail's Rust core (crate lowtail-py). tests/test_native_stub.py checks this stub
against the built module with mypy's stubtest."""

import os
from collections.abc import Sequence
from fractions import Fraction
from typing import Self, TypeAlias, final

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

from lowtail.analyze.document import AnalyzeOptionsDocument

# What the native functions read 64-bit integers from: any buffer of them. NumPy's stubs
# declare an array a buffer only from Python 3.12 on, so its int64 arrays are named too.
_Int64Buffer: TypeAlias = Buffer | npt.NDArray[np.int64]

__all__ = [
    "LowtailError",
    "OptionsError",
    "SpecError",
    "CaptureError",
    "CaptureIOError",
    "EmptyCaptureError",
    "NotACaptureError",
    "TruncatedHeaderError",
    "UnsupportedLinkTypeError",
    "UnsupportedVersionError",
    "CorruptCaptureError",
    "UnknownInterfaceError",
    "DecompressError",
    "NothingToAnalyzeError",
    "NoPacketIdsError",
    "TrimRemovesAllError",
    "SwappedCapturesError",
    "OutputError",
    "ExportError",
    "OutOfMemoryError",
    "CancelledError",
    "SummaryError",
    "InternalError",
    "__version__",
    "BUILD_COMMIT",
    "BUILD_PROFILE",
    "LONG_VERSION",
    "AnalyzeOptions",
    "Analyzer",
    "synth_pair",
    "synth_defaults",
    "simulate_device",
    "simulate_defaults",
    "nearest_rank",
    "ExactHistogram",
    "SeriesSummary",
    "Evidence",
    "Interval",
    "MIN_CLUSTERS",
    "binomial_cdf",
    "binomial_ppf",
    "student_t",
    "rank_interval",
    "packets_to_bound",
    "packets_to_pass",
    "packets_to_fail",
    "SUMMARY_FIRST_BLOCK_NS",
    "SUMMARY_MAX_BLOCKS",
    "SUMMARY_FORMAT",
    "HEADLINE_PERCENTILES",
    "PROGRAM_EXIT_CODES",
    "SERIES_COLUMNS",
    "FCS_BYTES",
    "FRAME_SIZES",
    "MATCH_MARKER",
    "MATCH_MARKER_OFFSET",
    "match_marked",
    "match_count",
    "FLOW_KEYS",
    "MAX_FLOWS",
    "MAX_FLOW_WEIGHT",
    "check_flow_weights",
]

__version__: str
BUILD_COMMIT: str
"""The git commit the module was built from (10 hex digits), or "unknown"."""
BUILD_PROFILE: str
"""Cargo's build profile: "release" or "debug"."""
LONG_VERSION: str
""""0.1.0 (commit …, release build)": what the native programs' --version print after their name."""

# -- errors: one class per kind; `errno` is set when the operating system said why -----

class LowtailError(Exception):
    """Any error of lowtail's native code."""

    errno: int | None

class OptionsError(LowtailError):
    """An analysis option out of its range."""

class SpecError(LowtailError):
    """A synthetic-pair or simulation spec that is not JSON, has unknown keys or values out of range."""

class CaptureError(LowtailError):
    """A capture file lowtail cannot read."""

class CaptureIOError(CaptureError):
    """The operating system refused to open or read a capture."""

class EmptyCaptureError(CaptureError):
    """A capture without a byte."""

class NotACaptureError(CaptureError):
    """A file in no format lowtail reads."""

class TruncatedHeaderError(CaptureError):
    """A capture that ends inside its header."""

class UnsupportedLinkTypeError(CaptureError):
    """A capture of a link layer lowtail cannot decode."""

class UnsupportedVersionError(CaptureError):
    """A pcap or pcapng version libpcap does not read either."""

class CorruptCaptureError(CaptureError):
    """A capture whose bytes contradict its format."""

class UnknownInterfaceError(CaptureError):
    """A pcapng packet on an interface the file never described."""

class DecompressError(CaptureError):
    """A damaged zstd or gzip stream (bad data, a checksum that fails)."""

class NothingToAnalyzeError(LowtailError):
    """The captures were read but hold nothing to measure."""

class NoPacketIdsError(NothingToAnalyzeError):
    """No PRE frame carries a packet id where the options look for it."""

class TrimRemovesAllError(NothingToAnalyzeError):
    """The warm-up trim is longer than the PRE capture."""

class SwappedCapturesError(NothingToAnalyzeError):
    """Most latencies are negative: PRE and POST look swapped (or their clocks are far apart)."""

class OutputError(LowtailError):
    """An output file could not be written."""

class ExportError(OutputError):
    """The matched series could not be written."""

class OutOfMemoryError(LowtailError):
    """The matcher would hold more memory than the analysis may take (the capture's rate times max_latency_ns)."""

class CancelledError(LowtailError):
    """The analysis was cancelled."""

class SummaryError(LowtailError):
    """Stored bytes that are not a latency summary (damaged, or of a later format)."""

class InternalError(LowtailError):
    """A bug in the native code (a thread panicked)."""

# -- analysis ---------------------------------------------------------------------------

@final
class AnalyzeOptions:
    """How to find packet ids and what to compute. Keyword arguments only; one left out
    (or None) takes the default, and the id fields default to `id_format`'s preset.
    Raises OptionsError for a value out of range."""

    def __new__(
        cls,
        *,
        id_format: str | None = None,
        id_offset: int | None = None,
        id_width: int | None = None,
        id_endian: str | None = None,
        udp_port: int | None = None,
        moonsniff_records: bool = False,
        trim_ns: int | None = None,
        max_latency_ns: int | None = None,
        worst: int | None = None,
        histogram_bins: int | None = None,
        export: str | os.PathLike[str] | None = None,
        flow_key: str | None = None,
        max_memory_bytes: int | None = None,
    ) -> Self: ...
    @property
    def id_format(self) -> str: ...
    @property
    def id_offset(self) -> int: ...
    @property
    def id_width(self) -> int: ...
    @property
    def id_endian(self) -> str: ...
    @property
    def udp_port(self) -> int | None: ...
    @property
    def moonsniff_records(self) -> bool: ...
    @property
    def trim_ns(self) -> int: ...
    @property
    def max_latency_ns(self) -> int: ...
    @property
    def max_memory_bytes(self) -> int | None:
        """The most memory the matcher may hold (None: three quarters of what the host, or
        its memory cgroup, has when the analysis starts)."""
    @property
    def worst(self) -> int: ...
    @property
    def histogram_bins(self) -> int: ...
    @property
    def export(self) -> str | None: ...
    @property
    def flow_key(self) -> str: ...
    def to_dict(self) -> AnalyzeOptionsDocument:
        """Every option by name, as the database stores them."""

@final
class Analyzer:
    """One analysis of a capture pair; `run()` releases the GIL."""

    def __new__(
        cls, pre: str | os.PathLike[str], post: str | os.PathLike[str], options: AnalyzeOptions | None = None
    ) -> Self: ...
    def run(self) -> str:
        """Run the analysis; returns the figures as JSON (`take_summary` then gives the
        latencies' summary)."""

    def take_summary(self) -> SeriesSummary | None:
        """The exact distribution and time blocks of the last run's latencies (once; None
        before a run finished)."""

    def progress(self) -> tuple[int, int]:
        """(bytes read, bytes in total) over both files."""

    def cancel(self) -> None:
        """Ask `run()` to stop; it then raises CancelledError."""

# -- facts shared with the Rust side ----------------------------------------------------

HEADLINE_PERCENTILES: tuple[tuple[str, Fraction], ...]
"""((key, quantile), ...): p50 … p99_9999, the percentiles every summary reports, each an
exact Fraction (999/1000 for p99_9)."""

PROGRAM_EXIT_CODES: dict[str, int]
"""{name: exit code} of the native programs (lowtail-gen, -cap, -fwd, -noise): ok, failure,
usage, degraded, disk_full (an output could not be written: the disk is full), interrupted."""

SERIES_COLUMNS: tuple[tuple[str, str], ...]
"""((name, Arrow type alias), ...) of the matched series (`--export`), in file order."""

def nearest_rank(q: Fraction | int, n: int) -> int:
    """Nearest-rank position (1-based) of quantile q among n samples: ⌈q·n⌉ clamped to
    1…n, in exact arithmetic (percentile_disc by its definition). q is exact: a Fraction
    (Fraction("99.9") / 100) or an int; a float raises TypeError."""

@final
class ExactHistogram:
    """Exact nearest-rank distribution of integer nanoseconds in bounded memory (the one
    every analysis computes its figures with)."""

    def __new__(cls) -> Self: ...
    def record(self, values: _Int64Buffer) -> None:
        """Count every value of a buffer of 64-bit integers (a NumPy int64 array)."""

    def merge(self, other: ExactHistogram) -> None:
        """Add every sample of `other`."""

    @property
    def count(self) -> int:
        """Samples recorded."""

    def min(self) -> int | None:
        """The smallest sample; None when empty."""

    def max(self) -> int | None:
        """The largest sample; None when empty."""

    def quantiles(self, qs: Sequence[Fraction | int]) -> list[int] | None:
        """Nearest-rank values at the quantiles `qs` (as percentile_disc); None when empty.
        Each quantile is exact: a `fractions.Fraction` or an int (a float is refused)."""

    def at_ranks(self, ranks: Sequence[int]) -> list[int]:
        """The order statistics at 1-based `ranks`; ValueError for a rank outside 1..count."""

    def memory_bytes(self) -> int:
        """Approximate heap use in bytes."""

    def count_at_most(self, value: int) -> int:
        """Samples at or below `value`: its rank from below (0 when every sample is above it)."""

@final
class SeriesSummary:
    """A run's latencies as the statistics need them, without the series: the exact
    distribution (`histogram`) and the packets of each time block of PRE time by coarse
    latency bucket (exact below 256 ns, at most 1/128 of a value wide above). Blocks start
    SUMMARY_FIRST_BLOCK_NS wide and double, merging pairs, to stay within SUMMARY_MAX_BLOCKS."""

    def __new__(cls) -> Self: ...
    def record(self, pre_ts_ns: _Int64Buffer, latency_ns: _Int64Buffer) -> None:
        """Count packets in PRE order: two int64 buffers of one length; ValueError otherwise."""

    @property
    def histogram(self) -> ExactHistogram:
        """The exact distribution of every packet counted (shared, not a copy)."""

    @property
    def count(self) -> int:
        """Packets counted."""

    @property
    def origin_ns(self) -> int | None:
        """The first packet's PRE timestamp (None when empty)."""

    @property
    def block_width_ns(self) -> int:
        """The width of every time block."""

    def block_packets(self) -> list[int]:
        """Packets in each time block, in time order."""

    def blocks_above(self, value: int) -> list[int]:
        """Packets in each time block whose latency lies in a bucket above `value`'s."""

    def to_bytes(self) -> bytes:
        """The summary as stored (compressed)."""

    @staticmethod
    def from_bytes(data: bytes) -> SeriesSummary:
        """A summary from `to_bytes()`'s output; SummaryError for bytes that are not one."""

    def __reduce__(self) -> tuple[object, tuple[bytes]]: ...

SUMMARY_FIRST_BLOCK_NS: int
"""The width of a summary's first time blocks (1 ms)."""

SUMMARY_MAX_BLOCKS: int
"""The most time blocks a summary keeps (64): it ends with between half and all of them."""

SUMMARY_FORMAT: int
"""The format version `SeriesSummary.to_bytes` writes."""

# -- percentile bounds: every interval, bound and count of some packets in one call ------

@final
class Interval:
    """A percentile's interval (see `lowtail.compare.intervals`): its nearest-rank value, its
    bounds and their ranks (0 / count + 1: none on that side), the dispersion they allow
    for (infinite where it could not be measured), the packets that would bound it, and why
    a side is not bounded (`unbounded`: "no packets", "wanders", "few clusters", "above",
    "below")."""

    @property
    def value_ns(self) -> int | None: ...
    @property
    def lower_ns(self) -> int | None: ...
    @property
    def upper_ns(self) -> int | None: ...
    @property
    def lower_rank(self) -> int: ...
    @property
    def upper_rank(self) -> int: ...
    @property
    def dispersion(self) -> float: ...
    @property
    def blocks(self) -> int: ...
    @property
    def packets_to_bound(self) -> int | None: ...
    @property
    def unbounded(self) -> str | None: ...
    @property
    def at_maximum(self) -> bool: ...
    @property
    def lag1(self) -> float | None: ...
    @property
    def lag1_blocks(self) -> int | None: ...
    @property
    def clusters(self) -> int | None:
        """ "few clusters": the blocks holding packets above the percentile."""
    @property
    def per_cluster(self) -> float | None:
        """ "few clusters": packets above the percentile per such block."""

@final
class Evidence:
    """The packets an interval speaks for: one run's summary, or several runs' pooled (their
    exact distributions merged — `histogram` when the caller has it already — their time
    blocks kept apart), indexed once: every rank and count is a binary search."""

    def __new__(cls, summaries: Sequence[SeriesSummary], histogram: ExactHistogram | None = None) -> Self: ...
    @property
    def count(self) -> int:
        """Packets."""

    @property
    def blocks(self) -> int:
        """Blocks holding a packet, over all runs."""

    def value_at_rank(self, rank: int) -> int:
        """The rank-th smallest latency (1-based); ValueError outside 1..count."""

    def count_at_most(self, value: int) -> int:
        """Packets at or below `value`."""

    def count_at_least(self, value: int) -> int:
        """Packets at or above `value` (those that reach a budget of `value`)."""

    def interval(self, q: Fraction | int, level: float) -> Interval:
        """The two-sided interval of quantile `q` (exact) at `level`."""

    def bounds(
        self, qs: Sequence[Fraction | int], level: float, confidence: float
    ) -> tuple[list[Interval], list[Interval], list[tuple[int, int]]]:
        """The intervals of `qs` at `level`, their one-sided bounds at `confidence` (sides of
        level 2·confidence − 1) and the exceedance ladder ((value, packets above it),
        ascending), in one pass."""

MIN_CLUSTERS: int
"""The fewest clusters (blocks holding packets above a percentile) from which a clustered
percentile is bounded; with fewer, one run does not bound it."""

def binomial_cdf(n: int, x: float, k: int) -> float:
    """P(E ≤ k) for E ~ Binomial(n, x)."""

def binomial_ppf(n: int, x: float, p: float) -> int:
    """The smallest k with P(E ≤ k) ≥ p, E ~ Binomial(n, x)."""

def student_t(p: float, df: int) -> float:
    """Student's t quantile at p with df degrees of freedom."""

def rank_interval(n: int, q: Fraction | int, level: float, dispersion: float = 1.0) -> tuple[int, int]:
    """(lower, upper) ranks of the two-sided interval of quantile q at `level` among n
    packets with this dispersion (0 / n + 1: not bounded on that side)."""

def packets_to_bound(q: Fraction | int, tail: float, dispersion: float = 1.0) -> int:
    """The fewest packets whose largest bounds quantile q from above with error `tail`."""

def packets_to_pass(q: Fraction | int, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its upper bound of q to fall below a budget a
    `share_above` of its packets reach; None when it never would."""

def packets_to_fail(q: Fraction | int, share_above: float, dispersion: float, tail: float) -> int | None:
    """Packets in all a run needs for its lower bound of q to reach a budget a `share_above`
    of its packets reach; None when it never would."""

# -- synthetic pairs and the device model -----------------------------------------------

def synth_pair(
    pre: str | os.PathLike[str],
    post: str | os.PathLike[str],
    spec_json: str,
    truth: str | os.PathLike[str] | None = None,
) -> str:
    """Write a synthetic PRE/POST pair from a JSON spec; returns the summary as JSON."""

def synth_defaults() -> str:
    """The default synthetic spec, as JSON."""

def simulate_device(spec_json: str) -> tuple[str, bytes, bytes]:
    """Run the device model; (summary JSON, arrival times, departure times as i64 LE bytes)."""

def simulate_defaults() -> str:
    """The default simulation spec, as JSON."""

FCS_BYTES: int
"""Bytes of the Ethernet FCS: counted in a frame size (its size on the wire), absent from
what a socket sends and a capture shows."""

FRAME_SIZES: tuple[int, int]
"""(smallest, largest) frame size on the wire, FCS included: RFC 2544's 64 and 1518."""

MATCH_MARKER: bytes
"""The bytes a matching packet carries right after its id: what lowtail's IPS rule matches."""

MATCH_MARKER_OFFSET: int
"""Where the marker sits in the UDP payload of the generator's frames (after its 8-byte id)."""

def match_marked(ids: Buffer, match_share: float) -> bytes:
    """One byte per id of a uint64 buffer: 1 where the generator marked that packet at this
    share (0 to 1), else 0; ValueError for a share outside 0 to 1."""

def match_count(first: int, count: int, match_share: float) -> int:
    """How many of the `count` ids from `first` on the generator marks at this share."""

FLOW_KEYS: list[str]
"""The keys that tell a capture's flows apart, the default first: "5tuple", "src-port",
"none" (`AnalyzeOptions(flow_key=...)`)."""
MAX_FLOWS: int
"""The most flows an analysis tells apart; packets of further flows are counted together
as one more ("other flows")."""
MAX_FLOW_WEIGHT: int
"""The most one flow may weigh in `[traffic] flow_weights` (`lowtail-gen --flow-weights`)."""

def check_flow_weights(weights: list[int]) -> None:
    """Whether these weights (one per flow) make a schedule the generator sends; ValueError
    saying why not (a weight out of range, a sum too long for one cycle)."""
