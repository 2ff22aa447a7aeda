"""The timing lane's rule (tests/timing.py) on rounds the test makes up:
the decision is the median, more rounds where they disagree or a median is
out, within a budget, and a failure names the figure, its bound and why."""

from __future__ import annotations

import warnings

import pytest

from conftest import last, run
from fakeclock import FakeClock, on_engine
from timing import MoreRounds, agree


def rounds_of(*values: float, name: str = "ratio"):
    it = iter(values)
    return lambda: {name: next(it)}


def test_three_agreeing_rounds_decide_on_their_median():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no MoreRounds
        got = agree(rounds_of(1.0, 1.2, 1.1), {"ratio": (1 / 1.5, 1.5)}, why="test")
    assert len(got.rounds) == 3 and got.medians == {"ratio": 1.1} and got.more == ""


def test_one_noisy_round_of_three_is_outvoted_by_more_rounds():
    # the median's interval (with five rounds or fewer: the smallest and the
    # largest, 1.0 to 3.0) straddles the bound: more rounds, and the median decides
    with pytest.warns(
        MoreRounds, match=r"5 rounds measured, not 3 \(ratio: median 1.1 in \[1, 3\]"
    ):
        got = agree(
            rounds_of(1.0, 3.0, 1.1, 1.05, 1.2),
            {"ratio": (None, 1.5)},
            why="t",
            max_rounds=5,
        )
    assert got.medians["ratio"] == 1.1 and len(got.rounds) == 5


def test_rounds_go_on_until_the_medians_interval_is_within_the_bound():
    """A busy machine: a round in three or four over the bound; from nine
    rounds the interval is the second smallest to the second largest, and
    with eleven the third to the ninth: inside, so the rounds stop there."""
    values = [1.2, 1.7, 1.3, 1.25, 1.8, 1.3, 1.2, 1.35, 1.25, 1.3, 1.28, 1.9, 1.6]
    with pytest.warns(MoreRounds):
        got = agree(rounds_of(*values), {"ratio": (None, 1.5)}, why="t")
    assert len(got.rounds) == 11 and got.medians["ratio"] == 1.3


def test_a_real_error_fails_on_the_first_rounds_naming_the_figure():
    """Every round out of the bound: the interval is wholly outside it, so no
    more rounds are measured (a figure really off moves every round)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no MoreRounds
        with pytest.raises(AssertionError) as err:
            agree(
                rounds_of(*[2.0] * 9, name="lookup / profiler"),
                {"lookup / profiler": (1 / 1.5, 1.5)},
                why="the profiler's event spans the same lookup",
            )
    text = str(err.value)
    assert "lookup / profiler: median of 3 rounds 2" in text
    assert "expected within [0.667, 1.5]" in text and "the profiler's event spans" in text
    assert text.count("round ") == 3


def test_the_budget_ends_the_extra_rounds():
    clock = FakeClock(start=0.0)
    values = iter([5.0, 0.5] * 10)

    def measure():
        clock.advance(30.0)  # each round takes 30 s
        return {"r": next(values)}

    with pytest.warns(MoreRounds), pytest.raises(AssertionError, match="median of 4 rounds"):
        agree(measure, {"r": (None, 1.0)}, why="t", budget_s=100.0, clock=clock)


def test_the_median_interval_is_the_sign_tests():
    from timing import median_interval

    assert median_interval([3.0, 1.0, 2.0], 0.9) == (1.0, 3.0)  # too few: the extremes
    assert median_interval(list(range(1, 10)), 0.9) == (2, 8)  # P(B(9, 1/2) <= 1) = 2 %
    assert median_interval(list(range(1, 12)), 0.9) == (3, 9)  # P(B(11, 1/2) <= 2) = 3 %
    assert median_interval(list(range(1, 12)), 0.99) == (1, 11)  # P(B(11, 1/2) <= 1) = 0.6 %


def test_a_round_without_a_bounded_figure_is_an_error_of_the_test():
    with pytest.raises(KeyError, match="a round gave no"):
        agree(rounds_of(1.0, name="other"), {"ratio": (0, 2)}, why="t", rounds=1)
    with pytest.raises(ValueError):
        agree(rounds_of(1.0), {"ratio": (0, 2)}, why="t", rounds=3, max_rounds=2)


def test_a_figure_across_rounds_takes_more_rounds_until_it_holds():
    """The ratio of least-disturbed totals: each round's totals, one of them
    hit by a preemption now and then; the smallest of each decides, and more
    rounds are measured only while it is out of its bound."""
    totals = iter([(10.0, 50.0), (30.0, 60.0), (11.0, 40.0), (10.5, 10.2), (40.0, 60.0)])

    def measure():
        s, f = next(totals)
        return {"sampled total": s, "full total": f}

    def least(rs):
        return min(r["sampled total"] for r in rs) / min(r["full total"] for r in rs)

    with pytest.warns(MoreRounds):
        got = agree(
            measure,
            {"least sampled / least full": (1 / 2, 2)},
            why="t",
            across={"least sampled / least full": least},
            max_rounds=5,
        )
    # 10 / 40 after three rounds (out of its bound), 10 / 10.2 after four
    assert got.medians["least sampled / least full"] == 10.0 / 10.2
    assert len(got.rounds) == 4


def test_the_engine_clock_can_change_after_a_measured_block(sh, monkeypatch):
    """A fake clock put on after the recorder measured blocks on the real one
    is the one every reading comes from (the recorder's hooks are made again
    with it): a still clock gives every part of every call 0, never a real
    reading less a fake one."""
    from stance_magic.probe import anatomy

    # no bound from torch's profiler (its events are real seconds)
    monkeypatch.setattr(anatomy, "CALIBRATION_TRIES", 0)
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')\nf(torch.ones(2))")
    cell = "%%stance default -q\nclock.advance(0.25)\nfor _ in range(30):\n    f(torch.ones(2))"
    sh.user_ns["clock"] = FakeClock()
    run(sh, cell)  # on the real clock: the recorder's hooks are made
    with on_engine(FakeClock(start=5000.0)) as clock:
        sh.user_ns["clock"] = clock
        res, _ = run(sh, cell)
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.wall_s == 0.25
    p = rep.call_parts
    assert p is not None and p.calls > 0
    assert (p.before_s or 0.0, p.call_s, p.lookup_s or 0.0) == (0.0, 0.0, 0.0), p
