"""The parts of one compiled call: torch.compile's wrapper, Dynamo's cache
lookup, the compiled code.

torch.compile's ``compile_wrapper`` calls functions of
``torch._C._dynamo.eval_frame`` that ``torch/_dynamo/eval_frame.py`` names at
module level: it turns Dynamo's frame hook off with ``set_eval_frame`` when
the call starts (before torch.compile's dispatcher: the call's *enter*);
past the compiled code's return, in its ``finally``, it turns the hook off
and puts torch's settings back, ``set_skip_guard_eval_unsafe`` among them
(*back*); and it ends the call with ``_maybe_set_eval_frame`` (*done*;
``set_eval_frame`` itself from torch 2.10, a Python function calling it on
torch 2.8). While a call of a measured cell is timed, :class:`CallClock`
puts a wrapper in those module names that notes when ``compile_wrapper``
makes these calls, so with the recorder's two hooks (the dispatcher, the end
of the lookup) a call splits into: the wrapper before Dynamo (enter to the
dispatch), into Dynamo and the lookup (the dispatch to the end of the
lookup), the compiled code (the end of the lookup to back) and the wrapper
after it (back to done).

Each wrapper is in torch only while its moment is next: the one on
``set_skip_guard_eval_unsafe`` from a timed call's dispatch to its back
(nothing the compiled code runs calls it: torch's disable wrappers turn the
frame hook on and off with ``set_eval_frame``, which is not wrapped then),
the ones on ``set_eval_frame`` from back to done and, to see where the next
call starts, from there to the next call's start. Counted-only calls never
meet them.

Where the lookup itself starts, inside Dynamo's C frame hook, Python cannot
see: :class:`LookupBounds` runs torch's profiler over a few calls of a
function, in the first three cells that call it enough, to read the
``TorchDynamo Cache Lookup`` events that bound it; the rest of the span
from the dispatch is the wrapper's.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any, Callable

from .version import _eval_frame

__all__ = ["CALIBRATE_AFTER", "CallClock", "LookupBounds"]

#: The names in ``torch._dynamo.eval_frame`` compile_wrapper calls: to turn
#: Dynamo's frame hook off at its start (and on and off around the compiled
#: code), to put the stance's ``skip_guard_eval_unsafe`` back once the
#: compiled code returned, and to end the call (``_maybe_set_eval_frame`` is
#: ``set_eval_frame`` itself from torch 2.10, a Python function calling it
#: on torch 2.8).
SET = "set_eval_frame"
BACK = "set_skip_guard_eval_unsafe"
MAYBE = "_maybe_set_eval_frame"


class CallClock:
    """Notes when torch.compile's ``compile_wrapper`` puts torch's settings
    back past the compiled code and ends the call, for one timed call at a
    time, and where the next call starts.

    ``tail(frame_id, done)``: from now, the compile_wrapper frame
    ``frame_id`` putting ``skip_guard_eval_unsafe`` back is the compiled
    code's return, and its next ``set_eval_frame`` the call's end;
    ``done(back, end, own)`` gets their clock readings (and the seconds the
    clock spent on its own work in between), and then the clock waits for
    the next compile_wrapper to start (:attr:`next_enter`) before it takes
    itself out.
    """

    __slots__ = (
        "_at_back",
        "_clock",
        "_cw",
        "_done",
        "_ef",
        "_frame_id",
        "_getframe",
        "_installed",
        "_maybe_code",
        "_origs",
        "_t_back",
        "_t_resume",
        "_wrappers",
        "next_enter",
        "next_frame",
    )

    def __init__(self, clock: Callable[[], float], cw_code: Any, ef: Any = None) -> None:
        self._clock = clock
        self._cw = cw_code
        self._getframe = sys._getframe
        #: the module whose names it wraps (torch._dynamo.eval_frame, read
        #: at the first tail unless given)
        self._ef: Any = ef
        self._origs: dict[str, Any] = {}
        self._wrappers: dict[str, Any] = {}
        self._installed = False
        self._maybe_code: Any = None
        self._frame_id = -1
        self._done: Callable[[float, float, float], None] | None = None
        #: called where the compiled code returned, before the clock resumes
        self._at_back: Callable[[], None] | None = None
        self._t_back: float | None = None
        self._t_resume = 0.0
        #: the clock reading where the next compile_wrapper started, and its frame
        self.next_enter: float | None = None
        self.next_frame = -1

    # -- installing ---------------------------------------------------------
    def _install(self, name: str) -> None:
        ef = self._ef
        if ef is None:
            ef = self._ef = _eval_frame()
        if not self._wrappers:
            maybe = getattr(ef, MAYBE, None)
            self._maybe_code = getattr(maybe, "__code__", None)  # torch 2.8: a Python function
        orig = getattr(ef, name, None)
        if orig is None:
            return
        w = self._wrappers.get(name)
        if orig is w:
            return  # in already
        if name == MAYBE and self._maybe_code is not None:
            return  # torch 2.8: it calls set_eval_frame, whose wrapper sees it
        if w is None or self._origs.get(name) is not orig:
            w = self._wrappers[name] = self._wrap(name, orig)
            self._origs[name] = orig
        setattr(ef, name, w)
        self._installed = True

    def _take_out(self, name: str) -> None:
        w = self._wrappers.get(name)
        if w is not None and getattr(self._ef, name, None) is w:
            setattr(self._ef, name, self._origs[name])

    def uninstall(self) -> None:
        """Take the wrappers out (where they are still in); forget the call."""
        if self._installed:
            for name in self._wrappers:
                self._take_out(name)
            self._installed = False
        self._done = None
        self._at_back = None
        self._frame_id = -1

    @property
    def installed(self) -> bool:
        return self._installed

    def _make_back(self, orig: Any) -> Any:
        """The wrapper of ``set_skip_guard_eval_unsafe``: the tailed call's
        compile_wrapper putting it back is the compiled code's return."""
        clock, getframe, cw = self._clock, self._getframe, self._cw
        clk = self

        def set_skip_guard_eval_unsafe(value: Any) -> Any:
            result = orig(value)
            t = clock()
            f = getframe(1)
            if f.f_code is cw and id(f) == clk._frame_id:
                clk._on_back(t)
            return result  # else: torch.compile's context-manager form

        return set_skip_guard_eval_unsafe

    def _make(self, orig: Any) -> Any:
        """The wrapper of ``set_eval_frame`` (and of torch 2.10+'s
        ``_maybe_set_eval_frame``, the same function): a compile_wrapper's
        calls of it end the tailed call or start the next one; torch's
        disable wrappers' calls (between calls) it passes on."""
        clock, getframe, cw = self._clock, self._getframe, self._cw
        clk = self

        def set_eval_frame(callback: Any) -> Any:
            result = orig(callback)
            t = clock()
            f = getframe(1)
            code = f.f_code
            if code is not cw:
                if code is not clk._maybe_code:
                    return result  # torch.compiler.disable's wrappers and the like
                f = f.f_back  # torch 2.8: through its _maybe_set_eval_frame
                if f is None or f.f_code is not cw:
                    return result
            clk._on_set(id(f), t)
            return result

        return set_eval_frame

    def _wrap(self, name: str, orig: Any) -> Any:
        w = self._make_back(orig) if name == BACK else self._make(orig)
        w._stance_magic_wraps = orig  # type: ignore[attr-defined]
        # compile_wrapper's context-manager form, and torch's functions
        # inside compiled code, may call it while Dynamo's frame hook is on:
        # Dynamo must run it as it runs torch's own functions, never look it
        # up (torch 2.8's profiler records that lookup, and a refused lookup
        # there loses the cell's own miss)
        skip = getattr(self._ef, "skip_code", None)
        if skip is not None:
            skip(w.__code__)
        return w

    # -- a timed call -------------------------------------------------------
    def tail(
        self,
        frame_id: int,
        done: Callable[[float, float, float], None],
        at_back: Callable[[], None] | None = None,
    ) -> None:
        """Note the compiled code's return and the end of the call of the
        compile_wrapper frame ``frame_id``; ``done(back, end, own)`` gets
        them, with the clock's own seconds after ``back``; ``at_back()``
        runs where the compiled code returned (its time is the clock's own,
        left out). Only the wrapper that notes the return is in while the
        call runs."""
        self._frame_id = frame_id
        self._done = done
        self._at_back = at_back
        self._t_back = None
        self.next_enter = None
        if self._installed:
            # the wrappers that wait for the end (a call whose end was not
            # seen, or the dispatch's tail re-set at the lookup) stay out of
            # the compiled code
            self._take_out(SET)
            self._take_out(MAYBE)
        self._install(BACK)

    def _on_back(self, t: float) -> None:
        if self._t_back is not None:
            return
        self._t_back = t  # the compiled code returned: the call's end is next
        if self._at_back is not None:
            self._at_back()
            self._at_back = None
        self._take_out(BACK)
        self._install(SET)
        self._install(MAYBE)
        self._t_resume = self._clock()  # this wrapper's own work left out

    def _on_set(self, frame_id: int, t: float) -> None:
        if frame_id == self._frame_id:
            if self._t_back is None:
                return  # before the compiled code returned (a call whose back was not seen)
            back, done = self._t_back, self._done
            self._frame_id, self._done, self._t_back = -1, None, None
            self._take_out(MAYBE)
            if done is not None:
                # the call ended (less this wrapper's own work after the compiled
                # code returned): now watch for the next one's start
                done(back, t, self._t_resume - back)
            return
        if self._done is None and self.next_enter is None:
            # the next compile_wrapper's start: the last reading needed, taken
            # after this wrapper's own work
            self.next_frame = frame_id
            self.uninstall()
            self.next_enter = self._clock()


