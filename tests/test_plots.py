"""The history chart names every stance in full (its key), inside the figure.

Six stances in six cells leave each span of the stance band one slot, too
narrow for most names: the band shortens them (``fail_o…``) and the key under
the chart names each in full, on as many lines as it needs (the figure grows
by a line, never wider: it fits a notebook 1000 px wide), overlapping neither
the caption nor each other.
"""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from stance_magic import plots
from stance_magic.report import CellReport

SIX = (
    "default",
    "force_eager",
    "eager_on_recompile",
    "fail_on_recompile",
    "eager_then_compile",
    "aot_eager_then_compile",
)


def _cells(stances: list[str]) -> list[CellReport]:
    return [
        CellReport(
            stance=s,
            index=i + 1,
            execution_count=i + 1,
            compiles=1,
            compile_s=0.2,
            wall_s=0.25 + 0.01 * i,
        )
        for i, s in enumerate(stances)
    ]


def _boxes(fig):  # type: ignore[no-untyped-def]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.texts]


@pytest.mark.parametrize("cells", [list(SIX), [s for s in SIX for _ in (0, 1)], list(SIX) * 2])
def test_history_key_names_every_stance_whole_inside_the_figure(cells):
    fig = plots.history_figure(_cells(cells))
    w, h = fig.get_size_inches() * fig.dpi
    assert round(w) == plots.HISTORY_WIDTH_PX
    lines = (round(h) - plots.HISTORY_HEIGHT_PX) / plots.history.KEY_LINE_PX
    assert lines == int(lines) and 0 <= lines <= 3, h
    band = [t.get_text() for t in fig.axes[1].texts]
    boxes = _boxes(fig)
    texts = [t for t, _ in boxes]
    for stance in SIX:
        assert stance in band or stance in texts, (stance, band, texts)
    assert not [t for t in texts if t.endswith("…")]  # the key shortens nothing
    key = [(t, b) for t, b in boxes if t in SIX or "recompiles" in t]
    for t, b in key:
        assert b.x0 >= 0 and b.x1 <= w and b.y0 >= 0, (t, b)
    for i, (t, b) in enumerate(key):
        for u, c in key[i + 1 :]:
            assert not b.overlaps(c), (t, u)


def test_history_key_fits_beside_the_caption_without_growing():
    fig = plots.history_figure(_cells(["default", "force_eager", "eager_then_compile"] * 2))
    w, h = fig.get_size_inches() * fig.dpi
    assert (round(w), round(h)) == (plots.HISTORY_WIDTH_PX, plots.HISTORY_HEIGHT_PX)
    assert "eager_then_compile" in [t for t, _ in _boxes(fig)]


def test_key_lines_wrap_in_order():
    assert plots.history._key_lines([50, 50, 50], 200, 400) == [[0, 1, 2]]
    assert plots.history._key_lines([300, 50], 200, 400) == [[], [0, 1]]  # none beside the caption
    assert plots.history._key_lines([100] * 6, 250, 700) == [[0, 1], [2, 3, 4, 5]]
    assert plots.history._key_lines([50, 800, 50], 200, 700) == [
        [0],
        [1],
        [2],
    ]  # too wide: its own line
