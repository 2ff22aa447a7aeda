"""The ``%stance`` line magic and ``%%stance`` cell magic: a thin view of the engine.

The options are declared once, with their help, in :mod:`stance_magic.frontend.options`
(``%stance?`` is generated from the parser), with the one table of which
options each form of the magic accepts, checked before anything runs. The
line forms (``%stance NAME``, ``%stance watch``, ``%stance history``, ...) are
plain functions of :mod:`stance_magic.frontend.commands`; the magic parses the line and
hands it to one. A cell's code runs as IPython runs it
(:mod:`stance_magic.frontend.execution`) and results are shown by
:mod:`stance_magic.frontend.display`. :class:`StanceMagics` is a traitlets
``Configurable``: ``%config StanceMagics.default_repeat = 10``, or
``c.StanceMagics.default_repeat = 10`` in ``ipython_config.py``.
"""

from __future__ import annotations

import copy
import functools
import shlex
import sys
from typing import Any, Callable, Protocol

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from traitlets import Bool, Int, TraitError, observe, validate

from ..notebook import cell_number
from ..probe import CompiledRegionError, TorchSupportError
from ..session.engine import Engine, get_engine
from ..spec import MeasureSpec
from ..stance import StanceError, make_stance, supported_stances
from .commands import LINE_COMMANDS, ranks_line, session_line, warn_before_running
from .display import notice, show, to_show
from .execution import after_cell, compile_cell
from .options import (
    COMMANDS,
    declare,
    finish_help,
    form_of,
    max_repeat,
    validate_args,
    word_problem,
)


class _View(Protocol):
    """What the result types of :attr:`StanceMagics.VIEWS` offer."""

    def text(self, max_details: int, verbose: bool, hints: bool) -> str: ...

    def html(self, max_details: int, verbose: bool, hints: bool) -> str: ...


@functools.lru_cache(maxsize=256)
def _parse_cached(line: str, cell: bool) -> tuple[Any, str]:
    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise UsageError(f"%stance: cannot parse {line!r}: {err}") from None
    parser = StanceMagics.stance.parser
    try:
        args = parser.parse_args(argv)
    except UsageError:
        # argparse refused an option; a wrong word of the line is the more
        # useful error, so it is looked for first
        problem = _word_problem_of(parser, argv, cell)
        if problem:
            raise UsageError(problem) from None
        raise
    form = form_of(args, cell)
    validate_args(args, form, parser)
    return args, form


def _word_problem_of(parser: Any, argv: list[str], cell: bool) -> str | None:
    """The first wrong word of a line argparse refused (see
    :func:`~stance_magic.frontend.options.word_problem`): its words as argparse reads
    them past the options it does not know, or, where an option itself is
    broken (``-b`` without its NAME), the words before the first option."""
    try:
        args, _ = parser.parse_known_args(argv)
    except UsageError:
        leading: list[str] = []
        for token in argv:
            if token.startswith("-"):
                break
            leading.append(token)
        try:
            args, _ = parser.parse_known_args(leading)
        except UsageError:
            return None
    return word_problem(args, form_of(args, cell))


def _parse(line: str, cell: bool, quiet: bool = False) -> tuple[Any, str]:
    """Parse and check the magic's line: its options and its form (cached: the
    same line parses and checks the same way; a refused line raises).
    ``quiet``: as if the line had -q. The cached options are shared, never
    written: a copy is made only where -q is added."""
    args, form = _parse_cached(line, cell)
    if quiet and not args.quiet:
        args = copy.copy(args)
        args.quiet = True
    return args, form


