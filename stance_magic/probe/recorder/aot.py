"""``aot_compile`` and ``load_compiled_function`` (torch 2.9+): compiles
and calls that never reach Dynamo's dispatcher, wrapped from the first
window: while the loaded extension holds them (see
:func:`stance_magic.probe.watch.hold`) until the recorder is uninstalled,
showing as torch's own (name, docstring, signature); otherwise until the
last window closes."""

from __future__ import annotations

import sys
import types
from typing import Any

from ..frames import (
    describe_callable,
)
from ..records import (
    RecordInfo,
    mark_unwinding,
)
from ..watch import faithful
from .events import Call, Loaded
from .outcomes import (
    AOT_COMPILE,
    AOT_PART,
    CALL_CACHED,
    CALL_FAILED,
    CALL_REFUSED,
    WHY_AOT,
    WHY_AOT_GUARDS,
    WHY_OWN_ERROR,
)

#: torch's module and functions for aot_compile (2.9+)
_AOT_MODULE = "torch._dynamo.aot_compile"
_AOT_FN = "aot_compile_fullgraph"
_AOT_LOAD_FN = "load_compiled_function"
_AOT_GUARD_FAILED = "GuardManager check failed"


def _describe_aot(obj: Any) -> tuple[str, str, int | None]:
    """(name, file, first line) of what aot_compile compiled: a function, a
    module's method, or an aot-compiled function (its original code)."""
    artifacts = getattr(obj, "_artifacts", None)
    code = getattr(artifacts, "original_code", None) if artifacts is not None else None
    if isinstance(code, types.CodeType):
        return getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno
    return describe_callable(obj)


class AotMixin:
    """Wraps torch's ahead-of-time compile, its calls and its loads. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

    def _install_aot(self) -> None:
        """torch.compile(...).aot_compile(...) and what it makes (torch 2.9+):
        no dispatch reaches them, so they are wrapped from the first window
        on, once, and, while the extension holds them, stay until
        :meth:`uninstall` (outside a window the wrappers only pass the call
        on: a cell's start and end patch nothing more); a ``measure()``
        block's last window takes them out."""
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

    def _aot_compile_wrapper(self, orig: Any) -> Any:
        """torch's ``aot_compile_fullgraph`` (``torch.compile(fn,
        fullgraph=True).aot_compile(...)``): a Dynamo trace and a backend
        compile outside any call, whose records torch writes without a code
        name or compile id; they are named after ``fn`` here."""
        rec = self

        def aot_compile_fullgraph(model: Any, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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
        return faithful(aot_compile_fullgraph, orig)

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
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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
                rec._events.append(Call(None, outcome, why, stance))

        __call__._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(__call__, orig)

    def _aot_load_wrapper(self, orig: Any) -> Any:
        """``torch.compiler.load_compiled_function``: a compiled function
        read back with no tracing and no record; timed here."""
        rec = self

        def load_compiled_function(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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
                    rec._events.append(Loaded(frame, err, t - t0, t))
                except Exception:  # a nicety: never break torch
                    pass

        load_compiled_function._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(load_compiled_function, orig)
