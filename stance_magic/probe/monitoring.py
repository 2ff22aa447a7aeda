"""Python 3.12+: when a nested cache lookup starts (``sys.monitoring``).

Dynamo looks up every frame it runs, not only the one torch.compile's call
hands it: after a graph break the compiled code calls a *resume function*
(``torch_dynamo_resume_in_<fn>_at_<line>``) for the rest of the frame, and a
frame run eagerly (a module's ``_call_impl`` after a break in a hook) calls
functions that Dynamo compiles on their own. The recorder's guard-complete
hook sees each of those lookups end, but before Python 3.12 nothing marks
their start: they are counted, not timed, and the report's figure is a lower
bound. ``sys.monitoring`` (PEP 669) gives a ``CALL`` event in the calling
code just before each call; enabled on the code that made such a lookup
(the first lookup from it is still untimed), and only while a window is
open, the last call it made marks the start: the lookup then runs from that
call to the guard-complete hook, as the top-level lookups run from
torch.compile's call into Dynamo to the hook. While a cell is measured, every
call those callers make pays the event (about a microsecond); none is paid
outside measured cells.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import Any

#: sys.monitoring exists from Python 3.12 (PEP 669)
AVAILABLE = sys.version_info >= (3, 12)


def _call_span() -> int:
    """Bytes a ``CALL`` instruction takes with its inline caches (8 in 3.12
    and 3.13). A frame inside a call reports ``f_lasti`` at the ``CALL``
    (3.13) or at its last cache entry (3.12)."""
    import dis

    caches = getattr(dis, "_inline_cache_entries", None)
    op = dis.opmap.get("CALL")
    try:
        n = caches["CALL"] if isinstance(caches, dict) else caches[op]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        n = 3
    return 2 * (1 + int(n))


CALL_SPAN = _call_span() if AVAILABLE else 8

#: Python 3.12 gives no CALL event for a call with ``*args, **kwargs``
#: (``CALL_FUNCTION_EX``, as torch's compiled code calls its resume functions
#: and ``Module._call_impl`` calls ``forward``): a lookup such a call makes
#: stays untimed there (the instruction check in ``start_of`` keeps an earlier
#: call from standing for it); 3.13 gives the event
EX_CALLS_SEEN = sys.version_info >= (3, 13)
#: tool ids tried, in order (0, 1, 2 and 5 are named for debuggers,
#: coverage, profilers and optimizers)
TOOL_IDS = (4, 3)
TOOL_NAME = "stance_magic"


class CallStarts:
    """The calls made by the code that makes nested lookups, while on.

    :meth:`watch` enables ``CALL`` events on one code object (kept weakly, and
    enabled again by every later :meth:`start`); :meth:`start_of` hands the
    guard-complete hook the moment the lookup it ends began.
    """

    def __init__(self, clock: Any = time.perf_counter, cpu: Any = time.thread_time) -> None:
        self._clock = clock
        #: the thread's CPU clock, read beside it (see calls.WAITED_S)
        self._cpu = cpu
        self._tool: int | None = None
        self._codes: weakref.WeakSet[Any] = weakref.WeakSet()
        #: the code, instruction, clock and thread of the last call a watched code made
        self._last_code: Any = None
        self._last_offset = -1
        self._last_t = 0.0
        self._last_c = 0.0
        self._last_thread = 0
        #: why it is off (None while on or never tried)
        self.reason: str | None = None if AVAILABLE else "needs Python 3.12+ (sys.monitoring)"

    @property
    def on(self) -> bool:
        return self._tool is not None

    def start(self) -> bool:
        """Take a free tool id and enable the events on the code watched so
        far; False (and :attr:`reason`) when sys.monitoring is unavailable or
        every tool id is taken by another tool."""
        if self._tool is not None:
            return True
        if not AVAILABLE:
            return False
        mon = sys.monitoring
        for tool in TOOL_IDS:
            if mon.get_tool(tool) is None:
                try:
                    mon.use_tool_id(tool, TOOL_NAME)
                except ValueError:  # taken meanwhile
                    continue
                mon.register_callback(tool, mon.events.CALL, self._on_call)
                self._tool = tool
                self.reason = None
                for code in list(self._codes):
                    self._enable(code)
                return True
        self.reason = f"sys.monitoring tool ids {TOOL_IDS} are taken by other tools"
        return False

    def stop(self) -> None:
        """Disable every event and give the tool id back."""
        tool, self._tool = self._tool, None
        self._last_code = None
        if tool is None:
            return
        mon = sys.monitoring
        for code in list(self._codes):
            try:
                mon.set_local_events(tool, code, 0)
            except (ValueError, TypeError):  # pragma: no cover - code gone
                pass
        mon.register_callback(tool, mon.events.CALL, None)
        mon.free_tool_id(tool)

    def watch(self, code: Any) -> bool:
        """Enable the events on ``code`` (a caller of a nested lookup)."""
        if self._tool is None or code in self._codes:
            return False
        try:
            self._codes.add(code)
        except TypeError:  # pragma: no cover - not weak-referenceable
            return False
        self._enable(code)
        return True

    def _enable(self, code: Any) -> None:
        try:
            sys.monitoring.set_local_events(self._tool, code, sys.monitoring.events.CALL)
        except (ValueError, TypeError):  # pragma: no cover - not instrumentable
            self._codes.discard(code)

    def _on_call(self, code: Any, offset: int, callable_: Any, arg0: Any) -> None:
        pre = self._clock()
        self._last_c = self._cpu()  # before the clock (see recorder.calls.WAITED_S)
        self._last_t = t = self._clock()
        if t - pre > 10e-6:  # preempted at the CPU clock's call: as if the span waited
            self._last_c += t - pre
        self._last_code = code
        self._last_offset = offset
        self._last_thread = threading.get_ident()

    def start_of(self, caller: Any) -> tuple[float, float] | None:
        """When the lookup that just ended began (the clock's reading and the
        thread's CPU clock's): the last call, on this thread, made by the
        instruction the calling frame ``caller`` is at (taken once), else
        None. The instruction must match: Python 3.12 gives no event for a
        call with ``*args, **kwargs``
        (``CALL_FUNCTION_EX``), and an earlier call of the same code must not
        stand for it."""
        if (
            self._last_code is not caller.f_code
            or not 0 <= caller.f_lasti - self._last_offset < CALL_SPAN
            or self._last_thread != threading.get_ident()
        ):
            return None
        self._last_code = None
        return self._last_t, self._last_c
