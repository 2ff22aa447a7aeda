"""How a block was run besides once: ``--compare``'s figures
(:class:`Comparison`) and a gather across ranks (:class:`Gathered`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Comparison", "Gathered"]


@dataclass(frozen=True)
class Comparison:
    """What ``--compare`` measured: the cell run ``repeat`` times under
    force_eager, then ``repeat`` times under its stance (see
    :mod:`stance_magic.session.compare`). Times are seconds, steady state (the runs
    that compiled left out); peaks are bytes, with ``-m`` only."""

    #: median of the eager runs, and of the compiled runs after the last that compiled
    eager_s: float
    compiled_s: float
    #: eager_s / compiled_s (None when the compiled median is 0)
    speedup: float | None = None
    #: compiled runs after which compiling has paid for itself (None: never)
    break_even_calls: int | None = None
    #: every run's seconds: ``{"eager": [...], "compiled": [...]}``
    runs: dict[str, list[float]] = field(default_factory=dict)
    #: with -m: peak bytes of an eager run, of the first compiled run (the one
    #: that compiles) and of a compiled run in steady state
    eager_peak_bytes: int | None = None
    compiled_first_peak_bytes: int | None = None
    compiled_steady_peak_bytes: int | None = None
    #: every run was timed from and to a synchronized CUDA device (False: no
    #: CUDA in use, so nothing ran asynchronously)
    synchronized: bool = False


@dataclass(frozen=True)
class Gathered:
    """How one rank's report of a block took part in a gather across ranks."""

    #: this process's rank and the number of ranks
    rank: int
    world_size: int
    #: the rank that gathered the reports (and shows the combined view)
    to: int = 0
    #: what was sent: ``"summary"`` or ``"full"`` (the whole report)
    mode: str = "summary"
