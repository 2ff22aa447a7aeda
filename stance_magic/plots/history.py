"""The session's chart (``%stance history --plot``, the panel): a stacked bar
per cell that compiled, failed or changed stance, the runs of cells under one
stance on top, drawn at the pixel size it is shown at."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..render.labels import CACHE_LOOKUPS as LOOKUPS
from ..render.labels import EXECUTION, PEAK_MEMORY
from ..stance import stance_text
from ..text import cell_label, fmt_bytes, fmt_s
from ..text import plural as _n
from .figure import COLORS, DPI, figure_png, fit_text, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
