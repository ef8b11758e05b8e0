"""The report toolkit without a browser: axes read in a person's units, the nines axis is
the one definition both renderers draw, reference lines and legends follow the rules, a
page is self-contained, and the PNG renderer draws what the page shows."""

from __future__ import annotations

import base64
import gzip
import re

import numpy as np
import pytest
from PIL import Image
from plotly.offline import get_plotlyjs

from lowtail.report import figure as tk
from lowtail.report import plots
from lowtail.report.page import Page, breakable, figure_html, table_html
from lowtail.report.png import write_png

NINES = ["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %", "99.9999 %"]
# What an axis must never show: plotly's or matplotlib's exponent and SI forms.
UNREADABLE = re.compile(r"e[+-]?\d|×|10[⁰¹²³⁴⁵⁶⁷⁸⁹]|^\d+(\.\d+)?[kMGnµm]$")


def test_the_nines_axis_is_labelled_by_percentile():
    axis = tk.nines_axis(2e6)
    assert axis["ticktext"] == NINES and axis["tickvals"] == [10.0**n for n in range(7)]
    assert tk.nines_axis(500)["ticktext"] == NINES[:3]  # up to the last nine the data reaches
    assert tk.nines_x(0.999) == pytest.approx(1000)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1_000, 1_000_000], ["1 µs", "10 µs", "100 µs", "1 ms"]),
        ([2_000, 80_000], ["2 µs", "5 µs", "10 µs", "20 µs", "50 µs"]),
        ([500, 3_000_000_000], ["1 µs", "1 ms", "1 s"]),
    ],
)
def test_latency_axes_read_in_units(values, expected):
    axis = tk.latency_axis(values)
    assert axis["type"] == "log"
    assert set(expected) <= set(axis["ticktext"])
    assert not [t for t in axis["ticktext"] if UNREADABLE.search(t)]


def test_linear_ticks_are_told_apart_however_close():
    axis = tk.latency_axis([99_990, 100_010], log=False)
    assert len(set(axis["ticktext"])) == len(axis["ticktext"]) > 2
    assert all(t.endswith(" µs") for t in axis["ticktext"])
    rates = tk.value_axis([0, 25_000, 100_000], "rate", "rate", log=False, include_zero=True)
    assert rates["ticktext"][0] == "0" and "100 kpps" in rates["ticktext"]


def _shape_names(fig) -> list[str]:
    return [s.name for s in fig.layout.shapes]


def test_latency_plots_carry_the_budget_and_keep_legends_off_the_data():
    curve = plots.Curve("fwd", [(0.0, 10_000), (0.9, 20_000), (0.999, 40_000)], floor=[(0.0, 3_000), (0.999, 4_000)])
    figures = [
        plots.hdr_percentile_plot([curve], budget_ns=350_000),
        plots.cdf_plot([("fwd", [(10_000, 0.5), (40_000, 1.0)])], budget_ns=350_000),
        plots.worst_scatter([(1, 30_000), (2, 40_000)], "worst", budget_ns=350_000),
        plots.worst_scatter_grid([("a", [(1, 30_000)], 0), ("b", [(1, 40_000)], 0)], budget_ns=350_000),
        plots.latency_vs_rate_plot(
            [plots.Sweep("fwd", [(1e4, {"p50": 1e4}, False), (2e4, {"p50": 2e4}, True)])], budget_ns=350_000
        ),
    ]
    for fig in figures:
        assert any(n == "budget 350 µs" for n in _shape_names(fig)), fig.layout.title.text
        assert fig.layout.legend.y < 0  # under the plot area, never over it
    hdr = figures[0]
    assert [t.name for t in hdr.data] == ["fwd", "fwd: floor"]
    assert hdr.data[1].line.dash == "dash"
    assert "µs" in hdr.data[0].customdata[0][1]  # hover values carry their unit


def test_a_constant_latency_draws_a_step_not_nothing():
    fig = plots.cdf_plot([("burst 1", [(12_000, 1.0)])])
    assert list(fig.data[0].x) == [12_000, 12_000] and list(fig.data[0].y) == [0.0, 1.0]


