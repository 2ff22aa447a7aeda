"""``--compare``'s and ``--sweep``'s charts: first run and steady state against
eager; one bar per stance (and its first-run peak memory)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render.labels import CACHE_LOOKUPS as LOOKUPS
from ..render.labels import EXECUTION, PEAK_MEMORY
from ..text import fmt_bytes, fmt_s
from ..text import plural as _n
from .figure import COLORS, annotate, legend_outside, new_figure, stacked_bars, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def compare_figure(result: Any) -> Figure:
    """--compare: first run and steady state for eager and the stance."""
    eager, comp = result.eager_runs, result.compiled_runs
    first_c = comp[0] if comp else 0.0
    rep = result.report
    compile_first = min(rep.compile_s, first_c)
    labels = ["force_eager", rep.stance_label]
    scale, unit = time_unit(max([*eager, *comp, 1e-9]))
    fig = new_figure(2.9)
    axes = fig.subplots(1, 2)
    ax = axes[0]
    stacked_bars(
        ax,
        labels,
        [
            ("eager run", COLORS["eager"], [eager[0] * scale, 0.0]),
            ("compile", COLORS["compile"], [0.0, compile_first * scale]),
            (f"{EXECUTION} + {LOOKUPS}", COLORS["run"], [0.0, (first_c - compile_first) * scale]),
        ],
    )
    ax.set_xlabel(f"first run ({unit})")
    ax.set_title("first run (compile included)", fontsize=10, loc="left")
    legend_outside(ax)
    ax = axes[1]
    se, sc = result.eager_steady, result.compiled_steady
    sscale, sunit = time_unit(max(se.median, sc.median, 1e-9))
    y = [0, 1]
    med = [se.median * sscale, sc.median * sscale]
    err = [
        [(se.median - se.low) * sscale, (sc.median - sc.low) * sscale],
        [(se.high - se.median) * sscale, (sc.high - sc.median) * sscale],
    ]
    ax.barh(y, med, color=[COLORS["eager"], COLORS["run"]], height=0.6, xerr=err, capsize=3)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    n = max(se.n, sc.n)
    ax.set_xlabel(f"median of {n} runs ({sunit})\nbars: min–max")
    ax.set_title("steady state", fontsize=10, loc="left")
    return fig


def sweep_figure(result: Any) -> Figure:
    """--sweep: one bar per stance, compile / cache lookups / execution stacked."""
    reps = result.reports
    labels = [r.stance_label + (" (error)" if r.error else "") for r in reps]
    walls = [r.wall_s for r in reps]
    scale, unit = time_unit(max([*walls, 1e-9]))
    comp = [r.compile_s * scale for r in reps]
    guard = [(r.lookups.seconds or 0.0) * scale for r in reps]
    exe = [max(r.wall_s - r.compile_s - (r.lookups.seconds or 0.0), 0.0) * scale for r in reps]
    memory = bool(getattr(result, "memory", False))
    fig = new_figure(1.0 + 0.42 * len(reps))
    if memory:
        ax, mx = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    else:
        ax = fig.add_subplot()
    stacked_bars(
        ax,
        labels,
        [
            ("compile", COLORS["compile"], comp),
            (LOOKUPS, COLORS["guard"], guard),
            (EXECUTION, COLORS["run"], exe),
        ],
    )

    if memory:
        peaks = [(r.peak_bytes or 0) / 1e6 for r in reps]
        mx.barh(range(len(reps)), peaks, color=COLORS["memory"], height=0.6)
        for i, r in enumerate(reps):
            annotate(mx, i, peaks[i], fmt_bytes(r.peak_bytes))
        mx.set_xlabel("MB above the start")
        mx.set_title(f"first-run {PEAK_MEMORY}", fontsize=10, loc="left")
        mx.set_xlim(0, max(peaks) * 1.6 or 1.0)
        mx.grid(axis="x", alpha=0.3)
        mx.set_axisbelow(True)

    for i, r in enumerate(reps):
        annotate(
            ax,
            i,
            r.wall_s * scale,
            f"{fmt_s(r.wall_s)}: {_n(r.compiles, 'compile')}, {_n(len(r.recompiles), 'recompile')}",
        )
    ax.set_xlabel(f"wall time of the cell, from cold caches ({unit})")
    ax.set_title("one run per stance", fontsize=10, loc="left")
    if memory:  # no room on the right: the legend goes under the time axis
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.3), ncol=3, frameon=False)
    else:
        legend_outside(ax)
    ax.set_xlim(0, max(walls) * scale * 1.8 or 1.0)
    return fig
