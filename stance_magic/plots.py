"""Charts for reports, comparisons, sweeps and the history.

Object-oriented matplotlib only (:class:`matplotlib.figure.Figure` on the Agg
canvas): no global pyplot state, nothing shown twice, every figure closed
after it is rendered. matplotlib is imported when a chart is first drawn.
"""

from __future__ import annotations

import base64
import io
from typing import Any, Sequence

#: Width that reads well in a notebook cell (inches at 100 dpi: 760 px).
WIDTH_IN = 7.6
DPI = 100

COLORS = {
    "compile": "#d95f02",
    "guard": "#7570b3",
    "run": "#1b9e77",
    "eager": "#888888",
    "memory": "#1f78b4",
}


def _figure(height: float = 2.8) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    return fig


def _unit(max_s: float) -> tuple[float, str]:
    if max_s >= 1:
        return 1.0, "s"
    if max_s >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def figure_png(fig: Any) -> bytes:
    """Render a figure to PNG bytes and release it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    fig.clear()
    return buf.getvalue()


def show_figure(fig: Any, text: str | None = None) -> None:
    """Display a figure once as an inline PNG, with ``text`` as the plain fallback."""
    from IPython.display import display

    png = figure_png(fig)
    data: dict[str, Any] = {"image/png": base64.b64encode(png).decode("ascii")}
    data["text/plain"] = text if text is not None else "[stance_magic chart]"
    display(data, raw=True)


def _stacked(
    ax: Any, labels: Sequence[str], segments: Sequence[tuple[str, str, Sequence[float]]]
) -> None:
    """Horizontal stacked bars: one bar per label, segments (name, color, values)."""
    left = [0.0] * len(labels)
    y = list(range(len(labels)))
    for name, color, values in segments:
        if not any(values):
            continue
        ax.barh(y, values, left=left, color=color, label=name, height=0.6)
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def _legend(ax: Any) -> None:
    """Legend outside the axes, right of them, so it never hides a bar."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _annotate(ax: Any, y: int, x: float, text: str) -> None:
    ax.text(x, y, "  " + text, va="center", fontsize=7.5, color="#333333")


def report_figure(rep: Any) -> Any:
    """One cell: compile, guard evaluation and execution as a stacked bar
    (and the eager run beside it when the report has one)."""
    run = max(rep.wall_s - rep.compile_s - (rep.guard_s or 0.0), 0.0)
    labels = [rep.stance_label]
    comp, guard, exe, eager = [rep.compile_s], [rep.guard_s or 0.0], [run], [0.0]
    if rep.eager_s is not None:
        labels.insert(0, "force_eager")
        comp.insert(0, 0.0)
        guard.insert(0, 0.0)
        exe.insert(0, 0.0)
        eager.insert(0, rep.eager_s)
    scale, unit = _unit(max(rep.wall_s, rep.eager_s or 0.0))
    fig = _figure(1.2 + 0.45 * len(labels))
    ax = fig.add_subplot()
    _stacked(
        ax,
        labels,
        [
            ("eager run", COLORS["eager"], [v * scale for v in eager]),
            ("compile", COLORS["compile"], [v * scale for v in comp]),
            ("guard evaluation", COLORS["guard"], [v * scale for v in guard]),
            ("execution", COLORS["run"], [v * scale for v in exe]),
        ],
    )
    from .render import fmt_s

    run_i = len(labels) - 1
    summary = (
        f"compile {fmt_s(comp[run_i])} · guard evaluation {fmt_s(guard[run_i])} · "
        f"execution {fmt_s(exe[run_i])}"
    )
    if rep.eager_s is not None:
        summary = f"eager {fmt_s(rep.eager_s)} | " + summary
    ax.set_xlabel(f"wall time of the cell ({unit})")
    ax.set_title(f"cell {rep.index}: {summary}", fontsize=9, loc="left")
    _legend(ax)
    return fig


def compare_figure(result: Any) -> Any:
    """--compare: first run and steady state for eager and the stance."""
    eager, comp = result.eager_runs, result.compiled_runs
    first_c = comp[0] if comp else 0.0
    rep = result.report
    compile_first = min(rep.compile_s, first_c)
    labels = ["force_eager", rep.stance_label]
    scale, unit = _unit(max([*eager, *comp, 1e-9]))
    fig = _figure(2.9)
    axes = fig.subplots(1, 2)
    ax = axes[0]
    _stacked(
        ax,
        labels,
        [
            ("eager run", COLORS["eager"], [eager[0] * scale, 0.0]),
            ("compile", COLORS["compile"], [0.0, compile_first * scale]),
            ("execution + guards", COLORS["run"], [0.0, (first_c - compile_first) * scale]),
        ],
    )
    ax.set_xlabel(f"first run ({unit})")
    ax.set_title("first run (compile included)", fontsize=10, loc="left")
    _legend(ax)
    ax = axes[1]
    se, sc = result.eager_steady, result.compiled_steady
    sscale, sunit = _unit(max(se.median, sc.median, 1e-9))
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
    ax.set_xlabel(f"median of {n} runs ({sunit})")
    ax.set_title("steady state (min–max bars)", fontsize=10, loc="left")
    return fig


