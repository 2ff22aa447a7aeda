"""The places of code a report names: a compiled frame's file, a line, the
user's line that made a call, an error as one line.

Each place is written as the report writes places (``In [3], line 2``,
``torch/nn/modules/linear.py:125``): paths are shortened by
:mod:`stance_magic.paths`, a line is written by :func:`stance_magic.text.place`.
"""

from __future__ import annotations

import linecache

from .. import probe
from ..paths import short_path
from ..text import place


def error_line(exc: BaseException) -> str:
    """An exception as one line: ``RuntimeError: its first line``."""
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}" if head else type(exc).__name__


def _file(filename: str) -> str:
    """A compiled frame's file as the report shows it (``In [?]`` for a
    class defined in the notebook whose cell is unknown)."""
    if filename == probe.NOTEBOOK:
        return "In [?]"
    return short_path(filename) if filename else ""


def _where(filename: str, line: int | None) -> str:
    return place(_file(filename), line) if filename else ""


def frame_text(name: str, filename: str, line: int | None) -> str:
    """A user frame as the report writes it: ``In [1], line 2 in helper``;
    a cell's own code (``<module>``) by its line alone."""
    text = _where(filename, line) or name
    return text if name == "<module>" else f"{text} in {name}"


def called_from(stack: list[tuple[str, str, int]]) -> str:
    """The user's line that made a call, from its user frames (innermost
    first): ``In [3], line 2``, or ``In [1], line 2 in helper, from In [3],
    line 2`` when a function made it (the notebook line is the outermost cell
    frame)."""
    if not stack:
        return ""
    text = frame_text(*stack[0])
    cells = [fr for fr in stack[1:] if _file(fr[1]).startswith("In [")]
    if cells:
        text += f", from {_where(cells[-1][1], cells[-1][2])}"
    return text


def _line_in_frame(filename: str, first: int | None, source: str) -> int | None:
    """The one line of the function that starts at ``first`` in ``filename``
    (decorators, its ``def`` and its indented body) whose code is ``source``;
    None if none or several."""
    lines = linecache.getlines(filename)
    if not source or not first or first > len(lines):
        return None
    i = first - 1
    base = len(lines[i]) - len(lines[i].lstrip())
    while i < len(lines) and lines[i].strip().startswith("@"):
        i += 1
    found = []
    for n in range(i, len(lines)):
        text = lines[n]
        indent = len(text) - len(text.lstrip())
        if n > i and text.strip() and indent <= base:
            break
        if text.strip() == source:
            found.append(n + 1)
    return found[0] if len(found) == 1 else None


def _source_line(filename: str, line: int | None) -> str:
    if not filename or not line:
        return ""
    text = linecache.getline(filename, line).strip()
    return text if len(text) <= 120 else text[:119] + "…"
