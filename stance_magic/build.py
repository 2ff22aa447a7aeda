"""Building a report: a closed measuring window in, a whole :class:`CellReport` out.

The one place a report is made. :func:`build_report` reads what the probe saw
(a :class:`Closed` window: torch's compile records,
lookups, misses, graph breaks, memory) and what the block's caller measured
around it (``--compare``'s runs, ``--sweep``'s memory run), and returns a
complete report; :func:`with_shared` and :func:`with_ranks` make the report a
trace or a gather across ranks completes. Nothing else writes to a report:
the front ends read it, and a layout test holds every attribute assignment to
a report to this module.

Torch's own text (recompile reasons, graph-break messages) is parsed by the
probe; places are shortened by :mod:`stance_magic.paths`.
"""

from __future__ import annotations

import linecache
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import causes as _causes
from . import probe
from .paths import is_library, short_path
from .report import (
    PHASES,
    Budget,
    CacheUse,
    CallAccount,
    CallParts,
    CellReport,
    ColdCompile,
    Comparison,
    CompileCaches,
    CudaGraphFrame,
    CudaGraphs,
    CudaGraphSkip,
    DynamicShapes,
    FrameCompile,
    Gathered,
    GraphBreak,
    GuardFailure,
    LoadedFunction,
    Lookups,
    LookupTarget,
    PrecompiledFrame,
    Recompile,
    RecompileLimit,
    Shared,
)
from .text import place

if TYPE_CHECKING:
    from .spec import MeasureSpec
    from .stance import Stance

__all__ = [
    "Closed",
    "build_report",
    "called_from",
    "compile_caches",
    "error_line",
    "frame_text",
    "with_ranks",
    "with_shared",
]


@dataclass
class Closed:
    """A measuring window once it closed: what was seen, not yet built into a report."""

    spec: MeasureSpec
    #: the stance the block ran under (``spec.stance``, or the session's)
    stance: Stance
    #: the number the front end gave the cell, if it knows it
    execution_count: int | None
    window: probe.Window
    wall_s: float
    error: BaseException | None
    #: the engine's clock (``perf_counter()`` unless a test set another)
    #: when the block started
    t0: float
    #: each lookup's seconds from the profiler (``profile_lookups``)
    profiled_lookups: list[float] | None = None
    memory: list[probe.MemoryFigure] = field(default_factory=list)
    #: the times were taken with memory measuring on
    memory_on: bool = False
    #: why the profiler could not measure (another one ran), or None
    profiler_error: str | None = None
    #: torch's compile-cache events of the window
    cache_events: list[Any] = field(default_factory=list)
    #: how the window ended, when not as usual (a cell ended it early)
    notes: list[str] = field(default_factory=list)
    #: the profiler that ran, for a timeline's runs of compiled code
    profiler: Any = None
    #: the clock stopped after the CUDA device finished the block's work
    #: (this process uses CUDA; see probe.sync_if_cuda)
    synchronized: bool = False
    #: CUDA graphs recorded, replayed and skipped in the window
    cudagraphs: probe.CudagraphWindow | None = None

    @property
    def compile_s(self) -> float:
        """The compile time torch recorded in the window (what the report's
        ``compile_s`` will be)."""
        return sum(rec.seconds for rec in self.window.compiles if rec.kind is not None)


#: How the report names each compile cache.
CACHE_LABELS = {"aot_autograd": "AOTAutograd cache", "inductor": "FX graph cache"}


