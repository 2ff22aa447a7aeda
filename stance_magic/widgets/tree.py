"""The stance panel's widget tree and its look.

:func:`build_tree` makes the panel's widgets (the controls, the message
line, the two notes, the live area) with the CSS classes that name them for
styling and for the tests (``sm-stance``, ``sm-live``, ...) and hands them
back as :class:`PanelParts`, which the panel and its parts hold; and
:data:`CSS` is the one ``<style>`` block of JupyterLab theme variables the
panel's look comes from. What the controls do is
:mod:`stance_magic.widgets.controls`; what the live area shows is
:mod:`stance_magic.widgets.live`; :class:`~stance_magic.widgets.panel.StancePanel`
puts them together.

ipywidgets is imported when a panel is built, never when this module is.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from ..stance import supported_stances

__all__ = [
    "BACKEND_OFF_NOTE",
    "BUSY_NOTE",
    "COMMON_BACKENDS",
    "CSS",
    "NO_BACKEND",
    "NO_REPORT",
    "RESTART_NOTE",
    "PanelParts",
    "build_tree",
]

#: The backend chooser's entry for "no forced backend".
NO_BACKEND = "none"

#: Backends listed first in the chooser, when they can run here; the rest
#: follow in alphabetical order.
COMMON_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")

BACKEND_OFF_NOTE = (
    "backend: torch forces a backend only under the default stance; choose default to pick one"
)
BUSY_NOTE = "A cell is running: a change made here applies from the next cell."
RESTART_NOTE = (
    "This panel lost its kernel (restarted or stopped) and no longer does anything: "
    "run %load_ext stance_magic and %stance panel again."
)
NO_REPORT = "No measured cell yet: run a %%stance cell, or turn on watch all cells"

#: Theme-aware styling (JupyterLab's CSS variables, with fallbacks for
#: front ends without them), and the two notes that need no kernel.
CSS = """<style>
.sm-panel.sm-panel{border:1px solid var(--jp-border-color2,#ccc);border-radius:3px;
 padding:4px 10px 6px;box-sizing:border-box;color:var(--jp-ui-font-color1,inherit);
 background:var(--jp-layout-color0,transparent)}
.sm-panel .widget-html,.sm-panel .widget-html-content{line-height:1.4;height:auto;
 min-height:0;font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,inherit)}
