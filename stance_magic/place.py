"""A place in code, and its one wording.

:class:`Place` is one value for a place in the user's (or a library's) code:
a function's name, its file as a reader knows it (``In [3]``,
``torch/nn/modules/linear.py``: shortened by the builder through
:mod:`stance_magic.paths`), a line and that line's source. The report holds
places as data; every form a place is written in is made here, once:

* :attr:`Place.where`: ``In [3], line 2``, ``pkg/mod.py:2``, ``pkg/mod.py``;
* :attr:`Place.named`: ``f (In [3], line 2)``, ``f (?)`` for an unknown file;
* :attr:`Place.label`: the same, a function with no file by its name alone;
* :attr:`Place.frame`: ``In [1], line 2 in helper``, a cell's own code
  (``<module>``) by its line alone;
* :attr:`Place.within`: ``In [1], line 2 in helper``, the name always written;
* :attr:`Place.with_source`: ``In [5], line 8 `print(y)```;
* :attr:`Place.path_line`: ``pkg/mod.py:4``, as a trace's labels join them;
* :func:`called_from`: ``In [1], line 2 in helper, from In [3], line 2``.

A report field that holds a place reads as its words (:class:`Worded`): the
text a user's code and the exports have always read; :func:`of` gives the
:class:`Place` behind it.

A leaf module: it imports nothing from stance_magic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)

__all__ = [
    "Place",
    "Worded",
    "called_from",
    "holds_places",
    "label",
    "of",
    "replace",
    "with_source",
    "worded",
    "words",
]


def _line(loc: str, line: int | None) -> str:
    """A line in a file as a reader knows it: ``In [3], line 4`` in a
    notebook cell, ``pkg/mod.py:4`` in a file."""
    if not line:
        return loc
    return f"{loc}, line {line}" if loc.startswith("In [") else f"{loc}:{line}"


def label(name: str, where: str) -> str:
    """A function and its place in words: ``f (In [3], line 2)``; ``f``
    where the place is unknown ("")."""
    return f"{name} ({where})" if where else name


def with_source(where: str, source: str) -> str:
    """A place in words and its line's source: ``In [5], line 8 `print(y)```."""
    return " ".join(p for p in (where, f"`{source}`" if source else "") if p)


@dataclass(frozen=True)
class Place:
    """A place in code: a function's ``name``, its ``file`` as a reader
    knows it (``In [3]``, ``pkg/mod.py``; "" when unknown), a ``line`` and
    that line's ``source``. A compiled graph no frame of the cell names is
    placed by its compile (``file="compile 0/1"``: ``forward (compile 0/1)``).

    Examples
    --------
    >>> p = Place("f", "In [3]", 2, "y = f(x)")
    >>> p.where, p.named, p.frame, p.with_source
    ('In [3], line 2', 'f (In [3], line 2)', 'In [3], line 2 in f', 'In [3], line 2 `y = f(x)`')
    >>> Place("f").named, Place("f").label, Place(file="pkg/mod.py", line=4).where
    ('f (?)', 'f', 'pkg/mod.py:4')
    """

    name: str = ""
    file: str = ""
    line: int | None = None
    source: str = ""

    @property
    def where(self) -> str:
        """``In [3], line 2``, ``pkg/mod.py:2``, ``pkg/mod.py`` ("" for no file)."""
        return _line(self.file, self.line) if self.file else ""

    @property
    def named(self) -> str:
        """``f (In [3], line 2)``; ``f (?)`` for an unknown file."""
        return f"{self.name} ({_line(self.file or '?', self.line)})"

    @property
    def label(self) -> str:
        """``f (In [3], line 2)``; a function with no file by its name alone."""
        return label(self.name, self.where)

    @property
    def frame(self) -> str:
        """A frame of a stack: ``In [1], line 2 in helper``; a cell's own code
        (``<module>``) by its line alone, a frame with no file by its name."""
        text = self.where or self.name
        return text if self.name == "<module>" else f"{text} in {self.name}"

    @property
    def within(self) -> str:
        """``In [1], line 2 in helper``: the line and its function, always named."""
        return f"{self.where} in {self.name}"

    @property
    def with_source(self) -> str:
        """``In [5], line 8 `print(y)```: the line with its source."""
        return with_source(self.where, self.source)

    @property
    def path_line(self) -> str:
        """``pkg/mod.py:4``, ``In [3]:4``: file and line as a trace's labels
        join them (``?`` for no file)."""
        return f"{self.file}:{self.line}" if self.file else "?"

    @property
    def in_cell(self) -> bool:
        """The place is in a notebook cell (``In [N]``)."""
        return self.file.startswith("In [")


