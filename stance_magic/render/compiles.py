"""The compiles section: the compile time and its phases (Inductor's timed
parts under it), and what compiled: each frame traced, each compiled
function loaded, each precompiled frame used or not."""

from __future__ import annotations

from typing import Any

from ..text import fmt_s
from ..text import plural as _plural
from .labels import COMPILE_TIME, COMPILES, KERNEL_LABELS, PHASE_LABELS
from .rows import Row


def compile_rows(rep: Any) -> list[Row]:
    """The compile time (its phases; Inductor's parts under it) and the compiles."""
    comp = fmt_s(rep.compile_s)
    breakdown = _breakdown(rep) if rep.compile_s else ""
    if breakdown:
        comp += f"  ({breakdown})"
    loaded_or_pre = rep.loaded_functions or [p for p in rep.precompiled if p.outcome != "miss"]
    return [
        Row(COMPILE_TIME, comp, _kernel_lines(rep), ""),
        Row(
            COMPILES,
            _compiles_value(rep),
            [_frame_line(rep, f) for f in rep.frames]
            + [_load_line(x) for x in rep.loaded_functions]
            + [_precompiled_line(p) for p in rep.precompiled if p.outcome != "miss"],
            "row" if rep.compiles or rep.backward_compiles or loaded_or_pre else "",
        ),
    ]


def _breakdown(rep: Any) -> str:
    parts = [
        f"{label} {fmt_s(rep.compile_breakdown.get(p, 0.0))}"
        for p, label in PHASE_LABELS.items()
        if rep.compile_breakdown.get(p, 0.0) >= 1e-6
    ]
    return ", ".join(parts)


def _kernel_parts(parts: dict[str, float]) -> str:
    return ", ".join(
        f"{label} {fmt_s(parts[k])}" for k, label in KERNEL_LABELS.items() if parts.get(k)
    )


def _kernel_lines(rep: Any) -> list[str]:
    """The compile time's named parts (inside it) and those timed at the
    first runs after it; nothing where torch timed none."""
    lines = []
    inside = getattr(rep, "kernel_breakdown", None) or {}
    after = getattr(rep, "first_run_breakdown", None) or {}
    if any(inside.values()):
        lines.append(f"of which {_kernel_parts(inside)}")
    if any(after.values()):
        lines.append(
            f"at the first runs after compiling: {_kernel_parts(after)} (in the wall time, "
            "not the compile time)"
        )
    return lines


def _compiles_value(rep: Any) -> str:
    text = _plural(rep.compiles, "frame") + " traced"
    if rep.backward_compiles:
        text += f" + {_plural(rep.backward_compiles, 'backward graph')}"
    backends = sorted({f.backend for f in rep.frames if f.backend})
    text += f"; {_plural(rep.graphs, 'graph')} compiled"
    if backends:
        text += f" ({', '.join(backends)})"
    raised = sum(1 for f in rep.frames if f.failed and f.raised)
    eager = rep.failed_compiles - raised
    if raised:
        text += f"; {raised} FAILED"
    if eager:
        text += f"; {eager} not compiled (torch ran {'it' if eager == 1 else 'them'} eagerly)"
    if rep.loaded_functions:
        n = len(rep.loaded_functions)
        text += f"; {_plural(n, 'compiled function')} loaded (no tracing)"
    used = sum(1 for p in rep.precompiled if p.outcome == "hit")
    unused = sum(1 for p in rep.precompiled if p.outcome not in ("hit", "miss"))
    if used:
        text += f"; {_plural(used, 'precompiled frame')} used (no tracing)"
    if unused:
        text += f"; {_plural(unused, 'precompiled frame')} not used (traced again)"
    return text


def _precompiled_line(p: Any) -> str:
    if p.outcome == "hit":
        return f"{p.where}: Dynamo's precompiled frame, no tracing (caching_precompile)"
    failed = f" (failed: {'; '.join(p.failed_guards)})" if p.failed_guards else ""
    return f"{p.where}: precompiled frame not used, traced again: {p.why}{failed}"


def _load_line(x: Any) -> str:
    text = f"{x.where}: loaded with torch.compiler.load_compiled_function, {fmt_s(x.seconds)}"
    if x.error:
        text += f" [FAILED, {x.error}]"
    return text


def _frame_line(rep: Any, f: Any) -> str:
    text = f"{f.where}: {fmt_s(f.seconds)}"
    tags = []
    if not f.graph and not f.failed:
        tags.append("no graph: nothing for a backend to compile")
    elif f.backend and len({g.backend for g in rep.frames if g.backend}) > 1:
        tags.append(f"backend {f.backend}")
    if f.aot:
        tags.append("aot_compile: ahead of any call")
    if f.during_eager_call:
        tags.append("during the eager first call")
    if f.failed:
        if f.raised and rep.error:
            tags.append("FAILED: its error is the cell's (see error)")  # said once, there
        elif f.raised:
            tags.append(f"FAILED, {f.failed}")
        else:
            tags.append(f"not compiled, ran eagerly: {f.failed}")
    if tags:
        text += f" [{'; '.join(tags)}]"
    return text