def build_report(
    closed: Closed,
    *,
    index: int,
    history: Sequence[CellReport] = (),
    loaded: dict[str, str] | None = None,
    compare: Comparison | None = None,
    memory: list[probe.MemoryFigure] | None = None,
    notes: Sequence[str] = (),
) -> CellReport:
    """The report of a closed window, whole.

    ``index`` is its place in the history to be; ``history`` the reports
    before it (a warm compile names the cold cell that compiled the same
    graphs); ``loaded`` maps compile-cache keys to the file a ``%stance cache
    load`` read them from. ``compare`` (``--compare``'s figures) and
    ``memory`` (``--sweep``'s figures from a run of their own, instead of the
    window's) are measured by the caller around the window; ``notes`` are the
    caller's words about how.
    """
    spec, window, error = closed.spec, closed.window, closed.error
    stance = closed.stance
    if error is None and closed.profiled_lookups is None and _nothing_seen(window):
        # the common empty cell: nothing of torch.compile ran (every figure 0)
        figures = closed.memory if memory is None else memory
        return CellReport(
            stance=stance.name,
            skip_guard_eval_unsafe=stance.skip_guard_eval_unsafe,
            backend=stance.backend_name,
            index=index,
            execution_count=closed.execution_count,
            label=spec.label,
            source=spec.source,
            wall_s=closed.wall_s,
            synchronized=closed.synchronized,
            compile_breakdown=dict.fromkeys(PHASES, 0.0),
            lookups=_NO_LOOKUPS,
            memory=list(figures),
            memory_on=closed.memory_on,
            compare=compare,
            notes=_notes(closed, figures, None) + list(notes)
            if figures or notes or closed.notes or closed.profiler_error
            else [],
            cudagraphs=(
                _cudagraphs(closed, [], [])
                if closed.cudagraphs is not None and not closed.cudagraphs.empty
                else _NO_CUDAGRAPHS
            ),
        )
    error_text = error_line(error) if error is not None else None
    frames = _frames(window, stance.name, error)
    fwd = [f for f in frames if f.kind == "frame"]
    breakdown = dict.fromkeys(PHASES, 0.0)
    for rec in window.compiles:
        if rec.kind is not None:
            for k, v in rec.phases.items():
                breakdown[k] += v
    recompiles = _recompiles(window, fwd)
    misses = window.miss_events
    refused = [m for m in misses if m.outcome == probe.MISS_REFUSED]
    refused_guards = [g for m in refused for g in m.failures] or _refused_guards(error)
    calls = _account(window)
    # a refusal from an empty cache has no miss (no lookup first)
    # (an aot-compiled function's failed guard check is no recompile refused)
    stance_refusals = sum(n for why, n in calls.refused.items() if why != probe.WHY_AOT_GUARDS)
    refused_n = max(len(refused), stance_refusals)
    if not refused_n and (refused_guards or (error_text and "fail_on_recompile" in error_text)):
        refused_n = 1  # refused before any call was seen (no call in this torch's hooks)
    limits = _recompile_limits(window)
    lookups = _lookups(window, closed.profiled_lookups)
    frames, caches = compile_caches(frames, window, closed.cache_events, history, loaded)
    figures = closed.memory if memory is None else memory
    return CellReport(
        stance=stance.name,
        skip_guard_eval_unsafe=stance.skip_guard_eval_unsafe,
        backend=stance.backend_name,
        index=index,
        execution_count=closed.execution_count,
        label=spec.label,
        source=spec.source,
        wall_s=closed.wall_s,
        synchronized=closed.synchronized,
        compile_s=sum(f.seconds for f in frames),
        compile_breakdown=breakdown,
        compiles=len(fwd),
        backward_compiles=len(frames) - len(fwd),
        graphs=sum(1 for f in frames if f.graph and not f.failed),
        failed_compiles=sum(1 for f in frames if f.failed),
        recompile_details=recompiles,
        graph_break_details=_break_costs(_group_breaks(window.graph_breaks), frames),
        compiled_calls=window.compiled_calls,
        calls=calls,
        loaded_functions=[
            LoadedFunction(
                name=x.name,
                filename=x.filename,
                line=x.line,
                seconds=x.seconds,
                error=x.error,
                file=_file(x.filename),
            )
            for x in window.aot_loads
        ],
        precompiled=[
            PrecompiledFrame(
                name=e.name,
                filename=e.filename,
                line=e.line,
                outcome=e.outcome,
                why=e.why,
                file=_file(e.filename),
            )
            for e in window.precompiled
        ],
        cache_hits=window.hits,
        cache_misses=window.misses + sum(rec.cold for rec in window.compiles if rec.kind),
        guard_count=sum(f.guard_count or 0 for f in fwd),
        lookups=lookups,
        call_parts=_cell_parts(lookups.targets),
        eager_fallbacks=sum(1 for m in misses if m.outcome == probe.MISS_EAGER),
        refused_recompiles=refused_n,
        recompile_limits=limits,
        limit_eager_calls=sum(x.eager_calls for x in limits),
        causes=_recompile_causes(recompiles, window),
        recompile_budget=[_budget(b) for b in window.budgets],
        dynamic_shapes=_dynamic_shapes(window, frames),
        # the stance in force at each call (the block's, or one its code set)
        eager_first_calls=calls.eager.get(probe.WHY_FIRST_CALL, 0),
        eager_calls=dict(window.eager_calls),
        compiles_during_eager_calls=(
            sum(1 for f in fwd if f.during_eager_call)
            if window.eager_calls.get("eager_then_compile")
            else 0
        ),
        refused_guards=refused_guards,
        memory=list(figures),
        memory_on=closed.memory_on,
        error=error_text,
        error_where=called_from(probe.raised_from(error)) if error is not None else "",
        frames=frames,
        compare=compare,
        notes=_notes(closed, figures, error) + list(notes),
        compile_caches=caches,
        kernel_breakdown=_kernel_parts(window, runtime=False),
        first_run_breakdown=_kernel_parts(window, runtime=True),
        cudagraphs=_cudagraphs(closed, frames, recompiles),
    )


