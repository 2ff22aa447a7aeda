"""The stance engine: stance state, validation, applying and measuring.

No IPython here. The magics and the widget panel are thin views of the one
:class:`Engine` returned by :func:`get_engine`; neither keeps a copy of the
state. Stances are applied through torch's own ``torch.compiler.set_stance``
(via :mod:`stance_magic.probe`).
"""

from __future__ import annotations

import contextlib
import difflib
import threading
import time
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from . import probe
from .probe import CompiledRegionError, TorchSupportError

__all__ = [
    "CompiledRegionError",
    "Engine",
    "Stance",
    "StanceError",
    "TorchSupportError",
    "current_stance",
    "get_engine",
    "reset_note",
    "stance_text",
    "supported_stances",
]


class StanceError(ValueError):
    """A stance, flag or backend the user asked for is not valid.

    The message is one line, fit to show as it is; the magics turn it into
    an IPython ``UsageError``.
    """


@dataclass(frozen=True)
class Stance:
    """A compiler stance: what ``torch.compiler.set_stance`` was given.

    Examples
    --------
    >>> Stance("eager_then_compile")
    Stance(name='eager_then_compile', skip_guard_eval_unsafe=False, backend=None)
    >>> print(Stance("default", backend="eager"))
    default (backend=eager)
    """

    name: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: str | Callable[..., Any] | None = None

    @property
    def backend_name(self) -> str | None:
        """The backend as text: its name, or the callable's ``__name__``."""
        b = self.backend
        if b is None or isinstance(b, str):
            return b
        return getattr(b, "__name__", None) or type(b).__name__

    def __str__(self) -> str:
        extras = []
        if self.backend is not None:
            extras.append(f"backend={self.backend_name}")
        if self.skip_guard_eval_unsafe:
            extras.append("skip_guard_eval_unsafe")
        return self.name + (f" ({', '.join(extras)})" if extras else "")

    def __repr__(self) -> str:
        backend = self.backend if not callable(self.backend) else self.backend_name
        return (
            f"Stance(name={self.name!r}, skip_guard_eval_unsafe="
            f"{self.skip_guard_eval_unsafe}, backend={backend!r})"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stance": self.name,
            "skip_guard_eval_unsafe": self.skip_guard_eval_unsafe,
            "backend": self.backend_name,
        }


def stance_text(
    name: str, skip_guard_eval_unsafe: bool = False, backend: str | Callable[..., Any] | None = None
) -> str:
    """A stance in the one notation every view uses (``%stance``, the panel,
    the history chart): what :class:`Stance` prints.

    Examples
    --------
    >>> stance_text("default", True, "eager")
    'default (backend=eager, skip_guard_eval_unsafe)'
    """
    return str(Stance(name, skip_guard_eval_unsafe, backend))


def reset_note(session: Stance) -> str:
    """What ``torch.compiler.reset()`` means for the next call under ``session``.

    Under ``skip_guard_eval_unsafe`` torch refuses to compile anything, so
    after a reset the next call of a compiled function raises, unless the
    stance runs everything eagerly.

    Examples
    --------
    >>> reset_note(Stance("default"))
    'compiled code forgotten (torch.compiler.reset()); history kept'
    """
    done = "compiled code forgotten (torch.compiler.reset())"
    if not session.skip_guard_eval_unsafe:
        return f"{done}; history kept"
    if session.name == "force_eager":
        return (
            f"{done}: under force_eager calls run eagerly, but once the stance compiles "
            "again with skip_guard_eval_unsafe on, the first call of a compiled function "
            "raises (torch: Recompilation triggered with skip_guard_eval_unsafe stance); "
            "history kept"
        )
    return (
        f"{done}, but skip_guard_eval_unsafe is on and torch refuses to compile under it: "
        "the next call of a compiled function raises RuntimeError (Recompilation "
        "triggered with skip_guard_eval_unsafe stance). Turn skip_guard_eval_unsafe off, "
        "run the model to warm it up, then turn it on again; history kept"
    )


