"""The hot path: torch's two per-call hooks (the dispatcher and the
guard-complete hook), the activation of each torch.compile call in
flight, lookup timing and sampling."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..anatomy import CALIBRATE_AFTER, CALIBRATION_MIN_HITS
from ..device import StreamMarks, stream_mark
from ..frames import (
    _MISSING,
    _OWNER_WALK_LIMIT,
    _caller_key,
    _find_owner,
    _hops,
)
from ..releases import (
    callback_ref,
    listing_refusals,
)
from ..stances import _EAGER_STANCES
from .events import (
    CALIBRATED,
    RESUMED,
    SAMPLED,
    SPOT,
    TIMED,
    UNTIMED,
    WAITED,
    DeviceSpan,
    EagerParts,
    Lookup,
    Parts,
    Profiled,
)
from .outcomes import CALL_CACHED, CALL_EAGER
from .window import MissEvent, Target

#: Lookups of one torch.compile'd function (since the outermost window
#: opened) timed in situ and attributed one by one; after them 1 in
#: SAMPLE_EVERY is, and the others are only counted, as hits of that
#: function (a miss is always handled in full). The report extrapolates the
#: total from the timed ones and says how many were timed. A timed call of a
#: real model costs about 25 us in situ (GPT-2 of 2 layers, 200-450 us a
#: call, its code having left the CPU's caches cold for the hooks'), a
#: counted one 2-4 us: with 64 timed first, a 100-call cell of it paid 7-9 %
#: (benchmarks/bench_models.py); 16 is past the slow first lookups of a cell
#: (GPT-2's first four, up to 7 times the rest) and above the profiler's
#: CALIBRATE_AFTER, whose calibration starts at a timed call.
SAMPLE_FIRST = 16
SAMPLE_EVERY = 16
#: Once torch's profiler has bounded a function's lookup for the session (its
#: CALIBRATIONS first cells: see probe.anatomy.LookupBounds), only its first
#: STEADY_FIRST lookups of a cell are timed one by one, then a spot check
#: STEADY_FIRST_SPOT calls later and 1 in STEADY_EVERY after it (the 16 were
#: for the calibration). A cell's first lookup is the slowest (GPT-2 and BERT
#: under Inductor: 74-77 us, the second 56-68, the rest 50-65); two, not
#: one: the second call's start reads the wrapper before the dispatch (see
#: _call_done). The early spot check gives a short cell one (a 4-layer GPT-2,
#: eager, 20 calls: without it the first two stood for all, at 2.5-4.6 times
#: the profiler's figure). 100 calls: 5 timed, not 10.
STEADY_FIRST = 2
STEADY_EVERY = 32
STEADY_FIRST_SPOT = 8
#: A timed lookup also times the rest of its call (the call's parts, see
#: probe.anatomy) until a window holds this many timed lookups of the
#: function; later spot checks time their lookup only. The parts are medians,
#: which a hundred calls settle; following the end of the call costs a spot
#: check about four times its lookup's timing (the clock's wrappers in torch
#: for the rest of the call), which a long loop would pay 1 in SAMPLE_EVERY
#: calls for nothing. A cell of up to about 1,300 calls of a function (16 +
#: 80 spot checks) keeps the parts of every timed call.
PARTS_PER_WINDOW = 96
#: A timed span whose thread was off the CPU for longer than this (its wall
#: time less the thread's CPU time, ``time.thread_time``) waited for the CPU:
#: preempted on a busy machine. It is counted, not timed (a lookup preempted
#: for milliseconds would count once where every lookup is timed, and
#: SAMPLE_EVERY times or not at all where it falls on a spot check; the CPU
#: time of a preempted span is no better: the switch and the cold caches after
#: it put 10-100 us on a 2 us lookup here), and a call that waited gives no
#: parts: the other timed spans stand for them. Without preemption the two
#: clocks agree within about a microsecond; a context switch alone is several.
#: The thread's clock is a system call (about 0.4 us), where a busy machine
#: preempts a thread that otherwise runs in user mode (spot checks took every
#: preemption of a sampled loop, 1 in 6 of them: 2-18 ms each): it is read
#: before the clock at a span's start and after it at its end, so that
#: preemption falls outside the span; and where the reading before the span
#: took longer than this (preempted there), the span, which then runs on
#: caches the other processes filled (20-100 us for a 3 us lookup), counts as
#: one that waited.
WAITED_S = 10e-6
#: A timed call whole (its compiled code included) waited only where its
#: thread was off the CPU for more than WAITED_S and more than this share of
#: it: compiled code may leave the CPU on its own (torch's operators release
#: the GIL, and another thread, a kernel's output thread, takes it; a
#: parallel operator waits for its threads), which a lookup's few microseconds
#: of guard code never does. (A notebook's tour, on a quiet machine, had 2 to
#: 4 timed calls a cell off the CPU for more than 10 µs.)
WAITED_CALL_SHARE = 0.1


def call_waited(wall: float, ran: float) -> bool:
    """Whether a timed call whole, ``wall`` seconds on the clock of which its
    thread ran ``ran``, waited for the CPU (see :data:`WAITED_CALL_SHARE`)."""
    off = wall - ran
    return off > WAITED_S and off > WAITED_CALL_SHARE * wall


def _torchs_dispatcher(fn: Any) -> bool:
    """Whether ``fn`` is torch's own ``_callback_from_stance`` (not another
    tool's wrapper of it, which may do more than torch's)."""
    code = getattr(fn, "__code__", None)
    return (
        code is not None
        and code.co_name == "_callback_from_stance"
        and code.co_filename.replace("\\", "/").endswith("torch/_dynamo/eval_frame.py")
    )


def _plain_stance(stance: Any) -> bool:
    """Whether torch's ``_callback_from_stance`` returns its argument
    unchanged under ``stance``: the default stance without ``force_backend``
    (``if _stance.stance == "default": ... return callback`` in torch 2.8,
    2.13 and 2.15, read; the torch-spec scenarios, force_backend among them,
    run bare and measured on every torch of the matrix). ``set_stance``
    replaces the stance object, never changes one, so the answer holds for
    as long as that object is in force."""
    return getattr(stance, "stance", None) == "default" and getattr(stance, "backend", None) is None


class _Sampling:
    """Per torch.compile'd function: its timed lookups, then the activation
    reused (no allocation) by its calls that are only counted."""

    __slots__ = ("act", "calls", "every", "first", "hits", "key", "ref", "timed")

    def __init__(self) -> None:
        self.timed = 0
        self.calls = 0
        #: its first lookups timed one by one, then 1 in ``every`` (STEADY_
        #: values once its lookup is bounded for the session)
        self.first = SAMPLE_FIRST
        self.every = SAMPLE_EVERY
        self.act: _Activation | None = None
        #: the function its lookups are attributed to, once counted-only
        #: (None before: every lookup is timed)
        self.key: Any = None
        #: counted-only hits since the outermost window opened (a window
        #: reads the difference from its start: see _Mark.sampled)
        self.hits = 0
        #: a weak reference to torch.compile's callback, once counted-only
        #: (what a counted-only call runs under the default stance)
        self.ref: Any = None


class _Activation:
    """One torch.compile call in flight: when torch handed it to Dynamo."""

    __slots__ = (
        "before",
        "c0",
        "calibrating",
        "callback",
        "consumed",
        "counted",
        "depth",
        "frame_id",
        "handling",
        "hit",
        "key",
        "mark",
        "miss",
        "outcome",
        "sampled",
        "stance",
        "start_records",
        "t0",
        "t_lookup",
        "t_out",
        "target",
    )

    def __init__(self, frame_id: int, t0: float, stance: str, callback: Any, key: Any) -> None:
        self.frame_id = frame_id
        self.t0 = t0
        #: the thread's CPU time where its timed span starts (see WAITED_S)
        self.c0 = 0.0
        self.stance = stance
        #: what torch will run the frame with (names the backend), held weakly
        #: (see callback_ref)
        self.callback = callback_ref(callback)
        #: torch.compile's own callback for the function: one per compiled object
        self.key = key
        self.target: Any = None
        self.consumed = False
        #: where the guard hook finds this call's compile_wrapper frame when
        #: the lookup is the called function's own (``sys._getframe(depth)``
        #: inside the hook): 1 for a function torch.compile called directly,
        #: more through torch's own frames (an nn.Module's ``_call_impl``);
        #: learnt when its function becomes counted-only (see _Sampling)
        self.depth = 1
        #: only counted: its hit adds one to ``counted.hits`` (see _Sampling)
        self.sampled = False
        self.counted: _Sampling | None = None
        #: the parts of a timed call (see probe.anatomy): where its wrapper
        #: started, where its lookup ended (a hit?), the records written by then
        self.before: float | None = None
        self.t_lookup: float | None = None
        #: where its compiled code started (None until the guard hook read it)
        self.t_out: float | None = None
        self.hit = False
        #: how it ended (a CALL_ outcome), once resolved
        self.outcome: str | None = None
        #: the records written before it started, and its own miss (if any):
        #: how it ended follows from them (see Recorder._resolve)
        self.start_records = 0
        self.miss: MissEvent | None = None
        #: the exception being handled where the call started (a call made
        #: in an ``except`` block): another one at its end means it raised
        self.handling: BaseException | None = None
        #: torch's profiler runs over this call (see LookupCalibration)
        self.calibrating = False
        #: CUDA events where its compiled code starts and returns
        #: (probe.device.stream_mark), where CUDA is in use
        self.mark: StreamMarks | None = None


def _hooks_for(rec: Any) -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
    """torch's two per-call hooks: ``_callback_from_stance`` (torch calls
    it four times a compiled call, three of them with None) and the
    guard-complete hook (once a lookup).

    Closures over what they read (a closure's cells and a slotted
    recorder's fields are the cheapest reads Python has), made once and
    installed again by each outermost window: the dictionaries they hold
    are the recorder's own, never replaced (its ``_clear_running``
    empties them). A counted-only call (see
    :data:`SAMPLE_FIRST`) is handled here in full; any other goes on to
    the recorder's ``_compiled_call`` and ``_lookup``. Under the default
    stance without ``force_backend`` torch's dispatcher returns its argument
    as it is: the hook answers for it (see :func:`_plain_stance`), one call
    of torch's function less on each dispatch (four a compiled call through
    AOTAutograd).
    """
    orig = rec._orig_cfs
    # torch 2.8's fail_on_recompile names no guard: ask torch's guard check
    dispatch = listing_refusals(orig, rec._note_refusal)
    cw = rec._cw_code
    threads = rec._threads
    get_ident = rec._get_ident
    getframe = sys._getframe
    counted = rec._counted
    ef = rec._ef
    clock = rec._clock
    start_span = rec._start_span
    compiled_call = rec._compiled_call
    lookup = rec._lookup
    # the stance object torch's dispatcher is known to return its
    # argument unchanged under (see _plain_stance); None until one is
    plain: Any = None
    torchs = _torchs_dispatcher(orig)

    def _callback_from_stance(callback: Any) -> Any:
        nonlocal plain
        stance = ef._stance
        if stance is plain:
            if callback is None:
                # torch._dynamo.disable's wrappers (three a compiled call
                # through AOTAutograd, inside compiled code too): never a
                # compiled call, and torch would return None
                return None
            result = callback
        elif callback is None:
            return orig(callback)
        else:
            result = dispatch(callback)
            if torchs and _plain_stance(stance):
                plain = stance
        if not rec._armed:
            rec._arm()  # the window's first dispatch: before its lookup
        sampling = counted.get(callback)
        # a call to time: torch's dispatcher returned now (the checks
        # below are this hook's own work, left out of the call)
        dispatched = clock() if sampling is None else 0.0
        f = getframe(1)
        if f.f_code is not cw or get_ident() not in threads:
            return result
        if sampling is not None:
            sampling.calls += 1
            act = sampling.act
            if act.consumed:
                # the activation reused, nothing allocated: only
                # counted, or 1 in SAMPLE_EVERY a spot check (timed)
                rec._calls += 1
                if rec._open is not None:
                    rec._resolve(rec._open, None)
                prev = rec._act
                if prev is not act and prev is not None and not prev.consumed:
                    rec._end_activation(prev)
                if rec._pending is not None:
                    rec._settle_miss()
                if result is not callback:
                    act.callback = callback_ref(result)
                elif act.callback is not sampling.ref:
                    act.callback = sampling.ref
                if act.frame_id != id(f):
                    rec._pin(act, id(f))
                act.stance = stance.stance
                act.consumed = False
                rec._act = act
                if sampling.calls % sampling.every:
                    act.sampled = True
                else:
                    act.sampled = False
                    act.handling = sys.exc_info()[1]
                    start_span(act)
                return result
            dispatched = clock()  # its reused activation is in use: a call of its own
        compiled_call(callback, result, f, dispatched)
        return result

    def _guard_hook(cache_hit: bool) -> bool:
        act = rec._act
        own = False
        if cache_hit and act is not None and act.sampled and not act.consumed:
            # the called function's own lookup: its call's frame is where its
            # first lookups found it (see _Activation.depth); not another's
            try:
                own = rec._pending is None and id(getframe(act.depth)) == act.frame_id
            except ValueError:  # a shallower stack: another thread's lookup
                pass
        if own:
            # a counted-only hit of the called function itself
            act.consumed = True
            rec._hits += 1
            act.counted.hits += 1  # type: ignore[union-attr]
        else:
            t = clock()  # the lookup ended (what follows is this hook's own work)
            lookup(cache_hit, getframe(1), t)
            starting = rec._starting
            if starting is not None:
                # a timed call's compiled code runs from here
                rec._starting = None
                starting.t_out = clock()
        prev = rec._prev_guard_hook
        if prev is not None:
            return prev(cache_hit)
        return cache_hit

    _callback_from_stance.__wrapped__ = orig  # type: ignore[attr-defined]
    _callback_from_stance._stance_magic_recorder = rec  # type: ignore[attr-defined]
    _guard_hook._stance_magic_recorder = rec  # type: ignore[attr-defined]
    return _callback_from_stance, _guard_hook


class CallsMixin:
    """The per-call hooks and the timing of lookups and of a call's parts. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

    # -- hooks (hot path: keep them small) ---------------------------------
    def _make_hooks(self) -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
        """torch's two per-call hooks for this recorder (see :func:`_hooks_for`)."""
        return _hooks_for(self)

    def _compiled_call(self, callback: Any, result: Any, f: Any, dispatched: float) -> None:
        """A torch.compile call on a measured thread (``f``: its
        compile_wrapper frame; ``dispatched``: when torch's dispatcher
        returned) that is not only counted: it starts an activation whose
        lookup is timed from now."""
        self._calls += 1
        if self._open is not None:
            self._resolve(self._open, None)
        prev = self._act
        if prev is not None and not prev.consumed:
            self._end_activation(prev)
        if self._pending is not None:
            self._settle_miss()
        stance = self._ef._stance.stance
        act = _Activation(id(f), 0.0, stance, result, callback)
        eager = stance in _EAGER_STANCES or result in (None, False)
        # the function called (read from the frame once per torch.compile
        # object): the account names it whatever the call does
        act.target = self._fn_of(callback, f)
        self._act = act
        self._pin(act, act.frame_id)
        bounds = self._bounds
        calibrating = False
        if bounds.on:
            calibrating = bounds.profiling()
            if not calibrating:
                # eval frame is off here: the profiler stops plain
                self._profiled(bounds.stop())
        clock = self._callclock
        before = None
        if clock is not None and clock.next_enter is not None:
            if clock.next_frame == act.frame_id and self._calls == self._enter_calls + 1:
                # this call's start, seen by the clock right after the last one
                before = dispatched - clock.next_enter
            clock.next_enter = None
        if not eager and not bounds.on and self._window_timed.get(callback, 0) >= CALIBRATE_AFTER:
            fn = self._fn_of(callback, f)
            if bounds.wanted(fn):
                # a function whose lookups have hit: torch's profiler over a
                # few calls, in its first cells (False while another one runs)
                calibrating = bounds.start(fn)
        act.calibrating = calibrating
        act.before = before
        act.start_records = len(self._records)
        self._open = act
        act.handling = sys.exc_info()[1]
        if clock is not None and not calibrating:
            # its end, whatever it does: the parts of a call that ran
            # eagerly, and for every call whether it raised (see _resolve);
            # a timed lookup tails it again from the lookup. Not a call the
            # profiler runs over: its lookup event is to read as bare as a
            # counted-only call's (the clock's wrappers around a call slow
            # its lookup: see probe.anatomy.LookupBounds)
            self._tail_act = act
            clock.tail(act.frame_id, self._call_done)
        self._start_span(act)

    def _start_span(self, act: _Activation) -> None:
        """``act``'s timed span starts: the thread's CPU clock, then the clock
        (a preemption at the CPU clock's system call falls before the span);
        where that reading took longer than WAITED_S (preempted there: the
        span runs on caches other processes filled), as if the span waited."""
        pre = self._clock()
        act.c0 = self._cpu()
        act.t0 = t0 = self._clock()
        if t0 - pre > WAITED_S:
            act.c0 += t0 - pre

    def _mark_back(self) -> None:
        """The compiled code of the timed call returned: mark the stream."""
        act = self._tail_act
        if act is not None and act.mark is not None:
            act.mark.end()

    def _call_done(self, back: float, end: float, own: float) -> None:
        """A timed call ended (see probe.anatomy): its parts, as an event,
        less the clock's own work (``own``, after the compiled code returned)."""
        ran = self._cpu()
        act, self._tail_act = self._tail_act, None
        self._enter_calls = self._calls  # the next call's start: this one's successor's
        if act is None:
            return
        if act.counted is not None and self._callclock is not None:
            # a spot check of a counted-only function: its successor is most
            # likely counted only too, which reads no start; the clock takes
            # itself out now instead of waiting in torch for that start
            self._callclock.uninstall()
        mark, act.mark = act.mark, None
        key = act.target
        exc = sys.exc_info()[1]
        raised = exc is not act.handling
        act.handling = None  # no exception kept alive by a held activation
        if self._open is act:
            outcome = self._resolve(act, exc if raised and exc is not None else False)
        else:
            outcome = act.outcome
        exc = None
        if act.calibrating or raised:
            # profiled (the profiler slows it), or it raised (a recompile
            # refused, a compile error that reached the caller, or the
            # user's own code): no part of a call that ran to its end
            return
        if call_waited(end - act.t0, ran - act.c0):
            # it waited for the CPU (a busy machine): its parts are not the call's
            self._waited_calls += 1
            return
        if outcome == CALL_EAGER:
            # ran without compiled code (force_eager, ..., a miss that
            # compiled nothing)
            self._events.append(EagerParts(key, act.before, end - act.t0 - own, end))
            return
        if outcome != CALL_CACHED or act.t_lookup is None or act.t_out is None or not act.hit:
            # it compiled, then ran what it compiled: neither an eager call
            # nor a steady one; the compile is the report's
            return
        compiled = max(back - act.t_out, 0.0)
        parts = (act.before, act.t_lookup - act.t0, compiled, end - back - own)
        self._events.append(Parts(key, parts, end))
        if mark is not None:
            self._events.append(DeviceSpan(key, mark, end))

    def _profiled(self, measured: list[tuple[Any, float]]) -> None:
        """The lookups torch's profiler measured in a calibration (past its
        warm-up): each function's stand for its profiled calls."""
        if measured:
            now = self._clock()
            self._events.extend(Profiled(fn, seconds, now) for fn, seconds in measured)

    def _lookup_bound(self, fn: Any, t: Target) -> None:
        """The profiler's bound of ``fn``'s lookup on its target ``t`` (see
        probe.anatomy.LookupBounds), given the spans of its spot checks where
        there are enough (the steady state; a cell's first lookups are
        slower, and stand only for themselves)."""
        spots = t.spot_samples
        bound = self._bounds.bound(fn, spots if len(spots) >= CALIBRATION_MIN_HITS else None)
        if bound is not None:
            t.lookup_event_s, t.lookup_share = bound

    def _pin(self, act: _Activation, frame_id: int) -> None:
        """Name ``act`` the call of the compile_wrapper frame at ``frame_id``
        (for the lookups nested under it, see _running_call). An activation
        pinned there before belongs to a frame that is gone (two live frames
        never share an address): it is unpinned, so a counted-only call
        checks only its own ``frame_id``."""
        old = self._acts.get(frame_id)
        if old is not None and old is not act:
            old.frame_id = -1
        act.frame_id = frame_id
        self._acts[frame_id] = act

    def _fn_of(self, callback: Any, frame: Any) -> Any:
        """The function a compile_wrapper frame calls (its local ``fn``), cached
        per torch.compile object: reading a frame's locals costs microseconds."""
        fn = self._fns.get(callback, _MISSING)
        if fn is _MISSING:
            fn = self._fns[callback] = frame.f_locals.get("fn")
        return fn

    def _end_activation(self, act: _Activation) -> None:
        """A torch.compile call ended (or the next began) without a lookup or a
        compile of its own frame: the function ran without compiled code."""
        self._act = None
        if not act.consumed:
            if self._open is act:
                self._resolve(act, None)
            elif act.counted is not None:
                # a counted-only call, reused without a word (see _make_hooks),
                # that made no lookup and compiled nothing of its own
                act.hit, act.miss, act.start_records = False, None, len(self._records)
                self._resolve(act, None)
            # (else its end was seen, and resolved it)
            # ended: a counted-only function's next call may reuse it
            act.consumed = True
        act.handling = None

    def _lookup(self, cache_hit: bool, caller: Any, t: float) -> None:
        """A cache lookup that is not a counted-only hit (``caller``: the
        frame that made it), ended at ``t``: counted, attributed and, where
        it has a start, timed."""
        if self._threads and self._get_ident() in self._threads:
            # while torch's profiler bounds a lookup: this lookup's event
            # (the first lookup of a profiled call makes one: see LookupBounds)
            event = self._bounds.seen() if self._bounds.on else None
            if self._pending is not None:
                self._settle_miss()
            if cache_hit:
                self._hits += 1
            else:
                self._misses += 1
                if self._bounds.on:
                    self._bounds.missed(event)
            act = self._act
            owner = None
            if act is not None and not act.consumed:
                # most often torch.compile's wrapper itself made the call
                owner = caller if id(caller) == act.frame_id else _find_owner(caller, act.frame_id)
            if owner is not None:
                # the lookup of the very function a torch.compile call handed
                # to Dynamo: timed from that moment to now
                act.consumed = True
                if self._open is not act:  # a counted-only call, reused
                    act.start_records = len(self._records)
                    act.outcome = None
                    self._open = act
                act.hit = cache_hit
                act.miss = None
                key = act.target = self._fn_of(act.key, owner)
                if act.sampled:  # a counted-only call that missed: counted, not timed
                    act.sampled = False
                    self._events.append(Lookup(SAMPLED, key, cache_hit, 0.0, t))
                else:
                    sampling = self._sampling.get(act.key)
                    if sampling is None:
                        sampling = self._sampling[act.key] = _Sampling()
                    if act.calibrating:
                        # under the profiler: counted, not timed (it slows the call)
                        if cache_hit and event is not None:
                            self._bounds.note(key, t - act.t0, event)
                        self._events.append(Lookup(CALIBRATED, key, cache_hit, 0.0, t))
                    else:
                        self._timed(act, sampling, key, cache_hit, t, caller, owner)
            else:
                # a lookup further down (a resume function after a graph
                # break, a frame compiled on its own): timed from the call
                # that made it where sys.monitoring saw it (3.12+), else only
                # counted; it belongs to the innermost torch.compile call still running
                act = self._running_call(caller)
                key = act.target if act is not None else _caller_key(caller)
                resume = self._resume
                start = resume.start_of(caller) if resume.on else None
                if start is not None:
                    # a nested lookup, from the call that made it (Python 3.12+)
                    kind = RESUMED if self._ran(t - start[0], start[1]) else WAITED
                    self._events.append(Lookup(kind, key, cache_hit, t - start[0], t))
                else:
                    if resume.on:
                        resume.watch(caller.f_code)  # its later calls are timed
                    self._events.append(Lookup(UNTIMED, key, cache_hit, 0.0, t))
            if not cache_hit:
                stance = act.stance if act is not None else self._ef._stance.stance
                unsafe = bool(self._ef._stance.skip_guard_eval_unsafe)
                self._pending = miss = MissEvent(key, stance, unsafe=unsafe)
                self._pending_code = None
                self._miss_list.append(miss)
                if owner is not None:
                    act.miss = miss  # type: ignore[union-attr]
            elif owner is not None and self._tail_act is not act:
                # a hit whose end no clock will see: it ran its cached code
                self._resolve(act, None)  # type: ignore[arg-type]

    def _timed(
        self,
        act: _Activation,
        sampling: _Sampling,
        key: Any,
        hit: bool,
        t: float,
        caller: Any,
        owner: Any,
    ) -> None:
        """A timed lookup of ``act``'s own function, ended at ``t`` (made
        from the frame ``caller``, ``owner`` its compile_wrapper frame); the
        rest of the call (its compiled code, its end) is timed from here."""
        # after the first ones: a spot check, standing for the counted-only
        timed = self._window_timed[act.key] = self._window_timed.get(act.key, 0) + 1
        spot = sampling.key is not None
        kind = WAITED if not self._ran(t - act.t0, act.c0) else SPOT if spot else TIMED
        self._events.append(Lookup(kind, key, hit, t - act.t0, t))
        clock = self._callclock
        if clock is not None and (timed <= PARTS_PER_WINDOW or not spot):
            act.t_lookup, act.hit = t, hit
            self._tail_act = act
            # where CUDA is in use, the GPU's stream is marked where the
            # compiled code starts and where it returns (outside its part)
            cuda = self._cuda
            in_use = hit and cuda is not None and cuda.is_initialized()
            act.mark = marks = stream_mark(cuda) if in_use else None
            clock.tail(act.frame_id, self._call_done, self._mark_back if marks else None)
            # the compiled code runs from the guard hook's return (this
            # hook's work left out): the hook reads it there
            act.t_out = None
            self._starting = act
        sampling.timed += 1
        if sampling.key is not None:
            return
        if sampling.timed >= STEADY_FIRST and self._bounds.settled(key):
            sampling.first, sampling.every = STEADY_FIRST, STEADY_EVERY
            sampling.calls = STEADY_EVERY - STEADY_FIRST_SPOT  # (its first spot check sooner)
        if sampling.timed >= sampling.first:  # only counted now, but 1 in sampling.every
            sampling.key = key
            sampling.ref = callback_ref(act.key)
            sampling.act = act
            act.counted = sampling
            # where the guard hook finds its compile_wrapper frame (through
            # an nn.Module's _call_impl: not the lookup's caller)
            act.depth = 1 + max(_hops(caller, owner), 0)
            self._counted[act.key] = sampling

    def _ran(self, wall: float, c0: float) -> bool:
        """Whether a timed span, ending now after ``wall`` seconds on the
        clock (``c0``: the thread's CPU clock at its start), ran without
        waiting for the CPU; one that waited longer than WAITED_S is counted,
        with the time it waited, in the window's figures. A span no longer
        than WAITED_S cannot have (its end reads no CPU clock: a system call
        a spot check would pay for nothing)."""
        if wall <= WAITED_S:
            return True
        ran = self._cpu() - c0  # (a little past the span's end: its wait, if any, is less)
        if wall - ran <= WAITED_S:
            return True
        self._waited += 1
        self._waited_s += wall - ran
        return False

    def _running_call(self, frame: Any) -> _Activation | None:
        """The innermost torch.compile call whose compile_wrapper frame is on
        the stack above ``frame`` (a resume function belongs to the function
        that broke, not to a compiled function it called before)."""
        f = frame
        cw = self._cw_code
        for _ in range(_OWNER_WALK_LIMIT):
            if f is None:
                return None
            if f.f_code is cw:
                act = self._acts.get(id(f))
                if act is None:
                    return None
                if act.target is None:
                    act.target = self._fn_of(act.key, f)
                return act
            f = f.f_back
        return None
