"""The compile caches section: the cell's caches in one line (warm, partly
warm, cold or off) and each compile by where its time came from (loaded from
AOTAutograd's and Inductor's FX graph cache, or generated)."""

from __future__ import annotations

from typing import Any

from ..text import fmt_s
from ..text import plural as _plural
from .labels import CACHE_LABELS, COMPILE_CACHES
from .rows import Row


def cache_rows(rep: Any) -> list[Row]:
    """Compile time by where it came from: Dynamo tracing, then AOTAutograd's
    and Inductor's FX graph cache (hit: loaded; miss: generated), per compile."""
    verdict = cache_verdict(rep.compile_caches)
    if not verdict:
        return []
    details = [cache_line(f) for f in rep.frames if f.caches]
    return [Row(COMPILE_CACHES, verdict, details, "value")]


def cache_use_text(c: Any) -> str:
    """``FX graph cache 1 hit, 2 misses``."""
    label = CACHE_LABELS.get(c.cache, c.cache)
    if c.state == "off":
        return f"{label} off"
    parts = []
    if c.hits:
        parts.append(_plural(c.hits, "hit"))
    if c.misses:
        parts.append(f"{c.misses} miss{'es' if c.misses != 1 else ''}")
    if c.bypasses:
        parts.append(f"{c.bypasses} bypass{'es' if c.bypasses != 1 else ''}")
    return f"{label} {', '.join(parts) or 'not consulted'}"


def cache_line(f: Any) -> str:
    """One compile, by where its time came from."""
    dynamo = f.phases.get("dynamo", 0.0)
    rest = max(f.seconds - dynamo, 0.0)
    source = f.source
    text = f"{f.where}: Dynamo tracing {fmt_s(dynamo)}"
    if f.kind == "backward":
        text = f"backward graph of {f.compile_id}"
    text += "; " + ", ".join(cache_use_text(c) for c in f.caches)
    verb = {"loaded": "loaded", "partly loaded": "partly loaded,"}.get(source, "generated")
    text += f": {verb} in {fmt_s(rest)}"
    saved = f.saved_s
    if source != "generated" and saved is not None:
        text += f" (torch recorded {fmt_s(saved)} generating it)"
    for c in f.caches:
        for r in c.reasons:
            text += f"; {CACHE_LABELS.get(c.cache, c.cache)} bypassed: {r}"
    return text


def cache_verdict(cc: Any) -> str:
    """The cell's compile caches in one line: warm, partly warm, cold or off,
    with the times loaded and generated ("" when no compile consulted them)."""
    if not cc.state:
        return ""
    dynamo = cc.dynamo_s
    if cc.state == "caches off":
        return (
            f"caches off ({' and '.join(CACHE_LABELS.get(c, c) for c in cc.off)}): "
            f"{_plural(cc.consulted, 'compile')} "
            f"generated everything, {fmt_s(cc.generated_s)} beyond Dynamo tracing "
            f"({fmt_s(dynamo)})"
        )
    aot = ""
    if cc.aot_hits or cc.aot_misses:
        aot = f"; AOTAutograd cache: {_plural(cc.aot_hits, 'hit')}, "
        aot += f"{cc.aot_misses} miss{'es' if cc.aot_misses != 1 else ''}"
    graphs = cc.graphs
    if cc.state == "warm":
        text = (
            f"warm: {cc.fx_hits} of {graphs} graphs loaded from the FX graph cache{aot}; "
            f"{fmt_s(cc.loaded_s)} beyond Dynamo tracing ({fmt_s(dynamo)}, paid every time)"
        )
        if cc.cold is not None:
            same = (
                "the same graphs"
                if cc.cold.matched == cc.loaded
                else f"{cc.cold.matched} of these compiles"
            )
            text += f"; a cold compile of {same} took {fmt_s(cc.cold.seconds)} in {cc.cold.cell}"
        elif cc.saved_s is not None:
            text += f"; torch recorded {fmt_s(cc.saved_s)} for generating them"
    elif cc.state == "partly warm":
        text = (
            f"partly warm: {cc.fx_hits} of {graphs} graphs loaded from the FX graph cache{aot}; "
            f"{fmt_s(cc.loaded_s)} loading, {fmt_s(cc.generated_s)} generating, "
            f"Dynamo tracing {fmt_s(dynamo)}"
        )
    else:
        text = (
            f"cold: {graphs} graph{'s' if graphs != 1 else ''} generated (FX graph cache: "
            f"{cc.fx_misses} miss{'es' if cc.fx_misses != 1 else ''}{aot}); "
            f"{fmt_s(cc.generated_s)} beyond Dynamo tracing ({fmt_s(dynamo)})"
        )
    bypasses = cc.fx_bypasses + cc.aot_bypasses
    if bypasses:
        reason = cc.bypass_reasons[0] if cc.bypass_reasons else "torch gave no reason"
        text += f"; {bypasses} bypass{'es' if bypasses != 1 else ''} ({reason})"
    if cc.loaded_from:
        text += f"; loaded by %stance cache load from {cc.loaded_from}"
    return text