def supported_stances() -> tuple[str, ...]:
    """Stance names the installed torch accepts.

    Examples
    --------
    >>> "force_eager" in supported_stances()
    True
    """
    return probe.supported_stances()


def _did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def resolve_backend(
    backend: str | Callable[..., Any] | None, namespace: Mapping[str, Any] | None = None
) -> str | Callable[..., Any] | None:
    """A backend name registered with torch, or a callable, checked.

    A name that torch does not register is looked up in ``namespace`` (the
    notebook's), so ``-b mybackend`` finds a function defined in a cell.
    """
    if backend is None or callable(backend):
        return backend
    if not isinstance(backend, str):
        raise StanceError(f"backend must be a name or a callable, not {type(backend).__name__}")
    names = probe.list_backends()
    if backend in names:
        problem = probe.backend_problem(backend)
        if problem:
            usable = ", ".join(probe.usable_backends())
            raise StanceError(
                f"backend {backend!r} cannot run here: {problem}; usable here: {usable}"
            )
        return backend
    # Test-only and minifier backends are valid but not worth offering.
    offered = [n for n in names if not probe.is_test_backend(n)]
    if namespace is not None and backend in namespace:
        obj = namespace[backend]
        if callable(obj):
            return obj
        raise StanceError(f"{backend!r} in the namespace is a {type(obj).__name__}, not a callable")
    user = sorted(
        k
        for k, v in (namespace or {}).items()
        if isinstance(v, types.FunctionType) and not k.startswith("_")
    )
    msg = (
        f"unknown backend {backend!r}{_did_you_mean(backend, offered)}"
        f"; torch has: {', '.join(offered)}"
    )
    if namespace is not None:
        msg += "; or name a callable from your namespace" + (
            f" ({', '.join(user[:8])}{', ...' if len(user) > 8 else ''})" if user else ""
        )
    return _raise(msg)


def _raise(msg: str) -> Any:
    raise StanceError(msg)


def make_stance(
    name: str | None = None,
    skip_guard_eval_unsafe: bool = False,
    backend: str | Callable[..., Any] | None = None,
    namespace: Mapping[str, Any] | None = None,
    base: Stance | None = None,
) -> Stance:
    """Validate a stance request and return it as a :class:`Stance`.

    ``name=None`` means ``base`` (the session stance) with the given flags.
    Raises :class:`StanceError` for an unknown stance (with a did-you-mean
    and, for a stance of a newer torch, the torch it needs), a backend with
    a non-default stance, or an unknown backend.
    """
    if name is None:
        base = base or Stance()
        name = base.name
        skip_guard_eval_unsafe = skip_guard_eval_unsafe or base.skip_guard_eval_unsafe
        if backend is None:
            backend = base.backend
    supported = supported_stances()
    if name not in supported:
        hint = probe.missing_stance_hint(name)
        if hint:
            raise StanceError(hint)
        raise StanceError(
            f"unknown stance {name!r}{_did_you_mean(name, supported)}"
            f"; this torch has: {', '.join(supported)}"
        )
    if backend is not None and name != "default":
        raise StanceError(
            f"a backend can only be forced with the 'default' stance, not {name!r} "
            "(torch: non-default stance cannot have force_backend set)"
        )
    return Stance(name, bool(skip_guard_eval_unsafe), resolve_backend(backend, namespace))


def current_stance() -> Stance:
    """The stance torch.compile is under right now.

    Examples
    --------
    >>> import stance_magic
    >>> stance_magic.current_stance()
    Stance(name='default', skip_guard_eval_unsafe=False, backend=None)
    """
    return Stance(*probe.torch_stance())


def _apply(stance: Stance) -> None:
    probe.set_stance(stance.name, stance.skip_guard_eval_unsafe, stance.backend)


