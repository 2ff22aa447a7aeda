"""The stance panel's live area: the last measured cell, its report and a chart.

:class:`LiveArea` is the collapsible area under the controls. Its header is
a one-line summary of the last measured cell that used compiled code (the
only thing a collapsed panel updates); opened, it shows that cell's report
(as the shell's formatter makes it, less the headline the header says) and
a chart of the cells that compiled, failed or changed stance, drawn only
while the area is open, only when a cell changed something, and after the
cell's reply where a kernel's event loop allows; under them, two cells of
the history compared (:mod:`stance_magic.widgets.diff`).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ..render import summary_line

if TYPE_CHECKING:
    from ..report import CellReport
    from ..session.engine import Engine
    from ..stance import Stance
    from .tree import PanelParts

__all__ = ["LiveArea"]


def _shown_in_panel(rep: CellReport, previous: CellReport | None) -> bool:
    """Whether the panel's live area describes a watched cell: it is worth
    showing, or it ran compiled code (warm hits included)."""
    return bool(rep.cache_hits or rep.compiled_calls) or rep.worth_showing(previous)


#: where the report's headline block starts (stance_magic.render.report_html's
#: own markup: its text escaped, no element inside)
_HEADLINE_DIV = '<div class="sm-headline"'


def without_headline(html_text: str) -> str:
    """A report's HTML without its headline: the live area's title says it
    (:func:`~stance_magic.render.summary_line`), once."""
    start = html_text.find(_HEADLINE_DIV)
    if start < 0:
        return html_text
    end = html_text.find("</div>", start)
    return html_text[:start] + html_text[end + len("</div>") :] if end >= 0 else html_text


class LiveArea:
    """The live area of :class:`~stance_magic.widgets.panel.StancePanel`: its
    widgets (its part of :class:`~stance_magic.widgets.tree.PanelParts`), the
    report it describes, what is stale, and when it is drawn."""

    def __init__(self, engine: Engine, parts: PanelParts, shell: Any = None) -> None:
        self._engine = engine
        self._shell = shell
        #: the widgets it reads and sets (made by tree.build_tree)
        self._w = parts
        #: the report the summary describes
        self.shown: CellReport | None = None
        #: the stance of the %%stance cell running, if one is
        self._cell_stance: Stance | None = None
        self._report_stale = False
        self._chart_stale = False
        self._chart_pending = False
        self.closed = False

    def observe(self) -> None:
        """Fill the area in when it is opened."""
        self._w.live.observe(self._on_open, names="selected_index")

    @property
    def expanded(self) -> bool:
        """Whether the area (report and chart) is open."""
        return bool(self._w.live.selected_index == 0)

    def expand(self, open: bool = True) -> None:
        self._w.live.selected_index = 0 if open else None

    def cell_started(self, stance: Stance) -> None:
        """A %%stance cell runs under ``stance``: the header says so until its report."""
        self._cell_stance = stance
        session = self._engine.session
        own = (
            ""
            if stance == session
            else f" (its own stance; the session stays {session.nested_text()})"
        )
        self._w.live.set_title(0, f"a %%stance cell is running under {stance}{own}…")

    def show_latest(self) -> None:
        """Describe the last report of the engine's history that the panel
        would have shown (a panel opened after some cells ran)."""
        history = self._engine.history
        for i in range(len(history) - 1, -1, -1):
            if _shown_in_panel(history[i], history[i - 1] if i else None):
                self.show(history[i])
                break

    def on_report(self, rep: CellReport) -> None:
        stance_cell, self._cell_stance = self._cell_stance, None
        history = self._engine.history
        previous = history[-2] if len(history) > 1 and history[-1] is rep else None
        if stance_cell is None and not _shown_in_panel(rep, previous):
            return  # a watched cell that used no compiled code: nothing to show
        self.show(rep, own=stance_cell, chart=rep.worth_showing(previous))

    def show(self, rep: CellReport, own: Stance | None = None, chart: bool = True) -> None:
        """Describe ``rep`` in the summary; fill in the report (and redraw the
        chart, if ``chart``) now when the live area is open, else on opening."""
        session = self._engine.session
        self.shown = rep
        self._w.live.set_title(0, summary_line(rep, session if own is not None else None))
        self._report_stale = True
        self._chart_stale = self._chart_stale or chart
        if self.expanded:
            self._fill()

    def _on_open(self, change: dict[str, Any]) -> None:
        if change["new"] == 0:
            self._fill()

    def _fill(self) -> None:
        if self._report_stale and self.shown is not None:
            self._report_stale = False
            # ipywidgets' HTML has the line height of a form control: a table
            # reads better at the notebook's own.
            html_text = without_headline(self._report_html(self.shown))
            self._w.report.value = f'<div style="line-height:1.4">{html_text}</div>'
            # two cells compared, the last against the one before it unless picked
            self._w.diff.refresh(self._engine.history)
        if self._chart_stale:
            self._schedule_chart()

    def _report_html(self, rep: CellReport) -> str:
        """The report's HTML as the shell's formatter makes it (so it follows
        the session's ``StanceMagics.max_details``), else its own."""
        formatters = getattr(self._shell, "display_formatter", None)
        if formatters is not None:
            html_text: str | None = formatters.formatters["text/html"](rep)
            if html_text:
                return html_text
        return rep._repr_html_()

    def _schedule_chart(self) -> None:
        """Draw the chart after the running cell's reply when a kernel's event
        loop runs this cell (several reports then make one drawing), else now."""
        if self._chart_pending:
            return
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.draw_chart()
            return
        self._chart_pending = True
        loop.call_soon(self.draw_chart)

    def draw_chart(self) -> None:
        self._chart_pending = False
        if self.closed or not self._chart_stale:
            return
        self._chart_stale = False
        try:
            from ..plots import history_png

            png = history_png(self._engine.history, cache_key=id(self._engine))
        except ImportError as err:
            self._w.chart.layout.display = "none"
            self._w.chart_note.value = (
                f'<i class="sm-hint">no chart: {html.escape(str(err))} (pip install matplotlib)</i>'
            )
            return
        except Exception as err:  # a chart must never break a cell
            self._w.chart.layout.display = "none"
            self._w.chart_note.value = f'<i class="sm-hint">no chart: {html.escape(repr(err))}</i>'
            return
        if png is None:
            self._w.chart.layout.display = "none"
            self._w.chart_note.value = (
                '<i class="sm-hint">No cell has compiled, failed or changed stance yet.</i>'
            )
            return
        if self._w.chart.value != png:
            self._w.chart.value = png
        self._w.chart.layout.display = None
        self._w.chart_note.value = ""