.sm-panel .sm-quiet{margin-top:0;margin-bottom:0}
.sm-panel .sm-head{font-weight:600;font-size:var(--jp-ui-font-size2,14px)}
.sm-panel .sm-hint{color:var(--jp-ui-font-color2,#555);font-size:12px}
.sm-panel .sm-msg{font-size:12px}
.sm-panel .sm-msg-error{color:var(--jp-error-color1,#b00020);font-size:12px}
.sm-panel .sm-warn{border-left:3px solid var(--jp-warn-color1,#e69500);padding:2px 6px;
 font-size:12px;background:rgba(230,149,0,.12);
 background:color-mix(in srgb,var(--jp-warn-color1,#e69500) 14%,transparent)}
.sm-panel .sm-busy,.sm-panel .sm-restart{display:none;font-size:12px;padding:2px 6px;
 border-left:3px solid var(--jp-brand-color1,#1976d2);margin:2px 0}
.sm-panel .sm-restart{border-left-color:var(--jp-error-color1,#b00020)}
.jp-NotebookPanel:has(.jp-Notebook-ExecutionIndicator[data-status="busy"])
 .sm-panel:focus-within .sm-busy{display:block}
.sm-panel.jupyter-widgets-disconnected .sm-restart{display:block}
.sm-panel.jupyter-widgets-disconnected>:not(.sm-notes){opacity:.45}
.sm-panel.jupyter-widgets-disconnected .jupyter-widgets-disconnected::before{content:none}
.sm-panel .sm-controls .widget-dropdown>select{min-width:0}
.sm-panel .sm-live .jupyter-widget-Collapse-header{white-space:nowrap;overflow:hidden;
 text-overflow:ellipsis;font-size:12px;padding:4px 8px}
.sm-panel .sm-live .jupyter-widget-Collapse-open>.jupyter-widget-Collapse-header{
 white-space:normal}
.sm-panel .sm-live .jupyter-widget-Collapse-contents{padding:4px 8px}
body[data-jp-theme-light="false"] .sm-chart,body.vscode-dark .sm-chart{
 filter:invert(1) hue-rotate(180deg)}
</style>"""


@dataclass(eq=False)
class PanelParts:
    """The panel's widgets, made by :func:`build_tree`: what the controls
    (:class:`~stance_magic.widgets.controls.Controls`) and the live area
    (:class:`~stance_magic.widgets.live.LiveArea`) read and set."""

    title: Any
    stance: Any
    backend: Any
    skip_guard: Any
    backend_note: Any
    skip_warning: Any
    reset: Any
    watch: Any
    trace_next: Any
    message: Any
    notes: Any
    report: Any
    chart: Any
    chart_note: Any
    diff: Any
    live: Any
    #: the boxes that group them (the controls' row, the actions' row, the live body)
    groups: tuple[Any, ...]

    @property
    def children(self) -> list[Any]:
        """The panel's children, top to bottom."""
        controls, actions, _ = self.groups
        return [
            self.title,
            controls,
            self.backend_note,
            self.skip_warning,
            actions,
            self.message,
            self.notes,
            self.live,
        ]


def build_tree(shell: Any = None) -> PanelParts:
    """Make the panel's widgets (``shell``: the one the diff view formats
    reports with)."""
    import ipywidgets as W

    from ..plots import HISTORY_WIDTH_PX
    from .diff import DiffView

    row = {"description_width": "56px"}
    stance = W.Dropdown(
        options=list(supported_stances()),
        description="stance",
        tooltip="the session stance: what cells run under without %%stance",
        style=row,
        layout=W.Layout(width="270px"),
    )
    backend = W.Dropdown(
        options=[(NO_BACKEND, NO_BACKEND)],
        value=NO_BACKEND,
        description="backend",
        tooltip="force a torch.compile backend (only with the default stance)",
        style=row,
        layout=W.Layout(width="270px"),
    )
    skip_guard = W.Checkbox(
        description="skip_guard_eval_unsafe",
        indent=False,
        tooltip="run only the guards that tell cache entries apart (unsafe)",
        layout=W.Layout(width="auto", margin="2px 0 2px 8px"),
    )
    reset = W.Button(
        description="reset compiled code",
        icon="refresh",
        tooltip="torch.compiler.reset(): forget all compiled code; history is kept",
        layout=W.Layout(width="auto"),
    )
    watch = W.ToggleButton(
        description="watch all cells",
        icon="eye",
        tooltip="report every cell, not only %%stance cells (%stance watch on|off)",
        layout=W.Layout(width="auto"),
    )
    # issue 21: "trace next cell" (stance_magic.share)
    trace_next = W.ToggleButton(
        description="trace next cell",
        icon="file-text",
        tooltip="write torch's structured trace of the next cell (TORCH_TRACE's format) "
        "and its tlparse report to ./stance_traces (%%stance --trace DIR)",
        layout=W.Layout(width="auto"),
    )
    report = W.HTML(layout=W.Layout(max_height="320px", overflow="auto"))
    chart = W.Image(
        format="png",
        layout=W.Layout(
            display="none",
            width=f"{HISTORY_WIDTH_PX}px",
            max_width="100%",
            height="auto",
            min_height="0",
        ),
    )
    chart.add_class("sm-chart")
    chart_note = W.HTML()
    # two cells of the history and their diff (filled while the area is open)
    diff = DiffView(shell)
    body = W.VBox([report, chart, chart_note, diff.box])
    live = W.Accordion(children=[body], selected_index=None)
    live.set_title(0, NO_REPORT)
    controls = W.HBox(
        [stance, backend, skip_guard],
        layout=W.Layout(flex_flow="row wrap", align_items="center"),
    )
    actions = W.HBox([reset, watch, trace_next], layout=W.Layout(flex_flow="row wrap"))
    parts = PanelParts(
        title=W.HTML(f'{CSS}<span class="sm-head">torch.compile stance</span>'),
        stance=stance,
        backend=backend,
        skip_guard=skip_guard,
        backend_note=W.HTML(
            f'<span class="sm-hint">{html.escape(BACKEND_OFF_NOTE)}</span>',
            layout=W.Layout(display="none"),
        ),
        skip_warning=W.HTML(layout=W.Layout(display="none")),
        reset=reset,
        watch=watch,
        trace_next=trace_next,
        message=W.HTML(),
        notes=W.HTML(
            f'<div class="sm-busy">{html.escape(BUSY_NOTE)}</div>'
            f'<div class="sm-restart">{html.escape(RESTART_NOTE)}</div>'
        ),
        report=report,
        chart=chart,
        chart_note=chart_note,
        diff=diff,
        live=live,
        groups=(controls, actions, body),
    )
    # CSS classes name the parts for styling and for the browser test.
    for w, cls in (
        (parts.stance, "sm-stance"),
        (parts.backend, "sm-backend"),
        (parts.skip_guard, "sm-skip-guard"),
        (parts.backend_note, "sm-backend-note"),
        (parts.skip_warning, "sm-skip-warning"),
        (parts.reset, "sm-reset"),
        (parts.watch, "sm-watch"),
        (parts.trace_next, "sm-trace-next"),
        (parts.message, "sm-message"),
        (parts.notes, "sm-notes"),
        (parts.live, "sm-live"),
        (parts.report, "sm-report-box"),
        (controls, "sm-controls"),
    ):
        w.add_class(cls)
    for w in (parts.backend_note, parts.skip_warning, parts.message, parts.notes):
        w.add_class("sm-quiet")
    return parts
