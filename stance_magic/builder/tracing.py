"""The report's tracing by function: torch's ``dynamo_profiler`` timings of
the cell's traced frames (:mod:`stance_magic.probe.tracing`) added up by
function and by ``nn.Module`` class, each compiled frame's backend compile
time put on the function it starts at."""

from __future__ import annotations

from collections.abc import Sequence

from .. import probe
from ..report import FrameCompile
from ..report.tracing import (
    PATHS_KEPT,
    TRACING_MEASURED,
    TRACING_OFF,
    TRACING_UNAVAILABLE,
    TracedFunction,
    TracedModule,
    Tracing,
)
from .locating import _file

_NS = 1e-9
#: the compile phases after Dynamo's: the backend's compile of a frame's graph
BACKEND_PHASES = ("aot_autograd", "backend", "codegen")


def _add(acc: TracedFunction | TracedModule, call: probe.TracedCall) -> None:
    """One trace added to a function's or a module's figures, as pstats adds
    calls up: own time always, inclusive time only for a non-recursive trace."""
    acc.traced += 1
    acc.own_s += call.own_ns * _NS
    if call.primitive:
        acc.cumulative_s += call.cum_ns * _NS


def tracing(window: probe.Window, frames: Sequence[FrameCompile], dynamo_s: float) -> Tracing:
    """The cell's tracing by function (``dynamo_s``: its Dynamo compile phase)."""
    traced = [rec for rec in window.compiles if rec.kind == "frame" and rec.info.traced]
    if not traced:
        if not any(f.kind == "frame" for f in frames):
            return Tracing()
        if probe.tracing_profiler() is None:
            state = TRACING_UNAVAILABLE
        else:
            state = TRACING_MEASURED if window.tracing_on else TRACING_OFF
        return Tracing(state=state, dynamo_s=dynamo_s, reset_seen=window.reset_seen)
    by_id = {f.compile_id: f for f in frames}
    funcs: dict[tuple[str, int, str], TracedFunction] = {}
    modules: dict[str, TracedModule] = {}
    traced_s = 0.0
    for rec in traced:
        frame = by_id.get(rec.compile_id)
        for call in rec.info.traced:
            key = (call.filename, call.line, call.name)
            fn = funcs.get(key)
            if fn is None:
                fn = funcs[key] = TracedFunction(
                    name=call.name,
                    filename=call.filename,
                    line=call.line,
                    cumulative_s=0.0,
                    own_s=0.0,
                    traced=0,
                    bytecode=call.bytecode,
                    module=call.module_class,
                    file=_file(call.filename),
                )
            _add(fn, call)
            if call.module_path is not None and call.module_path not in fn.paths:
                fn.paths.append(call.module_path)
            if call.module_class is not None:
                mod = modules.get(call.module_class)
                if mod is None:
                    mod = modules[call.module_class] = TracedModule(call.module_class, 0.0, 0.0, 0)
                _add(mod, call)
            if call.depth == 0:
                traced_s += call.cum_ns * _NS
                fn.frames += 1
                if frame is not None:
                    if fn.module is None and rec.info.module is not None:
                        # the compiled frame is a module's forward (torch's own
                        # Sequential.forward too): named by the module's class
                        fn.module = rec.info.module[0].rsplit(".", 1)[0]
                    fn.compile_s += sum(frame.phases.get(p, 0.0) for p in BACKEND_PHASES)
    for fn in funcs.values():
        fn.path_count = len(fn.paths)
        del fn.paths[PATHS_KEPT:]
    return Tracing(
        state=TRACING_MEASURED,
        functions=sorted(funcs.values(), key=lambda f: (-f.cumulative_s, -f.own_s, f.name)),
        modules=sorted(modules.values(), key=lambda m: (-m.cumulative_s, m.name)),
        traced_s=traced_s,
        dynamo_s=dynamo_s,
        frames=len(traced),
    )
