"""A report's cache lookups and calls: Dynamo's lookups and what they cost
(:class:`Lookups`, per function :class:`LookupTarget`), where a compiled
call's time goes (:class:`CallParts`, with the GPU's and the host's bounds)
and how every call of compiled code ended (:class:`CallAccount`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..place import holds_places, worded

__all__ = ["GPU_BOUND", "HOST_BOUND", "CallAccount", "CallParts", "LookupTarget", "Lookups"]


#: Compiled code's time on the GPU at least this many times its time on the
#: host: the GPU sets the pace (the next call's host work overlaps its
#: kernels); at most :data:`HOST_BOUND` times: the GPU waits for the host's
#: launches. Between the two the side is not clear: the stream's span holds
#: the launch latency of the code's last kernel too (on an H200 with torch
#: 2.11: about 20 µs, so a one-kernel call read 1.55x its host time; GPT-2
#: of 4 layers 1.04x; three 4096x4096 matrix products 40-80x).
GPU_BOUND = 2.0
HOST_BOUND = 1.25


@dataclass(frozen=True)
class CallParts:
    """Where one compiled call's time goes, part by part (seconds, medians
    over the timed calls; see :mod:`stance_magic.probe.anatomy`).

    ``wrapper_s`` is torch.compile's wrapper: its Python before it hands the
    call to Dynamo (``before_s``), its way into Dynamo and Dynamo's own work
    before and after the lookup (``into_s``), and its Python after the
    compiled code returns and torch's settings are back (``after_s``).
    ``lookup_s`` is Dynamo's cache lookup as torch's profiler bounds it
    (frame locals and guards: what ``skip_guard_eval_unsafe`` can save part
    of); ``compiled_s`` the compiled code, from the end of the lookup to its
    return (with the wrapper's first steps past it: Dynamo's frame hook off,
    functorch's layer stack unwound); ``call_s`` their sum.
    ``eager_s`` is a whole call that ran eagerly instead (an eager fallback,
    or no compiled code under the stance; torch.compile's wrapper included),
    ``eager_calls`` how many did.
    """

    #: timed calls that ran compiled code, the parts' medians are over
    calls: int = 0
    before_s: float | None = None
    into_s: float | None = None
    lookup_s: float | None = None
    compiled_s: float | None = None
    after_s: float | None = None
    eager_s: float | None = None
    eager_calls: int = 0
    #: the lookup is bounded with torch's profiler (else: from torch.compile's
    #: dispatch to the end of the lookup, the wrapper's way in included)
    lookup_bounded: bool = False
    #: where CUDA is in use: the compiled code on the GPU, median over
    #: ``device_calls`` timed calls: the current stream from the end of the
    #: lookup to the end of the code's last kernel (CUDA events). Beside
    #: ``compiled_s`` (the same code on the host) it says which side sets
    #: the pace (:attr:`gpu_bound`)
    device_s: float | None = None
    device_calls: int = 0

    @property
    def wrapper_s(self) -> float | None:
        """torch.compile's wrapper: before, into Dynamo and after."""
        parts = [p for p in (self.before_s, self.into_s, self.after_s) if p is not None]
        return sum(parts) if parts else None

    @property
    def gpu_bound(self) -> bool | None:
        """True: the GPU sets the pace (the compiled code's time on the GPU
        is at least :data:`GPU_BOUND` times its time on the host, so the
        host's parts run while earlier kernels do); False: the GPU waits for
        the host's launches (at most :data:`HOST_BOUND` times); None between
        the two, or without a figure on the GPU."""
        if self.device_s is None or not self.compiled_s:
            return None
        ratio = self.device_s / self.compiled_s
        if ratio >= GPU_BOUND:
            return True
        if ratio <= HOST_BOUND:
            return False
        return None

    @property
    def call_s(self) -> float | None:
        """The whole compiled call: the parts' sum (None without timed calls)."""
        if not self.calls:
            return None
        return sum(p for p in (self.wrapper_s, self.lookup_s, self.compiled_s) if p is not None)


@holds_places
@dataclass
class LookupTarget:
    """Cache lookups of one compiled function in the cell, and its calls' parts."""

    name: str
    #: the function's place, a :class:`~stance_magic.place.Place` read as
    #: its words (``In [3], line 2``; "" for no file)
    where: str = field(metadata=worded("where"))
    timed: int
    seconds: float
    untimed: int
    misses: int = 0
    eager_calls: int = 0
    #: the median timed lookup (robust to a lookup the OS preempted)
    per_lookup_s: float | None = None
    #: lookups counted but not timed (sampling after the first ones; see
    #: ``probe.SAMPLE_FIRST``); ``seconds`` is then extrapolated from the timed
    sampled: int = 0
    #: of the sampled: calls torch's profiler ran over to bound the lookup
    calibrated: int = 0
    #: of the sampled: timed lookups whose thread waited for the CPU in them
    waited: int = 0
    #: where its calls' time goes (None: no call of it was timed)
    parts: CallParts | None = None
    #: the sampling its lookups were counted under: the first
    #: ``sample_first`` timed, then 1 in ``sample_every`` (fewer once its
    #: lookup is bounded for the session: see ``probe.STEADY_FIRST``); 0
    #: where every lookup was timed
    sample_first: int = 0
    sample_every: int = 0


@dataclass(frozen=True)
class Lookups:
    """Dynamo's cache lookups in the cell (a lookup: building the called
    frame's locals and running the guards of its cache entries) and what
    they cost. How they were measured is ``method``: timed in situ (each from
    torch.compile's call into Dynamo to the end of the lookup), with torch's
    profiler (``-g``: its ``TorchDynamo Cache Lookup`` events), or not at all."""

    #: "in situ", "profiler" or "" (no lookup timed)
    method: str = ""
    #: in situ: each lookup bounded as torch's profiler bounds it (the
    #: profiler ran over a few calls of each function, in its first three cells), the
    #: rest of the span from torch.compile's dispatch counted as the
    #: wrapper's; False where no profiler could run (the span whole)
    bounded: bool = False
    #: the lookups' total seconds (extrapolated over the sampled ones); None
    #: when none could be timed
    seconds: float | None = None
    #: the median lookup
    per_lookup_s: float | None = None
    #: lookups timed / counted with no start to time from (resume functions,
    #: frames compiled on their own) / counted only (sampling, see
    #: ``probe.SAMPLE_FIRST`` and ``probe.SAMPLE_EVERY``)
    timed: int = 0
    untimed: int = 0
    sampled: int = 0
    #: of the sampled: the calls torch's profiler ran over to bound the
    #: lookups (in a function's first three cells; the profiler slows them)
    calibrated: int = 0
    #: nested lookups timed from the call that made them (sys.monitoring)
    resumed: int = 0
    #: profiler events read (``-g``)
    profiled: int = 0
    #: why the untimed ones could not be timed from their call ("" : the usual
    #: reason, the first lookup from each caller while measured)
    untimed_why: str = ""
    #: Python 3.12 gave no monitoring event for calls with ``*args``/``**kwargs``
    no_ex_calls: bool = False
    #: the profiler also reported lookups of frames with nothing compiled
    #: (torch before 2.13 does, while Dynamo compiles)
    profiler_counts_empty: bool = False
    #: per compiled function called in the cell
    targets: list[LookupTarget] = field(default_factory=list)
    #: the sampling the lookups were counted under: every lookup of a
    #: function timed up to its ``sample_first``, then 1 in ``sample_every``
    #: (0: none sampled, or functions sampled alike no more: see each
    #: target's own)
    sample_first: int = 0
    sample_every: int = 0
    #: the profiler event read for each lookup (``-g``)
    event: str = ""
    #: timed lookups whose thread waited for the CPU in them for more than
    #: ``probe.WAITED_S`` (preempted: a busy machine), each counted at the
    #: time the thread ran it; ``waited_s`` the time they waited, left out
    waited: int = 0
    waited_s: float = 0.0
    #: timed calls that waited for the CPU, their parts left out of the medians
    waited_calls: int = 0
    #: seconds torch's profiler took to start and stop in the cell, bounding
    #: the lookups (part of the cell's wall time)
    calibration_s: float = 0.0

    @property
    def lower_bound(self) -> bool:
        """``seconds`` leaves out the untimed lookups (in situ only)."""
        return self.method == "in situ" and self.untimed > 0

    @property
    def count(self) -> int:
        """Every lookup counted: timed, untimed and counted only."""
        return self.timed + self.untimed + self.sampled


@dataclass(frozen=True)
class CallAccount:
    """Every call of a compiled function in the block, each counted once by
    how it ended, as torch did it, under the stance in force at that call.

    ``cached``: ran compiled code from the cache; ``compiled``: compiled (a
    frame of it at least), then ran it; ``eager``: ran without compiled code,
    by why (``"force_eager"``, ``"first call"`` (eager_then_compile),
    ``"eager_on_recompile"`` (a miss run eagerly instead),
    ``"eager_on_recompile, nothing cached"``, ``"recompile limit"``,
    ``"compile failed"`` (torch fell back to eager), ``"skipped"`` (Dynamo
    compiled nothing for the frame)); ``refused``: torch raised rather than
    recompile, by the stance that refused (``"fail_on_recompile"``,
    ``"skip_guard_eval_unsafe"``); ``failed``: raised, by why
    (``"compile error"``, ``"its code raised"``). They add up to
    :attr:`total`, the report's ``compiled_calls``.
    """

    cached: int = 0
    compiled: int = 0
    eager: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return (
            self.cached
            + self.compiled
            + sum(self.eager.values())
            + sum(self.refused.values())
            + sum(self.failed.values())
        )

    @property
    def ran_compiled(self) -> int:
        """Calls that ran compiled code (cached or just compiled)."""
        return self.cached + self.compiled

    @property
    def unusual(self) -> bool:
        """Some call ran eagerly, was refused or failed."""
        return bool(self.eager or self.refused or self.failed)
