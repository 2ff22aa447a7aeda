"""The widget panel: ``%stance panel`` and ``stance_magic.panel()``.

:class:`StancePanel` is a composite :class:`ipywidgets.VBox` and a thin view
of the one :class:`~stance_magic.session.engine.Engine`: its controls call the
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

The panel holds three parts by concern, each owning its state: its widgets,
made by one function (:func:`~stance_magic.widgets.tree.build_tree`), the
controls (:class:`~stance_magic.widgets.controls.Controls`) and the live
area (:class:`~stance_magic.widgets.live.LiveArea`); this module holds the
public widget, what it does with the engine's events, and :func:`panel`.

ipywidgets is imported here, when the panel is first asked for, never by
``import stance_magic``; without it :func:`panel` raises
:class:`PanelUnavailable` with a message that says how to get it.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

from ..render import summary_line as summary_line
from ..session.engine import Engine, get_engine, reset_note
from ..stance import Stance
from .controls import Controls
from .live import LiveArea
from .tree import BUSY_NOTE as BUSY_NOTE
from .tree import CSS as CSS
from .tree import NO_BACKEND, build_tree
from .tree import RESTART_NOTE as RESTART_NOTE

try:
    import ipywidgets as widgets
except ImportError:  # panel() says what is missing (tests: test_without_ipywidgets)
    widgets = None

__all__ = ["NO_BACKEND", "PanelUnavailable", "StancePanel", "panel"]

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
        self._closed = False
        if shell is None:
            from IPython import get_ipython

            shell = get_ipython()
        self._shell = shell
        self._parts = build_tree(shell)
        self._controls = Controls(self._engine, self._parts)
        self._live_area = LiveArea(self._engine, self._parts, shell)
        kwargs.setdefault("layout", widgets.Layout(width="100%", max_width="820px"))
        super().__init__(children=self._parts.children, **kwargs)
        self.add_class("sm-panel")

        self._controls.sync(self._engine.session)
        self._controls.sync_watch(self._engine.watch)
        self._live_area.show_latest()
        self._controls.observe()
        self._live_area.observe()
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
        return self._live_area.expanded

    def expand(self, open: bool = True) -> None:
        """Open (or close) the live area, as clicking its header does."""
        self._live_area.expand(open)

    def refresh(self) -> None:
        """Show the engine's state again: session stance, watch, last report."""
        self._controls.sync(self._engine.session)
        self._controls.sync_watch(self._engine.watch)
        if self._live_area.shown is not None:
            self._live_area.show(self._live_area.shown, chart=True)

    def close(self) -> None:
        """Stop following the engine and close the panel's widgets."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._live_area.closed = True
        self._engine.unobserve(self._on_engine)
        events = getattr(self._shell, "events", None)
        if events is not None:
            with contextlib.suppress(ValueError):
                events.unregister("pre_run_cell", self._on_pre_run_cell)
            with contextlib.suppress(ValueError):
                events.unregister("post_run_cell", self._on_post_run_cell)
        for part in self._parts.groups:
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

    def requested(self) -> Stance:
        """The stance the controls ask for, validated by the engine's rules
        (raises :class:`~stance_magic.session.engine.StanceError` if torch would
        refuse it)."""
        return self._controls.requested()

    # -- engine -> panel -------------------------------------------------------
    def _on_engine(self, event: str, value: Any) -> None:
        controls, live = self._controls, self._live_area
        if event == "report":
            live.on_report(value)
        elif event == "session":
            controls.sync(value)
            later = " from the next cell (a cell is running)" if self._engine.deferring else ""
            controls.say(f"session stance: {value}{later}")
        elif event == "applied":
            controls.sync(value)
            controls.say(
                f"session stance: {value}, chosen while the last cell ran, is in effect now"
            )
        elif event == "cell":
            live.cell_started(value)
        elif event == "watch":
            controls.sync_watch(bool(value))
            controls.say(
                "watch on: every cell is measured; the summary below follows each cell "
                "that uses compiled code"
                if value
                else "watch off: only %%stance cells are measured"
            )
        elif event == "reset":
            if value == "pending":
                controls.say(
                    "reset asked for while a cell runs: compiled code is forgotten "
                    "(torch.compiler.reset()) when that cell ends"
                )
            else:
                controls.say(reset_note(self._engine.session))
        elif event == "note":
            controls.say(str(value))
        elif event in ("trace_next", "traced"):
            controls.on_trace_next_event(value if event == "trace_next" else None, traced=value)

    # The engine learns when cells run from the extension's hooks; a panel
    # made without %load_ext tells it too, so that a change handled while a
    # cell runs waits for it.
    # The engine's one cell tracker counts a cell once however many front
    # ends follow it.
    def _on_pre_run_cell(self, info: Any = None) -> None:
        self._engine.cells.enter(info)

    def _on_post_run_cell(self, result: Any = None) -> None:
        self._engine.cells.leave(result)


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
