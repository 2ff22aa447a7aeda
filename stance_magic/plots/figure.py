"""What every chart shares: its size, colours and units, a Figure on the Agg
canvas (no pyplot state), its PNG, and the bars, keys and notes the charts
draw with."""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any, Sequence

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


def char_px(size_pt: float) -> float:
    """The average width of a character of DejaVu Sans (about 0.6 em), in pixels."""
    return size_pt * DPI / 72 * 0.6


def fit_text(text: str, px: float, size_pt: float) -> str:
    """``text`` shortened with … to about ``px`` pixels at ``size_pt``."""
    room = int(px / char_px(size_pt))
    if len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…" if room > 1 else ""
