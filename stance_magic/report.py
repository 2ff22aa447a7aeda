"""The per-cell report: what torch.compile did in one measured block, as plain data.

:class:`CellReport` holds numbers, names and places; it is made whole, once,
by :mod:`stance_magic.build` from a closed measuring window and never written
to afterwards. Words live in :mod:`stance_magic.render` (a report's ``__str__``
and ``_repr_html_`` hand it over), charts in :mod:`stance_magic.plots`.

Nested parts group what belongs together: ``rep.lookups`` (Dynamo's cache
lookups and what they cost), ``rep.compile_caches`` (the AOTAutograd and FX
graph caches), ``rep.shared`` (a trace and a timeline written for the cell),
``rep.compare`` (``--compare``) and ``rep.ranks`` (``--ranks`` on rank 0).
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .text import first_line, place

if TYPE_CHECKING:
    from .causes import Cause
    from .probe import MemoryFigure

__all__ = [
    "PHASES",
    "Budget",
    "CacheUse",
    "CallAccount",
    "CallParts",
    "CellReport",
    "Comparison",
    "CompileCaches",
    "CudaGraphFrame",
    "CudaGraphSkip",
    "CudaGraphs",
    "DynamicShapes",
    "FrameCompile",
    "Gathered",
    "GraphBreak",
    "GuardFailure",
    "LoadedFunction",
    "LookupTarget",
    "Lookups",
    "PrecompiledFrame",
    "Recompile",
    "RecompileLimit",
    "Shared",
]

#: The exclusive phases a compile's time is split into, in order.
PHASES = ("dynamo", "aot_autograd", "backend", "codegen", "other")


@dataclass
class CacheUse:
    """What one compile found in one compile cache (AOTAutograd's, or
    Inductor's FX graph cache)."""

    cache: str  # "aot_autograd" or "inductor"
    #: as torch's CompilationMetrics record counts them
    hits: int = 0
    misses: int = 0
    #: as torch logged them (a bypass is not in the record)
    bypasses: int = 0
    #: torch compiled with this cache switched off
    disabled: bool = False
    keys: list[str] = field(default_factory=list)
    #: the hits: what torch recorded for generating what they loaded
    saved_s: float | None = None
    #: torch's reason for each bypass (its first line)
    reasons: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``hit``, ``miss``, ``bypass``, ``mixed`` or ``off``."""
        if self.disabled and not (self.hits or self.misses or self.bypasses):
            return "off"
        kinds = [k for k, n in (("hit", self.hits), ("miss", self.misses)) if n]
        if self.bypasses:
            kinds.append("bypass")
        return kinds[0] if len(kinds) == 1 else "mixed" if kinds else ""


@dataclass
class FrameCompile:
    """One compile record of the cell: a frame (forward) or a lazy backward."""

    compile_id: str
    kind: str  # "frame" or "backward"
    name: str
    filename: str
    line: int | None
    seconds: float
    phases: dict[str, float]
    guard_count: int | None
    recompile_reason: str | None
    #: torch's fail_type and fail_reason when the compile failed
    failed: str | None = None
    #: the backend the graph was handed to (None: no graph reached a backend)
    backend: str | None = None
    #: a graph reached the backend (a frame without tensor operations has none)
    graph: bool = True
    #: compiled during a call that ran eagerly (eager_then_compile's first call)
    during_eager_call: bool = False
    #: the failure reached the cell as its error (else torch ran the frame eagerly)
    raised: bool = False
    #: compiled ahead of time: ``torch.compile(fn, fullgraph=True).aot_compile(...)``
    #: (no call ran it; its time is torch's span over the records it wrote)
    aot: bool = False
    #: the compile caches this compile consulted (AOTAutograd's, Inductor's
    #: FX graph cache): hits and misses as torch's record counts them
    caches: list[CacheUse] = field(default_factory=list)
    #: the file as a reader knows it (``In [3]``, ``site-packages/…``); the
    #: file name itself when empty
    file: str = ""

    @property
    def where(self) -> str:
        return _named_place(self.name, self.file or self.filename, self.line)

    @property
    def source(self) -> str:
        """``loaded`` (every graph from a compile cache), ``generated``,
        ``partly loaded``, or "" (no compile cache consulted: not Inductor)."""
        fx = next((c for c in self.caches if c.cache == "inductor"), None)
        aot = next((c for c in self.caches if c.cache == "aot_autograd"), None)
        if fx is None and aot is None:
            return ""
        if aot is not None and aot.state == "hit":
            return "loaded"
        if fx is None:
            return "generated"
        return {"hit": "loaded", "mixed": "partly loaded" if fx.hits else "generated"}.get(
            fx.state, "generated"
        )

    @property
    def saved_s(self) -> float | None:
        """What torch recorded for generating what this compile loaded."""
        aot = next((c for c in self.caches if c.cache == "aot_autograd" and c.state == "hit"), None)
        if aot is not None and aot.saved_s is not None:
            return aot.saved_s
        fx = next((c for c in self.caches if c.cache == "inductor"), None)
        return fx.saved_s if fx is not None else None


@dataclass
class GuardFailure:
    """The guard that failed on one cache entry when torch looked for a match."""

    #: torch's text, with the entry's compile id first (``0/1: n == 2``)
    reason: str
    #: the user's line the guard came from, as torch points at it
    guard_source: str = ""

    @property
    def entry(self) -> str:
        """The compile id of the entry the guard belongs to (``0/1``)."""
        head = self.reason.split(":", 1)[0]
        return head if "/" in head else ""


@dataclass
class Recompile:
    """One recompile: torch's reason, where the frame is, and the guard's source."""

    reason: str
    where: str
    compile_id: str
    #: the user's line the failed guard came from, as torch points at it
    guard_source: str = ""
    #: every cache entry's failed guard (torch keeps only the first in its
    #: record's ``recompile_reason``)
    failures: list[GuardFailure] = field(default_factory=list)
    #: the user's line that made the recompiling call (``In [3], line 2``;
    #: ``In [1], line 2 in helper, from In [3], line 2`` through a function),
    #: read from the stack when torch compiled ("" where none was found)
    called_from: str = ""
    #: every user frame of that call, innermost first (``In [1], line 2 in
    #: helper``), torch's and the notebook machinery's frames left out
    stack: list[str] = field(default_factory=list)


@dataclass
class RecompileLimit:
    """A frame that reached torch's recompile limit: torch stops compiling
    it and runs every call that no cache entry matches eagerly."""

    where: str
    #: torch's config name, as the installed torch spells it
    config: str
    limit: int | None
    #: the attempt torch refused (its record), when it happened in this cell
    compile_id: str | None
    #: calls of this cell that ran eagerly because of the limit
    eager_calls: int = 0
    #: the guards that failed on the attempt that hit the limit
    failures: list[GuardFailure] = field(default_factory=list)
    #: torch._dynamo.config.automatic_dynamic_shapes when the report was made
    automatic_dynamic: bool | None = None
    #: ``limit`` is the frame's torch.compile call's own ``recompile_limit=``
    #: (torch._dynamo.config's does not apply to it)
    per_call: bool = False

    @property
    def setting(self) -> str:
        """What sets the limit: ``torch._dynamo.config.recompile_limit``, or
        ``torch.compile(recompile_limit=)`` for a per-call limit."""
        if self.per_call:
            return "torch.compile(recompile_limit=)"
        return f"torch._dynamo.config.{self.config}"


@dataclass
class GraphBreak:
    """Graph breaks of one kind at one place in the user's code."""

    reason: str
    count: int
    summary: str
    filename: str = ""
    line: int | None = None
    source: str = ""
    #: torch could not resume after it and ran the whole frame eagerly
    skipped_frame: bool = False
    #: torch's graph-break id and type (its registry, where this torch has one)
    gb_id: str = ""
    gb_type: str = ""
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    #: torch's documentation page for this kind of break
    url: str = ""
    #: for a break inside library code, the user's line that led there
    user_filename: str = ""
    user_line: int | None = None
    user_source: str = ""
    #: what the break cost in the cell: frames torch compiled after it (its
    #: resume functions), the graphs among them, and their compile time
    frames_after: int = 0
    graphs_after: int = 0
    compile_s_after: float = 0.0
    #: ``filename`` and ``user_filename`` as a reader knows them (``In [5]``)
    file: str = ""
    user_file: str = ""

    @property
    def where(self) -> str:
        return place(self.file or self.filename, self.line) if self.filename else ""

    @property
    def user_where(self) -> str:
        return (
            place(self.user_file or self.user_filename, self.user_line)
            if self.user_filename
            else ""
        )

    @property
    def kind(self) -> str:
        """The cause it is grouped by: torch's graph-break id and type, else its summary."""
        return f"{self.gb_id} {self.gb_type}".strip() if self.gb_id else self.summary

    @property
    def place(self) -> str:
        """Where it broke with its line of source: ``In [5], line 8 `print(y)```."""
        return " ".join(p for p in (self.where, f"`{self.source}`" if self.source else "") if p)


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
    compiled code returns (``after_s``). ``lookup_s`` is Dynamo's cache
    lookup as torch's profiler bounds it (frame locals and guards: what
    ``skip_guard_eval_unsafe`` can save part of); ``compiled_s`` the compiled
    code, from the end of the lookup to its return; ``call_s`` their sum.
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


