"""The speed gate in `make test`: `lowtail analyze` of the benchmark's 2M-packet pair, as a
whole process, against `cat` of the same files, measured side by side (bench/regression.py
--quick). The limit is wide, so that it holds on a loaded host, and a regression of the
size issue 34 found (the intervals asking the histogram one question at a time: 3× the
analysis time) fails it. The full gate (20M pair, compare of three 5M repetitions) is
`make bench`'s."""

from __future__ import annotations

import pytest

import regression

pytestmark = pytest.mark.slow


def test_the_2m_pair_is_analysed_within_the_quick_gates_ratio_of_reading_it(tmp_path, capsys):
    code = regression.main(["--quick", "--workdir", str(tmp_path)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "analyze 2M" in printed.out
