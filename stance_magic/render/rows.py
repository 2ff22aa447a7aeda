"""The shape of a cell report's row (every section module makes its rows as
:class:`Row` objects) and how many detail lines a row shows before the rest fold."""

from __future__ import annotations

from typing import NamedTuple

#: Detail lines shown under a row; the rest are folded (all stay in the
#: report's data and in the JSON export).
MAX_DETAILS = 8


class Row(NamedTuple):
    """One row of a cell report: its label, its value, the detail lines under
    it, and what the brief report (the default; ``verbose`` shows every row
    whole) keeps of it: ``"row"`` (the row and its details), ``"value"`` (the
    row, its details folded), ``"head"`` (nothing: the headline says it) or
    ``""`` (folded: it matters only to a reader who asks)."""

    label: str
    value: str
    details: list[str]
    brief: str = "row"
