"""The tracing-by-function row: where Dynamo's tracing time went, by the
user's function (torch's ``dynamo_profiler``, 2.13+), the ``nn.Module``
classes, and each function's tracing beside the backend compile of the
frames that start there; on an older torch, one line saying which torch
gives these figures."""

from __future__ import annotations

from typing import Any

from ..text import fmt_s
from ..text import plural as _plural
from .labels import TRACING
from .rows import Row

#: functions listed under the row (after the compile-cost and module
#: lines; past the report's max_details they fold)
LISTED = 15
#: the brief report shows the row's line (its details folded) for a cell
#: whose Dynamo time is at least this (seconds); a quicker trace's row is
#: folded whole (a toy's 50 ms of tracing is no question to answer)
BRIEF_S = 0.5


def tracing_rows(rep: Any) -> list[Row]:
    """The row, or none for a cell that traced nothing."""
    t = getattr(rep, "tracing", None)
    if t is None or not t.state:
        return []
    if t.state == "unavailable":
        return [Row(TRACING, "per frame only (torch 2.13 or later times each function)", [], "")]
    if t.state == "off":
        return [Row(TRACING, "off (trace_functions=False)", [], "")]
    if t.state == "measured" and not t.functions:
        why = "torch.compiler.reset() ran in the cell" if t.reset_seen else "no trace finished"
        return [Row(TRACING, f"not timed ({why})", [], "")]
    brief = "value" if t.dynamo_s >= BRIEF_S else ""
    return [Row(TRACING, tracing_value(t), tracing_lines(t), brief)]


def _share(t: Any, seconds: float) -> str:
    share = t.share(seconds)
    return f"{share:.0%}" if share is not None else fmt_s(seconds)


def tracing_value(t: Any) -> str:
    """``0.78 s of Dynamo's 0.88 s timed, 86 functions; most: DynamicLayer.update 28%``"""
    head = t.top(1)[0]
    return (
        f"{fmt_s(t.traced_s)} of Dynamo's {fmt_s(t.dynamo_s)} timed, "
        f"{_plural(len(t.functions), 'function')}; most: {head.name} {_share(t, head.own_s)}"
    )


def function_line(t: Any, f: Any) -> str:
    """One function: its share of the cell's Dynamo time (its own time),
    its inclusive time, how often traced, where, as what module."""
    as_module = ""
    if f.paths:
        more = f", +{f.path_count - len(f.paths)}" if f.path_count > len(f.paths) else ""
        as_module = f" as {', '.join(f.paths)}{more}"
    traced = f", traced {f.traced}×" if f.traced > 1 else ""
    return (
        f"{_share(t, f.own_s)} {f.where}: {fmt_s(f.own_s)} own, "
        f"{fmt_s(f.cumulative_s)} with what it calls{traced}{as_module}"
    )


def tracing_lines(t: Any, n: int = LISTED) -> list[str]:
    """The whole compile cost of the functions where frames start, the
    modules, then the top ``n`` functions by own time."""
    lines = []
    roots = t.compiled_frames()
    if roots:
        cost = ", ".join(
            f"{f.module or f.name} {fmt_s(f.total_s)} ({fmt_s(f.cumulative_s)} tracing + "
            f"{fmt_s(f.compile_s)} compiling)"
            for f in roots[:3]
        )
        lines.append(f"tracing plus compiling, by compiled frame: {cost}")
    if t.modules:
        mods = ", ".join(
            f"{m.name} {fmt_s(m.cumulative_s)}" + (f" ({m.traced}×)" if m.traced > 1 else "")
            for m in t.modules[:4]
        )
        lines.append(f"by module (with what each calls): {mods}")
    return lines + [function_line(t, f) for f in t.top(n)]
