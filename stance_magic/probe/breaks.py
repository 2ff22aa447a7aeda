"""Graph breaks: torch's ``graph_breaks`` log records, its graph-break
registry (ids, explanations, hints, documentation links), and the
counters fallback."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .frames import _torch_dir


@dataclass
class GraphBreakEvent:
    """One graph break as torch logged it (the ``graph_breaks`` log artifact)."""

    reason: str
    filename: str
    line: int | None
    compile_id: str | None
    #: the frame fell back to eager as a whole (torch could not resume)
    skipped_frame: bool = False
    #: torch's "User code traceback", outermost first: (file, line)
    stack: list[tuple[str, int]] = field(default_factory=list)
    #: when torch logged it (``time.time()`` seconds; for a timeline)
    time_s: float | None = None


_GB_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_GB_FILE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def parse_graph_break(record: Any) -> GraphBreakEvent | None:
    """A graph break from one ``graph_breaks`` log record, or None."""
    try:
        msg = record.getMessage()
    except Exception:
        return None
    cid = None
    try:
        from torch._guards import CompileContext

        current = CompileContext.current_compile_id()
        cid = str(current) if current is not None else None
    except Exception:
        pass
    m = _GB_AT.search(msg.split("\n", 1)[0])
    if m:
        reason = msg.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in msg else msg
        reason, _, trace = reason.partition("\nUser code traceback:")
        stack = [(f.group("file"), int(f.group("line"))) for f in _GB_FILE.finditer(trace)]
        return GraphBreakEvent(
            reason.strip(), m.group("file"), int(m.group("line")), cid, stack=stack
        )
    if msg.startswith("Graph break"):
        # torch could not resume: the whole frame runs eagerly
        files = list(_GB_FILE.finditer(msg))
        exc = getattr(record, "exc_info", None)
        reason = str(exc[1]) if exc and exc[1] is not None else msg.splitlines()[0]
        filename, line = "", None
        if files:
            filename, line = files[-1].group("file"), int(files[-1].group("line"))
        return GraphBreakEvent(reason.strip(), filename, line, cid, skipped_frame=True)
    files = list(_GB_FILE.finditer(msg))
    if files:
        return GraphBreakEvent(
            msg.strip().splitlines()[0], files[-1].group("file"), int(files[-1].group("line")), cid
        )
    return None


_GB_LINK = re.compile(r"(?P<url>https?://\S+/gb/(?P<id>gb\d+)\.html)", re.I)


@dataclass(frozen=True)
class BreakType:
    """What torch's graph-break registry says of one kind of graph break."""

    gb_id: str
    gb_type: str
    explanation: str
    hints: tuple[str, ...]
    url: str | None


def graph_break_type(reason: str) -> BreakType | None:
    """The registry entry of a logged graph break: its id from the
    documentation link torch appends (``…/gb/gb0059.html``), else by its
    type's name (the reason's first line). None on a torch without the
    registry (before 2.8) or for a break it does not list."""
    registry = _graph_break_registry()
    if not registry:
        return None
    m = _GB_LINK.search(reason)
    gb_id = m.group("id").upper() if m else None
    entry = registry.get(gb_id) if gb_id else None
    if entry is None:
        first = next((ln.strip() for ln in reason.splitlines() if ln.strip()), "")
        for key, value in registry.items():
            if value and value[0].get("Gb_type") == first:
                gb_id, entry = key, value
                break
    if not entry:
        return None
    e = entry[0]
    url = m.group("url") if m else _gb_link(e.get("Gb_type", ""))
    return BreakType(
        gb_id or "",
        e.get("Gb_type", ""),
        e.get("Explanation", ""),
        tuple(e.get("Hints", ()) or ()),
        url,
    )


@functools.cache
def _graph_break_registry() -> dict[str, Any]:
    import json

    path = os.path.join(_torch_dir(), "_dynamo", "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _gb_link(gb_type: str) -> str | None:
    try:
        from torch._dynamo.exc import get_gbid_documentation_link
    except ImportError:
        return None
    try:
        return get_gbid_documentation_link(gb_type)
    except Exception:
        return None


def _graph_break_counters() -> dict[str, int]:
    from torch._dynamo import utils

    return dict(utils.counters.get("graph_break", {}))


def _breaks_from_counters(before: dict[str, int]) -> list[GraphBreakEvent]:
    """Fallback for a torch without the graph_breaks artifact: the delta of
    ``counters["graph_break"]`` (which misses some breaks; said in the report)."""
    out = []
    for reason, n in _graph_break_counters().items():
        for _ in range(n - before.get(reason, 0)):
            out.append(GraphBreakEvent(reason, "", None, None))
    return out


_TRACE_PREFIX = "Encountered graph break when attempting to trace"


def break_summary(reason: str) -> str:
    """``<kind of break>: <torch's explanation>`` from a graph-break reason."""
    lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
    if lines and lines[0].startswith(_TRACE_PREFIX) and len(lines) > 1:
        lines = lines[1:]
    first = lines[0] if lines else reason.strip()
    expl = ""
    for line in lines:
        if line.startswith("Explanation:"):
            expl = line[len("Explanation:") :].strip()
            break
    return f"{first}: {expl}" if expl else first
