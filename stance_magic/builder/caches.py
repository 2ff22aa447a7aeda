"""The report's compile caches: where each compile's time came from
(AOTAutograd's and Inductor's FX graph cache, hits, misses and bypasses),
the cell's state (cold, warm, caches off) and the cold compile a warm one
saved, and the functions loaded or precompiled (``torch.compiler``'s
``load_compiled_function``, precompile's entries)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .. import probe
from ..place import Place
from ..report import (
    CacheUse,
    CellReport,
    ColdCompile,
    CompileCaches,
    FrameCompile,
    LoadedFunction,
    PrecompiledFrame,
)
from .locating import _file


def compile_caches(
    frames: list[FrameCompile],
    window: Any,
    events: list[Any],
    history: Sequence[CellReport] = (),
    loaded: dict[str, str] | None = None,
) -> tuple[list[FrameCompile], CompileCaches]:
    """Each compile with the compile caches it consulted, and the cell's
    figures of them: per compile, AOTAutograd's and Inductor's FX graph
    cache as torch's records count their hits and misses (bypasses and keys
    from torch's cache events); per cell, the time loaded vs generated, the
    state, and a cold compile of the same graphs earlier in ``history`` when
    there is one. ``loaded`` maps keys to the file a ``%stance cache load``
    read them from."""
    if not window.records:
        return frames, CompileCaches()  # nothing compiled: no cache was consulted
    by_id: dict[tuple[str, str], list[Any]] = {}
    for rec in window.records:
        if probe.is_frame_compile(rec) or probe.is_backward_compile(rec):
            kind = "frame" if probe.is_frame_compile(rec) else "backward"
            by_id.setdefault((str(rec.compile_id), kind), []).append(rec)
    out = []
    for f in frames:
        recs = by_id.get((f.compile_id, f.kind))
        out.append(replace(f, caches=_frame_caches(recs.pop(0), events)) if recs else f)
    uses = [c for f in out for c in f.caches]
    fx = [c for c in uses if c.cache == "inductor"]
    aot = [c for c in uses if c.cache == "aot_autograd"]
    counts = {
        "fx_hits": sum(c.hits for c in fx),
        "fx_misses": sum(c.misses for c in fx),
        "fx_bypasses": sum(c.bypasses for c in fx),
        "aot_hits": sum(c.hits for c in aot),
        "aot_misses": sum(c.misses for c in aot),
        "aot_bypasses": sum(c.bypasses for c in aot),
        "bypass_reasons": [probe.message_line(r) for c in uses for r in c.reasons],
    }
    cached = [f for f in out if f.caches]
    if not cached:
        return out, CompileCaches(**counts)
    rest = {id(f): max(f.seconds - f.phases.get("dynamo", 0.0), 0.0) for f in cached}
    saved = [f.saved_s for f in cached if f.source != "generated" and f.saved_s is not None]
    loaded_n = sum(1 for f in cached if f.source == "loaded")
    off = sorted({c.cache for f in cached for c in f.caches if c.state == "off"})
    graphs = counts["fx_hits"] + counts["fx_misses"] + counts["fx_bypasses"]
    loaded_from = None
    if loaded:
        hit_keys = {
            k for f in cached for c in f.caches if c.state in ("hit", "mixed") for k in c.keys
        }
        files = {loaded[k] for k in hit_keys if k in loaded}
        loaded_from = ", ".join(sorted(files)) if files else None
    cold = None
    if off and not graphs:
        state = "caches off"
    elif loaded_n and loaded_n == len(cached):
        state = "warm"
        cold = _cold_match(cached, history)
    elif loaded_n:
        state = "partly warm"
    else:
        state = "cold"
    return out, CompileCaches(
        **counts,
        loaded_s=sum(rest[id(f)] for f in cached if f.source == "loaded"),
        generated_s=sum(rest[id(f)] for f in cached if f.source != "loaded"),
        saved_s=sum(saved) if saved else None,
        state=state,
        dynamo_s=sum(f.phases.get("dynamo", 0.0) for f in cached),
        consulted=len(cached),
        loaded=loaded_n,
        off=off,
        loaded_from=loaded_from,
        cold=cold,
    )


def _frame_caches(rec: Any, events: list[Any]) -> list[CacheUse]:
    from ..probe import caches as pc

    mine = pc.events_of(rec, events)
    out = []
    for cache in (pc.AOT_AUTOGRAD, pc.INDUCTOR):
        evs = [e for e in mine if e.cache == cache]
        saved = [e.saved_s for e in evs if e.state == "hit" and e.saved_s is not None]
        use = CacheUse(
            cache,
            hits=pc.record_count(rec, cache, "hit"),
            misses=pc.record_count(rec, cache, "miss"),
            bypasses=sum(1 for e in evs if e.state == "bypass"),
            disabled=any(e.state == "disabled" for e in evs),
            keys=[e.key for e in evs if e.key],
            saved_s=sum(saved) if saved else None,
            reasons=[probe.message_line(e.reason) for e in evs if e.state == "bypass" and e.reason],
        )
        if use.state:
            out.append(use)
    return out


def _cold_match(cached: list[FrameCompile], history: Sequence[CellReport]) -> ColdCompile | None:
    """The latest earlier cell that generated graphs with the keys these
    compiles loaded: its compile time for them, its name, how many matched."""
    keys = [{k for c in f.caches for k in c.keys} for f in cached]
    for old in reversed(history):
        seconds, matched = 0.0, 0
        frames = old.frames
        for f_keys in keys:
            if not f_keys:
                continue
            for g in frames:
                if g.source == "generated" and f_keys & {k for c in g.caches for k in c.keys}:
                    # with its lazily compiled backward (same compile id),
                    # which an AOTAutograd hit loads too
                    seconds += sum(
                        b.seconds
                        for b in frames
                        if b is g or (b.kind == "backward" and b.compile_id == g.compile_id)
                    )
                    matched += 1
                    break
        if matched:
            n = old.execution_count
            cell = Place(file=f"In [{n}]" if n else f"cell {old.index}")
            return ColdCompile(seconds, cell, matched)
    return None


def _loaded_functions(window: probe.Window) -> list[LoadedFunction]:
    """The functions ``torch.compiler.load_compiled_function`` loaded in the cell."""
    return [
        LoadedFunction(
            name=x.name,
            filename=x.filename,
            line=x.line,
            seconds=x.seconds,
            error=x.error,
            file=_file(x.filename),
        )
        for x in window.aot_loads
    ]


def _precompiled(window: probe.Window) -> list[PrecompiledFrame]:
    """The precompiled entries the cell's calls met, and what became of each.

    torch installs an entry at ``torch.compile(fn)`` (the probe's ``hit``);
    the call then runs it only if its guards match. Where no call of the
    cell ran a precompiled frame and Dynamo traced the same code in the cell,
    the entry was installed and not used: its guards did not match."""
    ran = window.calls.get((probe.CALL_CACHED, probe.WHY_PRECOMPILED), 0)
    traced: dict[tuple[str, int | None], list[str]] = {}
    for r in window.compiles:
        if r.kind == "frame":
            traced.setdefault((r.filename, r.line), []).extend(r.info.precompile_failures)
    out = []
    for e in window.precompiled:
        outcome, why, failed = e.outcome, e.why, ()
        if outcome == probe.PRECOMPILE_HIT and not ran and (e.filename, e.line) in traced:
            outcome = probe.PRECOMPILE_GUARDS_MISSED
            why = "its guards did not match the call"
            failed = tuple(dict.fromkeys(traced[(e.filename, e.line)]))
        out.append(
            PrecompiledFrame(
                name=e.name,
                filename=e.filename,
                line=e.line,
                outcome=outcome,
                why=why,
                file=_file(e.filename),
                failed_guards=failed,
            )
        )
    return out
