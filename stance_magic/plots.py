"""Charts for reports, comparisons, sweeps and the history.

Object-oriented matplotlib only (:class:`matplotlib.figure.Figure` on the Agg
canvas): no global pyplot state, nothing shown twice, every figure closed
after it is rendered. matplotlib is imported when a chart is first drawn.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any, Sequence

from .render.labels import CACHE_LOOKUPS as LOOKUPS
from .render.labels import EXECUTION, PEAK_MEMORY
from .stance import stance_text
from .text import cell_label, fmt_bytes, fmt_s
from .text import plural as _n

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


def new_figure(height: float = 2.8) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    return fig


def time_unit(max_s: float) -> tuple[float, str]:
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


def stacked_bars(
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


def legend_outside(ax: Any) -> None:
    """Legend outside the axes, right of them, so it never hides a bar."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def annotate(ax: Any, y: int, x: float, text: str) -> None:
    ax.text(x, y, "  " + text, va="center", fontsize=7.5, color="#333333")


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


#: The history chart is drawn at the pixel size it is shown at (the panel
#: shows it unscaled), so its 8-9 pt text stays legible.
HISTORY_WIDTH_PX = 720
HISTORY_HEIGHT_PX = 280
#: Horizontal room per cell: a tick label ``In [123]`` at 8 pt and the
#: figures above its bar fit without overlapping their neighbours.
SLOT_PX = 48
_LEFT_PX, _RIGHT_PX = 58, 14

#: Text on a transparent chart: dark enough on white, and the panel's CSS
#: inverts the image in a dark theme.
INK = "#222222"
INK_SOFT = "#555555"
FAIL = "#c62828"
RECOMPILE = "#c2185b"
STANCE_TINTS = ("#dde7f3", "#f3e3d3", "#dcefe4", "#ece0f2", "#f2eccd", "#e3e3e3")


