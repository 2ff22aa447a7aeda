"""The per-cell report: what torch.compile did in one measured block.

:class:`CellReport` is plain data (a dataclass with :meth:`CellReport.to_dict`);
it is built from what :class:`stance_magic.probe.Recorder` saw. Rendering
lives in :mod:`stance_magic.render`.
"""

from __future__ import annotations

import linecache
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from . import causes as _causes
from . import probe
from .text import first_line, fmt_s, place, short_path
from .text import plural as _plural

PHASES = ("dynamo", "aot_autograd", "backend", "codegen", "other")
PHASE_LABELS = {
    "dynamo": "Dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "backend": "Inductor/backend",
    "codegen": "code generation",
    "other": "other",
}


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
    #: the compile caches this compile consulted (AOTAutograd's, Inductor's
    #: FX graph cache): hits and misses as torch's record counts them
    caches: list[CacheUse] = field(default_factory=list)

    @property
    def where(self) -> str:
        loc = short_path(self.filename) or "?"
        if not self.line:
            return f"{self.name} ({loc})"
        sep = ", line " if loc.startswith("In [") else ":"
        return f"{self.name} ({loc}{sep}{self.line})"


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

    def __str__(self) -> str:
        return f"{self.reason}  ← {self.guard_source}" if self.guard_source else self.reason


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

    def __str__(self) -> str:
        return f"{self.reason}  ← {self.guard_source}" if self.guard_source else self.reason


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

    @property
    def where(self) -> str:
        return _where(self.filename, self.line)

    @property
    def user_where(self) -> str:
        return _where(self.user_filename, self.user_line)

    @property
    def kind(self) -> str:
        """The cause it is grouped by: torch's graph-break id and type, else its summary."""
        return f"{self.gb_id} {self.gb_type}".strip() if self.gb_id else self.summary

    @property
    def place(self) -> str:
        """Where it broke with its line of source: ``In [5], line 8 `print(y)```."""
        return " ".join(p for p in (self.where, f"`{self.source}`" if self.source else "") if p)

    def __str__(self) -> str:
        return f"{self.place}: {self.summary}" if self.place else self.summary

    def todo(self) -> str:
        """One to-do line: where (the user's line first), what, its cost, the fix."""
        place = self.place
        if self.user_filename:
            src = f" `{self.user_source}`" if self.user_source else ""
            place = f"{self.user_where}{src} (inside {self.where})"
        head = self.gb_type or self.summary.split(":", 1)[0]
        tag = f" [{self.gb_id}]" if self.gb_id else ""
        cost = ""
        if self.frames_after:
            cost = f"; {self.frames_after} more frame{'s' if self.frames_after != 1 else ''}"
            cost += f" compiled after it ({fmt_s(self.compile_s_after)})"
        hint = f"; hint: {self.hints[0]}" if self.hints else ""
        return f"{self.count}× {place}: {head}{tag}{cost}{hint}"


@dataclass
class GuardTarget:
    """Cache lookups of one compiled function in the cell."""

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
    def setting(self) -> str:
        """Where the limit comes from, as the report names it."""
        if self.per_call:
            return f"recompile_limit={self.limit} of its torch.compile"
        return self.config

    @property
    def left(self) -> int | None:
        """Recompiles left before torch stops compiling the frame."""
        return None if self.limit is None else max(self.limit - self.entries, 0)

    @property
    def near(self) -> bool:
        """One entry left (or none): the next recompile is the last, or refused."""
        return self.left is not None and self.left <= 1

    def __str__(self) -> str:
        limit = "?" if self.limit is None else self.limit
        text = f"{self.where}: {self.entries} of {limit} entries"
        if self.left == 0:
            text += " (at the limit: torch runs new cases eagerly)"
        elif self.left == 1:
            text += " (1 left: the next recompile is the last)"
        return text


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


@dataclass
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


