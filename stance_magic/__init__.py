"""stance_magic: see and steer ``torch.compiler.set_stance`` from a notebook.

``%load_ext stance_magic`` registers the ``%stance`` / ``%%stance`` magics.
In Python, :func:`measure`, :func:`current_stance` and :func:`history` use the
same engine. Importing this package imports neither torch, matplotlib nor
ipywidgets; they load when first needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

__all__ = [
    "CellReport",
    "RankReport",
    "Stance",
    "StanceError",
    "breaks",
    "bundle",
    "current_stance",
    "history",
    "load_cache",
    "load_ipython_extension",
    "measure",
    "panel",
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
    "get_engine": "engine",
    "CellReport": "report",
    "RankReport": "ranks",
    "panel": "widget",
    "save_cache": "warm",
    "load_cache": "warm",
    "CacheInfo": "warm",
}


def __getattr__(name: str) -> Any:
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
    force_backend: Any = None,
    label: str | None = None,
    memory: bool = False,
    profile_guards: bool = False,
    gather: bool | str = False,
    trace: str | None = None,
    timeline: str | None = None,
) -> Any:
    """Run a block under a stance and measure what torch.compile did.

    A context manager yielding a :class:`CellReport`, filled in when the
    block ends and added to :func:`history`. ``stance=None`` means the
    session stance. ``memory=True`` also measures the bytes torch allocates
    (``%%stance -m``); ``profile_guards=True`` times every cache lookup with
    torch's profiler (``-g``). ``trace=DIR`` writes the block's structured
    trace (what ``TORCH_TRACE`` writes) to a file in DIR and runs ``tlparse``
    on it when installed (``rep.trace_file``, ``rep.tlparse_index``);
    ``timeline=FILE`` writes a Chrome-trace/Perfetto JSON of the block
    (``rep.timeline_file``); :func:`bundle` zips a report for a bug report.

    ``gather=True`` (inside an initialized ``torch.distributed`` process
    group, on every rank) sends each rank's summary to rank 0 when the block
    ends, also when it raised; rank 0's report then has ``rep.ranks``, a
    :class:`RankReport` with one row per rank and the ranks' divergences.
    ``gather="full"`` sends whole reports. Without a process group it warns
    and measures this process alone. See :mod:`stance_magic.ranks`.

    Examples
    --------
    >>> import stance_magic, torch
    >>> f = torch.compile(lambda x: x.sin(), backend="eager")
    >>> with stance_magic.measure("default") as rep:
    ...     _ = f(torch.ones(3))
    >>> rep.compiles
    1
    """
    from .engine import get_engine, make_stance

    engine = get_engine()
    st = make_stance(stance, skip_guard_eval_unsafe, force_backend, base=engine.session)
    if trace is not None or timeline is not None:
        from .share import check_options

        check_options(trace, timeline)
    # Gathered, the report is added to the history once rank 0 has the
    # combined view (published once, complete).
    measuring = engine.measure(
        st,
        label=label,
        memory=memory,
        profile_guards=profile_guards,
        record=not gather,
        trace=trace,
        timeline=timeline,
    )
    if gather:
        from .ranks import gathered

        return gathered(measuring, gather, publish=engine.add_report)
    return measuring


def set_session_stance(
    stance: str, *, skip_guard_eval_unsafe: bool = False, force_backend: Any = None
) -> Any:
    """Set the session stance (as ``%stance NAME`` does); return the previous one."""
    from .engine import get_engine, make_stance

    return get_engine().set_session(make_stance(stance, skip_guard_eval_unsafe, force_backend))


def history() -> list[Any]:
    """The measured cells of this session, oldest first, as a table-like list."""
    from .engine import get_engine
    from .render import History

    return History(get_engine().history)


def breaks() -> list[Any]:
    """The session's graph breaks as a to-do list: grouped by torch's
    graph-break type and the user's line, most costly first, each with
    torch's hint and documentation page (``%stance breaks``)."""
    from .engine import get_engine
    from .render import BreakList

    return BreakList.of(get_engine().history)


def bundle(path: Any, report: Any = None) -> str:
    """Zip a measured cell (the last one by default) for a bug report; one line
    says what is in it (``%stance bundle PATH``). See :func:`stance_magic.share.bundle`."""
    from .engine import get_engine
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
    from ._extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext stance_magic``: remove everything load added; restore the stance.

    ``%reload_ext stance_magic`` (an unload, then a load) keeps the session
    stance and watch as they were.
    """
    from ._extension import unload

    unload(ipython)
