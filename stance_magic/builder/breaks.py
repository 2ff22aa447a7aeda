"""The report's graph breaks: grouped by cause and place, each with torch's
explanation, hints and documentation page (read by the probe), the user's
line behind a break inside a library, and what each break cost (the resume
frames torch compiled after it)."""

from __future__ import annotations

from typing import Any

from .. import probe
from ..paths import is_library, short_path
from ..report import FrameCompile, GraphBreak
from .locating import _source_line


def _group_breaks(events: list[Any]) -> list[GraphBreak]:
    """Breaks grouped by cause (torch's graph-break id, else its summary) and
    place; each with torch's explanation, hints and documentation page."""
    groups: dict[tuple[str, str, int | None], GraphBreak] = {}
    for ev in events:
        summary = probe.break_summary(ev.reason)
        bt = probe.graph_break_type(ev.reason)
        key = (bt.gb_id if bt else summary, ev.filename, ev.line)
        g = groups.get(key)
        if g is not None:
            g.count += 1
            continue
        g = groups[key] = GraphBreak(
            reason=ev.reason,
            count=1,
            summary=summary,
            filename=ev.filename,
            line=ev.line,
            source=_source_line(ev.filename, ev.line),
            skipped_frame=ev.skipped_frame,
            file=short_path(ev.filename) if ev.filename else "",
        )
        if bt is not None:
            g.gb_id, g.gb_type, g.url = bt.gb_id, bt.gb_type, bt.url or ""
        g.explanation = probe.graph_break_field(ev.reason, "Explanation:") or (
            bt.explanation if bt else ""
        )
        g.hints = probe.graph_break_hints(ev.reason) or (list(bt.hints) if bt else [])
        if ev.filename and is_library(ev.filename):
            user = next((fl for fl in reversed(ev.stack) if not is_library(fl[0])), None)
            if user is not None:
                g.user_filename, g.user_line = user
                g.user_file = short_path(g.user_filename)
                g.user_source = _source_line(*user)
    return list(groups.values())


def _break_costs(breaks: list[GraphBreak], frames: list[FrameCompile]) -> list[GraphBreak]:
    """Each break's cost (the resume frames torch compiled after it), most
    costly first."""
    for g in breaks:
        tail = f"after the graph break at line {g.line}"
        after = [
            f
            for f in frames
            if f.kind == "frame" and f.filename == g.filename and f.name.endswith(tail)
        ]
        g.frames_after = len(after)
        g.graphs_after = sum(1 for f in after if f.graph)
        g.compile_s_after = sum(f.seconds for f in after)
    return sorted(breaks, key=lambda g: (-g.compile_s_after, -g.frames_after, -g.count))