@dataclass
class LookupTarget:
    """Cache lookups of one compiled function in the cell, and its calls' parts."""

    name: str
    where: str
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
    #: where its calls' time goes (None: no call of it was timed)
    parts: CallParts | None = None


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
    #: (0: not recorded, a report from an earlier release)
    sample_first: int = 0
    sample_every: int = 0
    #: the profiler event read for each lookup (``-g``)
    event: str = ""

    @property
    def lower_bound(self) -> bool:
        """``seconds`` leaves out the untimed lookups (in situ only)."""
        return self.method == "in situ" and self.untimed > 0

    @property
    def count(self) -> int:
        """Every lookup counted: timed, untimed and counted only."""
        return self.timed + self.untimed + self.sampled


@dataclass
class Budget:
    """A frame's cache entries against the recompile limit, after the cell."""

    where: str
    entries: int
    limit: int | None
    config: str
    #: ``limit`` is the frame's torch.compile call's own ``recompile_limit=``
    per_call: bool = False

    @property
    def left(self) -> int | None:
        """Recompiles left before torch stops compiling the frame."""
        return None if self.limit is None else max(self.limit - self.entries, 0)

    @property
    def near(self) -> bool:
        """One entry left (or none): the next recompile is the last, or refused."""
        return self.left is not None and self.left <= 1

    @property
    def used(self) -> str:
        """``7/8``: entries of the limit."""
        return f"{self.entries}/{self.limit if self.limit is not None else '?'}"


