"""The calls section: how the calls of compiled functions ended (compiled,
ran cached code, ran eagerly, refused, raised) and why; the lookups that fell
back to eager code and the recompiles a stance refused."""

from __future__ import annotations

from typing import Any

from ..text import plural as _plural
from .labels import _CALL_WHY, _RAN, CALLS, EAGER_FALLBACKS, REFUSED_RECOMPILES
from .rows import Row


def call_rows(rep: Any) -> list[Row]:
    """The eager fallbacks and refused recompiles (where the stance makes
    them, or some happened), then the calls' account."""
    rows = []
    if rep.stance == "eager_on_recompile" or rep.eager_fallbacks:
        why_lines = (
            []
            if rep.stance == "eager_on_recompile"
            else ["eager_on_recompile was in force at those calls (set inside the cell)"]
        )
        # a miss each: a call's own lookup and those of frames nested in it
        calls = rep.calls.eager.get("eager_on_recompile", 0)
        value = str(rep.eager_fallbacks)
        if rep.eager_fallbacks and calls and calls != rep.eager_fallbacks:
            value = (
                f"{rep.eager_fallbacks} lookups missed and ran eagerly, in "
                f"{_plural(calls, 'call')} (frames nested in a call miss on their own)"
            )
        rows.append(
            Row(
                EAGER_FALLBACKS,
                value,
                why_lines,
                "row" if rep.eager_fallbacks else "",
            )
        )
    if rep.stance == "fail_on_recompile" or rep.refused_recompiles:
        by = [w for w in rep.calls.refused if w not in (rep.stance, "aot_compile's guards")]
        if rep.stance == "default" and rep.skip_guard_eval_unsafe:
            by = [w for w in by if w != "skip_guard_eval_unsafe"]
        why_lines = (
            [f"{' and '.join(by)} was in force at those calls (set inside the cell)"] if by else []
        )
        rows.append(
            Row(
                REFUSED_RECOMPILES,
                str(rep.refused_recompiles),
                why_lines + [f"guard that failed: {g}" for g in rep.refused_guards],
                "row" if rep.refused_recompiles else "",
            )
        )
    rows.extend(_call_rows(rep))
    return rows


def call_account_text(calls: Any) -> str:
    """``5 calls: 1 compiled, then ran; 3 ran cached code; 1 ran eagerly``."""
    parts = []
    if calls.compiled:
        parts.append(f"{calls.compiled} compiled, then ran")
    if calls.cached:
        parts.append(f"{calls.cached} ran cached code")
    for outcome in ("eager", "refused", "failed"):
        n = sum(getattr(calls, outcome).values())
        if n:
            parts.append(f"{n} {_RAN[outcome]}")
    return f"{_plural(calls.total, 'call')}: {'; '.join(parts)}"


def _call_rows(rep: Any) -> list[Row]:
    """Every call of a compiled function by how it ended: one row, where some
    call ran eagerly, was refused or failed."""
    calls = rep.calls
    if not calls.unusual:
        return []
    details = []
    for outcome in ("eager", "refused", "failed"):
        for why, n in getattr(calls, outcome).items():
            text = f"{n} {_RAN[outcome]}: {_CALL_WHY.get((outcome, why), why)}"
            details.append(text)
            if why == "first call" and rep.compiles_during_eager_calls:
                details.append(
                    f"meanwhile torch compiled {_plural(rep.compiles_during_eager_calls, 'frame')} "
                    "that the eager call reached a second time (nested frames count their own "
                    "calls: torch's behaviour)"
                )
    return [Row(CALLS, call_account_text(calls), details, "")]
