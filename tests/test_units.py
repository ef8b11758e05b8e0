"""The one reader of durations and rates (units.py), as options, experiment files, import
specs and selections all use it: what people write is accepted alike, anything else is a
one-line UserError, never an exception of Python's."""

from __future__ import annotations

import math
import random

import pytest

from lowtail.errors import UserError
from lowtail.units import MAX_RATE_PPS, format_rate, parse_duration_ns, parse_rate_pps


@pytest.mark.parametrize(
    "text, ns",
    [("500ms", 500_000_000), ("1.5s", 1_500_000_000), ("1.5", 1_500_000_000), ("3.1us", 3_100), ("0", 0), (2, 2e9)],
)
def test_durations_as_people_write_them(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    "text, pps",
    [("50k", 50_000), ("1.2M", 1_200_000), ("10kpps", 10_000), ("20 kpps", 20_000), ("50000", 50_000), (2e5, 200_000)],
)
def test_rates_as_people_write_them(text, pps):
    assert parse_rate_pps(text) == pps


@pytest.mark.parametrize("text", ["-5k", "inf", "nan", "1e300", "fast", "", "1²", True, math.inf, None])
def test_what_is_not_a_rate_is_one_clear_error(text):
    with pytest.raises(UserError, match=r"^rates: "):
        parse_rate_pps(text, what="rates")


def _texts(seed: int, n: int = 5_000) -> list[str]:
    """Random short texts of the characters rates and durations are made of, and others."""
    rng = random.Random(seed)
    alphabet = "0123456789.eE+-kKMGgmunsµpps/ hzx\t"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(n)]


def test_any_text_is_a_rate_or_a_user_error():
    for text in _texts(1):
        try:
            assert 0 <= parse_rate_pps(text) <= MAX_RATE_PPS, text
        except UserError:
            pass


def test_a_formatted_rate_reads_back_close():
    """What the formatter prints ("87.5 kpps") the parser reads, within its 3 digits."""
    rng = random.Random(2)
    for pps in [1, 999, 1_000, 20_000, 87_500, *(rng.randint(1, 10**9) for _ in range(2_000))]:
        assert parse_rate_pps(format_rate(pps)) == pytest.approx(pps, rel=5e-3, abs=0.5), pps


def test_any_text_is_a_duration_or_a_user_error():
    for text in _texts(3):
        try:
            assert parse_duration_ns(text, what="--trim") >= 0, text
        except UserError as e:
            assert str(e).startswith("--trim"), (text, str(e))