@dataclass
class CellReport:
    """What torch.compile did and cost in one measured cell.

    All times are seconds. ``compile_s`` is the sum of torch's own
    ``CompilationMetrics`` records that landed in the cell (forward frames
    and lazily compiled backward graphs); ``compile_breakdown`` splits it
    into exclusive phases. ``cache_hits``/``cache_misses`` count calls into
    compiled frames (a call into an empty cache that compiles is a miss).
    ``guard_s`` is the guard evaluation time of the cell, measured as
    ``guard_method`` says. ``index`` is the report's position in the
    history (1 for the first); ``execution_count`` is the number IPython gave
    the cell (``In [7]``), when a front end knows it.
    """

    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: str | None = None
    index: int = 0
    execution_count: int | None = None
    label: str | None = None
    source: str = ""
    wall_s: float = 0.0
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
    cache_hits: int = 0
    cache_misses: int = 0
    guard_count: int = 0
    guard_s: float | None = None
    guard_per_call_s: float | None = None
    guard_method: str = ""
    #: why guard_s is a lower bound (lookups that could not be timed), or None
    guard_bound: str | None = None
    #: lookups timed in situ / not timed (resume functions, nested frames)
    guard_lookups_timed: int = 0
    guard_lookups_untimed: int = 0
    #: lookups counted but not timed (sampling), in ``guard_s`` by extrapolation
    guard_lookups_sampled: int = 0
    guard_targets: list[GuardTarget] = field(default_factory=list)
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
    causes: list[_causes.Cause] = field(default_factory=list)
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
    memory: list[probe.MemoryFigure] = field(default_factory=list)
    #: the times of this report were taken with memory measuring on
    memory_on: bool = False
    error: str | None = None
    frames: list[FrameCompile] = field(default_factory=list)
    #: --compare's figures (None for a cell measured once; see :class:`Comparison`)
    compare: Comparison | None = None
    notes: list[str] = field(default_factory=list)
    #: rank 0 of a block gathered across ranks (``measure(gather=True)``,
    #: ``%%stance --ranks``): the combined view, a :class:`stance_magic.ranks.RankReport`
    ranks: Any = field(default=None, repr=False, compare=False)
    #: ``--trace``: this cell's structured trace (what TORCH_TRACE writes), its
    #: compile ids, and tlparse's index.html of it (see :mod:`stance_magic.share`)
    trace_file: str | None = None
    trace_compile_ids: list[str] = field(default_factory=list)
    tlparse_index: str | None = None
    #: ``--timeline``: the cell as a Chrome trace / Perfetto JSON file
    timeline_file: str | None = None
    # Compile caches (see add_cache_figures): hits and misses as torch's
    # records count them, bypasses as torch logged them
    fx_cache_hits: int = 0
    fx_cache_misses: int = 0
    fx_cache_bypasses: int = 0
    aot_cache_hits: int = 0
    aot_cache_misses: int = 0
    aot_cache_bypasses: int = 0
    #: compile time outside Dynamo of compiles whose graphs came from the
    #: caches / were generated (misses, bypasses, caches off)
    cache_loaded_s: float = 0.0
    cache_generated_s: float = 0.0
    #: what torch recorded for generating the graphs the hits loaded
    cache_saved_s: float | None = None
    #: "warm", "partly warm", "cold", "caches off" or "" (no Inductor compile)
    cache_state: str = ""
    #: the one-line verdict ("warm: 2 of 2 graphs loaded ...")
    cache_verdict: str = ""
    #: torch's reasons for the bypasses
    cache_bypass_reasons: list[str] = field(default_factory=list)
    #: the file of a %stance cache load whose artifacts these hits used
    cache_loaded_from: str | None = None

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
    def fullest(self) -> Budget | None:
        """The frame with the fewest recompiles left (most entries on a tie)."""
        if not self.recompile_budget:
            return None
        return min(self.recompile_budget, key=lambda b: (b.left is None, b.left, -b.entries))

    @property
    def budget_text(self) -> str:
        """``7/8``: the fullest frame's entries of its limit ("" with none)."""
        b = self.fullest
        if b is None:
            return ""
        return f"{b.entries}/{b.limit if b.limit is not None else '?'}"

    @property
    def compiled_anything(self) -> bool:
        return bool(self.compiles or self.backward_compiles)

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
        """Plain data (JSON-ready) for export: every field, and the derived
        ``recompiles`` and ``graph_breaks`` lists."""
        data = asdict(self)
        data["recompiles"] = self.recompiles
        data["graph_breaks"] = self.graph_breaks
        return data

    def summary_row(self) -> dict[str, Any]:
        """One flat row for the history table and CSV export."""
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
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "guard_count": self.guard_count,
            "guard_s": self.guard_s,
            "guard_lower_bound": self.guard_bound is not None,
            "guard_lookups_timed": self.guard_lookups_timed,
            "guard_lookups_untimed": self.guard_lookups_untimed,
            "guard_lookups_sampled": self.guard_lookups_sampled,
            "eager_fallbacks": self.eager_fallbacks,
            "limit_eager_calls": self.limit_eager_calls,
            "recompile_limit_hits": sum(1 for x in self.recompile_limits if x.compile_id),
            "budget": self.budget_text,
            "eager_first_calls": self.eager_first_calls,
            "refused_recompiles": self.refused_recompiles,
            **_compare_row(self.compare),
            "error": self.error or "",
            "fx_cache_hits": self.fx_cache_hits,
            "fx_cache_misses": self.fx_cache_misses,
            "fx_cache_bypasses": self.fx_cache_bypasses,
            "aot_cache_hits": self.aot_cache_hits,
            "aot_cache_misses": self.aot_cache_misses,
            "aot_cache_bypasses": self.aot_cache_bypasses,
            "cache_state": self.cache_state,
            "cache_loaded_s": self.cache_loaded_s,
            "cache_generated_s": self.cache_generated_s,
            "cache_saved_s": self.cache_saved_s,
            "cache_loaded_from": self.cache_loaded_from or "",
            "cache_verdict": self.cache_verdict,
        }

    def advice(self) -> list[str]:
        """At most three hints drawn from this report's numbers."""
        from .advice import advise

        return advise(self)

    def figure(self) -> Any:
        """Compile, cache lookups and execution as a stacked bar."""
        from .plots import report_figure

        return report_figure(self)

    # Rendering is delegated so the data class stays plain.
    def __str__(self) -> str:
        from .render import report_text

        return report_text(self)

    def _repr_html_(self) -> str:
        from .render import report_html

        return report_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


_COMPARE_KEYS = (
    "eager_s",
    "compiled_s",
    "eager_peak_bytes",
    "compiled_first_peak_bytes",
    "compiled_steady_peak_bytes",
    "speedup",
    "break_even_calls",
)


