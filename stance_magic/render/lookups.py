"""The cache lookups section: the code cache's hits and misses, the lookups'
time and how it was measured (a lower bound where some could not be timed),
and a compiled call's anatomy (torch.compile's wrapper, the lookup, the
compiled code; on a GPU, who sets the pace)."""

from __future__ import annotations

from typing import Any

from ..place import label
from ..text import fmt_s
from ..text import plural as _plural
from .labels import CACHE_HITS, CACHE_LOOKUPS, COMPILED_CALL, PACE
from .rows import Row


def lookup_rows(rep: Any) -> list[Row]:
    """The code cache's hits and misses, the lookups, and a compiled call's
    parts (where timed)."""
    misses = rep.cache_misses
    hits = f"{_plural(rep.cache_hits, 'hit')}, {misses} miss{'' if misses == 1 else 'es'}"
    rows = [
        Row(CACHE_HITS, hits, [], ""),
        Row(CACHE_LOOKUPS, _lookup_value(rep), _lookup_details(rep.lookups), ""),
    ]
    if rep.call_parts is not None:
        rows.append(Row(COMPILED_CALL, _parts_value(rep.call_parts), _parts_details(rep), ""))
    return rows


def _lookup_value(rep: Any) -> str:
    # A lookup is more than its guard checks (the frame's locals, the call
    # into Dynamo): the figure is named for what it times.
    lk = rep.lookups
    if lk.seconds is None:
        text = "time n/a"
    else:
        bound = "≥ " if lk.lower_bound else ""
        text = f"{bound}{fmt_s(lk.seconds)}"
        if lk.per_lookup_s is not None:
            text += f" ({fmt_s(lk.per_lookup_s)} per timed lookup, median)"
    if rep.compiles:
        text += f"; {rep.guard_count} guards in the entries compiled here"
    return text


def lookup_method(lk: Any) -> str:
    """How a cell's cache lookups were measured, in one line."""
    if lk.method == "profiler":
        event = f"'{lk.event}' " if lk.event else ""
        text = (
            f"measured: {lk.profiled} {event}profiler events (frame locals plus guards); "
            "the profiler slows everything else the cell runs"
        )
        if lk.profiler_counts_empty:
            text += (
                "; this torch's profiler also reports lookups of frames with nothing "
                "compiled (the first call, torch's own frames after a compile), counted "
                "here too"
            )
        return text
    if not lk.count:
        return "no cache lookups in this cell"
    if not lk.timed:
        return (
            f"not timed: the {_plural(lk.untimed, 'lookup')} of this cell came from resume "
            "functions after graph breaks or frames compiled on their own, which have no "
            "start to time from (use -g to measure them with the profiler)"
        )
    # How each way of timing works is explained once, in the docs the row's
    # label links to (call-anatomy.md, "How it is measured").
    if lk.bounded:
        text = (
            f"timed in situ: {_plural(lk.timed, 'lookup')}, each bounded as torch's profiler "
            "bounds a lookup (the rest of the span is the wrapper's: 'a compiled call')"
        )
    else:
        text = (
            f"timed in situ: {_plural(lk.timed, 'lookup')}, each from torch.compile's call "
            "into Dynamo to the end of the lookup, not bounded by torch's profiler in this cell"
        )
    if lk.resumed:
        text += (
            f"; {_plural(lk.resumed, 'nested lookup')} (resume functions after graph breaks, "
            "frames compiled on their own) timed from the call that made them "
            "(sys.monitoring)"
        )
    if lk.sampled:
        why = []
        if lk.sampled > lk.calibrated + lk.waited:
            why.append(_sampling(lk))
        if lk.calibrated:
            took = (
                f", its start and stop {fmt_s(lk.calibration_s)} of the cell"
                if lk.calibration_s
                else ""
            )
            why.append(f"{lk.calibrated} ran under torch's profiler, bounding the lookup{took}")
        if lk.waited:
            why.append(f"{lk.waited} waited for the CPU (a busy machine)")
        text += (
            f"; {lk.timed} of {lk.timed + lk.sampled} lookups of the called functions timed "
            f"({'; '.join(why)}), the total extrapolated from them per function"
        )
    return text


def _sampling(lk: Any) -> str:
    """How the cell's functions were sampled: ``the first 2 of each, then 1
    in 32``, each function's own where they differ (a function whose lookup
    is bounded for the session times fewer)."""
    if lk.sample_every:
        return f"the first {lk.sample_first} of each, then 1 in {lk.sample_every}"
    each = [
        f"{t.name}: the first {t.sample_first}, then 1 in {t.sample_every}"
        for t in lk.targets
        if t.sample_every
    ]
    return "; ".join(each) if each else "the first of each, then a sample"


