"""The cell as a Chrome-trace/Perfetto timeline (``--timeline FILE.json``).

Each compile with torch's own phases, each cache lookup (timed ones as
spans), each graph break and each run of compiled code, on the cell's wall
clock: open the file in ``ui.perfetto.dev`` or ``chrome://tracing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..paths import shorten_paths
from ..place import Place
from ..text import cell_label

if TYPE_CHECKING:
    from ..report import CellReport

__all__ = ["timeline_events"]

PID = 1
TID_CELL, TID_COMPILE, TID_PHASES, TID_LOOKUP, TID_RUN, TID_BREAK = 1, 2, 3, 4, 5, 6
_TRACKS = {
    TID_CELL: "cell",
    TID_COMPILE: "compiles (stance_magic report)",
    TID_PHASES: "compile phases (torch dynamo_timed)",
    TID_LOOKUP: "cache lookups",
    TID_RUN: "compiled code runs (torch profiler)",
    TID_BREAK: "graph breaks",
}


def timeline_events(
    rep: CellReport,
    window: Any,
    *,
    chromium: list[dict[str, Any]],
    regions: list[tuple[str, float, float]],
    wall0: float,
    perf0: float,
) -> dict[str, Any]:
    """The cell as Chrome trace events: ``ts``/``dur`` in µs from the cell's
    start (``wall0`` on ``time.time()``, ``perf0`` on ``perf_counter()``).

    * ``compile <id> <name>``: one span per compile record, its duration the
      report's (so the spans sum to the report's compile time), placed where
      torch's ``entire_frame_compile`` began; args hold the report's phases;
    * torch's own ``dynamo_timed`` phases (``chromium_event`` records of the
      structured trace), paired begin/end, on their own track;
    * ``cache lookup``: the lookups timed in situ as spans, the others as
      instants (the recorder's clock);
    * ``graph break``: an instant when torch logged it;
    * ``run <id>``: each run of compiled code (the profiler's
      ``Torch-Compiled Region`` events, placed on the cell's clock through
      two anchor ranges the profiler recorded beside them: see
      ``probe.profiler.ANCHOR_EVENT``).
    """
    us0 = wall0 * 1e6
    ev: list[dict[str, Any]] = []
    name = f"{cell_label(rep) or 'cell'} ({rep.stance_label})"
    ev.append(_meta("process_name", 0, {"name": f"stance_magic {name}"}))
    for tid, track in _TRACKS.items():
        ev.append(_meta("thread_name", tid, {"name": track}))
        ev.append(_meta("thread_sort_index", tid, {"sort_index": tid}))
    ev.append(_x(name, "cell", TID_CELL, 0.0, rep.wall_s * 1e6, {"source": rep.source}))
    frame_start = _phase_events(ev, chromium, us0)
    _compile_events(ev, rep, window, frame_start, us0)
    _lookup_events(ev, window, perf0)
    _break_events(ev, window, wall0)
    for cid, start_s, dur_s in regions:
        ev.append(
            _x(
                f"run {cid}",
                "compiled_run",
                TID_RUN,
                (start_s - perf0) * 1e6,
                dur_s * 1e6,
                {"compile_id": cid},
            )
        )
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "stance_magic": __version__,
            "cell": name,
            "clock": "µs from the start of the cell",
        },
    }


def _phase_events(
    ev: list[dict[str, Any]], chromium: list[dict[str, Any]], us0: float
) -> dict[str, float]:
    """torch's own phases, begin/end pairs per (compile id, name), onto
    ``ev``; returns where each compile's ``entire_frame_compile`` began."""
    starts: dict[tuple[str, str], list[float]] = {}
    frame_start: dict[str, float] = {}
    for c in chromium:
        ph, nm, ts = c.get("ph"), c.get("name"), c.get("ts")
        args = c.get("args") or {}
        cid = str(args.get("compile_id", ""))
        if not isinstance(ts, (int, float)) or not nm:
            continue
        key = (cid, nm)
        if ph == "B":
            starts.setdefault(key, []).append(ts - us0)
            if nm == "entire_frame_compile" and cid not in frame_start:
                frame_start[cid] = ts - us0
        elif ph == "E" and starts.get(key):
            begin = starts[key].pop()
            ev.append(
                _x(nm, "dynamo_timed", TID_PHASES, begin, ts - us0 - begin, {"compile_id": cid})
            )
        elif ph == "i":
            ev.append(_i(nm, "dynamo_timed", TID_PHASES, ts - us0, {"compile_id": cid, **args}))
    return frame_start


def _compile_events(
    ev: list[dict[str, Any]],
    rep: CellReport,
    window: Any,
    frame_start: dict[str, float],
    us0: float,
) -> None:
    """One span per compile of the report, where torch's
    ``entire_frame_compile`` (else its record) began, onto ``ev``."""
    record_start = {r.compile_id: r.start_time_us for r in window.compiles}
    for f in rep.frames:
        begin = frame_start.get(f.compile_id)
        if begin is None and record_start.get(f.compile_id) is not None:
            begin = record_start[f.compile_id] - us0
        if begin is None:
            continue
        args = {
            "compile_id": f.compile_id,
            "where": f.where,
            "phases_s": f.phases,
            "backend": f.backend,
            "graph": f.graph,
        }
        if f.recompile_reason:
            args["recompile_reason"] = f.recompile_reason
        if f.failed:
            args["failed"] = f.failed
        label = "compile" if f.kind == "frame" else "backward compile"
        ev.append(
            _x(
                f"{label} {f.compile_id} {f.name}",
                "compile",
                TID_COMPILE,
                begin,
                f.seconds * 1e6,
                args,
            )
        )


def _lookup_events(ev: list[dict[str, Any]], window: Any, perf0: float) -> None:
    """The cache lookups onto ``ev``: those timed in situ as spans, the
    others (not timed, or counted only: they waited for the CPU, or torch's
    profiler ran over them) as instants where they ended (the recorder's
    clock)."""
    for at, seconds, hit, timed, target in window.lookup_times:
        what = "hit" if hit else "miss"
        args = {"function": target, "result": what}
        if timed:
            begin = (at - seconds - perf0) * 1e6
            ev.append(
                _x(f"cache lookup ({what})", "lookup", TID_LOOKUP, begin, seconds * 1e6, args)
            )
        else:
            args["timed"] = False
            ev.append(
                _i(
                    f"cache lookup, not timed ({what})",
                    "lookup",
                    TID_LOOKUP,
                    (at - perf0) * 1e6,
                    args,
                )
            )


def _break_events(ev: list[dict[str, Any]], window: Any, wall0: float) -> None:
    """An instant per graph break, when torch logged it, onto ``ev``."""
    for b in window.graph_breaks:
        ts = (b.time_s - wall0) * 1e6 if b.time_s is not None else 0.0
        where = Place(file=shorten_paths(b.filename) if b.filename else "", line=b.line).path_line
        ev.append(
            _i(
                f"graph break {where}",
                "graph_break",
                TID_BREAK,
                ts,
                {"reason": b.reason, "compile_id": b.compile_id},
            )
        )


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}


def _x(name: str, cat: str, tid: int, ts: float, dur: float, args: dict[str, Any]):
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": round(ts, 3),
        "dur": round(max(dur, 0.0), 3),
        "pid": PID,
        "tid": tid,
        "args": args,
    }


def _i(name: str, cat: str, tid: int, ts: float, args: dict[str, Any]):
    return {
        "name": name,
        "cat": cat,
        "ph": "i",
        "s": "t",
        "ts": round(ts, 3),
        "pid": PID,
        "tid": tid,
        "args": args,
    }
