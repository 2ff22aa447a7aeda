"""CUDA graphs in a measured window: what torch recorded, replayed, re-recorded and skipped.

``torch.compile(mode="reduce-overhead")`` (Inductor with
``triton.cudagraphs``) and the ``cudagraphs`` backend run compiled graphs as
CUDA graphs through torch's CUDA-graph trees
(``torch/_inductor/cudagraph_trees.py``), and skip them for a graph with a
reason. torch says what it skips in three ways, all read here, in every
release stance_magic supports (2.8 to 2.13 checked in their source):

* ``log_cudagraph_skip_and_bump_counter(msg)`` (``cudagraph_utils``, imported
  by name into ``output_code``, ``compile_fx``, ``cudagraph_trees`` and the
  ``cudagraphs`` backend) logs ``skipping cudagraphs due to ...`` (the
  ``perf_hints`` artifact in 2.8-2.10, ``cudagraphs`` from 2.13), bumps
  ``counters["inductor"]["cudagraph_skips"]`` and, inside a compile, writes
  the reason into the compile's record (``cudagraph_skip_reason``);
* a graph with no CUDA device (CPU tensors) is skipped silently: torch bumps
  the counter in ``CompiledFxGraph.__init__`` (a fresh compile) or
  ``post_compile`` (a graph loaded from the FX graph cache) and keeps the
  reason on the graph (``disabled_cudagraphs_reason``) without logging it;
* the counter itself, bumped once per skip.

While a window is open the three names above are wrapped (the wrappers note
the skip and call torch's own), and so are ``CUDAGraphTreeManager``'s
``record_function`` (a graph recorded), ``execute_node`` (a graph replayed),
``run_eager`` (a warm-up run) and ``check_warn_on_unable_to_start_executing``
(torch's warning that a function cannot leave its warm-up for replays because
outputs of an earlier call still wait for their backward: it adds the
function to ``warned_functions``, once per function and manager), once torch
has imported the trees. The other thing torch says of CUDA graphs at run time
is an error, not a warning: reading an output of a warm-up run that the
recording after it overwrote raises torch's ``format_dealloc_msg`` text
(:func:`overwritten_output` reads it from the cell's exception; an output
of one replay read after the next raises nothing: it holds the next
replay's values).
Nothing is installed between windows. In a process that has run CUDA graphs
(torch imported its trees) everything is wrapped when a window opens; in any
other, at the window's first compile (Dynamo's compile-start and -end
callbacks, registered for the window only): skips happen while torch
compiles, and wrapping a dozen names costs a cell about 14 µs, which a cell
that compiles nothing then does not pay (``benchmarks/bench_sync.py``). A
cell that builds ``torch.compile(mode="reduce-overhead")`` and calls it is
covered from its first compile. A skip that no wrapper saw (Dynamo was not
imported when the window opened) is still counted, from the counter.

Nothing here imports torch at import time, nor a torch module that is not
imported yet.
"""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .patches import Patches
from .watch import default_note, process_watch

__all__ = [
    "CudagraphPending",
    "CudagraphRecording",
    "CudagraphSkip",
    "CudagraphWatch",
    "CudagraphWindow",
    "overwritten_output",
    "watch",
]

#: The modules that hold ``log_cudagraph_skip_and_bump_counter`` by name.
LOG_MODULES = (
    "torch._inductor.cudagraph_utils",
    "torch._inductor.output_code",
    "torch._inductor.compile_fx",
    "torch._inductor.cudagraph_trees",
    "torch._dynamo.backends.cudagraphs",
)
LOG_FN = "log_cudagraph_skip_and_bump_counter"
OUTPUT_CODE = "torch._inductor.output_code"
TREES = "torch._inductor.cudagraph_trees"
#: the tree manager's method that warns of a pending backward
PENDING_CHECK = "check_warn_on_unable_to_start_executing"
#: how torch starts each reason (once, or twice where it wraps its own text)
SKIP_PREFIX = "skipping cudagraphs due to "
#: what torch's error for an overwritten output says in every release
#: (``CUDAGraphTreeManager.format_dealloc_msg``; 2.13 adds a variant for a
#: gradient, "accessing gradient tensor output of CUDAGraphs that ...")
OVERWRITTEN = "output of CUDAGraphs that has been overwritten by a subsequent run"
_STACK = re.compile(r"Stack trace: (?P<stack>.*?)\. (?:To prevent|This can happen)", re.S)

_USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?')


@dataclass(frozen=True)
class CudagraphSkip:
    """One graph torch ran without CUDA graphs, with torch's reason."""

    #: torch's text, ``skipping cudagraphs due to ...`` (its first line and
    #: the user's line it points at; "" when torch gave none)
    reason: str
    #: the compile it belongs to (``0/0``; "" when it came at run time)
    compile_id: str = ""
    #: the user's line torch found the cause at ("Found from"), when it did
    filename: str = ""
    line: int | None = None
    function: str = ""
    source: str = ""
    #: the graph's devices, where torch skipped it without logging (``("cpu",)``)
    devices: tuple[str, ...] = ()
    #: torch logged it (False: only counted, the reason read from the graph)
    logged: bool = True


@dataclass(frozen=True)
class CudagraphRecording:
    """One CUDA graph torch recorded (captured) in the window."""

    compile_id: str
    #: torch's name for the recorded function
    function: str = ""
    #: a graph of this function was recorded at the same place before (an
    #: earlier call or cell), and torch could not replay it: a re-record
    rerecord: bool = False
    #: why the recorded graph could not be replayed, as torch words its
    #: invariant check (``static input data pointer changed``), when known
    why: str = ""
    #: the integer inputs the graph was recorded for (the sizes of a graph
    #: with dynamic shapes: torch records one graph per distinct set)
    sizes: tuple[int, ...] = ()
    #: ``FORWARD``, ``BACKWARD`` or ``INFERENCE``, as torch's trees name it
    mode: str = ""
    #: graphs torch holds already for the same compile and mode: one per other
    #: set of sizes (recorded in this window or before it)
    others: int = 0


@dataclass(frozen=True)
class CudagraphPending:
    """A function torch warned could not replay its CUDA graphs because
    outputs of an earlier call still wait for their backward (it keeps
    running the function's warm-up, eagerly, instead)."""

    compile_id: str
    #: torch's name for the function
    function: str = ""


@dataclass
class CudagraphWindow:
    """What one window saw of CUDA graphs."""

    skips: list[CudagraphSkip] = field(default_factory=list)
    #: skips torch counted that no wrapper saw (no reason known)
    unexplained_skips: int = 0
    recordings: list[CudagraphRecording] = field(default_factory=list)
    #: compile id -> graphs replayed / warm-up runs
    replays: dict[str, int] = field(default_factory=dict)
    warmups: dict[str, int] = field(default_factory=dict)
    #: functions torch warned about in the window (pending backward)
    pending_backward: list[CudagraphPending] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.skips
            or self.unexplained_skips
            or self.recordings
            or self.replays
            or self.warmups
            or self.pending_backward
        )


def clean_reason(msg: str) -> str:
    """torch's reason with its prefix once (2.13 writes it twice where it
    wraps a lowering reason that has it already) and without trailing space."""
    text = str(msg).strip()
    double = SKIP_PREFIX + SKIP_PREFIX
    while text.startswith(double):
        text = text[len(SKIP_PREFIX) :]
    return text


def user_line(reason: str) -> tuple[str, int | None, str, str]:
    """(file, line, function, source) of the last frame torch's reason points
    at (``Found from : File "...", line N, in f`` then the line itself)."""
    found = list(_USER_FRAME.finditer(reason))
    if not found:
        return "", None, "", ""
    m = found[-1]
    rest = reason[m.end() :].splitlines()
    source = next((ln.strip() for ln in rest[1:] if ln.strip()), "")
    return m.group("file"), int(m.group("line")), m.group("fn") or "", source


def overwritten_output(error: BaseException | None) -> tuple[str, int | None, str] | None:
    """Whether ``error`` is torch's error for reading an output of an earlier
    CUDA-graph run that a later run overwrote: None if not, else the
    (file, line, source) where torch says the output was made ("", None, ""
    when its text has no frame: ``[Could not find stack trace]``)."""
    if error is None:
        return None
    text = str(error)
    if OVERWRITTEN not in text:
        return None
    m = _STACK.search(text)
    filename, line, _fn, source = user_line(m.group("stack") if m else text)
    return filename, line, source


