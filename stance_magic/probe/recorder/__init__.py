"""The recorder: torch's hooks while a measuring window is open, and what
each window saw. One class, :class:`Recorder`, made of one part per concern:

========================  =====================================================
``core``                  the recorder: windows open and close, a window's figures
``install``               torch's attributes replaced while a window is open
``calls``                 the per-call hooks (the hot path), lookup timing, sampling
``account``               how each torch.compile call ended (the call account)
``misses``                cache misses, refusals, recompile limits, budgets
``compiles``              torch's compile records, enriched as torch writes them
``aot``                   ``aot_compile`` and ``load_compiled_function``
``logs``                  graph breaks from torch's ``graph_breaks`` log
``window``                what a window saw, as plain records
``events``                the events the hooks write, one small record per kind
``outcomes``              the words of an outcome (``CALL_``, ``WHY_``, ``MISS_``)
========================  =====================================================

The parts share the recorder's slots: the per-call hooks are closures over
them, the cheapest reads Python has, and the hot path pays no hop from one
part to another.
"""

from __future__ import annotations

from .calls import SAMPLE_EVERY, SAMPLE_FIRST, STEADY_EVERY, STEADY_FIRST, WAITED_S
from .core import Recorder, clocks, following
from .outcomes import (
    AOT_COMPILE,
    AOT_PART,
    CALL_CACHED,
    CALL_COMPILED,
    CALL_EAGER,
    CALL_FAILED,
    CALL_OUTCOMES,
    CALL_REFUSED,
    MISS_COMPILED,
    MISS_EAGER,
    MISS_LIMIT,
    MISS_NONE,
    MISS_REFUSED,
    WHY_AOT,
    WHY_AOT_GUARDS,
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
from .window import AotLoad, MissEvent, Target, Window

__all__ = [
    "AOT_COMPILE",
    "AOT_PART",
    "CALL_CACHED",
    "CALL_COMPILED",
    "CALL_EAGER",
    "CALL_FAILED",
    "CALL_OUTCOMES",
    "CALL_REFUSED",
    "MISS_COMPILED",
    "MISS_EAGER",
    "MISS_LIMIT",
    "MISS_NONE",
    "MISS_REFUSED",
    "SAMPLE_EVERY",
    "SAMPLE_FIRST",
    "STEADY_EVERY",
    "STEADY_FIRST",
    "WAITED_S",
    "WHY_AOT",
    "WHY_AOT_GUARDS",
    "WHY_COMPILE_ERROR",
    "WHY_COMPILE_FAILED",
    "WHY_EAGER_ON_RECOMPILE",
    "WHY_FAIL_ON_RECOMPILE",
    "WHY_FIRST_CALL",
    "WHY_FORCE_EAGER",
    "WHY_LIMIT",
    "WHY_NOTHING_CACHED",
    "WHY_OWN_ERROR",
    "WHY_PRECOMPILED",
    "WHY_SKIPPED",
    "WHY_UNSAFE",
    "AotLoad",
    "MissEvent",
    "Recorder",
    "Target",
    "Window",
    "clocks",
    "following",
]