#: The lookups of a window that saw none (frozen; its empty list is never grown:
#: nothing but this module writes a report's parts).
_NO_LOOKUPS = Lookups(seconds=0.0)
#: The CUDA graphs of a window that saw none (frozen, as above).
_NO_CUDAGRAPHS = CudaGraphs()


def _account(window: probe.Window) -> CallAccount:
    """The window's calls by how each ended (see probe.Recorder._resolve)."""
    by: dict[str, dict[str, int]] = {
        probe.CALL_EAGER: {},
        probe.CALL_REFUSED: {},
        probe.CALL_FAILED: {},
    }
    cached = compiled = 0
    for (outcome, why), n in window.calls.items():
        if outcome == probe.CALL_CACHED:
            cached += n
        elif outcome == probe.CALL_COMPILED:
            compiled += n
        else:
            by[outcome][why] = by[outcome].get(why, 0) + n
    return CallAccount(
        cached=cached,
        compiled=compiled,
        eager=by[probe.CALL_EAGER],
        refused=by[probe.CALL_REFUSED],
        failed=by[probe.CALL_FAILED],
    )


def _nothing_seen(window: probe.Window) -> bool:
    """Whether the window saw nothing of torch.compile: no record, call,
    lookup, miss, graph break, cache entry or reset."""
    return not (
        window.records
        or window.compiled_calls
        or window.hits
        or window.misses
        or window.targets
        or window.miss_events
        or window.graph_breaks
        or window.eager_calls
        or window.aot_loads
        or window.precompiled
        or window.budgets
        or window.reset_seen
    )


def with_shared(rep: CellReport, shared: Shared, notes: Sequence[str] = ()) -> CellReport:
    """``rep`` with what ``--trace`` / ``--timeline`` wrote for it."""
    return replace(rep, shared=shared, notes=[*rep.notes, *notes])


def with_ranks(rep: CellReport, gathered: Gathered, view: Any = None) -> CellReport:
    """``rep`` once gathered across ranks: where it went, and on the rank that
    gathered, the combined ``view`` (a :class:`stance_magic.ranks.RankReport`)."""
    return replace(rep, gathered=gathered, ranks=view)


# --------------------------------------------------------------------------
# compiles
# --------------------------------------------------------------------------


def _frames(window: probe.Window, stance: str, error: BaseException | None) -> list[FrameCompile]:
    frames: list[FrameCompile] = []
    for rec in window.compiles:
        kind = rec.kind
        if kind is None:
            continue
        info = rec.info
        name, filename, line = _frame_name(rec)
        backend = info.backend
        # the stance in force when torch compiled (one the block's code set too)
        compiled_under = info.stance or stance
        if (
            kind == "frame"
            and compiled_under == "aot_eager_then_compile"
            and info.example_calls == 1
        ):
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
        # the exception torch unwound while writing the record is the cell's
        # (its type may differ from fail_type: see probe.reached_cell)
        raised = failed is not None and (info.reached_caller or probe.reached_cell(info, error))
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
                raised=raised,
                aot=info.aot is not None,
                file=_file(filename),
            )
        )
    return frames


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


def _notes(
    closed: Closed, figures: Sequence[probe.MemoryFigure], error: BaseException | None
) -> list[str]:
    window = closed.window
    notes = []
    block = closed.stance.name
    own = sorted(s for s in window.call_stances if s and s != block)
    if own:
        notes.append(
            f"the cell's own code set a stance: calls ran under {' and '.join(own)} too "
            "(each call counts under the stance in force when it was made)"
        )
    if window.reset_seen:
        notes.append(
            "torch.compiler.reset() ran in this cell: the figures cover compiles before "
            "and after it (torch restarts compile ids at 0/0)"
        )
    if window.break_source == "counters":
        notes.append(
            "graph breaks counted from torch's counters (this torch has no graph_breaks "
            "log artifact): some kinds of break are missed"
        )
    if error is not None and type(error).__name__ == "ConstraintViolationError":
        notes.append(_constraint_note(str(error)))
    notes.extend(fig.note for fig in figures if fig.note)
    if closed.profiler_error:
        notes.append(closed.profiler_error)
    notes.extend(closed.notes)
    return notes


def error_line(exc: BaseException) -> str:
    """An exception as one line: ``RuntimeError: its first line``."""
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}" if head else type(exc).__name__


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


