"""The report's CUDA graphs: recorded, replayed, recorded again for new
sizes, skipped (and why, at which user line), a backward never run, and an
output a later replay overwrote."""

from __future__ import annotations

from typing import Any

from .. import causes, place, probe
from ..place import Place
from ..report import CudaGraphFrame, CudaGraphs, CudaGraphSkip, FrameCompile, Recompile
from .closed import Closed
from .locating import _line_in_frame, _place, _source_line

#: The CUDA graphs of a window that saw none (frozen: nothing but the builder
#: writes a report's parts).
_NO_CUDAGRAPHS = CudaGraphs()


def _cudagraphs(
    closed: Closed, frames: list[FrameCompile], recompiles: list[Recompile]
) -> CudaGraphs:
    """The cell's CUDA graphs: what the probe saw torch record, replay and
    skip, and the skips torch wrote only into its compile records; the
    report of nothing's where the window saw none (the common steady cell:
    ``tests/test_cuda.py`` checks it is what the whole of :func:`_seen`
    makes of such a window)."""
    cg = closed.cudagraphs
    if (
        (cg is None or cg.empty)
        and closed.error is None
        and not any(rec.cudagraph_skip_reason for rec in closed.window.compiles)
    ):
        return _NO_CUDAGRAPHS
    return _seen(closed, frames, recompiles)


def _seen(closed: Closed, frames: list[FrameCompile], recompiles: list[Recompile]) -> CudaGraphs:
    """:func:`_cudagraphs` of a window that saw some."""
    cg = closed.cudagraphs
    skips = list(cg.skips) if cg is not None else []
    unexplained = cg.unexplained_skips if cg is not None else 0
    by_id = {f.compile_id: f for f in frames if f.kind == "frame"}
    where = {cid: f.at for cid, f in by_id.items()}
    # a skip torch wrote into a compile's record that no wrapper saw (the
    # cell imported Dynamo, so nothing was wrapped when it opened)
    seen = {s.compile_id for s in skips}
    from_records = [
        (rec.compile_id, rec.cudagraph_skip_reason)
        for rec in closed.window.compiles
        if rec.cudagraph_skip_reason and rec.compile_id not in seen
    ]
    unexplained = max(unexplained - len(from_records), 0)
    groups: dict[tuple[str, str], CudaGraphSkip] = {}
    for cid, reason, filename, line, source, devices, logged in [
        (s.compile_id, s.reason, s.filename, s.line, s.source, s.devices, s.logged) for s in skips
    ] + [(cid, text, "", None, "", (), True) for cid, text in from_records]:
        head = probe.cudagraph_skip_head(reason)
        if not filename:
            filename, line, _fn, source = probe.cudagraph_user_line(reason)
        frame = by_id.get(cid)
        if frame is not None and filename and filename != frame.filename:
            # a graph loaded from the FX graph cache keeps the stack of the
            # process that compiled it first: the line that holds the same
            # code in the frame compiled here is the user's
            here = _line_in_frame(frame.filename, frame.line, source)
            if here is not None:
                filename, line = frame.filename, here
        key = (head, cid)
        old = groups.get(key)
        if old is not None:
            groups[key] = place.replace(old, count=old.count + 1)
            continue
        groups[key] = CudaGraphSkip(
            reason=head,
            compile_id=cid,
            frame=where.get(cid, ""),
            where=_place("", filename, line, source or _source_line(filename, line)),
            source=source or _source_line(filename, line),
            devices=list(devices),
            logged=logged,
        )
    out = list(groups.values())
    if unexplained:
        out.append(CudaGraphSkip(reason="", count=unexplained, logged=False))
    recordings = cg.recordings if cg is not None else []
    sized = {r.compile_id for r in recompiles if causes.decisive(r.failures, r.reason)[0] == "size"}
    by_frame: dict[str, list[Any]] = {}
    for r in recordings:
        by_frame.setdefault(r.compile_id.split("/")[0], []).append(r)
    graph_frames = []
    for recs in by_frame.values():
        ids = list(dict.fromkeys(r.compile_id for r in recs))
        label = next((where[c] for c in ids if c in where), "")
        if not label:
            name = next((r.function for r in recs if r.function), "")
            label = Place(name or "compiled graph", f"compile {ids[0]}")
        rerecords = [r for r in recs if r.rerecord]
        graph_frames.append(
            CudaGraphFrame(
                frame=label,
                compile_ids=ids,
                recorded=len(recs),
                for_new_sizes=sum(
                    1 for r in recs if not r.rerecord and (r.others or r.compile_id in sized)
                ),
                rerecorded=len(rerecords),
                why=list(dict.fromkeys(r.why for r in rerecords if r.why)),
                sizes=[list(r.sizes) for r in recs if r.sizes],
            )
        )
    pending = list(cg.pending_backward) if cg is not None else []
    overwritten = probe.cudagraph_overwritten_output(closed.error)
    made_at: Place | str = ""
    if overwritten is not None:
        filename, line, source = overwritten
        made_at = "(torch found no stack trace)"
        if filename:
            made_at = _place("", filename, line, source or _source_line(filename, line))
    return CudaGraphs(
        recorded=len(recordings),
        replayed=sum(cg.replays.values()) if cg is not None else 0,
        warmups=sum(cg.warmups.values()) if cg is not None else 0,
        for_new_sizes=sum(f.for_new_sizes for f in graph_frames),
        rerecorded=sum(f.rerecorded for f in graph_frames),
        skipped=sum(s.count for s in out),
        skips=out,
        frames=graph_frames,
        pending_backward=list(
            dict.fromkeys(
                where.get(p.compile_id)
                or Place(p.function or "compiled graph", f"compile {p.compile_id}")
                for p in pending
            )
        ),
        overwritten_output=overwritten is not None,
        overwritten_made_at=made_at,
    )