def _current_compile_id() -> str:
    guards = sys.modules.get("torch._guards")
    if guards is None:
        return ""
    try:
        cid = guards.CompileContext.current_compile_id()
    except Exception:  # pragma: no cover - torch without compile ids
        return ""
    return str(cid) if cid is not None else ""


def _running_compile_id() -> str:
    """The compile of the function a CUDA-graph tree manager is running: torch
    sets ``manager.compile_id`` at the start of each ``run``, and a skip it
    logs at run time (an input the graph mutates) happens inside one ("" when
    no manager, or managers of several devices disagree)."""
    trees = sys.modules.get(TREES)
    get_obj = getattr(trees, "get_obj", None)
    if get_obj is None:
        return ""
    try:
        containers = get_obj(trees.local, "tree_manager_containers")
        managers = [getattr(c, "tree_manager", None) for c in list(containers.values())]
    except Exception:  # pragma: no cover - a torch without the thread-local trees
        return ""
    ids = {str(m.compile_id) for m in managers if getattr(m, "compile_id", None) is not None}
    return ids.pop() if len(ids) == 1 else ""


def _skip_counter() -> int:
    """torch's ``counters["inductor"]["cudagraph_skips"]`` (0 before Dynamo
    is imported: the counters start there)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0
    try:
        return int(utils.counters["inductor"].get("cudagraph_skips", 0))
    except Exception:  # pragma: no cover - torch moved its counters
        return 0


class _Noted(NamedTuple):
    """What the watch held when a window started, where it held anything
    (windows overlap: one opened inside another starts past the outer's)."""

    skips: int
    recordings: int
    replays: dict[str, int]
    warmups: dict[str, int]
    pending: int


#: A window's mark: torch's skip counter at its start, and what the watch
#: held then (None: nothing; a plain tuple, every measured cell makes one)
_Mark = tuple[int, _Noted | None]
_NOTHING = _Noted(0, 0, {}, {}, 0)


class CudagraphWatch:
    """Wraps torch's CUDA-graph functions while at least one window is open."""

    #: the watch protocol (see probe.watch)
    name = "cudagraphs"
    optional = True
    empty = None

    def __init__(self) -> None:
        self._open = 0
        self._lock = threading.Lock()
        self._patches = Patches()
        self._patched: set[str] = set()
        self._skips: list[CudagraphSkip] = []
        self._recordings: list[CudagraphRecording] = []
        self._replays: dict[str, int] = {}
        self._warmups: dict[str, int] = {}
        self._pending: list[CudagraphPending] = []
        #: how many things the five above noted since they were last cleared
        #: (0: a window's start need not copy them, its stop need not look)
        self._noted = 0
        #: per thread: skips logged (inside a graph's __init__/post_compile
        #: they are not counted again) and the last failed invariant check
        self._local = threading.local()
        #: torch's callback handlers ours is registered with (this window)
        self._callbacks: list[Any] = []

        def stance_magic_cudagraphs(*args: Any) -> None:
            self._on_compile(*args)

        self._callback = stance_magic_cudagraphs

    @property
    def installed(self) -> bool:
        """Whether anything of ours is in torch now."""
        return bool(len(self._patches) or self._callbacks)

    # ----------------------------------------------------------------- windows

    def failure_note(self, err: BaseException) -> str:
        return default_note("CUDA graphs", err)

    def uninstall(self) -> None:
        """Take everything of ours out of torch (windows still open see
        nothing more)."""
        with self._lock:
            self._open = 0
            self._uninstall()

    def start(self, context: Any = None) -> _Mark:
        """Open a window; the mark to pass to :meth:`stop`.

        The first window open puts the wrappers in: a process that has run
        CUDA graphs (torch imported its trees) gets every one now (recordings
        and replays happen in cells that compile nothing); any other gets them
        at its next compile's start, if one comes (a callback torch runs
        there: a cell that compiles nothing pays for two list appends)."""
        with self._lock:
            if not self._open and "torch" in sys.modules:
                try:
                    if TREES in sys.modules:
                        self._wrap_loaded()
                    if len(self._patched) < len(LOG_MODULES) + 2:
                        self._register_callbacks()
                except Exception:  # pragma: no cover - never fail a measurement over it
                    self._uninstall()
            self._open += 1
            if not self._noted:
                return (_skip_counter(), None)
            return (
                _skip_counter(),
                _Noted(
                    len(self._skips),
                    len(self._recordings),
                    dict(self._replays),
                    dict(self._warmups),
                    len(self._pending),
                ),
            )

    def stop(self, mark: _Mark, error: BaseException | None = None) -> CudagraphWindow | None:
        """Close a window: what it saw since its mark (None: nothing)."""
        with self._lock:
            counter, before = mark
            counted = _skip_counter() - counter
            window = self._window_since(before, counted) if counted or self._noted else None
            self._open = max(self._open - 1, 0)
            if not self._open:
                if self._callbacks or self._patched:
                    self._uninstall()
                if self._noted:
                    self._noted = 0
                    self._skips.clear()
                    self._recordings.clear()
                    self._replays.clear()
                    self._warmups.clear()
                    self._pending.clear()
        return window

    def _window_since(self, before: _Noted | None, counted: int) -> CudagraphWindow | None:
        """What was noted since ``before`` (None: since the watch held
        nothing), with ``counted`` skips torch counted; None when nothing."""
        if before is None:
            before = _NOTHING
        if not (
            counted
            or len(self._skips) > before.skips
            or len(self._recordings) > before.recordings
            or self._replays != before.replays
            or self._warmups != before.warmups
            or len(self._pending) > before.pending
        ):
            return None
        skips = self._skips[before.skips :]
        return CudagraphWindow(
            skips=skips,
            unexplained_skips=max(counted - len(skips), 0),
            recordings=self._recordings[before.recordings :],
            replays=_since(self._replays, before.replays),
            warmups=_since(self._warmups, before.warmups),
            pending_backward=self._pending[before.pending :],
        )

    # ----------------------------------------------------------------- hooks

    def _uninstall(self) -> None:
        self._unregister_callbacks()
        if not self._patched:
            return
        self._patches.restore()
        self._patched.clear()
        # a module torch imported inside the window took our wrapper of
        # cudagraph_utils' function by name (``from ... import``): give it
        # torch's own back
        for name in LOG_MODULES:
            mod = sys.modules.get(name)
            fn = getattr(mod, LOG_FN, None) if mod is not None else None
            if getattr(fn, "_stance_magic_cudagraphs", False):
                while getattr(fn, "_stance_magic_cudagraphs", False):
                    fn = fn._stance_magic_wraps  # type: ignore[union-attr]
                setattr(mod, LOG_FN, fn)

    def _register_callbacks(self) -> None:
        """Wrap what torch imports later at the next compile's start, and at
        its end (the window's only; torch.compiler.reset() clears them). The
        end's callback goes in at a compile's start: a window that compiles
        nothing registers one."""
        callback = sys.modules.get("torch._dynamo.callback")
        if callback is None:
            return
        handler = callback.callback_handler
        handler.start_callbacks.append(self._callback)
        self._callbacks.append(handler)

    def _unregister_callbacks(self) -> None:
        fn = self._callback
        for handler in self._callbacks:
            for callbacks in (handler.start_callbacks, handler.end_callbacks):
                while fn in callbacks:
                    callbacks.remove(fn)
        self._callbacks.clear()

    def _on_compile(self, *args: Any) -> None:
        if self._open:
            fn = self._callback
            for handler in self._callbacks:
                if fn not in handler.end_callbacks:
                    handler.end_callbacks.append(fn)
            try:
                self._wrap_loaded()
            except Exception:  # pragma: no cover - never break a compile
                pass

    def _wrap_loaded(self) -> None:
        """Wrap the torch names of :data:`LOG_MODULES`, ``CompiledFxGraph``
        and the tree manager, in the modules torch has imported."""
        modules = sys.modules
        for name in LOG_MODULES:
            if name in self._patched:
                continue
            mod = modules.get(name)
            if mod is None:
                continue
            self._patched.add(name)
            if getattr(getattr(mod, LOG_FN, None), "_stance_magic_cudagraphs", False):
                continue  # imported inside the window: it holds our wrapper already
            self._patches.apply(mod, LOG_FN, self._log_wrapper)
        if "CompiledFxGraph" not in self._patched:
            mod = modules.get(OUTPUT_CODE)
            cls = getattr(mod, "CompiledFxGraph", None) if mod is not None else None
            if cls is not None:
                self._patched.add("CompiledFxGraph")
                for method in ("__init__", "post_compile"):
                    self._patches.apply(cls, method, self._silent_wrapper)
        if "trees" not in self._patched:
            mod = modules.get(TREES)
            manager = getattr(mod, "CUDAGraphTreeManager", None) if mod is not None else None
            node = getattr(mod, "CUDAGraphNode", None) if mod is not None else None
            if manager is not None:
                self._patched.add("trees")
                self._patches.apply(manager, "record_function", self._record_wrapper)
                self._patches.apply(manager, "execute_node", self._replay_wrapper)
                self._patches.apply(manager, "run_eager", self._warmup_wrapper)
                if hasattr(manager, PENDING_CHECK):
                    self._patches.apply(manager, PENDING_CHECK, self._pending_wrapper)
                if node is not None:
                    self._patches.apply(node, "check_invariants", self._invariant_wrapper)

    # each wrapper notes what torch did, then calls torch's own

    def _log_wrapper(self, orig: Any) -> Any:
        watch = self

        def log_cudagraph_skip_and_bump_counter(msg: str, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            try:
                if watch._open:
                    watch._add_skip(str(msg), logged=True)
                    local = watch._local
                    local.logged = getattr(local, "logged", 0) + 1
            except Exception:  # pragma: no cover - never break a compile
                pass
            return orig(msg, *args, **kwargs)

        log_cudagraph_skip_and_bump_counter._stance_magic_wraps = orig  # type: ignore[attr-defined]
        log_cudagraph_skip_and_bump_counter._stance_magic_cudagraphs = True  # type: ignore[attr-defined]
        return log_cudagraph_skip_and_bump_counter

    def _silent_wrapper(self, orig: Any) -> Any:
        """``CompiledFxGraph.__init__`` / ``post_compile``: the skips torch
        only counts (a graph without a CUDA device), reason from the graph."""
        watch = self

        def wrapper(graph: Any, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            if not watch._open:
                return orig(graph, *args, **kwargs)
            local = watch._local
            before = _skip_counter()
            logged = getattr(local, "logged", 0)
            result = orig(graph, *args, **kwargs)
            try:
                silent = _skip_counter() - before - (getattr(local, "logged", 0) - logged)
                if silent > 0:
                    reason = (
                        getattr(graph, "disabled_cudagraphs_reason", None)
                        or "(torch kept no reason on the graph)"
                    )
                    devices = tuple(sorted(str(d) for d in getattr(graph, "device_types", ())))
                    for _ in range(silent):
                        watch._add_skip(reason, logged=False, devices=devices)
            except Exception:  # pragma: no cover - never break a compile
                pass
            return result

        wrapper.__name__ = getattr(orig, "__name__", "wrapper")
        wrapper._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return wrapper

    def _record_wrapper(self, orig: Any) -> Any:
        watch = self

        def record_function(manager: Any, new_inputs: Any, function_id: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            if watch._open:
                try:
                    watch._add_recording(manager, new_inputs, function_id)
                except Exception:  # pragma: no cover - never break a run
                    pass
            return orig(manager, new_inputs, function_id)

        record_function._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return record_function

    def _replay_wrapper(self, orig: Any) -> Any:
        watch = self

        def execute_node(manager: Any, node: Any, new_inputs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            if watch._open:
                cid = str(getattr(manager, "compile_id", "") or "")
                watch._replays[cid] = watch._replays.get(cid, 0) + 1
                watch._noted += 1
            return orig(manager, node, new_inputs)

        execute_node._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return execute_node

    def _warmup_wrapper(self, orig: Any) -> Any:
        watch = self

        def run_eager(manager: Any, new_inputs: Any, function_id: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            if watch._open:
                cid = _function_compile_id(manager, function_id)
                watch._warmups[cid] = watch._warmups.get(cid, 0) + 1
                watch._noted += 1
            return orig(manager, new_inputs, function_id)

        run_eager._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return run_eager

    def _pending_wrapper(self, orig: Any) -> Any:
        """torch warns once per function and manager, and notes it in
        ``warned_functions``: a function that joined it in the call warned."""
        watch = self

        def check_warn_on_unable_to_start_executing(manager: Any, function_id: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            warned = getattr(manager, "warned_functions", None)
            before = function_id in warned if warned is not None else True
            result = orig(manager, function_id)
            if watch._open and not before:
                try:
                    if function_id in manager.warned_functions:
                        watch._pending.append(
                            CudagraphPending(
                                compile_id=_function_compile_id(manager, function_id),
                                function=_function_name(manager, function_id),
                            )
                        )
                        watch._noted += 1
                except Exception:  # pragma: no cover - never break a run
                    pass
            return result

        check_warn_on_unable_to_start_executing._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return check_warn_on_unable_to_start_executing

    def _invariant_wrapper(self, orig: Any) -> Any:
        watch = self

        def check_invariants(node: Any, inputs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            result = orig(node, inputs)
            try:
                status = result[0]
                if getattr(status, "name", "SUCCESS") != "SUCCESS":
                    watch._local.failed = str(status)
            except Exception:  # pragma: no cover - torch changed the result
                pass
            return result

        check_invariants._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return check_invariants

    # ----------------------------------------------------------------- notes

    def _add_skip(self, msg: str, *, logged: bool, devices: tuple[str, ...] = ()) -> None:
        reason = clean_reason(msg)
        filename, line, function, source = user_line(reason)
        self._skips.append(
            CudagraphSkip(
                reason=reason,
                compile_id=_current_compile_id() or _running_compile_id(),
                filename=filename,
                line=line,
                function=function,
                source=source,
                devices=devices,
                logged=logged,
            )
        )
        self._noted += 1

    def _add_recording(self, manager: Any, new_inputs: Any, function_id: Any) -> None:
        current = getattr(manager, "current_node", None)
        place = manager.roots if current is None else getattr(current, "children", {})
        earlier = bool(place.get(function_id)) if hasattr(place, "get") else False
        why = ""
        if earlier:
            why = getattr(self._local, "failed", "") or ""
        self._local.failed = ""
        modes = getattr(manager, "id_to_mode", {})
        mode = modes.get(function_id)
        ids = getattr(manager, "id_to_compile_id", {})
        cid = ids.get(function_id)
        others = sum(
            1
            for fid, c in ids.items()
            if fid != function_id and c == cid and modes.get(fid) == mode
        )
        self._recordings.append(
            CudagraphRecording(
                compile_id=_function_compile_id(manager, function_id),
                function=_function_name(manager, function_id),
                rerecord=earlier,
                why=why,
                sizes=tuple(
                    v for v in new_inputs if isinstance(v, int) and not isinstance(v, bool)
                ),
                mode=str(getattr(mode, "name", mode or "")),
                others=others,
            )
        )
        self._noted += 1


def _function_name(manager: Any, function_id: Any) -> str:
    """torch's name for a function of the tree manager ("" if it has none)."""
    model = getattr(getattr(manager, "ids_to_funcs", {}).get(function_id), "model", None)
    return str(getattr(model, "__name__", "") or "")


def _function_compile_id(manager: Any, function_id: Any) -> str:
    ids = getattr(manager, "id_to_compile_id", None)
    cid = ids.get(function_id) if isinstance(ids, dict) else None
    if cid is None:
        cid = getattr(manager, "compile_id", None)
    return str(cid) if cid is not None else ""


def _since(now: dict[str, int], then: dict[str, int]) -> dict[str, int]:
    out = {k: v - then.get(k, 0) for k, v in now.items()}
    return {k: v for k, v in out.items() if v > 0}


def watch() -> CudagraphWatch:
    """The process's one :class:`CudagraphWatch`."""
    return process_watch(CudagraphWatch.name, CudagraphWatch)
