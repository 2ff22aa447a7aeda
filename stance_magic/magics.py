"""The ``%stance`` line magic and ``%%stance`` cell magic: a thin view of the engine.

The options are declared once, with ``@argument(..., help=...)``, and
``%stance?`` is generated from them; which options each form of the magic
accepts is one table (:data:`ACCEPTS`, with :data:`RULES` for the mistakes
that have a message of their own), checked before anything runs. A cell's
code runs as IPython runs it (:mod:`stance_magic.execution`) and results are
shown by :mod:`stance_magic.display`. :class:`StanceMagics` is a traitlets
``Configurable``: ``%config StanceMagics.default_repeat = 10``, or
``c.StanceMagics.default_repeat = 10`` in ``ipython_config.py``.
"""

from __future__ import annotations

import copy
import functools
import shlex
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, kwds, magic_arguments
from traitlets import Bool, Int, TraitError, observe, validate

from .display import can_show_images, display_text, notice, show
from .engine import (
    CompiledRegionError,
    Engine,
    Stance,
    StanceError,
    TorchSupportError,
    get_engine,
    make_stance,
    reset_note,
    supported_stances,
)
from .execution import cell_number, compile_cell

COMMANDS = ("watch", "history", "reset", "panel")

#: The forms of the magic: the cell magic, ``%stance [STANCE]`` (set or show
#: the session stance), ``%stance [STANCE] --ranks``, and the line commands.
FORMS = ("cell", "line", "ranks", *COMMANDS)

#: The options each form accepts (argparse ``dest`` names; ``words`` is the
#: stance or the command and its word, checked by :data:`RULES`).
ACCEPTS: dict[str, frozenset[str]] = {
    "cell": frozenset(
        {
            "skip_guard_eval_unsafe",
            "backend",
            "quiet",
            "profile_guards",
            "memory",
            "compare",
            "repeat",
            "sweep",
            "no_plot",
            "ranks",
            "full",
        }
    ),
    "line": frozenset({"skip_guard_eval_unsafe", "backend", "quiet"}),
    "ranks": frozenset({"skip_guard_eval_unsafe", "backend", "quiet", "ranks"}),
    "watch": frozenset({"quiet"}),
    "history": frozenset({"csv", "json", "plot", "no_plot", "quiet"}),
    "reset": frozenset({"quiet"}),
    "panel": frozenset({"quiet"}),
}

_LINE = frozenset(FORMS) - {"cell"}


def _max_repeat() -> int:
    from .compare import MAX_REPEAT

    return MAX_REPEAT


@dataclass(frozen=True)
class Rule:
    """A mistake with a message of its own: ``broken(args)`` on one of ``forms``."""

    forms: frozenset[str]
    broken: Callable[[Any], Any]
    message: str | Callable[[Any], str]

    def check(self, form: str, args: Any) -> str | None:
        if form not in self.forms or not self.broken(args):
            return None
        return self.message if isinstance(self.message, str) else self.message(args)


def _rule(forms: Any, broken: Callable[[Any], Any], message: Any) -> Rule:
    return Rule(frozenset({forms} if isinstance(forms, str) else forms), broken, message)


