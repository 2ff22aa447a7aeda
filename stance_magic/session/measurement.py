"""Measuring one block: the open window, and the handle a ``with`` statement gets.

The flow is one way. A front end (the magics, :func:`stance_magic.measure`,
``--compare``, ``--sweep``, a watched cell) describes the block in a
:class:`~stance_magic.spec.MeasureSpec`; the engine opens a
:class:`Measurement` on it (the probe's recorder, the profiler when asked,
the compile-cache watch, a trace); when the block ends the window is closed
into a :class:`~stance_magic.builder.Closed` (raw facts, nothing built),
:mod:`stance_magic.builder` makes the whole report from it, a trace and a
gather across ranks complete it, and the engine publishes it (the history,
the panels). Nothing writes to the report after that.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .. import builder, probe
from ..builder import Closed
from ..notebook import running_cell_number

if TYPE_CHECKING:
    from ..report import CellReport, Comparison
    from ..spec import MeasureSpec
    from ..stance import Stance

__all__ = ["Host", "Measured", "Measurement"]


class Host(Protocol):
    """What a measurement needs of the engine that opens it."""

    @property
    def recorder(self) -> probe.Recorder: ...

    @property
    def watches(self) -> tuple[probe.Watch, ...]:
        """The watches every block opens (the recorder first)."""
        ...

    @property
    def history(self) -> list[CellReport]: ...

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds, monotonic: ``time.perf_counter`` unless a test set a fake."""
        ...

    def opened(self, m: Measurement) -> None: ...

    def closed(self, m: Measurement) -> None: ...

    def publish(self, report: CellReport) -> None: ...


