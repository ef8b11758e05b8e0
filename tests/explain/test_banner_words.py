"""A page's banner when the host could not measure what was asked in several runs: each kind
of artefact said once with the share of each run's tail, the remedies once. Before, the
chain example's page repeated each run's whole headline (three runs: three remedies, the same)."""

from __future__ import annotations

from lowtail.explain.words import SHARES_LISTED, headline, runs_headline


def cause(kind: str, role: str, share: float, what: str = "lowtail-cap (pid 7)") -> dict:
    return {"kind": kind, "role": role, "share": share, "cpu": 0, "evidence": {"what": what}}


def test_several_runs_say_each_artefact_once_with_each_runs_share():
    causes = {
        1: [cause("generator_stall", "generator", 0.343), cause("generator_stall", "generator", 0.172)],
        2: [cause("generator_stall", "generator", 0.228), cause("shared_core", "timestamper", 0.112)],
        3: [cause("preemption", "dut", 0.5)],  # the DuT's own: not the measurement's
        4: [cause("generator_stall", "generator", 0.111)],
    }
    text = runs_headline(causes)  # type: ignore[arg-type]
    assert text == (
        "This host could not measure what was asked in runs 1, 2, 4: the generator stalled: 51.5 % of run 1's "
        "tail, 22.8 % of run 2's, 11.1 % of run 4's; the timestamper took the DuT's core: 11.2 % of run 2's tail. "
        "Those tails are partly the measurement's, not the DuT's: give the generator and the timestamper isolated "
        "cores of their own, stop other load on them, or lower the rate; give the DuT cores of its own, apart "
        "from the generator's and the timestamper's ([cores]), then measure again."
    )
    assert text.count("give the generator") == 1


def test_many_runs_give_the_range_of_their_shares_and_none_without_an_artefact():
    many = {r: [cause("generator_stall", "generator", 0.1 + r / 100)] for r in range(1, SHARES_LISTED + 3)}
    assert "the generator stalled: 11 % to 16 % of the tails of 6 runs" in (runs_headline(many) or "")  # type: ignore[arg-type]
    assert runs_headline({1: [cause("preemption", "dut", 0.9)]}) is None  # type: ignore[dict-item]
    # One run's own headline keeps naming what ran.
    one = headline([cause("shared_core", "timestamper", 0.276)])  # type: ignore[list-item]
    assert one is not None and "the timestamper took the DuT's core (lowtail-cap (pid 7)): 27.6 % of the tail" in one


def test_what_explain_could_not_see_says_none_rather_than_up_to_0_percent():
    """The chain example's run 4: "10.000 ms of steal on CPU 1 … (could hold up to 0 % of the
    tail)" — read as a bound; no unexplained tail packet was in flight then."""
    from lowtail.explain.words import could_hold

    assert could_hold(0.0) == "could hold none of the tail: no unexplained tail packet was in flight then"
    assert could_hold(0.125) == "could hold up to 12.5 % of the tail"
    assert could_hold(0.5, "a tail") == "could hold up to 50 % of a tail"


def test_a_hop_whose_tail_packets_were_under_its_median_adds_nothing():
    """The chain example's firewall "adds -463 ns" to the tail."""
    from lowtail.explain.words import hop_adds

    assert hop_adds(3_762_000.4) == "3.762 ms"
    assert hop_adds(-463.2) == "nothing (463 ns under its median)"
    assert hop_adds(0.2) == "nothing"