@dataclass
class DynamicShapes:
    """One compiled graph's inputs: which sizes are symbols, why, and which the
    code specialized (names as torch gave them: ``s77``)."""

    compile_id: str
    where: str
    #: ``x: [s77, 128]``
    inputs: list[str] = field(default_factory=list)
    #: ``s77 = x.size()[0]: mark_dynamic``
    symbols: list[str] = field(default_factory=list)
    #: ``s77 = x.size()[0] → 8 by Eq(s77, 8) at `x.view(8, -1)` (…)``
    specialized: list[str] = field(default_factory=list)

    @property
    def dynamic(self) -> bool:
        return bool(self.symbols or self.specialized)


@dataclass(frozen=True)
class Comparison:
    """What ``--compare`` measured: the cell run ``repeat`` times under
    force_eager, then ``repeat`` times under its stance (see
    :mod:`stance_magic.compare`). Times are seconds, steady state (the runs
    that compiled left out); peaks are bytes, with ``-m`` only."""

    #: median of the eager runs, and of the compiled runs after the last that compiled
    eager_s: float
    compiled_s: float
    #: eager_s / compiled_s (None when the compiled median is 0)
    speedup: float | None = None
    #: compiled runs after which compiling has paid for itself (None: never)
    break_even_calls: int | None = None
    #: every run's seconds: ``{"eager": [...], "compiled": [...]}``
    runs: dict[str, list[float]] = field(default_factory=dict)
    #: with -m: peak bytes of an eager run, of the first compiled run (the one
    #: that compiles) and of a compiled run in steady state
    eager_peak_bytes: int | None = None
    compiled_first_peak_bytes: int | None = None
    compiled_steady_peak_bytes: int | None = None
    #: every run was timed from and to a synchronized CUDA device (False: no
    #: CUDA in use, so nothing ran asynchronously)
    synchronized: bool = False


@dataclass(frozen=True)
class ColdCompile:
    """An earlier cell that generated the graphs a warm cell loaded."""

    seconds: float
    #: ``In [4]`` (or ``cell 2``)
    cell: str
    #: how many of the warm cell's compiles it matched
    matched: int


@dataclass(frozen=True)
class CompileCaches:
    """Where the cell's compile time came from: the AOTAutograd cache and
    Inductor's FX graph cache. Hits and misses as torch's records count them,
    bypasses as torch logged them; empty when nothing compiled with Inductor."""

    fx_hits: int = 0
    fx_misses: int = 0
    fx_bypasses: int = 0
    aot_hits: int = 0
    aot_misses: int = 0
    aot_bypasses: int = 0
    #: compile time outside Dynamo of compiles whose graphs came from the
    #: caches / were generated (misses, bypasses, caches off)
    loaded_s: float = 0.0
    generated_s: float = 0.0
    #: what torch recorded for generating the graphs the hits loaded
    saved_s: float | None = None
    #: "warm", "partly warm", "cold", "caches off" or "" (no Inductor compile)
    state: str = ""
    #: Dynamo's tracing time of the compiles that consulted a cache
    dynamo_s: float = 0.0
    #: compiles that consulted a cache, and those whose graphs all came from one
    consulted: int = 0
    loaded: int = 0
    #: the caches switched off ("AOTAutograd cache", "FX graph cache")
    off: list[str] = field(default_factory=list)
    #: torch's reasons for the bypasses
    bypass_reasons: list[str] = field(default_factory=list)
    #: the file of a %stance cache load whose artifacts these hits used
    loaded_from: str | None = None
    #: an earlier cell that compiled the same graphs cold (warm cells only)
    cold: ColdCompile | None = None

    @property
    def graphs(self) -> int:
        """Graphs that went through the FX graph cache (hit, miss or bypass)."""
        return self.fx_hits + self.fx_misses + self.fx_bypasses

    @property
    def verdict(self) -> str:
        """One line: warm, partly warm, cold or caches off, and why."""
        from .render import cache_verdict

        return cache_verdict(self)


@dataclass(frozen=True)
class Shared:
    """What ``--trace`` and ``--timeline`` wrote for the cell (see
    :mod:`stance_magic.share`)."""

    #: this cell's structured trace (what TORCH_TRACE writes) and its compile ids
    trace_file: str | None = None
    trace_compile_ids: list[str] = field(default_factory=list)
    #: tlparse's index.html of it
    tlparse_index: str | None = None
    #: the cell as a Chrome trace / Perfetto JSON file
    timeline_file: str | None = None