def history_capacity(width_px: int = HISTORY_WIDTH_PX) -> int:
    """How many cells fit side by side in a history chart ``width_px`` wide."""
    return max(1, (width_px - _LEFT_PX - _RIGHT_PX) // SLOT_PX)


def history_cells(reports: Sequence[Any], limit: int | None = None) -> tuple[list[Any], int]:
    """The cells the history chart shows: the last ``limit`` that changed
    something (see :meth:`CellReport.worth_showing`), oldest first, and how many
    such cells there are in all. Scans from the newest back."""
    limit = history_capacity() if limit is None else limit
    shown: list[Any] = []
    total = 0
    n = len(reports)
    for i in range(n - 1, -1, -1):
        rep = reports[i]
        if rep.worth_showing(reports[i - 1] if i else None):
            total += 1
            if len(shown) < limit:
                shown.append(rep)
    shown.reverse()
    return shown, total


#: The stance key under the chart: its text size, one line's height and the
#: room between two names (pixels).
KEY_PT = 7.5
KEY_LINE_PX = 17
_KEY_GAP_PX = 10


def _key_lines(widths: Sequence[float], first_room: float, room: float) -> list[list[int]]:
    """The stance key's names laid out in lines, in their order: the first line
    has ``first_room`` pixels (beside the caption), the others ``room``; a
    name that fits no line (wider than ``room``) gets a line of its own."""
    lines: list[list[int]] = [[]]
    used, limit = 0.0, first_room
    for i, w in enumerate(widths):
        x = used + _KEY_GAP_PX if lines[-1] else 0.0
        # no room left: a new line (the caption's may stay without a name)
        if x + w > limit and (lines[-1] or len(lines) == 1):
            lines.append([])
            x, limit = 0.0, room
        lines[-1].append(i)
        used = x + w
    return lines


def _char_px(size_pt: float) -> float:
    """The average width of a character of DejaVu Sans (about 0.6 em), in pixels."""
    return size_pt * DPI / 72 * 0.6


def fit_text(text: str, px: float, size_pt: float) -> str:
    """``text`` shortened with … to about ``px`` pixels at ``size_pt``."""
    room = int(px / _char_px(size_pt))
    if len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…" if room > 1 else ""


def history_figure(
    reports: Sequence[Any],
    *,
    width_px: int = HISTORY_WIDTH_PX,
    height_px: int = HISTORY_HEIGHT_PX,
    transparent: bool = False,
) -> Figure:
    """The session across cells: one stacked bar per cell that changed
    something (compile, cache lookups, the rest of the wall time), with its
    wall time, recompiles, graph breaks and failures written above it, the
    stance of each run of cells in a band on top and IPython's ``In [M]``
    under it. Only the last cells that fit ``width_px`` are drawn (see
    :func:`history_cells`), at exactly ``width_px`` × ``height_px`` pixels,
    and :data:`KEY_LINE_PX` more for each further line the stance key needs:
    the key, under the chart, names in full each stance whose name does not
    fit its span of the band.

    ``transparent`` leaves the background clear, for a front end that themes
    it (the panel inverts the image in a dark theme).
    """
    from matplotlib.figure import Figure

    reps = list(reports)
    shown, total = history_cells(reps, history_capacity(width_px))
    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    if transparent:
        fig.patch.set_alpha(0.0)
    # Fixed slots, filled from the left: a bar is as wide with 2 cells as with 13.
    slots = max(len(shown), history_capacity(width_px))
    plot_w = width_px - _LEFT_PX - _RIGHT_PX
    memory = any(r.memory for r in shown)
    spans = _stance_spans(shown)
    # the key is laid out before anything is drawn: the figure grows a line
    # at a time for it, the chart itself keeps its size
    key = _HistoryKey(fig, width_px, spans, plot_w / slots, memory)
    W, H = float(width_px), float(height_px) + key.extra_px
    if key.extra_px:
        fig.set_size_inches(W / DPI, H / DPI)

    def rect(left: float, bottom: float, width: float, height: float) -> list[float]:
        return [left / W, bottom / H, width / W, height / H]

    top_px, band_px, bottom_px = 26, 18, 42 + key.extra_px
    plot_h = H - top_px - band_px - 4 - bottom_px
    ax = fig.add_axes(rect(_LEFT_PX, bottom_px, plot_w, plot_h))
    band = fig.add_axes(rect(_LEFT_PX, bottom_px + plot_h + 4, plot_w, band_px))
    for a in (ax, band):
        a.set_facecolor("none")
    band.set_axis_off()

    if total == len(shown):
        title = f"{_n(total, 'cell')} that compiled, failed or changed stance"
    else:
        title = f"last {len(shown)} of {total} cells that compiled, failed or changed stance"
    fig.text(6 / W, 1 - 8 / H, title, fontsize=9, color=INK, ha="left", va="top")
    if not shown:
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "no measured cell has compiled anything yet",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            color=INK_SOFT,
        )
        return fig
    _history_bars(ax, shown, slots, plot_h, memory)
    tints = _stance_band(band, spans, slots, plot_w / slots)
    key.draw(fig, tints, W, H)
    return fig


def _stance_spans(shown: Sequence[Any]) -> list[tuple[int, int, str]]:
    """The stance band's spans: (first, past the last, the stance as typed)
    for each run of cells under one stance."""
    spans: list[tuple[int, int, str]] = []
    start = 0
    n = len(shown)
    for i in range(1, n + 1):
        if i < n and shown[i].same_stance(shown[start]):
            continue
        r = shown[start]
        spans.append((start, i, stance_text(r.stance, r.skip_guard_eval_unsafe, r.backend)))
        start = i
    return spans