def _constraint_note(text: str) -> str:
    """One line for torch's ConstraintViolationError (a dimension marked
    dynamic that the code specialized)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("- ")), lines[0] if lines else text)
    return (
        "a dimension marked dynamic (mark_dynamic) was specialized by the code, so torch "
        f"refused to compile: {detail.lstrip('- ')}"
    )


# --------------------------------------------------------------------------
# places
# --------------------------------------------------------------------------


def _file(filename: str) -> str:
    """A compiled frame's file as the report shows it (``In [?]`` for a
    class defined in the notebook whose cell is unknown)."""
    if filename == probe.NOTEBOOK:
        return "In [?]"
    return short_path(filename) if filename else ""


def _where(filename: str, line: int | None) -> str:
    return place(_file(filename), line) if filename else ""


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
    cells = [fr for fr in stack[1:] if _file(fr[1]).startswith("In [")]
    if cells:
        text += f", from {_where(cells[-1][1], cells[-1][2])}"
    return text


def _line_in_frame(filename: str, first: int | None, source: str) -> int | None:
    """The one line of the function that starts at ``first`` in ``filename``
    (decorators, its ``def`` and its indented body) whose code is ``source``;
    None if none or several."""
    lines = linecache.getlines(filename)
    if not source or not first or first > len(lines):
        return None
    i = first - 1
    base = len(lines[i]) - len(lines[i].lstrip())
    while i < len(lines) and lines[i].strip().startswith("@"):
        i += 1
    found = []
    for n in range(i, len(lines)):
        text = lines[n]
        indent = len(text) - len(text.lstrip())
        if n > i and text.strip() and indent <= base:
            break
        if text.strip() == source:
            found.append(n + 1)
    return found[0] if len(found) == 1 else None


def _source_line(filename: str, line: int | None) -> str:
    if not filename or not line:
        return ""
    text = linecache.getline(filename, line).strip()
    return text if len(text) <= 120 else text[:119] + "…"


def _budget(b: probe.FrameBudget) -> Budget:
    """A frame's entries against its recompile limit, placed as the report places frames."""
    name, filename, line = b.frame
    where = f"{name} ({_where(filename, line)})" if filename else name
    return Budget(where, b.entries, b.limit, b.config, b.per_call)


# --------------------------------------------------------------------------
# recompiles, limits, causes, shapes
# --------------------------------------------------------------------------


def split_recompile_reason(text: str) -> tuple[str, str]:
    """(reason, guard source) from a ``recompile_reason``, the guard's file
    written as the report writes places (see
    :func:`stance_magic.probe.split_recompile_reason`)."""
    return probe.split_recompile_reason(text, short_path)


def _guard_failures(texts: list[str]) -> list[GuardFailure]:
    return [GuardFailure(*split_recompile_reason(t)) for t in texts]


def _recompiles(window: probe.Window, fwd: list[FrameCompile]) -> list[Recompile]:
    failures_by_id = {
        rec.compile_id: rec.info.guard_failures
        for rec in window.compiles
        if rec.info.guard_failures
    }
    stacks_by_id = {
        rec.compile_id: rec.info.user_stack for rec in window.compiles if rec.info.user_stack
    }
    out = []
    for f in fwd:
        if f.recompile_reason:
            reason, pointer = split_recompile_reason(f.recompile_reason)
            stack = stacks_by_id.get(f.compile_id, [])
            out.append(
                Recompile(
                    reason,
                    f.where,
                    f.compile_id,
                    pointer,
                    failures=_guard_failures(failures_by_id.get(f.compile_id, [])),
                    called_from=called_from(stack),
                    stack=[frame_text(*fr) for fr in stack],
                )
            )
    return out


def _recompile_limits(window: probe.Window) -> list[RecompileLimit]:
    """Frames at the recompile limit in this cell: the attempt that hit it
    (a record) and every call that then ran eagerly (a miss torch did not
    compile because of it), grouped by frame."""
    out: dict[tuple[Any, ...], RecompileLimit] = {}
    automatic = probe.dynamo_config_flag("automatic_dynamic_shapes")

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
                automatic_dynamic=automatic,
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