def _compare_row(c: Comparison | None) -> dict[str, Any]:
    """--compare's columns of a summary row (None in each without --compare):
    the same flat keys as before the figures were nested, for CSV readers."""
    return {k: getattr(c, k) if c is not None else None for k in _COMPARE_KEYS}


def split_recompile_reason(text: str) -> tuple[str, str]:
    """(reason, guard source) from a ``recompile_reason``, the guard's file
    written as the report writes places (see
    :func:`stance_magic.probe.split_recompile_reason`)."""
    return probe.split_recompile_reason(text, short_path)


def error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}" if head else type(exc).__name__


def _source_line(filename: str, line: int | None) -> str:
    if not filename or not line:
        return ""
    text = linecache.getline(filename, line).strip()
    return text if len(text) <= 120 else text[:119] + "…"


def _refused_guards(error: BaseException | None) -> list[str]:
    """The guard failures torch lists in a fail_on_recompile refusal."""
    if error is None:
        return []
    text = str(error)
    if "fail_on_recompile" not in text:
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("- "):
            out.append(line[2:].strip())
    return out


def _frame_name(rec: probe.CompileRecord) -> tuple[str, str, int | None]:
    """How the report names a compiled frame: the nn.Module's class for a
    module's forward (through torch's wrapper or a library's decorator too),
    a resume function by where its graph break was."""
    co_name, info = rec.co_name, rec.info
    if co_name is None and info.frame is not None:
        return info.frame  # torch wrote no code name (the recompile-limit attempt)
    name = co_name or "(backward)"
    filename, line = rec.filename, rec.line
    resumed = probe.resume_parts(co_name)
    if resumed:
        fn, at = resumed
        return f"{fn} after the graph break at line {at}", filename, line
    if info.module is not None:
        mod_name, mod_file, mod_line = info.module
        if co_name == "forward" or rec.module_wrapper:
            return mod_name, mod_file, mod_line
        return f"{mod_name} (through {co_name})", filename, line
    return name, filename, line


def build_report(
    rep: CellReport,
    *,
    window: probe.Window,
    stance: Any,
    wall_s: float,
    error: BaseException | None,
    source: str,
    label: str | None,
    index: int,
) -> CellReport:
    """Fill ``rep`` from a recorder window (in place; returns it)."""
    rep.stance = stance.name
    rep.skip_guard_eval_unsafe = stance.skip_guard_eval_unsafe
    rep.backend = stance.backend_name
    rep.index = index
    rep.label = label
    rep.source = source
    rep.wall_s = wall_s
    rep.error = error_line(error) if error is not None else None

    frames: list[FrameCompile] = []
    breakdown = dict.fromkeys(PHASES, 0.0)
    cold = 0
    for rec in window.compiles:
        kind = rec.kind
        if kind is None:
            continue
        info = rec.info
        for k, v in rec.phases.items():
            breakdown[k] += v
        name, filename, line = _frame_name(rec)
        backend = info.backend
        if kind == "frame" and stance.name == "aot_eager_then_compile" and info.example_calls == 1:
            backend = "aot_eager"  # torch compiles the first call under aot_eager
        graph = rec.backend_graph or kind == "backward"
        failed = rec.failed
        exception = info.exception
        if failed is None and exception is not None:
            # torch wrote the record while an exception unwound the compile
            # (a backend raised, the cell was interrupted): no graph exists
            failed = f"{exception}: the compile did not finish"
        if failed is not None and kind == "frame" and info.limit is None:
            graph = graph and not exception
        cold += rec.cold
        frames.append(
            FrameCompile(
                compile_id=rec.compile_id,
                kind=kind,
                name=name,
                filename=filename,
                line=line,
                seconds=rec.seconds,
                phases=rec.phases,
                guard_count=rec.guard_count,
                recompile_reason=rec.recompile_reason,
                failed=failed,
                backend=backend if graph else None,
                graph=graph,
                during_eager_call=info.during_eager_call,
                # the exception torch unwound while writing the record is the
                # cell's (its type may differ from fail_type: see probe.reached_cell)
                raised=failed is not None and probe.reached_cell(info, error),
            )
        )
    rep.frames = frames
    if window.reset_seen:
        rep.notes.append(
            "torch.compiler.reset() ran in this cell: the figures cover compiles before "
            "and after it (torch restarts compile ids at 0/0)"
        )
    rep.compile_s = sum(f.seconds for f in frames)
    rep.compile_breakdown = breakdown
    fwd = [f for f in frames if f.kind == "frame"]
    rep.compiles = len(fwd)
    rep.backward_compiles = len(frames) - len(fwd)
    rep.graphs = sum(1 for f in frames if f.graph and not f.failed)
    rep.failed_compiles = sum(1 for f in frames if f.failed)
    rep.recompile_details = []
    failures_by_id = {
        rec.compile_id: rec.info.guard_failures
        for rec in window.compiles
        if rec.info.guard_failures
    }
    stacks_by_id = {
        rec.compile_id: rec.info.user_stack for rec in window.compiles if rec.info.user_stack
    }
    for f in fwd:
        if f.recompile_reason:
            reason, pointer = split_recompile_reason(f.recompile_reason)
            failures = _guard_failures(failures_by_id.get(f.compile_id, []))
            stack = stacks_by_id.get(f.compile_id, [])
            rep.recompile_details.append(
                Recompile(
                    reason,
                    f.where,
                    f.compile_id,
                    pointer,
                    failures=failures,
                    called_from=called_from(stack),
                    stack=[frame_text(*fr) for fr in stack],
                )
            )
    rep.graph_break_details = _break_costs(_group_breaks(window.graph_breaks), frames)
    if window.break_source == "counters":
        rep.notes.append(
            "graph breaks counted from torch's counters (this torch has no graph_breaks "
            "log artifact): some kinds of break are missed"
        )
    rep.guard_count = sum(f.guard_count or 0 for f in fwd)

    rep.compiled_calls = window.compiled_calls
    rep.cache_hits = window.hits
    rep.cache_misses = window.misses + cold
    rep.eager_calls = dict(window.eager_calls)
    if stance.name == "eager_then_compile":
        rep.eager_first_calls = window.eager_calls.get("eager_then_compile", 0)
        rep.compiles_during_eager_calls = sum(1 for f in fwd if f.during_eager_call)
    # A miss that compiled nothing: what torch did instead, by the stance in
    # force at that call (the %%stance line's, or one set inside the cell).
    misses = window.miss_events
    rep.eager_fallbacks = sum(1 for m in misses if m.outcome == probe.MISS_EAGER)
    refused = [m for m in misses if m.outcome == probe.MISS_REFUSED]
    rep.refused_recompiles = len(refused)
    rep.refused_guards = [g for m in refused for g in m.failures] or _refused_guards(error)
    if not rep.refused_recompiles and rep.refused_guards:
        rep.refused_recompiles = 1
    if not rep.refused_recompiles and rep.error and "fail_on_recompile" in rep.error:
        rep.refused_recompiles = 1  # refused from an empty cache: no lookup first
    rep.recompile_limits = _recompile_limits(window)
    rep.causes = _recompile_causes(rep, window)
    rep.dynamic_shapes = _dynamic_shapes(window, frames)
    if error is not None and type(error).__name__ == "ConstraintViolationError":
        rep.notes.append(_constraint_note(str(error)))
    rep.recompile_budget = [
        Budget(f"{n} ({_where(f, line)})" if f else n, b.entries, b.limit, b.config, b.per_call)
        for b in window.budgets
        for n, f, line in [b.frame]
    ]
    rep.limit_eager_calls = sum(x.eager_calls for x in rep.recompile_limits)
    _guard_figures(rep, window)
    return rep


