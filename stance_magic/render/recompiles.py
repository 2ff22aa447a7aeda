"""The recompiles section: each recompile and the guard that failed, the
frames at their recompile limit and near it (the budget), the inputs
compiled dynamic, and why it recompiled (a cause per line; a cause in a few
words for the headline)."""

from __future__ import annotations

from typing import Any

from ..text import plural as _plural
from ..text import shorten
from .labels import (
    DYNAMIC_SHAPES,
    RECOMPILE_BUDGET,
    RECOMPILE_LIMIT,
    RECOMPILES,
    WHY_RECOMPILED,
    WHY_WOULD_RECOMPILE,
)
from .rows import Row


def recompile_rows(rep: Any, hinted: bool = False) -> list[Row]:
    """The recompiles, the limits hit, the fullest budget, the dynamic shapes
    and why it recompiled (folded where ``hinted``: the hints say why)."""
    rows = [
        Row(
            RECOMPILES,
            str(len(rep.recompiles)),
            _recompile_lines(rep),
            "row" if rep.recompiles else "",
        )
    ]
    for lim in rep.recompile_limits:
        rows.append(Row(RECOMPILE_LIMIT, _limit_value(lim), _limit_details(lim)))
    shown = [b for b in rep.recompile_budget if b.entries > 1 or b.near]
    full = rep.tightest_budget
    if shown and full is not None:
        text = budget_text(full)
        value = text if len(shown) == 1 else f"{len(shown)} frames; fullest: {text}"
        value += f" ({limit_setting(full, short=True)})"
        details = [budget_text(b) for b in shown] if len(shown) > 1 else []
        rows.append(Row(RECOMPILE_BUDGET, value, details, "row" if full.near else ""))
    dyn = [d for d in rep.dynamic_shapes if d.dynamic]
    if dyn:
        details = []
        for d in dyn:
            details.append(f"{d.where}: {'; '.join(d.inputs)}" if d.where else "; ".join(d.inputs))
            details.extend(f"↳ {s}" for s in d.symbols + d.specialized)
        rows.append(Row(DYNAMIC_SHAPES, "; ".join(dyn[-1].inputs), details, "value"))
    why = "" if hinted else "row"
    # a cell whose recompiles were all refused never recompiled
    label = WHY_WOULD_RECOMPILE if rep.refused_recompiles and not rep.recompiles else WHY_RECOMPILED
    if len(rep.causes) == 1:
        rows.append(Row(label, str(rep.causes[0]), [], why))
    elif rep.causes:
        rows.append(
            Row(
                label,
                _plural(len(rep.causes), "cause"),
                [str(c) for c in rep.causes],
                why,
            )
        )
    return rows


def failure_text(f: Any) -> str:
    """A failed guard (or a recompile's reason) with the user's line it came from."""
    return f"{f.reason}  ← {f.guard_source}" if f.guard_source else f.reason


def _recompile_lines(rep: Any) -> list[str]:
    """Each recompile with torch's first reason, then the guard that failed on
    every other cache entry (torch's record keeps only the first)."""
    out = []
    for r in rep.recompile_details:
        line = f"{r.where}: {failure_text(r)}"
        others = [f.reason for f in r.failures[1:]]
        if others:
            line += f" (other entries failed on: {'; '.join(others)})"
        if getattr(r, "called_from", ""):
            line += f"; called from {r.called_from}"
        out.append(line)
    return out


def limit_setting(x: Any, short: bool = False) -> str:
    """The setting a frame's recompile limit comes from, as every report row
    and hint words it: ``torch._dynamo.config.recompile_limit`` (its name
    alone where ``short``), or ``recompile_limit=8 of its torch.compile``
    for the limit of the frame's own ``torch.compile`` call (``x``: a
    recompile limit hit or a budget)."""
    if getattr(x, "per_call", False):
        n = x.limit if x.limit is not None else "?"
        return f"recompile_limit={n} of its torch.compile"
    return x.config if short else f"torch._dynamo.config.{x.config}"


def _limit_value(lim: Any) -> str:
    if getattr(lim, "per_call", False):
        text = f"{lim.where} is at the {limit_setting(lim)}"
    else:
        n = lim.limit if lim.limit is not None else "?"
        text = f"{lim.where} is at {limit_setting(lim)} = {n}"
    if lim.compile_id:
        text = f"hit ({lim.compile_id}): {text}"
    if lim.eager_calls:
        text += f"; {_plural(lim.eager_calls, 'call')} ran eagerly because of it"
    return text


def _limit_details(lim: Any) -> list[str]:
    out = [
        "torch stops compiling a frame at its limit: every later call that no cache entry "
        "matches runs eagerly, silently"
    ]
    for f in lim.failures:
        out.append(f"guard that failed: {failure_text(f)}")
    return out


def budget_text(b: Any) -> str:
    """``f (In [3], line 1): 7 of 8 entries (1 left: the next recompile is the last)``."""
    limit = "?" if b.limit is None else b.limit
    text = f"{b.where}: {b.entries} of {limit} entries"
    if b.left == 0:
        text += " (at the limit: torch runs new cases eagerly)"
    elif b.left == 1:
        text += " (1 left: the next recompile is the last)"
    return text


def _cause_brief(c: Any) -> str:
    """A recompile's cause in a few words, for the headline: ``x: rank 1 → 2``,
    ``x.size(0) 8 → 16``."""
    change = getattr(c, "change", "")
    subject = shorten(c.subject, 40)
    if c.kind in ("size", "parameter"):
        return f"{subject}.{change}" if change else f"{subject}: size"
    if c.kind in ("rank", "dtype", "device", "requires_grad"):
        return f"{subject}: {c.kind} {change}" if change else f"{subject}: {c.kind}"
    if c.kind == "redefined":
        return f"{subject} redefined"
    if c.kind in ("value", "flag", "attribute"):
        return f"{subject} changed"
    if c.kind == "grad mode":
        return "grad mode switched"
    if c.kind == "callback":
        return "no guard failed: torch 2.8's callbacks"
    if c.kind == "backend":
        return "an entry of another backend"
    return c.kind
