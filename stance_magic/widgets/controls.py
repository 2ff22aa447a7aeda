"""The stance panel's controls: the state logic the tests drive.

:class:`Controls` holds the panel's controls (its part of
:class:`~stance_magic.widgets.tree.PanelParts`) and the one flag of its own
(setting them from the engine, :meth:`~Controls.sync`, without calling the
engine back), and turns a change made in them into a call of the engine
(:meth:`~Controls.apply`, as ``%stance NAME`` does): a request torch would
refuse is explained and the controls go back to the engine's state. It keeps
no copy of the state: what the controls show is what the engine says. The
one line of messages under the controls is written here (:meth:`~Controls.say`).
"""

from __future__ import annotations

import contextlib
import html
from typing import TYPE_CHECKING, Any, Iterator

from ..notebook import sent_before
from ..probe import CompiledRegionError, TorchSupportError
from ..session.engine import SKIP_GUARD_WARNING
from ..stance import Stance, StanceError, make_stance
from .tree import COMMON_BACKENDS, NO_BACKEND

if TYPE_CHECKING:
    from ..session.engine import Engine
    from .tree import PanelParts

__all__ = ["CLOCK_SLACK_S", "Controls"]

#: How far the browser's clock may be behind the kernel's before a change
#: made just after a cell ended reads as made while it ran.
CLOCK_SLACK_S = 0.25

_ERRORS = (StanceError, TorchSupportError, CompiledRegionError)


def _backend_key(backend: Any) -> Any:
    return NO_BACKEND if backend is None else backend


class Controls:
    """The controls of :class:`~stance_magic.widgets.panel.StancePanel`, both ways:
    engine to panel (:meth:`sync`, :meth:`sync_watch`) and panel to engine
    (the ``_on_*`` observers :meth:`observe` puts on the widgets)."""

    def __init__(self, engine: Engine, parts: PanelParts) -> None:
        self._engine = engine
        self._syncing = False
        #: the widgets it reads and sets (made by tree.build_tree)
        self._w = parts

    def observe(self) -> None:
        """Follow the widgets: a change made in them goes to the engine."""
        self._w.stance.observe(self._on_stance, names="value")
        self._w.backend.observe(self._on_backend, names="value")
        self._w.skip_guard.observe(self._on_skip_guard, names="value")
        self._w.watch.observe(self._on_watch, names="value")
        self._w.trace_next.value = self._engine.trace_next is not None
        self._w.trace_next.observe(self._on_trace_next, names="value")
        self._w.reset.on_click(self._on_reset)

    def requested(self) -> Stance:
        """The stance the controls ask for, validated by the engine's rules
        (raises :class:`~stance_magic.stance.StanceError` if torch would
        refuse it)."""
        backend = self._w.backend.value
        return make_stance(
            self._w.stance.value,
            bool(self._w.skip_guard.value),
            None if backend == NO_BACKEND else backend,
        )

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Set controls from the engine without calling the engine back."""
        before, self._syncing = self._syncing, True
        try:
            yield
        finally:
            self._syncing = before

    def sync(self, stance: Stance) -> None:
        with self._quiet():
            if stance.name not in self._w.stance.options:  # a stance added to torch later
                self._w.stance.options = [*self._w.stance.options, stance.name]
            self._w.stance.value = stance.name
            options = self._backend_options(stance.backend)
            if list(self._w.backend.options) != options:
                self._w.backend.options = options
            self._w.backend.value = _backend_key(stance.backend)
            self._w.skip_guard.value = stance.skip_guard_eval_unsafe
        self._update_enabled()
        self._update_skip_warning()

    def sync_watch(self, on: bool) -> None:
        with self._quiet():
            self._w.watch.value = on
        self._w.watch.button_style = "info" if on else ""

    def _backend_options(self, current: Any = None) -> list[tuple[str, Any]]:
        from .. import probe

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
        default = self._w.stance.value == "default"
        self._w.backend.disabled = not default
        self._w.backend_note.layout.display = "none" if default else None

    def _update_skip_warning(self) -> None:
        if self._w.skip_guard.value:
            self._w.skip_warning.value = (
                f'<div class="sm-warn">⚠ {html.escape(SKIP_GUARD_WARNING)}</div>'
            )
            self._w.skip_warning.layout.display = None
        else:
            self._w.skip_warning.value = ""
            self._w.skip_warning.layout.display = "none"

    # -- panel -> engine -------------------------------------------------------
    def _on_stance(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        note = None
        if change["new"] != "default" and self._w.backend.value != NO_BACKEND:
            dropped = self._w.backend.label
            with self._quiet():
                self._w.backend.value = NO_BACKEND
            note = f"backend {dropped} dropped: torch forces a backend only with the default stance"
        self._update_enabled()
        self.apply(note)

    def _on_backend(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self.apply()

    def _on_skip_guard(self, change: dict[str, Any]) -> None:
        self._update_skip_warning()
        if not self._syncing:
            self.apply()

    def _on_watch(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._engine.set_watch(bool(change["new"]))
            self.sync_watch(self._engine.watch)

    def _on_trace_next(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            from ..share import PANEL_TRACE_DIR

            self._engine.set_trace_next(PANEL_TRACE_DIR if change["new"] else None)

    def on_trace_next_event(self, directory: str | None, traced: str | None = None) -> None:
        with self._quiet():
            self._w.trace_next.value = directory is not None
        self._w.trace_next.button_style = "info" if directory is not None else ""
        if directory is not None:
            self.say(f"the next cell that runs is traced to {directory}/ (and parsed by tlparse)")
        elif traced is not None:
            self.say(f"this cell is traced to {traced}/: its report says where the trace is")
        else:
            self.say("trace next cell: off")

    def _on_reset(self, button: Any = None) -> None:
        try:
            self._engine.reset_compiled_code()
        except _ERRORS as err:
            self.say(str(err), error=True)

    def apply(self, note: str | None = None) -> None:
        """Make what the controls show the session stance, as ``%stance`` does;
        a request torch would refuse is explained and the controls go back to
        the engine's state. What happened is said in every open panel."""
        held_back = sent_before(self._engine.cells.last_end, CLOCK_SLACK_S)
        try:
            stance = self.requested()
            self._engine.take_skip_guard_warning(stance)
            previous = self._engine.set_session(stance)
        except _ERRORS as err:
            self.sync(self._engine.session)
            self.say(f"not applied: {err}", error=True)
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

    def say(self, text: str, error: bool = False) -> None:
        cls = "sm-msg-error" if error else "sm-msg"
        self._w.message.value = f'<span class="{cls}">{html.escape(text)}</span>'