@magics_class
class StanceMagics(Magics):
    """Magics that run cells under a ``torch.compiler.set_stance`` stance.

    A traitlets ``Configurable``: its settings below can be changed with
    ``%config StanceMagics.NAME = VALUE`` in a cell, or given before
    ``%load_ext`` as ``c.StanceMagics.NAME = VALUE`` (an IPython profile's
    ``ipython_config.py``, or the config of ``InteractiveShell.instance``).
    """

    default_repeat = Int(
        5,
        config=True,
        help="Runs per side of a %%stance --compare cell without --repeat: the first "
        "run, and the rest for the steady state (1 to 10,000).",
    )
    plot = Bool(
        True,
        config=True,
        help="Draw a chart under a report where the front end shows images "
        "(--no-plot leaves it out for one cell).",
    )
    hints = Bool(True, config=True, help="Show the hints drawn from a report's numbers.")
    quiet = Bool(
        False,
        config=True,
        help="As if every %stance and %%stance line had -q: no report, no notice, no message.",
    )
    verbose = Bool(
        False,
        config=True,
        help="Show every row of a report, none folded, as %%stance -v does for one cell "
        "(off: a headline, its hints and the rows that matter for the cell).",
    )
    max_details = Int(
        8,
        config=True,
        help="Detail lines shown under a row of a report (recompiles, graph breaks, ...) "
        "before the rest are folded; every view of a report in the session follows it.",
    )
    watch = Bool(
        False,
        config=True,
        help="Report every cell that compiles, as %stance watch on does (the two follow "
        "each other).",
    )
    trace_functions = Bool(
        True,
        config=True,
        help="Time Dynamo's tracing by function with torch's dynamo_profiler (torch 2.13+: "
        "the report's 'tracing by function'; it adds under 3 % to a cold compile, "
        "benchmarks/bench_tracing.py).",
    )

    def __init__(self, shell: Any = None, engine: Engine | None = None, **kwargs: Any) -> None:
        self.engine = engine or get_engine()
        super().__init__(shell, **kwargs)
        #: (object, chart, verbose) to show when the cell has ended
        self._pending: list[tuple[Any, bool, bool]] = []
        self.engine.observe(self._on_engine, events=("watch", "undone", "unrestored"))
        if self.watch:
            self.engine.set_watch(True)

    # -- settings -------------------------------------------------------------
    @validate("default_repeat")
    def _check_repeat(self, proposal: Any) -> int:
        n: int = proposal["value"]
        if not 1 <= n <= max_repeat():
            raise TraitError(f"default_repeat must be 1 to {max_repeat():,}, not {n}")
        return n

    @validate("max_details")
    def _check_max_details(self, proposal: Any) -> int:
        n: int = proposal["value"]
        if n < 0:
            raise TraitError(f"max_details must be 0 or more, not {n}")
        return n

    @observe("watch")
    def _watch_changed(self, change: Any) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None and change["new"] != engine.watch:
            engine.set_watch(change["new"])

    #: The result types whose views fold details after ``max_details``:
    #: IPython's formatters show them through :meth:`_text_view` and
    #: :meth:`_html_view` while the extension is loaded.
    VIEWS = (
        ("stance_magic.report.cell", "CellReport"),
        ("stance_magic.report.results", "CompareResult"),
        ("stance_magic.report.ranks", "RankReport"),
    )

    def attach_views(self) -> None:
        """Register this session's views of the result types with IPython's
        formatters (by name: nothing is imported until one is shown), so
        every view of a report follows ``max_details``."""
        formatters = getattr(self.shell, "display_formatter", None)
        if formatters is None:
            return
        for module, name in self.VIEWS:
            formatters.formatters["text/plain"].for_type_by_name(module, name, self._text_view)
            formatters.formatters["text/html"].for_type_by_name(module, name, self._html_view)

    def _text_view(self, obj: _View, p: Any, cycle: bool) -> None:
        p.text(obj.text(self.max_details, self.verbose, self.hints))

    def _html_view(self, obj: _View) -> str:
        return obj.html(self.max_details, self.verbose, self.hints)

    def detach(self) -> None:
        """Undo what this instance set outside itself (unload)."""
        self.engine.unobserve(self._on_engine)
        formatters = getattr(self.shell, "display_formatter", None)
        if formatters is not None:
            for mime, view in (("text/plain", self._text_view), ("text/html", self._html_view)):
                f = formatters.formatters[mime]
                for module, name in self.VIEWS:
                    if f.deferred_printers.get((module, name)) == view:
                        del f.deferred_printers[(module, name)]
                    for cls, printer in list(f.type_printers.items()):
                        if (cls.__module__, cls.__name__) == (module, name) and printer == view:
                            del f.type_printers[cls]
        configurables = getattr(self.shell, "configurables", None)
        if configurables is not None and self in configurables:
            configurables.remove(self)

    def _on_engine(self, event: str, value: Any) -> None:
        if event == "watch":
            self.watch = bool(value)
        elif event == "undone":
            inside, back = value
            print(
                f"stance_magic: this cell set the stance to {inside} itself; a %%stance "
                f"cell's stance ends with the cell, so {back} is back "
                f"(use %stance {inside.name} to keep it for the session)",
                file=sys.stderr,
            )
        elif event == "unrestored":
            stance, err = value
            print(
                f"stance_magic: could not give torch the session stance {stance} back "
                f"after this cell ({err}); it is still the session stance and is applied "
                "again before the next cell",
                file=sys.stderr,
            )

    # -- the magic ----------------------------------------------------------
    @declare
    @no_var_expand
    @line_cell_magic
    def stance(self, line: str = "", cell: str | None = None) -> Any:
        __tracebackhide__ = True
        args, form = _parse(line, cell is not None, self.quiet)
        try:
            if cell is None:
                return self._line(args, form)
            return self._cell(args, cell)
        except (StanceError, TorchSupportError, CompiledRegionError) as err:
            raise UsageError(str(err)) from None

    def _namespace(self, args: Any) -> dict[str, Any] | None:
        """The user's names (not IPython's own), for -b NAME look-ups; None
        without -b, so an ordinary cell does not copy the namespace."""
        if not args.backend:
            return None
        hidden = self.shell.user_ns_hidden
        return {k: v for k, v in self.shell.user_ns.items() if k not in hidden}

    # -- line forms (stance_magic.frontend.commands does them) ---------------------------
    def _line(self, args: Any, form: str) -> Any:
        if form in COMMANDS:
            return LINE_COMMANDS[form](self.engine, self.shell, args, args.words[1:])
        if form == "ranks":
            return ranks_line(self.engine, args, self._namespace(args))
        return session_line(self.engine, args, self._namespace(args))

    # -- the cell form --------------------------------------------------------
    def _show_later(self, obj: Any, args: Any) -> None:
        """Show ``obj`` when the cell has ended (unless -q)."""
        if not args.quiet:
            verbose = self.verbose or bool(getattr(args, "verbose", False))
            self._pending.append((obj, self.plot and not args.no_plot, verbose))

    def _cell(self, args: Any, cell: str) -> Any:
        __tracebackhide__ = True
        words = args.words
        if args.ranks:
            from .. import probe
            from ..render.ranks import NO_GROUP

            if not probe.process_group_ready():
                raise UsageError(f"%%stance --ranks: {NO_GROUP}")
        ns = self._namespace(args)
        if args.sweep is not None:
            names = [n.strip() for n in args.sweep.split(",") if n.strip()] or list(
                supported_stances()
            )
            stances = [make_stance(n, args.skip_guard_eval_unsafe, None, ns) for n in names]
            stance = None
        else:
            stance = make_stance(
                words[0] if words else None,
                args.skip_guard_eval_unsafe,
                args.backend,
                ns,
                base=self.engine.session,
            )
        number = cell_number(self.shell)
        run = compile_cell(self.shell, cell, number)
        for s in stances if stance is None else [stance]:
            warn_before_running(self.engine, s)
        announce: bool | Callable[[str], None] = False if args.quiet else notice
        # (positional, in the fields' order: keywords cost each cell 0.2 µs)
        spec = MeasureSpec(
            stance,  # stance
            cell,  # source
            None,  # label
            number,  # execution_count
            args.memory,  # memory
            args.profile_lookups,  # profile_lookups
            args.trace,  # trace
            args.timeline,  # timeline
            ("full" if args.full else "summary") if args.ranks else None,  # ranks
            False,  # watch
            self.trace_functions,  # trace_functions
        )
        try:
            spec.check()
        except ValueError as err:
            raise StanceError(str(err)) from None
        if args.sweep is not None:
            from ..session.compare import sweep

            swept = sweep(self.engine, run, stances, spec, announce=announce)
            self._show_later(swept, args)
            return None
        if args.compare:
            from ..session.compare import compare

            repeat = args.repeat or self.default_repeat
            compared = compare(self.engine, run, spec, repeat=repeat, announce=announce)
            self._show_later(compared, args)
            return compared.value
        measured = None
        try:
            with self.engine.measure(spec) as measured:
                return run()
        finally:
            if measured is not None and measured.done:
                self._show_report(measured.report, args)

    def _show_report(self, rep: Any, args: Any) -> None:
        """A measured cell's report, shown when the cell has ended: across
        ranks, rank 0 shows the combined view and the others a line."""
        if args.quiet:
            return
        if args.ranks:
            obj, plot = to_show(rep, self.plot and not args.no_plot)
            self._pending.append((obj, plot, self.verbose or args.verbose))
        else:
            self._show_later(rep, args)

    # -- IPython events ----------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        cell = self.engine.cells.enter(info)
        if cell.outermost:
            self._pending.clear()
            if not self.engine.retry_restore():
                print(
                    f"stance_magic: torch still refuses the session stance "
                    f"{self.engine.session}; this cell runs under the stance torch has now",
                    file=sys.stderr,
                )
        raw = (getattr(info, "raw_cell", "") or "").lstrip()
        # a %%stance cell measures (and reports) itself
        if (self.engine.watch or self.engine.trace_next) and not raw.startswith("%%stance"):
            # kept in the history only if the cell used torch.compile
            spec = MeasureSpec(source=raw, watch=True, trace_functions=self.trace_functions)
            cell.measurement = self.engine.open_measurement(spec)

    def close_watch(self) -> None:
        """Finish watch measurements still open (unload during a watched cell)."""
        for cell in reversed(self.engine.cells.running):
            m, cell.measurement = cell.measurement, None
            if m is not None:
                m.finish(None)

    def post_run_cell(self, result: Any) -> None:
        after_cell(self.shell, result)  # (a %%stance cell's syntax error: see execution)
        cells = self.engine.cells
        cell = cells.cell_of(result)
        m = cell.measurement if cell is not None else None
        if cell is not None and m is not None:
            cell.measurement = None
            err = getattr(result, "error_in_exec", None)
            # IPython's number for this cell (In [N]) comes with its result
            rep = m.finish(err, execution_count=getattr(result, "execution_count", None))
            if rep.worth_showing() and not self.quiet:
                self._pending.append((rep, False, self.verbose))
        cells.leave(result)
        if cell is None or cell.outermost:  # the outermost cell has ended
            note = self.engine.end_of_cell()
            if note:
                print(f"stance_magic: {note}", file=sys.stderr)
            self.engine.cell_ended()
            self.engine.sync()
        pending, self._pending = self._pending, []
        for obj, plot, verbose in pending:
            show(obj, plot=plot, hints=self.hints, max_details=self.max_details, verbose=verbose)


finish_help(StanceMagics.stance, StanceMagics)


__all__ = ["StanceMagics"]
