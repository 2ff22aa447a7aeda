"""The options of ``%stance`` / ``%%stance``, declared once, and what each form accepts.

The options are IPython ``@argument`` declarations with their help, so
``%stance?`` is generated from the parser (:func:`declare`); which options
each form of the magic accepts is one table, :data:`ACCEPTS`, with
:data:`RULES` for the mistakes that have a message of their own. The words
(the stance, or the command and its words) are checked first, by
:data:`WORD_RULES`: a wrong word is the error a line shows, even where an
option of the line is wrong too. All are checked by :func:`validate_args`
(and :func:`word_problem` where argparse refuses the line) before anything
runs, and a mistake is a one-line ``UsageError``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, kwds, magic_arguments

from ..stance import stance_name_problem

if TYPE_CHECKING:
    import argparse

__all__ = [
    "ACCEPTS",
    "ARGUMENTS",
    "BUNDLE_USAGE",
    "CACHE_USAGE",
    "COMMANDS",
    "FORMS",
    "PRECOMPILE_USAGE",
    "RULES",
    "WATCH_USAGE",
    "WORD_RULES",
    "Declared",
    "declare",
    "finish_help",
    "form_of",
    "max_repeat",
    "validate_args",
    "word_problem",
]

COMMANDS = ("watch", "history", "diff", "breaks", "reset", "panel", "bundle", "cache")

#: The forms of the magic: the cell magic, ``%stance [STANCE]`` (set or show
#: the session stance), ``%stance [STANCE] --ranks``, and the line commands.
FORMS = ("cell", "line", "ranks", *COMMANDS)

#: The options each form accepts (argparse ``dest`` names; ``words`` is the
#: stance or the command and its word, checked by :data:`WORD_RULES`).
ACCEPTS: dict[str, frozenset[str]] = {
    "cell": frozenset(
        {
            "skip_guard_eval_unsafe",
            "backend",
            "quiet",
            "verbose",
            "profile_lookups",
            "memory",
            "compare",
            "repeat",
            "sweep",
            "no_plot",
            "ranks",
            "full",
            "trace",
            "timeline",
        }
    ),
    "line": frozenset({"skip_guard_eval_unsafe", "backend", "quiet"}),
    "ranks": frozenset({"skip_guard_eval_unsafe", "backend", "quiet", "ranks"}),
    "watch": frozenset({"quiet"}),
    "history": frozenset({"csv", "json", "plot", "no_plot", "quiet"}),
    "diff": frozenset({"quiet"}),
    "breaks": frozenset({"quiet"}),
    "bundle": frozenset({"quiet"}),
    "cache": frozenset({"quiet"}),
    "reset": frozenset({"quiet"}),
    "panel": frozenset({"quiet"}),
}

_LINE = frozenset(FORMS) - {"cell"}

WATCH_USAGE = "usage: %stance watch on|off"
BUNDLE_USAGE = "usage: %stance bundle PATH.zip (the last measured cell)"
CACHE_USAGE = (
    "usage: %stance cache save PATH | %stance cache load PATH | %stance cache precompile [on|off]"
)
PRECOMPILE_USAGE = "usage: %stance cache precompile [on|off]"
DIFF_USAGE = (
    "usage: %stance diff [A [B]]: two measured cells (In [N] or N, -1 the last, "
    "or a stance of the last --sweep); left out, the last two"
)


def max_repeat() -> int:
    """The most runs per side ``--repeat`` accepts (``session.compare.MAX_REPEAT``)."""
    from ..session.compare import MAX_REPEAT

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


def _stance_problem(a: Any, commands: tuple[str, ...] = ()) -> str | None:
    """Why the line's first word is not a stance (and, on a line, not a
    command either), or None."""
    if not a.words or a.words[0] in COMMANDS:
        return None
    return stance_name_problem(a.words[0], commands)


#: The mistakes in the words of a line (the stance, or the command and its
#: words), checked in order before :data:`RULES`: the first wrong word is
#: the error a line shows, whatever else is wrong with its options.
WORD_RULES: tuple[Rule, ...] = (
    _rule(
        "cell",
        lambda a: a.words and a.words[0] in COMMANDS,
        lambda a: f"%stance {a.words[0]} is a line magic; use it with one %",
    ),
    _rule("line", lambda a: _stance_problem(a, COMMANDS), lambda a: _stance_problem(a, COMMANDS)),
    _rule({"cell", "ranks"}, _stance_problem, _stance_problem),
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
        WATCH_USAGE,
    ),
    _rule(
        "cache",
        lambda a: len(a.words) > 1 and a.words[1] not in ("save", "load", "precompile"),
        CACHE_USAGE,
    ),
    _rule("cache", lambda a: a.words[1:2] != ["precompile"] and len(a.words) > 3, CACHE_USAGE),
    _rule(
        "cache",
        lambda a: (
            a.words[1:2] == ["precompile"]
            and (len(a.words) > 3 or a.words[2:3] not in ([], ["on"], ["off"]))
        ),
        PRECOMPILE_USAGE,
    ),
    _rule("bundle", lambda a: len(a.words) > 2, BUNDLE_USAGE),
    _rule(
        {"history", "breaks", "reset", "panel"},
        lambda a: len(a.words) > 1,
        lambda a: f"%stance {a.words[0]}: unexpected word {a.words[1]!r}",
    ),
)

#: Checked in order, after :data:`WORD_RULES` and before :data:`ACCEPTS`;
#: the first that applies is the one-line UsageError.
RULES: tuple[Rule, ...] = (
    _rule(
        _LINE,
        lambda a: a.compare or a.sweep is not None or a.repeat is not None,
        "--compare, --repeat and --sweep apply to a %%stance cell",
    ),
    _rule(_LINE, lambda a: a.full, "--full goes with a %%stance --ranks cell"),
    _rule(
        _LINE,
        lambda a: a.trace is not None or a.timeline is not None,
        "--trace and --timeline go with a %%stance cell",
    ),
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
    _rule("cell", lambda a: a.repeat is not None and not a.compare, "--repeat goes with --compare"),
    _rule(
        "cell",
        lambda a: a.repeat is not None and a.repeat < 1,
        "--repeat needs a count of 1 or more",
    ),
    _rule(
        "cell",
        lambda a: a.repeat is not None and a.repeat > max_repeat(),
        lambda a: f"--repeat {a.repeat} is too many: at most {max_repeat():,} runs per side",
    ),
    _rule(
        "cell",
        lambda a: a.memory and a.compare and a.profile_lookups,
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
        lambda a: (
            (a.trace is not None or a.timeline is not None)
            and (a.compare or a.sweep is not None or a.ranks)
        ),
        "--trace and --timeline go with a plain %%stance cell (one run)",
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


def word_problem(args: Any, form: str) -> str | None:
    """The message for the first wrong word of a line (:data:`WORD_RULES`), or None."""
    for rule in WORD_RULES:
        message = rule.check(form, args)
        if message:
            return message
    return None


def validate_args(args: Any, form: str, parser: Any) -> None:
    """Raise the one-line UsageError for a wrong word, or for options ``form``
    does not accept."""
    for rule in (*WORD_RULES, *RULES):
        message = rule.check(form, args)
        if message:
            raise UsageError(message)
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


INTRO = """\
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
    %stance diff [A [B]]        what differs between two measured cells, B
                                against A: the change in wall time and why,
                                then only the rows that differ (A, B: In [N]
                                or N, -1 the last, a stance of the last
                                --sweep; B alone: B against the cell before
                                it; neither: the last two)
    %stance breaks              the session's graph breaks as a to-do list: by
                                torch's graph-break type and your line, most
                                costly first, with hints and documentation links
    %stance reset               forget all compiled code (torch.compiler.reset())
    %stance bundle PATH.zip     zip the last measured cell for a bug report: its
                                source, report, versions, stance and changed
                                dynamo config, its trace and tlparse output
    %stance cache save PATH     write this process's compile-cache artifacts
                                (Inductor, AOTAutograd; torch 2.7+) and the
                                C++ binaries Inductor compiled to PATH
    %stance cache load PATH     load them (same torch), so that the next
                                compile of those graphs loads them: a warm
                                start after a kernel restart
    %stance cache precompile on|off
                                Dynamo's precompiled frames (torch's
                                caching_precompile, 2.10+): the saved caches
                                also skip Dynamo's tracing; an edited cell is
                                traced again, never run from its old compile
    %stance panel               a widget panel to toggle the stance

