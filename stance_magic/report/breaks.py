"""A report's graph breaks: breaks of one kind at one place in the user's code."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..place import Place

__all__ = ["GraphBreak"]


@dataclass
class GraphBreak:
    """Graph breaks of one kind at one place in the user's code."""

    reason: str
    count: int
    summary: str
    filename: str = ""
    line: int | None = None
    source: str = ""
    #: torch could not resume after it and ran the whole frame eagerly
    skipped_frame: bool = False
    #: torch's graph-break id and type (its registry, where this torch has one)
    gb_id: str = ""
    gb_type: str = ""
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    #: torch's documentation page for this kind of break
    url: str = ""
    #: for a break inside library code, the user's line that led there
    user_filename: str = ""
    user_line: int | None = None
    user_source: str = ""
    #: what the break cost in the cell: frames torch compiled after it (its
    #: resume functions), the graphs among them, and their compile time
    frames_after: int = 0
    graphs_after: int = 0
    compile_s_after: float = 0.0
    #: ``filename`` and ``user_filename`` as a reader knows them (``In [5]``)
    file: str = ""
    user_file: str = ""

    @property
    def at(self) -> Place:
        """Where it broke, with its line of source (see :mod:`stance_magic.place`)."""
        file = (self.file or self.filename) if self.filename else ""
        return Place("", file, self.line, self.source)

    @property
    def user_at(self) -> Place:
        """For a break inside library code, the user's line that led there."""
        file = (self.user_file or self.user_filename) if self.user_filename else ""
        return Place("", file, self.user_line, self.user_source)

    @property
    def where(self) -> str:
        """The text form of :attr:`at`: ``In [5], line 8`` ("" for no file)."""
        return self.at.where

    @property
    def user_where(self) -> str:
        """The text form of :attr:`user_at`."""
        return self.user_at.where

    @property
    def kind(self) -> str:
        """The cause it is grouped by: torch's graph-break id and type, else its summary."""
        return f"{self.gb_id} {self.gb_type}".strip() if self.gb_id else self.summary

    @property
    def place(self) -> str:
        """Where it broke with its line of source: ``In [5], line 8 `print(y)```."""
        return self.at.with_source
