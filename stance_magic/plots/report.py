"""One cell's chart: compile, cache lookups and execution as a stacked bar."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render.labels import CACHE_LOOKUPS as LOOKUPS
from ..render.labels import EXECUTION
from ..text import cell_label, fmt_s
from .figure import COLORS, legend_outside, new_figure, stacked_bars, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def report_figure(rep: Any) -> Figure:
    """One cell: compile, cache lookups and execution as a stacked bar
    (and the eager run beside it when the report has one)."""
    run = max(rep.wall_s - rep.compile_s - (rep.lookups.seconds or 0.0), 0.0)
    labels = [rep.stance_label]
    comp, guard, exe, eager = [rep.compile_s], [rep.lookups.seconds or 0.0], [run], [0.0]
    eager_s = rep.compare.eager_s if rep.compare is not None else None
    if eager_s is not None:
        labels.insert(0, "force_eager")
        comp.insert(0, 0.0)
        guard.insert(0, 0.0)
        exe.insert(0, 0.0)
        eager.insert(0, eager_s)
    scale, unit = time_unit(max(rep.wall_s, eager_s or 0.0))
    fig = new_figure(1.2 + 0.45 * len(labels))
    ax = fig.add_subplot()
    stacked_bars(
        ax,
        labels,
        [
            ("eager run", COLORS["eager"], [v * scale for v in eager]),
            ("compile", COLORS["compile"], [v * scale for v in comp]),
            (LOOKUPS, COLORS["guard"], [v * scale for v in guard]),
            (EXECUTION, COLORS["run"], [v * scale for v in exe]),
        ],
    )

    run_i = len(labels) - 1
    summary = (
        f"compile {fmt_s(comp[run_i])} · {LOOKUPS} {fmt_s(guard[run_i])} · "
        f"{EXECUTION} {fmt_s(exe[run_i])}"
    )
    if eager_s is not None:
        summary = f"eager {fmt_s(eager_s)} | " + summary
    ax.set_xlabel(f"wall time of the cell ({unit})")
    which = cell_label(rep)
    ax.set_title(f"{which}: {summary}" if which else summary, fontsize=9, loc="left")
    legend_outside(ax)
    return fig