STANCE is one of the stances the installed torch supports: default,
force_eager, eager_on_recompile, fail_on_recompile, eager_then_compile,
aot_eager_then_compile (as torch has them).
"""

EXAMPLES = """\
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


#: Every option, in the order ``%stance?`` lists them.
ARGUMENTS = (
    argument(
        "words",
        nargs="*",
        metavar="STANCE",
        help=_h(
            "The stance (left out: the session stance); on a line, or one of the "
            "commands watch on|off, history, diff [A [B]], breaks, reset, panel, bundle PATH, "
            "cache save|load PATH, cache precompile on|off."
        ),
    ),
    argument(
        "-u",
        "--skip-guard-eval-unsafe",
        action="store_true",
        help=_h(
            "Run only the guards that tell cache entries apart: faster, and silently "
            "wrong if a recompile was needed."
        ),
    ),
    argument(
        "-b",
        "--backend",
        "--force-backend",
        default=None,
        metavar="NAME",
        help=_h(
            "Force a backend (only with the default stance): a name from "
            "torch._dynamo.list_backends() or a callable in your namespace."
        ),
    ),
    argument(
        "-q",
        "--quiet",
        action="store_true",
        help=_h(
            "No report, no notice (--compare, --sweep), no message (a session stance "
            "set, an export written)."
        ),
    ),
    argument(
        "-v",
        "--verbose",
        action="store_true",
        help=_h(
            "The report whole: every row, none folded (StanceMagics.verbose = True: for "
            "every cell). Without it a report shows its headline, its hints and the rows "
            "that matter for the cell."
        ),
    ),
    argument(
        "-g",
        "--profile-lookups",
        "--profile-guards",
        action="store_true",
        help=_h(
            "Measure every cache lookup with torch's profiler ('TorchDynamo Cache "
            "Lookup' events) instead of timing the lookups of the called functions in situ: "
            "it also times the lookups after graph breaks (resume functions), and slows "
            "everything else the cell runs."
        ),
    ),
    argument(
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
    ),
    argument(
        "--compare",
        action="store_true",
        help=_h(
            "Run the cell under force_eager and under STANCE (side effects repeat) and "
            "show the speedup and break-even run count."
        ),
    ),
    argument(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help=_h(
            "With --compare: run each N times (default 5, or StanceMagics.default_repeat: "
            "the first run, and the rest for the steady state; at most 10,000)."
        ),
    ),
    argument(
        "--sweep",
        nargs="?",
        const="",
        default=None,
        metavar="S1,S2,...",
        help=_h(
            "Run the cell once per stance (all supported ones if no list), each from "
            "cold compiled caches."
        ),
    ),
    argument(
        "--no-plot",
        action="store_true",
        help=_h("Text and table only, no chart (StanceMagics.plot = False: for every cell)."),
    ),
    argument(
        "--plot",
        action="store_true",
        help=_h("With %stance history: the chart of the session (a front end that shows images)."),
    ),
    argument(
        "--csv", default=None, metavar="PATH", help=_h("With %stance history: write it as CSV.")
    ),
    argument(
        "--json", default=None, metavar="PATH", help=_h("With %stance history: write it as JSON.")
    ),
    argument(
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
    ),
    argument(
        "--full",
        action="store_true",
        help=_h("With --ranks: gather every rank's whole report, shown under the combined view."),
    ),
    argument(
        "--trace",
        default=None,
        metavar="DIR",
        help=_h(
            "Write torch's structured trace (what TORCH_TRACE writes) of this cell alone to "
            "a file in DIR; with tlparse installed, run it and link its index.html. A "
            "TORCH_TRACE of the process is left alone."
        ),
    ),
    argument(
        "--timeline",
        default=None,
        metavar="FILE.json",
        help=_h(
            "Write the cell as a Chrome-trace/Perfetto timeline (compiles and their phases, "
            "cache lookups, graph breaks, runs of compiled code); turns torch's profiler on "
            "for the cell."
        ),
    ),
)


class Declared(Protocol):
    """A magic as :func:`declare` makes it: callable, with its parser."""

    parser: argparse.ArgumentParser

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def declare(func: Callable[..., Any]) -> Declared:
    """Give the magic ``func`` its parser (``func.parser``) and its help: the
    intro, then every option of :data:`ARGUMENTS` with its help, then the
    examples (as ``@magic_arguments()`` over ``@argument`` lines does)."""
    for arg in reversed(ARGUMENTS):
        func = arg(func)
    func = kwds(description=INTRO, epilog=EXAMPLES)(func)
    return magic_arguments()(func)


def config_help(cls: type) -> str:
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


def finish_help(func: Declared, cls: type) -> None:
    """``%stance?``: the intro, every option from the parser, the settings
    (the traits of ``cls``), the examples."""
    parser = func.parser
    parser.epilog = config_help(cls) + "\n\n" + EXAMPLES
    func.__doc__ = parser.format_help()
