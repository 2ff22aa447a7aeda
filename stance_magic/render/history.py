"""The session's history as a table, text and HTML: a row per measured
cell, the columns of the figures some cell has (entries of the recompile
limit, peak memory, the compile caches) added where they say something."""

from __future__ import annotations

from typing import Any, Generic, Iterable, TypeVar

from ..text import cell_label, fmt_bytes, fmt_s, shorten
from .labels import BUDGET_COLUMN, CACHE_COLUMNS, HISTORY_COLUMNS, MEMORY_COLUMN
from .styles import html_table, text_table


def _columns(reports: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    reports = list(reports)
    columns = HISTORY_COLUMNS
    tight = [r.tightest_budget for r in reports]
    if any(b is not None and (b.entries > 1 or b.near) for b in tight):
        i = [k for k, _ in columns].index("recompiles") + 1
        columns = (*columns[:i], BUDGET_COLUMN, *columns[i:])
    if any(r.memory for r in reports):
        i = [k for k, _ in columns].index("lookup_s") + 1
        columns = (*columns[:i], MEMORY_COLUMN, *columns[i:])
    if any(r.compile_caches.state for r in reports):
        i = [k for k, _ in columns].index("compile_s") + 1
        columns = (*columns[:i], *CACHE_COLUMNS, *columns[i:])
    return columns


def _cell(key: str, v: Any) -> str:
    if key.endswith("_s"):
        return fmt_s(v)
    if key.endswith("_bytes"):
        return fmt_bytes(v) if v is not None else ""
    text = "" if v is None else str(v)
    return shorten(text) if key == "error" else text


def _history_body(reports: Iterable[Any]) -> tuple[list[str], list[list[str]]]:
    reports = list(reports)
    columns = _columns(reports)
    rows = [r.summary_row() for r in reports]
    for rep, row in zip(reports, rows):
        # the history's own columns: the cell as the notebook names it, two counts in one
        row["cell_label"] = cell_label(rep)
        row["hits_misses"] = f"{row['cache_hits']}/{row['cache_misses']}"
        # the compile caches' state, with the FX graph cache's hits/misses
        row["caches"] = (
            f"{row['cache_state']} {row['fx_cache_hits']}/{row['fx_cache_misses']}"
            if row.get("cache_state")
            else ""
        )
    return [h for _, h in columns], [[_cell(k, row[k]) for k, _ in columns] for row in rows]


def history_text(reports: Iterable[Any]) -> str:
    """The history as a text table (a line when nothing was measured yet)."""
    head, body = _history_body(reports)
    if not body:
        return "stance_magic history: no measured cells yet"
    return text_table(head, body)


def history_html(reports: Iterable[Any]) -> str:
    """The history as an inline-styled HTML table."""
    head, body = _history_body(reports)
    if not body:
        return "<p>stance_magic history: no measured cells yet</p>"
    return html_table(head, body)


# A history's item: a CellReport. A view imports no report class, so the item
# type is a parameter: stance_magic.history() is a History[CellReport].
_R = TypeVar("_R")


class History(list[_R], Generic[_R]):
    """The session's reports, oldest first, that display as a table."""

    def __str__(self) -> str:
        return history_text(self)

    def _repr_html_(self) -> str:
        return history_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))