def _recompile_causes(recompiles: list[Recompile], window: probe.Window) -> list[_causes.Cause]:
    """The trap behind each recompile and refusal, from the guard failure
    that decides it (see :func:`stance_magic.causes.decisive`)."""
    defined = {m.compile_id: m.defined for m in window.miss_events if m.compile_id}
    stances = {m.compile_id: m.stance for m in window.miss_events if m.compile_id}
    found: dict[tuple[str, str], _causes.Cause] = {}

    def add(failures: list[Any], fallback: str, context: dict[str, Any], stance: str) -> None:
        _, text = _causes.decisive(failures, fallback)
        ctx = {
            expr: (name, _file(filename), what)
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

    for r in recompiles:
        fallback = f"{r.reason}  ← {r.guard_source}" if r.guard_source else r.reason
        add(r.failures, fallback, defined.get(r.compile_id, {}), stances.get(r.compile_id, ""))
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


# --------------------------------------------------------------------------
# Inductor's named parts, CUDA graphs
# --------------------------------------------------------------------------


def _kernel_parts(window: probe.Window, *, runtime: bool) -> dict[str, float]:
    """The named parts torch's records time (see ``probe.KERNEL_FIELDS``):
    inside the cell's compiles, or (``runtime``) at the first runs after them."""
    out: dict[str, float] = {}
    for rec in window.compiles:
        if rec.runtime != runtime or (not runtime and rec.kind is None):
            continue
        for key, seconds in rec.kernel_phases.items():
            out[key] = out.get(key, 0.0) + seconds
    return out


def _skip_head(reason: str) -> str:
    """torch's skip reason, its first line without the ``Found from :`` that
    introduces the stack it prints after it."""
    head = next((ln.strip() for ln in reason.splitlines() if ln.strip()), "")
    head = re.sub(r"\.?\s*Found from\s*:?\s*$", "", head)
    return head


def _cudagraphs(
    closed: Closed, frames: list[FrameCompile], recompiles: list[Recompile]
) -> CudaGraphs:
    """The cell's CUDA graphs: what the probe saw torch record, replay and
    skip, and the skips torch wrote only into its compile records."""
    cg = closed.cudagraphs
    skips = list(cg.skips) if cg is not None else []
    unexplained = cg.unexplained_skips if cg is not None else 0
    by_id = {f.compile_id: f for f in frames if f.kind == "frame"}
    where = {cid: f.where for cid, f in by_id.items()}
    # a skip torch wrote into a compile's record that no wrapper saw (the
    # cell imported Dynamo, so nothing was wrapped when it opened)
    seen = {s.compile_id for s in skips}
    from_records = [
        (rec.compile_id, rec.cudagraph_skip_reason)
        for rec in closed.window.compiles
        if rec.cudagraph_skip_reason and rec.compile_id not in seen
    ]
    unexplained = max(unexplained - len(from_records), 0)
    groups: dict[tuple[str, str], CudaGraphSkip] = {}
    for cid, reason, filename, line, source, devices, logged in [
        (s.compile_id, s.reason, s.filename, s.line, s.source, s.devices, s.logged) for s in skips
    ] + [(cid, text, "", None, "", (), True) for cid, text in from_records]:
        head = _skip_head(reason)
        if not filename:
            filename, line, _fn, source = probe.cudagraph_user_line(reason)
        frame = by_id.get(cid)
        if frame is not None and filename and filename != frame.filename:
            # a graph loaded from the FX graph cache keeps the stack of the
            # process that compiled it first: the line that holds the same
            # code in the frame compiled here is the user's
            here = _line_in_frame(frame.filename, frame.line, source)
            if here is not None:
                filename, line = frame.filename, here
        key = (head, cid)
        old = groups.get(key)
        if old is not None:
            groups[key] = replace(old, count=old.count + 1)
            continue
        groups[key] = CudaGraphSkip(
            reason=head,
            compile_id=cid,
            frame=where.get(cid, ""),
            where=_where(filename, line),
            source=source or _source_line(filename, line),
            devices=list(devices),
            logged=logged,
        )
    out = list(groups.values())
    if unexplained:
        out.append(CudaGraphSkip(reason="", count=unexplained, logged=False))
    recordings = cg.recordings if cg is not None else []
    sized = {
        r.compile_id for r in recompiles if _causes.decisive(r.failures, r.reason)[0] == "size"
    }
    by_frame: dict[str, list[Any]] = {}
    for r in recordings:
        by_frame.setdefault(r.compile_id.split("/")[0], []).append(r)
    graph_frames = []
    for recs in by_frame.values():
        ids = list(dict.fromkeys(r.compile_id for r in recs))
        label = next((where[c] for c in ids if c in where), "")
        if not label:
            name = next((r.function for r in recs if r.function), "")
            label = f"{name or 'compiled graph'} (compile {ids[0]})"
        rerecords = [r for r in recs if r.rerecord]
        graph_frames.append(
            CudaGraphFrame(
                frame=label,
                compile_ids=ids,
                recorded=len(recs),
                for_new_sizes=sum(
                    1 for r in recs if not r.rerecord and (r.others or r.compile_id in sized)
                ),
                rerecorded=len(rerecords),
                why=list(dict.fromkeys(r.why for r in rerecords if r.why)),
                sizes=[list(r.sizes) for r in recs if r.sizes],
            )
        )
    pending = list(cg.pending_backward) if cg is not None else []
    overwritten = probe.cudagraph_overwritten_output(closed.error)
    made_at = ""
    if overwritten is not None:
        filename, line, source = overwritten
        made_at = _where(filename, line) or "(torch found no stack trace)"
        source = source or _source_line(filename, line)
        if source and filename:
            made_at += f" `{source}`"
    return CudaGraphs(
        recorded=len(recordings),
        replayed=sum(cg.replays.values()) if cg is not None else 0,
        warmups=sum(cg.warmups.values()) if cg is not None else 0,
        for_new_sizes=sum(f.for_new_sizes for f in graph_frames),
        rerecorded=sum(f.rerecorded for f in graph_frames),
        skipped=sum(s.count for s in out),
        skips=out,
        frames=graph_frames,
        pending_backward=list(
            dict.fromkeys(
                where.get(p.compile_id)
                or f"{p.function or 'compiled graph'} (compile {p.compile_id})"
                for p in pending
            )
        ),
        overwritten_output=overwritten is not None,
        overwritten_made_at=made_at,
    )


# --------------------------------------------------------------------------
# graph breaks
# --------------------------------------------------------------------------


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
            file=short_path(ev.filename) if ev.filename else "",
        )
        if bt is not None:
            g.gb_id, g.gb_type, g.url = bt.gb_id, bt.gb_type, bt.url or ""
        g.explanation = _gb_field(ev.reason, "Explanation:") or (bt.explanation if bt else "")
        g.hints = _gb_hints(ev.reason) or (list(bt.hints) if bt else [])
        if ev.filename and is_library(ev.filename):
            user = next((fl for fl in reversed(ev.stack) if not is_library(fl[0])), None)
            if user is not None:
                g.user_filename, g.user_line = user
                g.user_file = short_path(g.user_filename)
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