def test_a_page_is_self_contained_with_one_bundle_and_linked_sections():
    page = Page("t")
    for heading in ("Run 1", "Run 1", "Run 2"):
        page.add(heading, figure_html(plots.worst_scatter([(1, 2_000)], heading)))
    html = page.render()
    assert html.count("Plotly.newPlot") == 1 and html.count("class='lt-plot-spec'") == 3
    assert "<script src" not in html  # nothing fetched: the bundle is inlined
    packed = re.search(r"<script type='application/gzip' id='lt-plotly'>([^<]+)</script>", html)
    assert packed and gzip.decompress(base64.b64decode(packed[1])).decode() == get_plotlyjs()  # plotly's, whole
    assert len(html) < 2_100_000  # compressed: the bundle alone is 4.8 MB
    ids = re.findall(r"<h2 id='([^']+)'", html)
    assert ids == ["run-1", "run-1-2", "run-2"] and all(f"href='#{i}'" in html for i in ids)


def test_the_png_renderer_draws_the_figure_a_page_shows(tmp_path):
    curve = plots.Curve(
        "fwd",
        [(1 - 0.5**k, 10_000 * (1 + k)) for k in range(16)],
        band=[(1 - 0.5**k, 9_000 * (1 + k), 11_000 * (1 + k)) for k in range(16)],
    )
    path = write_png(plots.hdr_percentile_plot([curve], budget_ns=300_000), tmp_path / "hdr.png")
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(int)
    coloured = (rgb.max(axis=2) - rgb.min(axis=2) > 60).sum()
    assert coloured > 500  # the curve, its band and the budget line


def test_worst_events_panels_fill_their_rows():
    """Four configurations side by side are 2 × 2 (not 3 + 1), five are 3 + 2."""
    for n, grid in ((4, (2, 2)), (5, (2, 3)), (3, (1, 3))):
        fig = plots.worst_scatter_grid([(f"c{i}", [(1, 10_000 * (i + 1))], 0) for i in range(n)])
        xs = {tuple(fig.layout[k].domain) for k in fig.layout if k.startswith("xaxis")}
        ys = {tuple(fig.layout[k].domain) for k in fig.layout if k.startswith("yaxis")}
        assert (len(ys), len(xs)) == grid


