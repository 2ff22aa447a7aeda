"""The recorder: torch's hooks while a measuring window is open, and what
each window saw (records, lookups, misses and their outcomes)."""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from .anatomy import CALIBRATE_AFTER, CALIBRATION_MIN_HITS, CallClock, LookupBounds
from .backends import backend_name
from .breaks import (
    GraphBreakEvent,
    _breaks_from_counters,
    _graph_break_counters,
    parse_graph_break,
)
from .device import StreamMarks, stream_mark
from .frames import (
    _MISSING,
    _OWNER_WALK_LIMIT,
    _caller_key,
    _compile_wrapper_code,
    _compiling_code,
    _describe_frame,
    _direct_owner,
    _find_owner,
    _identity_context,
    _module_in_scope,
    _module_location,
    _weak,
    describe_callable,
    user_frames,
)
from .monitoring import CallStarts
from .patches import Patches
from .precompile import SOURCE_CHECK, PrecompileEvent
from .records import (
    CompileRecord,
    FrameBudget,
    LimitHit,
    RecordInfo,
    _aot_dispatch_count,
    _cache_entry_count,
    _config_value,
    _example_calls,
    _limit_from_record,
    is_frame_compile,
    is_module_wrapper,
    mark_unwinding,
    reached_cell,
    read_record,
    recompile_limit_name,
)
from .releases import (
    REFUSAL_GUARDS_SINCE,
    callback_recompile_limit,
    callback_ref,
    inline_wrapped,
    listing_refusals,
    per_call_recompile_limit,
    recompile_context_registry,
)
from .shapes import GraphShapes, _graph_shapes
from .stances import _EAGER_STANCES
from .version import TorchSupportError, _eval_frame, require_torch, torch_str, torch_version

#: torch's function that lists every cache entry's failed guard (convert_frame
#: imports it by name; fail_on_recompile's callback imports it at call time).
_REASONS_FN = "get_and_maybe_log_recompilation_reasons"
#: torch's check of the recompile limit (convert_frame imports it by name).
_EXCEEDS_FN = "exceeds_recompile_limit"


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
    #: the profiler's lookup events of those calls past its warm-up, seconds
    #: (they stand for the calibrated calls once the function is bounded)
    profiler_events: list[float] = field(default_factory=list)
    #: of the timed: the spot checks after the first SAMPLE_FIRST (1 in
    #: SAMPLE_EVERY), which stand for the counted-only lookups, seconds each
    spot_samples: list[float] = field(default_factory=list)
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


#: What torch did after a cache miss.
MISS_COMPILED = "compiled"  # a compile record followed (also a failed one)
MISS_LIMIT = "limit"  # the frame is at its recompile limit: ran eagerly
MISS_EAGER = "eager"  # eager_on_recompile was in force: ran eagerly
MISS_REFUSED = "refused"  # fail_on_recompile was in force: raised
MISS_NONE = "none"  # nothing compiled and no stance explains it

#: How a call of a compiled function ended: exactly one of these per call
#: (see Recorder._resolve), each with why (the WHY_ names).
CALL_CACHED = "cached"  # ran compiled code found in the cache
CALL_COMPILED = "compiled"  # compiled (a frame of it at least), then ran it
CALL_EAGER = "eager"  # ran without compiled code
CALL_REFUSED = "refused"  # torch refused the recompile it needed: raised
CALL_FAILED = "failed"  # raised: a compile error, or its own code
CALL_OUTCOMES = (CALL_CACHED, CALL_COMPILED, CALL_EAGER, CALL_REFUSED, CALL_FAILED)
WHY_FORCE_EAGER = "force_eager"
WHY_FIRST_CALL = "first call"  # eager_then_compile's first call of a function
WHY_EAGER_ON_RECOMPILE = "eager_on_recompile"  # a miss, run eagerly instead
WHY_NOTHING_CACHED = "eager_on_recompile, nothing cached"
WHY_LIMIT = "recompile limit"
WHY_COMPILE_FAILED = "compile failed"  # torch fell back to eager (suppress_errors)
WHY_SKIPPED = "skipped"  # torch compiled nothing: Dynamo skipped the frame
WHY_FAIL_ON_RECOMPILE = "fail_on_recompile"
WHY_UNSAFE = "skip_guard_eval_unsafe"
WHY_COMPILE_ERROR = "compile error"
WHY_OWN_ERROR = "its code raised"
WHY_AOT = "aot_compile"  # an aot-compiled function's own compiled code
WHY_PRECOMPILED = "precompiled"  # Dynamo's precompiled frame (caching_precompile)
WHY_AOT_GUARDS = "aot_compile's guards"  # its guard check failed: it raised
#: torch's module and functions for aot_compile (2.9+)
_AOT_MODULE = "torch._dynamo.aot_compile"
_AOT_FN = "aot_compile_fullgraph"
_AOT_LOAD_FN = "load_compiled_function"
_AOT_GUARD_FAILED = "GuardManager check failed"
#: RecordInfo.aot: the record of an aot_compile, or a further record of one
AOT_COMPILE = "aot_compile"
AOT_PART = "aot_compile part"
#: eager calls with no miss of their own (Window.eager_calls)
_NO_MISS_EAGER = frozenset({WHY_FORCE_EAGER, WHY_FIRST_CALL, WHY_NOTHING_CACHED, WHY_SKIPPED})


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


@dataclass
class _Mark:
    """An open window: running totals when it started."""

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
    closed: bool = False
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


#: Lookups of one torch.compile'd function (since the outermost window
#: opened) timed in situ and attributed one by one; after them 1 in
#: SAMPLE_EVERY is, and the others are only counted, as hits of that
#: function (a miss is always handled in full). The report extrapolates the
#: total from the timed ones and says how many were timed.
SAMPLE_FIRST = 64
SAMPLE_EVERY = 16


class _Sampling:
    """Per torch.compile'd function: its timed lookups, then the activation
    reused (no allocation) by its calls that are only counted."""

    __slots__ = ("act", "calls", "hits", "key", "ref", "timed")

    def __init__(self) -> None:
        self.timed = 0
        self.calls = 0
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
        "calibrating",
        "callback",
        "consumed",
        "counted",
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
        self.stance = stance
        #: what torch will run the frame with (names the backend), held weakly
        #: (see callback_ref)
        self.callback = callback_ref(callback)
        #: torch.compile's own callback for the function: one per compiled object
        self.key = key
        self.target: Any = None
        self.consumed = False
        #: only counted: its hit adds one to ``counted.hits`` (see _Sampling)
        self.sampled = False
        self.counted: _Sampling | None = None
        #: the parts of a timed call (see probe.anatomy): where its wrapper
        #: started, where its lookup ended (a hit?), the records written by then
        self.before: float | None = None
        self.t_lookup: float | None = None
        self.t_out = 0.0
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


