"""Installation: torch's attributes the recorder replaces while a window
is open (the dispatcher, the compile-record writer, the guard hooks,
the recompile wrappers), the reset sentinel and the recompile-context
hook, and taking all of it out again."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..anatomy import CallClock
from ..frames import (
    _compile_wrapper_code,
)
from ..precompile import SOURCE_CHECK
from ..records import (
    _aot_dispatch_count,
)
from ..releases import (
    recompile_context_registry,
)
from ..version import TorchSupportError, _eval_frame, require_torch, torch_str

#: torch's function that lists every cache entry's failed guard (convert_frame
#: imports it by name; fail_on_recompile's callback imports it at call time).
_REASONS_FN = "get_and_maybe_log_recompilation_reasons"
#: torch's check of the recompile limit (convert_frame imports it by name).
_EXCEEDS_FN = "exceeds_recompile_limit"


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


class InstallMixin:
    """Puts the hooks into torch and takes them out. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

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
        cfs = self._orig_cfs = t.ef._callback_from_stance
        fns = self._hook_fns
        if fns is None or fns[2] is not cfs:
            fns = self._hook_fns = (*self._make_hooks(), cfs)
        self._orig_chromium = getattr(t.utils, "add_compilation_metrics_to_chromium", None)
        self._aot_seen = _aot_dispatch_count()
        # every torch attribute replaced while a window is open, in one table
        self._patches.replace(t.ef, "_callback_from_stance", fns[0])
        self._patches.replace(t.utils, "add_compilation_metrics_to_chromium", self._on_record)
        if not SOURCE_CHECK.installed and SOURCE_CHECK.possible:
            config = sys.modules.get("torch._dynamo.config")
            if config is not None and getattr(config, "caching_precompile", False):
                # the user turned torch's precompiled frames on: cells are
                # checked (kept for the process; see probe.precompile)
                SOURCE_CHECK.install(by_window=True)
        if not self._aot_patches:
            self._install_aot()
        self._register_sentinel()
        self._hooks_on = True

    def trace_functions(self, on: bool) -> None:
        """Whether the next outermost window turns torch's dynamo_profiler on
        (see probe.tracing); a window already open keeps what it has."""
        if not self._marks:
            self._tracing.enabled = on

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
        # torch logs a graph break only while Dynamo traces a frame, which a
        # dispatch starts: the capture is on from here (see LogsMixin)
        self._install_log_capture()
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
            self._starting = None
            self._profiled(self._bounds.stop(in_cell=False))
            guard_hook = self._hook_fns[1] if self._hook_fns else None
            now = t.c_eval_frame.set_guard_complete_hook(self._prev_guard_hook)
            if now is not None and now is not guard_hook:
                # someone hooked in after us: leave theirs (ours passes through)
                t.c_eval_frame.set_guard_complete_hook(now)
            self._resume.stop()
            self._unregister_context_hook()
            self._armed = False
        self._tracing.stop()
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
        """A compile-start callback: torch.compiler.reset() clears these, so
        its absence at the end of a window says a reset ran. torch calls it
        as a Dynamo compile starts, before the trace: torch's tracing profiler
        goes on there (see probe.tracing), so a cell that only runs cached
        code never pays for it."""
        handler = _torch_hooks().callback_handler
        if self._sentinel is None:
            recorder = self

            def stance_magic_reset_sentinel(*args: Any) -> None:
                t = recorder._tracing
                if t.enabled and not t.on and recorder._armed:
                    if recorder._get_ident() in recorder._threads:
                        try:
                            t.start(recorder._patches)
                        except Exception:  # a nicety: never break a compile
                            return None
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

    def uninstall(self) -> None:
        """Close every window and take everything out of torch."""
        self.close_all()
        self._uninstall_hooks()
        self._uninstall_log_capture()
        self._aot_patches.restore()
