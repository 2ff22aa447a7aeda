"""The stance engine: stance state, applying and measuring.

No IPython here. The magics and the widget panel are thin views of the one
:class:`Engine` returned by :func:`get_engine`; neither keeps a copy of the
state. Stances are applied through torch's own ``torch.compiler.set_stance``
(via :mod:`stance_magic.probe`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from .. import probe
from ..spec import MeasureSpec
from .cells import CellTracker
from .measurement import Measured, Measurement
from .observers import Observers

if TYPE_CHECKING:
    from ..report import CellReport

from ..stance import Stance, current_stance

__all__ = ["SKIP_GUARD_WARNING", "Engine", "get_engine", "reset_note"]


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


def _now(likely: Stance) -> Stance:
    """The stance torch has now: ``likely`` itself when torch has that one
    (the usual case, so no new value is made), else what torch has."""
    now = current_stance()
    if now is likely or now == likely:
        return likely
    return now


def _apply(stance: Stance) -> None:
    probe.set_stance(stance.name, stance.skip_guard_eval_unsafe, stance.backend)


SKIP_GUARD_WARNING = (
    "skip_guard_eval_unsafe assumes the compiled code is warmed up and that no "
    "further recompiles are needed: only the guards that tell cache entries "
    "apart run. If that assumption is wrong, results are silently wrong."
)


#: seconds, monotonic
Clock = Callable[[], float]


class Engine:
    """Owns the session stance, the cell stance, the measuring and the history.

    Front ends (magics, panel) call its methods and subscribe (``observe``, of its
    ``observers``); events are ``("session", Stance)``, ``("cell", Stance)``
    when a cell starts under a stance, ``("report", CellReport)``,
    ``("watch", bool)``, ``("reset", None)`` (``("reset", "pending")`` when it
    waits for the running cell), ``("applied", Stance)`` when a session stance
    that waited for the running cell takes effect, ``("undone", (Stance, Stance))``
    when a block under :meth:`applied` set a stance of its own that was then
    replaced by the one from before the block, ``("unrestored", (Stance,
    Exception))`` when torch refused to take the stance from before the block
    back: that stance stays the session stance and is applied again by
    :meth:`retry_restore` (the magics call it before every cell), and
    ``("note", str)`` from :meth:`announce`, ``("trace_next", str | None)``
    from :meth:`set_trace_next` and ``("traced", str)`` when a measurement
    took that directory.
    """

    def __init__(self) -> None:
        self.history: list[CellReport] = []
        self.watch = False
        #: the front end's running cells, which the magics and panels share
        self.cells = CellTracker(self.cell_started, self.cell_ended)
        self.observers = obs = Observers()
        self.observe, self.unobserve, self.announce = obs.observe, obs.unobserve, obs.announce
        #: open applied() blocks (a %%stance cell's stance, measure()); the
        #: front end's running cells are counted by self.cells
        self._cell_depth = 0
        self._cell_thread: int | None = None
        self._pending_session: Stance | None = None
        self._pending_reset = False
        self._recorder: probe.Recorder | None = None
        self._watches: tuple[probe.Watch, ...] | None = None
        self._warned_skip_guard = False
        self._warned_torch: set[str] = set()
        self._last_session: Stance | None = None
        #: the session stance when torch refused to take it back after a block
        self._unapplied: Stance | None = None
        #: bumped when blocks still open at the end of a cell are detached
        self._generation = 0
        #: measurements not finished yet, oldest first
        self._open_measures: list[Measurement] = []
        #: a directory: the next measured cell is traced there (the panel's
        #: "trace next cell"), then this is cleared (a ``("traced", directory)`` event)
        self.trace_next: str | None = None
        #: what every measurement reads time from (seconds), and the measuring
        #: thread's CPU time beside it; tests set fakes with :meth:`use_clock`
        self.clock: Clock = time.perf_counter
        self.cpu_clock: Clock = time.thread_time

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
            self.observers.emit("applied", after)

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
            self.observers.emit("session", stance)
        return previous

    def apply(self, stance: Stance) -> None:
        """Give torch ``stance`` now, outside any block (the extension's
        unload gives back the stance from before its load)."""
        _apply(stance)

    def sync(self) -> None:
        """Tell observers if the session stance changed outside the engine
        (a direct ``torch.compiler.set_stance`` call in a cell)."""
        if self._cell_depth or not self.retry_restore():
            return
        now = current_stance()
        if now != self._last_session:
            self._last_session = now
            self.observers.emit("session", now)

    def new_session(self) -> None:
        """A shell loaded the extension: one-per-session warnings show again."""
        self._warned_skip_guard = False
        self._warned_torch.clear()

    def take_torch_warning(self, stance: Stance) -> str | None:
        """A warning about the installed torch under ``stance`` (torch 2.8's
        delayed-compile stances), the first time a session asks."""
        if stance.name in self._warned_torch:
            return None
        self._warned_torch.add(stance.name)  # asked once a session per stance
        msg = probe.delayed_stance_warning(stance.name)
        if msg is None or msg in self._warned_torch:
            return None
        self._warned_torch.add(msg)
        return msg

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
            self.observers.emit("unrestored", (stance, err))
        else:
            if not self._cell_depth:
                self._unapplied = None

    # -- applying a stance to a block -------------------------------------
    def applied(self, stance: Stance) -> Applied:
        """Run a block under ``stance`` (a context manager); the stance before
        it is back after, whatever happens in the block (an exception, a
        KeyboardInterrupt).

        If torch refuses to take the stance before back (the block ends while
        this thread is inside a compiled region), that stance stays the
        session stance: an ``"unrestored"`` event says so and
        :meth:`retry_restore` applies it later.
        """
        return Applied(self, stance)

    def _open_block(self, stance: Stance) -> tuple[Stance, int]:
        """The start of an :meth:`applied` block: (the stance to give back,
        the generation of blocks it belongs to)."""
        if self._unapplied is not None:
            self.retry_restore()
        now = _now(stance)
        before = now
        if not self._cell_depth:
            before = self._unapplied or now
            self._last_session = before
        if stance is not now and stance != now:
            _apply(stance)
        self._cell_depth += 1
        if self._cell_depth == 1:
            self.observers.emit("cell", stance)
        return before, self._generation

    def _close_block(self, stance: Stance, before: Stance, keep_own: bool = False) -> None:
        """The end of an :meth:`applied` block: the stance before it is back.

        ``keep_own``: the block named no stance (``measure()`` without one),
        so a stance its own code set stays, as it would unmeasured (a
        session stance chosen meanwhile still takes effect)."""
        self._cell_depth -= 1
        # a session stance chosen while the outermost block ran takes effect now
        waited = self._pending_session if self._cell_depth == 0 else None
        after = before
        if waited is not None:
            after, self._pending_session = waited, None
            self._last_session = after
        now = _now(after)
        if now is not after and now != after:  # also undoes a change made by the block
            if now != stance:
                # the block called torch.compiler.set_stance itself
                if keep_own and waited is None:
                    return
                self.observers.emit("undone", (now, after))
            self._restore(after)
        if waited is not None:
            self.observers.emit("applied", after)

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
    def watches(self) -> tuple[probe.Watch, ...]:
        """The watches every block is measured with, in the order they open
        (see :mod:`stance_magic.probe.watch`): the recorder, torch's
        compile-cache events, CUDA graphs."""
        watches = self._watches
        if watches is None or watches[0] is not self._recorder:
            watches = self._watches = (
                self.recorder,
                probe.cache_watch(),
                probe.cudagraph_watch(),
            )
        return watches

    @property
    def recorder(self) -> probe.Recorder:
        """The recorder; it hooks into torch only while a block is measured."""
        if self._recorder is None:
            self._recorder = probe.Recorder()
            if self.clock is not time.perf_counter:
                self._recorder.use_clock(self.clock, self.cpu_clock)
        return self._recorder

    def use_clock(self, clock: Clock | None, cpu: Clock | None = None) -> None:
        """Measure on ``clock`` (seconds, monotonic; None: ``time.perf_counter``)
        from the next block on: the wall time, ``--compare``'s runs and the
        recorder's every reading; the thread's CPU time on ``cpu`` (see
        ``probe.clocks``). For tests, as pyinstrument's fake clock: figures
        that are arithmetic over readings come out exact."""
        if self._open_measures:
            raise RuntimeError("the clock changes only between measured blocks")
        self.clock, self.cpu_clock = probe.clocks(clock, cpu)
        if self._recorder is not None:
            self._recorder.use_clock(self.clock, self.cpu_clock)

    def measure(self, spec: MeasureSpec | None = None) -> Measuring:
        """Run a block under ``spec.stance`` (None: the session stance, and a
        stance the block's own code sets stays after it) and measure it (see
        :class:`~stance_magic.spec.MeasureSpec`): a context manager.

        It yields a :class:`~stance_magic.session.measurement.Measured`: the block's
        report once the block has ended, built whole, then published (the
        history, the observers' ``("report", rep)``). An exception in the
        block propagates unchanged after the report records it.
        """
        spec = spec or _NO_SPEC
        spec.check()
        return Measuring(self, spec)

    def open_measurement(
        self, spec: MeasureSpec | None = None, stance: Stance | None = None
    ) -> Measurement:
        """Open a measuring window without applying a stance (a watched cell,
        ``--compare``'s and ``--sweep``'s runs inside their own
        :meth:`applied` blocks); :meth:`Measurement.finish` closes it,
        builds its report and publishes it. ``stance``: the stance the block
        runs under (None: ``spec.stance``, else the stance torch has now).
        The panel's "trace next cell" is taken here."""
        spec = spec or _NO_SPEC
        if stance is None:
            stance = spec.stance or current_stance()
        if spec.trace is None and self.trace_next is not None:
            spec = replace(spec, trace=self.trace_next)
            self.trace_next = None
            self.observers.emit("traced", spec.trace)
        return Measurement(self, spec, stance)

    def opened(self, m: Measurement) -> None:
        """A measurement opened (it ends with the cell that opened it, at the latest)."""
        self._open_measures.append(m)

    def closed(self, m: Measurement) -> None:
        """A measurement closed its window."""
        if m in self._open_measures:
            self._open_measures.remove(m)

    def reset_compiled_code(self) -> None:
        """Forget all compiled code (``torch.compiler.reset()``); keep history.

        Asked for from another thread while a cell runs, it waits for that cell
        to end (resetting under running compiled code is not safe)."""
        if self._cell_thread is not None and threading.get_ident() != self._cell_thread:
            self._pending_reset = True
            self.observers.emit("reset", "pending")
            return
        self._reset_now()

    def _reset_now(self) -> None:
        probe.reset_compiled_code()
        self.observers.emit("reset", None)

    def set_trace_next(self, directory: str | None) -> None:
        """Trace the next measured cell into ``directory`` (None: do not);
        observers get a ``("trace_next", directory)`` event."""
        if directory != self.trace_next:
            self.trace_next = directory
            self.observers.emit("trace_next", directory)

    def set_watch(self, on: bool) -> None:
        if on != self.watch:
            self.watch = on
            self.observers.emit("watch", on)

    def publish(self, report: CellReport) -> None:
        """Append a finished report to the history and tell observers."""
        self.history.append(report)
        self.observers.emit("report", report)

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
        probe.uninstall_watches()  # the compile-cache and CUDA-graph watches
        self.observers.clear()
        self.watch = False
        self._cell_thread = None
        self.cells.reset()


class Applied:
    """A block under a stance (:meth:`Engine.applied`): the stance before it
    is back when it ends, whatever happens in it."""

    __slots__ = ("_before", "_engine", "_generation", "_stance")

    def __init__(self, engine: Engine, stance: Stance) -> None:
        self._engine = engine
        self._stance = stance

    def __enter__(self) -> Stance:
        self._before, self._generation = self._engine._open_block(self._stance)
        return self._stance

    def __exit__(self, *exc: object) -> None:
        engine = self._engine
        if self._generation == engine._generation:
            engine._close_block(self._stance, self._before)
        # else: detached by end_of_cell, which gave the session stance back


class Measuring:
    """A measured block (:meth:`Engine.measure`): under its stance, measured,
    its report built and published when it ends."""

    __slots__ = ("_before", "_engine", "_generation", "_m", "_spec", "_stance")

    def __init__(self, engine: Engine, spec: MeasureSpec) -> None:
        self._engine = engine
        self._spec = spec

    def __enter__(self) -> Measured:
        engine = self._engine
        stance = self._stance = self._spec.stance or engine.session
        # the block under its stance, as Engine.applied (inlined: a cell pays it)
        self._before, self._generation = engine._open_block(stance)
        try:
            self._m = engine.open_measurement(self._spec, stance)
        except BaseException:
            self._close()
            raise
        return Measured(self._m)

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self._m.finish(exc)
        finally:
            self._close()

    def _close(self) -> None:
        engine = self._engine
        if self._generation == engine._generation:
            # a block that names no stance leaves one its code set
            engine._close_block(self._stance, self._before, keep_own=self._spec.stance is None)


#: What a block is measured with when nothing is asked for.
_NO_SPEC = MeasureSpec()

_ENGINE: Engine | None = None


def get_engine() -> Engine:
    """The process's one engine, shared by the magics, the panel and the API."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Engine()
    return _ENGINE
