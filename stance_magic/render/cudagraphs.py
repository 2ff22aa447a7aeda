"""The CUDA graphs section: recordings (for new input sizes, re-recorded),
replays, warm-up runs and skips, per frame and with torch's reasons."""

from __future__ import annotations

from typing import Any

from ..place import with_source
from ..text import plural as _plural
from .labels import CUDA_GRAPHS
from .rows import Row


def cudagraph_rows(rep: Any) -> list[Row]:
    """The CUDA graphs row, where the cell recorded, replayed or skipped one."""
    cg = getattr(rep, "cudagraphs", None)
    if cg is None or cg.empty:
        return []
    return [Row(CUDA_GRAPHS, cudagraph_value(cg), cudagraph_lines(cg))]


def cudagraph_value(cg: Any) -> str:
    """``3 recorded (2 for new input sizes), 120 replayed, 1 skipped``."""
    parts = []
    if cg.recorded:
        again = []
        if cg.for_new_sizes:
            again.append(f"{cg.for_new_sizes} for new input sizes")
        if cg.rerecorded:
            again.append(f"{cg.rerecorded} re-recorded")
        parts.append(f"{cg.recorded} recorded" + (f" ({', '.join(again)})" if again else ""))
    if cg.replayed or cg.recorded:
        parts.append(f"{cg.replayed} replayed")
    if cg.warmups:
        parts.append(f"{_plural(cg.warmups, 'warm-up run')}")
    if cg.skipped:
        parts.append(f"{cg.skipped} skipped")
    if cg.pending_backward:
        parts.append(
            f"{_plural(len(cg.pending_backward), 'graph')} held back by a pending backward"
        )
    if cg.overwritten_output:
        parts.append("an overwritten output read")
    return ", ".join(parts)


def cudagraph_skip_text(s: Any) -> str:
    """One skip: torch's reason, the frame, the user's line torch pointed at."""
    if not s.reason:
        return (
            f"torch counted {s.count} skip{'s' if s.count != 1 else ''} whose reason "
            "stance_magic did not see (torch's CUDA-graph modules were imported inside the cell)"
        )
    text = f"{s.count}× {s.reason}" if s.count != 1 else s.reason
    if s.devices:
        text += f" (the graph's devices: {', '.join(s.devices)})"
    at = s.frame or (f"compile {s.compile_id}" if s.compile_id else "")
    if at:
        text += f"; in {at}"
    if s.where:
        text += f"; at {with_source(s.where, s.source)}"
    return text


def cudagraph_frame_text(f: Any) -> str:
    """``f (In [2], line 1): 4 recorded, 3 for new input sizes (sizes 8, 16, 32)``."""
    text = f"{f.frame}: {f.recorded} recorded"
    if f.for_new_sizes:
        text += f", {f.for_new_sizes} of them for new input sizes"
    if f.rerecorded:
        why = f" ({'; '.join(f.why)})" if f.why else ""
        text += f", {f.rerecorded} re-recorded{why}"
    sizes = [", ".join(str(v) for v in s) for s in f.sizes]
    if len(set(sizes)) > 1:
        text += f" (sizes {'; '.join(dict.fromkeys(sizes))})"
    return text


def cudagraph_lines(cg: Any) -> list[str]:
    """The CUDA graphs row's details: each frame's recordings, each skip."""
    lines = [cudagraph_frame_text(f) for f in cg.frames if f.recorded > 1 or f.rerecorded]
    lines += [f"skipped: {cudagraph_skip_text(s)}" for s in cg.skips]
    lines += [
        f"{f}: torch kept running its warm-up (eagerly) instead of replaying: outputs of "
        "an earlier call still wait for their backward"
        for f in cg.pending_backward
    ]
    if cg.overwritten_output:
        lines.append(
            "the cell read an output of an earlier CUDA-graph run after a later run overwrote it"
            + (f" (the output made at {cg.overwritten_made_at})" if cg.overwritten_made_at else "")
        )
    return lines