SKIP_GUARD_WARNING = (
    "skip_guard_eval_unsafe assumes the compiled code is warmed up and that no "
    "further recompiles are needed: only the guards that tell cache entries "
    "apart run. If that assumption is wrong, results are silently wrong."
)


class Engine:
    """Owns the session stance, the cell stance, the measuring and the history.

    Front ends (magics, panel) call its methods and subscribe with
    :meth:`observe`; events are ``("session", Stance)``, ``("cell", Stance)``
    when a cell starts under a stance, ``("report", CellReport)``,
    ``("watch", bool)``, ``("reset", None)`` (``("reset", "pending")`` when it
    waits for the running cell), ``("applied", Stance)`` when a session stance
    that waited for the running cell takes effect, ``("undone", (Stance, Stance))``
    when a block under :meth:`applied` set a stance of its own that was then
    replaced by the one from before the block, ``("unrestored", (Stance,
    Exception))`` when torch refused to take the stance from before the block
    back: that stance stays the session stance and is applied again by
    :meth:`retry_restore` (the magics call it before every cell), and
    ``("note", str)`` from :meth:`announce`.
    """

    def __init__(self) -> None:
        self.history: list[Any] = []
        self.watch = False
        self._listeners: list[Callable[[str, Any], None]] = []
        self._cell_depth = 0
        self._cell_thread: int | None = None
        self._pending_session: Stance | None = None
        self._pending_reset = False
        self._recorder: probe.Recorder | None = None
        self._warned_skip_guard = False
        self._last_session: Stance | None = None
        #: the session stance when torch refused to take it back after a block
        self._unapplied: Stance | None = None
        #: bumped when blocks still open at the end of a cell are detached
        self._generation = 0
        #: measurements not finished yet, oldest first
        self._open_measures: list[Measurement] = []

    # -- observers ---------------------------------------------------------
    def observe(self, fn: Callable[[str, Any], None]) -> None:
        if fn not in self._listeners:
            self._listeners.append(fn)

    def unobserve(self, fn: Callable[[str, Any], None]) -> None:
        while fn in self._listeners:
            self._listeners.remove(fn)

    def announce(self, text: str) -> None:
        """Tell every front end something it should show (a ``("note", text)``
        event): a panel uses it so that all open panels say the same thing."""
        self._emit("note", text)

    def _emit(self, event: str, value: Any) -> None:
        for fn in list(self._listeners):
            try:
                fn(event, value)
            except Exception:
                import traceback

                traceback.print_exc()

    # -- the session stance -----------------------------------------------
    @property
    def session(self) -> Stance:
        """The session stance: what cells run under without ``%%stance``."""
        if self._pending_session is not None:
            return self._pending_session
        if self._cell_depth and self._last_session is not None:
            return self._last_session
        if self._unapplied is not None:
            return self._unapplied
        return current_stance()

    @property
    def in_cell(self) -> bool:
        return self._cell_depth > 0

    @property
    def deferring(self) -> bool:
        """Whether a change asked for now waits for the running cell to end:
        inside a block under :meth:`applied`, or from another thread than the
        running cell's (a widget message that a kernel handles while a cell
        runs, as ipykernel 7 does for JupyterLab's comms over subshells)."""
        if self._cell_depth:
            return True
        return self._cell_thread is not None and threading.get_ident() != self._cell_thread

    def cell_started(self) -> None:
        """A front end starts running a cell (IPython's ``pre_run_cell``): until
        :meth:`cell_ended`, changes from other threads wait for it."""
        self._cell_thread = threading.get_ident()

    def cell_ended(self) -> None:
        """The running cell ended (``post_run_cell``): apply what waited for it.
        Safe to call more than once."""
        self._cell_thread = None
        if self._cell_depth:
            return
        if self._pending_reset:  # first, so that the last word is the stance in effect
            self._pending_reset = False
            self._reset_now()
        if self._pending_session is not None:
            after, self._pending_session = self._pending_session, None
            if after != current_stance():
                self._restore(after)
            self._last_session = after
            self._emit("applied", after)

    def set_session(self, stance: Stance) -> Stance:
        """Make ``stance`` the session stance; return the previous one.

        While a cell runs under a cell stance, or when asked from another
        thread while a cell runs (see :attr:`deferring`), the change is kept
        and takes effect when that cell ends.
        """
        previous = self.session
        if self.deferring:
            self._pending_session = stance
        else:
            _apply(stance)
            self._last_session = stance
            self._unapplied = None
        if stance != previous:
            self._emit("session", stance)
        return previous

    def sync(self) -> None:
        """Tell observers if the session stance changed outside the engine
        (a direct ``torch.compiler.set_stance`` call in a cell)."""
        if self._cell_depth or not self.retry_restore():
            return
        now = current_stance()
        if now != self._last_session:
            self._last_session = now
            self._emit("session", now)

    def new_session(self) -> None:
        """A shell loaded the extension: one-per-session warnings show again."""
        self._warned_skip_guard = False

    def take_skip_guard_warning(self, stance: Stance) -> str | None:
        """The skip_guard_eval_unsafe warning, the first time a session asks."""
        if stance.skip_guard_eval_unsafe and not self._warned_skip_guard:
            self._warned_skip_guard = True
            return SKIP_GUARD_WARNING
        return None

    def retry_restore(self) -> bool:
        """Apply the session stance again if torch refused to take it back
        after a block (see the ``"unrestored"`` event); True when torch has
        the session stance now (or nothing was left to apply)."""
        stance = self._unapplied
        if stance is None or self._cell_depth:
            return stance is None
        try:
            _apply(stance)
        except Exception:
            return False
        self._unapplied = None
        return True

    def _restore(self, stance: Stance) -> None:
        """Give torch back ``stance`` after a block; if torch refuses, keep
        meaning it (it is still the session stance) and say so, rather than
        lose it or hide the block's own exception."""
        try:
            _apply(stance)
        except BaseException as err:
            if not self._cell_depth:
                self._unapplied = stance
            if not isinstance(err, Exception):
                raise  # a KeyboardInterrupt is never swallowed
            self._emit("unrestored", (stance, err))
        else:
            if not self._cell_depth:
                self._unapplied = None

    # -- applying a stance to a block -------------------------------------
    @contextlib.contextmanager
    def applied(self, stance: Stance) -> Iterator[Stance]:
        """Run a block under ``stance``; the stance before it is back after,
        whatever happens in the block (an exception, a KeyboardInterrupt).

        If torch refuses to take the stance before back (the block ends while
        this thread is inside a compiled region), that stance stays the
        session stance: an ``"unrestored"`` event says so and
        :meth:`retry_restore` applies it later.
        """
        self.retry_restore()
        before = now = current_stance()
        if not self._cell_depth:
            before = self._unapplied or now
            self._last_session = before
        if stance != now:
            _apply(stance)
        self._cell_depth += 1
        generation = self._generation
        try:
            if self._cell_depth == 1:
                self._emit("cell", stance)
            yield stance
        finally:
            if generation == self._generation:
                self._close_block(stance, before)
            # else: detached by end_of_cell, which gave the session stance back

    def _close_block(self, stance: Stance, before: Stance) -> None:
        """The end of an :meth:`applied` block: the stance before it is back."""
        self._cell_depth -= 1
        waited = self._cell_depth == 0 and self._pending_session is not None
        if waited:
            after, self._pending_session = self._pending_session, None
            self._last_session = after
        else:
            after = before
        now = current_stance()
        if now != after:  # also undoes a change made by the block
            if now != stance:
                # the block called torch.compiler.set_stance itself
                self._emit("undone", (now, after))
            self._restore(after)
        if waited:
            self._emit("applied", after)

    def end_of_cell(self) -> str | None:
        """A front end's cell has ended (the outermost one, after its own
        blocks closed). Blocks still open belong to code suspended inside
        them, such as a generator paused within ``with stance_magic.measure():``.
        They are detached: the session stance is given back now (a pending
        ``%stance`` change takes effect), their measurements end here with a
        note, and when the suspended code finishes later it changes nothing.
        Returns what to tell the user, or None when nothing was open.
        """
        if not self._cell_depth and not self._open_measures:
            return None
        blocks, measures = self._cell_depth, list(self._open_measures)
        self._generation += 1
        self._cell_depth = 0
        after = self._pending_session or self._last_session or current_stance()
        self._pending_session = None
        note = (
            "this block was still open when its cell ended (a generator suspended inside "
            "it?): measured up to the end of that cell"
        )
        for m in measures:
            m.finish(None, note=note)
        if current_stance() != after:
            self._restore(after)
        self._last_session = after
        n = max(blocks, len(measures))
        return (
            f"{n} stance_magic block{'s' if n != 1 else ''} (measure() or applied()) opened "
            "in this cell did not close (a generator suspended inside one?): "
            f"ended here; the session stance {after} is back for the next cell"
        )

    # -- measuring ----------------------------------------------------------
    @property
    def recorder(self) -> probe.Recorder:
        """The recorder; it hooks into torch only while a block is measured."""
        if self._recorder is None:
            self._recorder = probe.Recorder()
        return self._recorder

    @contextlib.contextmanager
    def measure(
        self,
        stance: Stance | None = None,
        *,
        source: str = "",
        label: str | None = None,
        record: bool = True,
        profile_guards: bool = False,
        memory: bool = False,
    ) -> Iterator[Any]:
        """Run a block under ``stance`` (None: the session stance) and measure it.

        Yields a :class:`~stance_magic.report.CellReport` that is filled in
        when the block ends; with ``record`` it is appended to the history
        and sent to observers. An exception in the block propagates
        unchanged after the report records it. ``profile_guards`` measures
        every cache lookup with torch's profiler (instead of timing the
        lookups of the called functions in situ); ``memory`` measures the
        bytes torch allocates (see :class:`~stance_magic.probe.CellProfiler`).
        """
        stance = stance or self.session
        with self.applied(stance):
            m = self.start_measure(
                stance,
                source=source,
                label=label,
                record=record,
                profile_guards=profile_guards,
                memory=memory,
            )
            try:
                yield m.report
            except BaseException as exc:
                m.finish(exc)
                raise
            m.finish(None)

    def start_measure(
        self,
        stance: Stance | None = None,
        *,
        source: str = "",
        label: str | None = None,
        record: bool = True,
        profile_guards: bool = False,
        memory: bool = False,
    ) -> Measurement:
        """Start measuring without applying a stance (``%stance watch``);
        call :meth:`Measurement.finish` when the block is over."""
        return Measurement(
            self, stance or current_stance(), source, label, record, profile_guards, memory
        )

    def reset_compiled_code(self) -> None:
        """Forget all compiled code (``torch.compiler.reset()``); keep history.

        Asked for from another thread while a cell runs, it waits for that cell
        to end (resetting under running compiled code is not safe)."""
        if self._cell_thread is not None and threading.get_ident() != self._cell_thread:
            self._pending_reset = True
            self._emit("reset", "pending")
            return
        self._reset_now()

    def _reset_now(self) -> None:
        probe.reset_compiled_code()
        self._emit("reset", None)

    def set_watch(self, on: bool) -> None:
        if on != self.watch:
            self.watch = on
            self._emit("watch", on)

    def add_report(self, report: Any) -> None:
        """Append a finished report to the history and tell observers (for a
        measurement started with ``record=False`` that turned out worth
        keeping, as ``%stance watch`` decides after the cell)."""
        self.history.append(report)
        self._emit("report", report)

    def clear_history(self) -> None:
        self.history.clear()

    def close(self) -> None:
        """Remove every hook the engine installed in torch; blocks still open
        (a suspended generator's) are detached and their measurements ended."""
        for m in list(self._open_measures):
            m.finish(None, note="stance_magic was unloaded while this block was open")
        if self._cell_depth:
            self._generation += 1
            self._cell_depth = 0
            self._pending_session = None
        if self._recorder is not None:
            self._recorder.uninstall()
            self._recorder = None
        _cache_watch_uninstall()
        self._listeners.clear()
        self.watch = False
        self._cell_thread = None


