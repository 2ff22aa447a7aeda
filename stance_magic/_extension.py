"""Loading and unloading the IPython extension, exactly symmetric."""

from __future__ import annotations

from typing import Any

_STATE: dict[int, dict[str, Any]] = {}


def load(ipython: Any) -> None:
    from .engine import current_stance, get_engine
    from .magics import StanceMagics

    key = id(ipython)
    if key in _STATE:  # %load_ext twice: nothing is registered twice
        return
    engine = get_engine()
    engine.new_session()
    magics = StanceMagics(ipython, engine)
    ipython.register_magics(magics)
    ipython.events.register("pre_run_cell", magics.pre_run_cell)
    ipython.events.register("post_run_cell", magics.post_run_cell)
    _STATE[key] = {"magics": magics, "stance_before": current_stance()}


def unload(ipython: Any) -> None:
    from .engine import _apply, get_engine

    state = _STATE.pop(id(ipython), None)
    if state is None:
        return
    magics = state["magics"]
    get_engine().unobserve(magics._on_engine)
    # The %unload_ext cell itself may be watched: close that window now, as
    # its post_run_cell hook is about to be removed.
    magics.close_watch()
    for event, fn in (
        ("pre_run_cell", magics.pre_run_cell),
        ("post_run_cell", magics.post_run_cell),
    ):
        try:
            ipython.events.unregister(event, fn)
        except ValueError:
            pass
    mm = ipython.magics_manager
    for kind in ("line", "cell"):
        if mm.magics[kind].get("stance") is not None:
            owner = getattr(mm.magics[kind]["stance"], "__self__", None)
            if owner is magics:
                del mm.magics[kind]["stance"]
    mm.registry.pop(type(magics).__name__, None)
    engine = get_engine()
    if not _STATE:
        engine.close()
    _apply(state["stance_before"])
    engine.sync()