def sweep_figure(result: Any) -> Any:
    """--sweep: one bar per stance, compile / guards / execution stacked."""
    reps = result.reports
    labels = [r.stance_label + (" (error)" if r.error else "") for r in reps]
    walls = [r.wall_s for r in reps]
    scale, unit = _unit(max([*walls, 1e-9]))
    comp = [r.compile_s * scale for r in reps]
    guard = [(r.guard_s or 0.0) * scale for r in reps]
    exe = [max(r.wall_s - r.compile_s - (r.guard_s or 0.0), 0.0) * scale for r in reps]
    memory = bool(getattr(result, "memory", False))
    fig = _figure(1.0 + 0.42 * len(reps))
    if memory:
        ax, mx = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    else:
        ax = fig.add_subplot()
    _stacked(
        ax,
        labels,
        [
            ("compile", COLORS["compile"], comp),
            ("guard evaluation", COLORS["guard"], guard),
            ("execution", COLORS["run"], exe),
        ],
    )
    from .render import fmt_bytes, fmt_s

    if memory:
        peaks = [(r.peak_bytes or 0) / 1e6 for r in reps]
        mx.barh(range(len(reps)), peaks, color=COLORS["memory"], height=0.6)
        for i, r in enumerate(reps):
            _annotate(mx, i, peaks[i], fmt_bytes(r.peak_bytes))
        mx.set_xlabel("MB above the start")
        mx.set_title("first-run peak memory", fontsize=10, loc="left")
        mx.set_xlim(0, max(peaks) * 1.6 or 1.0)
        mx.grid(axis="x", alpha=0.3)
        mx.set_axisbelow(True)

    for i, r in enumerate(reps):
        _annotate(
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
        _legend(ax)
    ax.set_xlim(0, max(walls) * scale * 1.8 or 1.0)
    return fig


def history_figure(reports: Sequence[Any]) -> Any:
    """The session across cells: compile time, guard cost, recompiles, cache hits."""
    reps = list(reports)
    fig = _figure(5.4)
    axes = fig.subplots(4, 1, sharex=True)
    if not reps:
        axes[0].text(0.5, 0.5, "no measured cells yet", ha="center", va="center")
        for ax in axes:
            ax.set_axis_off()
        return fig
    x = list(range(len(reps)))
    comp = [r.compile_s for r in reps]
    guard = [r.guard_s or 0.0 for r in reps]
    cscale, cunit = _unit(max([*comp, 1e-9]))
    gscale, gunit = _unit(max([*guard, 1e-9]))
    ax = axes[0]
    ax.bar(x, [v * cscale for v in comp], 0.6, color=COLORS["compile"])
    ax.set_ylabel(f"compile ({cunit})")
    ax.set_title("session history: one bar per measured cell", fontsize=10, loc="left")
    ax = axes[1]
    ax.bar(x, [v * gscale for v in guard], 0.6, color=COLORS["guard"])
    ax.set_ylabel(f"guards ({gunit})")
    from matplotlib.ticker import MaxNLocator

    for ax, values, color, label in (
        (axes[2], [len(r.recompiles) for r in reps], "#e7298a", "recompiles"),
        (axes[3], [r.cache_hits for r in reps], COLORS["run"], "cache hits"),
    ):
        ax.bar(x, values, 0.6, color=color)
        ax.set_ylabel(label)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    for a in axes:
        a.grid(axis="y", alpha=0.3)
        a.set_axisbelow(True)
        if not any(p.get_height() for p in a.patches):
            a.set_ylim(0, 1)
            a.set_yticks([])
            a.text(
                0.5,
                0.5,
                "none in these cells",
                transform=a.transAxes,
                ha="center",
                va="center",
                fontsize=8,
                color="#666666",
            )
        else:
            a.set_ylim(bottom=0)
    ax = axes[3]
    ax.set_xticks(
        x, [f"{r.index}: {r.stance_label}" for r in reps], fontsize=7, rotation=30, ha="right"
    )
    ax.set_xlabel("measured cell: stance")
    return fig
