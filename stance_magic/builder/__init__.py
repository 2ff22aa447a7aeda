"""Building a report: a closed measuring window in, a whole :class:`CellReport` out.

The one place a report is made. :func:`build_report` reads what the probe saw
(a :class:`Closed` window: torch's compile records,
lookups, misses, graph breaks, memory) and what the block's caller measured
around it (``--compare``'s runs, ``--sweep``'s memory run), and returns a
complete report; :func:`with_shared` and :func:`with_ranks` make the report a
trace or a gather across ranks completes. Nothing else writes to a report:
the front ends read it, and a layout test holds every attribute assignment to
a report to this package.

One module per part of the report:

* :mod:`.closed`: the window once it closed (:class:`Closed`), what the
  builder reads;
* :mod:`.compiles`: the compiles (each frame, its name and phases), compile
  time by phase, Inductor's named parts;
* :mod:`.lookups`: the calls by how each ended (the call account), the cache
  lookups, a compiled call part by part;
* :mod:`.caches`: the compile caches (hits, misses, warm or cold, the cold
  compile a warm one saved), the functions loaded or precompiled;
* :mod:`.recompiles`: the recompiles, refusals, recompile limits and budget,
  their causes, the dynamic shapes;
* :mod:`.breaks`: the graph breaks and what each cost;
* :mod:`.cudagraphs`: the CUDA graphs;
* :mod:`.notes`: the notes;
* :mod:`.tracing`: the tracing by function (torch's dynamo_profiler);
* :mod:`.sharing`: the trace and the timeline of a block (``--trace``,
  ``--timeline``), its capture and the report's ``shared`` part;
* :mod:`.locating`: locates the code every part names, from torch's frames
  (a frame's file, its line's source, the calling line, an error as one line),
  as :class:`stance_magic.place.Place` values.

This module puts the parts together into one report. Torch's own text
(recompile reasons, graph-break messages, guard failures) is parsed by the
probe (:mod:`stance_magic.probe.messages`); places are shortened by
:mod:`stance_magic.paths`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .. import place, probe
from ..report import PHASES, CallAccount, CellReport, Comparison, CompileCaches, Gathered, Shared
from .breaks import _break_costs, _group_breaks
from .caches import _loaded_functions, _precompiled, compile_caches
from .closed import Closed, _nothing_seen
from .compiles import _breakdown, _frames, _kernel_parts
from .cudagraphs import _NO_CUDAGRAPHS, _cudagraphs
from .locating import _stack, called_from, error_line, frame_text
from .lookups import _NO_LOOKUPS, _account, _cell_parts, _lookups
from .notes import _notes
from .recompiles import (
    _budget,
    _dynamic_shapes,
    _recompile_causes,
    _recompile_limits,
    _recompiles,
    _refusals,
    split_recompile_reason,
)
from .tracing import tracing

__all__ = [
    "Closed",
    "build_report",
    "called_from",
    "compile_caches",
    "error_line",
    "frame_text",
    "split_recompile_reason",
    "with_ranks",
    "with_shared",
]


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
    figures = closed.memory if memory is None else memory
    if closed.error is None and closed.profiled_lookups is None and _nothing_seen(closed.window):
        # the common empty cell: nothing of torch.compile ran (every figure 0)
        return _report_of_nothing(closed, figures, notes, index, compare)
    fields: dict[str, Any] = {}
    _common_fields(fields, closed, figures, index, compare)
    fields.update(_seen_fields(closed, figures, notes, history, loaded))
    return CellReport(**fields)


def _common_fields(
    fields: dict[str, Any],
    closed: Closed,
    figures: Sequence[probe.MemoryFigure],
    index: int,
    compare: Comparison | None,
) -> None:
    """Write the fields every report takes from its window as it is (the
    stance, the cell, the wall time) into ``fields``."""
    spec, stance = closed.spec, closed.stance
    fields["stance"] = stance.name
    fields["skip_guard_eval_unsafe"] = stance.skip_guard_eval_unsafe
    fields["backend"] = stance.backend_name
    fields["index"] = index
    fields["execution_count"] = closed.execution_count
    fields["label"] = spec.label
    fields["source"] = spec.source
    fields["wall_s"] = closed.wall_s
    fields["synchronized"] = closed.synchronized
    fields["memory"] = list(figures)
    fields["memory_on"] = closed.memory_on
    fields["compare"] = compare


#: The calls, the files shared and the compile caches of a window that saw
#: nothing (frozen: every empty cell's report shares them, as it shares
#: the empty lookups, instead of making its own).
_NO_CALLS = CallAccount()
_NO_SHARED = Shared()
_NO_COMPILE_CACHES = CompileCaches()


def _report_of_nothing(
    closed: Closed,
    figures: Sequence[probe.MemoryFigure],
    notes: Sequence[str],
    index: int,
    compare: Comparison | None,
) -> CellReport:
    """The report of a window that saw nothing of torch.compile (the rest
    of the fields keep their defaults: every figure 0).

    It is made without the dataclass's ``__init__`` (51 keyword arguments,
    about 2 µs of an empty cell's 3 µs report): the fields of one report of
    nothing (:data:`_NOTHING`: its frozen parts shared), each list and dict
    made afresh, then this window's own. ``tests/test_report.py`` checks
    that it equals, field for field, what the whole builder makes of the
    same window."""
    global _NOTHING
    if _NOTHING is None:
        empty = CellReport(
            lookups=_NO_LOOKUPS,
            calls=_NO_CALLS,
            shared=_NO_SHARED,
            compile_caches=_NO_COMPILE_CACHES,
            cudagraphs=_NO_CUDAGRAPHS,
        )
        _NOTHING = (
            dict(vars(empty)),
            tuple(
                (f.name, f.default_factory)
                for f in dataclasses.fields(CellReport)
                if f.default_factory in (list, dict)
            ),
        )
    shared, fresh = _NOTHING
    rep = object.__new__(CellReport)
    own = rep.__dict__
    own.update(shared)
    for name, make in fresh:
        own[name] = make()
    _common_fields(own, closed, figures, index, compare)
    own["compile_breakdown"] = dict.fromkeys(PHASES, 0.0)
    if figures or notes or closed.notes or closed.profiler_error:
        own["notes"] = _notes(closed, figures, None) + list(notes)
    if closed.cudagraphs is not None and not closed.cudagraphs.empty:
        own["cudagraphs"] = _cudagraphs(closed, [], [])
    return rep


#: a report of nothing's fields, and the lists and dicts each report makes
#: afresh (see _report_of_nothing; made at the first empty report)
_NOTHING: tuple[dict[str, Any], tuple[tuple[str, Any], ...]] | None = None


def _seen_fields(
    closed: Closed,
    figures: Sequence[probe.MemoryFigure],
    notes: Sequence[str],
    history: Sequence[CellReport],
    loaded: dict[str, str] | None,
) -> dict[str, Any]:
    """The fields of a report that the window's compiles, calls, lookups,
    graph breaks and caches make, part by part."""
    window, error = closed.window, closed.error
    error_text = error_line(error) if error is not None else None
    frames = _frames(window, closed.stance.name, error)
    fwd = [f for f in frames if f.kind == "frame"]
    breakdown = _breakdown(window)
    recompiles = _recompiles(window, fwd)
    misses = window.miss_events
    calls = _account(window)
    refused_n, refused_guards = _refusals(window, calls, error, error_text)
    limits = _recompile_limits(window)
    lookups = _lookups(window, closed.profiled_lookups)
    frames, caches = compile_caches(frames, window, closed.cache_events, history, loaded)
    return {
        "compile_s": sum(f.seconds for f in frames),
        "compile_breakdown": breakdown,
        "compiles": len(fwd),
        "backward_compiles": len(frames) - len(fwd),
        "graphs": sum(1 for f in frames if f.graph and not f.failed),
        "failed_compiles": sum(1 for f in frames if f.failed),
        "recompile_details": recompiles,
        "graph_break_details": _break_costs(_group_breaks(window.graph_breaks), frames),
        "compiled_calls": window.compiled_calls,
        "calls": calls,
        "loaded_functions": _loaded_functions(window),
        "precompiled": _precompiled(window),
        "cache_hits": window.hits,
        "cache_misses": window.misses + sum(rec.cold for rec in window.compiles if rec.kind),
        "guard_count": sum(f.guard_count or 0 for f in fwd),
        "lookups": lookups,
        "call_parts": _cell_parts(lookups.targets),
        "eager_fallbacks": sum(1 for m in misses if m.outcome == probe.MISS_EAGER),
        "refused_recompiles": refused_n,
        "recompile_limits": limits,
        "limit_eager_calls": sum(x.eager_calls for x in limits),
        "causes": _recompile_causes(recompiles, window),
        "recompile_budget": [_budget(b) for b in window.budgets],
        "dynamic_shapes": _dynamic_shapes(window, frames),
        # the stance in force at each call (the block's, or one its code set)
        # every eager first call (one that raised is a failed call as well)
        "eager_first_calls": window.eager_first_calls,
        "eager_calls": dict(window.eager_calls),
        "compiles_during_eager_calls": (
            sum(1 for f in fwd if f.during_eager_call)
            if window.eager_calls.get("eager_then_compile") or window.eager_first_calls
            else 0
        ),
        "refused_guards": refused_guards,
        "error": error_text,
        "error_where": _stack(probe.raised_from(error)) if error is not None else "",
        "frames": frames,
        "notes": _notes(closed, figures, error) + list(notes),
        "compile_caches": caches,
        "kernel_breakdown": _kernel_parts(window, runtime=False),
        "first_run_breakdown": _kernel_parts(window, runtime=True),
        "cudagraphs": _cudagraphs(closed, frames, recompiles),
        # the settings a diff of two cells compares (read as the cell ended;
        # a window that saw nothing of torch.compile reads none, as the
        # report of nothing does)
        "settings": None if _nothing_seen(window) else probe.compile_settings(),
        "tracing": tracing(window, frames, breakdown.get("dynamo", 0.0)),
    }


def with_shared(rep: CellReport, shared: Shared, notes: Sequence[str] = ()) -> CellReport:
    """``rep`` with what ``--trace`` / ``--timeline`` wrote for it."""
    return place.replace(rep, shared=shared, notes=[*rep.notes, *notes])


def with_ranks(rep: CellReport, gathered: Gathered, view: Any = None) -> CellReport:
    """``rep`` once gathered across ranks: where it went, and on the rank that
    gathered, the combined ``view`` (a :class:`stance_magic.report.ranks.RankReport`)."""
    return place.replace(rep, gathered=gathered, ranks=view)
