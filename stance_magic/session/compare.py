"""``--compare`` (a stance against eager) and ``--sweep`` (every stance from
cold): the cell run around the engine's window, each run timed; the figures
are made by :mod:`stance_magic.builder.compare`, the results are
:mod:`stance_magic.report.compare`'s, their words :mod:`stance_magic.render.compare`'s."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import probe
from ..builder.compare import against_default, comparison
from ..report import CellReport
from ..report.results import CompareResult, SweepResult
from ..spec import MeasureSpec
from ..stance import Stance

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["DEFAULT_REPEAT", "MAX_REPEAT", "compare", "sweep"]

#: The most runs per side ``--compare --repeat N`` accepts.
MAX_REPEAT = 10_000
#: Runs per side without ``--repeat``: the first (warm-up) and four for the
#: steady state, enough for its median and interquartile range.
DEFAULT_REPEAT = 5


def _announce(announce: bool | Callable[[str], None], msg: str) -> None:
    """A notice, not an error: True prints it to stdout, a callable (the
    magics' display of a notice, text and HTML) shows it, False drops it.
    Never stderr, which Jupyter shows as an error box."""
    if callable(announce):
        announce(msg)
    elif announce:
        print(f"stance_magic: {msg}")


def _first_peak(meter: probe.CellProfiler) -> int | None:
    _, figures = meter.stop()
    return figures[0].peak_bytes if figures else None


def _peak_of(run: Callable[[], Any]) -> int | None:
    """Peak bytes of one run of the cell (the first device measured)."""
    meter = probe.CellProfiler(memory=True)
    try:
        run()
    finally:
        peak = _first_peak(meter)
    return peak


def _timed(run: Callable[[], Any], clock: Callable[[], float]) -> tuple[float, Any]:
    # on CUDA, each run is timed from and to an idle device (probe.sync_if_cuda)
    probe.sync_if_cuda()
    t0 = clock()
    value = run()
    probe.sync_if_cuda()
    return clock() - t0, value


def compare(
    engine: Engine,
    run: Callable[[], Any],
    spec: MeasureSpec,
    *,
    repeat: int = DEFAULT_REPEAT,
    announce: bool | Callable[[str], None] = True,
) -> CompareResult:
    """Run ``run`` ``repeat`` times under force_eager, then under ``spec.stance``.

    The eager runs come first, so the compiled runs see the compiled caches as
    the cell left them. Exceptions propagate after the stance is restored;
    the compiled runs' report is in the history also then, as measured.
    ``announce`` says that side effects repeat (see :func:`_announce`).

    With ``spec.memory``, peaks come from one more eager run and one more
    compiled run (steady state), each measured on its own so the timed runs
    stay clean, and from the first compiled run itself (the one that
    compiles cannot be run again), whose time the report flags.
    """
    stance = spec.stance or engine.session
    memory = spec.memory
    extra = " (+1 each to measure memory)" if memory else ""
    _announce(
        announce,
        f"--compare runs this cell {repeat}× under force_eager, then {repeat}× under "
        f"{stance}{extra}: its side effects repeat",
    )
    eager_runs: list[float] = []
    eager_peak = None
    with engine.applied(Stance("force_eager")):
        for _ in range(repeat):
            t, _value = _timed(run, engine.clock)
            eager_runs.append(t)
        if memory:
            eager_peak = _peak_of(run)
    compiled_runs: list[float] = []
    compiled_in: list[bool] = []  # did this run compile anything?
    value = None
    first_peak = steady_peak = None
    recorder = engine.recorder
    # measured without the memory profiler: the first run measures its own peak
    m_spec = replace(spec, stance=stance, memory=False)
    with engine.applied(stance):
        m = engine.open_measurement(m_spec)
        try:
            for i in range(repeat):
                before = recorder.compiles_so_far
                overhead = recorder.overhead_so_far
                if memory and i == 0:
                    meter = probe.CellProfiler(memory=True)
                    try:
                        t, value = _timed(run, engine.clock)
                    finally:
                        first_peak = _first_peak(meter)
                else:
                    t, value = _timed(run, engine.clock)
                # the recorder's own use of torch's profiler is not the run's
                compiled_runs.append(max(t - (recorder.overhead_so_far - overhead), 0.0))
                compiled_in.append(recorder.compiles_so_far != before)
        except BaseException as exc:
            m.finish(exc)  # a comparison that raised is in the history, as measured
            raise
        closed = m.close()
    if memory:
        with engine.applied(stance):
            steady_peak = _peak_of(run)
    made, se, sc, warnings, notes = comparison(
        eager_runs,
        compiled_runs,
        compiled_in,
        stance_name=stance.name,
        compile_s=closed.compile_s,
        memory=memory,
        eager_peak=eager_peak,
        first_peak=first_peak,
        steady_peak=steady_peak,
        # CUDA, once in use, stays in use: every run after it began synchronized
        synchronized=probe.cuda_in_use(),
    )
    rep = m.finish(None, compare=made, notes=[*notes, *warnings])
    return CompareResult(rep, eager_runs, compiled_runs, se, sc, value, warnings)


def sweep(
    engine: Engine,
    run: Callable[[], Any],
    stances: Sequence[Stance],
    spec: MeasureSpec | None = None,
    *,
    announce: bool | Callable[[str], None] = True,
) -> SweepResult:
    """Run the cell once per stance, ``torch.compiler.reset()`` before each.

    ``spec`` is what to measure (its stance is left out: each run has its
    own). A stance whose run raises (fail_on_recompile from cold caches, say)
    is a result: its report carries the error. KeyboardInterrupt stops the
    sweep. With ``spec.memory``, each stance runs a second time from cold,
    with memory measuring on, so its first-run peak is measured and its
    times stay clean.
    """
    spec = spec or MeasureSpec()
    if announce:
        names = ", ".join(str(s) for s in stances)
        times = (
            "twice per stance (the second run measures memory)"
            if spec.memory
            else "once per stance"
        )
        _announce(
            announce,
            f"--sweep runs this cell {times} ({names}), each run after "
            "torch.compiler.reset() and with Inductor's on-disk caches off: compiled code "
            "is forgotten and side effects repeat",
        )
    with probe.no_disk_caches():
        reports = [_sweep_run(engine, run, st, spec) for st in stances]
    return SweepResult(reports, memory=spec.memory, against=against_default(reports))


def _sweep_run(
    engine: Engine, run: Callable[[], Any], stance: Stance, spec: MeasureSpec
) -> CellReport:
    """One stance of a sweep from cold, its report published once, complete
    (its error and its memory run in)."""
    engine.reset_compiled_code()
    m_spec = replace(spec, stance=stance, label=f"sweep: {stance}", memory=False)
    error: BaseException | None = None
    with engine.applied(stance):
        m = engine.open_measurement(m_spec)
        try:
            run()
        except Exception as exc:
            error = exc
        except BaseException as exc:
            m.finish(exc)
            raise
        m.close(error)
    if not spec.memory:
        return m.finish(error)
    figures = _first_run_memory(engine, run, stance)
    note = "memory (-m): from a second run of this stance, from cold"
    return m.finish(error, memory=figures, notes=[note])


def _first_run_memory(engine: Engine, run: Callable[[], Any], stance: Stance) -> list[Any]:
    """The memory figures of one run from cold under ``stance`` (not timed,
    not in the history); a run that raises still has its figures."""
    engine.reset_compiled_code()
    meter = probe.CellProfiler(memory=True)
    try:
        with engine.applied(stance):
            run()
    except Exception:
        pass
    finally:
        _, figures = meter.stop()
    return figures
