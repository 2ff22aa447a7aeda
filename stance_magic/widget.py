"""The widget panel: ``%stance panel`` and ``stance_magic.panel()``.

:class:`StancePanel` is a composite :class:`ipywidgets.VBox` and a thin view
of the one :class:`~stance_magic.engine.Engine`: its controls call the
engine's methods, and it follows the engine's events, so the magics, the
Python API and any number of open panels always agree. It keeps no copy of
the state; what the controls show is what the engine says.

ipywidgets is imported here, when the panel is first asked for, never by
``import stance_magic``; without it :func:`panel` raises
:class:`PanelUnavailable` with a message that says how to get it.
"""

from __future__ import annotations

import contextlib
import html
import importlib
from typing import Any, Iterator

from .engine import (
    SKIP_GUARD_WARNING,
    CompiledRegionError,
    Engine,
    Stance,
    StanceError,
    TorchSupportError,
    get_engine,
    make_stance,
    supported_stances,
)

try:
    import ipywidgets as widgets
except ImportError:  # panel() says what is missing (tests: test_without_ipywidgets)
    widgets = None

__all__ = ["NO_BACKEND", "PanelUnavailable", "StancePanel", "panel"]

#: The backend chooser's entry for "no forced backend".
NO_BACKEND = "none"

#: Backends listed first in the chooser, when torch has them; the rest follow
#: in alphabetical order.
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


def _stance_label(name: str, skip_guard_eval_unsafe: bool, backend: str | None) -> str:
    return str(Stance(name, skip_guard_eval_unsafe, backend))


def _backend_key(backend: Any) -> Any:
    return NO_BACKEND if backend is None else backend


_Base: Any = widgets.VBox if widgets is not None else object


