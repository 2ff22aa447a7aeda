"""A report's first line (the cell, its stance, its wall time, what happened
and what it cost), the panel's one-line summary, and the two rows the
headline says (stance, wall time), folded in the brief report."""

from __future__ import annotations

from typing import Any

from ..stance import stance_text
from ..text import cell_label, fmt_s
from ..text import plural as _plural
from .labels import _RAN, STANCE, WALL
from .recompiles import _cause_brief
from .rows import Row


def _stance_line(rep: Any) -> str:
    return stance_text(rep.stance, rep.skip_guard_eval_unsafe, rep.backend)


def headline_rows(rep: Any) -> list[Row]:
    """The stance and the wall time: the headline's, folded in the brief report."""
    wall = fmt_s(rep.wall_s)
    if getattr(rep, "synchronized", False):
        wall += "  (CUDA synchronized at its start and end: the GPU's work is in it)"
    return [Row(STANCE, _stance_line(rep), [], "head"), Row(WALL, wall, [], "head")]


def headline_parts(rep: Any) -> list[str]:
    """What a measured cell did and cost, in a few short phrases: the
    headline of its report and the panel's one-line summary."""
    parts = []
    n = rep.compiles + rep.backward_compiles
    raised = sum(1 for f in rep.frames if f.failed and f.raised)
    if rep.graphs:
        parts.append(f"compiled {_plural(rep.graphs, 'graph')} in {fmt_s(rep.compile_s)}")
    elif n:
        parts.append(f"traced {_plural(n, 'frame')} in {fmt_s(rep.compile_s)}, no graph")
    if raised:
        parts.append(f"{_plural(raised, 'compile')} FAILED")
    used = sum(1 for p in rep.precompiled if p.outcome == "hit")
    if used:
        parts.append(f"{_plural(used, 'precompiled frame')} used (no tracing)")
    if rep.loaded_functions:
        parts.append(f"{_plural(len(rep.loaded_functions), 'compiled function')} loaded")
    if not parts:
        hits = f", {_plural(rep.cache_hits, 'cache hit')}" if rep.cache_hits else ""
        parts.append(f"nothing compiled{hits}")
    if rep.recompiles:
        text = _plural(len(rep.recompiles), "recompile")
        briefs = list(dict.fromkeys(_cause_brief(c) for c in rep.causes))
        if briefs:
            text += f" ({briefs[0]}{', …' if len(briefs) > 1 else ''})"
        parts.append(text)
    breaks = rep.graph_break_count
    if breaks:
        parts.append(_plural(breaks, "graph break"))
    calls = rep.calls
    for outcome, word in _RAN.items():
        by = getattr(calls, outcome)
        total = sum(by.values())
        if total:
            why = f" ({next(iter(by))})" if len(by) == 1 else ""
            parts.append(f"{_plural(total, 'call')} {word}{why}")
    for lim in rep.recompile_limits:
        parts.append(f"{lim.where.split(' (')[0]} at its recompile limit")
    full = rep.tightest_budget
    if full is not None and full.left == 1 and not rep.recompile_limits:
        parts.append(f"{full.where.split(' (')[0]}: 1 recompile left")
    lk = rep.lookups
    if lk.per_lookup_s is not None:
        parts.append(f"cache lookup {fmt_s(lk.per_lookup_s)} a call")
    c = rep.compare
    if c is not None and c.speedup:
        be = (
            "never breaks even"
            if c.break_even_calls is None
            else f"breaks even after {_plural(c.break_even_calls, 'run')}"
        )
        parts.append(f"{c.speedup:.2f}× eager's speed at steady state, {be}")
    return parts


def headline(rep: Any) -> str:
    """A report's first line: the cell, its stance, its wall time, what
    happened and what it cost (an error's first line at the end)."""
    which = cell_label(rep)
    head = f"stance_magic · {which}" if which else "stance_magic"
    wall = fmt_s(rep.wall_s)
    if getattr(rep, "synchronized", False):
        wall += " (CUDA synchronized)"
    line = f"{head} · {_stance_line(rep)} · {wall}: {' · '.join(headline_parts(rep))}"
    if rep.error:
        line += f" · failed ({error_type(rep.error)})"  # its message: the error row's
    return line


def error_type(error: str) -> str:
    """The exception's type in a report's error line (``RuntimeError: ...``).

    Examples
    --------
    >>> error_type("RuntimeError: Detected recompile"), error_type("KeyboardInterrupt")
    ('RuntimeError', 'KeyboardInterrupt')
    """
    return error.split(":", 1)[0]


def summary_line(rep: Any, session: Any = None) -> str:
    """One line about a measured cell, for the panel's live area header
    (``session``: the session stance, named when the cell ran under its own).

    Examples
    --------
    >>> from stance_magic.report import CellReport
    >>> summary_line(
    ...     CellReport(stance="default", index=3, wall_s=0.5, compile_s=0.4, compiles=1, graphs=1)
    ... )
    'cell 3 · default · 500.0 ms: compiled 1 graph in 400.0 ms'
    """
    stance = _stance_line(rep)
    if session is not None and stance != str(session):
        stance += f" (its own; session: {session})"
    line = f"{cell_label(rep)} · {stance} · {fmt_s(rep.wall_s)}: {' · '.join(headline_parts(rep))}"
    if rep.error:
        line += f" · failed ({error_type(rep.error)})"
    return line
