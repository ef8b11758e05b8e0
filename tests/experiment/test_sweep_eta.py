"""The live view's expected end of a sweep: each run left counts its own traffic time (with
duration = "auto" a run at a low rate measures longer), plus what setting up, draining and
analysing took the runs so far."""

from __future__ import annotations

import time

from lowtail.cli._live import _GUESSED_OVERHEAD_S, Stored, SweepView
from lowtail.experiment import spec


def view_of_the_default() -> tuple[SweepView, list]:
    exp = spec.load(None)
    view = SweepView(exp, lambda run: Stored(table="", line=""))
    combos = exp.combinations()
    view.plan(combos)
    return view, combos


def test_before_any_run_the_end_is_every_runs_traffic_plus_a_guessed_overhead():
    view, combos = view_of_the_default()
    traffic = [view.traffic_s(c) for c in combos]
    assert len(set(traffic)) > 1, "auto durations differ per rate"
    assert abs(view.eta_s() - sum(t + _GUESSED_OVERHEAD_S for t in traffic)) < 1e-6


def test_after_a_run_the_overhead_it_took_replaces_the_guess():
    view, combos = view_of_the_default()
    view.start(0, len(combos), combos[0])
    view.run_started = time.monotonic() - view.traffic_s(combos[0]) - 10.0  # it took 10 s more than its traffic
    view.done(0, len(combos), combos[0], {})
    expected = sum(view.traffic_s(c) + 10.0 for c in combos[1:])
    assert abs(view.eta_s() - expected) < 0.5, (view.eta_s(), expected)
