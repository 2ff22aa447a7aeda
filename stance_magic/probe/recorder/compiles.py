"""torch's compile records, enriched as torch writes them: the frame,
its module, its shapes, its stance and backend, the miss it answers."""

from __future__ import annotations

import sys
import types
from typing import Any

from ..backends import backend_name
from ..frames import (
    _compiling_code,
    _describe_frame,
    _direct_owner,
    _module_in_scope,
    _module_location,
    user_frames,
)
from ..precompile import failed_guards
from ..records import (
    RecordInfo,
    _aot_dispatch_count,
    _example_calls,
    _limit_from_record,
    is_frame_compile,
    is_module_wrapper,
    mark_unwinding,
)
from ..releases import (
    inline_wrapped,
)
from ..shapes import _graph_shapes
from ..stances import _EAGER_STANCES
from .outcomes import MISS_COMPILED, MISS_LIMIT


class CompilesMixin:
    """Collects and enriches torch's ``CompilationMetrics`` records. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

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
        info.precompile_failures = self._precompile_failures.pop(cid, [])
        miss = self._pending
        if is_frame_compile(rec):
            info.traced = self._tracing.take(cid)
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

    def _user_compiler_wrapper(self, orig: Any) -> Any:
        """Dynamo hands each graph to the backend here: read its inputs'
        sizes and the shape environment's symbols before it does."""
        recorder = self

        def call_user_compiler(og: Any, gm: Any, example_inputs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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
            code = getattr(builder, "f_code", None)
            cid = str(CompileContext.current_compile_id())
            mod = _module_in_scope(local_scope, code)
            if mod is not None:
                self._module_by_id[cid] = _module_location(mod)
            # a frame traced although torch installed a precompiled one for
            # its code: which of that one's guards refused these locals
            failed = failed_guards(code, local_scope)
            if failed:
                self._precompile_failures[cid] = failed
        except Exception:  # naming is a nicety: never break a compile
            return