# --------------------------------------------------------------------------
# cache lookups
# --------------------------------------------------------------------------


def _lookup_estimate(t: Any, share: float | None) -> tuple[float, list[tuple[float, float]]]:
    """(seconds, (lookup seconds, weight) pairs) for one function's lookups,
    each timed span times ``share`` where torch's profiler bounded them.

    Stratified: the first timed lookups stand for themselves; the calls
    torch's profiler ran over (a calibration) for themselves, by the
    profiler's own events past its warm-up (the cell's timed calls are then
    its first ones, which are slower); each spot check after them (1 in
    ``probe.SAMPLE_EVERY``) for its share of the other counted-only ones, so
    the cell's first, slower lookups do not stand for the rest. Without a
    spot check yet, every timed lookup and event shares them alike."""
    k = 1.0 if share is None else share
    events = t.profiler_events if share is not None else []
    weighted = [(x * k, 1.0) for x in t.samples]
    seconds = t.seconds * k
    count = t.timed
    rest = t.sampled
    if events:
        w = t.calibrated / len(events)
        weighted += [(x, w) for x in events]
        seconds += sum(events) * w
        count += t.calibrated
        rest -= t.calibrated
    if not weighted:
        return 0.0, []
    if not rest:
        return seconds, weighted
    spots = t.spot_samples
    if not spots:
        scale = (count + rest) / count
        return seconds * scale, [(x, w * scale) for x, w in weighted]
    extra = rest / len(spots)  # each spot check's share of the counted-only
    return seconds + sum(spots) * k * extra, weighted + [(x * k, extra) for x in spots]


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