class _HistoryKey:
    """The history chart's key under the chart: the caption of its marks at
    the right of the first line, and in full every stance whose name does
    not fit its span of the band, in lines from the left (measured with the
    figure's own renderer)."""

    def __init__(
        self,
        fig: Figure,
        width_px: float,
        spans: Sequence[tuple[int, int, str]],
        slot: float,
        memory: bool,
    ) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.font_manager import FontProperties

        self.unnamed: list[str] = []
        for a, b, label in spans:
            if fit_text(label, (b - a) * slot - 6, KEY_PT) != label and label not in self.unnamed:
                self.unnamed.append(label)
        self.caption = "↻ recompiles · ⎇ graph breaks · ✗ failed (hatched)"
        if memory:
            self.caption += f" · ◆ {PEAK_MEMORY} (-m)"
        self._renderer = FigureCanvasAgg(fig).get_renderer()
        self._font = FontProperties(size=KEY_PT)
        self.x0 = 8.0
        self.room = width_px - _RIGHT_PX - self.x0
        self.lines = _key_lines(
            [self.text_px(label) for label in self.unnamed],
            self.room - self.text_px(self.caption) - 12,
            self.room,
        )
        #: pixels the figure grows by for the key's lines past the first
        self.extra_px = KEY_LINE_PX * (len(self.lines) - 1)

    def text_px(self, text: str) -> float:
        width = self._renderer.get_text_width_height_descent(text, self._font, ismath=False)[0]
        return float(width)

    def draw(self, fig: Figure, tints: dict[str, str], W: float, H: float) -> None:
        """The legend of the bars at the top right, then the caption and the
        stances' names (on their tints) under the chart."""
        from matplotlib.patches import Patch

        handles = [
            Patch(color=COLORS["compile"], label="compile"),
            Patch(color=COLORS["guard"], label=LOOKUPS),
            Patch(color=COLORS["run"], label=EXECUTION),
        ]
        fig.legend(
            handles=handles,
            loc="upper right",
            bbox_to_anchor=(1 - 4 / W, 1 - 2 / H),
            ncols=3,
            fontsize=8,
            frameon=False,
            handlelength=1.0,
            handleheight=0.8,
            columnspacing=1.0,
            handletextpad=0.4,
            labelcolor=INK,
        )
        first_y = 5.0 + self.extra_px
        fig.text(
            1 - _RIGHT_PX / W,
            first_y / H,
            self.caption,
            fontsize=KEY_PT,
            color=INK_SOFT,
            ha="right",
            va="bottom",
        )
        for k, line in enumerate(self.lines):
            x_px = self.x0
            for i in line:
                label = self.unnamed[i]
                shown_label = (
                    label
                    if self.text_px(label) <= self.room
                    else fit_text(label, self.room, KEY_PT)
                )
                fig.text(
                    x_px / W,
                    (first_y - KEY_LINE_PX * k) / H,
                    shown_label,
                    fontsize=KEY_PT,
                    color=INK,
                    ha="left",
                    va="bottom",
                    bbox={"facecolor": tints[label], "edgecolor": "none", "pad": 1.5},
                )
                x_px += self.text_px(label) + _KEY_GAP_PX


