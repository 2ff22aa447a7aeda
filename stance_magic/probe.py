"""Every torch internal that stance_magic touches, in one place.

The rest of the package talks to torch only through this module. Each
private API is looked up behind a check of the installed torch, so a torch
upgrade that moves one of them breaks this file with a clear message
(:class:`TorchSupportError`), never a user's cell.

Nothing here imports torch at import time: ``import stance_magic`` stays
light, and torch is imported the first time a function here needs it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

#: Oldest torch stance_magic supports, and the oldest the matrix tests
#: (``make test-matrix``): ``torch.compiler.set_stance`` came in 2.6, its six
#: stances in 2.7, and ``set_guard_complete_hook`` (cache hits and misses,
#: every lookup timed where it happens) in 2.8.
MIN_TORCH = (2, 8)
#: Newest torch release the matrix tests.
TESTED_UP_TO = (2, 15)

#: Stances and the first torch release that has them. Names that the
#: installed torch documents beyond these are picked up too (see
#: :func:`supported_stances`); this table only serves to explain a missing one.
STANCE_SINCE: dict[str, tuple[int, int]] = {
    "default": (2, 6),
    "force_eager": (2, 6),
    "eager_on_recompile": (2, 6),
    "fail_on_recompile": (2, 6),
    "eager_then_compile": (2, 7),
    "aot_eager_then_compile": (2, 7),
}

#: The message torch raises when set_stance is called inside a compiled region.
COMPILED_REGION_MESSAGE = "attempted to set_stance in a torch.compile region"


class TorchSupportError(RuntimeError):
    """The installed torch lacks something stance_magic needs."""


def torch_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed torch, importing it if needed."""
    import torch

    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if not m:  # pragma: no cover - torch always has a numeric version
        raise TorchSupportError(f"cannot read torch version {torch.__version__!r}")
    return int(m.group(1)), int(m.group(2))


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


_TORCH_CHECKED = False
_EVAL_FRAME: Any = None


def require_torch() -> None:
    """Raise :class:`TorchSupportError` unless torch >= :data:`MIN_TORCH` (checked once)."""
    global _TORCH_CHECKED
    if _TORCH_CHECKED:
        return
    v = torch_version()
    if v < MIN_TORCH:
        import torch

        raise TorchSupportError(
            f"stance_magic needs torch >= {_fmt(MIN_TORCH)} (for its guard-complete hook); "
            f"this is torch {torch.__version__}: pip install 'torch>={_fmt(MIN_TORCH)}'"
        )
    _TORCH_CHECKED = True


def torch_problem() -> str | None:
    """One line saying why stance_magic cannot work with this torch, or None.

    Examples
    --------
    >>> torch_problem() is None  # a supported torch
    True
    """
    try:
        import torch  # noqa: F401
    except ImportError as err:
        return f"stance_magic needs torch >= {_fmt(MIN_TORCH)}; torch cannot be imported ({err})"
    try:
        require_torch()
    except TorchSupportError as err:
        return str(err)
    return None


def _eval_frame() -> Any:
    global _EVAL_FRAME
    if _EVAL_FRAME is not None:
        return _EVAL_FRAME
    require_torch()
    from torch._dynamo import eval_frame

    for name in ("_stance", "_set_stance", "_callback_from_stance", "DynamoStance"):
        if not hasattr(eval_frame, name):
            raise TorchSupportError(
                f"torch._dynamo.eval_frame.{name} is missing in this torch "
                f"({_torch_str()}); stance_magic supports torch "
                f"{_fmt(MIN_TORCH)} to {_fmt(TESTED_UP_TO)}"
            )
    _EVAL_FRAME = eval_frame
    return eval_frame


def _torch_str() -> str:
    import torch

    return torch.__version__


# --------------------------------------------------------------------------
# --- torch release differences ---
# Every difference between the torch releases stance_magic supports is
# handled here, each shim named for the releases it serves (the README's
# "torch releases" table lists them). A new torch release should be a change
# here and a row in that table.
# --------------------------------------------------------------------------

#: 2.8 calls ``guard_manager_testing_hook_fn(guard_manager, local_scope)``;
#: 2.9 added the guard builder (whose ``f_code`` names the compiled frame).
#: A hook of the wrong arity raises inside Dynamo and breaks the user's
#: compile, so the recorder's hook takes both forms.
TESTING_HOOK_BUILDER_SINCE = (2, 9)

#: From 2.10 a recompile reason ends each failed guard with torch's pointer to
#: its source line (``  # return x * n  # file:line in fn``); 2.8 gives the
#: guard alone, and the report then has no guard source (2.9 not tested).
GUARD_SOURCE_SINCE = (2, 10)

#: From 2.10 a ``fail_on_recompile`` refusal names the guards that failed;
#: 2.8's and 2.9's errors say only "Detected recompile", and the report names none.
REFUSAL_GUARDS_SINCE = (2, 10)

#: Up to this release torch's profiler also emits a ``TorchDynamo Cache
#: Lookup`` event for frames with nothing compiled (the cold call itself and
#: torch's own frames run by a fresh graph: 9 for one cold compile of a
#: lambda in 2.8, none in 2.13): ``-g`` then counts and times those too, and
#: the report says so.
PROFILER_EMPTY_LOOKUPS_UNTIL = (2, 12)

#: From 2.9 the per-call callback of ``eager_then_compile`` /
#: ``aot_eager_then_compile`` is linked to torch.compile's own one, so cache
#: entries match it. 2.8 matches by address alone: its cache serves a later
#: call only when that call's new callback lands where the previous one was
#: freed, so whether it recompiles depends on the allocator (see
#: :func:`callback_ref`); the report counts what torch did.
DELAYED_CALLBACK_LINKED_SINCE = (2, 9)

#: The attribute that links a Dynamo callback to the callback or backend it
#: wraps: ``_torchdynamo_orig_callable`` in 2.8, ``_torchdynamo_orig_backend``
#: from 2.9 (where the former only links torch.compile's wrapper to the
#: user's function); ``eval_frame.innermost_backend`` follows it from 2.12.
#: Both are followed, newest first.
BACKEND_LINKS = ("_torchdynamo_orig_backend", "_torchdynamo_orig_callable")


