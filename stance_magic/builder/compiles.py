"""The report's compiles: each frame torch compiled (its name, place, time
and phases, whether it failed), the cell's compile time by phase, and
Inductor's named parts (triton compile, autotuning) in the compiles and at
their first runs."""

from __future__ import annotations

from .. import probe
from ..report import PHASES, FrameCompile
from .locating import _file


def _frames(window: probe.Window, stance: str, error: BaseException | None) -> list[FrameCompile]:
    frames: list[FrameCompile] = []
    for rec in window.compiles:
        kind = rec.kind
        if kind is None:
            continue
        info = rec.info
        name, filename, line = _frame_name(rec)
        backend = info.backend
        # the stance in force when torch compiled (one the block's code set too)
        compiled_under = info.stance or stance
        if (
            kind == "frame"
            and compiled_under == "aot_eager_then_compile"
            and info.example_calls == 1
        ):
            backend = "aot_eager"  # torch compiles the first call under aot_eager
        graph = rec.backend_graph or kind == "backward"
        failed = rec.failed
        exception = info.exception
        if failed is None and exception is not None:
            # torch wrote the record while an exception unwound the compile
            # (a backend raised, the cell was interrupted): no graph exists
            failed = f"{exception}: the compile did not finish"
        if failed is not None and kind == "frame" and info.limit is None:
            graph = graph and not exception
        # the exception torch unwound while writing the record is the cell's
        # (its type may differ from fail_type: see probe.reached_cell)
        raised = failed is not None and (info.reached_caller or probe.reached_cell(info, error))
        frames.append(
            FrameCompile(
                compile_id=rec.compile_id,
                kind=kind,
                name=name,
                filename=filename,
                line=line,
                seconds=rec.seconds,
                phases=rec.phases,
                guard_count=rec.guard_count,
                recompile_reason=rec.recompile_reason,
                failed=failed,
                backend=backend if graph else None,
                graph=graph,
                during_eager_call=info.during_eager_call,
                raised=raised,
                aot=info.aot is not None,
                file=_file(filename),
            )
        )
    return frames


def _frame_name(rec: probe.CompileRecord) -> tuple[str, str, int | None]:
    """How the report names a compiled frame: the nn.Module's class for a
    module's forward (through torch's wrapper or a library's decorator too),
    a resume function by where its graph break was."""
    co_name, info = rec.co_name, rec.info
    if co_name is None and info.frame is not None:
        return info.frame  # torch wrote no code name (the recompile-limit attempt)
    name = co_name or "(backward)"
    filename, line = rec.filename, rec.line
    resumed = probe.resume_parts(co_name)
    if resumed:
        fn, at = resumed
        return f"{fn} after the graph break at line {at}", filename, line
    if info.module is not None:
        mod_name, mod_file, mod_line = info.module
        if co_name == "forward" or rec.module_wrapper:
            return mod_name, mod_file, mod_line
        return f"{mod_name} (through {co_name})", filename, line
    return name, filename, line


def _kernel_parts(window: probe.Window, *, runtime: bool) -> dict[str, float]:
    """The named parts torch's records time (see ``probe.KERNEL_FIELDS``):
    inside the cell's compiles, or (``runtime``) at the first runs after them."""
    out: dict[str, float] = {}
    for rec in window.compiles:
        if rec.runtime != runtime or (not runtime and rec.kind is None):
            continue
        for key, seconds in rec.kernel_phases.items():
            out[key] = out.get(key, 0.0) + seconds
    return out


def _breakdown(window: probe.Window) -> dict[str, float]:
    """The cell's compile time by phase (see ``report.PHASES``), summed over
    its compiles."""
    breakdown = dict.fromkeys(PHASES, 0.0)
    for rec in window.compiles:
        if rec.kind is not None:
            for k, v in rec.phases.items():
                breakdown[k] += v
    return breakdown
