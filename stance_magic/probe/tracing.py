"""Dynamo's tracing time by function: torch's own ``dynamo_profiler``
(``torch._dynamo.config.dynamo_profiler``, torch 2.13+), read inside a
measured window instead of printed.

torch times every function Dynamo traces, the compiled frame itself and
each function it inlines, with ``time.time_ns()`` around the inline call
(``symbolic_convert.profile_inline_call``, and ``OutputGraph``'s
``mark_bytecode_tracing_start``/``_stop`` for the frame), in a
``DynamoProfilerState`` per traced frame; at the end of the frame's bytecode
tracing it prints cProfile-style tables (``dump_stats``), or writes a
``.prof`` file when the setting is a path.

When a Dynamo compile starts inside a measured window (the recorder's
compile-start callback), :class:`TracingProfile` turns the setting on (it
is ``compile_ignored``: no cache key, guard or compile depends on it), and
methods of torch's ``DynamoProfilerState`` are replaced through the
recorder's patch table: ``record_timing`` (torch's record, kept as it is,
plus the function's qualified name and, for an ``nn.Module``'s ``forward``,
the module from Dynamo's module stack), ``dump_stats`` (the timings are
kept per compile id; nothing is printed), and ``push``/``pop`` (the
compiled frame's record where torch 2.13-2.15 fail to make it: see
:meth:`TracingProfile._make_pop`). A user who set ``dynamo_profiler``
keeps torch's output: the original ``dump_stats`` runs after ours. When the
window closes the setting is put back as it was, torch's "unset" included.

Timings are torch's: nothing here is estimated. A frame whose tracing
restarted keeps the attempt that finished (torch drops the state of the
others); a trace that failed writes no timings.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import time
import weakref
from typing import Any, Callable, NamedTuple

from .releases import TRACING_PROFILER_SINCE
from .version import torch_version

__all__ = [
    "TRACING_PROFILER_SINCE",
    "TracedCall",
    "TracingProfile",
    "module_path",
    "tracing_profiler",
]


class TracedCall(NamedTuple):
    """One function Dynamo traced once, as torch's ``FunctionTraceTiming``
    times it (nanoseconds of ``time.time_ns()``), with its qualified name
    and the module whose ``forward`` it is."""

    #: the code's qualified name (``GPT2Attention.forward``; its plain name
    #: on Python 3.10)
    name: str
    filename: str
    line: int
    #: inclusive: the function and everything traced inside it
    cum_ns: int
    #: exclusive: without the functions traced inside it
    own_ns: int
    #: bytes of bytecode (torch's ``len(co_code)``)
    bytecode: int
    #: 0 for the compiled frame, 1 for a function it called, ...
    depth: int
    #: False when the function was already on the traced stack (recursion):
    #: its inclusive time is then counted in the outer call (as pstats does)
    primitive: bool
    #: the module whose ``forward`` this is: its attribute path from Dynamo's
    #: module stack, as the user's code writes it (``self.h[0].attn``: see
    #: :func:`module_path`), and its class name
    module_path: str | None = None
    module_class: str | None = None


#: ``L['self']`` / ``G['model']`` at the start of Dynamo's module path
_SCOPE = re.compile(r"^[LG]\[(['\"])(.+?)\1\]")
#: ``.0`` in a path: an item of a ModuleList or Sequential (``h[0]``)
_ITEM = re.compile(r"\.(\d+)(?=\.|$)")


def module_path(path: str) -> str:
    """Dynamo's module path as the user's code writes it: ``L['self'].h.0.attn``
    is ``self.h[0].attn``, ``G['model'].layers.1`` is ``model.layers[1]``."""
    return _ITEM.sub(r"[\1]", _SCOPE.sub(lambda m: m.group(2), path, count=1))


@functools.cache
def tracing_profiler() -> Any:
    """torch's ``dynamo_profiler`` module, or None where torch has none."""
    if torch_version() < TRACING_PROFILER_SINCE:
        return None
    config = sys.modules.get("torch._dynamo.config")
    if config is None:
        import torch._dynamo.config as config
    if not hasattr(config, "dynamo_profiler"):
        return None
    try:
        import torch._dynamo.dynamo_profiler as dp
    except ImportError:  # pragma: no cover - a torch with the setting has the module
        return None
    if not hasattr(dp.DynamoProfilerState, "record_timing"):  # pragma: no cover
        return None
    return dp