def _lookups(window: probe.Window, profiled: list[float] | None) -> Lookups:
    """Cache lookups: timed in situ (default), or from the profiler (-g).

    In situ, a function whose lookup torch's profiler bounded (see
    :mod:`stance_magic.probe.anatomy`) has each of its own lookups bounded
    alike: the span from torch.compile's dispatch to the end of the lookup,
    times the share of it the profiler shows is the lookup."""
    weighted_all: list[tuple[float, float]] = []
    targets = []
    bounded = bool(window.targets)
    for t in window.targets:
        # nested lookups are timed from the call that made them: no share
        share = t.lookup_share if not t.resumed else None
        if share is None and t.timed:
            bounded = False
        seconds, weighted = _lookup_estimate(t, share)
        weighted_all += weighted
        per_lookup = _weighted_median(weighted)
        targets.append(
            LookupTarget(
                name=t.name,
                where=_where(t.filename, t.line),
                timed=t.timed,
                seconds=seconds,
                untimed=t.untimed,
                misses=t.misses,
                eager_calls=t.eager_calls,
                per_lookup_s=per_lookup,
                sampled=t.sampled,
                calibrated=t.calibrated,
                parts=_call_parts(t, share, per_lookup),
            )
        )
    counts = Lookups(
        sample_first=probe.SAMPLE_FIRST,
        sample_every=probe.SAMPLE_EVERY,
        timed=window.timed_lookups,
        untimed=window.untimed_lookups,
        sampled=window.sampled_lookups,
        calibrated=window.calibrated_lookups,
        targets=targets,
    )
    if profiled is not None:
        empty = probe.torch_version() <= probe.PROFILER_EMPTY_LOOKUPS_UNTIL
        return replace(
            counts,
            method="profiler",
            seconds=sum(profiled),
            per_lookup_s=statistics.median(profiled) if profiled else None,
            profiled=len(profiled),
            event=probe.CACHE_LOOKUP_EVENT,
            profiler_counts_empty=empty,
        )
    if not counts.count:
        return replace(counts, seconds=0.0)
    if not counts.timed:
        return counts  # not timed: nested lookups alone, with no start to time from
    return replace(
        counts,
        method="in situ",
        bounded=bounded,
        # each function's timed lookups stand for its counted-only ones too
        seconds=sum(t.seconds for t in targets),
        # per lookup: the median, so one lookup preempted by the OS does not move it
        per_lookup_s=_weighted_median(weighted_all),
        resumed=window.resumed_lookups,
        untimed_why=window.resume_timing_off or "",
        no_ex_calls=not probe.EX_CALLS_SEEN,
    )


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _call_parts(t: probe.Target, share: float | None, lookup: float | None) -> CallParts | None:
    """One function's calls, part by part: medians over its timed calls (a
    timed call that compiled is left out: its compile is the report's); the
    lookup is the lookups' own figure (``lookup``: the function's median
    lookup, bounded as ``share`` of its span where torch's profiler bounded
    it), the rest of that span the wrapper's way into Dynamo."""
    if not t.parts and not t.eager_parts:
        return None
    into = None
    if t.parts and share is not None and lookup is not None and share > 0:
        into = lookup / share - lookup
    if not t.parts:
        lookup = None
    return CallParts(
        calls=len(t.parts),
        before_s=_median([p[0] for p in t.parts if p[0] is not None]),
        into_s=into,
        lookup_s=lookup,
        compiled_s=_median([p[2] for p in t.parts]),
        after_s=_median([p[3] for p in t.parts]),
        eager_s=_eager_call(t.eager_parts),
        # every call of it that ran eagerly (the timed ones' median stands for them)
        eager_calls=t.eager_calls,
        lookup_bounded=share is not None,
        device_s=_median(t.device),
        device_calls=len(t.device),
    )


def _eager_call(parts: list[tuple[float | None, float]]) -> float | None:
    """A call that ran eagerly, whole: its wrapper before the dispatch (where
    the clock saw it) and the rest, medians."""
    rest = _median([p[1] for p in parts])
    if rest is None:
        return None
    before = _median([p[0] for p in parts if p[0] is not None])
    return rest + (before or 0.0)


def _cell_parts(targets: Sequence[LookupTarget]) -> CallParts | None:
    """Every function's parts weighed by its calls (its lookups, timed or
    counted, for the compiled ones; its eager calls for the eager part)."""
    compiled = [
        (t.parts, t.timed + t.sampled) for t in targets if t.parts is not None and t.parts.calls
    ]
    eager = [(t.parts, t.parts.eager_calls) for t in targets if t.parts and t.parts.eager_calls]
    if not compiled and not eager:
        return None

    def mean(pairs: list[tuple[CallParts, int]], get: Any) -> float | None:
        known = [(get(p), w) for p, w in pairs if get(p) is not None and w]
        total = sum(w for _, w in known)
        return sum(v * w for v, w in known) / total if total else None

    return CallParts(
        calls=sum(p.calls for p, _ in compiled),
        before_s=mean(compiled, lambda p: p.before_s),
        into_s=mean(compiled, lambda p: p.into_s),
        lookup_s=mean(compiled, lambda p: p.lookup_s),
        compiled_s=mean(compiled, lambda p: p.compiled_s),
        after_s=mean(compiled, lambda p: p.after_s),
        eager_s=mean(eager, lambda p: p.eager_s),
        eager_calls=sum(p.eager_calls for p, _ in eager),
        lookup_bounded=bool(compiled) and all(p.lookup_bounded for p, _ in compiled),
        device_s=mean(compiled, lambda p: p.device_s),
        device_calls=sum(p.device_calls for p, _ in compiled),
    )


# --------------------------------------------------------------------------
# compile caches: where each compile's time came from
# --------------------------------------------------------------------------


