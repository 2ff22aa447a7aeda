"""``--compare`` (a stance against eager) and ``--sweep`` (every stance from cold)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import probe
from .render import MAX_DETAILS, html_table, report_html, report_text, text_table
from .render.labels import LOOKUPS_COLUMN, PEAK_MEMORY
from .report import CellReport, Comparison
from .spec import MeasureSpec
from .stance import Stance
from .text import fmt_bytes, fmt_s, shorten

if TYPE_CHECKING:
    from .session.engine import Engine

#: Spread above which a steady-state figure is flagged as not to be trusted:
#: interquartile range over median (torch.utils.benchmark flags 10 %; the
#: range stands in below four steady runs), or slowest over fastest run
#: (%timeit warns at 4x).
IQR_LIMIT = 0.10
RATIO_LIMIT = 4.0

#: The most runs per side ``--compare --repeat N`` accepts.
MAX_REPEAT = 10_000
#: Runs per side without ``--repeat``: the first (warm-up) and four for the
#: steady state, enough for its median and interquartile range.
DEFAULT_REPEAT = 5


@dataclass
class Steady:
    """Steady-state timing of repeated runs: warm-up (the first run) excluded."""

    runs: list[float]
    median: float
    low: float
    high: float
    iqr: float
    n: int
    warning: str | None = None

    @classmethod
    def of(cls, runs: Sequence[float], what: str, warmup: int = 1) -> Steady:
        """Steady state of ``runs``: the first ``warmup`` runs excluded (all
        but the last if that leaves none)."""
        runs = list(runs)
        warmup = min(max(warmup, 1), len(runs) - 1) if len(runs) > 1 else 0
        steady = runs[warmup:]
        med = statistics.median(steady)
        if len(steady) >= 4:
            q = statistics.quantiles(steady, n=4)
            iqr = q[2] - q[0]
        else:
            iqr = max(steady) - min(steady)
        warning = None
        if len(runs) == 1:
            warning = f"{what}: one run only, no warm-up excluded (use --repeat 5 or more)"
        elif len(steady) >= 2 and med > 0 and iqr / med > IQR_LIMIT:
            # under four runs there are no quartiles: the range stands in
            spread = "IQR" if len(steady) >= 4 else "range"
            warning = (
                f"{what}: spread too wide to trust ({spread} {iqr / med:.0%} of the median "
                f"over {len(steady)} runs)"
            )
        elif min(steady) > 0 and max(steady) / min(steady) > RATIO_LIMIT:
            warning = f"{what}: the slowest run took {max(steady) / min(steady):.1f}× the fastest"
        return cls(steady, med, min(steady), max(steady), iqr, len(steady), warning)


def _announce(announce: bool | Callable[[str], None], msg: str) -> None:
    """A notice, not an error: True prints it to stdout, a callable (the
    magics' display of a notice, text and HTML) shows it, False drops it.
    Never stderr, which Jupyter shows as an error box."""
    if callable(announce):
        announce(msg)
    elif announce:
        print(f"stance_magic: {msg}")


@dataclass
class CompareResult:
    """The cell under ``force_eager`` and under a stance, side by side."""

    report: CellReport
    eager_runs: list[float]
    compiled_runs: list[float]
    eager_steady: Steady
    compiled_steady: Steady
    value: Any = None
    warnings: list[str] = field(default_factory=list)

    def text(
        self, max_details: int = MAX_DETAILS, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report (with its hints unless ``hints`` is False; every row
        with ``verbose``), then every run's time."""
        lines = self.advice() if hints else ()
        return f"{report_text(self.report, max_details, verbose, lines)}\n{self._runs()}"

    def html(
        self, max_details: int = MAX_DETAILS, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report (the spread warnings are in its notes already)."""
        return report_html(self.report, max_details, verbose, self.advice() if hints else ())

    def views(
        self, max_details: int = MAX_DETAILS, verbose: bool = False, hints: bool = True
    ) -> tuple[str, str]:
        """(text, HTML), the hints drawn once for both."""
        lines = self.advice() if hints else ()
        return (
            f"{report_text(self.report, max_details, verbose, lines)}\n{self._runs()}",
            report_html(self.report, max_details, verbose, lines),
        )

    def _runs(self) -> str:
        """Every run's time, eager then compiled."""
        return (
            "  runs: eager "
            + ", ".join(fmt_s(t) for t in self.eager_runs)
            + " | compiled "
            + ", ".join(fmt_s(t) for t in self.compiled_runs)
        )

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()

    def figure(self) -> Any:
        from .plots import compare_figure

        return compare_figure(self)

    def advice(self) -> list[str]:
        from .advice import advise

        return advise(self.report)


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


def break_even(
    warmup_total: float, compiled: float, eager: float, warmup_runs: int = 1
) -> int | None:
    """Runs after which compiling has paid for itself, or None if it never does.

    The first ``warmup_runs`` compiled runs (the ones that compiled) cost
    ``warmup_total`` together; after k >= warmup_runs runs the compiled cell
    has cost ``warmup_total + (k - warmup_runs) * compiled`` and the eager one
    ``k * eager``. The smallest such k where compiled is no dearer is
    ``ceil((warmup_total - warmup_runs * compiled) / (eager - compiled))``.
    """
    if eager <= compiled:
        return None
    k = math.ceil((warmup_total - warmup_runs * compiled) / (eager - compiled))
    return max(warmup_runs, k, 1)


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
    notes: list[str] = []
    if memory:
        with engine.applied(stance):
            steady_peak = _peak_of(run)
        notes.append(
            f"{PEAK_MEMORY} (-m): eager and steady compiled from one extra run each; "
            "the first compiled run was timed with memory measuring on"
        )
    # Warm-up: every run up to the last one that compiled (eager_then_compile
    # compiles on its second run, a recompile can come later still).
    warmup = max((i + 1 for i, c in enumerate(compiled_in) if c), default=1)
    se = Steady.of(eager_runs, "eager")
    sc = Steady.of(compiled_runs, "compiled", warmup=warmup)
    warnings = [w for w in (se.warning, sc.warning) if w]
    if repeat == 1:
        # No steady state: take the compiled run without its compile time.
        sc.median = max(compiled_runs[0] - closed.compile_s, 0.0)
        warnings = [
            "one run each: steady state estimated as the compiled run minus its compile "
            "time (use --repeat 5 or more)"
        ]
    elif warmup >= repeat:
        warnings.append(
            f"the last of the {repeat} compiled runs still compiled: no steady state "
            "yet (use a larger --repeat)"
        )
    if not any(compiled_in) and stance.name == "eager_then_compile" and repeat < 3:
        warnings.append(
            "eager_then_compile runs the first call eagerly and compiles on the second: "
            "use --repeat 3 or more to see the compiled code"
        )
    w = min(warmup, len(compiled_runs))
    comparison = Comparison(
        eager_s=se.median,
        compiled_s=sc.median,
        speedup=se.median / sc.median if sc.median > 0 else None,
        break_even_calls=break_even(sum(compiled_runs[:w]), sc.median, se.median, w),
        runs={"eager": eager_runs, "compiled": compiled_runs},
        eager_peak_bytes=eager_peak,
        compiled_first_peak_bytes=first_peak,
        compiled_steady_peak_bytes=steady_peak,
        # CUDA, once in use, stays in use: every run after it began synchronized
        synchronized=probe.cuda_in_use(),
    )
    rep = m.finish(None, compare=comparison, notes=[*notes, *warnings])
    return CompareResult(rep, eager_runs, compiled_runs, se, sc, value, warnings)


@dataclass
class SweepResult:
    """One run of the cell per stance, each from cold compiled caches."""

    reports: list[CellReport]
    #: each stance's first-run memory was measured (a second run from cold)
    memory: bool = False

    def rows(self) -> list[list[str]]:
        out = []
        for r in self.reports:
            row = [
                r.stance_label,
                fmt_s(r.wall_s),
                fmt_s(r.compile_s),
                str(r.compiles),
                str(len(r.recompiles)),
                f"{r.cache_hits}/{r.cache_misses}",
                fmt_s(r.lookups.seconds),
            ]
            if self.memory:
                row.append(fmt_bytes(r.peak_bytes))
            row += [str(r.eager_fallbacks or r.refused_recompiles or ""), shorten(r.error or "")]
            out.append(row)
        return out

    @property
    def head(self) -> tuple[str, ...]:
        if not self.memory:
            return self.HEAD
        i = self.HEAD.index(LOOKUPS_COLUMN) + 1
        return (*self.HEAD[:i], PEAK_MEMORY, *self.HEAD[i:])

    HEAD = (
        "stance",
        "wall",
        "compile",
        "compiles",
        "recompiles",
        "hits/misses",
        LOOKUPS_COLUMN,
        "fallbacks/refused",
        "error",
    )

    CAPTION = "stance_magic sweep (each stance from cold compiled caches)"

    def against_default(self) -> list[Any]:
        """Each other stance's run against default's: a
        :class:`~stance_magic.report.CellDiff` each (``%stance diff default
        STANCE`` shows one whole); none without a default run."""
        from .builder.diff import diff_cells

        base = next((r for r in self.reports if r.stance_label == "default"), None)
        if base is None:
            return []
        return [diff_cells(base, r) for r in self.reports if r is not base]

    def _against_lines(self) -> list[str]:
        """One line per stance against default: its diff's headline, the
        cells named by their stances."""
        out = []
        for d in self.against_default():
            st = d.row("stance")
            name = st.b if st is not None else d.b
            line = d.headline.split(": ", 1)[1] if ": " in d.headline else d.headline
            # the stance is the line's name: not again as its cause
            line = line.replace(f": stance default → {name}, ", ": ").replace(
                f": stance default → {name}", ""
            )
            out.append(f"{name} vs default: {line}")
        return out

    def __str__(self) -> str:
        lines = self._against_lines()
        against = (
            "\n  each stance against default (%stance diff default STANCE for the rows):\n"
            + "\n".join(f"    {x}" for x in lines)
            if lines
            else ""
        )
        return self.caption + "\n" + text_table(self.head, self.rows(), indent="  ") + against

    def _repr_html_(self) -> str:
        import html

        lines = self._against_lines()
        against = (
            '<div style="font-size:12px;text-align:left">each stance against default '
            '(<code>%stance diff default STANCE</code> for the rows):<ul style="margin:0">'
            + "".join(f"<li>{html.escape(x)}</li>" for x in lines)
            + "</ul></div>"
            if lines
            else ""
        )
        return html_table(self.head, self.rows(), caption=self.caption) + against

    @property
    def caption(self) -> str:
        if self.memory:
            return self.CAPTION[:-1] + "; peak memory of a second first run of each)"
        return self.CAPTION

    def figure(self) -> Any:
        from .plots import sweep_figure

        return sweep_figure(self)

    def advice(self) -> list[str]:
        from .advice import advise_sweep

        return advise_sweep(self)


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
    return SweepResult(reports, memory=spec.memory)


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
