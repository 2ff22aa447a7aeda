"""The timing lane's rule: agreement with a real clock, decided on the median
of interleaved rounds, on as many rounds as their spread needs.

What only a real clock can show (a figure of ours against torch's profiler
events, an outside clock around a bare loop, torch's own timings) is tested
in tests marked ``timing``; their arithmetic is tested apart, on a fake clock
(``tests/fakeclock.py``), in the fast lane. A timing test measures rounds, each
giving named ratios, and :func:`agree` decides on each ratio's median:

- ``rounds`` rounds are measured first (each round interleaves what it
  compares, so a drift of the machine hits both sides alike);
- after each round, each ratio's median gets a distribution-free interval
  (the order statistics that hold the median at ``confidence``: with few
  rounds, the smallest and the largest); the rounds stop as soon as every
  interval lies within its bound (the figure holds) or one lies wholly
  outside it (it does not: a real error moves every round), else more rounds
  are measured, up to ``max_rounds`` and while ``budget_s`` lasts: a busy
  machine spreads the rounds, and more of them narrow the interval around
  the median. The decision is each median against its bound; a
  :class:`MoreRounds` warning says that it took more;
- a failure names the figure, its bound, why the bound is what it is, and
  every round's figures.

A burst of load moves a round, not the median of several; a figure that is
really off moves every round, and fails however many are measured
(``tests/test_timing_lane.py`` injects a 2x error into the lookup figures and
checks that the lane fails on it).
"""

from __future__ import annotations

import math
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


def median_interval(values: list[float], confidence: float) -> tuple[float, float]:
    """The order statistics ``(x_k, x_{n+1-k})`` that hold the median of the
    values' distribution with at least ``confidence`` (the sign test: ``k``
    the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2); with
    too few values for that, the smallest and the largest."""
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2
    k, below = 0, 0.0  # below: P(Binomial(n, 1/2) < k + 1)
    while k < n // 2:
        below += math.comb(n, k) / 2**n
        if below > tail:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def _inside(interval: tuple[float, float], bound: Bound) -> bool:
    return _within(interval[0], bound) and _within(interval[1], bound)


def _outside(interval: tuple[float, float], bound: Bound) -> bool:
    lo, hi = bound
    return (lo is not None and interval[1] < lo) or (hi is not None and interval[0] > hi)


def agree(
    measure: Callable[[], Mapping[str, float]],
    bounds: Mapping[str, Bound],
    *,
    why: str,
    rounds: int = 3,
    max_rounds: int = 15,
    budget_s: float = 150.0,
    confidence: float = 0.9,
    clock: Callable[[], float] = time.monotonic,
    across: Mapping[str, Callable[[list[dict[str, float]]], float]] | None = None,
) -> Agreement:
    """Measure rounds of ``measure()`` (named ratios) until their medians decide.

    Passes when each ratio named in ``bounds`` has its median within its
    bound; raises AssertionError naming the ratio, its bound, ``why`` (the
    reason for the bound) and every round otherwise. ``rounds`` rounds are
    measured first; while a ratio's median interval (:func:`median_interval`
    at ``confidence``) straddles its bound, more rounds follow, up to
    ``max_rounds`` and while ``budget_s`` seconds (on ``clock``) last, and a
    :class:`MoreRounds` warning says so.

    ``across``: figures made from all the rounds at once rather than the
    median of each round's (a name in ``bounds`` -> a function of the list of
    rounds); they take more rounds while they are out of their bound.
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

    def undecided() -> list[str]:
        """Why more rounds are needed ([] : every figure decided)."""
        values = figures()
        reasons = []
        for n, b in bounds.items():
            if n in derived:
                if not _within(values[n], b):
                    reasons.append(f"{n}: {values[n]:.3g}, bound {_show(b)}")
                continue
            interval = median_interval([r[n] for r in got.rounds], confidence)
            if _outside(interval, b):
                return []  # wholly out of its bound: decided, it fails
            if not _inside(interval, b):
                reasons.append(
                    f"{n}: median {values[n]:.3g} in [{interval[0]:.3g}, {interval[1]:.3g}], "
                    f"bound {_show(b)}"
                )
        return reasons

    for _ in range(rounds):
        take()
    first_reasons: list[str] = []
    while len(got.rounds) < max_rounds and clock() - t0 < budget_s:
        reasons = undecided()
        if not reasons:
            break
        first_reasons = first_reasons or reasons
        take()
    got.medians = figures()
    if len(got.rounds) > rounds:
        got.more = "; ".join(first_reasons)
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
