"""Graph breaks from torch's ``graph_breaks`` log artifact: the handler
attached while the outermost window is open, and each logger put back
as it was found."""

from __future__ import annotations

import logging
import sys
from typing import Any

from ..breaks import (
    parse_graph_break,
)


def _graph_break_loggers() -> tuple[Any, list[logging.Logger]]:
    """torch's logging module (``torch._logging._internal``) and each of its
    ``graph_breaks`` artifact loggers; (None, []) where torch has none."""
    try:
        from torch._logging import _internal
    except ImportError:  # pragma: no cover - older torch: counters instead
        return None, []
    qnames = _internal.log_registry.get_artifact_log_qnames()
    return _internal, [logging.getLogger(q) for q in qnames if q.endswith("__graph_breaks")]


def _set_level(lg: logging.Logger, level: int) -> None:
    """``lg.setLevel(level)`` clearing only ``lg``'s own cache (see
    Recorder._install_log_capture), where the logging module has one."""
    cache = getattr(lg, "_cache", None)
    lock = getattr(logging, "_lock", None)
    if not isinstance(cache, dict) or lock is None:  # pragma: no cover - not CPython's
        lg.setLevel(level)
        return
    with lock:  # as setLevel: no isEnabledFor fills the cache in between
        lg.level = level
        cache.clear()


def _dup_checker() -> Any:
    """torch's graph-break duplicate check (``DuplicateWarningChecker``),
    or None where a release has none of that shape."""
    utils = sys.modules.get("torch._dynamo.utils")
    checker = getattr(utils, "graph_break_dup_warning_checker", None)
    return checker if isinstance(getattr(checker, "set", None), dict) else None


class _BreakHandler(logging.Handler):
    """Hands the records of torch's graph_breaks log artifact to the recorder."""

    def __init__(self, recorder: LogsMixin) -> None:
        super().__init__(logging.DEBUG)
        self._recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self._recorder._on_graph_break(record)


class LogsMixin:
    """Captures torch's graph-break log records. A part of
    :class:`~stance_magic.probe.recorder.Recorder`, whose slots it shares."""

    __slots__ = ()

    def _log_capture_available(self) -> bool:
        """Whether this torch has ``graph_breaks`` loggers to capture (read
        once); without them a window reads torch's break counters instead."""
        loggers = self._log_loggers
        if loggers is None:
            self._log_torch, loggers = _graph_break_loggers()
            self._log_loggers = loggers
        return bool(loggers)

    def _install_log_capture(self) -> None:
        """Attach the graph-break handler to torch's ``graph_breaks`` loggers
        for the outermost window; :meth:`_uninstall_log_capture` puts each
        logger back as it was when the window closes.

        Where the user did not ask for the artifact (``TORCH_LOGS``,
        ``set_logs``), its records are kept from reaching torch's console
        handler, and the breaks torch's duplicate check notes meanwhile are
        forgotten at the end (torch notes a break only while the log is on:
        the user's own log, turned on later, shows each break's stack as it
        would have unmeasured). A level is set on the logger itself, with its
        own cache cleared: ``Logger.setLevel`` clears every logger's cache
        in the process (about 25 µs with torch's 220 loggers), too dear for
        every cell; these loggers have no children whose cache could hold it.
        """
        if self._log_on:
            return
        if not self._log_capture_available():  # pragma: no cover - older torch: counters
            return
        loggers = self._log_loggers
        if self._handler is None:
            self._handler = _BreakHandler(self)
        # torch rebinds its log_state (set_logs, TORCH_LOGS): read each time
        user_wants = self._user_log_on()
        handler = self._handler
        state = self._log_state = []
        for lg in loggers:
            had = handler in lg.handlers
            level, propagate = lg.level, lg.propagate
            if not had:
                lg.addHandler(handler)
            if not user_wants and lg.propagate:
                lg.propagate = False
            if not lg.isEnabledFor(logging.DEBUG):
                _set_level(lg, logging.DEBUG)
            # as found, and as left: what the block's code changes stays
            state.append((lg, level, propagate, had, lg.level, lg.propagate))
        checker = None if user_wants else _dup_checker()
        self._dup_seen = None if checker is None else set(checker.set)
        self._user_wanted = user_wants
        self._log_on = True

    def _uninstall_log_capture(self) -> None:
        """Put each graph_breaks logger back as it was found, where it is still
        as the capture left it, and forget the breaks torch's duplicate check
        noted meanwhile, unless the user's log is on now. Where the block's
        code turned the user's log on or off (``torch._logging.set_logs``),
        the loggers are left as torch configures them for that setting."""
        if not self._log_on:
            return
        state, self._log_state = self._log_state, []
        seen, self._dup_seen = self._dup_seen, None
        self._log_on = False
        user_on = self._user_log_on()
        configure = None
        if user_on != self._user_wanted:
            configure = getattr(self._log_torch, "configure_artifact_log", None)
        for lg, level, propagate, had, left_level, left_propagate in state:
            if not had:
                lg.removeHandler(self._handler)
            if configure is not None:
                # as torch's set_logs leaves an artifact logger
                _set_level(lg, logging.NOTSET)
                lg.propagate = True
                configure(lg)
                continue
            if lg.level == left_level != level:
                _set_level(lg, level)
            if lg.propagate == left_propagate:
                lg.propagate = propagate
        checker = _dup_checker() if seen is not None and not user_on else None
        if checker is not None:
            for key in set(checker.set) - seen:
                checker.set.pop(key, None)

    def _user_log_on(self) -> bool:
        """Whether the user's ``graph_breaks`` log is on (TORCH_LOGS, set_logs)."""
        state = getattr(self._log_torch, "log_state", None)
        enabled = getattr(state, "is_artifact_enabled", None)
        return bool(enabled("graph_breaks")) if enabled is not None else False

    def _on_graph_break(self, record: Any) -> None:
        if not self._threads or self._get_ident() not in self._threads:
            return
        event = parse_graph_break(record)
        if event is not None:
            event.time_s = getattr(record, "created", None)
            self._breaks.append(event)
