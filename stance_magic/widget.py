"""The widget panel: ``%stance panel`` and ``stance_magic.panel()``.

:class:`StancePanel` is a composite :class:`ipywidgets.VBox` and a thin view
of the one :class:`~stance_magic.engine.Engine`: its controls call the
engine's methods, and it follows the engine's events, so the magics, the
Python API and any number of open panels always agree. It keeps no copy of
the state; what the controls show is what the engine says.

It costs a cell nothing unless that cell used compiled code: a watched cell
that did not is not shown at all, the summary line is the only thing a
collapsed panel updates, and the history chart is drawn only while the live
area is open, only when a cell changed something, after the cell's reply
where a kernel's event loop allows, and once however many panels are open.

Its look comes from one ``<style>`` block of JupyterLab theme variables, so
it follows light and dark themes; the same block shows two notes without
any JavaScript: while a cell runs and the panel has focus (a change made now
is read by the kernel when the cell ends), and when the kernel is gone (the
widget manager marks the view ``jupyter-widgets-disconnected``).

ipywidgets is imported here, when the panel is first asked for, never by
``import stance_magic``; without it :func:`panel` raises
:class:`PanelUnavailable` with a message that says how to get it.
"""

from __future__ import annotations

import contextlib
import html
import importlib
from typing import TYPE_CHECKING, Any, Iterator

from .engine import SKIP_GUARD_WARNING, Engine, get_engine, reset_note
from .notebook import sent_before
from .probe import CompiledRegionError, TorchSupportError
from .render import summary_line
from .stance import Stance, StanceError, make_stance, supported_stances

if TYPE_CHECKING:
    from .report import CellReport

try:
    import ipywidgets as widgets
except ImportError:  # panel() says what is missing (tests: test_without_ipywidgets)
    widgets = None

__all__ = ["NO_BACKEND", "PanelUnavailable", "StancePanel", "panel"]

#: The backend chooser's entry for "no forced backend".
NO_BACKEND = "none"

#: Backends listed first in the chooser, when they can run here; the rest
#: follow in alphabetical order.
COMMON_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")

INSTALL_HINT = (
    "the stance panel needs ipywidgets, which is not installed here: "
    "run `pip install ipywidgets` (or `pip install 'stance_magic[panel]'`) "
    "and restart the kernel; the %stance magics work without it"
)

FRONTEND_HINT = (
    "the stance panel is a Jupyter widget and this IPython has no Jupyter kernel "
    "(a terminal IPython cannot show widgets): run it in JupyterLab or Jupyter "
    "Notebook; here the %stance magics work (%stance NAME, %%stance, "
    "%stance watch on, %stance history)"
)

BACKEND_OFF_NOTE = (
    "backend: torch forces a backend only under the default stance; choose default to pick one"
)
BUSY_NOTE = "A cell is running: a change made here applies from the next cell."
RESTART_NOTE = (
    "This panel lost its kernel (restarted or stopped) and no longer does anything: "
    "run %load_ext stance_magic and %stance panel again."
)
NO_REPORT = "No measured cell yet: run a %%stance cell, or turn on watch all cells"

#: How far the browser's clock may be behind the kernel's before a change
#: made just after a cell ended reads as made while it ran.
CLOCK_SLACK_S = 0.25

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
.sm-panel .sm-live .jupyter-widget-Collapse-contents{padding:4px 8px}
body[data-jp-theme-light="false"] .sm-chart,body.vscode-dark .sm-chart{
 filter:invert(1) hue-rotate(180deg)}
