"""The whole report of one measured block: :class:`CellReport`, its fields,
what is derived from them (the stance as typed, the tightest budget, whether
the cell changed something) and its export (:meth:`CellReport.to_dict`,
:meth:`CellReport.summary_row`); its words and charts are handed over to
:mod:`stance_magic.render` and :mod:`stance_magic.plots`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..place import holds_places, worded
from ..text import Shown, first_code_line
from .breaks import GraphBreak
from .caches import CompileCaches, LoadedFunction, PrecompiledFrame, Shared
from .compare import Comparison, Gathered
from .compiles import PHASES, FrameCompile
from .cudagraphs import CudaGraphs
from .deprecated import _moved
from .lookups import CallAccount, CallParts, Lookups
from .recompiles import Budget, DynamicShapes, Recompile, RecompileLimit
from .summary_row import SummaryRow, _compare_row, _cuda_row, _parts_row, _tracing_row
from .tracing import Tracing

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..causes import Cause
    from ..probe import MemoryFigure

__all__ = ["CellReport"]


@holds_places
@dataclass
class CellReport(Shown):
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
    #: where the traceback holds no line of the user's): it holds the user
    #: frames' places (:func:`stance_magic.place.of`) and reads as their words
    error_where: str = field(default="", metadata=worded("called_from"))
    frames: list[FrameCompile] = field(default_factory=list)
    #: --compare's figures (None for a cell measured once; see :class:`Comparison`)
    compare: Comparison | None = None
    notes: list[str] = field(default_factory=list)
    #: rank 0 of a block gathered across ranks (``measure(ranks=True)``,
    #: ``%%stance --ranks``): the combined view, a :class:`stance_magic.report.ranks.RankReport`
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
    #: torch's compile settings (``torch._dynamo.config``,
    #: ``torch._inductor.config``) that differed from their defaults when the
    #: cell ended: full name -> (value, default), each as its ``repr``; read
    #: for a cell that saw torch.compile (None: not read, the cell saw none)
    settings: dict[str, tuple[str, str]] | None = None
    #: Dynamo's tracing time by function and nn.Module (torch's
    #: dynamo_profiler, 2.13+), each function beside the backend's compile
    #: of the frames that start at it
    tracing: Tracing = field(default_factory=Tracing)

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
        is not a field of its own (``lookup_s``, ``fx_cache_hits``, ...)."""
        data = asdict(self)
        data["recompiles"] = self.recompiles
        data["graph_breaks"] = self.graph_breaks
        data["compile_caches"]["verdict"] = self.compile_caches.verdict
        for key, value in self.summary_row().items():
            data.setdefault(key, value)
        return data

    def summary_row(self) -> dict[str, Any]:
        """One flat row for the history table and CSV export (a dict; the
        column names of the previous release still read, with a
        ``DeprecationWarning``: see :data:`~stance_magic.report.summary_row.OLD_COLUMNS`)."""
        lk, cc = self.lookups, self.compile_caches
        tight = self.tightest_budget
        return SummaryRow(
            {
                "cell": self.index,
                "execution_count": self.execution_count,
                "label": self.label or first_code_line(self.source),
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
                "lookup_s": lk.seconds,
                "lookup_lower_bound": lk.lower_bound,
                "lookups_timed": lk.timed,
                "lookups_untimed": lk.untimed,
                "lookups_sampled": lk.sampled,
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
                "lookups_calibrated": lk.calibrated,
                "lookups_waited": lk.waited,
                **_cuda_row(self),
                **_tracing_row(self.tracing),
            }
        )

    def advice(self) -> list[str]:
        """At most three hints drawn from this report's numbers."""
        from ..render.advice import advise

        return advise(self)

    def figure(self) -> Any:
        """Compile, cache lookups and execution as a stacked bar."""
        from ..plots import report_figure

        return report_figure(self)

    def tracing_figure(self, n: int = 10) -> Figure:
        """Where Dynamo's tracing time went: the ``n`` functions of most own
        time as bars (torch 2.13+; a ``ValueError`` for a report without
        tracing by function)."""
        from ..plots import tracing_figure

        return tracing_figure(self, n)

    # The words are render's: the data class stays plain.
    def text(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report as text: its headline, its hints (unless ``hints`` is
        False), the rows that matter for this cell (every row with
        ``verbose``), ``max_details`` detail lines under a row before the rest
        fold (see :func:`stance_magic.render.report_text`)."""
        from ..render import MAX_DETAILS, report_text

        n = MAX_DETAILS if max_details is None else max_details
        return report_text(self, n, verbose, self.advice() if hints else ())

    def html(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report as HTML, the other rows folded in a ``<details>`` (see
        :func:`stance_magic.render.report_html`)."""
        from ..render import MAX_DETAILS, report_html

        n = MAX_DETAILS if max_details is None else max_details
        return report_html(self, n, verbose, self.advice() if hints else ())

    def views(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> tuple[str, str]:
        """(text, HTML) of the report, its hints drawn once for both."""
        from ..render import MAX_DETAILS, report_html, report_text

        n = MAX_DETAILS if max_details is None else max_details
        lines = self.advice() if hints else ()
        return report_text(self, n, verbose, lines), report_html(self, n, verbose, lines)

    def __getattr__(self, name: str) -> Any:
        # only reached for a name the report does not have: the old flat names
        return _moved(self, name)