#: Checked in order, before :data:`ACCEPTS`; the first that applies is the
#: one-line UsageError.
RULES: tuple[Rule, ...] = (
    _rule(
        _LINE,
        lambda a: a.compare or a.sweep is not None or a.repeat is not None,
        "--compare, --repeat and --sweep apply to a %%stance cell",
    ),
    _rule(_LINE, lambda a: a.full, "--full goes with a %%stance --ranks cell"),
    _rule(
        "ranks",
        lambda a: a.words and a.words[0] in COMMANDS,
        lambda a: f"--ranks does not go with %stance {a.words[0]}",
    ),
    _rule(
        set(FORMS) - {"history"},
        lambda a: a.csv or a.json or a.plot,
        "--csv, --json and --plot go with %stance history",
    ),
    _rule(
        "cell",
        lambda a: a.words and a.words[0] in COMMANDS,
        lambda a: f"%stance {a.words[0]} is a line magic; use it with one %",
    ),
    _rule(
        {"line", "ranks"},
        lambda a: len(a.words) > 1,
        lambda a: f"%stance: unexpected word {a.words[1]!r} after the stance",
    ),
    _rule(
        "cell",
        lambda a: len(a.words) > 1,
        lambda a: f"%%stance: unexpected word {a.words[1]!r} after the stance",
    ),
    _rule(
        "watch",
        lambda a: len(a.words) > 2 or (len(a.words) == 2 and a.words[1] not in ("on", "off")),
        "usage: %stance watch on|off",
    ),
    _rule(
        {"history", "reset", "panel"},
        lambda a: len(a.words) > 1,
        lambda a: f"%stance {a.words[0]}: unexpected word {a.words[1]!r}",
    ),
    _rule("cell", lambda a: a.repeat is not None and not a.compare, "--repeat goes with --compare"),
    _rule(
        "cell",
        lambda a: a.repeat is not None and a.repeat < 1,
        "--repeat needs a count of 1 or more",
    ),
    _rule(
        "cell",
        lambda a: a.repeat is not None and a.repeat > _max_repeat(),
        lambda a: f"--repeat {a.repeat} is too many: at most {_max_repeat():,} runs per side",
    ),
    _rule(
        "cell",
        lambda a: a.memory and a.compare and a.profile_guards,
        "-m and -g do not go together with --compare: torch runs one profiler at a "
        "time (measure memory and lookups in two cells)",
    ),
    _rule(
        "cell",
        lambda a: a.sweep is not None and (a.words or a.compare),
        "--sweep runs every stance; give no STANCE and no --compare",
    ),
    _rule("cell", lambda a: a.full and not a.ranks, "--full goes with --ranks"),
    _rule(
        "cell",
        lambda a: a.ranks and (a.compare or a.sweep is not None),
        "--ranks goes with a plain %%stance cell, not --compare/--sweep",
    ),
    _rule(
        "cell",
        lambda a: a.sweep is not None and a.backend,
        "-b does not go with --sweep (torch forces a backend only under "
        "'default'); compare backends with one %%stance default -b NAME cell each",
    ),
)


def form_of(args: Any, cell: bool) -> str:
    """Which form of the magic a parsed line is (one of :data:`FORMS`)."""
    if cell:
        return "cell"
    if args.ranks:
        return "ranks"
    if args.words and args.words[0] in COMMANDS:
        return args.words[0]
    return "line"


def _form_name(form: str) -> str:
    return {
        "cell": "%%stance",
        "line": "%stance STANCE",
        "ranks": "%stance --ranks",
    }.get(form, f"%stance {form}")


def validate_args(args: Any, form: str) -> None:
    """Raise the one-line UsageError for options ``form`` does not accept."""
    for rule in RULES:
        message = rule.check(form, args)
        if message:
            raise UsageError(message)
    parser = StanceMagics.stance.parser
    for action in parser._actions:
        dest = action.dest
        if dest == "words" or dest in ACCEPTS[form]:
            continue
        if getattr(args, dest) != action.default:
            flag = action.option_strings[0]
            where = [_form_name(f) for f in FORMS if dest in ACCEPTS[f]]
            raise UsageError(f"{_form_name(form)} does not take {flag} (it goes with {where[0]})")


def _h(text: str) -> str:
    """An option's help as argparse wants it (a literal % doubled)."""
    return text.replace("%", "%%")


@functools.lru_cache(maxsize=256)
def _parse_cached(line: str, cell: bool) -> tuple[Any, str]:
    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise UsageError(f"%stance: cannot parse {line!r}: {err}") from None
    args = StanceMagics.stance.parser.parse_args(argv)
    form = form_of(args, cell)
    validate_args(args, form)
    return args, form


def _parse(line: str, cell: bool) -> tuple[Any, str]:
    """Parse and check the magic's line: its options and its form (cached: the
    same line parses and checks the same way; a refused line raises)."""
    args, form = _parse_cached(line, cell)
    return copy.copy(args), form


