"""The timing lane's rule: agreement with a real clock, decided on the median
of interleaved rounds.

What only a real clock can show (a figure of ours against torch's profiler
events, an outside clock around a bare loop, torch's own timings) is tested
in tests marked ``timing``; their arithmetic is tested apart, on a fake clock
(``tests/fakeclock.py``), in the fast lane. A timing test measures rounds, each
giving named ratios, and :func:`agree` decides on each ratio's median:

- ``rounds`` rounds are measured first (each round interleaves what it
  compares, so a drift of the machine hits both sides alike);
- where the rounds disagree among themselves (a ratio's largest round is more
  than ``spread`` times its smallest: the machine was busy for some of them)
  or a median is outside its bound, more rounds are measured, up to
  ``max_rounds`` and while ``budget_s`` lasts, and the decision is the median
  of all of them; a :class:`MoreRounds` warning says that it took more;
- a failure names the figure, its bound, why the bound is what it is, and
  every round's figures.

A burst of load moves a round, not the median of several; a figure that is
really off moves every round, and fails however many are measured.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: (lowest, highest) a ratio's median may be; None: no bound on that side
Bound = tuple[float | None, float | None]


class MoreRounds(UserWarning):
    """A timing test measured more rounds than its first ones before deciding."""


@dataclass
class Agreement:
    """What :func:`agree` decided on: every round's ratios and their medians."""

    rounds: list[dict[str, float]] = field(default_factory=list)
    medians: dict[str, float] = field(default_factory=dict)
    #: why more rounds were measured ("" when the first ones decided)
    more: str = ""

    def table(self) -> str:
        lines = [f"  round {i + 1}: " + _fmt(r, list(r)) for i, r in enumerate(self.rounds)]
        lines.append("  decided: " + _fmt(self.medians, list(self.medians)))
        return "\n".join(lines)


def _fmt(r: Mapping[str, float], names: list[str]) -> str:
    return ", ".join(f"{n} {r[n]:.3g}" for n in names)


def _within(value: float, bound: Bound) -> bool:
    lo, hi = bound
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _show(bound: Bound) -> str:
    lo, hi = bound
    if lo is None:
        return f"<= {hi:.3g}"
    if hi is None:
        return f">= {lo:.3g}"
    return f"within [{lo:.3g}, {hi:.3g}]"


def _medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {n: statistics.median(r[n] for r in rounds) for n in rounds[0]}


def _disagree(rounds: list[dict[str, float]], spread: float) -> list[str]:
    """The ratios whose rounds are more than ``spread`` apart."""
    out = []
    for n in rounds[0]:
        values = [abs(r[n]) for r in rounds]
        lo, hi = min(values), max(values)
        if hi > spread * lo:
            out.append(n)
    return out


def agree(
    measure: Callable[[], Mapping[str, float]],
    bounds: Mapping[str, Bound],
    *,
    why: str,
    rounds: int = 3,
    max_rounds: int = 9,
    budget_s: float = 120.0,
    spread: float = 1.5,
    clock: Callable[[], float] = time.monotonic,
    across: Mapping[str, Callable[[list[dict[str, float]]], float]] | None = None,
) -> Agreement:
    """Measure rounds of ``measure()`` (named ratios) until their medians decide.

    Passes when each ratio named in ``bounds`` has its median within its
    bound; raises AssertionError naming the ratio, its bound, ``why`` (the
    reason for the bound) and every round otherwise. ``rounds`` rounds are
    measured first; where they disagree among themselves by more than
    ``spread`` (largest over smallest) or a median is out of its bound, more
    rounds follow, up to ``max_rounds`` and while ``budget_s`` seconds (on
    ``clock``) last, and a :class:`MoreRounds` warning says so.

    ``across``: figures made from all the rounds at once rather than the
    median of each round's (a name in ``bounds`` -> a function of the list of
    rounds), such as the ratio of two least-disturbed totals (a total is a
    sum, so one preemption moves it by milliseconds: of several rounds, the
    smallest is the figure, as ``timeit`` takes the fastest run).
    """
    if rounds < 1 or max_rounds < rounds:
        raise ValueError(f"rounds={rounds}, max_rounds={max_rounds}")
    t0 = clock()
    got = Agreement()
    derived = dict(across or {})

    def figures() -> dict[str, float]:
        out = _medians(got.rounds)
        out.update({n: fn(got.rounds) for n, fn in derived.items()})
        return out

    def take() -> None:
        r = dict(measure())
        missing = [n for n in bounds if n not in r and n not in derived]
        if missing:
            raise KeyError(f"a round gave no {missing}: {sorted(r)}")
        got.rounds.append(r)

    for _ in range(rounds):
        take()
    reasons: list[str] = []
    while True:
        medians = figures()
        outside = [n for n, b in bounds.items() if not _within(medians[n], b)]
        noisy = _disagree(got.rounds, spread)
        if not (outside or noisy) or len(got.rounds) >= max_rounds or clock() - t0 >= budget_s:
            break
        if not reasons:
            reasons = [f"{n}: median {medians[n]:.3g}, bound {_show(bounds[n])}" for n in outside]
            reasons += [f"{n}: rounds more than {spread:g}x apart" for n in noisy]
        take()
    got.medians = figures()
    if len(got.rounds) > rounds:
        got.more = "; ".join(reasons)
        warnings.warn(
            MoreRounds(
                f"{len(got.rounds)} rounds measured, not {rounds} ({got.more}):\n{got.table()}"
            ),
            stacklevel=2,
        )
    for n, b in bounds.items():
        m = got.medians[n]
        how = "from" if n in derived else "median of"
        assert _within(m, b), (
            f"{n}: {how} {len(got.rounds)} rounds {m:.3g}, expected {_show(b)} "
            f"({why})\n{got.table()}"
        )
    return got