#: Calls a calibration may run the profiler over, whatever functions they
#: call. The first :data:`CALIBRATION_SKIP` lookups are left out: the
#: profiler's first events after it starts are slow (for a 1-argument
#: function on torch 2.13: 9, 2.7, 1.5, 1.4, 1.4, 1.4, 1.4, then about
#: 1.3 µs, the median of a long run). A calibration stops as soon as every
#: function it met has :data:`CALIBRATION_HITS` calls that hit past those; a
#: function with at least :data:`CALIBRATION_MIN_HITS` of them when it stops
#: is bounded by their median event (a burst of load moves a few of them,
#: not the median).
CALIBRATION_CALLS = 64
#: A function's lookups are bounded only once this many of them have been
#: timed in the cell (a short cell keeps every call timed, unbounded).
CALIBRATE_AFTER = 8
CALIBRATION_SKIP = 8
CALIBRATION_HITS = 16
CALIBRATION_MIN_HITS = 4
#: Calibrations of a function, each in a cell of its own. A calibration can
#: be thrown either way: once in a while all of its events are slow (seen
#: here: 2.3 µs against 1.3 µs for the 1-argument function, about 1 run in
#: 8) while the unprofiled calls around it are not, and a burst of load over
#: the cell's unprofiled calls but not its profiled ones halves its share
#: (GPT-2 under another test process: 0.5 of the profiler's lookup, the
#: cells after it too). Of two, the one with the faster event stands; from
#: three, those whose events are more than :data:`SLOW_EVENTS` times the
#: fastest one's are left out, and of the rest the median share stands (of
#: one or two: the higher share). Two slow ones of three (a CI run of torch
#: 2.8 read the lookup 1.6x the profiler's) are outvoted too.
CALIBRATIONS = 3
SLOW_EVENTS = 1.3
#: Calibrations a function may start (its calls miss, or another profiler
#: runs, or it stops before enough hits): past them it keeps what it has,
#: or is left unbounded for the session.
CALIBRATION_TRIES = CALIBRATIONS + 1


