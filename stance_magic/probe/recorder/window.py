"""What a window saw, as plain records: :class:`Window` and its
:class:`Target` (a compiled function with its lookups), :class:`MissEvent`,
:class:`AotLoad`; and the open window's running totals (:class:`Mark`)."""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from ..breaks import (
    GraphBreakEvent,
    _breaks_from_counters,
)
from ..frames import (
    describe_callable,
)
from ..precompile import SOURCE_CHECK, PrecompileEvent
from ..records import (
    CompileRecord,
    FrameBudget,
    LimitHit,
    RecordInfo,
    read_record,
)
from .events import (
    CALIBRATED,
    RESUMED,
    SAMPLED,
    SPOT,
    TIMED_KINDS,
    UNTIMED,
    WAITED,
    Call,
    DeviceSpan,
    EagerParts,
    Loaded,
    Lookup,
    Parts,
    Profiled,
)
from .outcomes import _NO_MISS_EAGER, CALL_CACHED, CALL_EAGER, MISS_NONE


@dataclass
class Target:
    """A compiled function as the report names it, with its cache lookups."""

    name: str
    filename: str = ""
    line: int | None = None
    timed: int = 0
    seconds: float = 0.0
    untimed: int = 0
    misses: int = 0
    #: its calls that ran eagerly (see Window.calls)
    eager_calls: int = 0
    #: lookups of the function's own calls counted but not timed: after the
    #: first :data:`SAMPLE_FIRST`, only 1 in :data:`SAMPLE_EVERY` is timed
    sampled: int = 0
    #: of the sampled: the calls torch's profiler ran over to bound the
    #: function's lookup (see probe.anatomy.LookupBounds)
    calibrated: int = 0
    #: of the sampled: timed lookups whose thread waited for the CPU in them
    #: (see calls.WAITED_S)
    waited: int = 0
    #: the profiler's lookup events of those calls past its warm-up, seconds
    #: (they stand for the calibrated calls once the function is bounded)
    profiler_events: list[float] = field(default_factory=list)
    #: of the timed: the spot checks after the first SAMPLE_FIRST (1 in
    #: SAMPLE_EVERY), which stand for the counted-only lookups, seconds each
    spot_samples: list[float] = field(default_factory=list)
    #: the sampling its lookups were counted under once counted-only: the
    #: first ``sample_first`` timed, then 1 in ``sample_every`` (SAMPLE_FIRST
    #: and SAMPLE_EVERY, or STEADY_FIRST and STEADY_EVERY once its lookup is
    #: bounded for the session); 0 where every lookup was timed
    sample_first: int = 0
    sample_every: int = 0
    #: of the timed: nested lookups (resume functions after graph breaks,
    #: frames compiled on their own), timed from their call (3.12+)
    resumed: int = 0
    #: each timed lookup, seconds
    samples: list[float] = field(default_factory=list)
    #: each timed call's parts (see probe.anatomy): (wrapper before the
    #: dispatch or None, dispatch to the end of the lookup, compiled code,
    #: wrapper after it) for a hit; calls that ran eagerly: their seconds
    parts: list[tuple[float | None, float, float, float]] = field(default_factory=list)
    #: each timed call's compiled code on the GPU, where CUDA is in use: its
    #: stream from the end of the lookup to the end of the code's last
    #: kernel, seconds (see probe.device.stream_mark)
    device: list[float] = field(default_factory=list)
    #: calls that ran eagerly: (the wrapper before the dispatch or None, the
    #: dispatch to the call's end)
    eager_parts: list[tuple[float | None, float]] = field(default_factory=list)
    #: the lookup as torch's profiler bounds it (a few calls of the function,
    #: profiled in its first cells: see probe.anatomy.LookupBounds) and its
    #: share of the span from the dispatch (the rest: torch.compile's wrapper
    #: and Dynamo's preparation): None while unbounded
    lookup_event_s: float | None = None
    lookup_share: float | None = None