class Measurement:
    """One open measuring window; :meth:`finish` closes it once."""

    def __init__(
        self,
        engine: Engine,
        stance: Stance,
        source: str,
        label: str | None,
        record: bool,
        profile_guards: bool = False,
        memory: bool = False,
    ) -> None:
        from .report import CellReport

        self.engine = engine
        self.stance = stance
        self.source = source
        self.label = label
        self.record = record
        self.report = CellReport(stance=stance.name)
        self._recorder = engine.recorder
        self._done = False
        self._mark = self._recorder.start()
        self._cache_mark = _cache_watch_start()
        engine._open_measures.append(self)
        self._profiler: probe.CellProfiler | None = None
        self._profiler_error: str | None = None
        if profile_guards or memory:
            try:
                self._profiler = probe.CellProfiler(lookups=profile_guards, memory=memory)
            except probe.ProfilerBusy as err:
                self._profiler_error = f"not measured with the profiler: {err}"
        self.report.memory_on = memory and self._profiler is not None
        self._t0 = time.perf_counter()

    def finish(self, error: BaseException | None = None, note: str | None = None) -> Any:
        """Stop the clocks and fill in :attr:`report` (idempotent)."""
        if self._done:
            return self.report
        wall = time.perf_counter() - self._t0
        self._done = True
        if self in self.engine._open_measures:
            self.engine._open_measures.remove(self)
        from .report import build_report

        profiled, memory = None, []
        if self._profiler is not None:
            profiled, memory = self._profiler.stop()
        window = self._recorder.stop(self._mark)
        window.profiled_lookups = profiled
        cache_events = _cache_watch_stop(self._cache_mark)
        build_report(
            self.report,
            window=window,
            stance=self.stance,
            wall_s=wall,
            error=error,
            source=self.source,
            label=self.label,
            index=len(self.engine.history) + 1,
        )
        _add_cache_figures(self.report, window, cache_events, self.engine.history)
        self.report.memory = memory
        for fig in memory:
            if fig.note:
                self.report.notes.append(fig.note)
        if self._profiler_error:
            self.report.notes.append(self._profiler_error)
        if note:
            self.report.notes.append(note)
        if self.record:
            self.engine.add_report(self.report)
        return self.report


_ENGINE: Engine | None = None


def get_engine() -> Engine:
    """The process's one engine, shared by the magics, the panel and the API."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Engine()
    return _ENGINE


def _cache_watch_start() -> Any:
    """Open a window on torch's compile-cache events (see probe_caches)."""
    from . import probe_caches

    try:
        return probe_caches.watch().start()
    except Exception:  # pragma: no cover - never fail a measurement over it
        return None


def _cache_watch_stop(mark: Any) -> list[Any]:
    from . import probe_caches

    if mark is None:
        return []
    try:
        return probe_caches.watch().stop(mark)
    except Exception:  # pragma: no cover
        return []


def _add_cache_figures(rep: Any, window: Any, events: list[Any], history: list[Any]) -> None:
    """Compile time by where it came from (the compile caches), on ``rep``."""
    if not window.records:
        return  # nothing compiled: no cache was consulted
    from . import warm
    from .report import add_cache_figures

    add_cache_figures(rep, window, events, history, loaded=warm.loaded_keys())


def _cache_watch_uninstall() -> None:
    import sys

    caches = sys.modules.get("stance_magic.probe_caches")
    if caches is not None:
        caches.watch().uninstall()
