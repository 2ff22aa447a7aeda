"""stance_magic: see and steer ``torch.compiler.set_stance`` from a notebook.

``%load_ext stance_magic`` registers the ``%stance`` / ``%%stance`` magics.
In Python, :func:`measure`, :func:`current_stance` and :func:`history` use the
same engine. Importing this package imports neither torch, matplotlib nor
ipywidgets; they load when first needed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What a type checker reads for the lazy names below (at run time they load
    # through __getattr__, when first used).
    from contextlib import AbstractContextManager as ContextManager
    from typing import Any, Callable, Literal

    from .render import BreakList, History
    from .report.cell import CellReport as CellReport
    from .report.diff import CellDiff as CellDiff
    from .report.ranks import RankReport as RankReport
    from .report.warm import CacheInfo as CacheInfo
    from .session.engine import get_engine as get_engine
    from .session.measurement import Measured as Measured
    from .session.warm import load_cache as load_cache
    from .session.warm import precompile as precompile
    from .session.warm import save_cache as save_cache
    from .spec import MeasureSpec as MeasureSpec
    from .stance import Stance as Stance
    from .stance import StanceError as StanceError
    from .stance import current_stance as current_stance
    from .stance import make_stance as make_stance
    from .stance import supported_stances as supported_stances
    from .widgets.panel import panel as panel

from ._version import __version__ as __version__

__all__ = [
    "CacheInfo",
    "CellReport",
    "MeasureSpec",
    "Measured",
    "RankReport",
    "Stance",
    "StanceError",
    "breaks",
    "bundle",
    "current_stance",
    "diff",
    "get_engine",
    "history",
    "load_cache",
    "load_ipython_extension",
    "measure",
    "panel",
    "precompile",
    "save_cache",
    "set_session_stance",
    "supported_stances",
    "unload_ipython_extension",
]

_LAZY = {
    "Stance": "stance",
    "StanceError": "stance",
    "current_stance": "stance",
    "supported_stances": "stance",
    "make_stance": "stance",
    "get_engine": "session.engine",
    "CellReport": "report",
    "MeasureSpec": "spec",
    "Measured": "session.measurement",
    "RankReport": "report.ranks",
    "panel": "widgets.panel",
    "save_cache": "session.warm",
    "load_cache": "session.warm",
    "precompile": "session.warm",
    "CacheInfo": "report.warm",
}


def __getattr__(name: str) -> object:
    # Every lazy name is imported for type checkers above, so what reaches this at
    # type-checking time is a name the package does not have: `object`, not `Any`,
    # so that a misspelt stance_magic.Stnce is an error there too.
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'stance_magic' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"stance_magic.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def measure(
    stance: str | None = None,
    *,
    skip_guard_eval_unsafe: bool = False,
    force_backend: str | Callable[..., Any] | None = None,
    label: str | None = None,
    memory: bool = False,
    profile_lookups: bool = False,
    ranks: bool | Literal["summary", "full"] = False,
    trace: str | os.PathLike[str] | None = None,
    timeline: str | os.PathLike[str] | None = None,
    trace_functions: bool = True,
    **deprecated: Any,
) -> ContextManager[Measured]:
    """Run a block under a stance and measure what torch.compile did.

    A context manager yielding a :class:`~stance_magic.session.measurement.Measured`:
    the block's :class:`CellReport` once the block has ended (its figures
    read through it: ``rep.compiles``), also added to :func:`history`.
    ``stance=None`` means the session stance, and a stance the block's own
    code sets (``torch.compiler.set_stance``) stays after it, as it would
    unmeasured; a named stance is given back when the block ends, as
    ``%%stance`` gives back the one before the cell. ``memory=True`` also measures
    the bytes torch allocates (``%%stance -m``); ``profile_lookups=True``
    times every cache lookup with torch's profiler (``-g``). ``trace=DIR``
    writes the block's structured trace (what ``TORCH_TRACE`` writes) to a
    file in DIR and runs ``tlparse`` on it when installed
    (``rep.shared.trace_file``, ``rep.shared.tlparse_index``);
    ``timeline=FILE`` writes a Chrome-trace/Perfetto JSON of the block
    (``rep.shared.timeline_file``); :func:`bundle` zips a report for a bug
    report. ``trace_functions=False`` leaves torch's ``dynamo_profiler`` off
    (on torch 2.13+ it times Dynamo's tracing by function: ``rep.tracing``).

    ``ranks=True`` (inside an initialized ``torch.distributed`` process
    group, on every rank) sends each rank's summary to rank 0 when the block
    ends, also when it raised; rank 0's report then has ``rep.ranks``, a
    :class:`RankReport` with one row per rank and the ranks' divergences.
    ``ranks="full"`` sends whole reports. Without a process group it warns
    and measures this process alone. See :mod:`stance_magic.builder.ranks`.

    ``profile_guards=`` and ``gather=`` are the earlier names of
    ``profile_lookups=`` and ``ranks=`` (deprecated).

    Examples
    --------
    >>> import stance_magic, torch
    >>> f = torch.compile(lambda x: x.sin(), backend="eager")
    >>> with stance_magic.measure("default") as rep:
    ...     _ = f(torch.ones(3))
    >>> rep.compiles
    1
    """
    from .session.engine import get_engine
    from .spec import MeasureSpec
    from .stance import make_stance

    profile_lookups, ranks = _renamed(deprecated, profile_lookups, ranks)
    engine = get_engine()
    # a block that names no stance runs under the session's and leaves a
    # stance its own code sets (as it would unmeasured)
    named = stance is not None or skip_guard_eval_unsafe or force_backend is not None
    st = make_stance(stance, skip_guard_eval_unsafe, force_backend, base=engine.session)
    mode: Literal["summary", "full"] | None = None
    if ranks:
        from .probe import process_group_ready
        from .render.ranks import NO_GROUP
        from .report.ranks import check_mode

        mode = check_mode(ranks)
        if not process_group_ready():
            import warnings

            warnings.warn(f"stance_magic: gather ignored: {NO_GROUP}", RuntimeWarning, stacklevel=2)
            mode = None
    spec = MeasureSpec(
        stance=st if named else None,
        label=label,
        memory=memory,
        profile_lookups=profile_lookups,
        trace=os.fspath(trace) if trace is not None else None,
        timeline=os.fspath(timeline) if timeline is not None else None,
        ranks=mode,
        trace_functions=trace_functions,
    )
    return engine.measure(spec)


def _renamed(
    deprecated: dict[str, Any], profile_lookups: bool, ranks: bool | Literal["summary", "full"]
) -> tuple[bool, bool | Literal["summary", "full"]]:
    """``measure()``'s earlier keyword names, still taken for one release."""
    import warnings

    for old, new in (("profile_guards", "profile_lookups"), ("gather", "ranks")):
        if old in deprecated:
            warnings.warn(
                f"measure({old}=) is deprecated and goes in the next release: use {new}=",
                DeprecationWarning,
                stacklevel=3,
            )
            value = deprecated.pop(old)
            if old == "profile_guards":
                profile_lookups = profile_lookups or bool(value)
            else:
                ranks = ranks or value
    if deprecated:
        name = next(iter(deprecated))
        raise TypeError(f"measure() got an unexpected keyword argument {name!r}")
    return profile_lookups, ranks


def set_session_stance(
    stance: str,
    *,
    skip_guard_eval_unsafe: bool = False,
    force_backend: str | Callable[..., Any] | None = None,
) -> Stance:
    """Set the session stance (as ``%stance NAME`` does); return the previous one."""
    from .session.engine import get_engine
    from .stance import make_stance

    return get_engine().set_session(make_stance(stance, skip_guard_eval_unsafe, force_backend))


def history() -> History[CellReport]:
    """The measured cells of this session, oldest first, as a table-like list."""
    from .render import History
    from .session.engine import get_engine

    return History(get_engine().history)


def diff(
    a: int | str | CellReport | None = None, b: int | str | CellReport | None = None
) -> CellDiff:
    """What differs between two measured cells, B against A (``%stance diff``).

    ``a`` and ``b`` name cells of the history: IPython's number (``7`` or
    ``"In [7]"``), a position from the end (``-1``, the last), a report, or
    a stance of the last ``--sweep`` (``"force_eager"``; ``"7:default"``
    names one run of cell 7's sweep). Neither given: the last two measured
    cells; ``a`` alone: that cell against the measured cell before it.
    Every figure is read from the two reports; nothing runs again. An
    unknown name raises :class:`stance_magic.builder.diff.DiffError` (a
    ``ValueError``) listing what can be named."""
    from .builder.diff import diff_cells, pick
    from .notebook import cell_sources
    from .session.engine import get_engine

    first, second = pick(get_engine().history, a, b)
    return diff_cells(first, second, cell_sources)


def breaks() -> BreakList:
    """The session's graph breaks as a to-do list: grouped by torch's
    graph-break type and the user's line, most costly first, each with
    torch's hint and documentation page (``%stance breaks``)."""
    from .render import BreakList
    from .session.engine import get_engine

    return BreakList.of(get_engine().history)


def bundle(path: str | os.PathLike[str], report: CellReport | None = None) -> str:
    """Zip a measured cell (the last one by default) for a bug report; one line
    says what is in it (``%stance bundle PATH``). See :func:`stance_magic.share.bundle`."""
    from .session.engine import get_engine
    from .share import BundleError
    from .share import bundle as make_bundle

    if report is None:
        hist = get_engine().history
        if not hist:
            raise BundleError("no measured cell to bundle yet (run a %%stance cell first)")
        report = hist[-1]
    return make_bundle(path, report)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext stance_magic``: register the magics and cell hooks.

    On a torch older than stance_magic supports it prints one line saying
    which torch is needed and registers nothing.
    """
    from .probe import torch_problem

    problem = torch_problem()
    if problem is not None:
        print(problem)
        return
    from .frontend.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext stance_magic``: remove everything load added; restore the stance.

    ``%reload_ext stance_magic`` (an unload, then a load) keeps the session
    stance and watch as they were.
    """
    from .frontend.extension import unload

    unload(ipython)