def _recompile_causes(rep: CellReport, window: probe.Window) -> list[_causes.Cause]:
    """The trap behind each recompile and refusal, from the guard failure
    that decides it (see :func:`stance_magic.causes.decisive`)."""
    defined = {m.compile_id: m.defined for m in window.miss_events if m.compile_id}
    stances = {m.compile_id: m.stance for m in window.miss_events if m.compile_id}
    found: dict[tuple[str, str], _causes.Cause] = {}

    def add(failures: list[Any], fallback: str, context: dict[str, Any], stance: str) -> None:
        _, text = _causes.decisive(failures, fallback)
        ctx = {
            expr: (name, _place(filename), what)
            for expr, (name, filename, _line, what) in context.items()
        }
        unlinked = stance if probe.delayed_callback_unlinked(stance) else None
        c = _causes.identify(text, ctx, unlinked_stance=unlinked) if text else None
        if c is None:
            return
        key = (c.kind, c.subject)
        if key in found:
            found[key].count += 1
        else:
            found[key] = c

    for r in rep.recompile_details:
        add(r.failures, str(r), defined.get(r.compile_id, {}), stances.get(r.compile_id, ""))
    for m in window.miss_events:
        if m.outcome == probe.MISS_REFUSED and m.failures:
            add(_guard_failures(m.failures), "", m.defined, m.stance)
    return list(found.values())


def _pretty_source(source: str) -> str:
    """``L['x'].size()[0]`` as a user writes it: ``x.size()[0]``."""
    return re.sub(r"\b[LG]\[['\"]([^'\"]+)['\"]\]", r"\1", source)


def _dynamic_shapes(window: probe.Window, frames: list[FrameCompile]) -> list[DynamicShapes]:
    where = {f.compile_id: f.where for f in frames}
    out = []
    for rec in window.compiles:
        shapes = rec.info.shapes
        if shapes is None:
            continue
        cid = rec.compile_id
        d = DynamicShapes(cid, where.get(cid, ""))
        # a module's parameters and buffers are graph inputs too, not the user's
        d.inputs = [
            f"{_pretty_source(s)}: [{', '.join(dims)}]"
            for s, dims in shapes.inputs
            if "._parameters[" not in s and "._buffers[" not in s
        ]
        d.symbols = [f"{sym} = {_pretty_source(src)}: {why}" for sym, src, why in shapes.symbols]
        for sym, value, src, guard, loc in shapes.specialized:
            line = f"{sym} = {_pretty_source(src)} specialized to {value} by {guard}"
            code, _, at = loc.partition("  # ")
            m = re.match(r"^(?P<file>.+):(?P<line>\d+) in (?P<fn>.+)$", at.strip())
            if m:
                at = f"{_where(m.group('file'), int(m.group('line')))} in {m.group('fn')}"
            if code.strip():
                line += f" at `{code.strip()}`" + (f" ({at.strip()})" if at.strip() else "")
            d.specialized.append(line)
        out.append(d)
    return out