@dataclass(frozen=True)
class CudaGraphSkip:
    """Graphs torch ran without CUDA graphs for one reason (see
    :mod:`stance_magic.probe.cudagraphs`)."""

    #: torch's reason, its first line (``skipping cudagraphs due to mutated
    #: inputs (1 instances)``; "" when torch gave none)
    reason: str
    count: int = 1
    #: the compile it came from (``0/0``; "" at run time) and that compile's frame
    compile_id: str = ""
    frame: str = ""
    #: the user's line torch found the cause at (``In [3], line 2``) and its source
    where: str = ""
    source: str = ""
    #: the graph's devices, where torch skipped without a word (``cpu``)
    devices: list[str] = field(default_factory=list)
    #: torch logged the skip (False: it only counted it)
    logged: bool = True


@dataclass(frozen=True)
class CudaGraphFrame:
    """The CUDA graphs torch recorded in the cell for one compiled frame
    (its forward, backward or inference graphs together)."""

    #: the frame as the compiles row names it (``f (In [2], line 1)``)
    frame: str
    #: the compile ids whose graphs were recorded, in order
    compile_ids: list[str] = field(default_factory=list)
    recorded: int = 0
    #: of those: recorded again because the batch size (an input size)
    #: changed: for a new size of a graph with dynamic shapes (torch records
    #: one graph per size), or after a recompile for a size change
    for_new_sizes: int = 0
    #: of those: recorded again at the same place because torch could not
    #: replay the graph it had (its invariant check failed), and why
    rerecorded: int = 0
    why: list[str] = field(default_factory=list)
    #: the integer inputs (sizes) of each graph recorded, where it had any
    sizes: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True)
class CudaGraphs:
    """CUDA graphs in the cell (``mode="reduce-overhead"``, the
    ``cudagraphs`` backend): recorded, replayed, recorded again and
    skipped, as torch's CUDA-graph trees did them."""

    recorded: int = 0
    replayed: int = 0
    #: warm-up runs (torch runs a graph eagerly before recording it)
    warmups: int = 0
    #: recordings beyond a frame's first: for new sizes, or re-records
    for_new_sizes: int = 0
    rerecorded: int = 0
    #: graphs run without CUDA graphs, with torch's reasons (grouped)
    skipped: int = 0
    skips: list[CudaGraphSkip] = field(default_factory=list)
    #: per compiled frame that recorded graphs
    frames: list[CudaGraphFrame] = field(default_factory=list)
    #: frames torch warned could not leave their warm-up (eager) runs for
    #: replays: outputs of an earlier call still wait for their backward
    pending_backward: list[str] = field(default_factory=list)
    #: the cell raised torch's error for reading an output of an earlier
    #: replay that a later replay overwrote; where torch says that output
    #: was made (``In [3], line 2 `y = x @ x```), when its text says
    overwritten_output: bool = False
    overwritten_made_at: str = ""

    @property
    def empty(self) -> bool:
        return not (
            self.recorded
            or self.replayed
            or self.warmups
            or self.skipped
            or self.pending_backward
            or self.overwritten_output
        )


@dataclass(frozen=True)
class Gathered:
    """How one rank's report of a block took part in a gather across ranks."""

    #: this process's rank and the number of ranks
    rank: int
    world_size: int
    #: the rank that gathered the reports (and shows the combined view)
    to: int = 0
    #: what was sent: ``"summary"`` or ``"full"`` (the whole report)
    mode: str = "summary"


def _named_place(name: str, loc: str, line: int | None) -> str:
    """``f (In [3], line 2)``: a name and where it is (``?`` for no file)."""
    loc = loc or "?"
    return f"{name} ({place(loc, line)})" if line else f"{name} ({loc})"


@dataclass(frozen=True)
class PrecompiledFrame:
    """A lookup of Dynamo's precompiled frames (``caching_precompile``) at a
    ``torch.compile(fn)`` in the block: ``outcome`` is ``"hit"`` (torch
    installed the saved frame: no tracing), ``"stale"`` (the cell's code
    changed since it was saved: not used, traced again), ``"unchecked"``
    (cell code that could not be checked: not used), ``"incomplete"`` (saved
    without its compiled graphs: torch traces it again) or ``"miss"``
    (nothing saved for it)."""

    name: str
    filename: str = ""
    line: int | None = None
    outcome: str = "miss"
    why: str = ""
    file: str = ""

    @property
    def where(self) -> str:
        return _named_place(self.name, self.file or self.filename, self.line)


@dataclass(frozen=True)
class LoadedFunction:
    """A compiled function read back with ``torch.compiler.load_compiled_function``
    (saved from an ``aot_compile``): no tracing, no compile record; ``seconds``
    is the load, timed around torch's function."""

    name: str
    filename: str = ""
    line: int | None = None
    seconds: float = 0.0
    #: what the load raised (``Type: message``), if it failed
    error: str | None = None
    #: the file as a reader knows it (``In [3]``, ``site-packages/…``)
    file: str = ""

    @property
    def where(self) -> str:
        return _named_place(self.name, self.file or self.filename, self.line)


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


