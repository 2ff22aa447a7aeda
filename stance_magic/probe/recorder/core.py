"""The recorder: torch's hooks while a measuring window is open, and what
each window saw (records, lookups, misses and their outcomes).

Its concerns live in the modules beside this one, as parts of one class
(see :class:`Recorder`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ..anatomy import CallClock, LookupBounds
from ..breaks import (
    GraphBreakEvent,
    _graph_break_counters,
)
from ..monitoring import CallStarts
from ..patches import Patches
from ..precompile import SOURCE_CHECK
from ..records import (
    LimitHit,
    RecordInfo,
)
from ..shapes import GraphShapes
from ..tracing import TracingProfile
from ..watch import held
from .account import AccountMixin
from .aot import AotMixin
from .calls import CallsMixin, _Activation, _Sampling
from .compiles import CompilesMixin
from .install import InstallMixin
from .logs import LogsMixin
from .misses import MissesMixin
from .window import EMPTY_WINDOW, MissEvent, Window, WindowMixin, _Mark


def following(clock: Callable[[], float]) -> tuple[Callable[[], float], Callable[[], float]]:
    """A CPU clock for a fake ``clock`` that no thread waits on: ``(read,
    cpu)``, ``cpu`` giving the time ``read`` last gave, without a tick (the
    recorder reads the CPU clock right after the clock: a span's CPU time is
    then its wall time). A clock with a ``peek()`` (the time its next reading
    gives, without a tick) is read as it is, ``peek`` its CPU clock; else
    ``read`` wraps it."""
    peek = getattr(clock, "peek", None)
    if callable(peek):
        return clock, peek
    last = [0.0]

    def read() -> float:
        t = last[0] = clock()
        return t

    def cpu() -> float:
        return last[0]

    return read, cpu


def clocks(
    clock: Callable[[], float] | None, cpu: Callable[[], float] | None = None
) -> tuple[Callable[[], float], Callable[[], float]]:
    """The clock and the thread's CPU clock to measure on: ``time.perf_counter``
    and ``time.thread_time`` for None, a fake ``clock`` with ``cpu`` or, for
    None, :func:`following` it."""
    clock = clock or time.perf_counter
    if cpu is not None:
        return clock, cpu
    if clock is time.perf_counter:
        return clock, time.thread_time
    return following(clock)


class Recorder(
    WindowMixin,
    InstallMixin,
    LogsMixin,
    CallsMixin,
    AccountMixin,
    MissesMixin,
    CompilesMixin,
    AotMixin,
):
    """Measures torch.compile while at least one window is open.

    Nothing is installed in torch while no window is open, so cells that are
    not measured pay nothing. While a window is open:

    * torch.compile's own dispatcher (``_callback_from_stance``, which its
      ``compile_wrapper`` calls just before handing the call to Dynamo) is
      wrapped to note the moment and the function called;
    * the guard-complete hook (torch calls it right after each cache
      lookup) counts hits and misses and times each lookup in situ: from
      that moment to the end of the lookup (building the frame's locals and
      running the guards), inside the real loop, with whatever the model
      run before it left in the CPU caches. Lookups made further down, by
      resume functions after a graph break or by frames compiled on their
      own, have no such start and are counted as not timed;
    * every ``CompilationMetrics`` record is collected as torch makes it,
      whatever the record deque's limit and across ``torch.compiler.reset()``;
    * ``guard_manager_testing_hook_fn`` names the ``nn.Module`` of each
      compiled frame at compile time.

    Graph breaks are read from torch's ``graph_breaks`` log artifact (the
    records ``TORCH_LOGS=graph_breaks`` prints), captured by a handler that
    is attached while the outermost window is open, and the loggers are put
    back as they were when it closes.

    Windows nest and may close in any order; each sees what happened in its
    own thread between its start and stop.

    The two per-call hooks are closures (see :meth:`_make_hooks`) and the
    recorder's fields slots: after a function's first :data:`SAMPLE_FIRST`
    lookups its calls are counted through one reused activation, with the
    checks that keep the counts exact (the compile_wrapper frame, the
    thread, the stance), which is as little as a Python hook can do with
    them (``benchmarks/bench_hooks.py`` measures the floor).
    """

    __slots__ = (
        "__weakref__",
        "_act",
        "_acts",
        "_aot_patches",
        "_aot_seen",
        "_armed",
        "_bounds",
        "_breaks",
        "_cached",
        "_callclock",
        "_calls",
        "_clock",
        "_code_limits",
        "_codes",
        "_context_hook",
        "_counted",
        "_cpu",
        "_cuda",
        "_cw_code",
        "_dup_seen",
        "_ef",
        "_enter_calls",
        "_events",
        "_fns",
        "_generation",
        "_get_ident",
        "_handler",
        "_hits",
        "_hook_fns",
        "_hooks_on",
        "_info",
        "_limits",
        "_log_loggers",
        "_log_on",
        "_log_state",
        "_log_torch",
        "_marks",
        "_miss_list",
        "_misses",
        "_module_by_id",
        "_open",
        "_orig_cfs",
        "_orig_chromium",
        "_patches",
        "_pending",
        "_pending_code",
        "_precompile_failures",
        "_prev_guard_hook",
        "_prev_testing_hook",
        "_records",
        "_reset_hits",
        "_resume",
        "_sampling",
        "_sentinel",
        "_shapes",
        "_starting",
        "_tail_act",
        "_threads",
        "_tracing",
        "_user_wanted",
        "_waited",
        "_waited_calls",
        "_waited_s",
        "_window_timed",
        "_wrappers",
    )

    def __init__(self) -> None:
        self._marks: list[_Mark] = []
        self._threads: dict[int, int] = {}
        self._hooks_on = False
        #: the hooks a lookup or a compile needs are in (see _arm)
        self._armed = False
        self._log_on = False
        #: per graph_breaks logger: it, its level and propagation as found,
        #: whether our handler was on it, its level and propagation as left
        self._log_state: list[tuple[Any, int, bool, bool, int, bool]] = []
        #: torch's graph_breaks loggers, once read ([]: none in this torch), and
        #: its logging module (its log_state says whether the user's log is on)
        self._log_loggers: list[logging.Logger] | None = None
        self._log_torch: Any = None
        #: the keys of torch's graph-break duplicate check when the window
        #: opened (None: the user's own log is on, or no such check)
        self._dup_seen: set[Any] | None = None
        #: the user's graph_breaks log was on when the capture went on
        self._user_wanted = False
        self._handler: Any = None
        self._prev_guard_hook: Any = None
        self._prev_testing_hook: Any = None
        self._orig_cfs: Any = None
        self._orig_chromium: Any = None
        self._cw_code: Any = None
        self._ef: Any = None
        self._clock = time.perf_counter
        #: the thread's CPU time, read beside the clock at a timed span's
        #: ends: a span that waited for the CPU counts the time it ran
        #: (see calls.WAITED_S)
        self._cpu = time.thread_time
        self._get_ident = threading.get_ident
        #: Python 3.12+: the start of nested lookups (sys.monitoring)
        self._resume = CallStarts(self._clock, self._cpu)
        self._generation = 0
        self._sentinel: Any = None
        self._reset_hits = 0
        #: torch's attributes replaced while a window is open (see patches)
        self._patches = Patches()
        #: aot_compile's, replaced from the first window until uninstall
        self._aot_patches = Patches()
        #: the parts of a timed call (probe.anatomy), made with the compile_wrapper code
        self._callclock: CallClock | None = None
        #: torch.cuda, once torch is imported: a timed call asks it whether
        #: CUDA is in use (see _timed)
        self._cuda: Any = None
        self._tail_act: _Activation | None = None
        #: a timed call whose compiled code starts as the guard hook returns
        #: (its t_out is read there, the hook's own work before it left out)
        self._starting: _Activation | None = None
        #: torch's profiler over a few calls per function, in its first cells
        self._bounds = LookupBounds(self._clock)
        #: the dispatch count when the last timed call ended (its successor's
        #: start is the clock's next_enter)
        self._enter_calls = -1
        #: per torch.compile callback, its lookups timed since the outermost
        #: window opened (the profiler bounds a function's lookup only past
        #: anatomy.CALIBRATE_AFTER of them in a cell: a short cell stays timed)
        self._window_timed: dict[Any, int] = {}
        #: code objects at their recompile limit, kept across windows (torch
        #: keeps running them eagerly; several compiled modules can share one,
        #: torch's module wrapper): code -> LimitHit
        self._limits: dict[Any, LimitHit] = {}
        #: the code object torch compiles for a called function or module,
        #: learnt when it compiled: id(key) -> (weak key, code)
        self._codes: dict[int, tuple[Any, Any]] = {}
        #: the function registered in torch's recompile-user-context hooks
        self._context_hook: Any = None
        self._aot_seen = 0
        #: id(torch function) -> its wrapper (see _wrapper)
        self._wrappers: dict[int, Any] = {}
        #: the two per-call hooks (see _make_hooks), made once and kept while
        #: torch's dispatcher stays the same: (dispatcher hook, guard hook,
        #: torch's dispatcher); the sampling is each function's own (_Sampling)
        self._hook_fns: tuple[Any, Any, Any] | None = None
        #: torch.compile's callback -> its sampling, for the functions past
        #: their first SAMPLE_FIRST lookups (cleared in place: the hooks hold it)
        self._counted: dict[Any, _Sampling] = {}
        #: torch's dynamo_profiler while a window is open (probe.tracing)
        self._tracing = TracingProfile(self._threads, self._get_ident)
        self._clear_running()

    def _clear_running(self) -> None:
        self._hits = 0
        #: calls that ran cached code, tallied (see _resolve)
        self._cached = 0
        #: timed lookups that waited for the CPU, and how long in all; timed
        #: calls that waited (their parts left out): see calls.WAITED_S
        self._waited = 0
        self._waited_s = 0.0
        self._waited_calls = 0
        self._misses = 0
        self._calls = 0
        self._records: list[Any] = []
        self._info: dict[int, RecordInfo] = {}
        self._breaks: list[GraphBreakEvent] = []
        #: (kind, key, seconds, clock at the end) lookup and eager-call events
        self._events: list[tuple[str, Any, float, float]] = []
        self._act: _Activation | None = None
        #: the call whose outcome is not known yet (see _resolve)
        self._open: _Activation | None = None
        #: torch.compile's callback -> the function it compiles (see _fn_of)
        self._fns: dict[Any, Any] = {}
        self._module_by_id: dict[str, tuple[str, str, int | None]] = {}
        self._tracing.clear()
        #: compile id -> its code's precompiled frames' failed guards (see _testing_hook)
        self._precompile_failures: dict[str, list[str]] = {}
        #: every cache miss, with what torch did after it
        self._miss_list: list[MissEvent] = []
        #: the last miss, until torch compiles, refuses or runs its frame
        self._pending: MissEvent | None = None
        #: the code of the pending miss's frame (torch listed its guards)
        self._pending_code: Any = None
        #: torch.compile calls by their compile_wrapper frame
        self._acts: dict[int, _Activation] = {}
        #: torch.compile's callback -> its lookups' sampling (see SAMPLE_FIRST)
        self._sampling: dict[Any, _Sampling] = {}
        self._counted.clear()
        #: the shapes of the graph the backend is compiling, until its record
        self._shapes: GraphShapes | None = None
        #: the per-call recompile_limit= (torch.compile(fn, recompile_limit=N))
        #: each code object compiled here was compiled under, None for none
        self._code_limits: dict[Any, int | None] = {}

    # -- windows ----------------------------------------------------------
    #: the watch protocol (see probe.watch): a block is never measured
    #: without its recorder, so a failure to start is the block's error
    name = "recorder"
    optional = False

    @property
    def empty(self) -> Window:
        return EMPTY_WINDOW

    def failure_note(self, err: BaseException) -> str:
        return f"not measured: {type(err).__name__}: {err}"

    def start(self, context: Any = None) -> _Mark:
        """Open a measuring window (installing the hooks if none was open).

        ``context``: what torch's compile records made in the window name it
        by (their ``recompile_user_contexts``, where torch has them): a
        string, or a function giving one when torch compiles."""
        if not self._marks:
            # the running state is clear: __init__ and the last stop() cleared it
            self._window_timed.clear()
            self._bounds.new_cell()
            # the graph-break capture goes in with the hooks a lookup or a
            # compile needs (_arm): a window with no dispatch logs no break
            self._install_hooks()
        elif self._sentinel_gone():
            self._register_sentinel()
        ident = self._get_ident()
        self._threads[ident] = self._threads.get(ident, 0) + 1
        # (positional, in the fields' order: keywords cost each cell 0.3 µs)
        mark = _Mark(
            ident,  # thread
            self._hits,  # hits
            self._misses,  # misses
            self._calls,  # calls
            len(self._records),  # records
            len(self._breaks),  # breaks
            len(self._events),  # events
            len(self._miss_list),  # miss_events
            self._reset_hits,  # generation
            None if self._log_capture_available() else _graph_break_counters(),  # counters
            context,  # context
            {s: s.hits for s in self._counted.values() if s.hits} if self._counted else {},
            self._bounds.overhead_s,  # overhead_s
            SOURCE_CHECK.mark(),  # precompile
            self._cached,  # cached
            self._waited,  # waited
            self._waited_s,  # waited_s
            self._waited_calls,  # waited_calls
        )
        self._marks.append(mark)
        return mark

    def stop(self, mark: _Mark, error: BaseException | None = None) -> Window:
        """Close the window opened with ``mark`` and return what it saw
        (``error``: what the block raised, if it did: the last call, where
        its end was not seen, is taken to have raised it)."""
        if mark.closed or mark not in self._marks:
            return EMPTY_WINDOW
        if self._pending is not None:
            self._settle_miss()
        if self._open is not None and mark is self._marks[0]:
            self._resolve(self._open, error)
        if self._act is not None and mark is self._marks[0]:
            self._end_activation(self._act)
        if mark is self._marks[0] and self._bounds.on:
            # a calibration still running when the cell ends: its events so
            # far bound this cell's functions (the clock has stopped already)
            self._profiled(self._bounds.stop(in_cell=False))
        reset_seen = self._sentinel_gone()
        if reset_seen:
            self._limits.clear()
            self._bounds.clear()
            self._reset_hits += 1
            self._register_sentinel()
        window = self._window(mark)
        if reset_seen or self._reset_hits != mark.generation:
            if window is EMPTY_WINDOW:
                window = Window()
            window.reset_seen = True
        mark.closed = True
        # the window's name is read only while it is open; dropping it breaks
        # the cycle measurement -> mark -> measurement.context (the window's
        # objects are freed at once, not by the garbage collector)
        mark.context = None
        self._marks.remove(mark)
        n = self._threads.get(mark.thread, 0) - 1
        if n > 0:
            self._threads[mark.thread] = n
        else:
            self._threads.pop(mark.thread, None)
        if not self._marks:
            # what the hooks filled (a window with no dispatch filled nothing,
            # unless a lazily compiled backward wrote a record)
            touched = self._armed or self._records or self._breaks
            self._uninstall_hooks()
            self._uninstall_log_capture()
            if touched:
                self._clear_running()
            if not held():
                # no front end holds what stays between cells (a measure()
                # block): torch as it was once the block has ended
                self._aot_patches.restore()
                if SOURCE_CHECK.by_window:
                    SOURCE_CHECK.uninstall()
        return window

    def close_all(self) -> None:
        """Close every open window (unloading with a block still open)."""
        for mark in list(self._marks):
            self.stop(mark)

    @property
    def open(self) -> bool:
        return bool(self._marks)

    def forget_lookup_bounds(self) -> None:
        """Forget every function's lookup bound (see probe.anatomy.LookupBounds):
        torch's profiler bounds each again in its next cells that call it
        enough. Only between windows."""
        if self.open_windows:
            raise RuntimeError("the lookup bounds are forgotten only between windows")
        self._bounds.clear()

    def use_clock(self, clock: Callable[[], float], cpu: Callable[[], float] | None = None) -> None:
        """Read time from ``clock`` (seconds, monotonic) instead of
        ``time.perf_counter``, and the thread's CPU time from ``cpu`` instead
        of ``time.thread_time`` (None: ``time.thread_time`` beside
        ``time.perf_counter``, else ``clock``'s last reading, so no span waits:
        see :func:`following`): the
        tests' fake clocks, whose readings they choose, so the estimators'
        arithmetic is checked with exact figures. Only between windows (a
        window's readings come from one clock)."""
        if self.open_windows:
            raise RuntimeError("the recorder's clock changes only between windows")
        clock, cpu = clocks(clock, cpu)
        self._clock = clock
        self._cpu = cpu
        self._resume._clock = clock
        self._resume._cpu = cpu
        self._bounds._clock = clock
        self._hook_fns = None  # their closures hold the clock: made again
        if self._callclock is not None:
            self._callclock.uninstall()
            self._callclock = None  # made again, with this clock, by the next window

    @property
    def open_windows(self) -> int:
        return len(self._marks)

    @property
    def compiles_so_far(self) -> int:
        """Compile records collected since the outermost window opened."""
        return len(self._records)

    @property
    def overhead_so_far(self) -> float:
        """Seconds the recorder's own use of torch's profiler took inside
        cells (see probe.anatomy.LookupBounds): to leave out of a clock read
        around a run."""
        return self._bounds.overhead_s