@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_a_png_is_drawn_without_pyplot(tmp_path):
    """`model evt --plot` profiled: pyplot's import (its backends, its state machine) was a
    second of the plot step on a busy host; a Figure saved straight to the file needs none."""
    import subprocess
    import sys

    code = (
        "import sys; from lowtail.report import plots; from lowtail.report.png import write_png; "
        f"write_png(plots.worst_scatter([(1, 2_000), (2, 3_000)], 't'), {str(tmp_path / 'p.png')!r}); "
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert (tmp_path / "p.png").stat().st_size > 1_000


def test_a_percentile_equal_to_the_maximum_is_drawn_over_it():
    """With few packets the 99.999 % is the maximum: drawn after it (on top) so it stays seen
    (it hid under the max curve), the max dotted, the legend still in rank order."""
    pts = [(r, {"p50": 10_000.0, "p99": 20_000.0, "p99_999": 30_000.0, "max": 30_000.0}, False) for r in (1e4, 2e4)]
    fig = plots.latency_vs_rate_plot([plots.Sweep("fwd", pts)])
    names = [t.name for t in fig.data]
    assert names.index("99.999 %") > names.index("max")
    ranked = sorted(fig.data, key=lambda t: t.legendrank)
    assert [t.name for t in ranked] == ["50 %", "99 %", "99.999 %", "max"]
    assert next(t for t in fig.data if t.name == "max").line.dash == "dot"


def test_the_knee_table_says_overload_not_ok():
    """Beside a run that FAILs the budget the knee table said "ok": it says what it is about."""
    from lowtail.report.tables import knee_table

    header, rows = knee_table(
        {"rates": [{"rate_pps": 1e4, "loss": 0.0, "p50_ns": 1, "p99_ns": 2, "p99_999_ns": 3, "overloaded": False}]}
    )
    assert header[-1] == "overload" and rows[0][-1] == "not overloaded"


def test_the_inconclusive_note_names_a_percentile_no_packet_count_bounds():
    """A percentile whose series wanders between time blocks has no packet count that
    bounds it (packets_needed None): the note says so beside the others. Before: exit 70
    (sorting None among the counts) in `compare` of an experiment with such a run."""
    from lowtail.report.tables import not_resolvable_note

    def interval(needed):
        return {"resolvable": False, "packets_needed": needed}

    doc = {"level": 0.95, "configurations": [{"intervals": {"p50": interval(None), "p99_9": interval(3_304_777)}}]}
    note = not_resolvable_note(doc)
    assert note is not None
    assert "p99.9 takes 3,304,777" in note
    assert "p50 wanders between time blocks" in note


def test_the_inconclusive_note_takes_the_most_packets_any_configuration_needs_in_any_order():
    """With several configurations the note said the last one's count (order of the table):
    "p99 takes 3,599,993" whatever the others needed. It is the count that bounds them all,
    and a percentile that wanders in one configuration and is counted in another says both."""
    from lowtail.report.tables import not_resolvable_note

    def interval(needed):
        return {"resolvable": False, "packets_needed": needed}

    configurations = [
        {"intervals": {"p99": interval(9_000_000), "p50": interval(1_000)}},
        {"intervals": {"p99": interval(500_000), "p50": interval(None)}},
    ]
    for order in (configurations, configurations[::-1]):
        note = not_resolvable_note({"level": 0.95, "configurations": order})
        assert note is not None
        assert "p50 takes 1,000, p99 takes 9,000,000" in note, note
        assert "p50 wanders between time blocks in some: more packets alone do not bound it" in note, note


def test_a_dut_option_may_wrap_after_its_underscores_and_equals_and_stays_escaped():
    """The experiment page's "other options" ("memory_reservation=256, work_ns=2000") pushed
    the runs table past a 1,280 px window: it wraps at "_" and "=" now, and data stays text."""
    assert breakable("memory_reservation=256, x=<b>") == "memory_<wbr>reservation=<wbr>256, x=<wbr>&lt;b&gt;"


def test_prose_columns_are_left_aligned_and_figures_stay_right():
    """The causes of a tail on the experiment page had their remedies (five lines of prose)
    right-aligned like the figures beside them."""
    html = table_html(["#", "cause", "share", "remedy"], [[1, "a stall", "16.7 %", "measure again"]], text=(1, 3))
    assert "<th class='text'>cause</th>" in html and "<td class='text'>measure again</td>" in html
    # The figures beside prose keep number and unit together ("13.6" over "%" before).
    assert (
        "<td class='fig'>16.7 %</td>" in html
        and "<th>share</th>" in html
        and "td.fig { white-space: nowrap; }" in (Page("t").render())
    )


def test_a_chain_that_adds_up_exactly_says_so():
    """A chain on one clock read "within 0 ns (clock bound 0 ns)"."""
    from lowtail.report.tables import chain_adds_up

    one_clock = {"sum_mismatch_ns": 0, "clock": {"bound_ns": 0}, "packets_compared": 99_998}
    assert chain_adds_up(one_clock) == "the hops add up to the end-to-end latency exactly over 99,998 packets"
    two_clocks = {"sum_mismatch_ns": 120, "clock": {"bound_ns": 1_000}, "packets_compared": 10}
    assert chain_adds_up(two_clocks) == (
        "the hops add up to the end-to-end latency within 120 ns (the clocks allow 1.000 µs) over 10 packets"
    )
    assert chain_adds_up({**one_clock, "sum_mismatch_ns": None}) == "the hops could not be added up"


def test_worst_events_panels_of_many_rows_keep_their_spacing():
    """64 panels (22 rows) made plotly refuse the grid: "Vertical spacing cannot be greater
    than (1 / (rows - 1))"; the rows keep 60 px between them however many there are."""
    for n in (7, 64):
        fig = plots.worst_scatter_grid([(f"c{i}", [(1, 10_000 * (i + 1))], 0) for i in range(n)])
        rows = sorted({tuple(fig.layout[k].domain) for k in fig.layout if k.startswith("yaxis")}, reverse=True)
        gap = (rows[0][0] - rows[1][1]) * fig.layout.height
        assert abs(gap - 60) < 1, (n, gap)
