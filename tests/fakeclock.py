"""A clock the test sets, for the estimators' arithmetic (as pyinstrument's
``test/fake_time_util.py``): figures that are arithmetic over clock readings
come out exact, on any machine at any load.

``FakeClock(tick=t)`` advances ``t`` seconds on each reading (a clock that
ticks once a reading: each timed span is the number of readings between
its ends, exactly); ``advance(dt)`` moves it by hand, for instance from a
cell's own code (``clock.advance(0.010)`` stands for 10 ms of work).

:func:`on_engine` puts one on stance_magic's engine (``Engine.use_clock``):
every measurement reads it from the next block on: the wall time,
``--compare``'s runs and the recorder's timed lookups and calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class FakeClock:
    """Seconds that move only when read (``tick``) or when told (:meth:`advance`)."""

    def __init__(self, start: float = 1000.0, tick: float = 0.0) -> None:
        self.now = start
        self.tick = tick
        #: readings taken so far
        self.reads = 0

    def __call__(self) -> float:
        t = self.now
        self.now += self.tick
        self.reads += 1
        return t

    def peek(self) -> float:
        """The time the next reading gives, without a tick (a thread's CPU
        clock that never waits, read right after this one: see
        ``probe.following``)."""
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self.now += seconds


@contextmanager
def on_engine(clock: FakeClock, cpu: FakeClock | None = None) -> Iterator[FakeClock]:
    """stance_magic's engine measures on ``clock`` inside the block, and the
    thread's CPU time on ``cpu`` (None: ``clock`` itself, a thread that never
    waits for the CPU)."""
    from stance_magic.session.engine import get_engine

    engine = get_engine()
    engine.use_clock(clock, cpu)
    try:
        yield clock
    finally:
        get_engine().use_clock(None)
