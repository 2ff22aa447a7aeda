"""The front end's running cells, counted once for every front end.

The magics and every open panel follow a shell's cells through IPython's
``pre_run_cell`` and ``post_run_cell`` events; the :class:`CellTracker` makes
one count of them, and tells the engine when the outermost cell starts and
ends. No IPython here: a cell is known by the ``info`` object IPython hands
every hook of one cell.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .measurement import Measurement

__all__ = ["Cell", "CellTracker"]


class Cell:
    """One running front-end cell: IPython's ``ExecutionInfo`` for it, how
    deep it runs (1: the outermost; a cell can run cells), and the watch
    measurement the magics opened for it."""

    __slots__ = ("depth", "info", "measurement")

    def __init__(self, info: Any, depth: int) -> None:
        self.info = info
        self.depth = depth
        self.measurement: Measurement | None = None

    @property
    def outermost(self) -> bool:
        return self.depth == 1


class CellTracker:
    """The front end's running cells, counted once for every front end.

    The magics and every open panel follow a shell's cells; each calls
    :meth:`enter` from its ``pre_run_cell`` hook and :meth:`leave` from its
    ``post_run_cell`` hook. A cell is known by the ``info`` IPython hands all
    hooks of one cell, so two front ends entering or leaving the same cell
    count it once, in whichever order their hooks run. The outermost cell
    starts and ends the engine's cell (``started`` and ``ended``:
    :meth:`stance_magic.session.engine.Engine.cell_started` and ``cell_ended``);
    :attr:`last_end` is when it last ended.
    """

    def __init__(self, started: Callable[[], None], ended: Callable[[], None]) -> None:
        self._started = started
        self._ended = ended
        self._stack: list[Cell] = []
        self._left: Cell | None = None
        #: ``time.time()`` when the last outermost cell ended
        self.last_end: float | None = None

    @property
    def depth(self) -> int:
        """How many cells are running (0: none; 2: a cell inside a cell)."""
        return len(self._stack)

    @property
    def running(self) -> tuple[Cell, ...]:
        """The running cells, outermost first."""
        return tuple(self._stack)

    def enter(self, info: Any = None) -> Cell:
        """A cell starts (``pre_run_cell``); the same ``info`` again is the
        same cell, entered by another front end."""
        top = self._stack[-1] if self._stack else None
        if top is not None and info is not None and top.info is info:
            return top
        cell = Cell(info, len(self._stack) + 1)
        self._stack.append(cell)
        if cell.outermost:
            self._started()
        return cell

    def cell_of(self, result: Any = None) -> Cell | None:
        """The cell that ``result`` (``post_run_cell``'s) ends, also when
        another front end has left it already; None for a cell entered
        before any front end followed it (the ``%load_ext`` cell)."""
        info = getattr(result, "info", None)
        top = self._stack[-1] if self._stack else None
        if top is not None and (info is None or top.info is None or top.info is info):
            return top
        left = self._left
        if left is not None and info is not None and left.info is info:
            return left
        return None

    def leave(self, result: Any = None) -> Cell | None:
        """A cell ends (``post_run_cell``): the cell it was (see
        :meth:`cell_of`); leaving the outermost ends the engine's cell."""
        cell = self.cell_of(result)
        if cell is None or cell is self._left:
            return cell
        self._stack.pop()
        self._left = cell
        if not self._stack:
            self._ended()
            self.last_end = time.time()
        return cell

    def reset(self) -> None:
        """Forget the running cells (the extension was unloaded inside one)."""
        self._stack.clear()
        self._left = None
