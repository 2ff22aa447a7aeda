"""The ``%stance`` line forms, one plain function each.

``%stance [STANCE]`` (show or set the session stance), ``%stance [STANCE]
--ranks``, and the line commands of :data:`~stance_magic.frontend.options.COMMANDS`
(``watch``, ``history``, ``diff``, ``breaks``, ``reset``, ``panel``, ``bundle``,
``cache``), as in jupysql's ``cmd`` modules: each takes the engine and the
line as :class:`~stance_magic.frontend.magics.StanceMagics` parsed and checked it, and
does its work through the engine, which holds the state. A user's mistake is
an IPython ``UsageError``, or a :class:`~stance_magic.stance.StanceError` that
the magic turns into one. The magic dispatches to :data:`LINE_COMMANDS`.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from IPython.core.error import UsageError

from ..session.engine import Engine, reset_note
from ..stance import Stance, StanceError, make_stance
from .display import can_show_images, display_text
from .options import BUNDLE_USAGE, CACHE_USAGE, DIFF_USAGE, PRECOMPILE_USAGE

__all__ = [
    "LINE_COMMANDS",
    "ranks_line",
    "session_line",
    "set_session",
    "warn_before_running",
]


# -- the session stance -------------------------------------------------------
def warn_before_running(engine: Engine, stance: Stance) -> None:
    """What the user should know before running under ``stance`` (each
    once a session): skip_guard_eval_unsafe's risk, this torch's defects."""
    for msg in (
        engine.take_skip_guard_warning(stance),
        engine.take_torch_warning(stance),
    ):
        if msg:
            print(f"stance_magic: {msg}", file=sys.stderr)


def set_session(engine: Engine, stance: Stance, quiet: bool) -> None:
    """Make ``stance`` the session stance and say so (unless ``quiet``)."""
    warn_before_running(engine, stance)
    previous = engine.set_session(stance)
    if not quiet:
        later = " after this cell" if engine.in_cell else ""
        print(f"session stance: {stance} (was: {previous.nested_text()}){later}")


def session_line(engine: Engine, args: Any, ns: dict[str, Any] | None) -> None:
    """``%stance [STANCE] [-s] [-b NAME]``: set the session stance, or, with
    neither a stance nor an option, print it. ``ns`` is the user's names for
    ``-b NAME`` (None without ``-b``)."""
    words = args.words
    if not words:
        if args.skip_guard_eval_unsafe or args.backend:
            stance = make_stance(
                None,
                args.skip_guard_eval_unsafe,
                args.backend,
                ns,
                base=engine.session,
            )
            return set_session(engine, stance, args.quiet)
        s = engine.session
        print(
            f"session stance: {s.name} (skip_guard_eval_unsafe="
            f"{s.skip_guard_eval_unsafe}, backend={s.backend_name})"
        )
        return None
    stance = make_stance(words[0], args.skip_guard_eval_unsafe, args.backend, ns)
    return set_session(engine, stance, args.quiet)


def ranks_line(engine: Engine, args: Any, ns: dict[str, Any] | None) -> None:
    """``%stance [STANCE] --ranks``: set STANCE (if given) on this rank,
    then gather every rank's session stance; rank 0 prints one line."""
    from .. import probe
    from ..render.ranks import NO_GROUP, stances_line
    from ..session.ranks import session_stances

    words = args.words
    if not probe.process_group_ready():
        raise UsageError(f"%stance --ranks: {NO_GROUP}")
    previous = None
    if words or args.skip_guard_eval_unsafe or args.backend:
        stance = make_stance(
            words[0] if words else None,
            args.skip_guard_eval_unsafe,
            args.backend,
            ns,
            base=engine.session,
        )
        warn_before_running(engine, stance)
        previous = engine.set_session(stance).nested_text()
    stances = session_stances(engine.session)
    if stances is not None and not args.quiet:
        later = " after this cell" if engine.in_cell else ""
        print(stances_line(stances, previous) + later)


# -- the line commands: (engine, shell, args, the words after the command) ------
def watch(engine: Engine, shell: Any, args: Any, rest: list[str]) -> None:
    """``%stance watch [on|off]``."""
    if not rest:
        print(f"watch is {'on' if engine.watch else 'off'}")
        return
    engine.set_watch(rest[0] == "on")
    if not args.quiet:
        what = (
            "every cell that compiles gets a report, and every cell that calls "
            "torch.compile'd code a row in %stance history"
            if rest[0] == "on"
            else "only %%stance cells are reported"
        )
        print(f"watch {rest[0]}: {what}")


