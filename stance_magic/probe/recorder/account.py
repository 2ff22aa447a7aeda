"""The call account: how each torch.compile call ended, decided once."""

from __future__ import annotations

from typing import Any

from ..records import (
    is_frame_compile,
    reached_cell,
)
from .calls import _Activation
from .events import Call
from .outcomes import (
    CALL_CACHED,
    CALL_COMPILED,
    CALL_EAGER,
    CALL_FAILED,
    CALL_REFUSED,
    MISS_EAGER,
    MISS_LIMIT,
    MISS_REFUSED,
    WHY_COMPILE_ERROR,
    WHY_COMPILE_FAILED,
    WHY_EAGER_ON_RECOMPILE,
    WHY_FAIL_ON_RECOMPILE,
    WHY_FIRST_CALL,
    WHY_FORCE_EAGER,
    WHY_LIMIT,
    WHY_NOTHING_CACHED,
    WHY_OWN_ERROR,
    WHY_PRECOMPILED,
    WHY_SKIPPED,
    WHY_UNSAFE,
)


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


class AccountMixin:
    """Decides each call's outcome (:meth:`_resolve`). A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

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
                # a nested frame compiled while this call ran eagerly: its
                # compile's error, where it reached the caller, is the call's
                if getattr(rec, "fail_type", None) and exc is not None and reached_cell(ri, exc):
                    ri.reached_caller = reached = True
                continue
            if getattr(rec, "fail_type", None):
                failed_compile = True
                if ri is not None and exc is not None and reached_cell(ri, exc):
                    ri.reached_caller = reached = True
            else:
                ran_compiled = True
        stance = act.stance
        # eager_then_compile's first call runs its frame eagerly: no lookup of
        # its own, nothing of its own compiled (a precompiled frame runs its
        # saved code instead), whatever it then does
        first = (
            stance == "eager_then_compile"
            and not act.hit
            and miss is None
            and not ran_compiled
            and not failed_compile
            and not _has_precompiled(act.target)
        )
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
        self._events.append(Call(fn, outcome, why, stance, first))
        return outcome