def callback_ref(callback: Any) -> Callable[[], Any]:
    """A weak reference to the callback torch runs a frame with (``ref()`` gives
    it back, or None once torch dropped it).

    torch 2.8 builds a new callback for every call under ``eager_then_compile``
    / ``aot_eager_then_compile`` and tells cache entries apart by its
    address: the cache hits only because the previous call's callback is
    freed and its address reused. Holding it a moment longer makes every
    call recompile, so the recorder never holds it (2.9 and later link each
    new callback to the one torch.compile made, and are unaffected).
    """
    try:
        return weakref.ref(callback)
    except TypeError:  # None, False, True: nothing to hold
        return lambda: callback


def inline_wrapped(frame: Any, owner: int) -> tuple[str, str, int | None] | None:
    """What torch.compile's ``external_utils.wrap_inline`` wrapper (the
    compiled frame ``inner``) calls, named as the report names a callable.

    torch 2.8 to 2.12 wrap a function whose source they cannot find
    (``inspect.getsourcefile`` is None, as for code ``exec``'d from a string)
    and their records name ``inner`` in torch's own file; 2.13 compiles the
    function's own frame whatever its file. The wrapper is the
    ``fn`` of the torch.compile call (the compile_wrapper frame ``owner``, up
    from ``frame``), and it keeps the function as ``__wrapped__``.
    """
    f = frame
    for _ in range(400):
        if f is None:
            return None
        if id(f) == owner:
            fn = getattr(f.f_locals.get("fn"), "__wrapped__", None)
            if fn is None or _is_module(fn):
                return None
            return describe_callable(fn)
        f = f.f_back
    return None


def innermost_backend(callback: Any) -> Any:
    """The backend at the bottom of a Dynamo callback's wrapper chain.

    torch 2.12+ has ``eval_frame.innermost_backend``; older releases link the
    same chain through ``_torchdynamo_orig_callable`` (see
    :data:`BACKEND_LINKS`), and 2.8's delayed-compile callback of
    ``eager_then_compile`` / ``aot_eager_then_compile`` (``callback_fn``) has
    no link at all: the callback it wraps is in its closure.
    """
    fn = callback
    for _ in range(32):
        nxt = None
        for attr in BACKEND_LINKS:
            nxt = getattr(fn, attr, None)
            if nxt is not None:
                break
        if nxt is None:
            nxt = _delayed_compile_callback_of(fn)
        if nxt is None or not callable(nxt):
            return fn
        fn = nxt
    return fn


def _delayed_compile_callback_of(fn: Any) -> Any:
    """torch 2.8: the callback closed over by ``_create_delayed_compile_callback``."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_name != "callback_fn" or "callback" not in code.co_freevars:
        return None
    if not code.co_filename.endswith(os.path.join("_dynamo", "eval_frame.py")):
        return None
    cell = fn.__closure__[code.co_freevars.index("callback")]
    try:
        return cell.cell_contents
    except ValueError:  # pragma: no cover - an empty cell
        return None


# --------------------------------------------------------------------------
# Stances
# --------------------------------------------------------------------------


def torch_stance() -> tuple[str, bool, Any]:
    """The stance torch has now: ``(name, skip_guard_eval_unsafe, backend)``."""
    s = _eval_frame()._stance
    return s.stance, bool(s.skip_guard_eval_unsafe), s.backend


def _documented_stances() -> list[str]:
    """Stance names listed in the installed torch's set_stance docstring."""
    import torch

    doc = torch.compiler.set_stance.__doc__ or ""
    return re.findall(r'^\s*- "([a-z_]+)":', doc, flags=re.M)


_SUPPORTED: tuple[str, ...] | None = None


def supported_stances() -> tuple[str, ...]:
    """Stance names the installed torch accepts, in a stable order.

    Candidates are our table plus every name torch documents; each is tried
    by asking torch's own dispatcher (``_callback_from_stance``) under that
    stance with a dummy callback, which raises for a name torch does not
    know and runs nothing.
    """
    global _SUPPORTED
    if _SUPPORTED is None:
        ef = _eval_frame()
        candidates = list(STANCE_SINCE)
        candidates += [n for n in _documented_stances() if n not in candidates]

        def dummy(*args: Any, **kwargs: Any) -> None:  # pragma: no cover
            return None

        dummy._torchdynamo_orig_backend = dummy  # type: ignore[attr-defined]
        accepted = []
        saved = ef._stance
        # torch's own function, not the recorder's wrapper around it
        dispatch = getattr(ef._callback_from_stance, "__wrapped__", ef._callback_from_stance)
        try:
            for name in candidates:
                ef._stance = ef.DynamoStance(name)
                try:
                    dispatch(dummy)
                except RuntimeError:
                    continue
                accepted.append(name)
        finally:
            ef._stance = saved
        _SUPPORTED = tuple(accepted)
    return _SUPPORTED


def missing_stance_hint(name: str) -> str | None:
    """For a stance this torch lacks but a newer one has, say which torch."""
    since = STANCE_SINCE.get(name)
    if since is None or name in supported_stances():
        return None
    return f"stance {name!r} needs torch >= {_fmt(since)} (installed: {_torch_str()})"


def list_backends() -> list[str]:
    """Every backend name registered with torch, debug ones included."""
    require_torch()
    import torch._dynamo

    try:
        return list(torch._dynamo.list_backends(exclude_tags=()))
    except TypeError:  # pragma: no cover - older signature
        return list(torch._dynamo.list_backends())


#: Registered backends that need a package torch does not ship:
#: name -> (module to find, what to install).
BACKEND_PACKAGES: dict[str, tuple[str, str]] = {
    "tvm": ("tvm", "apache-tvm"),
    "openxla": ("torch_xla", "torch_xla"),
    "openxla_eval": ("torch_xla", "torch_xla"),
    "onnxrt": ("onnxruntime", "onnxruntime"),
    "tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "torch_tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "ipex": ("intel_extension_for_pytorch", "intel-extension-for-pytorch"),
}