def history(engine: Engine, shell: Any, args: Any, rest: list[str]) -> Any:
    """``%stance history [--csv PATH] [--json PATH] [--plot]``."""
    from ..render import History, export

    hist = History(engine.history)
    try:
        written = export.write_exports(hist, args.csv, args.json)
    except export.ExportError as err:
        raise UsageError(f"%stance history: {err}") from None
    if not args.quiet:
        rows = f"{len(hist)} row{'s' if len(hist) != 1 else ''}"
        for path in written:
            print(f"wrote {rows} to {path}")
    if args.plot and not args.no_plot:
        if can_show_images():
            from ..plots import history_figure, show_figure

            display_text(str(hist), hist._repr_html_())
            show_figure(history_figure(hist), text=f"[session history chart: {len(hist)} cells]")
            return None
        print(
            "stance_magic: no chart: this front end shows text only (a terminal "
            "IPython); the table follows, and Jupyter draws the chart"
        )
        return hist
    if written:
        return None  # the one line above says what was written
    return hist


def diff(engine: Engine, shell: Any, args: Any, rest: list[str]) -> Any:
    """``%stance diff [A [B]]``: two measured cells compared (see
    :func:`stance_magic.diff`); a name that names no cell is a UsageError
    listing what can be named."""
    from ..builder.diff import DiffError, diff_cells, pick
    from ..notebook import cell_sources

    names: list[str] = []
    for word in rest:  # "In [7]" arrives as two words
        if names and names[-1].lower() == "in" and word.startswith("["):
            names[-1] += f" {word}"
        else:
            names.append(word)
    if len(names) > 2:
        raise UsageError(DIFF_USAGE)
    try:
        a, b = pick(engine.history, *names)
    except DiffError as err:
        raise UsageError(f"%stance diff: {err}") from None
    return diff_cells(a, b, lambda: cell_sources(shell))


def breaks(engine: Engine, shell: Any, args: Any, rest: list[str]) -> Any:
    """``%stance breaks``: the session's graph breaks."""
    from ..render import BreakList

    return BreakList.of(engine.history)


def reset(engine: Engine, shell: Any, args: Any, rest: list[str]) -> None:
    """``%stance reset``: forget all compiled code."""
    engine.reset_compiled_code()
    if not args.quiet:
        print(reset_note(engine.session))


def bundle(engine: Engine, shell: Any, args: Any, rest: list[str]) -> None:
    """``%stance bundle PATH``: the last measured cell, zipped for a bug report."""
    from ..share import BundleError
    from ..share import bundle as make_bundle

    if len(rest) != 1:
        raise StanceError(BUNDLE_USAGE)
    if not engine.history:
        raise StanceError("%stance bundle: no measured cell yet (run a %%stance cell first)")
    try:
        line = make_bundle(rest[0], engine.history[-1])
    except BundleError as err:
        raise StanceError(f"%stance bundle: {err}") from None
    if not args.quiet:
        print(line)


def cache(engine: Engine, shell: Any, args: Any, rest: list[str]) -> Any:
    """``%stance cache save PATH`` / ``%stance cache load PATH`` (see stance_magic.session.warm)."""
    from ..session import warm

    if rest[:1] == ["precompile"]:
        return precompile(engine, shell, args, rest[1:])
    if len(rest) != 2 or rest[0] not in ("save", "load"):
        raise UsageError(CACHE_USAGE)
    try:
        info = (warm.save_cache if rest[0] == "save" else warm.load_cache)(rest[1])
    except warm.WarmStartError as err:
        raise UsageError(f"%stance cache {rest[0]}: {err}") from None
    if not args.quiet:
        display_text(str(info), info._repr_html_())
    return None


def precompile(engine: Engine, shell: Any, args: Any, rest: list[str]) -> None:
    """``%stance cache precompile [on|off]`` (see stance_magic.session.warm.precompile)."""
    from ..session import warm

    if len(rest) > 1 or (rest and rest[0] not in ("on", "off")):
        raise UsageError(PRECOMPILE_USAGE)
    on = None if not rest else rest[0] == "on"
    try:
        line = warm.precompile(on)
    except warm.WarmStartError as err:
        raise UsageError(f"%stance cache precompile: {err}") from None
    if not args.quiet:
        print(line)


def panel(engine: Engine, shell: Any, args: Any, rest: list[str]) -> Any:
    """``%stance panel``: the widget panel, or a line saying why not."""
    from ..widgets.panel import PanelUnavailable
    from ..widgets.panel import panel as make_panel

    try:
        return make_panel(engine=engine, shell=shell)
    except PanelUnavailable as err:
        print(f"stance_magic: {err}", file=sys.stderr)
        return None


#: A line command: ``(engine, shell, args, rest)``, ``rest`` the words after
#: the command's name.
Command = Callable[[Engine, Any, Any, list[str]], Any]

#: ``%stance WORD ...``: the function that does it, for each word of
#: :data:`~stance_magic.frontend.options.COMMANDS`.
LINE_COMMANDS: dict[str, Command] = {
    "watch": watch,
    "history": history,
    "diff": diff,
    "breaks": breaks,
    "reset": reset,
    "panel": panel,
    "bundle": bundle,
    "cache": cache,
}