def _constraint_note(text: str) -> str:
    """One line for torch's ConstraintViolationError (a dimension marked
    dynamic that the code specialized)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("- ")), lines[0] if lines else text)
    return (
        "a dimension marked dynamic (mark_dynamic) was specialized by the code, so torch "
        f"refused to compile: {detail.lstrip('- ')}"
    )


def frame_text(name: str, filename: str, line: int | None) -> str:
    """A user frame as the report writes it: ``In [1], line 2 in helper``;
    a cell's own code (``<module>``) by its line alone."""
    text = _where(filename, line) or name
    return text if name == "<module>" else f"{text} in {name}"


def called_from(stack: list[tuple[str, str, int]]) -> str:
    """The user's line that made a call, from its user frames (innermost
    first): ``In [3], line 2``, or ``In [1], line 2 in helper, from In [3],
    line 2`` when a function made it (the notebook line is the outermost cell
    frame)."""
    if not stack:
        return ""
    text = frame_text(*stack[0])
    cells = [fr for fr in stack[1:] if _place(fr[1]).startswith("In [")]
    if cells:
        text += f", from {_where(cells[-1][1], cells[-1][2])}"
    return text


def _place(filename: str) -> str:
    if filename == probe.NOTEBOOK:
        return "In [?]"
    return short_path(filename) if filename else ""


def _guard_failures(texts: list[str]) -> list[GuardFailure]:
    return [GuardFailure(*split_recompile_reason(t)) for t in texts]


def _recompile_limits(window: probe.Window) -> list[RecompileLimit]:
    """Frames at the recompile limit in this cell: the attempt that hit it
    (a record) and every call that then ran eagerly (a miss torch did not
    compile because of it), grouped by frame."""
    out: dict[tuple[Any, ...], RecompileLimit] = {}

    def entry(hit: probe.LimitHit) -> RecompileLimit:
        name, filename, line = hit.frame
        key = (name, filename, line, hit.config)
        lim = out.get(key)
        if lim is None:
            where = f"{name} ({_where(filename, line)})" if filename else name
            lim = out[key] = RecompileLimit(
                where,
                hit.config,
                hit.limit,
                None,
                automatic_dynamic=probe.dynamo_config_flag("automatic_dynamic_shapes"),
                per_call=hit.per_call,
            )
        return lim

    for rec in window.compiles:
        info = rec.info
        hit = info.limit
        if hit is not None:
            lim = entry(hit)
            lim.compile_id = rec.compile_id
            if info.guard_failures and not lim.failures:
                lim.failures = _guard_failures(info.guard_failures)
    for m in window.miss_events:
        if m.outcome == probe.MISS_LIMIT and m.limit is not None:
            entry(m.limit).eager_calls += 1
    return list(out.values())


def _group_breaks(events: list[Any]) -> list[GraphBreak]:
    """Breaks grouped by cause (torch's graph-break id, else its summary) and
    place; each with torch's explanation, hints and documentation page."""
    groups: dict[tuple[str, str, int | None], GraphBreak] = {}
    for ev in events:
        summary = probe.break_summary(ev.reason)
        bt = probe.graph_break_type(ev.reason)
        key = (bt.gb_id if bt else summary, ev.filename, ev.line)
        g = groups.get(key)
        if g is not None:
            g.count += 1
            continue
        g = groups[key] = GraphBreak(
            reason=ev.reason,
            count=1,
            summary=summary,
            filename=ev.filename,
            line=ev.line,
            source=_source_line(ev.filename, ev.line),
            skipped_frame=ev.skipped_frame,
        )
        if bt is not None:
            g.gb_id, g.gb_type, g.url = bt.gb_id, bt.gb_type, bt.url or ""
        g.explanation = _gb_field(ev.reason, "Explanation:") or (bt.explanation if bt else "")
        g.hints = _gb_hints(ev.reason) or (list(bt.hints) if bt else [])
        if ev.filename and _is_library(ev.filename):
            user = next((fl for fl in reversed(ev.stack) if not _is_library(fl[0])), None)
            if user is not None:
                g.user_filename, g.user_line = user
                g.user_source = _source_line(*user)
    return list(groups.values())


def _gb_field(reason: str, label: str) -> str:
    for line in reason.splitlines():
        line = line.strip()
        if line.startswith(label):
            return line[len(label) :].strip()
    return ""


def _gb_hints(reason: str) -> list[str]:
    return [ln.strip()[5:].strip() for ln in reason.splitlines() if ln.strip().startswith("Hint:")]


def _is_library(path: str) -> bool:
    """A file of an installed package or of Python itself (not the user's)."""
    import os
    import site
    import sys

    if not path or path.startswith("<"):
        return False  # a notebook cell or an exec'd string
    roots = [*site.getsitepackages(), site.getusersitepackages(), sys.base_prefix, sys.prefix]
    real = os.path.realpath(path)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots if r)


def _break_costs(breaks: list[GraphBreak], frames: list[FrameCompile]) -> list[GraphBreak]:
    """Each break's cost (the resume frames torch compiled after it), most
    costly first."""
    for g in breaks:
        tail = f"after the graph break at line {g.line}"
        after = [
            f
            for f in frames
            if f.kind == "frame" and f.filename == g.filename and f.name.endswith(tail)
        ]
        g.frames_after = len(after)
        g.graphs_after = sum(1 for f in after if f.graph)
        g.compile_s_after = sum(f.seconds for f in after)
    return sorted(breaks, key=lambda g: (-g.compile_s_after, -g.frames_after, -g.count))


