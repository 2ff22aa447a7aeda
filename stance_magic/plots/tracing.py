"""The tracing-by-function chart (torch 2.13+): where Dynamo's tracing time
went, by function, drawn as :mod:`stance_magic.plots` draws the report's
other charts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..text import cell_label, fmt_s
from ..text import plural as _n
from .figure import COLORS, annotate, fit_text, legend_outside, new_figure, stacked_bars, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["tracing_figure"]

#: the color of the rest of a function's inclusive time (what it calls)
CALLED = "#fdb863"


def tracing_figure(rep: Any, n: int = 10) -> Figure:
    """Where Dynamo's tracing time went (torch 2.13+): the ``n`` functions of
    most own time, each bar its own time with the rest of its inclusive time
    (what it calls) beside it. A ``ValueError`` for a report without
    per-function figures (nothing traced, an older torch, turned off)."""
    t = rep.tracing
    if not t.measured:
        why = {"unavailable": "this torch has no dynamo_profiler (2.13+)", "off": "it was off"}
        raise ValueError(
            "no tracing by function in this report: "
            + why.get(t.state, "nothing was traced in the cell")
        )
    top = t.top(n)
    scale, unit = time_unit(max(f.cumulative_s for f in top))
    fig = new_figure(1.0 + 0.32 * len(top))
    ax = fig.add_subplot()
    labels = [fit_text(_label(f), 300, 8) for f in top]
    stacked_bars(
        ax,
        labels,
        [
            ("own time", COLORS["compile"], [f.own_s * scale for f in top]),
            (
                "in what it calls",
                CALLED,
                [max(f.cumulative_s - f.own_s, 0.0) * scale for f in top],
            ),
        ],
    )
    for y, f in enumerate(top):
        share = t.share(f.own_s)
        if share is not None:
            annotate(ax, y, f.cumulative_s * scale, f"{share:.0%}")
    ax.set_xlim(0, max(f.cumulative_s for f in top) * scale * 1.12)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel(f"Dynamo tracing ({unit}); % = own time's share of Dynamo's {fmt_s(t.dynamo_s)}")
    which = cell_label(rep)
    title = f"tracing by function: {fmt_s(t.traced_s)} timed, {_n(len(t.functions), 'function')}"
    ax.set_title(f"{which}: {title}" if which else title, fontsize=9, loc="left")
    legend_outside(ax)
    return fig


def _label(f: Any) -> str:
    """``GPT2Attention.forward (modeling_gpt2.py:145)``: the function and the
    last part of its file (the whole place is in the report's rows)."""
    file = (f.file or f.filename).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{f.name} ({file}:{f.line})" if file else f.name
