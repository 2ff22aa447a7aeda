"""One protocol for every measuring subsystem, and a window over several.

A measured block is watched by up to five subsystems: the recorder (torch's
hooks: calls, lookups, compiles, misses), the compile-cache watch, the
CUDA-graph watch, torch's profiler (lookups, memory, a timeline's regions)
and the trace capture of a shared cell. Each is a :class:`Watch`:

* ``start()`` opens a window and returns its mark; ``stop(mark, error)``
  closes that window and returns what it saw (``error``: what the block
  raised, if it did);
* ``uninstall()`` takes everything of it out of torch (the extension's
  unload); a watch installs itself again at its next ``start``;
* **between windows**: a wrapper a watch would rather not swap every cell
  (torch calls it only while it compiles) stays in torch between windows
  only while a front end that measures cell after cell :func:`holds <hold>`
  them (the loaded extension), carrying the original's name, docstring,
  signature and ``__wrapped__`` (:func:`faithful`); otherwise (a
  ``measure()`` block) the last window to close takes it out, so torch is
  as it was once the block has ended;
* **when torch raises inside it**: a watch that is ``optional`` never fails
  the block. If its ``start`` or ``stop`` raises, its figures are missing,
  its ``empty`` result stands in, and :meth:`Watched.notes` says why in one
  line (:meth:`Watch.failure_note`). A required watch's failure to start
  closes the watches already started, in reverse order, and propagates: a
  block is never measured without its recorder.

:class:`Watched` opens the windows of a list of watches in order and closes
them in reverse; :func:`uninstall_all` uninstalls every process-wide watch
made so far (:func:`process_watch`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Protocol, TypeVar

__all__ = ["Watch", "Watched", "faithful", "held", "hold", "process_watch", "uninstall_all"]


class Watch(Protocol):
    """What :class:`Watched` needs of a measuring subsystem."""

    #: its key in :attr:`Watched.results`
    name: str
    #: a failure to start or stop becomes a note, never the block's error
    optional: bool

    @property
    def empty(self) -> Any:
        """What :meth:`stop` gives for a window that saw nothing (and what
        stands in for a failed one)."""
        ...

    def start(self, context: Any = None) -> Any:
        """Open a window; its mark. ``context``: the block's name, as torch's
        records should carry it (a string, or a function giving one)."""
        ...

    def stop(self, mark: Any, error: BaseException | None = None) -> Any: ...

    def uninstall(self) -> None: ...

    def failure_note(self, err: BaseException) -> str:
        """The report's note when it raised (optional watches)."""
        ...


def default_note(name: str, err: BaseException) -> str:
    """The note of a failed optional watch that has no wording of its own."""
    return f"not measured ({name}): {type(err).__name__}: {err}"


class Watched:
    """The windows of several watches, opened in order and closed in reverse."""

    __slots__ = ("_marks", "failures", "results", "watches")

    def __init__(self, watches: list[Watch], context: Any = None) -> None:
        self.watches = watches
        #: each watch's mark; a failed optional watch has none
        self._marks: list[tuple[Watch, Any]] = []
        #: name -> the note of an optional watch that failed
        self.failures: dict[str, str] = {}
        #: name -> what the watch saw (after :meth:`stop`)
        self.results: dict[str, Any] = {}
        try:
            for w in watches:
                try:
                    self._marks.append((w, w.start(context)))
                except Exception as err:
                    if not w.optional:
                        raise
                    self.failures[w.name] = w.failure_note(err)
        except BaseException:
            self.stop(None)  # the ones already open: nothing left open
            raise

    def stop(self, error: BaseException | None = None) -> dict[str, Any]:
        """Close every window (once), the last opened first; each watch's
        result by name (its ``empty`` where it failed)."""
        marks, self._marks = self._marks, []
        first: BaseException | None = None
        for w, mark in reversed(marks):
            try:
                self.results[w.name] = w.stop(mark, error)
            except Exception as err:
                self.results[w.name] = w.empty
                if w.optional:
                    self.failures.setdefault(w.name, w.failure_note(err))
                elif first is None:
                    first = err  # the others still close
        for w in self.watches:
            if w.name not in self.results:
                self.results[w.name] = w.empty
        if first is not None:
            raise first
        return self.results

    @property
    def notes(self) -> list[str]:
        """One line per optional watch that failed."""
        return list(self.failures.values())


_W = TypeVar("_W")
#: process-wide watches made so far, by name (see :func:`process_watch`)
_PROCESS: dict[str, Any] = {}


def process_watch(name: str, make: Callable[[], _W]) -> _W:
    """The process's one watch called ``name``, made by ``make`` the first
    time; :func:`uninstall_all` reaches it."""
    w = _PROCESS.get(name)
    if w is None:
        w = _PROCESS[name] = make()
    return w


def uninstall_all() -> None:
    """Take every process-wide watch made so far out of torch."""
    for w in list(_PROCESS.values()):
        w.uninstall()


#: front ends that hold the watches' between-window wrappers (see :func:`hold`)
_HOLDERS = [0]


def hold(on: bool) -> None:
    """A front end that measures cell after cell (the extension, loaded:
    ``on``; unloaded: not) keeps the wrappers a watch would rather not swap
    every cell in torch between windows; without one, the last window to
    close takes them out."""
    _HOLDERS[0] = _HOLDERS[0] + 1 if on else max(_HOLDERS[0] - 1, 0)


def held() -> bool:
    """Whether a front end holds the between-window wrappers (see :func:`hold`)."""
    return _HOLDERS[0] > 0


def faithful(wrapper: Any, original: Any) -> Any:
    """``wrapper``, made to show as ``original`` does: its name, qualified
    name, module, docstring and (through ``__wrapped__``) its signature, so
    that ``torch.compiler.load_compiled_function?`` in a notebook reads as
    torch wrote it while the wrapper is in."""
    return functools.update_wrapper(wrapper, original, updated=())