def lookup_bound(lk: Any) -> str | None:
    """Why the lookups' time is a lower bound (some could not be timed), or None."""
    if not lk.lower_bound:
        return None
    if not lk.untimed_why:
        which = (
            "resume functions after graph breaks, frames compiled on their own: the "
            "first lookup from each caller while measured"
        )
        if lk.no_ex_calls:
            which += (
                ", and on Python 3.12 those made by a call with *args/**kwargs, as "
                "torch's calls of resume functions and of module forwards are (3.12 "
                "gives no monitoring event for them)"
            )
        which += "; the others are timed"
    else:
        which = (
            "resume functions after graph breaks, frames compiled on their own; "
            f"timing them from their call {lk.untimed_why}"
        )
    return (
        f"a lower bound: {_plural(lk.untimed, 'more lookup')} ({which}) have no start to "
        "time from; -g measures all of them with the profiler"
    )


def _lookup_details(lk: Any) -> list[str]:
    out = [lookup_method(lk)]
    bound = lookup_bound(lk)
    if bound:
        out.append(bound)
    looked_up = [t for t in lk.targets if t.timed or t.untimed or t.sampled]
    if len(looked_up) > 1 or any(t.untimed for t in looked_up):
        for t in looked_up:
            line = label(t.name, t.where)
            parts = []
            if t.timed:
                parts.append(f"{_plural(t.timed, 'lookup')} × {fmt_s(t.per_lookup_s)}")
            if t.sampled:
                parts.append(f"{t.sampled} more counted, not timed")
            if t.untimed:
                parts.append(f"{t.untimed} nested lookups not timed")
            out.append(f"{line}: {', '.join(parts)}")
    return out


def parts_text(p: Any) -> str:
    """``17.8 µs = wrapper 7.4 µs + lookup 1.5 µs + compiled code 8.9 µs``."""
    if not p.calls:
        return ""
    lookup = "lookup" if p.lookup_bounded else "into Dynamo and lookup"
    text = f"{fmt_s(p.call_s)} = torch.compile's wrapper {fmt_s(p.wrapper_s)}"
    text += f" + {lookup} {fmt_s(p.lookup_s)} + compiled code {fmt_s(p.compiled_s)}"
    return text


def device_text(p: Any) -> str:
    """``compiled code on the GPU 8.05 ms: the GPU sets the pace`` ("" without a figure)."""
    if p.device_s is None:
        return ""
    return f"compiled code on the GPU {fmt_s(p.device_s)}: {PACE[p.gpu_bound]}"


def _parts_value(p: Any) -> str:
    parts = []
    if p.calls:
        parts.append(parts_text(p) + ", medians")
        if p.device_s is not None:
            parts[-1] += " (host time)"
            parts.append(device_text(p))
    if p.eager_calls:
        each = f": {fmt_s(p.eager_s)} each" if p.eager_s is not None else " (not timed)"
        parts.append(f"{_plural(p.eager_calls, 'call')} ran eagerly{each}")
    return "; ".join(parts)


def _parts_details(rep: Any) -> list[str]:
    """Per function: its parts, the wrapper's split, what -u can save."""
    out = []
    for t in rep.lookups.targets:
        p = t.parts
        if p is None:
            continue
        where = label(t.name, t.where)
        if p.calls:
            split = ", ".join(
                f"{name} {fmt_s(v)}"
                for name, v in (
                    ("before Dynamo", p.before_s),
                    ("into Dynamo", p.into_s),
                    ("after the compiled code", p.after_s),
                )
                if v is not None
            )
            line = f"{where}: {_plural(p.calls, 'timed call')}"
            if len(rep.lookups.targets) > 1:
                line += f", {parts_text(p)}"
            if split:
                line += f"; the wrapper: {split}"
            out.append(line)
        if p.device_s is not None:
            how = {
                True: "its host parts run while earlier kernels do: faster kernels or less "
                "GPU work shorten it, less torch.compile overhead does not",
                False: "the host's parts are the call's time: fewer launches (CUDA graphs, "
                "mode='reduce-overhead') or a larger compiled piece shorten it",
                None: "the GPU's span holds its last kernel's launch latency too (tens of "
                "µs), so a call with little host work reads longer there without the GPU "
                "setting the pace",
            }[p.gpu_bound]
            out.append(
                f"{where}: compiled code {fmt_s(p.compiled_s)} on the host, "
                f"{fmt_s(p.device_s)} on the GPU ({_plural(p.device_calls, 'timed call')}; "
                "CUDA events on the current stream from the end of the lookup to the end of "
                f"the code's last kernel): {PACE[p.gpu_bound]}: {how}"
            )
        if p.eager_calls:
            each = f", {fmt_s(p.eager_s)} each" if p.eager_s is not None else " (not timed)"
            out.append(f"{where}: {_plural(p.eager_calls, 'call')} ran eagerly{each}")
    cp = rep.call_parts
    if cp is not None and cp.calls and cp.call_s:
        share = (cp.lookup_s or 0.0) / cp.call_s
        of = "of a call" if cp.device_s is None else "of a call's host time"
        hidden = ", which the GPU's work hides here" if cp.gpu_bound else ""
        out.append(
            f"-u (skip_guard_eval_unsafe) can save part of the lookup ({share:.0%} {of}"
            f"{hidden}), none of the wrapper or the compiled code"
        )
    return out