def _lookup_estimate(t: Any) -> tuple[float, list[tuple[float, float]]]:
    """(seconds, (lookup seconds, weight) pairs) for one function's lookups.

    Stratified: the first timed lookups stand for themselves; each spot check
    after them (1 in ``probe.SAMPLE_EVERY``) for its share of the counted-only
    ones, so the cell's first, slower lookups do not stand for the rest.
    Without a spot check yet, every timed lookup shares them alike."""
    if not t.timed:
        return 0.0, []
    weighted = [(x, 1.0) for x in t.samples]
    if not t.sampled:
        return t.seconds, weighted
    spots = t.spot_samples
    if not spots:
        w = (t.timed + t.sampled) / t.timed
        return t.seconds * w, [(x, w) for x in t.samples]
    extra = t.sampled / len(spots)  # each spot check's share of the counted-only
    return t.seconds + sum(spots) * extra, weighted + [(x, extra) for x in spots]


def _weighted_median(pairs: list[tuple[float, float]]) -> float | None:
    """The lookup time below and above which half the weight lies."""
    if not pairs:
        return None
    pairs = sorted(pairs)
    half = sum(w for _, w in pairs) / 2
    run = 0.0
    for i, (x, w) in enumerate(pairs):
        run += w
        if run > half:
            return x
        if run == half and i + 1 < len(pairs):  # an even split: the mean of the two
            return (x + pairs[i + 1][0]) / 2
    return pairs[-1][0]


def _guard_figures(rep: CellReport, window: probe.Window) -> None:
    """Guard evaluation: timed in situ (default), or from the profiler (-g)."""
    timed = window.timed_lookups
    untimed = window.untimed_lookups
    sampled = window.sampled_lookups
    rep.guard_lookups_timed = timed
    rep.guard_lookups_untimed = untimed
    rep.guard_lookups_sampled = sampled
    weighted_all: list[tuple[float, float]] = []
    rep.guard_targets = []
    for t in window.targets:
        seconds, weighted = _lookup_estimate(t)
        weighted_all += weighted
        rep.guard_targets.append(
            GuardTarget(
                name=t.name,
                where=_where(t.filename, t.line),
                timed=t.timed,
                seconds=seconds,
                untimed=t.untimed,
                misses=t.misses,
                eager_calls=t.eager_calls,
                per_lookup_s=_weighted_median(weighted),
                sampled=t.sampled,
            )
        )
    if window.profiled_lookups is not None:
        samples = window.profiled_lookups
        n = len(samples)
        rep.guard_s = sum(samples)
        rep.guard_per_call_s = statistics.median(samples) if samples else None
        rep.guard_method = (
            f"measured: {n} '{probe.CACHE_LOOKUP_EVENT}' profiler events (frame locals "
            "plus guards); the profiler slows the rest of the cell"
        )
        if probe.torch_version() <= probe.PROFILER_EMPTY_LOOKUPS_UNTIL:
            rep.guard_method += (
                f"; torch {probe._torch_str()}'s profiler also reports lookups of frames "
                "with nothing compiled (the first call, torch's own frames after a "
                "compile), counted here too"
            )
        return
    lookups = timed + untimed + sampled
    if not lookups:
        rep.guard_s = 0.0
        rep.guard_method = "no cache lookups in this cell"
        return
    if not timed:
        rep.guard_s = None
        rep.guard_method = (
            f"not timed: the {_plural(untimed, 'lookup')} of this cell came from resume "
            "functions after graph breaks or frames compiled on their own, which have no "
            "start to time from (use -g to measure them with the profiler)"
        )
        return
    # each function's timed lookups stand for its counted-only ones too
    rep.guard_s = sum(t.seconds for t in rep.guard_targets)
    # per lookup: the median, so one lookup preempted by the OS does not move it
    rep.guard_per_call_s = _weighted_median(weighted_all)
    rep.guard_method = (
        f"timed in situ: {_plural(timed, 'lookup')}, each from torch.compile's call into "
        "Dynamo to the end of the lookup (frame locals, guard checks); -u saves part of "
        "it, as it still builds the locals and runs the guards that tell entries apart"
    )
    resumed = window.resumed_lookups
    if resumed:
        rep.guard_method += (
            f"; {_plural(resumed, 'nested lookup')} (resume functions after graph breaks, "
            "frames compiled on their own) timed from the call that made them "
            "(sys.monitoring)"
        )
    if sampled:
        rep.guard_method += (
            f"; {timed} of {timed + sampled} lookups of the called functions timed (the "
            f"first {probe.SAMPLE_FIRST} of each, then 1 in {probe.SAMPLE_EVERY}), the "
            "total extrapolated from them per function"
        )
    if untimed:
        if window.resume_timing_off is None:
            which = (
                "resume functions after graph breaks, frames compiled on their own: the "
                "first lookup from each caller while measured"
            )
            if not probe.monitoring.EX_CALLS_SEEN:
                which += (
                    ", and on Python 3.12 those made by a call with *args/**kwargs, as "
                    "torch's calls of resume functions and of module forwards are (3.12 "
                    "gives no monitoring event for them)"
                )
            which += "; the others are timed"
        else:
            which = (
                "resume functions after graph breaks, frames compiled on their own; "
                f"timing them from their call {window.resume_timing_off}"
            )
        rep.guard_bound = (
            f"a lower bound: {_plural(untimed, 'more lookup')} ({which}) have no start to "
            "time from; -g measures all of them with the profiler"
        )