#: Backends that compile through TorchScript (``torch.jit.script``).
TORCHSCRIPT_BACKENDS = ("ts", "aot_ts")


def is_test_backend(name: str) -> bool:
    """torch's own test and minifier backends: registered, never worth offering."""
    return "TESTING_ONLY" in name or "minifier" in name


@functools.cache
def _torchscript_problem() -> str | None:
    """Whether ``torch.jit.script`` accepts the graph modules Dynamo hands a
    backend (lazy graph modules); cached, about 30 ms once."""
    import torch

    try:
        from torch.fx._lazy_graph_module import _make_graph_module, _use_lazy_graph_module
    except ImportError:  # pragma: no cover - older torch: no lazy graph modules
        return None
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_method("sin", (x,)))
    try:
        with _use_lazy_graph_module(True):
            gm = _make_graph_module(torch.nn.Module(), graph)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.jit.script(gm)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"torch.jit.script cannot script the graphs Dynamo produces here ({first.strip()})"
    return None


def _has_cxx() -> bool:
    import shutil

    cxx = os.environ.get("CXX")
    return any(shutil.which(c) for c in ([cxx] if cxx else []) + ["g++", "c++", "clang++"])


@functools.cache
def backend_problem(name: str) -> str | None:
    """Why the registered backend ``name`` cannot run here, or None if it can.

    What is checked, without compiling anything: a package the backend
    imports when it compiles (``tvm``, ``torch_xla``, ...), a CUDA device for
    ``cudagraphs``, a C++ compiler for Inductor on a machine without CUDA,
    TorchScript for ``ts``/``aot_ts``, and backends that need arguments a
    name cannot pass. Cached per name (the answers do not change while the
    process lives, short of installing a package: restart the kernel then).

    Examples
    --------
    >>> backend_problem("eager") is None
    True
    >>> backend_problem("tvm")  # doctest: +SKIP
    "needs the tvm package, which is not installed (pip install apache-tvm)"
    """
    import importlib.util
    import inspect

    require_torch()
    import torch

    if name in BACKEND_PACKAGES:
        module, package = BACKEND_PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            return f"needs the {module} package, which is not installed (pip install {package})"
        return None
    if name == "cudagraphs" and not torch.cuda.is_available():
        return "needs a CUDA device (torch.cuda.is_available() is False)"
    if name == "inductor" and not torch.cuda.is_available() and not _has_cxx():
        return "Inductor needs a C++ compiler for CPU code; none found (g++, clang++ or $CXX)"
    if name in TORCHSCRIPT_BACKENDS:
        return _torchscript_problem()
    try:
        import torch._dynamo

        fn = torch._dynamo.lookup_backend(name)
    except Exception as err:
        return f"torch cannot load it ({type(err).__name__}: {err})"
    if inspect.isfunction(fn):
        params = inspect.signature(fn).parameters.values()
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        extra = [p.name for p in params if p.default is p.empty and p.kind in positional][2:]
        if extra:
            return (
                f"it needs argument{'s' if len(extra) > 1 else ''} {', '.join(extra)}, "
                "which a backend name cannot pass"
            )
    return None


def usable_backends() -> list[str]:
    """Registered backends that can run here, torch's test backends left out.

    Examples
    --------
    >>> "eager" in usable_backends() and "relu_compile_error_TESTING_ONLY" not in usable_backends()
    True
    """
    return [n for n in list_backends() if not is_test_backend(n) and backend_problem(n) is None]


def set_stance(name: str, skip_guard_eval_unsafe: bool, backend: Any) -> Any:
    """Call ``torch.compiler.set_stance`` (function form) and return its handle.

    A call from inside a compiled region raises :class:`CompiledRegionError`
    carrying torch's own message.
    """
    require_torch()
    import torch

    if _dynamo_is_tracing():
        # Dynamo is tracing the caller: say so here, rather than letting it
        # trip over torch's forbidden set_stance with an opaque trace error.
        raise CompiledRegionError(COMPILED_REGION_MESSAGE)
    # Otherwise torch decides, per thread: it refuses only while this thread
    # runs inside a compiled region (its eval-frame callback is set). Another
    # thread compiling at the same time does not count, although
    # torch.compiler.is_compiling() (one flag for the process) is then True.
    try:
        return torch.compiler.set_stance(
            name,
            skip_guard_eval_unsafe=skip_guard_eval_unsafe,
            force_backend=backend,
        )
    except RuntimeError as err:
        if COMPILED_REGION_MESSAGE in str(err):
            raise CompiledRegionError(str(err)) from err
        raise


def _dynamo_is_tracing() -> bool:
    """True only while Dynamo traces the calling code: Dynamo folds
    ``torch.compiler.is_dynamo_compiling()`` to True in the code it traces,
    and it returns False when run (in any thread)."""
    import torch

    check = getattr(torch.compiler, "is_dynamo_compiling", None)
    return bool(check()) if check is not None else False


class CompiledRegionError(RuntimeError):
    """stance_magic was asked to change the stance inside a compiled region."""

    def __init__(self, torch_message: str) -> None:
        super().__init__(
            f"{torch_message}: the stance cannot change inside a function that "
            "torch.compile is tracing or running; change it before calling the "
            "compiled function (for example with %%stance on the cell that calls it)"
        )


def reset_compiled_code() -> None:
    """Forget all compiled code (``torch.compiler.reset()``)."""
    require_torch()
    import torch

    torch.compiler.reset()
    # eager_then_compile remembers each function's first inputs outside the
    # caches reset() clears; forget them too, or a "cold" run compiles at once.
    from torch._dynamo import eval_frame

    inputs = getattr(eval_frame, "_EXAMPLE_INPUTS", None)
    if inputs:
        inputs.clear()