class Recorder:
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
        "_prev_guard_hook",
        "_prev_testing_hook",
        "_records",
        "_reset_hits",
        "_resume",
        "_sampling",
        "_sentinel",
        "_shapes",
        "_tail_act",
        "_threads",
        "_user_wanted",
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
        self._get_ident = threading.get_ident
        #: Python 3.12+: the start of nested lookups (sys.monitoring)
        self._resume = CallStarts(self._clock)
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
        #: torch's dispatcher and SAMPLE_EVERY stay the same: (dispatcher
        #: hook, guard hook, torch's dispatcher, SAMPLE_EVERY)
        self._hook_fns: tuple[Any, Any, Any, int] | None = None
        #: torch.compile's callback -> its sampling, for the functions past
        #: their first SAMPLE_FIRST lookups (cleared in place: the hooks hold it)
        self._counted: dict[Any, _Sampling] = {}
        self._clear_running()

    def _clear_running(self) -> None:
        self._hits = 0
        #: calls that ran cached code, tallied (see _resolve)
        self._cached = 0
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

    # -- installation -----------------------------------------------------
    @property
    def installed(self) -> bool:
        """Whether the per-call hooks are in torch now (only while measuring)."""
        return self._hooks_on

    def _install_hooks(self) -> None:
        """What a window needs from its start: torch.compile's dispatcher
        (every compiled call, and every ``torch._dynamo.optimize`` block,
        goes through it first), torch's compile records (a lazily compiled
        backward graph is compiled with no call of the dispatcher) and the
        reset sentinel. The hooks that only a lookup or a Dynamo compile
        reaches go in at the first dispatch (:meth:`_arm`): a cell that calls
        no compiled code pays for nothing more."""
        t = _torch_hooks()
        self._ef = t.ef
        if self._cw_code is None:
            self._cw_code = _compile_wrapper_code(t.ef)
        self._orig_cfs = t.ef._callback_from_stance
        fns = self._hook_fns
        if fns is None or fns[2] is not self._orig_cfs or fns[3] != SAMPLE_EVERY:
            fns = self._hook_fns = (*self._make_hooks(), self._orig_cfs, SAMPLE_EVERY)
        cfs = fns[0]
        self._orig_chromium = getattr(t.utils, "add_compilation_metrics_to_chromium", None)
        self._aot_seen = _aot_dispatch_count()
        # every torch attribute replaced while a window is open, in one table
        patches = self._patches
        patches.replace(t.ef, "_callback_from_stance", cfs)
        patches.replace(t.utils, "add_compilation_metrics_to_chromium", self._on_record)
        if not SOURCE_CHECK.installed:
            config = sys.modules.get("torch._dynamo.config")
            if config is not None and getattr(config, "caching_precompile", False):
                # the user turned torch's precompiled frames on: cells are
                # checked (kept for the process; see probe.precompile)
                SOURCE_CHECK.install()
        if not self._aot_patches:
            self._install_aot()
        self._register_sentinel()
        self._hooks_on = True

    def _install_aot(self) -> None:
        """torch.compile(...).aot_compile(...) and what it makes (torch 2.9+):
        no dispatch reaches them, so they are wrapped from the first window
        on, once, and stay until :meth:`uninstall` (outside a window the
        wrappers only pass the call on: a window's start and end patch
        nothing more)."""
        aot = sys.modules.get(_AOT_MODULE)
        if aot is None:
            return
        patches = self._aot_patches
        patches.apply(aot, _AOT_FN, lambda orig: self._wrapper(orig, self._aot_compile_wrapper))
        cls = getattr(aot, "AOTCompiledFunction", None)
        if cls is not None:
            patches.apply(cls, "__call__", lambda orig: self._wrapper(orig, self._aot_call_wrapper))
        compiler = sys.modules.get("torch.compiler")
        if compiler is not None:
            patches.apply(
                compiler, _AOT_LOAD_FN, lambda orig: self._wrapper(orig, self._aot_load_wrapper)
            )

    def _arm(self) -> None:
        """The hooks a cache lookup or a Dynamo compile needs, put in at the
        first dispatch of a window (torch.compile's dispatcher calls this
        before the lookup it is about to start): the guard-complete hook, the
        guard-building hook, the recompile-reason, recompile-limit and
        backend wrappers, the recompile-context hook and, on Python 3.12+,
        the nested-lookup clock."""
        if self._armed or not self._hooks_on:
            return
        self._armed = True
        t = _torch_hooks()
        guard_hook = self._hook_fns[1] if self._hook_fns else None
        self._prev_guard_hook = t.c_eval_frame.set_guard_complete_hook(guard_hook)
        patches = self._patches
        testing = patches.apply(
            t.guards, "guard_manager_testing_hook_fn", lambda orig: self._testing_hook
        )
        self._prev_testing_hook = testing.original if testing is not None else None
        for mod in (t.convert_frame, t.guards):
            patches.apply(mod, _REASONS_FN, lambda orig: self._wrapper(orig, self._reasons_wrapper))
        patches.apply(
            t.convert_frame, _EXCEEDS_FN, lambda orig: self._wrapper(orig, self._exceeds_wrapper)
        )
        patches.apply(
            t.output_graph.OutputGraph,
            "call_user_compiler",
            lambda orig: self._wrapper(orig, self._user_compiler_wrapper),
        )
        self._resume.start()
        self._register_context_hook()
        if self._callclock is None:
            self._callclock = CallClock(self._clock, self._cw_code)
        self._cuda = sys.modules.get("torch.cuda")

    def _wrapper(self, orig: Any, make: Callable[[Any], Any]) -> Any:
        """``make(orig)``, made once per torch function and kept: a cell
        installs the hooks again without building them again."""
        w = self._wrappers.get(id(orig))
        if w is None or getattr(w, "_stance_magic_wraps", None) is not orig:
            w = self._wrappers[id(orig)] = make(orig)
        return w

    def _uninstall_hooks(self) -> None:
        if not self._hooks_on:
            return
        t = _torch_hooks()
        if self._armed:
            if self._callclock is not None:
                self._callclock.uninstall()
                self._callclock.next_enter = None
            self._tail_act = None
            self._profiled(self._bounds.stop(self._hits + self._misses, in_cell=False))
            guard_hook = self._hook_fns[1] if self._hook_fns else None
            now = t.c_eval_frame.set_guard_complete_hook(self._prev_guard_hook)
            if now is not None and now is not guard_hook:
                # someone hooked in after us: leave theirs (ours passes through)
                t.c_eval_frame.set_guard_complete_hook(now)
            self._resume.stop()
            self._unregister_context_hook()
            self._armed = False
        self._patches.restore()
        self._unregister_sentinel()
        self._hooks_on = False

    def _register_context_hook(self) -> None:
        """Name the measured cell in torch's own records (their
        ``recompile_user_contexts``), where torch has such hooks."""
        registry = recompile_context_registry()
        if registry is None:
            return
        register, get = registry
        if self._context_hook is None:

            def stance_magic_cell() -> str:
                return self._user_context()

            self._context_hook = stance_magic_cell
        if self._context_hook not in (get() or ()):
            register(self._context_hook)

    def _unregister_context_hook(self) -> None:
        """Take our hook out of torch's list (torch has no unregister function);
        the user's hooks stay, in their order. An empty list stores nothing."""
        registry = recompile_context_registry()
        if registry is None or self._context_hook is None:
            return
        hooks = registry[1]()
        while hooks is not None and self._context_hook in hooks:
            hooks.remove(self._context_hook)

    def _user_context(self) -> str:
        """The string torch stores for a compile: the innermost open window's
        name on this thread ("" for a compile on another thread: torch
        stores that too, as it stores whatever a hook returns)."""
        if not self._threads:
            return ""
        ident = self._get_ident()
        if ident not in self._threads:
            return ""
        for mark in reversed(self._marks):
            if mark.thread == ident and mark.context is not None:
                try:
                    text = mark.context() if callable(mark.context) else mark.context
                    return str(text)[:256]
                except Exception:  # a nicety: never break a compile
                    return ""
        return ""

    def _register_sentinel(self) -> None:
        """A no-op compile-start callback: torch.compiler.reset() clears these,
        so its absence at the end of a window says a reset ran."""
        handler = _torch_hooks().callback_handler
        if self._sentinel is None:

            def stance_magic_reset_sentinel(*args: Any) -> None:
                return None

            self._sentinel = stance_magic_reset_sentinel
        if self._sentinel not in handler.start_callbacks:
            handler.register_start_callback(self._sentinel)

    def _unregister_sentinel(self) -> None:
        callbacks = _torch_hooks().callback_handler.start_callbacks
        while self._sentinel in callbacks:
            callbacks.remove(self._sentinel)

    def _sentinel_gone(self) -> bool:
        return self._sentinel not in _torch_hooks().callback_handler.start_callbacks

    def _install_log_capture(self) -> None:
        """Attach the graph-break handler to torch's ``graph_breaks`` loggers
        for the outermost window; :meth:`_uninstall_log_capture` puts each
        logger back as it was when the window closes.

        Where the user did not ask for the artifact (``TORCH_LOGS``,
        ``set_logs``), its records are kept from reaching torch's console
        handler, and the breaks torch's duplicate check notes meanwhile are
        forgotten at the end (torch notes a break only while the log is on:
        the user's own log, turned on later, shows each break's stack as it
        would have unmeasured). A level is set on the logger itself, with its
        own cache cleared: ``Logger.setLevel`` clears every logger's cache
        in the process (about 25 µs with torch's 220 loggers), too dear for
        every cell; these loggers have no children whose cache could hold it.
        """
        if self._log_on:
            return
        loggers = self._log_loggers
        if loggers is None:
            self._log_torch, loggers = _graph_break_loggers()
            self._log_loggers = loggers
        if not loggers:  # pragma: no cover - older torch: counters instead
            return
        if self._handler is None:
            self._handler = _BreakHandler(self)
        # torch rebinds its log_state (set_logs, TORCH_LOGS): read each time
        user_wants = self._user_log_on()
        handler = self._handler
        state = self._log_state = []
        for lg in loggers:
            had = handler in lg.handlers
            level, propagate = lg.level, lg.propagate
            if not had:
                lg.addHandler(handler)
            if not user_wants and lg.propagate:
                lg.propagate = False
            if not lg.isEnabledFor(logging.DEBUG):
                _set_level(lg, logging.DEBUG)
            # as found, and as left: what the block's code changes stays
            state.append((lg, level, propagate, had, lg.level, lg.propagate))
        checker = None if user_wants else _dup_checker()
        self._dup_seen = None if checker is None else set(checker.set)
        self._user_wanted = user_wants
        self._log_on = True

    def _uninstall_log_capture(self) -> None:
        """Put each graph_breaks logger back as it was found, where it is still
        as the capture left it, and forget the breaks torch's duplicate check
        noted meanwhile, unless the user's log is on now. Where the block's
        code turned the user's log on or off (``torch._logging.set_logs``),
        the loggers are left as torch configures them for that setting."""
        if not self._log_on:
            return
        state, self._log_state = self._log_state, []
        seen, self._dup_seen = self._dup_seen, None
        self._log_on = False
        user_on = self._user_log_on()
        configure = None
        if user_on != self._user_wanted:
            configure = getattr(self._log_torch, "configure_artifact_log", None)
        for lg, level, propagate, had, left_level, left_propagate in state:
            if not had:
                lg.removeHandler(self._handler)
            if configure is not None:
                # as torch's set_logs leaves an artifact logger
                _set_level(lg, logging.NOTSET)
                lg.propagate = True
                configure(lg)
                continue
            if lg.level == left_level != level:
                _set_level(lg, level)
            if lg.propagate == left_propagate:
                lg.propagate = propagate
        checker = _dup_checker() if seen is not None and not user_on else None
        if checker is not None:
            for key in set(checker.set) - seen:
                checker.set.pop(key, None)

    def _user_log_on(self) -> bool:
        """Whether the user's ``graph_breaks`` log is on (TORCH_LOGS, set_logs)."""
        state = getattr(self._log_torch, "log_state", None)
        enabled = getattr(state, "is_artifact_enabled", None)
        return bool(enabled("graph_breaks")) if enabled is not None else False

    def uninstall(self) -> None:
        """Close every window and take everything out of torch."""
        self.close_all()
        self._uninstall_hooks()
        self._uninstall_log_capture()
        self._aot_patches.restore()

    # -- hooks (hot path: keep them small) ---------------------------------
    def _make_hooks(self) -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
        """torch's two per-call hooks: ``_callback_from_stance`` (torch calls
        it four times a compiled call, three of them with None) and the
        guard-complete hook (once a lookup).

        Closures over what they read (a closure's cells and a slotted
        recorder's fields are the cheapest reads Python has), made once and
        installed again by each outermost window: the dictionaries they hold
        are the recorder's own, never replaced (:meth:`_clear_running`
        empties them). A counted-only call (see
        :data:`SAMPLE_FIRST`) is handled here in full; any other goes on to
        :meth:`_compiled_call` and :meth:`_lookup`.
        """
        rec = self
        orig = self._orig_cfs
        # torch 2.8's fail_on_recompile names no guard: ask torch's guard check
        dispatch = listing_refusals(orig, self._note_refusal)
        cw = self._cw_code
        threads = self._threads
        get_ident = self._get_ident
        getframe = sys._getframe
        counted = self._counted
        every = SAMPLE_EVERY
        ef = self._ef
        clock = self._clock
        compiled_call = self._compiled_call
        lookup = self._lookup

        def _callback_from_stance(callback: Any) -> Any:
            result = dispatch(callback)
            if callback is None:  # torch._dynamo.disable's wrappers: never a compiled call
                return result
            if not rec._armed:
                rec._arm()  # the window's first dispatch: before its lookup
            f = getframe(1)
            if f.f_code is cw and get_ident() in threads:
                sampling = counted.get(callback)
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
                        act.stance = ef._stance.stance
                        act.consumed = False
                        rec._act = act
                        if sampling.calls % every:
                            act.sampled = True
                        else:
                            act.sampled = False
                            act.handling = sys.exc_info()[1]
                            act.t0 = rec._clock()
                        return result
                compiled_call(callback, result, f, clock())
            return result

        def _guard_hook(cache_hit: bool) -> bool:
            act = rec._act
            if (
                cache_hit
                and act is not None
                and act.sampled
                and not act.consumed
                and rec._pending is None
                and id(getframe(1)) == act.frame_id
            ):
                # a counted-only hit of the called function itself
                act.consumed = True
                rec._hits += 1
                act.counted.hits += 1  # type: ignore[union-attr]
            else:
                lookup(cache_hit, getframe(1))
            prev = rec._prev_guard_hook
            if prev is not None:
                return prev(cache_hit)
            return cache_hit

        _callback_from_stance.__wrapped__ = orig  # type: ignore[attr-defined]
        _callback_from_stance._stance_magic_recorder = self  # type: ignore[attr-defined]
        _guard_hook._stance_magic_recorder = self  # type: ignore[attr-defined]
        return _callback_from_stance, _guard_hook

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
                self._profiled(bounds.stop(self._hits + self._misses))
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
                calibrating = bounds.start(fn, self._hits + self._misses)
        act.calibrating = calibrating
        act.before = before
        act.start_records = len(self._records)
        self._open = act
        act.handling = sys.exc_info()[1]
        if clock is not None:
            # its end, whatever it does: the parts of a call that ran
            # eagerly, and for every call whether it raised (see _resolve);
            # a timed lookup tails it again from the lookup. Before the
            # call's start is read: the clock's first tail measures its own
            # cost once (see CallClock._pass_cost), no part of this call
            self._tail_act = act
            clock.tail(act.frame_id, self._call_done, at_dispatch=True)
        act.t0 = self._clock()

    def _mark_back(self) -> None:
        """The compiled code of the timed call returned: mark the stream."""
        act = self._tail_act
        if act is not None and act.mark is not None:
            act.mark.end()

    def _call_done(self, back: float, end: float, own: float, inner: float) -> None:
        """A timed call ended (see probe.anatomy): its parts, as an event,
        less the clock's own work (``own`` after the compiled code returned,
        ``inner`` on torch's calls it passed on while the code ran)."""
        act, self._tail_act = self._tail_act, None
        self._enter_calls = self._calls  # the next call's start: this one's successor's
        if act is None:
            return
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
        if outcome == CALL_EAGER:
            # ran without compiled code (force_eager, ..., a miss that
            # compiled nothing)
            self._events.append(("eager_parts", (key, act.before), end - act.t0 - own - inner, end))
            return
        if outcome != CALL_CACHED or act.t_lookup is None or not act.hit:
            # it compiled, then ran what it compiled: neither an eager call
            # nor a steady one; the compile is the report's
            return
        compiled = max(back - act.t_out - inner, 0.0)
        parts = (act.before, act.t_lookup - act.t0, compiled, end - back - own)
        self._events.append(("parts", (key, parts), 0.0, end))
        if mark is not None:
            self._events.append(("device", (key, mark), 0.0, end))

    def _profiled(self, measured: list[tuple[Any, float]]) -> None:
        """The lookups torch's profiler measured in a calibration (past its
        warm-up): each function's stand for its profiled calls."""
        if measured:
            now = self._clock()
            self._events.extend(("profiled", (fn, True), seconds, now) for fn, seconds in measured)

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

    def _resolve(self, act: _Activation, raised: BaseException | bool | None) -> str:
        """How the call ``act`` ended, decided once, as one ``call`` event
        (a CALL_ outcome and why): from its lookup (a hit, its own miss and
        what torch did after it), the frame records written since it started
        and, where its end was seen, what it raised (``raised``: the
        exception; False: it returned; None: its end was not seen, what torch
        did decides). A compile error is one whose record torch wrote while
        unwinding that very exception; a frame whose compile failed softly
        and then raised on its own ran eagerly and raised its own error."""
        if self._open is act:
            self._open = None
        miss = act.miss
        if act.hit and not raised and miss is None and len(self._records) == act.start_records:
            # the common case, tallied, not an event: its own lookup hit, it
            # compiled nothing and returned
            self._cached += 1
            act.outcome = CALL_CACHED
            return CALL_CACHED
        if miss is not None and miss is self._pending:
            self._settle_miss()
        info = self._info
        ran_compiled = failed_compile = reached = False
        exc = raised if isinstance(raised, BaseException) else None
        for rec in self._records[act.start_records :]:
            if not is_frame_compile(rec):
                continue
            ri = info.get(id(rec))
            if ri is not None and ri.during_eager_call:
                continue  # a nested frame compiled while this call ran eagerly
            if getattr(rec, "fail_type", None):
                failed_compile = True
                if ri is not None and exc is not None and reached_cell(ri, exc):
                    ri.reached_caller = reached = True
            else:
                ran_compiled = True
        stance = act.stance
        outcome, why = CALL_EAGER, WHY_SKIPPED
        if miss is not None and miss.outcome == MISS_REFUSED:
            outcome, why = CALL_REFUSED, WHY_UNSAFE if miss.unsafe else WHY_FAIL_ON_RECOMPILE
        elif miss is not None and miss.outcome == MISS_LIMIT and not ran_compiled:
            outcome, why = (CALL_FAILED, WHY_OWN_ERROR) if raised else (CALL_EAGER, WHY_LIMIT)
        elif raised:
            outcome, why = CALL_FAILED, WHY_OWN_ERROR
            if reached or (failed_compile and not ran_compiled and exc is None):
                why = WHY_COMPILE_ERROR
            elif not ran_compiled and miss is not None and miss.unsafe:
                outcome, why = CALL_REFUSED, WHY_UNSAFE
                miss.outcome = MISS_REFUSED
            elif (
                not ran_compiled and not act.hit and miss is None and stance == "fail_on_recompile"
            ):
                # fail_on_recompile raises on an empty cache too (no lookup)
                outcome, why = CALL_REFUSED, WHY_FAIL_ON_RECOMPILE
        elif ran_compiled:
            outcome, why = CALL_COMPILED, ""
        elif failed_compile:
            why = WHY_COMPILE_FAILED  # torch ran it eagerly (suppress_errors)
        elif act.hit:
            outcome, why = CALL_CACHED, ""
        elif miss is not None:
            if miss.outcome == MISS_EAGER:
                why = WHY_EAGER_ON_RECOMPILE
            elif miss.unsafe:
                # torch raises a recompile under skip_guard_eval_unsafe
                outcome, why = CALL_REFUSED, WHY_UNSAFE
                miss.outcome = MISS_REFUSED
        elif stance == "force_eager":
            why = WHY_FORCE_EAGER
        elif _has_precompiled(act.target):
            # Dynamo's precompiled frame (caching_precompile), installed at
            # torch.compile: its own guards, no lookup of the cache, no trace
            outcome, why = CALL_CACHED, WHY_PRECOMPILED
        elif stance == "eager_then_compile":
            why = WHY_FIRST_CALL
        elif stance == "eager_on_recompile":
            why = WHY_NOTHING_CACHED
        elif stance == "fail_on_recompile":
            # its end unseen: fail_on_recompile refuses an empty cache's
            # compile of a frame with tensors (the common case) by raising
            outcome, why = CALL_REFUSED, WHY_FAIL_ON_RECOMPILE
        act.outcome = outcome
        fn = act.target if act.target is not None else self._fns.get(act.key)
        self._events.append(("call", (fn, outcome, why, stance), 0.0, 0.0))
        return outcome

    def _lookup(self, cache_hit: bool, caller: Any) -> None:
        """A cache lookup that is not a counted-only hit (``caller``: the
        frame that made it): counted, attributed and, where it has a start,
        timed."""
        t = self._clock()
        if self._threads and self._get_ident() in self._threads:
            if self._pending is not None:
                self._settle_miss()
            if cache_hit:
                self._hits += 1
            else:
                self._misses += 1
                if self._bounds.on:
                    self._bounds.missed(self._hits + self._misses)
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
                    self._events.append(("sampled", (key, cache_hit), 0.0, t))
                else:
                    sampling = self._sampling.get(act.key)
                    if sampling is None:
                        sampling = self._sampling[act.key] = _Sampling()
                    if act.calibrating:
                        # under the profiler: counted, not timed (it slows the call)
                        if cache_hit:
                            self._bounds.note(key, t - act.t0, self._hits + self._misses)
                        self._events.append(("calibrated", (key, cache_hit), 0.0, t))
                    else:
                        self._timed(act, sampling, key, cache_hit, t)
            else:
                # a lookup further down (a resume function after a graph
                # break, a frame compiled on its own): timed from the call
                # that made it where sys.monitoring saw it (3.12+), else only
                # counted; it belongs to the innermost torch.compile call still running
                act = self._running_call(caller)
                key = act.target if act is not None else _caller_key(caller)
                resume = self._resume
                start = resume.start_of(caller) if resume.on else None
                if self._bounds.on:
                    # under torch's profiler: counted, not timed (it slows the lookup)
                    self._events.append(("calibrated", (key, cache_hit), 0.0, t))
                elif start is not None:
                    # a nested lookup, from the call that made it (Python 3.12+)
                    self._events.append(("resumed", (key, cache_hit), t - start, t))
                else:
                    if resume.on:
                        resume.watch(caller.f_code)  # its later calls are timed
                    self._events.append(("untimed", (key, cache_hit), 0.0, t))
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

    def _timed(self, act: _Activation, sampling: _Sampling, key: Any, hit: bool, t: float) -> None:
        """A timed lookup of ``act``'s own function, ended at ``t``; the rest
        of the call (its compiled code, its end) is timed from here."""
        # after the first ones: a spot check, standing for the counted-only
        self._window_timed[act.key] = self._window_timed.get(act.key, 0) + 1
        kind = "spot" if sampling.key is not None else "timed"
        self._events.append((kind, (key, hit), t - act.t0, t))
        clock = self._callclock
        if clock is not None:
            act.t_lookup, act.hit = t, hit
            self._tail_act = act
            # where CUDA is in use, the GPU's stream is marked where the
            # compiled code starts and where it returns (outside its part)
            cuda = self._cuda
            in_use = hit and cuda is not None and cuda.is_initialized()
            act.mark = marks = stream_mark(cuda) if in_use else None
            clock.tail(act.frame_id, self._call_done, self._mark_back if marks else None)
            # the compiled code runs from here (this hook's work left out)
            act.t_out = self._clock()
        sampling.timed += 1
        if sampling.timed >= SAMPLE_FIRST and sampling.key is None:
            # from now on its calls are only counted, but 1 in SAMPLE_EVERY
            sampling.key = key
            sampling.ref = callback_ref(act.key)
            sampling.act = act
            act.counted = sampling
            self._counted[act.key] = sampling

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

    def _settle_miss(self) -> None:
        """The pending miss ended without a compile record: what torch did
        instead follows from the stance in force at that call."""
        miss = self._pending
        self._pending = None
        self._pending_code = None
        if miss is None or miss.outcome != MISS_NONE:
            return
        if miss.stance == "eager_on_recompile":
            miss.outcome = MISS_EAGER
            return
        if miss.stance == "force_eager":
            return
        if miss.stance == "fail_on_recompile" and torch_version() < REFUSAL_GUARDS_SINCE:
            # before 2.10 fail_on_recompile's callback raises without listing
            # the guards (so no reasons call marked it): a miss it did not
            # compile is its refusal
            miss.outcome = MISS_REFUSED
            return
        code = self._code_of(miss.key)
        limit = self._limits.get(code) if code is not None else None
        if limit is not None:
            if _cache_entry_count(code):
                miss.outcome = MISS_LIMIT
                miss.limit = limit
            else:  # torch.compiler.reset() ran since: the limit is gone
                self._limits.pop(code, None)

    def _reasons_wrapper(self, orig: Any) -> Any:
        """torch lists every cache entry's failed guard before it recompiles
        (and before fail_on_recompile refuses): keep the whole list."""

        def get_and_maybe_log_recompilation_reasons(*args: Any, **kwargs: Any) -> Any:
            reasons = orig(*args, **kwargs)
            try:
                frame = args[1] if len(args) > 1 else kwargs.get("frame")
                # only fail_on_recompile's callback asks without logging: it
                # raises right after
                skip = kwargs.get("skip_logging", args[3] if len(args) > 3 else False)
                self._note_reasons(reasons, frame, refused=bool(skip))
            except Exception:  # a nicety: never break torch
                pass
            return reasons

        get_and_maybe_log_recompilation_reasons._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return get_and_maybe_log_recompilation_reasons

    def _note_reasons(self, reasons: Any, frame: Any, refused: bool) -> None:
        """torch listed every cache entry's failed guard for the pending miss
        (``refused``: fail_on_recompile's callback did, and raises next)."""
        miss = self._pending
        if miss is None or self._get_ident() not in self._threads:
            return
        self._pending_code = getattr(frame, "f_code", None)
        miss.failures = [str(r) for r in reasons or ()]
        miss.defined = _identity_context(frame, miss.failures)
        if refused and miss.stance == "fail_on_recompile":
            miss.outcome = MISS_REFUSED
            self._pending = None

    def _note_refusal(self, reasons: list[str], frame: Any) -> None:
        """torch 2.8's fail_on_recompile callback is about to refuse ``frame``:
        the guards torch's guard check says failed (see
        ``releases.listing_refusals``)."""
        self._note_reasons(reasons, frame, refused=True)

    def _aot_compile_wrapper(self, orig: Any) -> Any:
        """torch's ``aot_compile_fullgraph`` (``torch.compile(fn,
        fullgraph=True).aot_compile(...)``): a Dynamo trace and a backend
        compile outside any call, whose records torch writes without a code
        name or compile id; they are named after ``fn`` here."""
        rec = self

        def aot_compile_fullgraph(model: Any, *args: Any, **kwargs: Any) -> Any:
            if not (rec._threads and rec._get_ident() in rec._threads):
                return orig(model, *args, **kwargs)
            start = len(rec._records)
            try:
                return orig(model, *args, **kwargs)
            finally:
                try:
                    rec._note_aot_compile(model, start, sys.exc_info()[1])
                except Exception:  # a nicety: never break torch
                    pass

        aot_compile_fullgraph._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return aot_compile_fullgraph

    def _note_aot_compile(self, model: Any, start: int, error: BaseException | None) -> None:
        """The records torch wrote for one aot_compile: the first stands for
        the whole (named after ``model``, its time torch's span over them
        all), the rest are part of it."""
        records = self._records[start:]
        if not records:
            return
        frame = _describe_aot(model)
        starts = [getattr(r, "start_time_us", None) for r in records]
        ends = [getattr(r, "end_time_us", None) for r in records]
        span = None
        if all(starts) and all(ends):
            span = (max(ends) - min(starts)) / 1e6  # type: ignore[type-var, operator]
        head = self._info.setdefault(id(records[0]), RecordInfo())
        head.frame = frame
        head.aot = AOT_COMPILE
        head.aot_seconds = span
        head.stance = self._ef._stance.stance if self._ef is not None else None
        head.aot_graph = any(
            getattr(r, "backend_compile_time_s", None) is not None for r in records
        )
        failed = next(
            (getattr(r, "fail_type", None) for r in records if getattr(r, "fail_type", None)), None
        )
        if error is not None or failed:
            head.aot_failed = failed or type(error).__name__
            if error is not None:
                # aot_compile raised it to its caller: nothing ran eagerly
                head.exception = type(error).__name__
                head.reached_caller = True
                mark_unwinding(head, error)
        for r in records[1:]:
            self._info.setdefault(id(r), RecordInfo()).aot = AOT_PART

    def _aot_call_wrapper(self, orig: Any) -> Any:
        """A call of an aot-compiled (or loaded) function: it runs its
        compiled code after its own guard check, never Dynamo's lookup."""
        rec = self

        def __call__(fn: Any, *args: Any, **kwargs: Any) -> Any:
            if not (rec._threads and rec._get_ident() in rec._threads):
                return orig(fn, *args, **kwargs)
            rec._calls += 1
            if rec._open is not None:
                rec._resolve(rec._open, None)
            outcome, why = CALL_CACHED, WHY_AOT
            try:
                return orig(fn, *args, **kwargs)
            except BaseException as e:
                refused = isinstance(e, RuntimeError) and _AOT_GUARD_FAILED in str(e)
                outcome, why = (
                    (CALL_REFUSED, WHY_AOT_GUARDS) if refused else (CALL_FAILED, WHY_OWN_ERROR)
                )
                raise
            finally:
                stance = rec._ef._stance.stance if rec._ef is not None else ""
                rec._events.append(("call", (None, outcome, why, stance), 0.0, 0.0))

        __call__._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return __call__

    def _aot_load_wrapper(self, orig: Any) -> Any:
        """``torch.compiler.load_compiled_function``: a compiled function
        read back with no tracing and no record; timed here."""
        rec = self

        def load_compiled_function(*args: Any, **kwargs: Any) -> Any:
            if not (rec._threads and rec._get_ident() in rec._threads):
                return orig(*args, **kwargs)
            t0 = rec._clock()
            result = error = None
            try:
                result = orig(*args, **kwargs)
                return result
            except BaseException as e:
                error = e
                raise
            finally:
                t = rec._clock()
                try:
                    frame = _describe_aot(result) if result is not None else ("?", "", None)
                    err = f"{type(error).__name__}: {error}" if error is not None else None
                    rec._events.append(("aot_load", (frame, err), t - t0, t))
                except Exception:  # a nicety: never break torch
                    pass

        load_compiled_function._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return load_compiled_function

    def _user_compiler_wrapper(self, orig: Any) -> Any:
        """Dynamo hands each graph to the backend here: read its inputs'
        sizes and the shape environment's symbols before it does."""
        recorder = self

        def call_user_compiler(og: Any, gm: Any, example_inputs: Any) -> Any:
            if recorder._threads and recorder._get_ident() in recorder._threads:
                try:
                    act = recorder._act
                    stance = act.stance if act is not None else ""
                    recorder._shapes = _graph_shapes(og, gm, stance)
                except Exception:  # a nicety: never break a compile
                    recorder._shapes = None
            return orig(og, gm, example_inputs)

        call_user_compiler._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return call_user_compiler

    def _exceeds_wrapper(self, orig: Any) -> Any:
        def exceeds_recompile_limit(*args: Any, **kwargs: Any) -> Any:
            result = orig(*args, **kwargs)
            if not self._threads or self._get_ident() not in self._threads:
                return result
            try:
                # torch checks every compile here, inside its patch of
                # config.recompile_limit for a torch.compile(recompile_limit=N)
                caller = sys._getframe(1)
                per_call, n = per_call_recompile_limit(caller)
                code = _compiling_code(caller)
                if isinstance(code, types.CodeType):
                    self._code_limits[code] = n if per_call else None
                miss = self._pending
                exceeded, config_name = result
                if miss is not None and exceeded:
                    name = str(config_name)
                    miss.limit = LimitHit(
                        frame=_describe_frame(self._pending_code, miss.key),
                        config=name,
                        limit=_config_value(config_name),
                        per_call=per_call and name == recompile_limit_name(),
                    )
            except Exception:  # a nicety: never break a compile
                pass
            return result

        exceeds_recompile_limit._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return exceeds_recompile_limit

    def _on_record(self, rec: Any) -> None:
        orig = self._orig_chromium
        if orig is not None:
            orig(rec)
        if not self._threads or self._get_ident() not in self._threads:
            return
        self._records.append(rec)
        info = RecordInfo()
        exc = sys.exc_info()[1]
        if exc is not None:
            info.exception = type(exc).__name__
            mark_unwinding(info, exc)
        aot = _aot_dispatch_count()
        # torch clears its timings on reset: a drop still means it ran if any
        info.aot_autograd = aot > self._aot_seen or (0 < aot < self._aot_seen)
        self._aot_seen = aot
        cid = str(getattr(rec, "compile_id", ""))
        info.module = self._module_by_id.pop(cid, None)
        miss = self._pending
        if is_frame_compile(rec):
            info.code = self._pending_code or _compiling_code(sys._getframe(1))
            info.shapes, self._shapes = self._shapes, None
            try:
                info.user_stack = user_frames(sys._getframe(1))
            except Exception:  # a nicety: never break a compile
                info.user_stack = []
        if miss is not None and self._pending_code is not None and is_frame_compile(rec):
            # the compile (or the refused attempt) that the last miss led to
            code = self._pending_code
            self._learn_code(miss.key, code)
            self._pending = None
            self._pending_code = None
            miss.compile_id = cid
            info.guard_failures = list(miss.failures)
            limit = miss.limit or _limit_from_record(rec, code or miss.key)
            if limit is not None:
                limit.compile_id = cid
                miss.limit = info.limit = limit
                miss.outcome = MISS_LIMIT
                if isinstance(code, types.CodeType):
                    self._limits[code] = limit
            else:
                miss.outcome = MISS_COMPILED
            if getattr(rec, "co_name", None) is None:
                info.frame = _describe_frame(code, miss.key)
        elif getattr(rec, "co_name", None) is None and is_frame_compile(rec):
            limit = _limit_from_record(rec, None)
            info.limit = limit
        act = self._act
        if is_frame_compile(rec):
            info.example_calls = _example_calls(rec)
            info.stance = self._ef._stance.stance if self._ef is not None else None
            if act is not None:
                if info.module is None and is_module_wrapper(rec):
                    info.module = inline_wrapped(sys._getframe(1), act.frame_id)
                info.backend = backend_name(act.callback())
                owner = None if act.consumed else _direct_owner(sys._getframe(1), act.frame_id)
                if owner is not None:
                    # a cold compile of the called frame itself (no lookup
                    # before it: the cache was empty)
                    act.consumed = True
                    if self._open is not act:  # a counted-only call, reused
                        act.hit, act.miss, act.outcome = False, None, None
                        act.start_records = len(self._records) - 1  # this record's
                        self._open = act
                    if act.target is None:
                        act.target = self._fn_of(act.key, owner)
                    self._learn_code(act.target, info.code)
                elif not act.consumed and act.stance in _EAGER_STANCES:
                    info.during_eager_call = True
        self._info[id(rec)] = info

    def _learn_code(self, key: Any, code: Any) -> None:
        if key is not None and isinstance(code, types.CodeType):
            self._codes[id(key)] = (_weak(key), code)

    def _code_of(self, key: Any) -> Any:
        """The code object torch compiles for what a lookup was attributed to."""
        if isinstance(key, types.CodeType):
            return key
        entry = self._codes.get(id(key))
        if entry is not None and entry[0]() is key:
            return entry[1]
        code = getattr(key, "__code__", None)
        return code if isinstance(code, types.CodeType) else None

    def _budgets(self, window: Window, keys: list[Any]) -> list[FrameBudget]:
        codes: dict[Any, Any] = {}
        for rec in window.records:
            info = window.info.get(id(rec))
            code = getattr(info, "code", None)
            if isinstance(code, types.CodeType):
                codes.setdefault(code, None)
        for key in keys:
            code = self._code_of(key)
            if code is not None and codes.get(code) is None:
                codes[code] = key
        if not codes:
            return []
        name = recompile_limit_name()
        limit = _config_value(name)
        # a frame only looked up here: the limit of the torch.compile call
        # that looked it up (torch keeps it on the call's callback)
        call_limits: dict[int, int] = {}
        for callback, fn in self._fns.items():
            own = callback_recompile_limit(callback)
            if own is not None and fn is not None:
                call_limits[id(fn)] = own
        out = []
        for code, key in codes.items():
            n = _cache_entry_count(code, unknown=None)
            if n:
                if code in self._code_limits:
                    own = self._code_limits[code]
                else:
                    own = call_limits.get(id(key)) if key is not None else None
                frame = _describe_frame(code, key)
                if own is not None:
                    out.append(FrameBudget(frame, n, own, name, per_call=True))
                else:
                    out.append(FrameBudget(frame, n, limit, name))
        return out

    def _testing_hook(self, guard_manager: Any, local_scope: Any, *rest: Any) -> None:
        # torch 2.8 passes (guard_manager, local_scope), 2.9+ add the
        # builder (see TESTING_HOOK_BUILDER_SINCE): take either, pass on as given
        prev = self._prev_testing_hook
        if prev is not None:
            prev(guard_manager, local_scope, *rest)
        if not self._threads or self._get_ident() not in self._threads:
            return
        try:
            from torch._guards import CompileContext

            builder = rest[0] if rest else None
            mod = _module_in_scope(local_scope, getattr(builder, "f_code", None))
            if mod is not None:
                cid = str(CompileContext.current_compile_id())
                self._module_by_id[cid] = _module_location(mod)
        except Exception:  # naming is a nicety: never break a compile
            return

    def _on_graph_break(self, record: Any) -> None:
        if not self._threads or self._get_ident() not in self._threads:
            return
        event = parse_graph_break(record)
        if event is not None:
            event.time_s = getattr(record, "created", None)
            self._breaks.append(event)

    # -- windows ----------------------------------------------------------
    def start(self, context: Any = None) -> _Mark:
        """Open a measuring window (installing the hooks if none was open).

        ``context``: what torch's compile records made in the window name it
        by (their ``recompile_user_contexts``, where torch has them): a
        string, or a function giving one when torch compiles."""
        if not self._marks:
            # the running state is clear: __init__ and the last stop() cleared it
            self._window_timed.clear()
            self._bounds.new_cell()
            self._install_log_capture()
            try:
                self._install_hooks()
            except BaseException:
                self._uninstall_log_capture()
                raise
        elif self._sentinel_gone():
            self._register_sentinel()
        ident = self._get_ident()
        self._threads[ident] = self._threads.get(ident, 0) + 1
        mark = _Mark(
            thread=ident,
            hits=self._hits,
            misses=self._misses,
            calls=self._calls,
            records=len(self._records),
            breaks=len(self._breaks),
            events=len(self._events),
            miss_events=len(self._miss_list),
            generation=self._reset_hits,
            counters=None if self._log_on else _graph_break_counters(),
            context=context,
            sampled={s: s.hits for s in self._counted.values() if s.hits},
            overhead_s=self._bounds.overhead_s,
            precompile=SOURCE_CHECK.mark(),
            cached=self._cached,
        )
        self._marks.append(mark)
        return mark

    def stop(self, mark: _Mark, error: BaseException | None = None) -> Window:
        """Close the window opened with ``mark`` and return what it saw
        (``error``: what the block raised, if it did: the last call, where
        its end was not seen, is taken to have raised it)."""
        if mark.closed or mark not in self._marks:
            return Window()
        if self._pending is not None:
            self._settle_miss()
        if self._open is not None and mark is self._marks[0]:
            self._resolve(self._open, error)
        if self._act is not None and mark is self._marks[0]:
            self._end_activation(self._act)
        if mark is self._marks[0] and self._bounds.on:
            # a calibration still running when the cell ends: its events so
            # far bound this cell's functions (the clock has stopped already)
            self._profiled(self._bounds.stop(self._hits + self._misses, in_cell=False))
        reset_seen = self._sentinel_gone()
        if reset_seen:
            self._limits.clear()
            self._bounds.clear()
            self._reset_hits += 1
            self._register_sentinel()
        window = self._window(mark)
        window.reset_seen = reset_seen or self._reset_hits != mark.generation
        mark.closed = True
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
        return window

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
            return Window()
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
        )
        if mark.counters is not None:  # no log artifact in this torch
            window.break_source = "counters"
            window.graph_breaks = _breaks_from_counters(mark.counters)
        targets: dict[Any, Target] = {}
        keys: list[Any] = []
        for kind, key, seconds, at in self._events[mark.events :]:
            if kind == "sampled" or kind == "calibrated":
                obj, hit = key
                if obj not in keys:
                    keys.append(obj)
                t = _target(targets, obj)
                t.sampled += 1
                if kind == "calibrated":
                    t.calibrated += 1
                if not hit:
                    t.misses += 1
                continue
            if kind == "aot_load":
                frame, err = key
                window.aot_loads.append(AotLoad(*frame, seconds=seconds, error=err))
                continue
            if kind == "call":
                fn, outcome, why, stance = key
                k = (outcome, why)
                window.calls[k] = window.calls.get(k, 0) + 1
                window.call_stances.add(stance)
                if outcome == CALL_EAGER and why in _NO_MISS_EAGER:
                    window.eager_calls[stance] = window.eager_calls.get(stance, 0) + 1
                if fn is not None and outcome == CALL_EAGER:
                    _target(targets, fn).eager_calls += 1
                continue
            if kind == "parts":
                obj, parts = key
                _target(targets, obj).parts.append(parts)
                continue
            if kind == "device":
                obj, marks = key
                seconds = marks.seconds()
                if seconds is not None:
                    _target(targets, obj).device.append(seconds)
                continue
            if kind == "eager_parts":
                obj, before = key
                _target(targets, obj).eager_parts.append((before, seconds))
                continue
            if kind == "profiled":
                obj, _hit = key
                _target(targets, obj).profiler_events.append(seconds)
                continue
            obj, hit = key
            if obj not in keys:
                keys.append(obj)
            t = _target(targets, obj)
            if kind == "timed" or kind == "resumed" or kind == "spot":
                t.timed += 1
                t.seconds += seconds
                t.samples.append(seconds)
                if kind == "resumed":
                    t.resumed += 1
                elif kind == "spot":
                    t.spot_samples.append(seconds)
            else:
                t.untimed += 1
            window.lookup_times.append((at, seconds, bool(hit), kind != "untimed", t.name))
            if not hit:
                t.misses += 1
        cached = (CALL_CACHED, "")
        n = self._cached - mark.cached  # calls resolved cached without an event
        if n:
            window.calls[cached] = window.calls.get(cached, 0) + n
        for sampling in self._counted.values():
            # counted-only hits: a count per function, not an event each
            n = sampling.hits - mark.sampled.get(sampling, 0)
            if n:
                if sampling.key not in keys:
                    keys.append(sampling.key)
                _target(targets, sampling.key).sampled += n
                window.calls[cached] = window.calls.get(cached, 0) + n
        for obj in keys:
            self._lookup_bound(obj, _target(targets, obj))
        window.targets = list(targets.values())
        window.resume_timing_off = None if self._resume.on else self._resume.reason
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

    def close_all(self) -> None:
        """Close every open window (unloading with a block still open)."""
        for mark in list(self._marks):
            self.stop(mark)

    @property
    def open(self) -> bool:
        return bool(self._marks)

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Read time from ``clock`` (seconds, monotonic) instead of
        ``time.perf_counter``: the tests' fake clock, whose readings they
        choose, so the estimators' arithmetic is checked with exact figures.
        Only between windows (a window's readings come from one clock)."""
        if self.open_windows:
            raise RuntimeError("the recorder's clock changes only between windows")
        self._clock = clock
        self._resume._clock = clock
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


@dataclass(frozen=True)
class _TorchHooks:
    """The torch modules whose hooks the recorder sets (imported once)."""

    ef: Any
    c_eval_frame: Any
    guards: Any
    utils: Any
    callback_handler: Any
    convert_frame: Any
    output_graph: Any


@functools.cache
def _torch_hooks() -> _TorchHooks:
    require_torch()
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.guards as guards
    import torch._dynamo.output_graph as output_graph
    from torch._C._dynamo import eval_frame as c_eval_frame
    from torch._dynamo import utils
    from torch._dynamo.callback import callback_handler

    if not hasattr(c_eval_frame, "set_guard_complete_hook"):
        raise TorchSupportError(
            f"torch {torch_str()} has no set_guard_complete_hook; cache hits cannot be counted"
        )
    return _TorchHooks(
        _eval_frame(), c_eval_frame, guards, utils, callback_handler, convert_frame, output_graph
    )


def _target(targets: dict[Any, Target], obj: Any) -> Target:
    key = id(obj) if not isinstance(obj, types.CodeType) else obj
    t = targets.get(key)
    if t is None:
        name, filename, line = describe_callable(obj)
        t = targets[key] = Target(name=name, filename=filename, line=line)
    return t


def _graph_break_loggers() -> tuple[Any, list[logging.Logger]]:
    """torch's logging module (``torch._logging._internal``) and each of its
    ``graph_breaks`` artifact loggers; (None, []) where torch has none."""
    try:
        from torch._logging import _internal
    except ImportError:  # pragma: no cover - older torch: counters instead
        return None, []
    qnames = _internal.log_registry.get_artifact_log_qnames()
    return _internal, [logging.getLogger(q) for q in qnames if q.endswith("__graph_breaks")]


def _set_level(lg: logging.Logger, level: int) -> None:
    """``lg.setLevel(level)`` clearing only ``lg``'s own cache (see
    Recorder._install_log_capture), where the logging module has one."""
    cache = getattr(lg, "_cache", None)
    lock = getattr(logging, "_lock", None)
    if not isinstance(cache, dict) or lock is None:  # pragma: no cover - not CPython's
        lg.setLevel(level)
        return
    with lock:  # as setLevel: no isEnabledFor fills the cache in between
        lg.level = level
        cache.clear()


def _dup_checker() -> Any:
    """torch's graph-break duplicate check (``DuplicateWarningChecker``),
    or None where a release has none of that shape."""
    utils = sys.modules.get("torch._dynamo.utils")
    checker = getattr(utils, "graph_break_dup_warning_checker", None)
    return checker if isinstance(getattr(checker, "set", None), dict) else None


class _BreakHandler(logging.Handler):
    """Hands the records of torch's graph_breaks log artifact to the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__(logging.DEBUG)
        self._recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self._recorder._on_graph_break(record)


def _describe_aot(obj: Any) -> tuple[str, str, int | None]:
    """(name, file, first line) of what aot_compile compiled: a function, a
    module's method, or an aot-compiled function (its original code)."""
    artifacts = getattr(obj, "_artifacts", None)
    code = getattr(artifacts, "original_code", None) if artifacts is not None else None
    if isinstance(code, types.CodeType):
        return getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno
    return describe_callable(obj)


def _has_precompiled(fn: Any) -> bool:
    """Whether torch installed precompiled frames (caching_precompile) for
    ``fn``'s code: a call that neither looked up nor compiled ran one."""
    try:
        from torch._C._dynamo.eval_frame import _debug_get_precompile_entries
    except ImportError:  # a torch without them
        return False
    # a compiled module is called through its _call_impl; torch keys its
    # precompiled frame on its forward (torch.compile's fn.forward)
    owner = getattr(fn, "__self__", None)
    for obj in (fn, getattr(owner, "forward", None)):
        code = getattr(obj, "__code__", None)
        if code is None:
            continue
        try:
            if _debug_get_precompile_entries(code):
                return True
        except Exception:
            continue
    return False