def _where(filename: str, line: int | None) -> str:
    return place(short_path(filename), line) if filename else ""


# --------------------------------------------------------------------------
# Compile caches: where each compile's time came from
# --------------------------------------------------------------------------

#: how the report names each cache
CACHE_LABELS = {"aot_autograd": "AOTAutograd cache", "inductor": "FX graph cache"}


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

    def __str__(self) -> str:
        label = CACHE_LABELS.get(self.cache, self.cache)
        if self.state == "off":
            return f"{label} off"
        parts = []
        if self.hits:
            parts.append(_plural(self.hits, "hit"))
        if self.misses:
            parts.append(f"{self.misses} miss{'es' if self.misses != 1 else ''}")
        if self.bypasses:
            parts.append(f"{self.bypasses} bypass{'es' if self.bypasses != 1 else ''}")
        return f"{label} {', '.join(parts) or 'not consulted'}"


def _frame_caches(rec: Any, events: list[Any]) -> list[CacheUse]:
    from .probe import caches as pc

    mine = pc.events_of(rec, events)
    out = []
    for cache in (pc.AOT_AUTOGRAD, pc.INDUCTOR):
        evs = [e for e in mine if e.cache == cache]
        use = CacheUse(
            cache,
            hits=pc.record_count(rec, cache, "hit"),
            misses=pc.record_count(rec, cache, "miss"),
            bypasses=sum(1 for e in evs if e.state == "bypass"),
            disabled=any(e.state == "disabled" for e in evs),
            keys=[e.key for e in evs if e.key],
            reasons=[e.reason for e in evs if e.state == "bypass" and e.reason],
        )
        saved = [e.saved_s for e in evs if e.state == "hit" and e.saved_s is not None]
        use.saved_s = sum(saved) if saved else None
        if use.state:
            out.append(use)
    return out


def _frame_source(f: FrameCompile) -> str:
    """``loaded`` (every graph from a cache), ``generated``, ``partly loaded``,
    or "" (no compile cache consulted: not Inductor)."""
    fx = next((c for c in f.caches if c.cache == "inductor"), None)
    aot = next((c for c in f.caches if c.cache == "aot_autograd"), None)
    if fx is None and aot is None:
        return ""
    if aot is not None and aot.state == "hit":
        return "loaded"
    if fx is None:
        return "generated"
    return {"hit": "loaded", "mixed": "partly loaded" if fx.hits else "generated"}.get(
        fx.state, "generated"
    )


def _frame_saved(f: FrameCompile) -> float | None:
    aot = next((c for c in f.caches if c.cache == "aot_autograd" and c.state == "hit"), None)
    if aot is not None and aot.saved_s is not None:
        return aot.saved_s
    fx = next((c for c in f.caches if c.cache == "inductor"), None)
    return fx.saved_s if fx is not None else None


def cache_line(f: FrameCompile) -> str:
    """One compile, by where its time came from."""
    dynamo = f.phases.get("dynamo", 0.0)
    rest = max(f.seconds - dynamo, 0.0)
    source = _frame_source(f)
    text = f"{f.where}: Dynamo tracing {_s(dynamo)}"
    if f.kind == "backward":
        text = f"backward graph of {f.compile_id}"
    text += "; " + ", ".join(str(c) for c in f.caches)
    verb = {"loaded": "loaded", "partly loaded": "partly loaded,"}.get(source, "generated")
    text += f": {verb} in {_s(rest)}"
    saved = _frame_saved(f)
    if source != "generated" and saved is not None:
        text += f" (torch recorded {_s(saved)} generating it)"
    for c in f.caches:
        for r in c.reasons:
            text += f"; {CACHE_LABELS.get(c.cache, c.cache)} bypassed: {probe.first_line(r)}"
    return text


def add_cache_figures(
    rep: CellReport,
    window: Any,
    events: list[Any],
    history: list[Any] | None = None,
    loaded: Any = None,
) -> CellReport:
    """Fill the compile-cache figures of ``rep`` (after :func:`build_report`):
    per compile, AOTAutograd's and Inductor's FX graph cache as torch's
    records count their hits and misses (bypasses and keys from torch's cache
    events); per cell, the time loaded vs generated, the verdict, and a cold
    compile of the same graphs earlier in ``history`` when there is one.
    ``loaded`` maps keys to the file a ``%stance cache load`` read them from."""
    by_id: dict[tuple[str, str], list[Any]] = {}
    for rec in window.records:
        if probe.is_frame_compile(rec) or probe.is_backward_compile(rec):
            kind = "frame" if probe.is_frame_compile(rec) else "backward"
            by_id.setdefault((str(rec.compile_id), kind), []).append(rec)
    for f in rep.frames:
        recs = by_id.get((f.compile_id, f.kind))
        if recs:
            f.caches = _frame_caches(recs.pop(0), events)
    uses = [c for f in rep.frames for c in f.caches]
    for prefix, cache in (("fx", "inductor"), ("aot", "aot_autograd")):
        mine = [c for c in uses if c.cache == cache]
        setattr(rep, f"{prefix}_cache_hits", sum(c.hits for c in mine))
        setattr(rep, f"{prefix}_cache_misses", sum(c.misses for c in mine))
        setattr(rep, f"{prefix}_cache_bypasses", sum(c.bypasses for c in mine))
    rep.cache_bypass_reasons = [probe.first_line(r) for c in uses for r in c.reasons]
    cached = [f for f in rep.frames if f.caches]
    if not cached:
        return rep
    for f in cached:
        rest = max(f.seconds - f.phases.get("dynamo", 0.0), 0.0)
        if _frame_source(f) == "loaded":
            rep.cache_loaded_s += rest
        else:
            rep.cache_generated_s += rest
    saved = [s for f in cached if _frame_source(f) != "generated" for s in [_frame_saved(f)]]
    saved = [s for s in saved if s is not None]
    rep.cache_saved_s = sum(saved) if saved else None
    if loaded:
        hit_keys = {
            k for f in cached for c in f.caches if c.state in ("hit", "mixed") for k in c.keys
        }
        files = {loaded[k] for k in hit_keys if k in loaded}
        if files:
            rep.cache_loaded_from = ", ".join(sorted(files))
    _cache_verdict(rep, cached, history or [])
    return rep