@contextlib.contextmanager
def no_disk_caches() -> Iterator[None]:
    """Turn off Inductor's FX graph cache and AOTAutograd's cache for a block,
    so a compile after :func:`reset_compiled_code` is really from cold."""
    require_torch()
    import torch._functorch.config as fconf
    import torch._inductor.config as iconf

    saved = []
    for mod, name in ((iconf, "fx_graph_cache"), (fconf, "enable_autograd_cache")):
        if hasattr(mod, name):
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, False)
    try:
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


# --------------------------------------------------------------------------
# The recorder: compile records, cache lookups timed in situ, graph breaks
# --------------------------------------------------------------------------

#: How many frames the guard hook walks up from a lookup to find the
#: torch.compile call that made it (torch's own skipped frames in between:
#: ``Module.__call__``, ``_call_impl``).
_WALK_LIMIT = 12

#: Stances under which a torch.compile call can run its function eagerly
#: without looking anything up (nothing compiled yet, or compiling disabled).
_EAGER_STANCES = frozenset(
    {"force_eager", "eager_on_recompile", "eager_then_compile", "aot_eager_then_compile"}
)


@dataclass
class GraphBreakEvent:
    """One graph break as torch logged it (the ``graph_breaks`` log artifact)."""

    reason: str
    filename: str
    line: int | None
    compile_id: str | None
    #: the frame fell back to eager as a whole (torch could not resume)
    skipped_frame: bool = False


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
    eager_calls: int = 0
    #: each timed lookup, seconds
    samples: list[float] = field(default_factory=list)


@dataclass
class RecordInfo:
    """What the recorder learnt about one compile record while it was made."""

    module: tuple[str, str, int | None] | None = None
    backend: str | None = None
    #: compiled while a call ran eagerly (eager_then_compile's first call)
    during_eager_call: bool = False
    #: calls eager_then_compile had seen of this frame when it compiled
    example_calls: int | None = None


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
    #: torch.compile calls that ran their function without a lookup, by stance
    eager_calls: dict[str, int] = field(default_factory=dict)
    #: torch.compiler.reset() ran inside the window
    reset_seen: bool = False
    #: where the graph-break figures come from ("log" or "counters")
    break_source: str = "log"
    #: each lookup's seconds from the profiler, when --profile-guards was asked for
    profiled_lookups: list[float] | None = None

    @property
    def timed_lookups(self) -> int:
        return sum(t.timed for t in self.targets)

    @property
    def untimed_lookups(self) -> int:
        return sum(t.untimed for t in self.targets)

    @property
    def lookup_seconds(self) -> float:
        return sum(t.seconds for t in self.targets)

    @property
    def lookup_samples(self) -> list[float]:
        return [x for t in self.targets for x in t.samples]


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
    generation: int
    counters: dict[str, int] | None
    closed: bool = False


_MISSING = object()