class _Bound:
    """A function's calibrations: each one's lookup event and its share of
    the span; the event of one whose share its cell's spans are yet to give,
    and the share its profiled calls gave."""

    __slots__ = ("done", "paired", "pending")

    def __init__(self) -> None:
        self.done: list[tuple[float, float]] = []
        self.pending: float | None = None
        self.paired = 0.0


class LookupBounds:
    """Per compiled function, its lookup as torch's profiler bounds it, in
    the first cells that call it enough.

    The recorder times a lookup from torch.compile's dispatcher to the end of
    the lookup; the ``TorchDynamo Cache Lookup`` event of torch's profiler
    starts inside Dynamo's C frame hook, where Python cannot see. So in
    :data:`CALIBRATIONS` cells of a session, when :data:`CALIBRATE_AFTER` of
    a function's lookups have been timed in the cell, the profiler runs over
    the next few compiled calls
    (:meth:`start`, :meth:`profiling`, :meth:`stop`).

    It records only their lookups: torch's ``RecordFunction`` (what the
    profiler's events come from, thread by thread) is on from a profiled
    call's dispatch to the end of the next lookup (the guard-complete hook
    runs past the lookup's event: :meth:`seen` turns it off there), so
    neither the compiled code's operators nor the lookups further down make
    events. A GPT-2 call under ``aot_eager`` makes 336 events otherwise:
    reading 24 calls' 8,064 took 15-27 ms, the cell 42 ms; its 24 lookups
    alone, 0.3 ms, with the same median. So the profiler's events are the
    recorded lookups in order, and a call's own lookup (:meth:`note`) is the
    event at its place among them. The median of them (after the profiler's
    own warm-up) is the function's lookup, and its
    share of the span from the dispatch (:meth:`bound`) is that over the
    median span of the same cell's calls with the profiler off (the
    profiler's own bookkeeping lengthens the span); of two calibrations, the
    one with the faster lookup stands, of three the one with the median
    share (:data:`CALIBRATIONS`). Each timed lookup is then that share
    of its span: when the process slows down (load, or one of the slow
    states a process falls into for a while), the path to the lookup and the
    lookup slow down together.

    A profiled call is counted, not timed (the profiler slows it), and the
    profiler's own start and stop inside a cell are in :attr:`overhead_s`
    (part of the cell's wall time, which the report says). Its end is not
    watched (no :class:`CallClock` tail), as a counted-only call's is not:
    the clock's wrappers around a call make its lookup event read slower
    (2.0-2.2 µs against 1.7 µs bare for a 1-argument function on torch 2.8),
    and the bound is to read the lookup as it runs bare.
    """

    __slots__ = (
        "_bounds",
        "_cell",
        "_cells",
        "_clock",
        "_hits",
        "_on",
        "_recorded",
        "_recording",
        "_rf_off",
        "_rounds",
        "_spoiled",
        "_tries",
        "calls",
        "overhead_s",
        "spans",
    )

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._on = False
        #: calls profiled so far in this calibration, and for each one's own
        #: lookup: its place among the profiler's events, its function and
        #: its span from the dispatch to the end of the lookup
        self.calls = 0
        self.spans: list[tuple[int, Any, float]] = []
        self._hits: dict[Any, int] = {}
        #: the lookups the profiler recorded so far (its events, in order)
        self._recorded = 0
        #: torch's RecordFunction is on: the next lookup makes an event
        self._recording = False
        #: it was turned off here (turned back on when the calibration stops)
        self._rf_off = False
        #: the place of the first miss (a compile may follow, and a compile
        #: looks frames up too: the events after it are not the calls'), or None
        self._spoiled: int | None = None
        #: function -> its calibrations, or None: unbounded
        self._bounds: dict[Any, _Bound | None] = {}
        self._tries: dict[Any, int] = {}
        #: function -> calibrations that bounded it, and the cell of the last
        self._rounds: dict[Any, int] = {}
        self._cells: dict[Any, int] = {}
        #: the current cell's number (:meth:`new_cell`)
        self._cell = 0
        #: seconds the profiler's start and stop took inside cells, so far
        self.overhead_s = 0.0

    @property
    def on(self) -> bool:
        return self._on

    def new_cell(self) -> None:
        """An outermost window opens: a function bounded in an earlier cell
        may be calibrated again in this one."""
        self._cell += 1

    def wanted(self, fn: Any) -> bool:
        """Whether ``fn``'s lookup has a calibration to go (not given up on,
        not calibrated in this cell already)."""
        if fn not in self._bounds:
            return True
        if self._bounds[fn] is None:
            return False
        return self._rounds[fn] < CALIBRATIONS and self._cells[fn] != self._cell

    def settled(self, fn: Any) -> bool:
        """Whether ``fn``'s lookup is bounded for the session: its
        CALIBRATIONS calibrations done (not one given up on, nor one in this
        cell: a function still calibrating keeps its first cells' sampling)."""
        return fn in self._rounds and self._rounds[fn] >= CALIBRATIONS

    def start(self, fn: Any) -> bool:
        """Turn the profiler on for a call of ``fn``; False when it could
        not start (another profiler running)."""
        tries = self._tries.get(fn, 0)
        if tries >= CALIBRATION_TRIES:
            if fn in self._bounds:
                self._rounds[fn] = CALIBRATIONS  # bounded once: that stands
            else:
                self._bounds[fn] = None
            return False
        t0 = self._clock()
        started = _profiler_start()
        self.overhead_s += self._clock() - t0
        if not started:
            return False
        self._on, self._spoiled, self._recorded = True, None, 0
        self._recording = True  # RecordFunction as torch has it: on
        self.calls, self.spans, self._hits = 1, [], {}
        self._tries[fn] = tries + 1
        return True

    def profiling(self) -> bool:
        """At a compiled call's start while the profiler is on: whether it
        runs over this call too (else :meth:`stop` is next)."""
        if self._spoiled is not None or self.calls >= CALIBRATION_CALLS:
            return False
        if self._hits and all(n >= CALIBRATION_HITS for n in self._hits.values()):
            return False  # every function it met is bounded
        self.calls += 1
        if not self._recording:
            # this call's lookup is the next event
            _record_functions(True)
            self._recording = True
        return True

    def seen(self) -> int | None:
        """A lookup ended while the profiler runs: its place among the
        profiler's events, or None when it made none (RecordFunction was off:
        a lookup further down, or of a call not profiled). RecordFunction is
        off from here to the next profiled call."""
        if not self._recording:
            return None
        _record_functions(False)
        self._recording, self._rf_off = False, True
        i = self._recorded
        self._recorded += 1
        return i

    def note(self, fn: Any, span: float, event: int) -> None:
        """A profiled call's own lookup, a hit, the profiler's ``event``-th
        (see :meth:`seen`): its span from the dispatch."""
        self.spans.append((event, fn, span))
        if event >= CALIBRATION_SKIP and self.wanted(fn):
            self._hits[fn] = self._hits.get(fn, 0) + 1

    def missed(self, event: int | None) -> None:
        """A lookup missed while the profiler runs (``event``: its place
        among the profiler's events, or None): the calibration ends with it
        (a compile follows, and a compile looks frames up too)."""
        if self._spoiled is None:
            self._spoiled = self._recorded if event is None else event

    def stop(self, in_cell: bool = True) -> list[tuple[Any, float]]:
        """Turn the profiler off; bound each function met with enough hits.
        Returns the profiled calls' own lookups past the profiler's warm-up,
        (function, event seconds): they stand for the calls the profiler ran
        over in the cell's figures."""
        if not self._on:
            return []
        self._on = False
        t0 = self._clock()
        stopped = _profiler_stop()
        events, found_on = stopped if stopped is not None else (None, True)
        if self._rf_off or not found_on:
            # RecordFunction as it was found (torch's own tests turn it off;
            # the profiler's mark at its start says): the calls' events then
            # do not pair with their lookups
            _record_functions(found_on)
            if not found_on:
                events = None
        self._rf_off = self._recording = False
        n = self._recorded
        if in_cell:
            self.overhead_s += self._clock() - t0
        spans, self.spans, self._hits = self.spans, [], {}
        if events is None:
            return []
        if self._spoiled is not None:
            # up to the miss, the events are the lookups counted
            n = self._spoiled
            if len(events) < n:
                return []
        elif len(events) != n:
            return []  # not one event a lookup counted: the functions' later calls try again
        measured: list[tuple[Any, float]] = []
        per_fn: dict[Any, list[tuple[float, float]]] = {}
        for i, fn, span in spans:
            if not CALIBRATION_SKIP <= i < n:
                continue  # the profiler's warm-up, or past a miss
            measured.append((fn, events[i]))
            if span > 0 and self.wanted(fn):
                per_fn.setdefault(fn, []).append((events[i], span))
        for fn, pairs in per_fn.items():
            if len(pairs) < CALIBRATION_MIN_HITS:
                continue
            bound = self._bounds.get(fn)
            if bound is None:
                bound = self._bounds[fn] = _Bound()
                self._rounds[fn] = 0
            # its share: from this cell's steady spans (bound()), or failing
            # those, each profiled call's event over its own span
            bound.pending = statistics.median(e for e, _ in pairs)
            bound.paired = min(statistics.median(e / s for e, s in pairs), 1.0)
            self._rounds[fn] += 1
            self._cells[fn] = self._cell
        return measured

    def bound(self, fn: Any, steady: list[float] | None) -> tuple[float, float] | None:
        """``fn``'s lookup event and its share of the span from the dispatch
        to the lookup's end; None while unbounded. ``steady``: the current
        cell's spot-checked hits of ``fn`` (its steady state), None when it
        had too few. A calibration's share is its event over the median
        steady span of its own cell (the lookup and the path to it slow down
        together when the process does); in a cell without enough of them,
        the median of each profiled call's event over its own span (the
        cell's other timed calls are its first ones, which are slower: the
        first four of GPT-2's here up to 7 times the rest). Of two
        calibrations, the one with the faster event stands; from three, the
        median share of those whose events are not slow (see
        :data:`CALIBRATIONS`)."""
        bound = self._bounds.get(fn)
        if bound is None:
            return None
        if bound.pending is not None:
            if steady:
                here = min(bound.pending / statistics.median(steady), 1.0)
            else:
                here = bound.paired
            bound.done.append((bound.pending, here))
            bound.pending = None
        done = bound.done
        if not done:
            return None
        if len(done) < 3:
            return min(done)
        # a calibration whose events are all slow measured a slow profiler,
        # not the lookup (the function's guards are the same in every cell)
        fastest = min(e for e, _ in done)
        kept = [c for c in done if c[0] <= SLOW_EVENTS * fastest]
        if len(kept) >= 3:
            return sorted(kept, key=lambda c: c[1])[len(kept) // 2]
        # of the rest, a low share is a cell whose steady calls ran loaded
        return max(kept, key=lambda c: c[1])

    def clear(self) -> None:
        """Forget every bound (torch.compiler.reset: new code, new guards)."""
        self._bounds.clear()
        self._tries.clear()
        self._rounds.clear()
        self._cells.clear()


def _record_functions(on: bool) -> None:
    """torch's RecordFunction on or off on this thread (what the profiler's
    events come from; on unless something turned it off)."""
    from torch._C import _autograd

    _autograd._enable_record_function(on)


#: The profiler's mark at its start: its event says RecordFunction was on on
#: this thread (torch has no getter), so it is left as it was found.
START_MARK = "stance_magic calibration"


def _profiler_start() -> bool:
    from torch._C import _autograd, _profiler

    from .profiler import quiet_fd2

    if _autograd._profiler_enabled():
        return False  # torch runs one profiler at a time
    cfg = _profiler.ProfilerConfig(
        _profiler.ProfilerState.KINETO,
        False,
        False,
        False,
        False,
        False,
        _profiler._ExperimentalConfig(),
    )
    activities = {_profiler.ProfilerActivity.CPU}
    try:
        with quiet_fd2():
            _autograd._prepare_profiler(cfg, activities)
            _autograd._enable_profiler(cfg, activities, set())
    except Exception:  # a profiler that cannot start: no bound
        return False
    try:
        _autograd._record_function_with_args_exit(
            _autograd._record_function_with_args_enter(START_MARK)
        )
    except Exception:  # no mark: whether RecordFunction is on cannot be told
        with quiet_fd2():
            _autograd._disable_profiler()
        return False
    return True


def _profiler_stop() -> tuple[list[float], bool] | None:
    """The profiler off: the seconds of each lookup event, in order, and
    whether RecordFunction was on at its start (its mark made an event);
    None if it failed."""
    from torch._C import _autograd

    from .profiler import CACHE_LOOKUP_EVENT, quiet_fd2

    try:
        with quiet_fd2():
            result = _autograd._disable_profiler()
        lookups = []
        marked = False
        for e in result.events():
            name = e.name()
            if name == CACHE_LOOKUP_EVENT:
                lookups.append((e.start_ns(), e.duration_ns() / 1e9))
            elif name == START_MARK:
                marked = True
    except Exception:
        return None
    lookups.sort()
    return [d for _, d in lookups], marked