@dataclass
class MissEvent:
    """One cache miss and what torch did about it, under the stance in force
    at that call (not the stance the cell was started with)."""

    key: Any = field(repr=False)
    stance: str
    outcome: str = MISS_NONE
    #: skip_guard_eval_unsafe was in force (torch raises rather than recompile)
    unsafe: bool = False
    #: every cache entry's failed guard (torch's text), when torch listed them
    failures: list[str] = field(default_factory=list)
    limit: LimitHit | None = None
    compile_id: str | None = None
    #: for a failed identity guard (``___check_obj_id(G['Block'], …)``), where
    #: the object the name holds now was defined: expression -> (name, file,
    #: line, "class" | "function" | "object")
    defined: dict[str, tuple[str, str, int | None, str]] = field(default_factory=dict)


@dataclass
class AotLoad:
    """One ``torch.compiler.load_compiled_function`` in a window: the
    function it gave back and the seconds it took (no tracing, no record)."""

    name: str
    filename: str
    line: int | None
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Window:
    """What the recorder saw between :meth:`Recorder.start` and ``stop``."""

    records: list[Any] = field(default_factory=list)
    info: dict[int, RecordInfo] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    #: calls into torch.compile'd functions and modules, whatever the stance
    compiled_calls: int = 0
    graph_breaks: list[GraphBreakEvent] = field(default_factory=list)
    #: compiled functions looked up or called, in order of first use
    targets: list[Target] = field(default_factory=list)
    #: torch.compile calls that ran eagerly without a miss of their own
    #: (force_eager, eager_then_compile's first call, nothing cached under
    #: eager_on_recompile, a frame Dynamo skipped), by the stance in force
    eager_calls: dict[str, int] = field(default_factory=dict)
    #: eager_then_compile's eager first calls, whatever happened in them
    #: (one that raised is among the failed calls too)
    eager_first_calls: int = 0
    #: compiled functions read back with torch.compiler.load_compiled_function
    aot_loads: list[AotLoad] = field(default_factory=list)
    #: lookups of Dynamo's precompiled frames (torch.compile(fn) with
    #: caching_precompile on): used, stale, unchecked or missed
    precompiled: list[PrecompileEvent] = field(default_factory=list)
    #: every torch.compile call of the window by how it ended: (CALL_ outcome,
    #: WHY_ reason or "") -> calls; they add up to :attr:`compiled_calls`
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the stances in force at those calls (but the counted-only and the
    #: tallied cached ones: see Recorder._resolve)
    call_stances: set[str] = field(default_factory=set)
    #: torch.compiler.reset() ran inside the window
    reset_seen: bool = False
    #: seconds the recorder's own use of torch's profiler took inside the
    #: window (bounding lookups: see probe.anatomy.LookupBounds), not the cell's
    overhead_s: float = 0.0
    #: why nested lookups are not timed from their call (None: they are)
    resume_timing_off: str | None = None
    #: timed lookups whose thread waited for the CPU in them (a busy
    #: machine), counted at the time it ran them, and the seconds it waited;
    #: timed calls that waited, their parts left out (see calls.WAITED_S)
    waited: int = 0
    waited_s: float = 0.0
    waited_calls: int = 0
    #: where the graph-break figures come from ("log" or "counters")
    break_source: str = "log"
    #: every cache miss with what torch did after it
    miss_events: list[MissEvent] = field(default_factory=list)
    #: cache entries against the recompile limit of each frame compiled or
    #: looked up in the window whose code is known
    budgets: list[FrameBudget] = field(default_factory=list)
    #: each cache lookup in order, for a timeline: (end on the recorder's
    #: clock (``perf_counter``), seconds timed (0.0 when not timed), hit,
    #: timed, the looked-up function's name)
    lookup_times: list[tuple[float, float, bool, bool, str]] = field(default_factory=list)
    #: torch's dynamo_profiler was to time the window's traces (see probe.tracing)
    tracing_on: bool = False

    #: (see :attr:`compiles`)
    _compiles: list[CompileRecord] | None = field(default=None, repr=False, compare=False)

    @property
    def compiles(self) -> list[CompileRecord]:
        """Each of :attr:`records` read once for the report (a
        :class:`~stance_magic.probe.records.CompileRecord`), in order."""
        if self._compiles is None or len(self._compiles) != len(self.records):
            self._compiles = [read_record(r, self.info.get(id(r))) for r in self.records]
        return self._compiles

    @property
    def timed_lookups(self) -> int:
        return sum(t.timed for t in self.targets)

    @property
    def untimed_lookups(self) -> int:
        return sum(t.untimed for t in self.targets)

    @property
    def resumed_lookups(self) -> int:
        """Nested lookups timed from their call (Python 3.12+)."""
        return sum(t.resumed for t in self.targets)

    @property
    def sampled_lookups(self) -> int:
        """Lookups counted but not timed (sampling; see :data:`SAMPLE_FIRST`)."""
        return sum(t.sampled for t in self.targets)

    @property
    def calibrated_lookups(self) -> int:
        """Of the sampled: lookups the profiler ran over (probe.anatomy)."""
        return sum(t.calibrated for t in self.targets)


@dataclass(slots=True)
class _Mark:
    """An open window: running totals when it started (slots: every
    measured cell makes one)."""

    thread: int
    hits: int
    misses: int
    calls: int
    records: int
    breaks: int
    events: int
    miss_events: int
    generation: int
    counters: dict[str, int] | None
    #: what torch's records name this window by (recompile_user_contexts)
    context: Any = None
    #: each counted-only function's hits so far (see _Sampling.hits)
    sampled: dict[Any, int] = field(default_factory=dict)
    #: the profiler's start and stop inside cells so far (LookupBounds.overhead_s)
    overhead_s: float = 0.0
    #: the lookups of Dynamo's precompiled frames so far (SOURCE_CHECK.mark())
    precompile: int = 0
    #: the calls resolved as cached without an event so far (Recorder._cached)
    cached: int = 0
    #: the timed lookups that waited for the CPU so far, how long, and the
    #: timed calls that did (Recorder._waited, _waited_s, _waited_calls)
    waited: int = 0
    waited_s: float = 0.0
    waited_calls: int = 0
    #: the window was closed (Recorder.stop)
    closed: bool = False


def _target(targets: dict[Any, Target], obj: Any) -> Target:
    key = id(obj) if not isinstance(obj, types.CodeType) else obj
    t = targets.get(key)
    if t is None:
        name, filename, line = describe_callable(obj)
        t = targets[key] = Target(name=name, filename=filename, line=line)
    return t


#: What a window that saw nothing gives (the common empty cell): one shared
#: instance, never written (only the recorder writes a window, and never
#: this one: a window that saw a reset gets its own).
EMPTY_WINDOW = Window()


def fold(window: Window, events: list[Any]) -> tuple[dict[Any, Target], list[Any]]:
    """A window's slice of the recorder's events folded into its figures:
    the calls by outcome, the loads, the lookups on a timeline (into
    ``window``), and each function's :class:`Target` (returned, by
    function, with the functions looked up in order of first lookup)."""
    targets: dict[Any, Target] = {}
    keys: list[Any] = []
    calls = window.calls
    for ev in events:
        kind = type(ev)
        if kind is Lookup:
            fn, hit, how = ev.fn, ev.hit, ev.kind
            if fn not in keys:
                keys.append(fn)
            t = _target(targets, fn)
            if not hit:
                t.misses += 1
            if how == SAMPLED or how == CALIBRATED or how == WAITED:
                # counted, not timed: the timed ones stand for it
                t.sampled += 1
                if how == CALIBRATED:
                    t.calibrated += 1
                elif how == WAITED:
                    t.waited += 1
                # on the timeline all the same, where it ended (not timed)
                window.lookup_times.append((ev.at, 0.0, bool(hit), False, t.name))
                continue
            seconds = ev.seconds
            if how in TIMED_KINDS:
                t.timed += 1
                t.seconds += seconds
                t.samples.append(seconds)
                if how == RESUMED:
                    t.resumed += 1
                elif how == SPOT:
                    t.spot_samples.append(seconds)
            else:
                t.untimed += 1
            window.lookup_times.append((ev.at, seconds, bool(hit), how != UNTIMED, t.name))
        elif kind is Call:
            k = (ev.outcome, ev.why)
            calls[k] = calls.get(k, 0) + 1
            window.call_stances.add(ev.stance)
            if ev.first:
                window.eager_first_calls += 1
            if ev.outcome == CALL_EAGER:
                if ev.why in _NO_MISS_EAGER:
                    window.eager_calls[ev.stance] = window.eager_calls.get(ev.stance, 0) + 1
                if ev.fn is not None:
                    _target(targets, ev.fn).eager_calls += 1
        elif kind is Parts:
            _target(targets, ev.fn).parts.append(ev.parts)
        elif kind is DeviceSpan:
            seconds = ev.marks.seconds()
            if seconds is not None:
                _target(targets, ev.fn).device.append(seconds)
        elif kind is EagerParts:
            _target(targets, ev.fn).eager_parts.append((ev.before, ev.seconds))
        elif kind is Profiled:
            _target(targets, ev.fn).profiler_events.append(ev.seconds)
        elif kind is Loaded:
            window.aot_loads.append(AotLoad(*ev.frame, seconds=ev.seconds, error=ev.error))
        else:  # pragma: no cover - a new kind must be folded here
            raise TypeError(f"unknown recorder event {ev!r}")
    return targets, keys


class WindowMixin:
    """Makes a closed window's :class:`Window` from the recorder's running
    state and its events. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

    def _window(self, mark: _Mark) -> Window:
        precompiled = SOURCE_CHECK.events(mark.precompile)
        if (
            not self._armed
            and not precompiled
            and mark.counters is None
            and len(self._records) == mark.records
            and len(self._breaks) == mark.breaks
            and len(self._events) == mark.events
            and len(self._miss_list) == mark.miss_events
        ):
            # nothing was dispatched, compiled or logged: the window saw nothing
            return EMPTY_WINDOW
        records = self._records[mark.records :]
        info = {id(r): self._info.get(id(r), RecordInfo()) for r in records}
        window = Window(
            records=records,
            info=info,
            hits=self._hits - mark.hits,
            misses=self._misses - mark.misses,
            compiled_calls=self._calls - mark.calls,
            graph_breaks=list(self._breaks[mark.breaks :]),
            overhead_s=self._bounds.overhead_s - mark.overhead_s,
            precompiled=list(precompiled),
            waited=self._waited - mark.waited,
            waited_s=self._waited_s - mark.waited_s,
            waited_calls=self._waited_calls - mark.waited_calls,
        )
        if mark.counters is not None:  # no log artifact in this torch
            window.break_source = "counters"
            window.graph_breaks = _breaks_from_counters(mark.counters)
        targets, keys = fold(window, self._events[mark.events :])
        cached = (CALL_CACHED, "")
        n = self._cached - mark.cached  # calls resolved cached without an event
        if n:
            window.calls[cached] = window.calls.get(cached, 0) + n
        for sampling in self._counted.values():
            # counted-only hits: a count per function, not an event each
            n = sampling.hits - mark.sampled.get(sampling, 0)
            if not n and sampling.key not in keys:
                continue
            if sampling.key not in keys:
                keys.append(sampling.key)
            t = _target(targets, sampling.key)
            t.sampled += n
            t.sample_first, t.sample_every = sampling.first, sampling.every
            if n:
                window.calls[cached] = window.calls.get(cached, 0) + n
        for obj in keys:
            self._lookup_bound(obj, _target(targets, obj))
        window.targets = list(targets.values())
        window.resume_timing_off = None if self._resume.on else self._resume.reason
        window.tracing_on = self._tracing.enabled
        window.budgets = self._budgets(window, keys)
        for miss in self._miss_list[mark.miss_events :]:
            window.miss_events.append(
                MissEvent(
                    key=describe_callable(miss.key),
                    stance=miss.stance,
                    outcome=miss.outcome,
                    failures=list(miss.failures),
                    limit=miss.limit,
                    compile_id=miss.compile_id,
                    defined=dict(miss.defined),
                )
            )
        return window
