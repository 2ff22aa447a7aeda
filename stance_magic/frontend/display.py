"""Showing results in the front end: one ``display`` of text and HTML each.

Every object the magics show goes out as one raw ``display`` of
``text/plain`` and ``text/html`` (a terminal IPython shows the text, Jupyter
the HTML), then its hints and, where the front end shows images, its chart.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..render.ranks import RankNote
    from ..report import CellReport
    from ..report.ranks import RankReport

__all__ = ["can_show_images", "display_text", "notice", "show", "to_show"]


def display_text(text: str, html_text: str | None = None) -> None:
    """Display ``text`` (and its HTML form) once, as raw data."""
    from IPython.display import display

    data = {"text/plain": text}
    if html_text is not None:
        data["text/html"] = html_text
    display(data, raw=True)


def notice(msg: str) -> None:
    """A notice (not an error): displayed as text and HTML, so Jupyter does not
    show it in the pink box of stderr; a terminal prints it on stdout."""
    text = f"stance_magic: {msg}"
    display_text(
        text,
        f'<div class="sm-notice" style="font-size:12px;color:#555;margin:2px 0">'
        f"{html.escape(text)}</div>",
    )


def can_show_images() -> bool:
    """False in a terminal IPython, whose display shows text only."""
    from IPython import get_ipython

    ip = get_ipython()
    return ip is None or "image/png" in ip.display_formatter.active_types


def to_show(rep: CellReport, plot: bool) -> tuple[CellReport | RankReport | RankNote, bool]:
    """What a cell gathered across ranks displays, with whether to chart it:
    rank 0 the combined view, another rank one line, an interrupted cell
    (nothing gathered) its own report."""
    if rep.ranks is not None:
        return rep.ranks, plot
    if rep.gathered is not None:
        from ..render.ranks import RankNote

        return RankNote(rep), False
    return rep, plot


def show(
    obj: Any,
    plot: bool = True,
    hints: bool = True,
    max_details: int | None = None,
    verbose: bool = False,
) -> None:
    """Display a report (or compare/sweep result, or a view across ranks) as
    HTML + text, its hints (unless ``hints`` is False) and its chart (if
    ``plot``); ``max_details`` detail lines under a row before the rest fold;
    ``verbose``: every row of a report, none folded.

    A report (and a compare result) shows its hints under its headline; the
    other results show theirs after the view."""
    from ..render import MAX_DETAILS

    n = MAX_DETAILS if max_details is None else max_details
    # a report or a compare result: its hints in its views (drawn once for both)
    inline = hasattr(obj, "views")
    if inline:
        display_text(*obj.views(n, verbose, hints))
    elif hasattr(obj, "html"):
        display_text(obj.text(n, verbose, hints), obj.html(n, verbose, hints))
    else:
        display_text(str(obj), obj._repr_html_())
    advice = getattr(obj, "advice", None) if hints and not inline else None
    if advice:
        lines = advice() if callable(advice) else advice
        if lines:
            from ..render import advice_html

            display_text("\n".join(f"hint: {a}" for a in lines), advice_html(lines))
    # A report's chart only when the cell is worth showing: an empty bar
    # helps no one and drawing it costs about 60 ms.
    from ..report import CellReport

    worth = obj.worth_showing() if isinstance(obj, CellReport) else True
    if plot and worth and hasattr(obj, "figure") and can_show_images():
        from ..plots import show_figure

        fig = obj.figure()
        if fig is not None:
            show_figure(fig, text=None)