class _Activation:
    """One torch.compile call in flight: when torch handed it to Dynamo."""

    __slots__ = ("callback", "consumed", "frame_id", "key", "stance", "t0", "target")

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
    stays attached until :meth:`uninstall` and does nothing between windows.

    Windows nest and may close in any order; each sees what happened in its
    own thread between its start and stop.
    """

    def __init__(self) -> None:
        self._marks: list[_Mark] = []
        self._threads: dict[int, int] = {}
        self._hooks_on = False
        self._log_on = False
        self._log_state: list[tuple[Any, int, bool]] = []
        self._handler: Any = None
        self._prev_guard_hook: Any = None
        self._prev_testing_hook: Any = None
        self._orig_cfs: Any = None
        self._orig_chromium: Any = None
        self._cw_code: Any = None
        self._ef: Any = None
        self._clock = time.perf_counter
        self._get_ident = threading.get_ident
        self._generation = 0
        self._sentinel: Any = None
        self._reset_hits = 0
        self._clear_running()

    def _clear_running(self) -> None:
        self._hits = 0
        self._misses = 0
        self._calls = 0
        self._records: list[Any] = []
        self._info: dict[int, RecordInfo] = {}
        self._breaks: list[GraphBreakEvent] = []
        #: (kind, key, seconds) lookup and eager-call events, in order
        self._events: list[tuple[str, Any, float]] = []
        self._act: _Activation | None = None
        #: torch.compile's callback -> the function it compiles (see _fn_of)
        self._fns: dict[Any, Any] = {}
        self._module_by_id: dict[str, tuple[str, str, int | None]] = {}

    # -- installation -----------------------------------------------------
    @property
    def installed(self) -> bool:
        """Whether the per-call hooks are in torch now (only while measuring)."""
        return self._hooks_on

    def _install_hooks(self) -> None:
        t = _torch_hooks()
        self._ef = t.ef
        if self._cw_code is None:
            self._cw_code = _compile_wrapper_code(t.ef)
        self._prev_guard_hook = t.c_eval_frame.set_guard_complete_hook(self._guard_hook)
        self._prev_testing_hook = getattr(t.guards, "guard_manager_testing_hook_fn", None)
        t.guards.guard_manager_testing_hook_fn = self._testing_hook
        self._orig_cfs = t.ef._callback_from_stance
        t.ef._callback_from_stance = self._callback_from_stance
        self._orig_chromium = getattr(t.utils, "add_compilation_metrics_to_chromium", None)
        if self._orig_chromium is not None:
            t.utils.add_compilation_metrics_to_chromium = self._on_record
        self._register_sentinel()
        self._hooks_on = True

    def _uninstall_hooks(self) -> None:
        if not self._hooks_on:
            return
        t = _torch_hooks()
        now = t.c_eval_frame.set_guard_complete_hook(self._prev_guard_hook)
        if now is not None and now != self._guard_hook:
            # someone hooked in after us: leave theirs (ours passes through)
            t.c_eval_frame.set_guard_complete_hook(now)
        if t.guards.guard_manager_testing_hook_fn == self._testing_hook:
            t.guards.guard_manager_testing_hook_fn = self._prev_testing_hook
        if t.ef._callback_from_stance == self._callback_from_stance:
            t.ef._callback_from_stance = self._orig_cfs
        if self._orig_chromium is not None and (
            t.utils.add_compilation_metrics_to_chromium == self._on_record
        ):
            t.utils.add_compilation_metrics_to_chromium = self._orig_chromium
        self._unregister_sentinel()
        self._hooks_on = False

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
        """Attach the graph-break handler to torch's ``graph_breaks`` loggers.

        Checked at the start of each outermost window (``torch._logging.set_logs``
        resets these loggers) and left attached between windows, idle:
        changing a logger's level clears every logger's cache in the process,
        too dear to do per cell. Where the user did not ask for the artifact
        (``TORCH_LOGS``, ``set_logs``), its records are kept from reaching
        torch's console handler.
        """
        try:
            from torch._logging._internal import log_registry, log_state
        except ImportError:  # pragma: no cover - older torch: counters instead
            return
        if not self._log_on:
            names = [
                q for q in log_registry.get_artifact_log_qnames() if q.endswith("__graph_breaks")
            ]
            if not names:  # pragma: no cover
                return
            self._handler = _BreakHandler(self)
            self._log_state = []
            for qname in names:
                lg = logging.getLogger(qname)
                self._log_state.append((lg, lg.level, lg.propagate))
            self._log_on = True
        first = self._log_state[0][0]
        if first.level == logging.DEBUG and self._handler in first.handlers:
            return  # as we left it: torch's logging was not reset since (set_logs)
        enabled = getattr(log_state, "is_artifact_enabled", None)
        user_wants = bool(enabled("graph_breaks")) if enabled is not None else False
        for lg, _level, _propagate in self._log_state:
            if self._handler not in lg.handlers:
                lg.addHandler(self._handler)
            if not user_wants and lg.propagate:
                lg.propagate = False
            if not lg.isEnabledFor(logging.DEBUG):
                lg.setLevel(logging.DEBUG)

    def _uninstall_log_capture(self) -> None:
        if not self._log_on:
            return
        for lg, level, propagate in self._log_state:
            lg.removeHandler(self._handler)
            if lg.level != level:
                lg.setLevel(level)
            lg.propagate = propagate
        self._log_state = []
        self._log_on = False

    def uninstall(self) -> None:
        """Close every window and take everything out of torch."""
        self.close_all()
        self._uninstall_hooks()
        self._uninstall_log_capture()

    # -- hooks (hot path: keep them small) ---------------------------------
    def _callback_from_stance(self, callback: Any) -> Any:
        result = self._orig_cfs(callback)
        if callback is None:  # torch._dynamo.disable's wrappers: never a compiled call
            return result
        f = sys._getframe(1)
        if f.f_code is self._cw_code and self._get_ident() in self._threads:
            self._calls += 1
            if self._act is not None:
                self._end_activation(self._act)
            stance = self._ef._stance.stance
            act = _Activation(id(f), 0.0, stance, result, callback)
            if stance in _EAGER_STANCES or result in (None, False):
                act.target = self._fn_of(callback, f)
            self._act = act
            act.t0 = self._clock()
        return result

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
            self._events.append(("eager", (act.stance, act.target), 0.0))

    def _guard_hook(self, cache_hit: bool) -> bool:
        t = self._clock()
        if self._threads and self._get_ident() in self._threads:
            if cache_hit:
                self._hits += 1
            else:
                self._misses += 1
            caller = sys._getframe(1)
            act = self._act
            owner = None
            if act is not None and not act.consumed:
                # most often torch.compile's wrapper itself made the call
                owner = caller if id(caller) == act.frame_id else _find_owner(caller, act.frame_id)
            if owner is not None:
                # the lookup of the very function a torch.compile call handed
                # to Dynamo: timed from that moment to now
                act.consumed = True
                act.target = self._fn_of(act.key, owner)
                self._events.append(("timed", (act.target, cache_hit), t - act.t0))
            else:
                # a lookup further down (a resume function after a graph
                # break, a frame compiled on its own): no start to time from;
                # it belongs to the torch.compile call in flight
                key = act.target if act is not None and act.consumed else _caller_key(caller)
                self._events.append(("untimed", (key, cache_hit), 0.0))
        prev = self._prev_guard_hook
        if prev is not None:
            return prev(cache_hit)
        return cache_hit

    def _on_record(self, rec: Any) -> None:
        orig = self._orig_chromium
        if orig is not None:
            orig(rec)
        if not self._threads or self._get_ident() not in self._threads:
            return
        self._records.append(rec)
        info = RecordInfo()
        cid = str(getattr(rec, "compile_id", ""))
        info.module = self._module_by_id.pop(cid, None)
        act = self._act
        if is_frame_compile(rec):
            info.example_calls = _example_calls(rec)
            if act is not None:
                if info.module is None and is_module_wrapper(rec):
                    info.module = inline_wrapped(sys._getframe(1), act.frame_id)
                info.backend = backend_name(act.callback())
                if not act.consumed and _is_direct(sys._getframe(1), act.frame_id):
                    # a cold compile of the called frame itself (no lookup
                    # before it: the cache was empty)
                    act.consumed = True
                elif not act.consumed and act.stance in _EAGER_STANCES:
                    info.during_eager_call = True
        self._info[id(rec)] = info

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
            self._breaks.append(event)

    # -- windows ----------------------------------------------------------
    def start(self) -> _Mark:
        """Open a measuring window (installing the hooks if none was open)."""
        if not self._marks:
            self._clear_running()
            self._install_log_capture()
            self._install_hooks()
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
            generation=self._reset_hits,
            counters=None if self._log_on else _graph_break_counters(),
        )
        self._marks.append(mark)
        return mark

    def stop(self, mark: _Mark) -> Window:
        """Close the window opened with ``mark`` and return what it saw."""
        if mark.closed or mark not in self._marks:
            return Window()
        if self._act is not None and mark is self._marks[0]:
            self._end_activation(self._act)
        reset_seen = self._sentinel_gone()
        if reset_seen:
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
            self._uninstall_hooks()
            self._clear_running()
        return window

    def _window(self, mark: _Mark) -> Window:
        records = self._records[mark.records :]
        info = {id(r): self._info.get(id(r), RecordInfo()) for r in records}
        window = Window(
            records=records,
            info=info,
            hits=self._hits - mark.hits,
            misses=self._misses - mark.misses,
            compiled_calls=self._calls - mark.calls,
            graph_breaks=list(self._breaks[mark.breaks :]),
        )
        if mark.counters is not None:  # no log artifact in this torch
            window.break_source = "counters"
            window.graph_breaks = _breaks_from_counters(mark.counters)
        targets: dict[Any, Target] = {}
        for kind, key, seconds in self._events[mark.events :]:
            if kind == "eager":
                stance, fn = key
                window.eager_calls[stance] = window.eager_calls.get(stance, 0) + 1
                t = _target(targets, fn)
                t.eager_calls += 1
                continue
            obj, hit = key
            t = _target(targets, obj)
            if kind == "timed":
                t.timed += 1
                t.seconds += seconds
                t.samples.append(seconds)
            else:
                t.untimed += 1
            if not hit:
                t.misses += 1
        window.targets = list(targets.values())
        return window

    def close_all(self) -> None:
        """Close every open window (unloading with a block still open)."""
        for mark in list(self._marks):
            self.stop(mark)

    @property
    def open(self) -> bool:
        return bool(self._marks)

    @property
    def open_windows(self) -> int:
        return len(self._marks)

    @property
    def compiles_so_far(self) -> int:
        """Compile records collected since the outermost window opened."""
        return len(self._records)


@dataclass(frozen=True)
class _TorchHooks:
    """The torch modules whose hooks the recorder sets (imported once)."""

    ef: Any
    c_eval_frame: Any
    guards: Any
    utils: Any
    callback_handler: Any


@functools.cache
def _torch_hooks() -> _TorchHooks:
    require_torch()
    import torch._dynamo.guards as guards
    from torch._C._dynamo import eval_frame as c_eval_frame
    from torch._dynamo import utils
    from torch._dynamo.callback import callback_handler

    if not hasattr(c_eval_frame, "set_guard_complete_hook"):
        raise TorchSupportError(
            f"torch {_torch_str()} has no set_guard_complete_hook; cache hits cannot be counted"
        )
    return _TorchHooks(_eval_frame(), c_eval_frame, guards, utils, callback_handler)


class _BreakHandler(logging.Handler):
    """Hands the records of torch's graph_breaks log artifact to the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__(logging.DEBUG)
        self._recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self._recorder._on_graph_break(record)


