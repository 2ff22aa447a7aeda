"""The comparison section (-c): the memory peaks of eager, the compiled first
run and the compiled steady state; steady times, the speedup and after how
many runs the compile pays for itself."""

from __future__ import annotations

from typing import Any

from ..text import fmt_bytes, fmt_s
from .labels import BREAK_EVEN, COMPILED_STEADY, EAGER_STEADY, MEMORY_PEAKS, SPEEDUP
from .rows import Row


def compare_rows(rep: Any) -> list[Row]:
    """The comparison's rows (none without one)."""
    rows = []
    c = rep.compare
    if c is not None and c.eager_peak_bytes is not None:
        rows.append(
            Row(
                MEMORY_PEAKS,
                f"eager {fmt_bytes(c.eager_peak_bytes)} · compiled first run "
                f"{fmt_bytes(c.compiled_first_peak_bytes)} · compiled steady "
                f"{fmt_bytes(c.compiled_steady_peak_bytes)}",
                [],
            )
        )
    if c is not None:
        rows.append(Row(EAGER_STEADY, fmt_s(c.eager_s), [], "value"))
        rows.append(Row(COMPILED_STEADY, fmt_s(c.compiled_s), [], "value"))
        synced = (
            ["every run timed from and to a synchronized CUDA device"]
            if getattr(c, "synchronized", False)
            else []
        )
        rows.append(Row(SPEEDUP, f"{c.speedup:.2f}×" if c.speedup else "n/a", synced, ""))
        be = (
            "never (compiled is not faster)"
            if c.break_even_calls is None
            else f"{c.break_even_calls} run{'s' if c.break_even_calls != 1 else ''}"
        )
        rows.append(Row(BREAK_EVEN, be, [], ""))
    return rows