</style>"""


class PanelUnavailable(RuntimeError):
    """The panel cannot be shown here; the message says what is missing and
    how to get it. ``%stance panel`` prints it."""


_ERRORS = (StanceError, TorchSupportError, CompiledRegionError)


def _check_available(shell: Any) -> None:
    missing = []
    try:
        importlib.import_module("ipywidgets")
    except ImportError:
        missing.append(INSTALL_HINT)
    else:
        if widgets is None:  # installed after this module was imported
            missing.append(
                "ipywidgets was installed after stance_magic was imported: restart the kernel"
            )
    if shell is not None and getattr(shell, "kernel", None) is None:
        missing.append(FRONTEND_HINT)
    if missing:
        raise PanelUnavailable("; and ".join(missing))


def _backend_key(backend: Any) -> Any:
    return NO_BACKEND if backend is None else backend


def _shown_in_panel(rep: CellReport, previous: CellReport | None) -> bool:
    """Whether the panel's live area describes a watched cell: it is worth
    showing, or it ran compiled code (warm hits included)."""
    return bool(rep.cache_hits or rep.compiled_calls) or rep.worth_showing(previous)


_Base: Any = widgets.VBox if widgets is not None else object


class StancePanel(_Base):
    """An ipywidgets panel that drives and shows the stance engine.

    Controls: the session stance, ``skip_guard_eval_unsafe`` (its warning
    shows while ticked), a forced backend (only with the ``default`` stance;
    only backends that can run here are offered), *reset compiled code* and
    *watch all cells*. Below them, a collapsible live area whose header is a
    one-line summary of the last measured cell that used compiled code;
    opened, it shows that cell's report and a chart of the cells that
    compiled, failed or changed stance.

    Build it with :func:`panel`. The child widgets are private; drive the
    panel through the engine, the magics, or the controls in the notebook.

    Parameters
    ----------
    engine : Engine, optional
        The engine to view; the process's one engine by default.
    shell : InteractiveShell, optional
        The shell whose cells the panel follows (to tell a change made while
        a cell ran); by default IPython's running shell, if any.
    **kwargs
        Passed on to :class:`ipywidgets.VBox` (``layout=...``).
    """

    def __init__(self, engine: Engine | None = None, shell: Any = None, **kwargs: Any) -> None:
        self._engine = engine or get_engine()
        self._syncing = False
        self._cell_stance: Stance | None = None
        self._closed = False
        self._shown: CellReport | None = None  # the report the summary describes
        self._report_stale = False
        self._chart_stale = False
        self._chart_pending = False
        if shell is None:
            from IPython import get_ipython

            shell = get_ipython()
        self._shell = shell
        W = widgets
        session = self._engine.session
        row = {"description_width": "56px"}

        self._title = W.HTML(f'{CSS}<span class="sm-head">torch.compile stance</span>')
        self._stance = W.Dropdown(
            options=list(supported_stances()),
            description="stance",
            tooltip="the session stance: what cells run under without %%stance",
            style=row,
            layout=W.Layout(width="270px"),
        )
        self._backend = W.Dropdown(
            options=[(NO_BACKEND, NO_BACKEND)],
            value=NO_BACKEND,
            description="backend",
            tooltip="force a torch.compile backend (only with the default stance)",
            style=row,
            layout=W.Layout(width="270px"),
        )
        self._skip_guard = W.Checkbox(
            description="skip_guard_eval_unsafe",
            indent=False,
            tooltip="run only the guards that tell cache entries apart (unsafe)",
            layout=W.Layout(width="auto", margin="2px 0 2px 8px"),
        )
        self._backend_note = W.HTML(
            f'<span class="sm-hint">{html.escape(BACKEND_OFF_NOTE)}</span>',
            layout=W.Layout(display="none"),
        )
        self._skip_warning = W.HTML(layout=W.Layout(display="none"))
        self._reset = W.Button(
            description="reset compiled code",
            icon="refresh",
            tooltip="torch.compiler.reset(): forget all compiled code; history is kept",
            layout=W.Layout(width="auto"),
        )
        self._watch = W.ToggleButton(
            description="watch all cells",
            icon="eye",
            tooltip="report every cell, not only %%stance cells (%stance watch on|off)",
            layout=W.Layout(width="auto"),
        )
        # issue 21: "trace next cell" (stance_magic.share)
        self._trace_next = W.ToggleButton(
            description="trace next cell",
            icon="file-text",
            tooltip="write torch's structured trace of the next cell (TORCH_TRACE's format) "
            "and its tlparse report to ./stance_traces (%%stance --trace DIR)",
            layout=W.Layout(width="auto"),
        )
        self._message = W.HTML()
        self._notes = W.HTML(
            f'<div class="sm-busy">{html.escape(BUSY_NOTE)}</div>'
            f'<div class="sm-restart">{html.escape(RESTART_NOTE)}</div>'
        )
        self._report = W.HTML(layout=W.Layout(max_height="320px", overflow="auto"))
        from .plots import HISTORY_HEIGHT_PX, HISTORY_WIDTH_PX

        self._chart = W.Image(
            format="png",
            layout=W.Layout(
                display="none",
                width=f"{HISTORY_WIDTH_PX}px",
                max_width="100%",
                height="auto",
                min_height="0",
            ),
        )
        self._chart.add_class("sm-chart")
        self._chart_height = HISTORY_HEIGHT_PX
        self._chart_note = W.HTML()
        body = W.VBox([self._report, self._chart, self._chart_note])
        self._live = W.Accordion(children=[body], selected_index=None)
        self._live.set_title(0, NO_REPORT)

        controls = W.HBox(
            [self._stance, self._backend, self._skip_guard],
            layout=W.Layout(flex_flow="row wrap", align_items="center"),
        )
        actions = W.HBox(
            [self._reset, self._watch, self._trace_next], layout=W.Layout(flex_flow="row wrap")
        )
        self._parts = (controls, actions, body)
        # CSS classes name the parts for styling and for the browser test.
        for w, cls in (
            (self._stance, "sm-stance"),
            (self._backend, "sm-backend"),
            (self._skip_guard, "sm-skip-guard"),
            (self._backend_note, "sm-backend-note"),
            (self._skip_warning, "sm-skip-warning"),
            (self._reset, "sm-reset"),
            (self._watch, "sm-watch"),
            (self._trace_next, "sm-trace-next"),
            (self._message, "sm-message"),
            (self._notes, "sm-notes"),
            (self._live, "sm-live"),
            (self._report, "sm-report-box"),
            (controls, "sm-controls"),
        ):
            w.add_class(cls)
        for w in (self._backend_note, self._skip_warning, self._message, self._notes):
            w.add_class("sm-quiet")
        kwargs.setdefault("layout", W.Layout(width="100%", max_width="820px"))
        super().__init__(
            children=[
                self._title,
                controls,
                self._backend_note,
                self._skip_warning,
                actions,
                self._message,
                self._notes,
                self._live,
            ],
            **kwargs,
        )
        self.add_class("sm-panel")

        self._sync_controls(session)
        self._sync_watch(self._engine.watch)
        history = self._engine.history
        for i in range(len(history) - 1, -1, -1):
            if _shown_in_panel(history[i], history[i - 1] if i else None):
                self._show(history[i])
                break

        self._stance.observe(self._on_stance, names="value")
        self._backend.observe(self._on_backend, names="value")
        self._skip_guard.observe(self._on_skip_guard, names="value")
        self._watch.observe(self._on_watch, names="value")
        self._trace_next.value = self._engine.trace_next is not None
        self._trace_next.observe(self._on_trace_next, names="value")
        self._live.observe(self._on_open, names="selected_index")
        self._reset.on_click(self._on_reset)
        self._engine.observe(self._on_engine)
        events = getattr(self._shell, "events", None)
        if events is not None:
            events.register("pre_run_cell", self._on_pre_run_cell)
            events.register("post_run_cell", self._on_post_run_cell)

    # -- public --------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The engine this panel views."""
        return self._engine

    @property
    def session(self) -> Stance:
        """The session stance (the engine's; the panel keeps no copy)."""
        return self._engine.session

    @property
    def expanded(self) -> bool:
        """Whether the live area (report and chart) is open."""
        return bool(self._live.selected_index == 0)

    def expand(self, open: bool = True) -> None:
        """Open (or close) the live area, as clicking its header does."""
        self._live.selected_index = 0 if open else None

    def refresh(self) -> None:
        """Show the engine's state again: session stance, watch, last report."""
        self._sync_controls(self._engine.session)
        self._sync_watch(self._engine.watch)
        if self._shown is not None:
            self._show(self._shown, chart=True)

    def close(self) -> None:
        """Stop following the engine and close the panel's widgets."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._engine.unobserve(self._on_engine)
        events = getattr(self._shell, "events", None)
        if events is not None:
            with contextlib.suppress(ValueError):
                events.unregister("pre_run_cell", self._on_pre_run_cell)
            with contextlib.suppress(ValueError):
                events.unregister("post_run_cell", self._on_post_run_cell)
        for part in self._parts:
            for child in part.children:
                child.close()
            part.close()
        for child in self.children:
            child.close()
        super().close()

    def __repr__(self) -> str:
        if getattr(self, "_closed", True):
            return "StancePanel(closed)"
        watch = "on" if self._engine.watch else "off"
        return f"StancePanel(session={self._engine.session}, watch={watch})"

    # -- engine -> panel -------------------------------------------------------
    def _on_engine(self, event: str, value: Any) -> None:
        if event == "report":
            self._on_report(value)
        elif event == "session":
            self._sync_controls(value)
            later = " from the next cell (a cell is running)" if self._engine.deferring else ""
            self._say(f"session stance: {value}{later}")
        elif event == "applied":
            self._sync_controls(value)
            self._say(f"session stance: {value}, chosen while the last cell ran, is in effect now")
        elif event == "cell":
            self._cell_stance = value
            session = self._engine.session
            own = (
                ""
                if value == session
                else f" (its own stance; the session stays {session.nested_text()})"
            )
            self._live.set_title(0, f"a %%stance cell is running under {value}{own}…")
        elif event == "watch":
            self._sync_watch(bool(value))
            self._say(
                "watch on: every cell is measured; the summary below follows each cell "
                "that uses compiled code"
                if value
                else "watch off: only %%stance cells are measured"
            )
        elif event == "reset":
            if value == "pending":
                self._say(
                    "reset asked for while a cell runs: compiled code is forgotten "
                    "(torch.compiler.reset()) when that cell ends"
                )
            else:
                self._say(reset_note(self._engine.session))
        elif event == "note":
            self._say(str(value))
        elif event in ("trace_next", "traced"):
            self._on_trace_next_event(value if event == "trace_next" else None, traced=value)

    # The engine learns when cells run from the extension's hooks; a panel
    # made without %load_ext tells it too, so that a change handled while a
    # cell runs waits for it.
    # The engine's one cell tracker counts a cell once however many front
    # ends follow it.
    def _on_pre_run_cell(self, info: Any = None) -> None:
        self._engine.cells.enter(info)

    def _on_post_run_cell(self, result: Any = None) -> None:
        self._engine.cells.leave(result)

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Set controls from the engine without calling the engine back."""
        before, self._syncing = self._syncing, True
        try:
            yield
        finally:
            self._syncing = before

    def _sync_controls(self, stance: Stance) -> None:
        with self._quiet():
            if stance.name not in self._stance.options:  # a stance added to torch later
                self._stance.options = [*self._stance.options, stance.name]
            self._stance.value = stance.name
            options = self._backend_options(stance.backend)
            if list(self._backend.options) != options:
                self._backend.options = options
            self._backend.value = _backend_key(stance.backend)
            self._skip_guard.value = stance.skip_guard_eval_unsafe
        self._update_enabled()
        self._update_skip_warning()

    def _sync_watch(self, on: bool) -> None:
        with self._quiet():
            self._watch.value = on
        self._watch.button_style = "info" if on else ""

    def _backend_options(self, current: Any = None) -> list[tuple[str, Any]]:
        from . import probe

        try:
            names = probe.usable_backends()
        except _ERRORS:  # pragma: no cover - torch too old: the dropdown says so
            names = []
        first = [n for n in COMMON_BACKENDS if n in names]
        rest = sorted(n for n in names if n not in first)
        options: list[tuple[str, Any]] = [(NO_BACKEND, NO_BACKEND)]
        options += [(n, n) for n in first + rest]
        if current is not None and not isinstance(current, str):
            label = Stance(backend=current).backend_name or "callable"
            options.append((f"{label} (callable)", current))
        elif isinstance(current, str) and current not in names:
            options.append((current, current))
        return options

    def _update_enabled(self) -> None:
        default = self._stance.value == "default"
        self._backend.disabled = not default
        self._backend_note.layout.display = "none" if default else None

    def _update_skip_warning(self) -> None:
        if self._skip_guard.value:
            self._skip_warning.value = (
                f'<div class="sm-warn">⚠ {html.escape(SKIP_GUARD_WARNING)}</div>'
            )
            self._skip_warning.layout.display = None
        else:
            self._skip_warning.value = ""
            self._skip_warning.layout.display = "none"

    # -- panel -> engine -------------------------------------------------------
    def _on_stance(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        note = None
        if change["new"] != "default" and self._backend.value != NO_BACKEND:
            dropped = self._backend.label
            with self._quiet():
                self._backend.value = NO_BACKEND
            note = f"backend {dropped} dropped: torch forces a backend only with the default stance"
        self._update_enabled()
        self._apply_controls(note)

    def _on_backend(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._apply_controls()

    def _on_skip_guard(self, change: dict[str, Any]) -> None:
        self._update_skip_warning()
        if not self._syncing:
            self._apply_controls()

    def _on_watch(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._engine.set_watch(bool(change["new"]))
            self._sync_watch(self._engine.watch)

    def _on_trace_next(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            from .share import PANEL_TRACE_DIR

            self._engine.set_trace_next(PANEL_TRACE_DIR if change["new"] else None)

    def _on_trace_next_event(self, directory: str | None, traced: str | None = None) -> None:
        with self._quiet():
            self._trace_next.value = directory is not None
        self._trace_next.button_style = "info" if directory is not None else ""
        if directory is not None:
            self._say(f"the next cell that runs is traced to {directory}/ (and parsed by tlparse)")
        elif traced is not None:
            self._say(f"this cell is traced to {traced}/: its report says where the trace is")
        else:
            self._say("trace next cell: off")

    def _on_reset(self, button: Any = None) -> None:
        try:
            self._engine.reset_compiled_code()
        except _ERRORS as err:
            self._say(str(err), error=True)

    def requested(self) -> Stance:
        """The stance the controls ask for, validated by the engine's rules
        (raises :class:`~stance_magic.engine.StanceError` if torch would
        refuse it)."""
        backend = self._backend.value
        return make_stance(
            self._stance.value,
            bool(self._skip_guard.value),
            None if backend == NO_BACKEND else backend,
        )

    def _apply_controls(self, note: str | None = None) -> None:
        """Make what the controls show the session stance, as ``%stance`` does;
        a request torch would refuse is explained and the controls go back to
        the engine's state. What happened is said in every open panel."""
        held_back = sent_before(self._engine.cells.last_end, CLOCK_SLACK_S)
        try:
            stance = self.requested()
            self._engine.take_skip_guard_warning(stance)
            previous = self._engine.set_session(stance)
        except _ERRORS as err:
            self._sync_controls(self._engine.session)
            self._say(f"not applied: {err}", error=True)
            return
        text = f"session stance: {stance} (was: {previous.nested_text()})"
        if self._engine.deferring:
            text += " from the next cell (a cell is running)"
        elif held_back:
            text += (
                f"; chosen while a cell was running (it ran under {previous.nested_text()}): "
                "applies from the next cell"
            )
        self._engine.announce(f"{note}; {text}" if note else text)

    # -- the live area -----------------------------------------------------------
    def _say(self, text: str, error: bool = False) -> None:
        cls = "sm-msg-error" if error else "sm-msg"
        self._message.value = f'<span class="{cls}">{html.escape(text)}</span>'

    def _on_report(self, rep: CellReport) -> None:
        stance_cell, self._cell_stance = self._cell_stance, None
        history = self._engine.history
        previous = history[-2] if len(history) > 1 and history[-1] is rep else None
        if stance_cell is None and not _shown_in_panel(rep, previous):
            return  # a watched cell that used no compiled code: nothing to show
        self._show(rep, own=stance_cell, chart=rep.worth_showing(previous))

    def _show(self, rep: CellReport, own: Stance | None = None, chart: bool = True) -> None:
        """Describe ``rep`` in the summary; fill in the report (and redraw the
        chart, if ``chart``) now when the live area is open, else on opening."""
        session = self._engine.session
        self._shown = rep
        self._live.set_title(0, summary_line(rep, session if own is not None else None))
        self._report_stale = True
        self._chart_stale = self._chart_stale or chart
        if self.expanded:
            self._fill()

    def _on_open(self, change: dict[str, Any]) -> None:
        if change["new"] == 0:
            self._fill()

    def _fill(self) -> None:
        if self._report_stale and self._shown is not None:
            self._report_stale = False
            # ipywidgets' HTML has the line height of a form control: a table
            # reads better at the notebook's own.
            html_text = self._report_html(self._shown)
            self._report.value = f'<div style="line-height:1.4">{html_text}</div>'
        if self._chart_stale:
            self._schedule_chart()

    def _report_html(self, rep: CellReport) -> str:
        """The report's HTML as the shell's formatter makes it (so it follows
        the session's ``StanceMagics.max_details``), else its own."""
        formatters = getattr(self._shell, "display_formatter", None)
        if formatters is not None:
            html_text: str | None = formatters.formatters["text/html"](rep)
            if html_text:
                return html_text
        return rep._repr_html_()

    def _schedule_chart(self) -> None:
        """Draw the chart after the running cell's reply when a kernel's event
        loop runs this cell (several reports then make one drawing), else now."""
        if self._chart_pending:
            return
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._draw_chart()
            return
        self._chart_pending = True
        loop.call_soon(self._draw_chart)

    def _draw_chart(self) -> None:
        self._chart_pending = False
        if self._closed or not self._chart_stale:
            return
        self._chart_stale = False
        try:
            from .plots import history_png

            png = history_png(self._engine.history, cache_key=id(self._engine))
        except ImportError as err:
            self._chart.layout.display = "none"
            self._chart_note.value = (
                f'<i class="sm-hint">no chart: {html.escape(str(err))} (pip install matplotlib)</i>'
            )
            return
        except Exception as err:  # a chart must never break a cell
            self._chart.layout.display = "none"
            self._chart_note.value = f'<i class="sm-hint">no chart: {html.escape(repr(err))}</i>'
            return
        if png is None:
            self._chart.layout.display = "none"
            self._chart_note.value = (
                '<i class="sm-hint">No cell has compiled, failed or changed stance yet.</i>'
            )
            return
        if self._chart.value != png:
            self._chart.value = png
        self._chart.layout.display = None
        self._chart_note.value = ""


def panel(engine: Engine | None = None, shell: Any = None) -> StancePanel:
    """A widget panel that shows and sets the torch.compile stance.

    The panel is a view of the same engine as the ``%stance`` magics: a
    stance chosen in it is what the next cell runs under (exactly as
    ``%stance NAME``), and ``%stance NAME`` in a cell moves its dropdown.
    It offers ``skip_guard_eval_unsafe`` (with its warning), a forced
    backend (with the ``default`` stance only, among the backends that can
    run here), *reset compiled code*, *watch all cells*, and a collapsible
    live area: a one-line summary of the last measured cell that used
    compiled code, and, opened, its report and a chart of the last cells
    that compiled, failed or changed stance.

    Parameters
    ----------
    engine : Engine, optional
        The engine to view; by default the one the magics use.
    shell : InteractiveShell, optional
        The IPython shell asking (``%stance panel`` passes its own). When
        given, it must be a Jupyter kernel's shell: a terminal IPython cannot
        show widgets. Without a shell the panel is built anyway.

    Returns
    -------
    StancePanel
        The panel (an :class:`ipywidgets.VBox`); display it, or make it the
        cell's last expression. Call ``.close()`` to stop it following the
        engine.

    Raises
    ------
    PanelUnavailable
        ipywidgets is not installed, or ``shell`` is a terminal IPython. The
        message says what is missing and how to get it.

    Examples
    --------
    In a notebook::

        In [1]: %load_ext stance_magic

        In [2]: %stance panel          # or: stance_magic.panel()

        In [3]: %stance force_eager    # the panel's dropdown follows
        session stance: force_eager (was: default)

    From Python, without a front end (what the tests do):

    >>> import stance_magic
    >>> p = stance_magic.panel()
    >>> p
    StancePanel(session=default, watch=off)
    >>> p.close()
    """
    _check_available(shell)
    return StancePanel(engine=engine, shell=shell)