def _compile_wrapper_code(ef: Any) -> Any:
    """The code object of torch.compile's ``compile_wrapper`` closure."""
    ctx = getattr(ef, "_TorchDynamoContext", None)
    call = vars(ctx).get("__call__") if ctx is not None else None
    code = getattr(call, "__code__", None)
    for const in getattr(code, "co_consts", ()):
        if getattr(const, "co_name", None) == "compile_wrapper":
            return const
    raise TorchSupportError(
        f"torch {_torch_str()}: torch.compile's compile_wrapper was not found; "
        "cache lookups cannot be timed"
    )


def _find_owner(frame: Any, owner: int) -> Any:
    """The compile_wrapper frame ``owner`` if the lookup made from ``frame``
    is the one of the function it called: reached through torch's own
    (skipped) frames only, within a few frames. Else None."""
    torch_dir = _torch_dir()
    f = frame
    for _ in range(_WALK_LIMIT):
        if f is None:
            return None
        if id(f) == owner:
            return f
        if not f.f_code.co_filename.startswith(torch_dir):
            return None
        f = f.f_back
    return None


def _is_direct(frame: Any, owner: int) -> bool:
    """Whether ``owner`` (a compile_wrapper frame) is reached from ``frame``
    through torch's own frames only (no user frame in between)."""
    torch_dir = _torch_dir()
    here = __file__
    f = frame
    for _ in range(400):
        if f is None:
            return False
        if id(f) == owner:
            return True
        name = f.f_code.co_filename
        if not name.startswith(torch_dir) and name != here:
            return False
        f = f.f_back
    return False


def _caller_key(frame: Any) -> Any:
    """What a lookup without a timed start is attributed to: the module a
    torch frame (``_call_impl``) was calling, else the calling code."""
    code = frame.f_code
    if code.co_filename.startswith(_torch_dir()):
        self_obj = frame.f_locals.get("self")
        if self_obj is not None and _is_module(self_obj):
            return self_obj
    return code


def _target(targets: dict[Any, Target], obj: Any) -> Target:
    key = id(obj) if not isinstance(obj, types.CodeType) else obj
    t = targets.get(key)
    if t is None:
        name, filename, line = describe_callable(obj)
        t = targets[key] = Target(name=name, filename=filename, line=line)
    return t


