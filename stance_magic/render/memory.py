"""The memory section (-m): each device's peak above the cell's start and
what was left at its end (the caching allocator's reserve on a GPU)."""

from __future__ import annotations

from typing import Any

from ..text import fmt_bytes
from .labels import MEMORY
from .rows import Row


def memory_rows(rep: Any) -> list[Row]:
    """A row per device measured, how it was measured under it."""
    rows = []
    for fig in rep.memory:
        value = (
            f"peak {fmt_bytes(fig.peak_bytes)} above the start; "
            f"{fmt_bytes(fig.end_bytes, signed=True)} left at the end"
        )
        if getattr(fig, "peak_reserved_bytes", None) is not None:
            value += (
                f"; reserved by the caching allocator: peak {fmt_bytes(fig.peak_reserved_bytes)}, "
                f"{fmt_bytes(fig.reserved_bytes)} at the end"
            )
        rows.append(Row(MEMORY.format(device=fig.device), value, [fig.method], "value"))
    return rows
