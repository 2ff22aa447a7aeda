"""Locating the code a report names, from torch's frames: a compiled frame's
file, a line and its source, the user's line that made a call, an error as
one line.

Each place is a :class:`stance_magic.place.Place`, its file as a reader
knows it (``In [3]``, ``torch/nn/modules/linear.py``: shortened by
:mod:`stance_magic.paths`); its words are :mod:`stance_magic.place`'s.
"""

from __future__ import annotations

import linecache

from .. import place as places
from .. import probe
from ..paths import short_path, shorten_paths
from ..place import Place


def error_line(exc: BaseException) -> str:
    """An exception as one line: ``RuntimeError: its first line``, a cell's
    file in it named as the report names the cell (torch's messages name it
    by IPython's file: ``filename: 'In [9]'``, not ``'<ipython-input-9-…>'``)."""
    text = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    head = text[0] if text else ""
    if head.endswith(":") and len(text) > 1:
        # torch's "backend='inductor' raised:" says what raised on the next line
        head = f"{head} {text[1]}"
    head = shorten_paths(head)
    return f"{type(exc).__name__}: {head}" if head else type(exc).__name__


def _file(filename: str) -> str:
    """A compiled frame's file as the report shows it (``In [?]`` for a
    class defined in the notebook whose cell is unknown)."""
    if filename == probe.NOTEBOOK:
        return "In [?]"
    return short_path(filename) if filename else ""


def _place(name: str, filename: str, line: int | None, source: str = "") -> Place:
    """A place in code from a frame's name, its file name and line."""
    return Place(name, _file(filename), line, source)


def _stack(stack: list[tuple[str, str, int]]) -> list[Place]:
    """User frames (innermost first) as places."""
    return [_place(*fr) for fr in stack]


def frame_text(name: str, filename: str, line: int | None) -> str:
    """A user frame as the report writes it: ``In [1], line 2 in helper``;
    a cell's own code (``<module>``) by its line alone."""
    return _place(name, filename, line).frame


def called_from(stack: list[tuple[str, str, int]]) -> str:
    """The user's line that made a call, from its user frames (innermost
    first): ``In [3], line 2``, or ``In [1], line 2 in helper, from In [3],
    line 2`` when a function made it (the notebook line is the outermost cell
    frame)."""
    return places.called_from(_stack(stack))


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
