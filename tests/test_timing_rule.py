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
    # the rounds disagree (3.0 against 1.0): more are measured, the median decides
    with pytest.warns(MoreRounds, match=r"5 rounds measured, not 3 \(ratio: rounds more than 1.5x"):
        got = agree(
            rounds_of(1.0, 3.0, 1.1, 1.05, 1.2),
            {"ratio": (None, 1.5)},
            why="t",
            spread=1.5,
            max_rounds=5,
        )
    # after four rounds they still disagree (3.0 / 1.0); the fifth is the last
    # of max_rounds=5
    assert got.medians["ratio"] == 1.1 and len(got.rounds) == 5


def test_a_median_out_of_bound_takes_more_rounds_then_fails_naming_the_figure():
    with pytest.warns(MoreRounds):
        with pytest.raises(AssertionError) as err:
            agree(
                rounds_of(*[2.0] * 9, name="lookup / profiler"),
                {"lookup / profiler": (1 / 1.5, 1.5)},
                why="the profiler's event spans the same lookup",
            )
    text = str(err.value)
    assert "lookup / profiler: median of 9 rounds 2" in text
    assert "expected within [0.667, 1.5]" in text and "the profiler's event spans" in text
    assert text.count("round ") == 9


def test_the_budget_ends_the_extra_rounds():
    clock = FakeClock(start=0.0)

    def measure():
        clock.advance(30.0)  # each round takes 30 s
        return {"r": 5.0}

    with pytest.warns(MoreRounds), pytest.raises(AssertionError, match="median of 4 rounds"):
        agree(measure, {"r": (None, 1.0)}, why="t", budget_s=100.0, clock=clock)


def test_a_round_without_a_bounded_figure_is_an_error_of_the_test():
    with pytest.raises(KeyError, match="a round gave no"):
        agree(rounds_of(1.0, name="other"), {"ratio": (0, 2)}, why="t", rounds=1)
    with pytest.raises(ValueError):
        agree(rounds_of(1.0), {"ratio": (0, 2)}, why="t", rounds=3, max_rounds=2)


def test_a_figure_across_rounds_takes_more_rounds_until_it_holds():
    """The ratio of least-disturbed totals: each round's totals, one of them
    hit by a preemption now and then; the smallest of each decides."""
    totals = iter([(10.0, 50.0), (30.0, 10.0), (11.0, 40.0), (10.5, 10.2), (40.0, 60.0)])

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
    assert got.medians["least sampled / least full"] == 10.0 / 10.0
    assert len(got.rounds) == 5  # the raw totals disagree: every round allowed


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