def called_from(stack: list[Place] | tuple[Place, ...]) -> str:
    """The user's line that made a call, from its user frames (innermost
    first): ``In [3], line 2``, or ``In [1], line 2 in helper, from In [3],
    line 2`` when a function made it (the notebook line is the outermost cell
    frame).

    Examples
    --------
    >>> called_from([Place("helper", "In [1]", 2), Place("<module>", "In [3]", 2)])
    'In [1], line 2 in helper, from In [3], line 2'
    """
    if not stack:
        return ""
    text = stack[0].frame
    cells = [p for p in stack[1:] if p.in_cell]
    if cells:
        text += f", from {cells[-1].where}"
    return text


def words(value: Any, form: str) -> Any:
    """``value`` (a :class:`Place`, a list of them, or text) in ``form``
    (a property of :class:`Place`, or ``"called_from"`` for a stack): text
    is taken as a place already in words (a report made by hand)."""
    if isinstance(value, Place):
        return getattr(value, form)
    if isinstance(value, (list, tuple)):
        if form == "called_from":
            return called_from(list(value))
        return [words(v, form) for v in value]
    return value


class Worded:
    """A report field that holds a :class:`Place` (or a list of them, or a
    place already in words) and reads as its words in one ``form`` (see
    :func:`words`): a report's data stays a place, and the text a reader,
    an export (``to_dict``, the CSV) and a user's code read stays the same.

    :func:`of` gives the place behind the field; :func:`replace` copies a
    report keeping its places.
    """

    def __init__(self, form: str, default: Any = dataclasses.MISSING) -> None:
        self.form = form
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            # the dataclass's default (none: the field is required)
            if self.default is dataclasses.MISSING:
                raise AttributeError(self.name)
            return self.default
        # the place is kept in the instance under the field's own name (a data
        # descriptor comes first): ``vars(report)`` makes the report again
        return words(obj.__dict__.get(self.name, self.default), self.form)

    def __set__(self, obj: Any, value: Any) -> None:
        if isinstance(value, tuple):
            value = list(value)
        obj.__dict__[self.name] = value


#: The key of a report field's metadata that says it holds a place (see
#: :func:`worded`).
WORDED = "stance_magic.place"


def worded(form: str) -> dict[str, str]:
    """The ``metadata`` of a report field that holds a place and reads as its
    words in ``form`` (``field(metadata=worded("named"))``, under a class made
    with :func:`holds_places`): type checkers see the field as the text it
    reads as, with the default ``field()`` gives it."""
    return {WORDED: form}


def holds_places(cls: _C) -> _C:
    """A dataclass decorator (put above ``@dataclass``): each field whose
    metadata is :func:`worded` keeps the place it is given and reads as its
    words (a :class:`Worded` descriptor)."""
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        form = f.metadata.get(WORDED)
        if form is None:
            continue
        default: Any = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        descriptor = Worded(form, default)
        descriptor.__set_name__(cls, f.name)
        setattr(cls, f.name, descriptor)
    return cls


def of(obj: Any, name: str) -> Any:
    """The place behind ``obj``'s :class:`Worded` field ``name``: a
    :class:`Place`, a list of them, or text (a place given in words); any
    other attribute as it reads."""
    if isinstance(_descriptor(obj, name), Worded) and name in obj.__dict__:
        return obj.__dict__[name]
    return getattr(obj, name)


def replace(obj: _T, **changes: Any) -> _T:
    """:func:`dataclasses.replace` that keeps the places of ``obj``'s
    :class:`Worded` fields (the plain one would copy their words)."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if f.name not in changes and f.init and isinstance(_descriptor(obj, f.name), Worded):
            changes[f.name] = of(obj, f.name)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def _descriptor(obj: Any, name: str) -> Any:
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None