def compile_caches(
    frames: list[FrameCompile],
    window: Any,
    events: list[Any],
    history: Sequence[CellReport] = (),
    loaded: dict[str, str] | None = None,
) -> tuple[list[FrameCompile], CompileCaches]:
    """Each compile with the compile caches it consulted, and the cell's
    figures of them: per compile, AOTAutograd's and Inductor's FX graph
    cache as torch's records count their hits and misses (bypasses and keys
    from torch's cache events); per cell, the time loaded vs generated, the
    state, and a cold compile of the same graphs earlier in ``history`` when
    there is one. ``loaded`` maps keys to the file a ``%stance cache load``
    read them from."""
    if not window.records:
        return frames, CompileCaches()  # nothing compiled: no cache was consulted
    by_id: dict[tuple[str, str], list[Any]] = {}
    for rec in window.records:
        if probe.is_frame_compile(rec) or probe.is_backward_compile(rec):
            kind = "frame" if probe.is_frame_compile(rec) else "backward"
            by_id.setdefault((str(rec.compile_id), kind), []).append(rec)
    out = []
    for f in frames:
        recs = by_id.get((f.compile_id, f.kind))
        out.append(replace(f, caches=_frame_caches(recs.pop(0), events)) if recs else f)
    uses = [c for f in out for c in f.caches]
    fx = [c for c in uses if c.cache == "inductor"]
    aot = [c for c in uses if c.cache == "aot_autograd"]
    counts = {
        "fx_hits": sum(c.hits for c in fx),
        "fx_misses": sum(c.misses for c in fx),
        "fx_bypasses": sum(c.bypasses for c in fx),
        "aot_hits": sum(c.hits for c in aot),
        "aot_misses": sum(c.misses for c in aot),
        "aot_bypasses": sum(c.bypasses for c in aot),
        "bypass_reasons": [probe.first_line(r) for c in uses for r in c.reasons],
    }
    cached = [f for f in out if f.caches]
    if not cached:
        return out, CompileCaches(**counts)
    rest = {id(f): max(f.seconds - f.phases.get("dynamo", 0.0), 0.0) for f in cached}
    saved = [f.saved_s for f in cached if f.source != "generated" and f.saved_s is not None]
    loaded_n = sum(1 for f in cached if f.source == "loaded")
    off = sorted({CACHE_LABELS[c.cache] for f in cached for c in f.caches if c.state == "off"})
    graphs = counts["fx_hits"] + counts["fx_misses"] + counts["fx_bypasses"]
    loaded_from = None
    if loaded:
        hit_keys = {
            k for f in cached for c in f.caches if c.state in ("hit", "mixed") for k in c.keys
        }
        files = {loaded[k] for k in hit_keys if k in loaded}
        loaded_from = ", ".join(sorted(files)) if files else None
    cold = None
    if off and not graphs:
        state = "caches off"
    elif loaded_n and loaded_n == len(cached):
        state = "warm"
        cold = _cold_match(cached, history)
    elif loaded_n:
        state = "partly warm"
    else:
        state = "cold"
    return out, CompileCaches(
        **counts,
        loaded_s=sum(rest[id(f)] for f in cached if f.source == "loaded"),
        generated_s=sum(rest[id(f)] for f in cached if f.source != "loaded"),
        saved_s=sum(saved) if saved else None,
        state=state,
        dynamo_s=sum(f.phases.get("dynamo", 0.0) for f in cached),
        consulted=len(cached),
        loaded=loaded_n,
        off=off,
        loaded_from=loaded_from,
        cold=cold,
    )


def _frame_caches(rec: Any, events: list[Any]) -> list[CacheUse]:
    from .probe import caches as pc

    mine = pc.events_of(rec, events)
    out = []
    for cache in (pc.AOT_AUTOGRAD, pc.INDUCTOR):
        evs = [e for e in mine if e.cache == cache]
        saved = [e.saved_s for e in evs if e.state == "hit" and e.saved_s is not None]
        use = CacheUse(
            cache,
            hits=pc.record_count(rec, cache, "hit"),
            misses=pc.record_count(rec, cache, "miss"),
            bypasses=sum(1 for e in evs if e.state == "bypass"),
            disabled=any(e.state == "disabled" for e in evs),
            keys=[e.key for e in evs if e.key],
            saved_s=sum(saved) if saved else None,
            reasons=[probe.first_line(e.reason) for e in evs if e.state == "bypass" and e.reason],
        )
        if use.state:
            out.append(use)
    return out


def _cold_match(cached: list[FrameCompile], history: Sequence[CellReport]) -> ColdCompile | None:
    """The latest earlier cell that generated graphs with the keys these
    compiles loaded: its compile time for them, its name, how many matched."""
    keys = [{k for c in f.caches for k in c.keys} for f in cached]
    for old in reversed(history):
        seconds, matched = 0.0, 0
        frames = old.frames
        for f_keys in keys:
            if not f_keys:
                continue
            for g in frames:
                if g.source == "generated" and f_keys & {k for c in g.caches for k in c.keys}:
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
            n = old.execution_count
            return ColdCompile(seconds, f"In [{n}]" if n else f"cell {old.index}", matched)
    return None
