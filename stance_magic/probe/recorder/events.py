"""The events the recorder's hooks write while a window is open, one small
record per kind, in the order they happened; a window folds its own slice
of them into figures (:func:`stance_magic.probe.recorder.window.fold`).

The common case writes nothing: a call whose own lookup hit, that
compiled nothing and returned is a tally (``Recorder._cached``), and a
counted-only hit a count on its function (see ``calls.SAMPLE_FIRST``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: How a lookup was measured (:attr:`Lookup.kind`).
TIMED = "timed"  # the called function's own lookup, timed from its dispatch
SPOT = "spot"  # the same, past the first SAMPLE_FIRST: a spot check
RESUMED = "resumed"  # a nested lookup, timed from its call (Python 3.12+)
UNTIMED = "untimed"  # a nested lookup with no start: counted
SAMPLED = "sampled"  # a counted-only call's lookup that missed: counted
CALIBRATED = "calibrated"  # under torch's profiler (it slows the call): counted
WAITED = "waited"  # timed, but its thread waited for the CPU in it: counted
#: the kinds whose seconds are a lookup's duration
TIMED_KINDS = frozenset({TIMED, SPOT, RESUMED})


class Lookup(NamedTuple):
    """One cache lookup: of ``fn`` (a function, or a code object for a
    frame of its own), a hit or not, how it was measured."""

    kind: str
    fn: Any
    hit: bool
    seconds: float
    #: its end on the recorder's clock
    at: float


class Call(NamedTuple):
    """How one torch.compile call ended (a ``CALL_`` outcome and a ``WHY_``
    reason), under the stance in force at that call; ``fn`` None for an
    aot-compiled function's call."""

    fn: Any
    outcome: str
    why: str
    stance: str
    #: eager_then_compile's eager first call, whatever happened in it (it
    #: ran eagerly, or raised: a nested compile's error, its own)
    first: bool = False


class Parts(NamedTuple):
    """A timed call that ran cached code, in parts (see probe.anatomy):
    (wrapper before the dispatch or None, dispatch to the end of the
    lookup, compiled code, wrapper after it), seconds."""

    fn: Any
    parts: tuple[float | None, float, float, float]
    at: float


class DeviceSpan(NamedTuple):
    """The GPU stream's marks around a timed call's compiled code."""

    fn: Any
    marks: Any
    at: float


class EagerParts(NamedTuple):
    """A timed call that ran without compiled code: the wrapper before its
    dispatch (or None) and the dispatch to its end, seconds."""

    fn: Any
    before: float | None
    seconds: float
    at: float


class Profiled(NamedTuple):
    """A lookup of ``fn`` as torch's profiler measured it (a calibration)."""

    fn: Any
    seconds: float
    at: float


class Loaded(NamedTuple):
    """One ``torch.compiler.load_compiled_function``: (name, file, line) of
    the function it gave back, its error (``"Type: message"``) if it
    raised, its seconds."""

    frame: tuple[str, str, int | None]
    error: str | None
    seconds: float
    at: float
