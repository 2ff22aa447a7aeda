"""Loading and unloading the IPython extension, exactly symmetric."""

from __future__ import annotations

from typing import Any

from ..notebook import in_reload

_STATE: dict[int, dict[str, Any]] = {}
#: What ``%reload_ext`` carries from the unload to the load that follows it.
_RELOADING: dict[int, dict[str, Any]] = {}


def load(ipython: Any) -> None:
    from ..session.engine import current_stance, get_engine
    from .execution import syntax_checker
    from .magics import StanceMagics

    key = id(ipython)
    if key in _STATE:  # %load_ext twice: nothing is registered twice
        return
    carried = _RELOADING.pop(key, None)
    if carried is not None and not in_reload(ipython):
        carried = None
    from ..probe import hold

    engine = get_engine()
    engine.new_session()
    # what would cost every cell to swap stays in torch between cells (as
    # torch's own: name, docstring, signature) until the unload
    hold(True)
    magics = StanceMagics(ipython, engine)
    ipython.register_magics(magics)
    magics.attach_views()
    ipython.events.register("pre_run_cell", magics.pre_run_cell)
    ipython.events.register("post_run_cell", magics.post_run_cell)
    # a %%stance cell's syntax error is IPython's own, before the cell runs
    checker = syntax_checker(ipython)
    ipython.input_transformers_cleanup.append(checker)
    _STATE[key] = {
        "magics": magics,
        "syntax_checker": checker,
        "stance_before": current_stance(),
        # Dynamo's precompiled frames checked against the cells' code (see
        # probe.precompile): torch looks them up at torch.compile, any cell
        "source_check": _install_source_check(),
    }
    if carried is not None:
        # %reload_ext: the session goes on as it was; a later %unload_ext
        # still gives back the stance from before the first load.
        _STATE[key]["stance_before"] = carried["stance_before"]
        engine.set_session(carried["session"])
        engine.set_watch(carried["watch"])


def unload(ipython: Any) -> None:
    from ..session.engine import get_engine

    state = _STATE.pop(id(ipython), None)
    if state is None:
        return
    magics = state["magics"]
    if in_reload(ipython):
        _RELOADING[id(ipython)] = {
            "stance_before": state["stance_before"],
            "session": get_engine().session,
            "watch": get_engine().watch,
        }
    magics.detach()
    cleanup = ipython.input_transformers_cleanup
    while state["syntax_checker"] in cleanup:
        cleanup.remove(state["syntax_checker"])
    # The %unload_ext cell itself may be watched: close that window now, as
    # its post_run_cell hook is about to be removed.
    magics.close_watch()
    get_engine().cells.reset()
    get_engine().cell_ended()
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
    from ..probe import hold

    hold(False)
    engine = get_engine()
    if not _STATE:
        engine.close()
        if state.get("source_check"):
            from ..probe.precompile import SOURCE_CHECK

            SOURCE_CHECK.uninstall()
    engine.apply(state["stance_before"])
    engine.sync()


def _install_source_check() -> bool:
    """Check Dynamo's precompiled frames against the cells' code, where
    torch has them; True where this load put the check in."""
    from ..probe.precompile import SOURCE_CHECK, available

    if SOURCE_CHECK.installed or available() is not None:
        return False
    return SOURCE_CHECK.install()
