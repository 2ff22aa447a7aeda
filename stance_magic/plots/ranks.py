"""The chart across ranks (``--ranks``): one bar per rank, or a point each
where there are many."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render.labels import CACHE_LOOKUPS as LOOKUPS
from ..render.labels import EXECUTION
from ..text import fmt_s
from .figure import COLORS, legend_outside, new_figure, stacked_bars, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


#: Ranks drawn as bars in a chart across ranks; more are drawn as points.
MAX_RANK_BARS = 32


def ranks_figure(view: Any, max_bars: int = MAX_RANK_BARS) -> Figure:
    """Across ranks (a :class:`~stance_magic.report.ranks.RankReport`): one bar per rank
    (compile, cache lookups, execution), flagged ranks in red, a dashed line
    at the slowest compile; over ``max_bars`` ranks, compile time per rank as
    points."""
    rows = view.rows
    flagged = set(view.flagged_ranks)
    slowest = max(rows, key=lambda r: r.compile_s) if rows else None
    if len(rows) > max_bars:
        scale, unit = time_unit(max([r.compile_s for r in rows] + [1e-9]))
        fig = new_figure(2.8)
        ax = fig.add_subplot()
        x = [r.rank for r in rows]
        y = [r.compile_s * scale for r in rows]
        colors = ["#b00020" if r.rank in flagged else COLORS["compile"] for r in rows]
        ax.scatter(x, y, s=8, c=colors)
        ax.set_xlabel("rank")
        ax.set_ylabel(f"compile ({unit})")
        ax.grid(alpha=0.3)
        ax.set_title(
            f"{view.world_size} ranks: compile time per rank (red: diverged)",
            fontsize=10,
            loc="left",
        )
        return fig
    scale, unit = time_unit(max([r.wall_s for r in rows] + [1e-9]))
    labels = [f"rank {r.rank}" + (" !" if r.rank in flagged else "") for r in rows]
    fig = new_figure(1.2 + 0.42 * len(rows))
    ax = fig.add_subplot()
    stacked_bars(
        ax,
        labels,
        [
            ("compile", COLORS["compile"], [r.compile_s * scale for r in rows]),
            (LOOKUPS, COLORS["guard"], [(r.lookup_s or 0.0) * scale for r in rows]),
            (
                EXECUTION,
                COLORS["run"],
                [max(r.wall_s - r.compile_s - (r.lookup_s or 0.0), 0.0) * scale for r in rows],
            ),
        ],
    )
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r.rank in flagged:
            tick.set_color("#b00020")
    for i, r in enumerate(rows):
        bits = [f"{r.compiles} compile{'s' if r.compiles != 1 else ''}"]
        if r.recompiles:
            bits.append(f"{r.recompiles} recompile{'s' if r.recompiles != 1 else ''}")
        if r.graph_breaks:
            bits.append(f"{r.graph_breaks} break{'s' if r.graph_breaks != 1 else ''}")
        if r.refused:
            bits.append("refused a recompile")
        elif r.error:
            bits.append("error")
        ax.text(
            r.wall_s * scale, i, "  " + ", ".join(bits), va="center", fontsize=7.5, color="#333333"
        )
    if slowest is not None and slowest.compile_s > 0 and len(rows) > 1:
        ax.axvline(slowest.compile_s * scale, color="#b00020", ls="--", lw=1)
        title = (
            f"slowest compile: rank {slowest.rank}, {fmt_s(slowest.compile_s)} "
            "(dashed line: the other ranks wait for it)"
        )
    else:
        title = f"{view.world_size} ranks"
    if flagged:
        title += "; red, !: diverged"
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel(f"wall time of the block on each rank ({unit})")
    ax.set_xlim(0, max(r.wall_s for r in rows) * scale * 1.7 or 1.0)
    legend_outside(ax)
    return fig
