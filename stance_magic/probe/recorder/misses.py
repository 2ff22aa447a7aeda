"""Cache misses: what torch did after each (recompiled, refused, ran
eagerly, hit its recompile limit), the guards that failed, and each
frame's recompile budget."""

from __future__ import annotations

import sys
import types
from typing import Any

from ..frames import (
    _compiling_code,
    _describe_frame,
    _identity_context,
    _weak,
)
from ..records import (
    FrameBudget,
    LimitHit,
    _cache_entry_count,
    _config_value,
    recompile_limit_name,
)
from ..releases import (
    REFUSAL_GUARDS_SINCE,
    callback_recompile_limit,
    per_call_recompile_limit,
)
from ..version import torch_version
from .outcomes import MISS_EAGER, MISS_LIMIT, MISS_NONE, MISS_REFUSED
from .window import Window


class MissesMixin:
    """Attributes misses and recompile limits; reads budgets. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

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
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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

    def _exceeds_wrapper(self, orig: Any) -> Any:
        def exceeds_recompile_limit(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
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