class Measurement:
    """One open measuring window. :meth:`close` stops its clocks once;
    :meth:`finish` builds the report, completes and publishes it, once."""

    def __init__(self, engine: Host, spec: MeasureSpec, stance: Stance) -> None:
        self.engine = engine
        self.spec = spec
        #: the stance the block runs under (``spec.stance``, or the session's)
        self.stance = stance
        #: the report, once :meth:`finish` built it
        self.report: CellReport | None = None
        self._closed: Closed | None = None
        # the block's watches (see probe.watch), opened in this order and
        # closed in reverse: the trace capture first (a failure there leaves
        # nothing open), the recorder, torch's compile-cache events, CUDA
        # graphs, and torch's profiler when asked (lookups, memory, regions)
        watches: list[Any] = []
        self._sharing = None
        if spec.trace is not None or spec.timeline is not None:
            from ..builder.sharing import Sharing

            self._sharing = Sharing(spec.trace, spec.timeline)
            watches.append(self._sharing)
        watches += engine.watches
        for w in watches:
            if isinstance(w, probe.Recorder):
                w.trace_functions(spec.trace_functions)
        self._profiler: probe.ProfilerWatch | None = None
        regions = self._sharing is not None and self._sharing.wants_regions
        if spec.profile_lookups or spec.memory or regions:
            self._profiler = probe.ProfilerWatch(
                lookups=spec.profile_lookups, memory=spec.memory, regions=regions
            )
            watches.append(self._profiler)
        self._watched = probe.Watched(watches, context=self.context)
        engine.opened(self)
        # on CUDA, the window starts once the GPU finished what came before it
        probe.sync_if_cuda()
        self._clock = engine.clock
        self._t0 = self._clock()

    def context(self) -> str:
        """How torch's own compile records name this window (their
        ``recompile_user_contexts``, where torch keeps them; tlparse and
        traces show it): ``stance_magic In [7] (eager_then_compile)``, read
        when torch compiles, so the cell's number is known by then."""
        parts = ["stance_magic"]
        number = self.spec.execution_count or running_cell_number()
        if number:
            parts.append(f"In [{number}]")
        if self.spec.label:
            parts.append(repr(self.spec.label))
        parts.append(f"({self.stance.name})")
        return " ".join(parts)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def close(
        self,
        error: BaseException | None = None,
        note: str | None = None,
        execution_count: int | None = None,
    ) -> Closed:
        """Stop the clocks, the recorder and the profiler (once; later calls
        return the same :class:`Closed`). ``execution_count``: the cell's
        number when the front end learns it only at the end."""
        if self._closed is not None:
            return self._closed
        # on CUDA, the block's kernels have run when the clock stops
        synchronized = probe.sync_if_cuda()
        wall = self._clock() - self._t0
        self.engine.closed(self)
        results = self._watched.stop(error)
        window = results["recorder"]
        profiled, memory = results["profiler"] if self._profiler is not None else (None, [])
        profiler = self._profiler
        notes = [note] if note else []
        profiler_error = None
        if self._watched.failures:
            failures = dict(self._watched.failures)
            # the profiler's own line ("not measured with the profiler: ...")
            profiler_error = failures.pop(probe.ProfilerWatch.name, None)
            notes += failures.values()
        # (positional, in the fields' order: keywords cost each cell 0.4 µs)
        self._closed = Closed(
            self.spec,  # spec
            self.stance,  # stance
            execution_count or self.spec.execution_count,  # execution_count
            window,  # window
            # what the block took, measuring included (torch's profiler
            # bounding the lookups: the report says how long it took)
            wall,  # wall_s
            error,  # error
            self._t0,  # t0
            profiled,  # profiled_lookups
            memory,  # memory
            # memory_on
            self.spec.memory and profiler is not None and profiler.profiler is not None,
            profiler_error,  # profiler_error
            results["caches"],  # cache_events
            notes,  # notes
            profiler.profiler if profiler is not None else None,  # profiler
            synchronized,  # synchronized
            results["cudagraphs"],  # cudagraphs
        )
        return self._closed

    def finish(
        self,
        error: BaseException | None = None,
        *,
        note: str | None = None,
        execution_count: int | None = None,
        compare: Comparison | None = None,
        memory: list[probe.MemoryFigure] | None = None,
        notes: tuple[str, ...] | list[str] = (),
    ) -> CellReport:
        """Close the window (if :meth:`close` has not), build the report,
        complete it (a trace, a gather across ranks) and publish it; once
        (later calls return the same report).

        ``execution_count`` is the cell's number when the front end learns it
        only at the end (a watched cell); ``compare``, ``memory`` and
        ``notes`` are what the caller measured around the window (see
        :func:`stance_magic.builder.build_report`)."""
        if self.report is not None:
            return self.report
        closed = self.close(error, note, execution_count)
        if execution_count is not None and closed.execution_count != execution_count:
            closed = replace(closed, execution_count=execution_count)
        engine = self.engine
        loaded = None
        if closed.window.records:
            from .warm import loaded_keys

            loaded = loaded_keys()
        rep = builder.build_report(
            closed,
            index=len(engine.history) + 1,
            history=engine.history,
            loaded=loaded,
            compare=compare,
            memory=memory,
            notes=notes,
        )
        if self._sharing is not None:
            shared, shared_notes = self._sharing.finish(rep, closed)
            rep = builder.with_shared(rep, shared, shared_notes)
        ranks = self.spec.ranks
        error = closed.error
        try:
            if ranks is not None and (error is None or isinstance(error, Exception)):
                from ..builder.ranks import gather

                if probe.process_group_ready():
                    rep = gather(rep, ranks)
        finally:
            self.report = rep
            if not self.spec.watch or rep.used_compile:
                engine.publish(rep)
        return rep


class Measured:
    """What ``with stance_magic.measure(...) as rep`` gets: the block's
    :class:`~stance_magic.report.CellReport` once the block has ended.

    Its attributes are the report's (``rep.compiles``, ``rep.lookups``), and
    it shows as the report does; :attr:`report` is the report itself.
    Reading a figure inside the block raises: nothing is measured yet.
    """

    __slots__ = ("_measurement",)

    def __init__(self, measurement: Measurement) -> None:
        self._measurement = measurement

    @property
    def report(self) -> CellReport:
        """The block's report (a ``RuntimeError`` while the block runs)."""
        rep = self._measurement.report
        if rep is None:
            raise RuntimeError(
                "the block is still running: its report is built when the block ends"
            )
        return rep

    @property
    def done(self) -> bool:
        """Whether the block has ended and its report is built."""
        return self._measurement.report is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.report, name)

    def __eq__(self, other: object) -> bool:
        # the handle stands for its report (``rep in stance_magic.history()``)
        if isinstance(other, Measured):
            other = other._measurement.report
        return self.done and self.report == other

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return str(self.report) if self.done else "stance_magic: measuring (the block runs)"

    def __repr__(self) -> str:
        return repr(self.report) if self.done else "<stance_magic.Measured: the block runs>"

    def _repr_html_(self) -> str | None:
        return self.report._repr_html_() if self.done else None

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))
