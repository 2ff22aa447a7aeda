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
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

#: Oldest torch with ``torch.compiler.set_stance``.
MIN_TORCH = (2, 6)

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
            f"stance_magic needs torch >= {_fmt(MIN_TORCH)} "
            f"(torch.compiler.set_stance); this is torch {torch.__version__}"
        )
    _TORCH_CHECKED = True


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
                f"({_torch_str()}); stance_magic supports torch {_fmt(MIN_TORCH)} to 2.14"
            )
    _EVAL_FRAME = eval_frame
    return eval_frame


def _torch_str() -> str:
    import torch

    return torch.__version__


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
        # torch's own function, not a CompiledCallCounter's wrapper around it
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


class CompiledCallCounter:
    """Counts calls into ``torch.compile``'d functions and modules, whatever
    the stance makes of them (compiled, looked up, or run eagerly under
    ``force_eager``), between :meth:`start` and :meth:`stop`.

    Every such call asks torch's ``_callback_from_stance`` what to do; the
    counter wraps that function only while it is started, so nothing is
    added to calls made outside (``%stance watch`` starts it per cell).
    """

    def __init__(self) -> None:
        self.calls = 0
        self._orig: Any = None
        self._wrapper: Any = None

    def start(self) -> CompiledCallCounter:
        ef = _eval_frame()
        orig = ef._callback_from_stance

        def counting(callback: Any) -> Any:
            self.calls += 1
            return orig(callback)

        counting.__wrapped__ = orig  # type: ignore[attr-defined]
        self._orig, self._wrapper = orig, counting
        ef._callback_from_stance = counting
        return self

    def stop(self) -> int:
        """Unwrap (if still ours) and return the number of calls counted."""
        if self._wrapper is not None:
            ef = _eval_frame()
            if ef._callback_from_stance is self._wrapper:
                ef._callback_from_stance = self._orig
            self._orig = self._wrapper = None
        return self.calls


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
# The recorder: compile records, cache lookups, guard check cost, counters
# --------------------------------------------------------------------------

#: Per-entry guard checks are timed this many times at compile time (median).
GUARD_TIMING_REPEATS = 15


@dataclass
class Window:
    """What the recorder saw between :meth:`Recorder.start` and ``stop``."""

    records: list[Any] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    cold_compiles: int = 0
    graph_breaks: dict[str, int] = field(default_factory=dict)
    known_costs_s: dict[str, float] = field(default_factory=dict)
    #: compile_id -> (name, file, line) of the module a torch.compile(module)
    #: wrapper frame calls, so reports name the model, not torch's wrapper
    module_frames: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)
    #: first calls that eager_then_compile ran eagerly (no lookup, no compile)
    eager_first_calls: int = 0
    #: (lookups, seconds) from the profiler, when --profile-guards was asked for
    profiled_lookups: tuple[int, float] | None = None


@dataclass
class _Mark:
    """Running totals at the start of a window."""

    hits: int
    misses: int
    cold: int
    compiles: int
    start_len: int
    graph_breaks: dict[str, int]
    examples: dict[str, int]


