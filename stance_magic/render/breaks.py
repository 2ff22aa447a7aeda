"""The graph breaks section: the cell's to-do list (where, what, its cost,
the fix, torch's documentation page) and the session's, grouped by cause
and place (``stance_magic.breaks()``, ``%stance breaks``)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..place import with_source
from ..text import cell_label, fmt_s
from .labels import BREAK_COLUMNS, GRAPH_BREAKS
from .links import _linked
from .rows import Row
from .styles import _td, styled_table


def break_rows(rep: Any) -> list[Row]:
    """The graph breaks: how many, and the to-do list under them."""
    nb = rep.graph_break_count
    return [Row(GRAPH_BREAKS, str(nb), _break_lines(rep.graph_break_details), "row" if nb else "")]


def break_todo(g: Any) -> str:
    """One to-do line: where (the user's line first), what, its cost, the fix."""
    place = g.place
    if g.user_filename:
        place = f"{with_source(g.user_where, g.user_source)} (inside {g.where})"
    head = g.gb_type or g.summary.split(":", 1)[0]
    tag = f" [{g.gb_id}]" if g.gb_id else ""
    cost = ""
    if g.frames_after:
        cost = f"; {g.frames_after} more frame{'s' if g.frames_after != 1 else ''}"
        cost += f" compiled after it ({fmt_s(g.compile_s_after)})"
    hint = f"; hint: {g.hints[0]}" if g.hints else ""
    return f"{g.count}× {place}: {head}{tag}{cost}{hint}"


def _break_lines(breaks: Sequence[Any]) -> list[str]:
    """The graph-break to-do list: one line each, most costly first, with
    torch's documentation page."""
    out = []
    for g in breaks:
        line = break_todo(g)
        if getattr(g, "url", ""):
            line += f" · docs: {g.url}"
        out.append(line)
    return out


@dataclass
class BreakEntry:
    """One line of the session's graph-break to-do list."""

    kind: str
    place: str
    todo: str
    url: str
    count: int = 0
    frames_after: int = 0
    compile_s_after: float = 0.0
    cells: list[str] = field(default_factory=list)


class BreakList(list[BreakEntry]):
    """The session's graph breaks grouped by cause and place, most costly
    first (``stance_magic.breaks()``, ``%stance breaks``)."""

    @classmethod
    def of(cls, reports: Iterable[Any]) -> BreakList:
        groups: dict[tuple[str, str], list[tuple[Any, str]]] = {}
        for rep in reports:
            for g in rep.graph_break_details:
                key = (g.kind, g.user_where or g.where)
                groups.setdefault(key, []).append((g, cell_label(rep)))
        entries = []
        for (kind, place), found in groups.items():
            first = found[0][0]
            entries.append(
                BreakEntry(
                    kind,
                    place,
                    break_todo(first),
                    first.url,
                    count=sum(g.count for g, _ in found),
                    frames_after=sum(g.frames_after for g, _ in found),
                    compile_s_after=sum(g.compile_s_after for g, _ in found),
                    cells=list(dict.fromkeys(label for _, label in found if label)),
                )
            )
        return cls(sorted(entries, key=lambda b: (-b.compile_s_after, -b.count)))

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(b.count),
                b.todo.split(": ", 1)[1] if ": " in b.todo else b.todo,
                b.place,
                fmt_s(b.compile_s_after) if b.frames_after else "",
                ", ".join(b.cells),
                b.url,
            ]
            for b in self
        ]

    _HEAD = BREAK_COLUMNS

    def __str__(self) -> str:
        if not self:
            return "stance_magic: no graph breaks in the measured cells"
        return "\n".join(
            f"{i}. {b.todo}"
            + (f"\n   docs: {b.url}" if b.url else "")
            + (f"\n   cells: {', '.join(b.cells)}" if b.cells else "")
            for i, b in enumerate(self, 1)
        )

    def _repr_html_(self) -> str:
        if not self:
            return "<p>stance_magic: no graph breaks in the measured cells</p>"
        e = html.escape
        body = [
            "<tr>" + "".join(_td(c, _linked(e(c)), columns=len(self._HEAD)) for c in row) + "</tr>"
            for row in self._rows()
        ]
        return styled_table(self._HEAD, body, "graph breaks to fix, most costly first")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))