def _cache_verdict(rep: CellReport, cached: list[FrameCompile], history: list[Any]) -> None:
    graphs = rep.fx_cache_hits + rep.fx_cache_misses + rep.fx_cache_bypasses
    loaded = [f for f in cached if _frame_source(f) == "loaded"]
    off = [c for f in cached for c in f.caches if c.state == "off"]
    dynamo = sum(f.phases.get("dynamo", 0.0) for f in cached)
    if off and not graphs:
        rep.cache_state = "caches off"
        names = sorted({CACHE_LABELS[c.cache] for c in off})
        rep.cache_verdict = (
            f"caches off ({' and '.join(names)}): {_plural(len(cached), 'compile')} generated "
            f"everything, {_s(rep.cache_generated_s)} beyond Dynamo tracing ({_s(dynamo)})"
        )
        return
    fx_loaded = rep.fx_cache_hits
    aot = ""
    if rep.aot_cache_hits or rep.aot_cache_misses:
        aot = f"; AOTAutograd cache: {_plural(rep.aot_cache_hits, 'hit')}, "
        aot += f"{rep.aot_cache_misses} miss{'es' if rep.aot_cache_misses != 1 else ''}"
    if loaded and len(loaded) == len(cached):
        rep.cache_state = "warm"
        text = (
            f"warm: {fx_loaded} of {graphs} graphs loaded from the FX graph cache{aot}; "
            f"{_s(rep.cache_loaded_s)} beyond Dynamo tracing ({_s(dynamo)}, paid every time)"
        )
        cold = _cold_match(cached, history)
        if cold is not None:
            seconds, where, n = cold
            same = "the same graphs" if n == len(loaded) else f"{n} of these compiles"
            text += f"; a cold compile of {same} took {_s(seconds)} in {where}"
        elif rep.cache_saved_s is not None:
            text += f"; torch recorded {_s(rep.cache_saved_s)} for generating them"
    elif loaded:
        rep.cache_state = "partly warm"
        text = (
            f"partly warm: {fx_loaded} of {graphs} graphs loaded from the FX graph cache{aot}; "
            f"{_s(rep.cache_loaded_s)} loading, {_s(rep.cache_generated_s)} generating, "
            f"Dynamo tracing {_s(dynamo)}"
        )
    else:
        rep.cache_state = "cold"
        text = (
            f"cold: {graphs} graph{'s' if graphs != 1 else ''} generated (FX graph cache: "
            f"{rep.fx_cache_misses} miss{'es' if rep.fx_cache_misses != 1 else ''}{aot}); "
            f"{_s(rep.cache_generated_s)} beyond Dynamo tracing ({_s(dynamo)})"
        )
    bypasses = rep.fx_cache_bypasses + rep.aot_cache_bypasses
    if bypasses:
        reason = rep.cache_bypass_reasons[0] if rep.cache_bypass_reasons else "torch gave no reason"
        text += f"; {bypasses} bypass{'es' if bypasses != 1 else ''} ({reason})"
    if rep.cache_loaded_from:
        text += f"; loaded by %stance cache load from {rep.cache_loaded_from}"
    rep.cache_verdict = text


def _cold_match(cached: list[FrameCompile], history: list[Any]) -> tuple[float, str, int] | None:
    """The latest earlier cell that generated graphs with the keys these
    compiles loaded: (its compile time for them, its name, how many matched)."""
    keys = [{k for c in f.caches for k in c.keys} for f in cached]
    for old in reversed(history):
        seconds, matched = 0.0, 0
        frames = getattr(old, "frames", [])
        for f_keys in keys:
            if not f_keys:
                continue
            for g in frames:
                if _frame_source(g) == "generated" and f_keys & {
                    k for c in g.caches for k in c.keys
                }:
                    # with its lazily compiled backward (same compile id),
                    # which an AOTAutograd hit loads too
                    seconds += sum(
                        b.seconds
                        for b in frames
                        if b is g or (b.kind == "backward" and b.compile_id == g.compile_id)
                    )
                    matched += 1
                    break
        if matched:
            n = getattr(old, "execution_count", None)
            where = f"In [{n}]" if n else f"cell {getattr(old, 'index', '?')}"
            return seconds, where, matched
    return None


def _s(seconds: float | None) -> str:
    from .render import fmt_s

    return fmt_s(seconds)
