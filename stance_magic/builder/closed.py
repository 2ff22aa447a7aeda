"""A closed measuring window: what was seen, not yet built into a report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import probe

if TYPE_CHECKING:
    from ..spec import MeasureSpec
    from ..stance import Stance


@dataclass(slots=True)
class Closed:
    """A measuring window once it closed: what was seen, not yet built into
    a report (slots: every measured cell makes one)."""

    spec: MeasureSpec
    #: the stance the block ran under (``spec.stance``, or the session's)
    stance: Stance
    #: the number the front end gave the cell, if it knows it
    execution_count: int | None
    window: probe.Window
    wall_s: float
    error: BaseException | None
    #: the engine's clock (``perf_counter()`` unless a test set another)
    #: when the block started
    t0: float
    #: each lookup's seconds from the profiler (``profile_lookups``)
    profiled_lookups: list[float] | None = None
    memory: list[probe.MemoryFigure] = field(default_factory=list)
    #: the times were taken with memory measuring on
    memory_on: bool = False
    #: why the profiler could not measure (another one ran), or None
    profiler_error: str | None = None
    #: torch's compile-cache events of the window
    cache_events: list[Any] = field(default_factory=list)
    #: how the window ended, when not as usual (a cell ended it early)
    notes: list[str] = field(default_factory=list)
    #: the profiler that ran, for a timeline's runs of compiled code
    profiler: Any = None
    #: the clock stopped after the CUDA device finished the block's work
    #: (this process uses CUDA; see probe.sync_if_cuda)
    synchronized: bool = False
    #: CUDA graphs recorded, replayed and skipped in the window
    cudagraphs: probe.CudagraphWindow | None = None

    @property
    def compile_s(self) -> float:
        """The compile time torch recorded in the window (what the report's
        ``compile_s`` will be)."""
        return sum(rec.seconds for rec in self.window.compiles if rec.kind is not None)


def _nothing_seen(window: probe.Window) -> bool:
    """Whether the window saw nothing of torch.compile: no record, call,
    lookup, miss, graph break, cache entry or reset."""
    return not (
        window.records
        or window.compiled_calls
        or window.hits
        or window.misses
        or window.targets
        or window.miss_events
        or window.graph_breaks
        or window.eager_calls
        or window.aot_loads
        or window.precompiled
        or window.budgets
        or window.reset_seen
    )