def _history_bars(ax: Any, shown: Sequence[Any], slots: int, plot_h: float, memory: bool) -> None:
    """One stacked bar per cell (compile, cache lookups, execution: the rest of
    its wall time), a failed cell's hatched, its figures written above it, and the
    axes: ``In [M]`` under each bar, the wall time's unit at the left."""
    n = len(shown)
    x = list(range(n))
    walls = [r.wall_s for r in shown]
    scale, unit = time_unit(max([*walls, 1e-9]))
    comp = [r.compile_s * scale for r in shown]
    guard = [(r.lookups.seconds or 0.0) * scale for r in shown]
    rest = [max(r.wall_s * scale - c - g, 0.0) for r, c, g in zip(shown, comp, guard)]
    bottom = [0.0] * n
    width = 0.62
    for values, color in (
        (comp, COLORS["compile"]),
        (guard, COLORS["guard"]),
        (rest, COLORS["run"]),
    ):
        ax.bar(x, values, width, bottom=bottom, color=color, linewidth=0)
        bottom = [b + v for b, v in zip(bottom, values)]
    failed = [i for i, r in enumerate(shown) if r.error]
    if failed:
        ax.bar(
            failed,
            [max(bottom[i], 1e-12) for i in failed],
            width,
            fill=False,
            edgecolor=FAIL,
            hatch="////",
            linewidth=1.2,
        )
    # Headroom for up to three lines of figures above the tallest bar (four
    # when cells measured memory: their peak is one more line).
    top = max(bottom) or 1.0
    reserve = min((49.0 if memory else 40.0) / plot_h, 0.5)
    if any(r.compile_caches.state for r in shown):
        reserve = min(reserve + 9.0 / plot_h, 0.55)  # one more line: the compile caches
    ax.set_ylim(0, top / (1 - reserve))
    for i, r in enumerate(shown):
        for k, (text, color) in enumerate(_bar_lines(r)):
            ax.annotate(
                text,
                (i, bottom[i]),
                xytext=(0, 2 + 9 * k),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                color=color,
                annotation_clip=False,
            )
    ax.set_xlim(-0.5, slots - 0.5)
    ax.set_xticks(x, [cell_label(r) for r in shown], fontsize=8, color=INK)
    ax.tick_params(axis="x", length=0, pad=3)
    ax.tick_params(axis="y", labelsize=8, colors=INK, length=3)
    ax.set_ylabel(f"wall time ({unit})", fontsize=8, color=INK)
    ax.grid(axis="y", alpha=0.35, color=INK_SOFT, linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color(INK_SOFT)


def _bar_lines(r: Any) -> list[tuple[str, str]]:
    """The figures written above a cell's bar, bottom up, each in its colour:
    the wall time, recompiles, graph breaks, a failure, the peak memory, the
    compile caches' state."""
    lines = [(fmt_s(r.wall_s), INK)]
    if r.recompiles:
        lines.append((f"↻{len(r.recompiles)}", RECOMPILE))
    breaks = r.graph_break_count
    if breaks:
        lines.append((f"⎇{breaks}", INK_SOFT))
    if r.error:
        lines.append(("✗ failed", FAIL))
    if r.peak_bytes is not None:
        lines.append((f"◆{fmt_bytes(r.peak_bytes)}", COLORS["memory"]))
    if r.compile_caches.state:
        # warm / cold / partly warm / caches off: where the compile came from
        lines.append((r.compile_caches.state.replace("partly warm", "part warm"), INK_SOFT))
    return lines


def _stance_band(
    band: Any, spans: Sequence[tuple[int, int, str]], slots: int, slot: float
) -> dict[str, str]:
    """The stance band: one span per run of cells under the same stance,
    named where the name fits (shortened with … where six characters or
    more fit; the key names in full those that do not). Returns each
    stance's tint."""
    band.set_xlim(-0.5, slots - 0.5)
    band.set_ylim(0, 1)
    tints: dict[str, str] = {}
    for a, b, label in spans:
        tint = tints.setdefault(label, STANCE_TINTS[len(tints) % len(STANCE_TINTS)])
        band.axvspan(a - 0.5 + 0.03, b - 0.5 - 0.03, color=tint, linewidth=0)
        fitted = fit_text(label, (b - a) * slot - 6, KEY_PT)
        if fitted == label or len(fitted) >= 6:
            band.text(
                (a + b - 1) / 2, 0.5, fitted, ha="center", va="center", fontsize=KEY_PT, color=INK
            )
    return tints


_PNG_CACHE: dict[str, Any] = {}


def history_png(reports: Sequence[Any], cache_key: Any = None) -> bytes | None:
    """The history chart as a transparent PNG (None when no cell would be in
    it), drawn once for the same cells however many callers (open panels)
    ask; ``cache_key`` tells apart histories of different owners."""
    shown, total = history_cells(reports, history_capacity())
    if not shown:
        return None
    key = (cache_key, total, tuple(id(r) for r in shown), len(reports))
    if _PNG_CACHE.get("key") != key:
        _PNG_CACHE.clear()
        png = figure_png(history_figure(reports, transparent=True))
        _PNG_CACHE.update(key=key, png=png)
    return _PNG_CACHE["png"]


#: Ranks drawn as bars in a chart across ranks; more are drawn as points.
MAX_RANK_BARS = 32


def ranks_figure(view: Any, max_bars: int = MAX_RANK_BARS) -> Figure:
    """Across ranks (a :class:`~stance_magic.ranks.RankReport`): one bar per rank
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
