"""The ``%stance`` line magic and ``%%stance`` cell magic: a thin view of the engine."""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import MagicArgumentParser

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

COMMANDS = ("watch", "history", "reset", "panel", "cache")


def _parser() -> MagicArgumentParser:
    p = MagicArgumentParser(prog="%stance", add_help=False)
    p.add_argument("words", nargs="*")
    p.add_argument("-u", "--skip-guard-eval-unsafe", action="store_true")
    p.add_argument("-b", "--backend", default=None)
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("-g", "--profile-guards", action="store_true")
    p.add_argument("-m", "--memory", action="store_true")
    p.add_argument("--compare", action="store_true")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--sweep", nargs="?", const="", default=None)
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--plot", action="store_true")
    p.add_argument("--csv", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--ranks", action="store_true")
    p.add_argument("--full", action="store_true")
    return p


_PARSER = _parser()


def _parse(line: str) -> Any:
    """Parse the magic's line (cached: the same line parses the same way)."""
    return copy.copy(_parse_cached(line))


@functools.lru_cache(maxsize=256)
def _parse_cached(line: str) -> Any:
    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise UsageError(f"%stance: cannot parse {line!r}: {err}") from None
    return _PARSER.parse_args(argv)


def _display(text: str, html: str | None = None) -> None:
    from IPython.display import display

    data = {"text/plain": text}
    if html is not None:
        data["text/html"] = html
    display(data, raw=True)


@magics_class
class StanceMagics(Magics):
    """Magics that run cells under a ``torch.compiler.set_stance`` stance."""

    def __init__(self, shell: Any, engine: Engine | None = None) -> None:
        super().__init__(shell)
        self.engine = engine or get_engine()
        self._pending: list[tuple[Any, bool]] = []
        #: one entry per running cell (a cell can run cells: run_cell inside
        #: a cell): its watch measurement, or None
        self._watch_stack: list[Any] = []
        self.engine.observe(self._on_engine)

    def _on_engine(self, event: str, value: Any) -> None:
        if event == "undone":
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
    @no_var_expand
    @line_cell_magic
    def stance(self, line: str = "", cell: str | None = None) -> Any:
        """Run a cell, or the session, under a torch.compile stance.

        Cell magic::

            %%stance [STANCE] [-u] [-b NAME] [-q] [-g] [-m] [--compare [--repeat N]]
                     [--sweep [S1,S2,...]] [--no-plot] [--ranks [--full]]

        runs the cell under STANCE (left out: the session stance); the stance
        before the cell is back afterwards, whether the cell succeeded,
        raised or was interrupted. After the cell a report shows what
        torch.compile did: wall and compile time (by phase), compiles (frames
        traced, graphs compiled, failures), recompiles with torch's reason,
        where, and the guard's source line, graph breaks with their file,
        line and source, cache hits/misses, the cost of the cache lookups
        (timed where they happen), eager fallbacks, refused recompiles with
        the guard that failed, and calls run eagerly; with -m, the memory
        torch allocated.

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
            %stance cache save PATH     write this process's compile-cache artifacts
                                        (Inductor, AOTAutograd; torch 2.7+) to PATH
            %stance cache load PATH     load them (same torch), so that the next
                                        compile of those graphs loads them: a warm
                                        start after a kernel restart
            %stance panel               a widget panel to toggle the stance

        Options
        -------
        STANCE
            One of the stances the installed torch supports: default,
            force_eager, eager_on_recompile, fail_on_recompile,
            eager_then_compile, aot_eager_then_compile (as torch has them).
        -u, --skip-guard-eval-unsafe
            Run only the guards that tell cache entries apart: faster, and
            silently wrong if a recompile was needed.
        -b NAME, --backend NAME
            Force a backend (only with the default stance): a name from
            ``torch._dynamo.list_backends()`` or a callable in your namespace.
        -q, --quiet
            No report, no notice (--compare, --sweep), no message (a session
            stance set, an export written).
        --compare
            Run the cell under force_eager and under STANCE (side effects
            repeat) and show the speedup and break-even run count.
        --repeat N
            With --compare: run each N times (default 5: the first run, and
            four for the steady state; at most 10,000).
        --sweep [S1,S2,...]
            Run the cell once per stance (all supported ones if no list),
            each from cold compiled caches.
        -g, --profile-guards
            Measure every cache lookup with torch's profiler ('TorchDynamo
            Cache Lookup' events) instead of timing the lookups of the called
            functions in situ: it also times the lookups after graph breaks
            (resume functions), and slows the rest of the cell while it runs.
        -m, --memory
            Measure the bytes torch allocates: the peak above what was live
            when the cell started, and what it left at the end (CPU: torch's
            profiler memory events; CUDA: the caching allocator's
            statistics). With --compare: eager, first compiled and steady
            compiled peaks; with --sweep: each stance's first-run peak, from
            extra runs so the times stay clean.
        --no-plot
            Text and table only, no chart.
        --ranks
            Inside an initialized torch.distributed process group, run on every
            rank (``%%px`` on ipyparallel engines, or under torchrun): each rank
            sends rank 0 a fixed-size summary of its report
            (``dist.gather_object``), and rank 0 shows one row per rank and
            where the ranks diverged (compile or recompile counts, graph breaks,
            stances, a fail_on_recompile refusal with its guard) and the slowest
            compile; the other ranks show one line. Without a process group it
            is a UsageError.
        --full
            With --ranks: gather every rank's whole report, shown under the
            combined view.

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
        """
        __tracebackhide__ = True
        args = _parse(line)
        try:
            if cell is None:
                return self._line(args)
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
    def _line(self, args: Any) -> Any:
        words = args.words
        if args.compare or args.sweep is not None or args.repeat is not None:
            raise UsageError("--compare, --repeat and --sweep apply to a %%stance cell")
        if args.full:
            raise UsageError("--full goes with a %%stance --ranks cell")
        if args.ranks:
            return self._line_ranks(args)
        if words and words[0] in COMMANDS:
            return getattr(self, f"_cmd_{words[0]}")(args, words[1:])
        if args.csv or args.json or args.plot:
            raise UsageError("--csv, --json and --plot go with %stance history")
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
        if len(words) > 1:
            raise UsageError(f"%stance: unexpected word {words[1]!r} after the stance")
        stance = make_stance(
            words[0], args.skip_guard_eval_unsafe, args.backend, self._namespace(args)
        )
        return self._set_session(stance, args.quiet)

    def _line_ranks(self, args: Any) -> None:
        """``%stance [STANCE] --ranks``: set STANCE (if given) on this rank,
        then gather every rank's session stance; rank 0 prints one line."""
        from . import ranks

        words = args.words
        if words and words[0] in COMMANDS:
            raise UsageError(f"--ranks does not go with %stance {words[0]}")
        if len(words) > 1:
            raise UsageError(f"%stance: unexpected word {words[1]!r} after the stance")
        if args.csv or args.json or args.plot:
            raise UsageError("--csv, --json and --plot go with %stance history")
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
        if len(rest) != 1 or rest[0] not in ("on", "off"):
            state = "on" if self.engine.watch else "off"
            if not rest:
                print(f"watch is {state}")
                return
            raise UsageError("usage: %stance watch on|off")
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

        if rest:
            raise UsageError(f"%stance history: unexpected word {rest[0]!r}")
        hist = History(self.engine.history)
        try:
            written = export.write_exports(hist, args.csv, args.json)
        except export.ExportError as err:
            raise UsageError(f"%stance history: {err}") from None
        if not args.quiet:
            rows = f"{len(hist)} row{'s' if len(hist) != 1 else ''}"
            for path in written:
                print(f"wrote {rows} to {path}")
        if args.plot and not args.no_plot:
            if _can_show_images():
                from .plots import history_figure, show_figure

                _display(str(hist), hist._repr_html_())
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
        if rest:
            raise UsageError(f"%stance reset: unexpected word {rest[0]!r}")
        self.engine.reset_compiled_code()
        if not args.quiet:
            print(reset_note(self.engine.session))

    def _cmd_panel(self, args: Any, rest: list[str]) -> Any:
        if rest:
            raise UsageError(f"%stance panel: unexpected word {rest[0]!r}")
        from .widget import PanelUnavailable, panel

        try:
            return panel(engine=self.engine, shell=self.shell)
        except PanelUnavailable as err:
            print(f"stance_magic: {err}", file=sys.stderr)
            return None

    def _cmd_cache(self, args: Any, rest: list[str]) -> Any:
        """``%stance cache save PATH`` / ``%stance cache load PATH`` (see stance_magic.warm)."""
        from . import warm

        if len(rest) != 2 or rest[0] not in ("save", "load"):
            raise UsageError("usage: %stance cache save PATH | %stance cache load PATH")
        try:
            info = (warm.save_cache if rest[0] == "save" else warm.load_cache)(rest[1])
        except warm.WarmStartError as err:
            raise UsageError(f"%stance cache {rest[0]}: {err}") from None
        if not args.quiet:
            _display(str(info), info._repr_html_())
        return None

    # -- the cell form --------------------------------------------------------
    def _cell(self, args: Any, cell: str) -> Any:
        __tracebackhide__ = True
        words = args.words
        if args.csv or args.json or args.plot:
            raise UsageError("--csv, --json and --plot go with %stance history")
        if words and words[0] in COMMANDS:
            raise UsageError(f"%stance {words[0]} is a line magic; use it with one %")
        if len(words) > 1:
            raise UsageError(f"%%stance: unexpected word {words[1]!r} after the stance")
        if args.repeat is not None and not args.compare:
            raise UsageError("--repeat goes with --compare")
        if args.repeat is not None and args.repeat < 1:
            raise UsageError("--repeat needs a count of 1 or more")
        if args.repeat is not None and args.repeat > _max_repeat():
            raise UsageError(
                f"--repeat {args.repeat} is too many: at most {_max_repeat():,} runs per side"
            )
        if args.memory and args.compare and args.profile_guards:
            raise UsageError(
                "-m and -g do not go together with --compare: torch runs one profiler at a "
                "time (measure memory and lookups in two cells)"
            )
        if args.sweep is not None and (words or args.compare):
            raise UsageError("--sweep runs every stance; give no STANCE and no --compare")
        if args.full and not args.ranks:
            raise UsageError("--full goes with --ranks")
        if args.ranks:
            from . import ranks

            if args.compare or args.sweep is not None:
                raise UsageError("--ranks goes with a plain %%stance cell, not --compare/--sweep")
            if not ranks.process_group_ready():
                raise UsageError(f"%%stance --ranks: {ranks.NO_GROUP}")
        ns = self._namespace(args)
        if args.sweep is not None:
            names = [n.strip() for n in args.sweep.split(",") if n.strip()] or list(
                supported_stances()
            )
            if args.backend:
                raise UsageError(
                    "-b does not go with --sweep (torch forces a backend only under "
                    "'default'); compare backends with one %%stance default -b NAME cell each"
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
        number = _cell_number(self.shell)
        run = self._compile_cell(cell, number)
        if stance is not None:
            self._warn_skip_guard(stance)
        if args.sweep is not None:
            from .compare import sweep

            result = sweep(
                self.engine,
                run,
                stances,
                source=cell,
                announce=False if args.quiet else _notice,
                profile_guards=args.profile_guards,
                execution_count=number,
                memory=args.memory,
            )
            if not args.quiet:
                self._pending.append((result, not args.no_plot))
            return None
        if args.compare:
            from .compare import compare

            result = compare(
                self.engine,
                run,
                stance,
                repeat=args.repeat or _default_repeat(),
                source=cell,
                announce=False if args.quiet else _notice,
                profile_guards=args.profile_guards,
                execution_count=number,
                memory=args.memory,
            )
            if not args.quiet:
                self._pending.append((result, not args.no_plot))
            return result.value
        measuring = self.engine.measure(
            stance, source=cell, profile_guards=args.profile_guards, memory=args.memory
        )
        if args.ranks:
            return self._cell_ranks(args, measuring, number, run)
        rep = None
        try:
            with measuring as rep:
                rep.execution_count = number
                return run()
        finally:
            if rep is not None and not args.quiet:
                self._pending.append((rep, not args.no_plot))

    def _cell_ranks(self, args: Any, measuring: Any, number: int, run: Any) -> Any:
        """``%%stance --ranks``: measure, then gather across ranks (also when the
        cell raised, so that no rank is left waiting; not after an interrupt)."""
        __tracebackhide__ = True
        from . import ranks

        rep = None
        try:
            with ranks.gathered(measuring, "full" if args.full else "summary") as rep:
                rep.execution_count = number
                return run()
        finally:
            if rep is not None and not args.quiet:
                self._pending.append(ranks.to_show(rep, not args.no_plot))

    def _compile_cell(self, cell: str, number: int) -> Any:
        """Parse and compile the cell as IPython does (raising SyntaxError now,
        before any stance is applied); return a function that runs it in the
        user namespace and gives the value of its last expression."""
        __tracebackhide__ = True
        shell = self.shell
        transformed = shell.transform_cell(cell) if _needs_transform(cell) else cell
        filename = shell.compile.cache(transformed, number, raw_code=cell)
        tree = shell.compile.ast_parse(transformed, filename=filename)
        tree = shell.transform_ast(tree)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(cell):
            last = ast.Expression(tree.body.pop().value)
        # Top-level await compiles to a coroutine, as in a plain cell.
        with shell.compile.extra_flags(getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)):
            code = shell.compile(tree, filename, "exec")
            code_last = shell.compile(last, filename, "eval") if last is not None else None
        # Only code with a top-level await is awaited: a cell ending in a call
        # to an async def shows the coroutine object and runs nothing, as a
        # plain IPython cell does.
        body_awaits = bool(code.co_flags & inspect.CO_COROUTINE)
        last_awaits = code_last is not None and bool(code_last.co_flags & inspect.CO_COROUTINE)
        if body_awaits or last_awaits:
            _check_can_await()
        glob, loc = shell.user_global_ns, shell.user_ns

        def run() -> Any:
            __tracebackhide__ = True
            result = eval(code, glob, loc)
            if body_awaits:
                shell.loop_runner(result)
            if code_last is None:
                return None
            value = eval(code_last, glob, loc)
            if last_awaits:
                value = shell.loop_runner(value)
            return value

        return run

    # -- IPython events ----------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        outermost = not self._watch_stack
        if outermost:
            self.engine.cell_started()
            self._pending.clear()
            if not self.engine.retry_restore():
                print(
                    f"stance_magic: torch still refuses the session stance "
                    f"{self.engine.session}; this cell runs under the stance torch has now",
                    file=sys.stderr,
                )
        m = None
        raw = (getattr(info, "raw_cell", "") or "").lstrip()
        # a %%stance cell measures (and reports) itself
        if self.engine.watch and not raw.startswith("%%stance"):
            # kept in the history only if the cell involved torch.compile (below)
            m = self.engine.start_measure(source=raw, record=False)
        self._watch_stack.append(m)

    def close_watch(self) -> None:
        """Finish watch measurements still open (unload during a watched cell)."""
        while self._watch_stack:
            m = self._watch_stack.pop()
            if m is not None:
                rep = m.finish(None)
                if _compile_was_involved(rep):
                    self.engine.add_report(rep)

    def post_run_cell(self, result: Any) -> None:
        m = self._watch_stack.pop() if self._watch_stack else None
        if m is not None:
            err = getattr(result, "error_in_exec", None)
            # IPython's number for this cell (In [N]) comes with its result
            m.report.execution_count = getattr(result, "execution_count", None)
            rep = m.finish(err)
            if _compile_was_involved(rep):
                self.engine.add_report(rep)
            if rep.compiled_anything or rep.cache_misses:
                self._pending.append((rep, False))
        if not self._watch_stack:  # the outermost cell has ended
            note = self.engine.end_of_cell()
            if note:
                print(f"stance_magic: {note}", file=sys.stderr)
            self.engine.cell_ended()
            self.engine.sync()
        pending, self._pending = self._pending, []
        for obj, plot in pending:
            show(obj, plot=plot)


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


#: Characters that start IPython syntax (magics, shell escapes, help,
#: autocall, prompts); a cell without them is plain Python.
_IPYTHON_SYNTAX = frozenset("%!?")
_LINE_ESCAPES = (",", ";", "/", ">>>", "...", "In [")


def _needs_transform(cell: str) -> bool:
    """Whether IPython's input transformers could change this cell.

    Plain Python (the usual %%stance cell) skips them: about 40 µs a cell.
    """
    if _IPYTHON_SYNTAX.intersection(cell) or cell[:1].isspace():
        return True
    return any(line.lstrip().startswith(_LINE_ESCAPES) for line in cell.splitlines())


def _ends_with_semicolon(cell: str) -> bool:
    """IPython's own test (by tokens: a trailing comment does not hide the ';')."""
    from IPython.core.displayhook import DisplayHook

    check = getattr(DisplayHook, "semicolon_at_end_of_expression", None)
    if check is not None:
        return bool(check(cell))
    lines = [ln for ln in cell.rstrip().splitlines() if ln.strip()]  # pragma: no cover
    return bool(lines) and lines[-1].rstrip().endswith(";")


def _cell_number(shell: Any) -> int:
    """The number IPython gave the cell that is running (In [N])."""
    names = getattr(shell.compile, "_filename_map", {})
    frame = sys._getframe(1)
    while frame is not None:
        number = names.get(frame.f_code.co_filename)
        if number is not None:
            return number
        frame = frame.f_back
    return shell.execution_count


def _check_can_await() -> None:
    """An awaiting cell needs an event loop this magic can run; in a Jupyter
    kernel the cell already runs inside one, so a cell magic cannot."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(
        "%%stance cannot run a cell that awaits inside a running event loop (as in "
        "Jupyter): await in a plain cell, and call the compiled code under %%stance"
    )


def _max_repeat() -> int:
    from .compare import MAX_REPEAT

    return MAX_REPEAT


def _default_repeat() -> int:
    from .compare import DEFAULT_REPEAT

    return DEFAULT_REPEAT


def _notice(msg: str) -> None:
    """A notice (not an error): displayed as text and HTML, so Jupyter does not
    show it in the pink box of stderr; a terminal prints it on stdout."""
    import html

    text = f"stance_magic: {msg}"
    _display(
        text,
        f'<div class="sm-notice" style="font-size:12px;color:#555;margin:2px 0">'
        f"{html.escape(text)}</div>",
    )


def _can_show_images() -> bool:
    """False in a terminal IPython, whose display shows text only."""
    from IPython import get_ipython

    ip = get_ipython()
    return ip is None or "image/png" in ip.display_formatter.active_types


def show(obj: Any, plot: bool = True) -> None:
    """Display a report (or compare/sweep result) as HTML + text, and its chart."""
    _display(str(obj), obj._repr_html_())
    advice = getattr(obj, "advice", None)
    if advice:
        lines = advice() if callable(advice) else advice
        if lines:
            from .render import advice_html

            _display("\n".join(f"hint: {a}" for a in lines), advice_html(lines))
    # A report's chart only when something compiled: an empty bar helps no
    # one and drawing it costs about 60 ms.
    worth = getattr(obj, "compiled_anything", True)
    if plot and worth and hasattr(obj, "figure") and _can_show_images():
        from .plots import show_figure

        fig = obj.figure()
        if fig is not None:
            show_figure(fig, text=None)