_INTRO = """\
Run a cell, or the session, under a torch.compile stance.

The cell magic (%%stance, first line of its cell) runs the cell under
STANCE (left out: the session stance); the stance before the cell is back
afterwards, whether the cell succeeded, raised or was interrupted. After the
cell a report shows what torch.compile did: wall and compile time (by phase),
compiles (frames traced, graphs compiled, failures), recompiles with torch's
reason, where, and the guard's source line, graph breaks with their file,
line and source, cache hits/misses, the cost of the cache lookups (timed
where they happen), eager fallbacks, refused recompiles with the guard that
failed, and calls run eagerly; with -m, the memory torch allocated.

Line magic::

    %stance                     show the session stance
    %stance STANCE [-u] [-b NAME]
                                set the session stance for the cells that follow
    %stance [STANCE] --ranks    in a torch.distributed process group, on every
                                rank (%px): set STANCE, then rank 0 says in one
                                line whether all ranks have the same session stance
    %stance watch on|off        report every cell that compiled anything, and
                                keep every cell that called torch.compile'd
                                code (whatever the stance) in the history
    %stance history [--csv PATH] [--json PATH] [--plot]
                                one row per measured cell, the session so far;
                                an export prints one line (the table is not
                                shown again); the chart needs a front end
                                that shows images (Jupyter)
    %stance reset               forget all compiled code (torch.compiler.reset())
    %stance panel               a widget panel to toggle the stance

STANCE is one of the stances the installed torch supports: default,
force_eager, eager_on_recompile, fail_on_recompile, eager_then_compile,
aot_eager_then_compile (as torch has them).
"""

