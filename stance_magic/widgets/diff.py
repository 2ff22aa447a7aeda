"""The stance panel's diff: two cells of the history picked, their
:class:`~stance_magic.report.CellDiff` shown under them (``%stance diff``'s).

:class:`DiffView` holds its own widgets (two dropdowns and the diff's HTML)
and is refreshed by the live area only while the area is open: a collapsed
panel costs a cell nothing for it. The dropdowns list the last
:data:`CHOICES` measured cells; B is the last one until the user picks
another, and A is "the cell before B" unless picked.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ..builder.diff import DiffError, diff_cells, pick
from ..notebook import cell_sources
from ..text import cell_label, fmt_s

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..report import CellReport

__all__ = ["BEFORE", "CHOICES", "DiffView"]

#: the A dropdown's first entry: B against the measured cell before it
BEFORE = "the cell before B"
#: how many of the last measured cells the dropdowns list
CHOICES = 50


def _choice(rep: CellReport) -> str:
    return f"{cell_label(rep)} · {rep.stance_label} · {fmt_s(rep.wall_s)}"


class DiffView:
    """Two dropdowns (A, B) over the history and the diff of the two."""

    def __init__(self, shell: Any = None) -> None:
        import ipywidgets as W

        self._shell = shell
        self._history: Sequence[CellReport] = ()
        self._updating = False
        #: B follows the last cell until the user picks one
        self._b_picked = False
        self.a = W.Dropdown(description="A", layout=W.Layout(width="300px"))
        self.b = W.Dropdown(description="B", layout=W.Layout(width="300px"))
        for w in (self.a, self.b):
            w.style.description_width = "16px"
        self.out = W.HTML()
        head = W.HTML('<span class="sm-hint">compare two cells (%stance diff):</span>')
        self.box = W.VBox(
            [head, W.HBox([self.b, self.a], layout=W.Layout(flex_flow="row wrap")), self.out]
        )
        self.a.add_class("sm-diff-a")
        self.b.add_class("sm-diff-b")
        self.out.add_class("sm-diff-out")
        self.box.add_class("sm-diff")
        self.a.observe(self._on_pick, names="value")
        self.b.observe(self._on_pick_b, names="value")

    def refresh(self, history: Sequence[CellReport]) -> None:
        """List the history's last cells and show the diff of the picked ones."""
        self._history = history
        shown = list(history[-CHOICES:])
        b_options = [(_choice(r), id(r)) for r in reversed(shown)]
        a_options = [(BEFORE, 0), *b_options]
        self._updating = True
        try:
            b_value = self.b.value if self._b_picked else None
            self.b.options = b_options
            if b_value in {v for _, v in b_options}:
                self.b.value = b_value
            elif b_options:
                self.b.value = b_options[0][1]
                self._b_picked = False
            a_value = self.a.value
            self.a.options = a_options
            self.a.value = a_value if a_value in {v for _, v in a_options} else 0
        finally:
            self._updating = False
        self._render()

    def _on_pick_b(self, change: dict[str, Any]) -> None:
        if not self._updating:
            self._b_picked = True
            self._render()

    def _on_pick(self, change: dict[str, Any]) -> None:
        if not self._updating:
            self._render()

    def _report(self, key: Any) -> CellReport | None:
        return next((r for r in self._history if id(r) == key), None)

    def _render(self) -> None:
        b = self._report(self.b.value)
        if b is None:
            self.out.value = '<i class="sm-hint">no measured cell yet</i>'
            return
        a = self._report(self.a.value) if self.a.value else None
        try:
            first, second = pick(self._history, a, b) if a is not None else pick(self._history, b)
        except DiffError as err:
            self.out.value = f'<i class="sm-hint">{html.escape(str(err))}</i>'
            return
        d = diff_cells(first, second, lambda: cell_sources(self._shell))
        self.out.value = f'<div style="line-height:1.4">{d._repr_html_()}</div>'
