"""Charts for reports, comparisons, sweeps, the history, ranks and the
tracing by function: a module per view (:mod:`.report`, :mod:`.compare`,
:mod:`.history`, :mod:`.ranks`, :mod:`.tracing`) over what they share
(:mod:`.figure`).

Object-oriented matplotlib only (:class:`matplotlib.figure.Figure` on the Agg
canvas): no global pyplot state, nothing shown twice, every figure closed
after it is rendered. matplotlib is imported when a chart is first drawn.
"""

from __future__ import annotations

from .compare import compare_figure, sweep_figure
from .figure import COLORS, DPI, WIDTH_IN, figure_png, fit_text, new_figure, show_figure
from .history import (
    HISTORY_HEIGHT_PX,
    HISTORY_WIDTH_PX,
    history_capacity,
    history_cells,
    history_figure,
    history_png,
)
from .ranks import MAX_RANK_BARS, ranks_figure
from .report import report_figure
from .tracing import tracing_figure

__all__ = [
    "COLORS",
    "DPI",
    "HISTORY_HEIGHT_PX",
    "HISTORY_WIDTH_PX",
    "MAX_RANK_BARS",
    "WIDTH_IN",
    "compare_figure",
    "figure_png",
    "fit_text",
    "history_capacity",
    "history_cells",
    "history_figure",
    "history_png",
    "new_figure",
    "ranks_figure",
    "report_figure",
    "show_figure",
    "sweep_figure",
    "tracing_figure",
]
