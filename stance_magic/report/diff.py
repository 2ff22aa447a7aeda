"""Two measured cells compared (``%stance diff``, :func:`stance_magic.diff`):
:class:`CellDiff`, made by :func:`stance_magic.builder.diff.diff_cells` from
the two reports alone, and worded by :mod:`stance_magic.render.diff`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..text import Shown

__all__ = ["CellDiff", "DiffRow", "SourceDiff"]


@dataclass(frozen=True)
class DiffRow:
    """One row of a diff: a figure or a list that differs between A and B.

    ``a`` and ``b`` are the reports' own values (numbers, or the text of a
    stance, a setting, an error); ``change`` is ``b - a`` for numbers
    (None for text); ``details`` are the lines under the row (the frames,
    recompiles or graph breaks found in one cell only)."""

    #: what the row is about, as its label reads (``wall time``)
    name: str
    #: the report field or summary column it reads (``wall_s``), "" for a list
    key: str
    a: Any
    b: Any
    change: float | int | None = None
    #: seconds, bytes, a count, a ratio or text: how the values are worded
    unit: str = "count"
    details: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SourceDiff:
    """A function that took part in both cells' compiles, its source in each
    different: a short unified diff of the two."""

    name: str
    #: where each version was defined (``In [3]``)
    a_where: str
    b_where: str
    lines: list[str]


@dataclass(frozen=True)
class CellDiff(Shown):
    """What differs between two measured cells, B against A (``B - A``).

    Every figure is read from the two reports as they state them (and the
    compile settings each report kept): nothing is measured again. ``same``
    is True when nothing but timing differs, and the times within
    :attr:`noise` (the rule, in words)."""

    a: str
    b: str
    #: the two reports' positions in the history (1 for the first; 0: not in it)
    a_index: int
    b_index: int
    #: B's wall time minus A's (seconds)
    wall_change_s: float
    #: nothing differs but timing within the noise rule
    same: bool
    #: the noise rule, in words
    noise: str
    rows: list[DiffRow] = field(default_factory=list)
    sources: list[SourceDiff] = field(default_factory=list)
    #: B's recompile causes (:class:`stance_magic.causes.Cause`) that A's
    #: recompiles did not have
    causes: list[Any] = field(default_factory=list)

    @property
    def headline(self) -> str:
        """One line: B vs A, the change in wall time and its main cause."""
        from ..render.diff import diff_headline

        return diff_headline(self)

    def row(self, key_or_name: str) -> DiffRow | None:
        """The row of that key or name, or None (the two agree there)."""
        return next((r for r in self.rows if key_or_name in (r.key, r.name)), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): every field, the rows and sources nested,
        and the headline."""
        data = asdict(self)
        data["headline"] = self.headline
        return data

    def text(self) -> str:
        from ..render.diff import diff_text

        return diff_text(self)

    def html(self) -> str:
        from ..render.diff import diff_html

        return diff_html(self)