def describe_callable(obj: Any) -> tuple[str, str, int | None]:
    """(name, file, line) of what torch.compile was given or called, an
    ``nn.Module`` named by its class."""
    if obj is None:
        return "(unknown)", "", None
    if isinstance(obj, types.CodeType):
        if obj.co_name.startswith("torch_dynamo_resume_in_"):
            fn, line = resume_parts(obj.co_name) or (obj.co_name, 0)
            return f"{fn} after the graph break at line {line}", obj.co_filename, line
        return (
            f"{obj.co_name} (frames it calls)",
            obj.co_filename,
            obj.co_firstlineno,
        )
    mod = _module_of(obj)
    if mod is not None:
        return _module_location(mod)
    code = getattr(obj, "__code__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if code is not None:
        return name or code.co_name, code.co_filename, code.co_firstlineno
    return name or type(obj).__name__, "", None


def _module_of(obj: Any) -> Any:
    """The nn.Module behind a callable torch.compile was given: the module
    itself, a bound method of it, or a wrapper closing over it."""
    if _is_module(obj):
        return obj
    bound = getattr(obj, "__self__", None)
    if bound is not None and _is_module(bound):
        return bound
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if _is_module(value):
            return value
        bound = getattr(value, "__self__", None)
        if bound is not None and _is_module(bound):
            return bound
    return None


def _module_in_scope(scope: Any, code: Any = None) -> Any:
    """The nn.Module a frame being compiled is the ``forward`` of: its first
    argument when that is called ``self`` or the frame is the module's own
    ``forward`` (a hook that takes the module first is not its forward), the
    first of a decorator's ``*args``, or the ``fn`` of torch's wrapper for
    ``torch.nn`` modules."""
    if not isinstance(scope, dict) or not scope:
        return None
    name, first = next(iter(scope.items()))
    if _is_module(first):
        forward = getattr(type(first).forward, "__code__", None)
        if name == "self" or (code is not None and code is forward):
            return first
    if name == "args" and isinstance(first, tuple) and first and _is_module(first[0]):
        return first[0]  # a decorator's wrapper(*args, **kwargs) around forward
    fn = scope.get("fn")
    if fn is not None and _is_module(fn):
        return fn
    return None


def _example_calls(rec: Any) -> int | None:
    """Calls eager_then_compile had seen of a record's frame when it compiled."""
    inputs = getattr(_eval_frame(), "_EXAMPLE_INPUTS", None)
    if not inputs:
        return None
    key = f"{getattr(rec, 'co_filename', '')}{getattr(rec, 'co_firstlineno', '')}"
    seen = inputs.get(key)
    return len(seen) if seen is not None else None


def backend_name(callback: Any) -> str | None:
    """The name of the backend a Dynamo callback compiles with."""
    if callback in (None, False, True):
        return None
    inner = innermost_backend(callback)
    name = getattr(inner, "compiler_name", None)
    if isinstance(name, str) and not name.startswith("<"):
        return name
    fn = getattr(inner, "compiler_fn", inner)
    return getattr(fn, "__name__", None) or type(fn).__name__


_GB_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_GB_FILE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def parse_graph_break(record: Any) -> GraphBreakEvent | None:
    """A graph break from one ``graph_breaks`` log record, or None."""
    try:
        msg = record.getMessage()
    except Exception:
        return None
    cid = None
    try:
        from torch._guards import CompileContext

        current = CompileContext.current_compile_id()
        cid = str(current) if current is not None else None
    except Exception:
        pass
    m = _GB_AT.search(msg.split("\n", 1)[0])
    if m:
        reason = msg.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in msg else msg
        reason = reason.split("\nUser code traceback:", 1)[0]
        return GraphBreakEvent(reason.strip(), m.group("file"), int(m.group("line")), cid)
    if msg.startswith("Graph break"):
        # torch could not resume: the whole frame runs eagerly
        files = list(_GB_FILE.finditer(msg))
        exc = getattr(record, "exc_info", None)
        reason = str(exc[1]) if exc and exc[1] is not None else msg.splitlines()[0]
        filename, line = "", None
        if files:
            filename, line = files[-1].group("file"), int(files[-1].group("line"))
        return GraphBreakEvent(reason.strip(), filename, line, cid, skipped_frame=True)
    files = list(_GB_FILE.finditer(msg))
    if files:
        return GraphBreakEvent(
            msg.strip().splitlines()[0], files[-1].group("file"), int(files[-1].group("line")), cid
        )
    return None


def _graph_break_counters() -> dict[str, int]:
    from torch._dynamo import utils

    return dict(utils.counters.get("graph_break", {}))


def _breaks_from_counters(before: dict[str, int]) -> list[GraphBreakEvent]:
    """Fallback for a torch without the graph_breaks artifact: the delta of
    ``counters["graph_break"]`` (which misses some breaks; said in the report)."""
    out = []
    for reason, n in _graph_break_counters().items():
        for _ in range(n - before.get(reason, 0)):
            out.append(GraphBreakEvent(reason, "", None, None))
    return out


@functools.cache
def _torch_dir() -> str:
    import torch

    return os.path.dirname(torch.__file__) + os.sep


def _is_module(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def _module_location(mod: Any) -> tuple[str, str, int | None]:
    import inspect

    forward = type(mod).forward
    code = getattr(forward, "__code__", None)
    try:
        filename = inspect.getsourcefile(forward) or ""
    except TypeError:
        filename = ""
    return f"{type(mod).__name__}.forward", filename, code.co_firstlineno if code else None


def is_module_wrapper(rec: Any) -> bool:
    """torch.compile(module) compiles a wrapper frame around the module call."""
    filename = getattr(rec, "co_filename", None) or ""
    return getattr(rec, "co_name", None) == "inner" and filename.endswith(
        ("_dynamo/external_utils.py",)
    )


def record_phases(rec: Any) -> dict[str, float]:
    """Exclusive compile phases of one CompilationMetrics record, in seconds.

    torch's cumulative fields nest (Dynamo contains AOTAutograd contains
    Inductor contains code generation); they are unnested here so that the
    phases add up to the record's total. ``backend`` is Inductor's own time
    without code generation, or the whole backend call for a backend that
    does not go through AOTAutograd (``eager``, a user's callable).
    """

    def us(name: str) -> float:
        v = getattr(rec, name, None)
        return (v or 0) / 1e6

    total = record_total_s(rec)
    inductor = us("inductor_cumulative_compile_time_us")
    codegen = min(us("inductor_code_gen_cumulative_compile_time_us"), inductor)
    if getattr(rec, "is_forward", True) is False:
        # A lazily compiled backward graph: AOTAutograd (and Inductor under it).
        dynamo, aot, backend = 0.0, total - inductor, inductor - codegen
    else:
        dynamo_total = min(us("dynamo_cumulative_compile_time_us") or total, total)
        aot_total = us("aot_autograd_cumulative_compile_time_us")
        if aot_total:
            backend_total = min(aot_total, dynamo_total)
            aot = backend_total - inductor
            backend = inductor - codegen
        else:
            backend_total = min(getattr(rec, "backend_compile_time_s", None) or 0.0, dynamo_total)
            aot = 0.0
            backend = backend_total - codegen
        dynamo = dynamo_total - backend_total
    parts = {
        "dynamo": max(dynamo, 0.0),
        "aot_autograd": max(aot, 0.0),
        "backend": max(backend, 0.0),
        "codegen": max(codegen, 0.0),
    }
    parts["other"] = max(total - sum(parts.values()), 0.0)
    return parts


def record_total_s(rec: Any) -> float:
    """Wall seconds torch attributes to one compile record."""
    v = getattr(rec, "entire_frame_compile_time_s", None)
    if v is None:
        d = getattr(rec, "duration_us", None)
        v = (d or 0) / 1e6
    return float(v)


def is_frame_compile(rec: Any) -> bool:
    """A Dynamo frame compile (not a lazy backward nor a runtime record)."""
    return (
        getattr(rec, "is_forward", True) is not False
        and not getattr(rec, "is_runtime", False)
        and getattr(rec, "co_name", None) is not None
    )


def is_backward_compile(rec: Any) -> bool:
    return getattr(rec, "is_forward", True) is False and not getattr(rec, "is_runtime", False)


def cache_entries(fn: Callable[..., Any]) -> list[Any]:
    """Cache entries of a function (pass the original, not the compiled wrapper)."""
    require_torch()
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    code = getattr(fn, "__code__", fn)
    return list(_debug_get_cache_entry_list(code))


#: The profiler event torch emits around each Dynamo cache lookup.
CACHE_LOOKUP_EVENT = "TorchDynamo Cache Lookup"


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Kineto prints start/stop lines straight to file descriptor 2."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@dataclass
class MemoryFigure:
    """Bytes torch allocated on one device during a measured block."""

    device: str
    #: the most allocated at once above what was live when the block started
    peak_bytes: int
    #: allocated at the end, above the start (negative: the block freed more)
    end_bytes: int
    method: str
    #: allocation and free events read (the CPU method)
    events: int | None = None
    #: what the method changed that the user may notice
    note: str | None = None


#: How the CPU figure is obtained (said in the report).
CPU_MEMORY_METHOD = "torch profiler memory events (every CPU allocation and free, summed in order)"
CUDA_MEMORY_METHOD = "CUDA caching allocator statistics (memory_allocated, max_memory_allocated)"


class ProfilerBusy(RuntimeError):
    """Another torch profiler runs: torch allows one at a time."""


class CellProfiler:
    """torch's profiler for a block: cache lookups (``-g``), memory (``-m``), or both.

    * **lookups**: each ``TorchDynamo Cache Lookup`` event spans one lookup
      (building the frame's locals and running the guards); this needs every
      operator recorded, which slows the rest of the block.
    * **memory**: the CPU allocator reports every allocation and free to the
      profiler (``profile_memory``); summing them in order gives the bytes
      allocated above the start, its peak and its end. Alone, it records no
      operator (only the user-scope ranges), so the block runs at nearly its
      own speed; reading the events afterwards costs about 5 µs each, so a
      block with a million allocations pays seconds at its end.

    CUDA memory, when CUDA is in use, comes from the caching allocator's own
    statistics instead (its peak counter is reset at the start; the report
    says so).
    """

    def __init__(self, lookups: bool = False, memory: bool = False) -> None:
        require_torch()
        import torch
        from torch._C import _autograd, _profiler

        self.lookups = lookups
        self.memory = memory
        self._cuda: tuple[int, int, int] | None = None
        if _autograd._profiler_enabled():
            raise ProfilerBusy("another torch profiler is running (torch allows one at a time)")
        state = _profiler.ProfilerState.KINETO
        cfg = _profiler.ProfilerConfig(
            state, False, memory, False, False, False, _profiler._ExperimentalConfig()
        )
        activities = {_profiler.ProfilerActivity.CPU}
        # scopes: every operator for lookups; for memory alone only the user's
        # own record_function ranges, so operators are not recorded at all
        scopes = set() if lookups else {_profiler.RecordScope.USER_SCOPE}
        if memory and torch.cuda.is_available() and torch.cuda.is_initialized():
            dev = torch.cuda.current_device()
            before_peak = torch.cuda.max_memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            self._cuda = (dev, torch.cuda.memory_allocated(dev), before_peak)
        with _quiet_fd2():
            _autograd._prepare_profiler(cfg, activities)
            _autograd._enable_profiler(cfg, activities, scopes)

    def stop(self) -> tuple[list[float] | None, list[MemoryFigure]]:
        """(each lookup's seconds, or None; memory figures per device)."""
        import torch
        from torch._C import _autograd

        with _quiet_fd2():
            result = _autograd._disable_profiler()
        events = result.events()
        lookups = None
        if self.lookups:
            lookups = [e.duration_ns() / 1e9 for e in events if e.name() == CACHE_LOOKUP_EVENT]
        figures: list[MemoryFigure] = []
        if self.memory:
            cpu = _autograd.DeviceType.CPU
            mem = sorted(
                (e.start_ns(), e.nbytes())
                for e in events
                if e.name() == "[memory]" and e.device_type() == cpu
            )
            running = peak = 0
            for _, nbytes in mem:
                running += nbytes
                if running > peak:
                    peak = running
            figures.append(MemoryFigure("cpu", peak, running, CPU_MEMORY_METHOD, len(mem)))
        if self._cuda is not None:
            dev, start, before_peak = self._cuda
            now = torch.cuda.memory_allocated(dev)
            peak = torch.cuda.max_memory_allocated(dev)
            figures.append(
                MemoryFigure(
                    f"cuda:{dev}",
                    max(peak - start, 0),
                    now - start,
                    CUDA_MEMORY_METHOD,
                    note=(
                        "torch.cuda.max_memory_allocated() was reset at the start of the "
                        f"block (it stood at {before_peak} bytes)"
                    ),
                )
            )
        return lookups, figures


def resume_parts(co_name: str | None) -> tuple[str, int] | None:
    """``("f", 14)`` from a resume function's name, else None."""
    if not co_name:
        return None
    m = re.match(r"torch_dynamo_resume_in_(.+)_at_(\d+)$", co_name)
    return (m.group(1), int(m.group(2))) if m else None


def deque_limit() -> int | None:
    from torch._dynamo import utils

    return utils._compilation_metrics.maxlen