#: nn.Module class -> the code object of its forward (what its decorators
#: wrap: a decorator's wrapper is traced as a function of its own)
_FORWARDS: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()


def _forward_code(cls: type) -> Any:
    try:
        return _FORWARDS[cls]
    except KeyError:
        code = _FORWARDS[cls] = getattr(_unwrap(getattr(cls, "forward", None)), "__code__", None)
        return code


def _unwrap(fn: Any) -> Any:
    try:
        return inspect.unwrap(fn) if fn is not None else None
    except ValueError:  # a cycle of __wrapped__
        return fn


def _code_and_module(frame: Any) -> tuple[Any, str | None, str | None]:
    """The code being timed and, where it is an nn.Module's forward, the
    module's path and class, read from torch's frames above ``record_timing``:
    ``profile_inline_call`` holds the code, ``inline_call`` (two frames
    further: contextlib's ``__exit__`` is between) the translator that
    called it, whose module stack's last entry is the module being called;
    for the compiled frame, ``mark_bytecode_tracing_stop``'s OutputGraph."""
    f_locals = frame.f_locals
    code = f_locals.get("code")
    if code is None:
        og = f_locals.get("self")
        root = getattr(og, "root_tx", None)
        return getattr(root, "f_code", None), None, None
    f = frame.f_back
    for _ in range(4):
        if f is None:
            break
        parent = f.f_locals.get("parent") if f.f_code.co_name == "inline_call" else None
        if parent is not None:
            stack = getattr(parent, "nn_module_stack", None)
            if stack:
                path, cls = next(reversed(stack.values()))
                if isinstance(cls, type) and code is _forward_code(cls):
                    return code, str(path), cls.__name__
            break
        f = f.f_back
    return code, None, None


