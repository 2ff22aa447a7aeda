"""The front ends' subscription to an engine's events (see
:class:`stance_magic.session.engine.Engine` for the events)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

__all__ = ["Observers"]


class Observers:
    """A list of listeners told of events, each of all or of some."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[str, Any], None]] = []
        #: a listener -> the only events it is told of (see observe)
        self._only: dict[Callable[[str, Any], None], frozenset[str]] = {}

    def observe(self, fn: Callable[[str, Any], None], events: Iterable[str] | None = None) -> None:
        """Call ``fn(event, value)`` for every event, or only for ``events``."""
        if fn not in self._listeners:
            self._listeners.append(fn)
        if events is not None:
            self._only[fn] = frozenset(events)

    def unobserve(self, fn: Callable[[str, Any], None]) -> None:
        while fn in self._listeners:
            self._listeners.remove(fn)
        self._only.pop(fn, None)

    def announce(self, text: str) -> None:
        """Tell every front end something it should show (a ``("note", text)``
        event): a panel uses it so that all open panels say the same thing."""
        self.emit("note", text)

    def clear(self) -> None:
        """Forget every listener."""
        self._listeners.clear()
        self._only.clear()

    def emit(self, event: str, value: Any) -> None:
        """Tell the listeners of ``event`` (one that raises is printed, and the
        others are still told)."""
        if not self._listeners:
            return
        only = self._only
        for fn in list(self._listeners):
            if only and fn in only and event not in only[fn]:
                continue
            try:
                fn(event, value)
            except Exception:
                import traceback

                traceback.print_exc()