_EXAMPLES = """\
Examples
--------
::

    In [1]: %load_ext stance_magic

    In [2]: %%stance eager_then_compile
       ...: y = model(x)

    In [3]: %stance force_eager
    session stance: force_eager (was: default)

    In [4]: %stance
    session stance: force_eager (skip_guard_eval_unsafe=False, backend=None)

    In [5]: %config StanceMagics.default_repeat = 10
"""


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

    def __init__(self, shell: Any = None, engine: Engine | None = None, **kwargs: Any) -> None:
        self.engine = engine or get_engine()
        super().__init__(shell, **kwargs)
        self._pending: list[tuple[Any, bool]] = []
        self.engine.observe(self._on_engine)
        self._apply_max_details(self.max_details)
        if self.watch:
            self.engine.set_watch(True)

    # -- settings -------------------------------------------------------------
    @validate("default_repeat")
    def _check_repeat(self, proposal: Any) -> int:
        n = proposal["value"]
        if not 1 <= n <= _max_repeat():
            raise TraitError(f"default_repeat must be 1 to {_max_repeat():,}, not {n}")
        return n

    @validate("max_details")
    def _check_max_details(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise TraitError(f"max_details must be 0 or more, not {proposal['value']}")
        return proposal["value"]

    @observe("max_details")
    def _max_details_changed(self, change: Any) -> None:
        self._apply_max_details(change["new"])

    @staticmethod
    def _apply_max_details(n: int) -> None:
        from . import render

        render.MAX_DETAILS = n

    @observe("watch")
    def _watch_changed(self, change: Any) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None and change["new"] != engine.watch:
            engine.set_watch(change["new"])

    def detach(self) -> None:
        """Undo what this instance set outside itself (unload)."""
        self.engine.unobserve(self._on_engine)
        from . import render

        render.MAX_DETAILS = self.traits()["max_details"].default_value
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
    @magic_arguments()
    @kwds(description=_INTRO, epilog=_EXAMPLES)
    @argument(
        "words",
        nargs="*",
        metavar="STANCE",
        help=_h(
            "The stance (left out: the session stance); on a line, or one of the "
            "commands watch on|off, history, reset, panel."
        ),
    )
    @argument(
        "-u",
        "--skip-guard-eval-unsafe",
        action="store_true",
        help=_h(
            "Run only the guards that tell cache entries apart: faster, and silently "
            "wrong if a recompile was needed."
        ),
    )
    @argument(
        "-b",
        "--backend",
        default=None,
        metavar="NAME",
        help=_h(
            "Force a backend (only with the default stance): a name from "
            "torch._dynamo.list_backends() or a callable in your namespace."
        ),
    )
    @argument(
        "-q",
        "--quiet",
        action="store_true",
        help=_h(
            "No report, no notice (--compare, --sweep), no message (a session stance "
            "set, an export written)."
        ),
    )
    @argument(
        "-g",
        "--profile-guards",
        action="store_true",
        help=_h(
            "Measure every cache lookup with torch's profiler ('TorchDynamo Cache "
            "Lookup' events) instead of timing the lookups of the called functions in situ: "
            "it also times the lookups after graph breaks (resume functions), and slows the "
            "rest of the cell while it runs."
        ),
    )
    @argument(
        "-m",
        "--memory",
        action="store_true",
        help=_h(
            "Measure the bytes torch allocates: the peak above what was live when the "
            "cell started, and what it left at the end (CPU: torch's profiler memory events; "
            "CUDA: the caching allocator's statistics). With --compare: eager, first "
            "compiled and steady compiled peaks; with --sweep: each stance's first-run peak, "
            "from extra runs so the times stay clean."
        ),
    )
    @argument(
        "--compare",
        action="store_true",
        help=_h(
            "Run the cell under force_eager and under STANCE (side effects repeat) and "
            "show the speedup and break-even run count."
        ),
    )
    @argument(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help=_h(
            "With --compare: run each N times (default 5, or StanceMagics.default_repeat: "
            "the first run, and the rest for the steady state; at most 10,000)."
        ),
    )
    @argument(
        "--sweep",
        nargs="?",
        const="",
        default=None,
        metavar="S1,S2,...",
        help=_h(
            "Run the cell once per stance (all supported ones if no list), each from "
            "cold compiled caches."
        ),
    )
    @argument(
        "--no-plot",
        action="store_true",
        help=_h("Text and table only, no chart (StanceMagics.plot = False: for every cell)."),
    )
    @argument(
        "--plot",
        action="store_true",
        help=_h("With %stance history: the chart of the session (a front end that shows images)."),
    )
    @argument(
        "--csv", default=None, metavar="PATH", help=_h("With %stance history: write it as CSV.")
    )
    @argument(
        "--json", default=None, metavar="PATH", help=_h("With %stance history: write it as JSON.")
    )
    @argument(
        "--ranks",
        action="store_true",
        help=_h(
            "Inside an initialized torch.distributed process group, run on every rank "
            "(%%px on ipyparallel engines, or under torchrun): each rank sends rank 0 a "
            "fixed-size summary of its report (dist.gather_object), and rank 0 shows one row "
            "per rank and where the ranks diverged (compile or recompile counts, graph "
            "breaks, stances, a fail_on_recompile refusal with its guard) and the slowest "
            "compile; the other ranks show one line. Without a process group it is a "
            "UsageError."
        ),
    )
    @argument(
        "--full",
        action="store_true",
        help=_h("With --ranks: gather every rank's whole report, shown under the combined view."),
    )
    @no_var_expand
    @line_cell_magic
    def stance(self, line: str = "", cell: str | None = None) -> Any:
        __tracebackhide__ = True
        args, form = _parse(line, cell is not None)
        if self.quiet:
            args.quiet = True
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

    # -- line forms -----------------------------------------------------------
    def _line(self, args: Any, form: str) -> Any:
        words = args.words
        if form == "ranks":
            return self._line_ranks(args)
        if form in COMMANDS:
            return getattr(self, f"_cmd_{form}")(args, words[1:])
        if not words:
            if args.skip_guard_eval_unsafe or args.backend:
                stance = make_stance(
                    None,
                    args.skip_guard_eval_unsafe,
                    args.backend,
                    self._namespace(args),
                    base=self.engine.session,
                )
                return self._set_session(stance, args.quiet)
            s = self.engine.session
            print(
                f"session stance: {s.name} (skip_guard_eval_unsafe="
                f"{s.skip_guard_eval_unsafe}, backend={s.backend_name})"
            )
            return None
        stance = make_stance(
            words[0], args.skip_guard_eval_unsafe, args.backend, self._namespace(args)
        )
        return self._set_session(stance, args.quiet)

    def _line_ranks(self, args: Any) -> None:
        """``%stance [STANCE] --ranks``: set STANCE (if given) on this rank,
        then gather every rank's session stance; rank 0 prints one line."""
        from . import ranks

        words = args.words
        if not ranks.process_group_ready():
            raise UsageError(f"%stance --ranks: {ranks.NO_GROUP}")
        previous = None
        if words or args.skip_guard_eval_unsafe or args.backend:
            stance = make_stance(
                words[0] if words else None,
                args.skip_guard_eval_unsafe,
                args.backend,
                self._namespace(args),
                base=self.engine.session,
            )
            self._warn_skip_guard(stance)
            previous = str(self.engine.set_session(stance))
        stances = ranks.session_stances()
        if stances is not None and not args.quiet:
            later = " after this cell" if self.engine.in_cell else ""
            print(ranks.stances_line(stances, previous) + later)

    def _set_session(self, stance: Stance, quiet: bool) -> None:
        self._warn_skip_guard(stance)
        previous = self.engine.set_session(stance)
        if not quiet:
            later = " after this cell" if self.engine.in_cell else ""
            print(f"session stance: {stance} (was: {previous}){later}")

    def _warn_skip_guard(self, stance: Stance) -> None:
        msg = self.engine.take_skip_guard_warning(stance)
        if msg:
            print(f"stance_magic: {msg}", file=sys.stderr)

    def _cmd_watch(self, args: Any, rest: list[str]) -> None:
        if not rest:
            print(f"watch is {'on' if self.engine.watch else 'off'}")
            return
        self.engine.set_watch(rest[0] == "on")
        if not args.quiet:
            what = (
                "every cell that compiles gets a report, and every cell that calls "
                "torch.compile'd code a row in %stance history"
                if rest[0] == "on"
                else "only %%stance cells are reported"
            )
            print(f"watch {rest[0]}: {what}")

    def _cmd_history(self, args: Any, rest: list[str]) -> Any:
        from . import export
        from .render import History

        hist = History(self.engine.history)
        written = []
        for path, write in ((args.csv, export.write_csv), (args.json, export.write_json)):
            if not path:
                continue
            try:
                written.append(write(hist, path))
            except OSError as err:
                reason = err.strerror if err.strerror else str(err)
                raise UsageError(f"%stance history: cannot write {path}: {reason}") from None
        if not args.quiet:
            rows = f"{len(hist)} row{'s' if len(hist) != 1 else ''}"
            for path in written:
                print(f"wrote {rows} to {path}")
        if args.plot and not args.no_plot:
            if can_show_images():
                from .plots import history_figure, show_figure

                display_text(str(hist), hist._repr_html_())
                show_figure(
                    history_figure(hist), text=f"[session history chart: {len(hist)} cells]"
                )
                return None
            print(
                "stance_magic: no chart: this front end shows text only (a terminal "
                "IPython); the table follows, and Jupyter draws the chart"
            )
            return hist
        if written:
            return None  # the one line above says what was written
        return hist

    def _cmd_reset(self, args: Any, rest: list[str]) -> None:
        self.engine.reset_compiled_code()
        if not args.quiet:
            print(reset_note(self.engine.session))

    def _cmd_panel(self, args: Any, rest: list[str]) -> Any:
        from .widget import PanelUnavailable, panel

        try:
            return panel(engine=self.engine, shell=self.shell)
        except PanelUnavailable as err:
            print(f"stance_magic: {err}", file=sys.stderr)
            return None

    # -- the cell form --------------------------------------------------------
    def _show_later(self, obj: Any, args: Any) -> None:
        """Show ``obj`` when the cell has ended (unless -q)."""
        if not args.quiet:
            self._pending.append((obj, self.plot and not args.no_plot))

    def _cell(self, args: Any, cell: str) -> Any:
        __tracebackhide__ = True
        words = args.words
        if args.ranks:
            from . import ranks

            if not ranks.process_group_ready():
                raise UsageError(f"%%stance --ranks: {ranks.NO_GROUP}")
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
        if stance is not None:
            self._warn_skip_guard(stance)
        announce = False if args.quiet else notice
        if args.sweep is not None:
            from .compare import sweep

            result = sweep(
                self.engine,
                run,
                stances,
                source=cell,
                announce=announce,
                profile_guards=args.profile_guards,
                execution_count=number,
                memory=args.memory,
            )
            self._show_later(result, args)
            return None
        if args.compare:
            from .compare import compare

            result = compare(
                self.engine,
                run,
                stance,
                repeat=args.repeat or self.default_repeat,
                source=cell,
                announce=announce,
                profile_guards=args.profile_guards,
                execution_count=number,
                memory=args.memory,
            )
            self._show_later(result, args)
            return result.value
        # --ranks: the report is added to the history after the gather (see
        # ranks.gathered), so that it is published once, complete.
        measuring = self.engine.measure(
            stance,
            source=cell,
            profile_guards=args.profile_guards,
            memory=args.memory,
            record=not args.ranks,
        )
        if args.ranks:
            return self._cell_ranks(args, measuring, number, run)
        rep = None
        try:
            with measuring as rep:
                rep.execution_count = number
                return run()
        finally:
            if rep is not None:
                self._show_later(rep, args)

    def _cell_ranks(self, args: Any, measuring: Any, number: int, run: Any) -> Any:
        """``%%stance --ranks``: measure, then gather across ranks (also when the
        cell raised, so that no rank is left waiting; not after an interrupt)."""
        __tracebackhide__ = True
        from . import ranks

        rep = None
        try:
            with ranks.gathered(
                measuring, "full" if args.full else "summary", publish=self.engine.add_report
            ) as rep:
                rep.execution_count = number
                return run()
        finally:
            if rep is not None and not args.quiet:
                obj, plot = ranks.to_show(rep, self.plot and not args.no_plot)
                self._pending.append((obj, plot))

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
        if self.engine.watch and not raw.startswith("%%stance"):
            # kept in the history only if the cell involved torch.compile (below)
            cell.measurement = self.engine.start_measure(source=raw, record=False)

    def close_watch(self) -> None:
        """Finish watch measurements still open (unload during a watched cell)."""
        for cell in reversed(self.engine.cells.running):
            m, cell.measurement = cell.measurement, None
            if m is not None:
                rep = m.finish(None)
                if _compile_was_involved(rep):
                    self.engine.add_report(rep)

    def post_run_cell(self, result: Any) -> None:
        cells = self.engine.cells
        cell = cells.cell_of(result)
        m = cell.measurement if cell is not None else None
        if m is not None:
            cell.measurement = None
            err = getattr(result, "error_in_exec", None)
            # IPython's number for this cell (In [N]) comes with its result
            m.report.execution_count = getattr(result, "execution_count", None)
            rep = m.finish(err)
            if _compile_was_involved(rep):
                self.engine.add_report(rep)
            if (rep.compiled_anything or rep.cache_misses) and not self.quiet:
                self._pending.append((rep, False))
        cells.leave(result)
        if cell is None or cell.outermost:  # the outermost cell has ended
            note = self.engine.end_of_cell()
            if note:
                print(f"stance_magic: {note}", file=sys.stderr)
            self.engine.cell_ended()
            self.engine.sync()
        pending, self._pending = self._pending, []
        for obj, plot in pending:
            show(obj, plot=plot, hints=self.hints)


def _config_help(cls: type) -> str:
    """The settings of ``cls`` as ``%stance?`` lists them."""
    out = [
        "Settings",
        "--------",
        "%config StanceMagics.NAME = VALUE in a cell, or c.StanceMagics.NAME = VALUE in",
        "ipython_config.py (before %load_ext); %config StanceMagics lists them::",
        "",
    ]
    for name, trait in sorted(cls.class_traits(config=True).items()):
        if name in ("config", "parent", "log"):
            continue
        kind = type(trait).__name__
        out.append(f"    StanceMagics.{name} = {trait.default_value!r}   ({kind})")
        out += textwrap.wrap(trait.help, 72, initial_indent=" " * 8, subsequent_indent=" " * 8)
    return "\n".join(out)


def _finish_help() -> None:
    """``%stance?``: the intro, every option from the parser, the settings from
    the traits, the examples."""
    parser = StanceMagics.stance.parser
    parser.epilog = _config_help(StanceMagics) + "\n\n" + _EXAMPLES
    StanceMagics.stance.__doc__ = parser.format_help()


_finish_help()


def _compile_was_involved(rep: Any) -> bool:
    """Whether a watched cell involved torch.compile: called compiled code
    (under any stance, force_eager included), compiled, or looked up compiled
    code. This decides what the history keeps: ``a = 1`` and ``%stance
    history`` stay out."""
    return bool(
        rep.compiled_calls
        or rep.compiled_anything
        or rep.cache_hits
        or rep.cache_misses
        or rep.refused_recompiles
        or rep.eager_first_calls
    )


__all__ = ["ACCEPTS", "COMMANDS", "FORMS", "RULES", "StanceMagics", "show"]