@dataclass
class CellReport:
    """What torch.compile did and cost in one measured cell.

    All times are seconds. ``compile_s`` is the sum of torch's own
    ``CompilationMetrics`` records that landed in the cell (forward frames
    and lazily compiled backward graphs); ``compile_breakdown`` splits it
    into exclusive phases. ``cache_hits``/``cache_misses`` count calls into
    compiled frames (a call into an empty cache that compiles is a miss);
    ``lookups`` says what those cache lookups cost. ``index`` is the
    report's position in the history (1 for the first); ``execution_count``
    is the number IPython gave the cell (``In [7]``), when a front end knows it.
    """

    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    #: the ``force_backend`` of the stance, by name
    backend: str | None = None
    index: int = 0
    execution_count: int | None = None
    label: str | None = None
    source: str = ""
    wall_s: float = 0.0
    #: the CUDA device was synchronized at the start and the end of the
    #: block, so ``wall_s`` includes its kernels (False: no CUDA in use)
    synchronized: bool = False
    compile_s: float = 0.0
    compile_breakdown: dict[str, float] = field(default_factory=dict)
    compiles: int = 0
    backward_compiles: int = 0
    #: graphs handed to a backend (frames traced can hold none)
    graphs: int = 0
    #: compile records with torch's fail_type set
    failed_compiles: int = 0
    #: each recompile (its reason, guard failures, where); ``recompiles`` lists the reasons
    recompile_details: list[Recompile] = field(default_factory=list)
    #: graph breaks grouped by place and reason, each with its count; see
    #: ``graph_breaks`` (one line per break) and ``graph_break_count``
    graph_break_details: list[GraphBreak] = field(default_factory=list)
    #: calls into torch.compile'd functions and modules (under any stance)
    compiled_calls: int = 0
    #: each of those calls by how it ended (they add up to compiled_calls)
    calls: CallAccount = field(default_factory=CallAccount)
    #: compiled functions loaded with torch.compiler.load_compiled_function
    loaded_functions: list[LoadedFunction] = field(default_factory=list)
    #: Dynamo's precompiled frames looked up in the block (caching_precompile)
    precompiled: list[PrecompiledFrame] = field(default_factory=list)
    cache_hits: int = 0
    cache_misses: int = 0
    #: guards torch built for the cell's compiles
    guard_count: int = 0
    #: Dynamo's cache lookups and what they cost
    lookups: Lookups = field(default_factory=Lookups)
    #: calls that ran eagerly after a miss because eager_on_recompile was in
    #: force at that call (set on the %%stance line or inside the cell)
    eager_fallbacks: int = 0
    #: misses that fail_on_recompile (in force at that call) refused
    refused_recompiles: int = 0
    #: frames at torch's recompile limit in this cell, and the calls that
    #: ran eagerly because of it
    recompile_limits: list[RecompileLimit] = field(default_factory=list)
    limit_eager_calls: int = 0
    #: why the cell recompiled (or was refused), in the notebook's terms: the
    #: recompile traps recognised from the guards that failed (none when the
    #: guard text matches none of them: torch's text is in recompile_details)
    causes: list[Cause] = field(default_factory=list)
    #: cache entries of each frame compiled or looked up, against the limit
    recompile_budget: list[Budget] = field(default_factory=list)
    #: each compiled graph's input sizes, its symbolic dimensions and why
    dynamic_shapes: list[DynamicShapes] = field(default_factory=list)
    eager_first_calls: int = 0
    #: torch.compile calls that ran their function without any compiled
    #: code and without a lookup, by the stance they ran under
    eager_calls: dict[str, int] = field(default_factory=dict)
    #: compiles made while eager_then_compile's first call ran eagerly
    compiles_during_eager_calls: int = 0
    #: the guard a fail_on_recompile refusal reported (torch's words)
    refused_guards: list[str] = field(default_factory=list)
    #: bytes torch allocated per device (measured with -m / memory=True)
    memory: list[MemoryFigure] = field(default_factory=list)
    #: the times of this report were taken with memory measuring on
    memory_on: bool = False
    error: str | None = None
    #: the user's line that made the failing call (``In [4], line 2``; ""
    #: where the traceback holds no line of the user's)
    error_where: str = ""
    frames: list[FrameCompile] = field(default_factory=list)
    #: --compare's figures (None for a cell measured once; see :class:`Comparison`)
    compare: Comparison | None = None
    notes: list[str] = field(default_factory=list)
    #: rank 0 of a block gathered across ranks (``measure(ranks=True)``,
    #: ``%%stance --ranks``): the combined view, a :class:`stance_magic.ranks.RankReport`
    ranks: Any = field(default=None, repr=False, compare=False)
    #: a block gathered across ranks: this rank, how many, and where its
    #: report went (None: not gathered)
    gathered: Gathered | None = None
    #: ``--trace`` / ``--timeline``: the files written for the cell
    shared: Shared = field(default_factory=Shared)
    #: where the compile time came from (the compile caches)
    compile_caches: CompileCaches = field(default_factory=CompileCaches)
    #: where a compiled call's time goes in this cell: every function's
    #: parts (``lookups.targets[i].parts``) weighed by its calls (None: no
    #: compiled call was timed)
    call_parts: CallParts | None = None
    #: named parts inside the compile time, where torch's records time them
    #: (seconds; only those above zero): ``kernel_compile`` (the compile
    #: workers: Triton kernels on a GPU, C++ on a CPU), ``autotune``
    #: (max-autotune's benchmarks), ``runtime_autotune`` (Triton's autotuning
    #: when run inside a compile), ``cudagraph_record``
    kernel_breakdown: dict[str, float] = field(default_factory=dict)
    #: the same, timed after compiling at the first runs of compiled code
    #: (torch's runtime records): in the wall time, not the compile time
    first_run_breakdown: dict[str, float] = field(default_factory=dict)
    #: CUDA graphs recorded, replayed and skipped in the cell
    cudagraphs: CudaGraphs = field(default_factory=CudaGraphs)

    @property
    def stance_label(self) -> str:
        """The stance with its flags, as a user would type it: ``default -u``."""
        label = self.stance
        if self.backend:
            label += f" -b {self.backend}"
        if self.skip_guard_eval_unsafe:
            label += " -u"
        return label

    @property
    def peak_bytes(self) -> int | None:
        """Peak bytes above the start on the first device measured, or None."""
        return self.memory[0].peak_bytes if self.memory else None

    @property
    def end_bytes(self) -> int | None:
        """Bytes left allocated at the end (above the start), or None."""
        return self.memory[0].end_bytes if self.memory else None

    @property
    def tightest_budget(self) -> Budget | None:
        """The frame with the fewest recompiles left (most entries on a tie)."""
        if not self.recompile_budget:
            return None
        return min(self.recompile_budget, key=lambda b: (b.left is None, b.left, -b.entries))

    @property
    def _budget_used(self) -> str:
        b = self.tightest_budget
        return b.used if b is not None else ""

    @property
    def compiled_anything(self) -> bool:
        return bool(self.compiles or self.backward_compiles)

    @property
    def used_compile(self) -> bool:
        """Whether the cell involved torch.compile at all: it called compiled
        code (under any stance, force_eager included), compiled, or looked up
        compiled code. A watched cell is kept in the history only then."""
        return bool(
            self.compiled_calls
            or self.compiled_anything
            or self.cache_hits
            or self.cache_misses
            or self.refused_recompiles
            or self.eager_first_calls
        )

    @property
    def changed_something(self) -> bool:
        """Whether the cell changed what torch.compile holds or does: it
        compiled, recompiled, missed the cache, broke the graph, fell back,
        failed, or raised. A cell that only ran warm compiled code (cache
        hits) did not."""
        return bool(
            self.compiles
            or self.backward_compiles
            or self.recompile_details
            or self.cache_misses
            or self.graph_break_details
            or self.eager_fallbacks
            or self.refused_recompiles
            or self.eager_first_calls
            or self.failed_compiles
            or self.error
        )

    def same_stance(self, other: CellReport | None) -> bool:
        """Whether ``other`` ran under the same stance, flags and backend."""
        return other is not None and (
            self.stance,
            self.skip_guard_eval_unsafe,
            self.backend,
        ) == (other.stance, other.skip_guard_eval_unsafe, other.backend)

    def worth_showing(self, previous: CellReport | None = None) -> bool:
        """Whether a view shows this cell on its own (a watched cell's
        report, its chart, a column of the history chart): it changed
        something (:attr:`changed_something`), wrote a trace, or ran under
        another stance than ``previous``, the measured cell before it."""
        return (
            self.changed_something
            or bool(self.shared.trace_file)
            or (previous is not None and not self.same_stance(previous))
        )

    @property
    def recompiles(self) -> list[str]:
        """Each recompile's reason, in order (from :attr:`recompile_details`)."""
        return [r.reason for r in self.recompile_details]

    @property
    def graph_breaks(self) -> list[str]:
        """One summary per graph break torch logged, in order (from
        :attr:`graph_break_details`, whose entries count repeats)."""
        return [g.summary for g in self.graph_break_details for _ in range(g.count)]

    @property
    def graph_break_count(self) -> int:
        """Graph breaks torch logged in the cell, repeats included."""
        return sum(g.count for g in self.graph_break_details)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready) for export: every field (the nested parts
        nested), the derived ``recompiles`` and ``graph_breaks`` lists, the
        compile caches' verdict, and every column of :meth:`summary_row` that
        is not a field of its own (``guard_s``, ``fx_cache_hits``, ...)."""
        data = asdict(self)
        data["recompiles"] = self.recompiles
        data["graph_breaks"] = self.graph_breaks
        data["compile_caches"]["verdict"] = self.compile_caches.verdict
        for key, value in self.summary_row().items():
            data.setdefault(key, value)
        return data

    def summary_row(self) -> dict[str, Any]:
        """One flat row for the history table and CSV export."""
        lk, cc = self.lookups, self.compile_caches
        tight = self.tightest_budget
        return {
            "cell": self.index,
            "execution_count": self.execution_count,
            "label": self.label or first_line(self.source),
            "stance": self.stance,
            "stance_label": self.stance_label,
            "skip_guard_eval_unsafe": self.skip_guard_eval_unsafe,
            "backend": self.backend or "",
            "wall_s": self.wall_s,
            "compile_s": self.compile_s,
            **{f"{p}_s": self.compile_breakdown.get(p, 0.0) for p in PHASES},
            "compiles": self.compiles,
            "backward_compiles": self.backward_compiles,
            "graphs": self.graphs,
            "failed_compiles": self.failed_compiles,
            "recompiles": len(self.recompile_details),
            "graph_breaks": self.graph_break_count,
            "peak_bytes": self.peak_bytes,
            "end_bytes": self.end_bytes,
            "memory_device": self.memory[0].device if self.memory else "",
            "compiled_calls": self.compiled_calls,
            "calls_cached": self.calls.cached,
            "calls_compiled": self.calls.compiled,
            "calls_eager": sum(self.calls.eager.values()),
            "calls_refused": sum(self.calls.refused.values()),
            "calls_failed": sum(self.calls.failed.values()),
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "guard_count": self.guard_count,
            "guard_s": lk.seconds,
            "guard_lower_bound": lk.lower_bound,
            "guard_lookups_timed": lk.timed,
            "guard_lookups_untimed": lk.untimed,
            "guard_lookups_sampled": lk.sampled,
            "eager_fallbacks": self.eager_fallbacks,
            "limit_eager_calls": self.limit_eager_calls,
            "recompile_limit_hits": sum(1 for x in self.recompile_limits if x.compile_id),
            "budget": tight.used if tight is not None else "",
            "eager_first_calls": self.eager_first_calls,
            "refused_recompiles": self.refused_recompiles,
            **_compare_row(self.compare),
            "error": self.error or "",
            "fx_cache_hits": cc.fx_hits,
            "fx_cache_misses": cc.fx_misses,
            "fx_cache_bypasses": cc.fx_bypasses,
            "aot_cache_hits": cc.aot_hits,
            "aot_cache_misses": cc.aot_misses,
            "aot_cache_bypasses": cc.aot_bypasses,
            "cache_state": cc.state,
            "cache_loaded_s": cc.loaded_s,
            "cache_generated_s": cc.generated_s,
            "cache_saved_s": cc.saved_s,
            "cache_loaded_from": cc.loaded_from or "",
            "cache_verdict": cc.verdict,
            **_parts_row(self.call_parts),
            "guard_lookups_calibrated": lk.calibrated,
            **_cuda_row(self),
        }

    def advice(self) -> list[str]:
        """At most three hints drawn from this report's numbers."""
        from .advice import advise

        return advise(self)

    def figure(self) -> Any:
        """Compile, cache lookups and execution as a stacked bar."""
        from .plots import report_figure

        return report_figure(self)

    # The words are render's: the data class stays plain.
    def text(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report as text: its headline, its hints (unless ``hints`` is
        False), the rows that matter for this cell (every row with
        ``verbose``), ``max_details`` detail lines under a row before the rest
        fold (see :func:`stance_magic.render.report_text`)."""
        from .render import MAX_DETAILS, report_text

        n = MAX_DETAILS if max_details is None else max_details
        return report_text(self, n, verbose, self.advice() if hints else ())

    def html(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report as HTML, the other rows folded in a ``<details>`` (see
        :func:`stance_magic.render.report_html`)."""
        from .render import MAX_DETAILS, report_html

        n = MAX_DETAILS if max_details is None else max_details
        return report_html(self, n, verbose, self.advice() if hints else ())

    def views(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> tuple[str, str]:
        """(text, HTML) of the report, its hints drawn once for both."""
        from .render import MAX_DETAILS, report_html, report_text

        n = MAX_DETAILS if max_details is None else max_details
        lines = self.advice() if hints else ()
        return report_text(self, n, verbose, lines), report_html(self, n, verbose, lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def __getattr__(self, name: str) -> Any:
        # only reached for a name the report does not have: the old flat names
        if name in _MOVED_TEXT:
            from . import render

            _deprecated(name, f"lookups (its words: stance_magic.render.{_MOVED_TEXT[name]})")
            return getattr(render, _MOVED_TEXT[name])(self.lookups)
        moved = _MOVED.get(name)
        if moved is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        part, new = moved
        _deprecated(name, f"{part}.{new}" if part else new)
        holder = getattr(self, part) if part else self
        return getattr(holder, new)


_COMPARE_KEYS = (
    "eager_s",
    "compiled_s",
    "eager_peak_bytes",
    "compiled_first_peak_bytes",
    "compiled_steady_peak_bytes",
    "speedup",
    "break_even_calls",
)


def _parts_row(p: CallParts | None) -> dict[str, Any]:
    """The parts of a compiled call: columns after every earlier one."""
    return {
        "call_s": p.call_s if p is not None else None,
        "call_wrapper_s": p.wrapper_s if p is not None else None,
        "call_lookup_s": p.lookup_s if p is not None else None,
        "call_compiled_s": p.compiled_s if p is not None else None,
        "call_eager_s": p.eager_s if p is not None else None,
        "call_lookup_bounded": p.lookup_bounded if p is not None else None,
    }


def _cuda_row(rep: CellReport) -> dict[str, Any]:
    """The GPU's columns of a summary row, after every other: whether the
    times were synchronized, Inductor's named parts, CUDA graphs, CUDA memory."""
    cg = rep.cudagraphs
    cuda = next((m for m in rep.memory if m.device.startswith("cuda")), None)
    kb, fr = rep.kernel_breakdown, rep.first_run_breakdown
    return {
        "synchronized": rep.synchronized,
        "kernel_compile_s": kb.get("kernel_compile", 0.0),
        "autotune_s": kb.get("autotune", 0.0),
        "first_run_autotune_s": fr.get("runtime_autotune", 0.0),
        "cudagraph_record_s": fr.get("cudagraph_record", 0.0) + kb.get("cudagraph_record", 0.0),
        "cudagraphs_recorded": cg.recorded,
        "cudagraphs_for_new_sizes": cg.for_new_sizes,
        "cudagraphs_rerecorded": cg.rerecorded,
        "cudagraphs_replayed": cg.replayed,
        "cudagraphs_skipped": cg.skipped,
        "cudagraph_skip_reasons": " | ".join(s.reason for s in cg.skips if s.reason),
        "cuda_peak_bytes": cuda.peak_bytes if cuda is not None else None,
        "cuda_peak_reserved_bytes": cuda.peak_reserved_bytes if cuda is not None else None,
        "cuda_reserved_bytes": cuda.reserved_bytes if cuda is not None else None,
        "cudagraphs_pending_backward": len(cg.pending_backward),
        "cudagraph_output_overwritten": cg.overwritten_output,
        # a compiled call's code on the GPU (CallParts.device_s)
        "call_device_s": rep.call_parts.device_s if rep.call_parts is not None else None,
    }


def _compare_row(c: Comparison | None) -> dict[str, Any]:
    """--compare's columns of a summary row (None in each without --compare)."""
    return {k: getattr(c, k) if c is not None else None for k in _COMPARE_KEYS}


#: Names of earlier releases, still read (with a DeprecationWarning, once
#: each) for one release: old name -> (the part it moved into, its name there).
_MOVED: dict[str, tuple[str, str]] = {
    "guard_s": ("lookups", "seconds"),
    "guard_per_call_s": ("lookups", "per_lookup_s"),
    "guard_lookups_timed": ("lookups", "timed"),
    "guard_lookups_untimed": ("lookups", "untimed"),
    "guard_lookups_sampled": ("lookups", "sampled"),
    "guard_targets": ("lookups", "targets"),
    "fullest": ("", "tightest_budget"),
    "trace_file": ("shared", "trace_file"),
    "trace_compile_ids": ("shared", "trace_compile_ids"),
    "tlparse_index": ("shared", "tlparse_index"),
    "timeline_file": ("shared", "timeline_file"),
    "fx_cache_hits": ("compile_caches", "fx_hits"),
    "fx_cache_misses": ("compile_caches", "fx_misses"),
    "fx_cache_bypasses": ("compile_caches", "fx_bypasses"),
    "aot_cache_hits": ("compile_caches", "aot_hits"),
    "aot_cache_misses": ("compile_caches", "aot_misses"),
    "aot_cache_bypasses": ("compile_caches", "aot_bypasses"),
    "cache_loaded_s": ("compile_caches", "loaded_s"),
    "cache_generated_s": ("compile_caches", "generated_s"),
    "cache_saved_s": ("compile_caches", "saved_s"),
    "cache_state": ("compile_caches", "state"),
    "cache_verdict": ("compile_caches", "verdict"),
    "cache_bypass_reasons": ("compile_caches", "bypass_reasons"),
    "cache_loaded_from": ("compile_caches", "loaded_from"),
}

#: Sentences the report kept as fields in earlier releases, made by render now.
_MOVED_TEXT = {"guard_method": "lookup_method", "guard_bound": "lookup_bound"}
#: ``7/8``, the tightest budget's entries of its limit ("" with none).
_MOVED["budget_text"] = ("", "_budget_used")

_WARNED: set[str] = set()


def _deprecated(old: str, new: str) -> None:
    """Warn once a process that ``old`` is now ``new``."""
    if old in _WARNED:
        return
    _WARNED.add(old)
    warnings.warn(
        f"CellReport.{old} is deprecated and goes in the next release: read .{new}",
        DeprecationWarning,
        stacklevel=_outside_the_package(),
    )


def _outside_the_package() -> int:
    """The stack level of the first frame outside stance_magic (the user's
    line, where a warning should point), counted from the caller of
    ``warnings.warn``."""
    package = os.path.dirname(os.path.abspath(__file__))
    f, level = sys._getframe(2), 2
    while f is not None and f.f_code.co_filename.startswith(package):
        f, level = f.f_back, level + 1
    return level