class TracingProfile:
    """torch's ``dynamo_profiler`` turned on while a window is open, its
    timings kept per compile id (see the module's docstring).

    ``threads`` is the recorder's set of measured threads: a trace in another
    thread is left to torch."""

    __slots__ = (
        "_by_id",
        "_config",
        "_dp",
        "_get_ident",
        "_override",
        "_previous",
        "_threads",
        "enabled",
        "on",
    )

    def __init__(self, threads: Any, get_ident: Callable[[], int]) -> None:
        self._threads = threads
        self._get_ident = get_ident
        self._dp: Any = None
        self._config: Any = None
        #: the setting as found, and the user's override of it (torch's unset
        #: sentinel where none): both put back at stop
        self._previous: Any = False
        self._override: Any = None
        #: compile id -> (torch's state, how many of its timings were taken, the calls)
        self._by_id: dict[str, tuple[Any, int, list[TracedCall]]] = {}
        #: the setting is ours now (between start and stop)
        self.on = False
        #: windows turn the profiler on (see stance_magic's ``trace_functions``)
        self.enabled = True

    def start(self, patches: Any) -> bool:
        """Turn torch's profiler on and replace its methods through the
        recorder's ``patches`` (restored with them); False where torch has none."""
        if self.on:
            return True
        dp = tracing_profiler()
        if dp is None:
            return False
        import torch._dynamo.config as config

        self._dp, self._config = dp, config
        self._previous = config.dynamo_profiler
        state_cls = dp.DynamoProfilerState
        patches.apply(state_cls, "record_timing", self._make_record)
        patches.apply(state_cls, "dump_stats", self._make_dump)
        patches.apply(state_cls, "push", self._make_push)
        patches.apply(state_cls, "pop", self._make_pop)
        if not self._previous:
            entry = config._config.get("dynamo_profiler")
            self._override = entry.user_override.get() if entry is not None else None
            config.dynamo_profiler = True
        self.on = True
        return True

    def stop(self) -> None:
        """Put the setting back as it was (the methods go back with the
        recorder's patches)."""
        if not self.on:
            return
        self.on = False
        config = self._config
        if config.dynamo_profiler is True and not self._previous:
            config.dynamo_profiler = self._previous  # (torch marks its settings changed)
            entry = config._config.get("dynamo_profiler")
            if entry is not None and self._override is not None:
                # no override where the user had none (torch's unset sentinel)
                entry.user_override.set(self._override)

    def take(self, compile_id: str) -> list[TracedCall]:
        """The timings of one compile (each taken once), or []."""
        entry = self._by_id.pop(compile_id, None)
        return entry[2] if entry is not None else []

    def clear(self) -> None:
        self._by_id.clear()

    # -- torch's methods, replaced -------------------------------------------
    def _make_record(self, orig: Any) -> Any:
        profile = self

        @functools.wraps(orig)
        def record_timing(state: Any, timing: Any) -> None:
            orig(state, timing)
            if not profile.on or profile._get_ident() not in profile._threads:
                return
            try:
                code, path, cls = _code_and_module(sys._getframe(1))
                name = getattr(code, "co_qualname", None) or timing.func_name
                # (torch's own field, kept beside its record, read at dump_stats)
                state.__dict__.setdefault("_stance_magic_named", {})[len(state.timings) - 1] = (
                    name,
                    path,
                    cls,
                )
            except Exception:  # naming is a nicety: never break a compile
                return

        return record_timing

    def _make_push(self, orig: Any) -> Any:
        @functools.wraps(orig)
        def push(state: Any, *args: Any, **kwargs: Any) -> None:
            orig(state, *args, **kwargs)
            if len(state.stack) == 1:
                # the compiled frame's entry (mark_bytecode_tracing_start):
                # its code, kept for the record torch cannot make (see pop)
                og = sys._getframe(1).f_locals.get("self")
                state.__dict__["_stance_magic_root"] = getattr(
                    getattr(og, "root_tx", None), "f_code", None
                )

        return push

    def _make_pop(self, orig: Any) -> Any:
        """torch 2.13-2.15 read the compiled frame's code from the OutputGraph's
        ``root_tx`` when its entry leaves the stack; a graph break ends the
        trace after the OutputGraph's cleanup has dropped it, and torch's
        ``mark_bytecode_tracing_stop`` raises AttributeError (bare torch with
        the setting on fails every frame that graph-breaks). There the entry
        is recorded here, as torch records it, with the code kept at push,
        and torch is given None (its "nothing on the stack")."""
        dp = self._dp

        @functools.wraps(orig)
        def pop(state: Any) -> Any:
            f = sys._getframe(1)
            if len(state.stack) != 1 or f.f_code.co_name != "mark_bytecode_tracing_stop":
                return orig(state)
            og = f.f_locals.get("self")
            if og is None or getattr(og, "root_tx", True) is not None:
                return orig(state)
            entry = orig(state)
            # (named code: record_timing reads the qualified name from it)
            code = state.__dict__.get("_stance_magic_root")
            cum = time.time_ns() - entry.start_time_ns
            state.record_timing(
                dp.FunctionTraceTiming(
                    func_name=entry.func_name,
                    filename=entry.filename,
                    firstlineno=entry.firstlineno,
                    cumtime_ns=cum,
                    tottime_ns=cum - entry.child_time_ns,
                    bytecode_count=len(code.co_code) if code is not None else 0,
                    inline_depth=0,
                    is_primitive_call=entry.is_primitive_call,
                )
            )
            return None

        return pop

    def _make_dump(self, orig: Any) -> Any:
        profile = self

        @functools.wraps(orig)
        def dump_stats(state: Any, *args: Any, **kwargs: Any) -> None:
            if profile.on and profile._get_ident() in profile._threads:
                try:
                    profile._keep(state)
                except Exception:  # a nicety: never break a compile
                    pass
                if not profile._previous:
                    return  # the setting is ours: nothing printed
            orig(state, *args, **kwargs)

        return dump_stats

    def _keep(self, state: Any) -> None:
        from torch._guards import CompileContext

        cid = str(CompileContext.current_compile_id())
        entry = self._by_id.get(cid)
        if entry is not None and entry[0] is state:
            _, taken, calls = entry
        else:
            taken, calls = 0, []  # a first dump, or a trace that restarted
        named = state.__dict__.get("_stance_magic_named", {})
        timings = state.timings
        for i in range(taken, len(timings)):
            t = timings[i]
            name, path, cls = named.get(i, (t.func_name, None, None))
            calls.append(
                TracedCall(
                    name=name,
                    filename=t.filename,
                    line=t.firstlineno,
                    cum_ns=t.cumtime_ns,
                    own_ns=t.tottime_ns,
                    bytecode=t.bytecode_count,
                    depth=t.inline_depth,
                    primitive=t.is_primitive_call,
                    module_path=module_path(path) if path is not None else None,
                    module_class=cls,
                )
            )
        self._by_id[cid] = (state, len(timings), calls)