class Recorder:
    """Installs the hooks that measure torch.compile, once per extension.

    * a guard-complete hook counts cache hits and misses (torch calls it
      after every cache lookup; the first call into an empty cache does not
      look up, so a compile not preceded by a miss is counted as a cold miss);
    * a compile-start callback counts compiles and widens the record deque;
    * ``guard_manager_testing_hook_fn`` times each new cache entry's guard
      check warm, at compile time;
    * the compilation-metrics deque is widened while a window is open, so a
      cell with more than 64 compiles keeps all of its records.

    Hooks chain to whatever was installed before and are removed on
    :meth:`uninstall`, leaving torch as it was.
    """

    def __init__(self) -> None:
        self.installed = False
        self._prev_guard_hook: Any = None
        self._prev_testing_hook: Any = None
        self._open = 0
        self._hits = 0
        self._misses = 0
        self._pending_misses = 0
        self._cold = 0
        self._saved_limit: int | None = None
        #: compiles started so far (every trigger), a running total
        self.compile_starts = 0
        #: compile_id -> warm guard check seconds, for entries alive now
        self.entry_costs_s: dict[str, float] = {}
        self.module_frames: dict[str, tuple[str, str, int | None]] = {}

    # -- installation -----------------------------------------------------
    def install(self) -> None:
        if self.installed:
            return
        require_torch()
        import torch._dynamo.guards as guards
        from torch._C._dynamo import eval_frame as c_eval_frame

        if not hasattr(c_eval_frame, "set_guard_complete_hook"):
            raise TorchSupportError(
                f"torch {_torch_str()} has no set_guard_complete_hook; cache hits cannot be counted"
            )
        self._prev_guard_hook = c_eval_frame.set_guard_complete_hook(self._guard_hook)
        self._prev_testing_hook = getattr(guards, "guard_manager_testing_hook_fn", None)
        guards.guard_manager_testing_hook_fn = self._testing_hook
        self._register_callbacks()
        self.installed = True

    def _register_callbacks(self) -> None:
        from torch._dynamo.callback import callback_handler

        if self._on_start not in callback_handler.start_callbacks:
            callback_handler.register_start_callback(self._on_start)

    def ensure_installed(self) -> None:
        """Re-register what ``torch.compiler.reset()`` cleared."""
        if not self.installed:
            self.install()
            return
        from torch._dynamo.callback import callback_handler

        if self._on_start not in callback_handler.start_callbacks:
            # torch._dynamo.reset() clears the callbacks and restarts compile
            # ids at 0/0: the entries we timed are gone too.
            self.entry_costs_s.clear()
            self._register_callbacks()

    def uninstall(self) -> None:
        if not self.installed:
            return
        self.close_all()
        import torch._dynamo.guards as guards
        from torch._C._dynamo import eval_frame as c_eval_frame
        from torch._dynamo.callback import callback_handler

        c_eval_frame.set_guard_complete_hook(self._prev_guard_hook)
        if guards.guard_manager_testing_hook_fn == self._testing_hook:
            guards.guard_manager_testing_hook_fn = self._prev_testing_hook
        for lst, fn in ((callback_handler.start_callbacks, self._on_start),):
            while fn in lst:
                lst.remove(fn)
        self.installed = False

    # -- hooks (hot path: keep them tiny) ---------------------------------
    def _guard_hook(self, cache_hit: bool) -> bool:
        if cache_hit:
            self._hits += 1
        else:
            self._misses += 1
            self._pending_misses += 1
        prev = self._prev_guard_hook
        if prev is not None:
            return prev(cache_hit)
        return cache_hit

    def _on_start(self, args: Any) -> None:
        if self._open and self._saved_limit is None:
            # A compile is starting inside the window: widen torch's record
            # deque (before its record lands) so none of this window's drop.
            from torch._dynamo import utils

            self._saved_limit = utils._compilation_metrics.maxlen
            utils.set_compilation_metrics_limit(len(utils._compilation_metrics) + 1_000_000)
        self.compile_starts += 1
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "DYNAMO")
        if trigger != "DYNAMO":
            return
        if self._pending_misses:
            self._pending_misses -= 1
        else:
            self._cold += 1

    def _testing_hook(self, guard_manager: Any, local_scope: Any, builder: Any) -> None:
        prev = self._prev_testing_hook
        if prev is not None:
            prev(guard_manager, local_scope, builder)
        try:
            from torch._guards import CompileContext

            cid = str(CompileContext.current_compile_id())
            check = guard_manager.check
            samples = []
            clock = time.perf_counter
            for _ in range(GUARD_TIMING_REPEATS):
                t0 = clock()
                check(local_scope)
                samples.append(clock() - t0)
            samples.sort()
            cost = samples[len(samples) // 2]
        except Exception:
            return
        self.entry_costs_s[cid] = cost
        fn = local_scope.get("fn") if hasattr(local_scope, "get") else None
        if fn is not None and _is_module(fn):
            self.module_frames[cid] = _module_location(fn)

    # -- windows ----------------------------------------------------------
    def start(self) -> _Mark:
        """Open a measuring window; windows nest, each sees what ran inside it.

        The hooks keep running totals; a window is the difference between
        the totals at its :meth:`stop` and at its start (the returned mark).
        """
        self.ensure_installed()
        from torch._dynamo import utils

        if not self._open:
            self._saved_limit = None  # widened by _on_start if anything compiles
        self._open += 1
        return _Mark(
            hits=self._hits,
            misses=self._misses,
            cold=self._cold,
            compiles=self.compile_starts,
            start_len=len(utils._compilation_metrics),
            graph_breaks=dict(utils.counters.get("graph_break", {})),
            examples=_example_input_counts(),
        )

    def stop(self, mark: _Mark) -> Window:
        """Close the window opened with ``mark`` and return what it saw."""
        from torch._dynamo import utils

        self._open = max(self._open - 1, 0)
        dq = utils._compilation_metrics
        n_new = self.compile_starts - mark.compiles
        records = list(dq)[mark.start_len :] if len(dq) >= mark.start_len else list(dq)
        if not n_new:
            records = [r for r in records if getattr(r, "is_runtime", False)]
        if not self._open and self._saved_limit is not None:
            utils.set_compilation_metrics_limit(self._saved_limit)
            self._saved_limit = None
        gb_now = utils.counters.get("graph_break", {})
        before_gb = mark.graph_breaks
        breaks = {
            reason: n - before_gb.get(reason, 0)
            for reason, n in gb_now.items()
            if n - before_gb.get(reason, 0) > 0
        }
        before = mark.examples
        eager_first = sum(
            1 for k, n in _example_input_counts().items() if n >= 1 and before.get(k, 0) == 0
        )
        return Window(
            eager_first_calls=eager_first,
            module_frames=dict(self.module_frames),
            records=records,
            hits=self._hits - mark.hits,
            misses=self._misses - mark.misses,
            cold_compiles=self._cold - mark.cold,
            graph_breaks=breaks,
            known_costs_s=dict(self.entry_costs_s),
        )

    def close_all(self) -> None:
        """Give torch its record limit back if windows were left open."""
        if self._open:
            self._open = 1
            self.stop(self.start())
            self._open = 0

    @property
    def open(self) -> bool:
        return self._open > 0


def _example_input_counts() -> dict[str, int]:
    """Calls eager_then_compile has seen per frame (torch keeps their inputs)."""
    inputs = getattr(_eval_frame(), "_EXAMPLE_INPUTS", None)
    if not inputs:
        return {}
    # Keys are filename + first line; torch's own frames traced while
    # compiling land here too and are not user calls.
    torch_dir = _torch_dir()
    return {k: len(v) for k, v in inputs.items() if not k.startswith(torch_dir)}


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
    return rec.co_name == "inner" and filename.endswith(("_dynamo/external_utils.py",))


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


class LookupProfiler:
    """Times cache lookups with torch's profiler (``--profile-guards``).

    Each ``TorchDynamo Cache Lookup`` event spans one lookup: building the
    frame's locals and running the guards. It is a measurement, unlike the
    default estimate, and it works under skip_guard_eval_unsafe; the profiler
    slows the rest of the cell, so wall time is inflated while it runs.
    """

    def __init__(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=[ProfilerActivity.CPU])
        with _quiet_fd2():
            self._prof.__enter__()

    def stop(self) -> tuple[int, float]:
        """(number of lookups, total seconds)."""
        with _quiet_fd2():
            self._prof.__exit__(None, None, None)
        events = [e for e in self._prof.events() if e.name == CACHE_LOOKUP_EVENT]
        return len(events), sum(e.cpu_time_total for e in events) / 1e6


def resume_location(co_name: str | None) -> str | None:
    """``f at line 14`` from a resume function name, else None."""
    if not co_name:
        return None
    m = re.match(r"torch_dynamo_resume_in_(.+)_at_(\d+)$", co_name)
    return f"{m.group(1)}, line {m.group(2)}" if m else None


def deque_limit() -> int | None:
    from torch._dynamo import utils

    return utils._compilation_metrics.maxlen