class StancePanel(_Base):
    """An ipywidgets panel that drives and shows the stance engine.

    Controls: the session stance, ``skip_guard_eval_unsafe`` (its warning
    shows while ticked), a forced backend (only with the ``default`` stance),
    *reset compiled code* and *watch all cells*. Below them, the live area:
    the report of the last measured cell and a chart of the session history,
    refreshed after each measured cell.

    Build it with :func:`panel`. The child widgets are private; drive the
    panel through the engine, the magics, or the controls in the notebook.

    Parameters
    ----------
    engine : Engine, optional
        The engine to view; the process's one engine by default.
    **kwargs
        Passed on to :class:`ipywidgets.VBox` (``layout=...``).
    """

    def __init__(self, engine: Engine | None = None, **kwargs: Any) -> None:
        self._engine = engine or get_engine()
        self._syncing = False
        self._cell_stance: Stance | None = None
        self._closed = False
        W = widgets
        session = self._engine.session

        self._title = W.HTML(
            "<b>torch.compile stance</b>",
            layout=W.Layout(margin="0 0 2px 0"),
        )
        self._stance = W.Dropdown(
            options=list(supported_stances()),
            description="stance",
            tooltip="the session stance: what cells run under without %%stance",
            style={"description_width": "initial"},
            layout=W.Layout(width="250px"),
        )
        self._backend = W.Dropdown(
            options=[(NO_BACKEND, NO_BACKEND)],
            value=NO_BACKEND,
            description="backend",
            tooltip="force a torch.compile backend (only with the default stance)",
            style={"description_width": "initial"},
            layout=W.Layout(width="250px"),
        )
        self._skip_guard = W.Checkbox(
            description="skip_guard_eval_unsafe",
            indent=False,
            tooltip="run only the guards that tell cache entries apart (unsafe)",
            layout=W.Layout(width="auto", margin="0 0 0 12px"),
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
        self._message = W.HTML(layout=W.Layout(min_height="20px"))
        self._live_title = W.HTML()
        self._report = W.HTML(layout=W.Layout(max_height="300px", overflow="auto"))
        self._chart = W.Image(
            format="png",
            layout=W.Layout(display="none", width="100%", max_width="600px", height="auto"),
        )
        self._chart_note = W.HTML()

        controls = W.HBox(
            [self._stance, self._backend, self._skip_guard],
            layout=W.Layout(flex_flow="row wrap", align_items="center"),
        )
        actions = W.HBox([self._reset, self._watch], layout=W.Layout(flex_flow="row wrap"))
        live = W.VBox(
            [self._live_title, self._report, self._chart, self._chart_note],
            layout=W.Layout(border_top="1px solid #ddd", margin="4px 0 0 0", padding="4px 0 0 0"),
        )
        self._parts = (controls, actions, live)
        # CSS classes name the parts for styling and for the browser test.
        for w, cls in (
            (self._stance, "sm-stance"),
            (self._backend, "sm-backend"),
            (self._skip_guard, "sm-skip-guard"),
            (self._skip_warning, "sm-skip-warning"),
            (self._reset, "sm-reset"),
            (self._watch, "sm-watch"),
            (self._message, "sm-message"),
            (live, "sm-live"),
        ):
            w.add_class(cls)
        kwargs.setdefault(
            "layout",
            W.Layout(
                border="1px solid #ccc",
                padding="6px 8px",
                width="100%",
                max_width="800px",
            ),
        )
        super().__init__(
            children=[self._title, controls, self._skip_warning, actions, self._message, live],
            **kwargs,
        )
        self.add_class("sm-panel")

        self._sync_controls(session)
        self._sync_watch(self._engine.watch)
        if self._engine.history:
            self._show_report(self._engine.history[-1])
        else:
            self._live_title.value = (
                "<i>No measured cell yet: run a <code>%%stance</code> cell, "
                "or tick <b>watch all cells</b>.</i>"
            )

        self._stance.observe(self._on_stance, names="value")
        self._backend.observe(self._on_backend, names="value")
        self._skip_guard.observe(self._on_skip_guard, names="value")
        self._watch.observe(self._on_watch, names="value")
        self._reset.on_click(self._on_reset)
        self._engine.observe(self._on_engine)

    # -- public --------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The engine this panel views."""
        return self._engine

    @property
    def session(self) -> Stance:
        """The session stance (the engine's; the panel keeps no copy)."""
        return self._engine.session

    def refresh(self) -> None:
        """Show the engine's state again: session stance, watch, last report."""
        self._sync_controls(self._engine.session)
        self._sync_watch(self._engine.watch)
        if self._engine.history:
            self._show_report(self._engine.history[-1])

    def close(self) -> None:
        """Stop following the engine and close the panel's widgets."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._engine.unobserve(self._on_engine)
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
        if event == "session":
            self._sync_controls(value)
            later = " from the next cell (a cell is running)" if self._engine.in_cell else ""
            self._say(f"session stance: {value}{later}")
        elif event == "cell":
            self._cell_stance = value
            session = self._engine.session
            own = "" if value == session else f" (its own stance; the session stays {session})"
            self._live_title.value = (
                f"<b>cell running</b> under <code>{html.escape(str(value))}</code>"
                f"{html.escape(own)}…"
            )
        elif event == "report":
            self._show_report(value)
        elif event == "watch":
            self._sync_watch(bool(value))
        elif event == "reset":
            self._say(
                "compiled code forgotten (torch.compiler.reset()): the next call "
                "compiles from cold; history kept"
            )

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
            self._backend.options = self._backend_options(stance.backend)
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
            names = probe.list_backends()
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
        self._backend.tooltip = (
            "force a torch.compile backend"
            if default
            else "torch forces a backend only with the default stance"
        )

    def _update_skip_warning(self) -> None:
        if self._skip_guard.value:
            self._skip_warning.value = (
                '<div style="color:#8a4b00;background:#fff4e0;border-left:3px solid '
                '#e69500;padding:2px 6px;font-size:12px;line-height:1.35">'
                f"⚠ {html.escape(SKIP_GUARD_WARNING)}</div>"
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
        the engine's state."""
        try:
            stance = self.requested()
            self._engine.take_skip_guard_warning(stance)
            previous = self._engine.set_session(stance)
        except _ERRORS as err:
            self._sync_controls(self._engine.session)
            self._say(f"not applied: {err}", error=True)
            return
        later = " from the next cell (a cell is running)" if self._engine.in_cell else ""
        text = f"session stance: {stance} (was: {previous}){later}"
        self._say(f"{note}; {text}" if note else text)

    # -- the live area -----------------------------------------------------------
    def _say(self, text: str, error: bool = False) -> None:
        color = "#b00020" if error else "#555"
        self._message.value = (
            f'<span style="color:{color};font-size:12px">{html.escape(text)}</span>'
        )

    def _show_report(self, rep: Any) -> None:
        session = self._engine.session
        label = _stance_label(rep.stance, rep.skip_guard_eval_unsafe, rep.backend)
        own = ""
        if self._cell_stance is not None and self._cell_stance != session:
            own = f" (its own stance; the session stays {session})"
        self._cell_stance = None
        self._live_title.value = (
            f"<b>last measured cell</b> {rep.index}: ran under "
            f"<code>{html.escape(label)}</code>{html.escape(own)}"
        )
        # ipywidgets' HTML has the line height of a form control (28 px): a
        # table reads better at the notebook's own.
        self._report.value = f'<div style="line-height:1.4">{rep._repr_html_()}</div>'
        self._draw_chart()

    def _draw_chart(self) -> None:
        reports = list(self._engine.history)
        if not reports:
            return
        try:
            png = _history_png(self._engine, reports)
        except ImportError as err:
            self._chart.layout.display = "none"
            self._chart_note.value = (
                f"<i>no chart: {html.escape(str(err))} (pip install matplotlib)</i>"
            )
            return
        except Exception as err:  # a chart must never break a cell
            self._chart.layout.display = "none"
            self._chart_note.value = f"<i>no chart: {html.escape(repr(err))}</i>"
            return
        self._chart.value = png
        self._chart.layout.display = None
        self._chart_note.value = ""


_CHART_CACHE: dict[str, Any] = {}


def _history_png(engine: Engine, reports: list[Any]) -> bytes:
    """The history chart as PNG, drawn once per new report however many
    panels are open."""
    key = (id(engine), len(reports), id(reports[-1]))
    if _CHART_CACHE.get("key") != key:
        from .plots import figure_png, history_figure

        _CHART_CACHE.clear()
        _CHART_CACHE.update(key=key, png=figure_png(history_figure(reports)))
    return _CHART_CACHE["png"]


def panel(engine: Engine | None = None, shell: Any = None) -> StancePanel:
    """A widget panel that shows and sets the torch.compile stance.

    The panel is a view of the same engine as the ``%stance`` magics: a
    stance chosen in it is what the next cell runs under (exactly as
    ``%stance NAME``), and ``%stance NAME`` in a cell moves its dropdown.
    It offers ``skip_guard_eval_unsafe`` (with its warning), a forced
    backend (with the ``default`` stance only), *reset compiled code*,
    *watch all cells*, and a live area with the last measured cell's report
    and a history chart, refreshed after each measured cell.

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
    return StancePanel(engine=engine)
