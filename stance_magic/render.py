"""Text and HTML views of reports and the history: every sentence a report
shows is made here, from the report's numbers and names. Every user string
is escaped.

Reports come in as the plain data of :mod:`stance_magic.report`, read by
their fields: this module imports no report class (the report's own
``text()`` and ``html()`` hand themselves over to it, one way).

The views take ``max_details``: how many detail lines a row shows before the
rest fold (``StanceMagics.max_details``, which the magics hand to IPython's
formatters for the session; :data:`MAX_DETAILS` otherwise).
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Iterable, NamedTuple, Sequence, TypeVar

from .stance import stance_text
from .text import cell_label, fmt_bytes, fmt_s, shorten
from .text import plural as _plural

__all__ = [
    "MAX_DETAILS",
    "BreakList",
    "History",
    "break_todo",
    "budget_text",
    "cache_line",
    "cache_verdict",
    "cudagraph_lines",
    "cudagraph_skip_text",
    "cudagraph_value",
    "history_html",
    "history_text",
    "lookup_bound",
    "lookup_method",
    "ranks_html",
    "ranks_text",
    "report_html",
    "report_text",
    "share_lines",
    "summary_line",
]

#: How each compile phase is named, in the report's order of phases.
PHASE_LABELS = {
    "dynamo": "Dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "backend": "Inductor/backend",
    "codegen": "code generation",
    "other": "other",
}

#: How the report names each compile cache.
CACHE_LABELS = {"aot_autograd": "AOTAutograd cache", "inductor": "FX graph cache"}


def _stance_line(rep: Any) -> str:
    return stance_text(rep.stance, rep.skip_guard_eval_unsafe, rep.backend)


def _breakdown(rep: Any) -> str:
    parts = [
        f"{label} {fmt_s(rep.compile_breakdown.get(p, 0.0))}"
        for p, label in PHASE_LABELS.items()
        if rep.compile_breakdown.get(p, 0.0) >= 1e-6
    ]
    return ", ".join(parts)


#: How the report names Inductor's parts that torch's records time (see
#: ``probe.KERNEL_FIELDS``).
KERNEL_LABELS = {
    "kernel_compile": "kernel compilation (compile workers: Triton on a GPU, C++ on a CPU)",
    "autotune": "autotuning (max-autotune's benchmarks)",
    "runtime_autotune": "Triton autotuning",
    "cudagraph_record": "CUDA graph recording",
}


def _kernel_parts(parts: dict[str, float]) -> str:
    return ", ".join(
        f"{label} {fmt_s(parts[k])}" for k, label in KERNEL_LABELS.items() if parts.get(k)
    )


def _kernel_lines(rep: Any) -> list[str]:
    """The compile time's named parts (inside it) and those timed at the
    first runs after it; nothing where torch timed none."""
    lines = []
    inside = getattr(rep, "kernel_breakdown", None) or {}
    after = getattr(rep, "first_run_breakdown", None) or {}
    if any(inside.values()):
        lines.append(f"of which {_kernel_parts(inside)}")
    if any(after.values()):
        lines.append(
            f"at the first runs after compiling: {_kernel_parts(after)} (in the wall time, "
            "not the compile time)"
        )
    return lines


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
        text += f"; at {s.where}" + (f" `{s.source}`" if s.source else "")
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


class Row(NamedTuple):
    """One row of a cell report: its label, its value, the detail lines under
    it, and what the brief report (the default; ``verbose`` shows every row
    whole) keeps of it: ``"row"`` (the row and its details), ``"value"`` (the
    row, its details folded), ``"head"`` (nothing: the headline says it) or
    ``""`` (folded: it matters only to a reader who asks)."""

    label: str
    value: str
    details: list[str]
    brief: str = "row"


def report_rows(rep: Any, hinted: bool = False) -> list[Row]:
    """Every row of a cell report, in order (``hinted``: the report shows
    hints, which say why it recompiled)."""
    rows: list[Row] = []
    rows.append(Row("stance", _stance_line(rep), [], "head"))
    wall = fmt_s(rep.wall_s)
    if getattr(rep, "synchronized", False):
        wall += "  (CUDA synchronized at its start and end: the GPU's work is in it)"
    rows.append(Row("wall time", wall, [], "head"))
    comp = fmt_s(rep.compile_s)
    breakdown = _breakdown(rep) if rep.compile_s else ""
    if breakdown:
        comp += f"  ({breakdown})"
    rows.append(Row("compile time", comp, _kernel_lines(rep), ""))
    loaded_or_pre = rep.loaded_functions or [p for p in rep.precompiled if p.outcome != "miss"]
    rows.append(
        Row(
            "compiles",
            _compiles_value(rep),
            [_frame_line(rep, f) for f in rep.frames]
            + [_load_line(x) for x in rep.loaded_functions]
            + [_precompiled_line(p) for p in rep.precompiled if p.outcome != "miss"],
            "row" if rep.compiles or rep.backward_compiles or loaded_or_pre else "",
        )
    )
    rows.extend(_cache_rows(rep))
    rows.append(
        Row(
            "recompiles",
            str(len(rep.recompiles)),
            _recompile_lines(rep),
            "row" if rep.recompiles else "",
        )
    )
    for lim in rep.recompile_limits:
        rows.append(Row("recompile limit", _limit_value(lim), _limit_details(lim)))
    shown = [b for b in rep.recompile_budget if b.entries > 1 or b.near]
    full = rep.tightest_budget
    if shown and full is not None:
        text = budget_text(full)
        value = text if len(shown) == 1 else f"{len(shown)} frames; fullest: {text}"
        value += f" ({_budget_setting(full)})"
        details = [budget_text(b) for b in shown] if len(shown) > 1 else []
        rows.append(Row("recompile budget", value, details, "row" if full.near else ""))
    dyn = [d for d in rep.dynamic_shapes if d.dynamic]
    if dyn:
        details = []
        for d in dyn:
            details.append(f"{d.where}: {'; '.join(d.inputs)}" if d.where else "; ".join(d.inputs))
            details.extend(f"↳ {s}" for s in d.symbols + d.specialized)
        rows.append(Row("dynamic shapes", "; ".join(dyn[-1].inputs), details, "value"))
    why = "" if hinted else "row"
    if len(rep.causes) == 1:
        rows.append(Row("why it recompiled", str(rep.causes[0]), [], why))
    elif rep.causes:
        rows.append(
            Row(
                "why it recompiled",
                _plural(len(rep.causes), "cause"),
                [str(c) for c in rep.causes],
                why,
            )
        )
    nb = rep.graph_break_count
    rows.append(
        Row("graph breaks", str(nb), _break_lines(rep.graph_break_details), "row" if nb else "")
    )
    cg = getattr(rep, "cudagraphs", None)
    if cg is not None and not cg.empty:
        rows.append(Row("CUDA graphs", cudagraph_value(cg), cudagraph_lines(cg)))
    rows.append(Row("cache hits / misses", f"{rep.cache_hits} / {rep.cache_misses}", [], ""))
    rows.append(Row("cache lookups", _lookup_value(rep), _lookup_details(rep.lookups), ""))
    if rep.call_parts is not None:
        rows.append(Row("a compiled call", _parts_value(rep.call_parts), _parts_details(rep), ""))
    for fig in rep.memory:
        value = (
            f"peak {fmt_bytes(fig.peak_bytes)} above the start; "
            f"{fmt_bytes(fig.end_bytes, signed=True)} left at the end"
        )
        if getattr(fig, "peak_reserved_bytes", None) is not None:
            value += (
                f"; reserved by the caching allocator: peak {fmt_bytes(fig.peak_reserved_bytes)}, "
                f"{fmt_bytes(fig.reserved_bytes)} at the end"
            )
        rows.append(Row(f"memory ({fig.device})", value, [fig.method], "value"))
    if rep.stance == "eager_on_recompile" or rep.eager_fallbacks:
        why_lines = (
            []
            if rep.stance == "eager_on_recompile"
            else ["eager_on_recompile was in force at those calls (set inside the cell)"]
        )
        # a miss each: a call's own lookup and those of frames nested in it
        calls = rep.calls.eager.get("eager_on_recompile", 0)
        value = str(rep.eager_fallbacks)
        if rep.eager_fallbacks and calls and calls != rep.eager_fallbacks:
            value = (
                f"{rep.eager_fallbacks} lookups missed and ran eagerly, in "
                f"{_plural(calls, 'call')} (frames nested in a call miss on their own)"
            )
        rows.append(
            Row(
                "eager fallbacks",
                value,
                why_lines,
                "row" if rep.eager_fallbacks else "",
            )
        )
    if rep.stance == "fail_on_recompile" or rep.refused_recompiles:
        by = [w for w in rep.calls.refused if w not in (rep.stance, "aot_compile's guards")]
        if rep.stance == "default" and rep.skip_guard_eval_unsafe:
            by = [w for w in by if w != "skip_guard_eval_unsafe"]
        why_lines = (
            [f"{' and '.join(by)} was in force at those calls (set inside the cell)"] if by else []
        )
        rows.append(
            Row(
                "refused recompiles",
                str(rep.refused_recompiles),
                why_lines + [f"guard that failed: {g}" for g in rep.refused_guards],
                "row" if rep.refused_recompiles else "",
            )
        )
    rows.extend(_call_rows(rep))
    c = rep.compare
    if c is not None and c.eager_peak_bytes is not None:
        rows.append(
            Row(
                "memory peaks",
                f"eager {fmt_bytes(c.eager_peak_bytes)} · compiled first run "
                f"{fmt_bytes(c.compiled_first_peak_bytes)} · compiled steady "
                f"{fmt_bytes(c.compiled_steady_peak_bytes)}",
                [],
            )
        )
    if c is not None:
        rows.append(Row("eager (steady)", fmt_s(c.eager_s), [], "value"))
        rows.append(Row("compiled (steady)", fmt_s(c.compiled_s), [], "value"))
        synced = (
            ["every run timed from and to a synchronized CUDA device"]
            if getattr(c, "synchronized", False)
            else []
        )
        rows.append(Row("speedup", f"{c.speedup:.2f}×" if c.speedup else "n/a", synced, ""))
        be = (
            "never (compiled is not faster)"
            if c.break_even_calls is None
            else f"{c.break_even_calls} run{'s' if c.break_even_calls != 1 else ''}"
        )
        rows.append(Row("break-even", be, [], ""))
    if rep.error:
        rows.append(Row("error", rep.error, _error_details(rep)))
    return rows


#: Detail lines shown under a row; the rest are folded (all stay in the
#: report's data and in the JSON export).
MAX_DETAILS = 8


def budget_text(b: Any) -> str:
    """``f (In [3], line 1): 7 of 8 entries (1 left: the next recompile is the last)``."""
    limit = "?" if b.limit is None else b.limit
    text = f"{b.where}: {b.entries} of {limit} entries"
    if b.left == 0:
        text += " (at the limit: torch runs new cases eagerly)"
    elif b.left == 1:
        text += " (1 left: the next recompile is the last)"
    return text


def _budget_setting(b: Any) -> str:
    """Where a frame's limit comes from, as the report names it."""
    if b.per_call:
        return f"recompile_limit={b.limit} of its torch.compile"
    return b.config


def failure_text(f: Any) -> str:
    """A failed guard (or a recompile's reason) with the user's line it came from."""
    return f"{f.reason}  ← {f.guard_source}" if f.guard_source else f.reason


def break_todo(g: Any) -> str:
    """One to-do line: where (the user's line first), what, its cost, the fix."""
    place = g.place
    if g.user_filename:
        src = f" `{g.user_source}`" if g.user_source else ""
        place = f"{g.user_where}{src} (inside {g.where})"
    head = g.gb_type or g.summary.split(":", 1)[0]
    tag = f" [{g.gb_id}]" if g.gb_id else ""
    cost = ""
    if g.frames_after:
        cost = f"; {g.frames_after} more frame{'s' if g.frames_after != 1 else ''}"
        cost += f" compiled after it ({fmt_s(g.compile_s_after)})"
    hint = f"; hint: {g.hints[0]}" if g.hints else ""
    return f"{g.count}× {place}: {head}{tag}{cost}{hint}"


def _more(n: int) -> str:
    return f"and {n} more (all in the report's data and %stance history --json)"


def _notes(rep: Any) -> list[str]:
    notes = list(rep.notes)
    if rep.memory_on:
        notes.append(
            "times taken with memory measuring on (-m): each allocation was reported to "
            "torch's profiler while the cell ran (reading the events back afterwards is "
            "not in the wall time)"
        )
    g = rep.gathered
    if g is not None and g.rank != g.to:
        what = "report" if g.mode == "full" else "summary"
        notes.append(
            f"rank {g.rank} of {g.world_size}: this rank's {what} went to rank {g.to}, which "
            "shows the combined view of all ranks"
        )
    return notes


def _break_lines(breaks: Sequence[Any]) -> list[str]:
    """The graph-break to-do list: one line each, most costly first, with
    torch's documentation page."""
    out = []
    for g in breaks:
        line = break_todo(g)
        if getattr(g, "url", ""):
            line += f" · docs: {g.url}"
        out.append(line)
    return out


_URL = re.compile(r"(https?://[^\s<>&\"']+)")


def _linked(escaped: str) -> str:
    """Links in an escaped line made clickable (torch's documentation pages)."""
    return _URL.sub(r'<a href="\1" target="_blank" rel="noopener">\1</a>', escaped)


#: Where the docs explain how each figure is measured (linked from the
#: report's folded rows, so no report repeats the explanation).
DOCS = "https://github.com/stance-magic/stance_magic/blob/main/docs/"
#: The page (and its section) explaining a row, by the row's label.
ROW_DOCS = {
    "compile time": "measurement.md",
    "compiles": "compile-time.md",
    "compile caches": "compile-time.md",
    "recompiles": "recompiles.md",
    "recompile limit": "recompiles.md",
    "recompile budget": "recompiles.md",
    "why it recompiled": "recompiles.md",
    "dynamic shapes": "recompiles.md",
    "graph breaks": "graph-breaks.md",
    "CUDA graphs": "cuda.md",
    "cache hits / misses": "measurement.md",
    "cache lookups": "call-anatomy.md#how-it-is-measured",
    "a compiled call": "call-anatomy.md",
    "calls": "measurement.md",
    "eager fallbacks": "measurement.md",
    "refused recompiles": "measurement.md",
}


def _cause_brief(c: Any) -> str:
    """A recompile's cause in a few words, for the headline: ``x: rank 1 → 2``,
    ``x.size(0) 8 → 16``."""
    change = getattr(c, "change", "")
    subject = shorten(c.subject, 40)
    if c.kind in ("size", "parameter"):
        return f"{subject}.{change}" if change else f"{subject}: size"
    if c.kind in ("rank", "dtype", "device", "requires_grad"):
        return f"{subject}: {c.kind} {change}" if change else f"{subject}: {c.kind}"
    if c.kind == "redefined":
        return f"{subject} redefined"
    if c.kind in ("value", "flag", "attribute"):
        return f"{subject} changed"
    if c.kind == "grad mode":
        return "grad mode switched"
    if c.kind == "callback":
        return "no guard failed: torch 2.8's callbacks"
    if c.kind == "backend":
        return "an entry of another backend"
    return c.kind


def headline_parts(rep: Any) -> list[str]:
    """What a measured cell did and cost, in a few short phrases: the
    headline of its report and the panel's one-line summary."""
    parts = []
    n = rep.compiles + rep.backward_compiles
    raised = sum(1 for f in rep.frames if f.failed and f.raised)
    if rep.graphs:
        parts.append(f"compiled {_plural(rep.graphs, 'graph')} in {fmt_s(rep.compile_s)}")
    elif n:
        parts.append(f"traced {_plural(n, 'frame')} in {fmt_s(rep.compile_s)}, no graph")
    if raised:
        parts.append(f"{_plural(raised, 'compile')} FAILED")
    used = sum(1 for p in rep.precompiled if p.outcome == "hit")
    if used:
        parts.append(f"{_plural(used, 'precompiled frame')} used (no tracing)")
    if rep.loaded_functions:
        parts.append(f"{_plural(len(rep.loaded_functions), 'compiled function')} loaded")
    if not parts:
        hits = f", {_plural(rep.cache_hits, 'cache hit')}" if rep.cache_hits else ""
        parts.append(f"nothing compiled{hits}")
    if rep.recompiles:
        text = _plural(len(rep.recompiles), "recompile")
        briefs = list(dict.fromkeys(_cause_brief(c) for c in rep.causes))
        if briefs:
            text += f" ({briefs[0]}{', …' if len(briefs) > 1 else ''})"
        parts.append(text)
    breaks = rep.graph_break_count
    if breaks:
        parts.append(_plural(breaks, "graph break"))
    calls = rep.calls
    for outcome, word in (("eager", "ran eagerly"), ("refused", "refused"), ("failed", "raised")):
        by = getattr(calls, outcome)
        total = sum(by.values())
        if total:
            why = f" ({next(iter(by))})" if len(by) == 1 else ""
            parts.append(f"{_plural(total, 'call')} {word}{why}")
    for lim in rep.recompile_limits:
        parts.append(f"{lim.where.split(' (')[0]} at its recompile limit")
    full = rep.tightest_budget
    if full is not None and full.left == 1 and not rep.recompile_limits:
        parts.append(f"{full.where.split(' (')[0]}: 1 recompile left")
    lk = rep.lookups
    if lk.per_lookup_s is not None:
        parts.append(f"cache lookup {fmt_s(lk.per_lookup_s)} a call")
    c = rep.compare
    if c is not None and c.speedup:
        be = (
            "never breaks even"
            if c.break_even_calls is None
            else f"breaks even after {_plural(c.break_even_calls, 'run')}"
        )
        parts.append(f"{c.speedup:.2f}× eager's speed at steady state, {be}")
    return parts


def headline(rep: Any) -> str:
    """A report's first line: the cell, its stance, its wall time, what
    happened and what it cost (an error's first line at the end)."""
    which = cell_label(rep)
    head = f"stance_magic · {which}" if which else "stance_magic"
    wall = fmt_s(rep.wall_s)
    if getattr(rep, "synchronized", False):
        wall += " (CUDA synchronized)"
    line = f"{head} · {_stance_line(rep)} · {wall}: {' · '.join(headline_parts(rep))}"
    if rep.error:
        line += f" · failed: {shorten(rep.error, 80)}"
    return line


def _fold(rows: list[Row], verbose: bool) -> tuple[list[Row], list[Row]]:
    """(rows shown, rows with something folded: whole, or their details;
    the headline's own rows too, so the folded part holds every figure)."""
    if verbose:
        return rows, []
    shown = [
        r if r.brief == "row" else r._replace(details=[])
        for r in rows
        if r.brief in ("row", "value")
    ]
    folded = [r for r in rows if r.brief in ("", "head") or (r.brief == "value" and r.details)]
    return shown, folded


#: How the text report says where the rest is.
MORE_TEXT = "more with -v"


def _more_names(folded: Sequence[Row]) -> str:
    """The folded rows by name (the headline's own left out); a row shown with
    its details folded is named ``label (details)``."""
    return ", ".join(
        f"{r.label} (details)" if r.brief == "value" else r.label
        for r in folded
        if r.brief != "head"
    )


def report_text(
    rep: Any,
    max_details: int = MAX_DETAILS,
    verbose: bool = False,
    hints: Sequence[str] = (),
) -> str:
    """A report as text: its headline, its ``hints``, then the rows that
    matter for this cell (every row, with ``verbose``), details under them."""
    rows = report_rows(rep, hinted=bool(hints))
    shown, folded = _fold(rows, verbose)
    out = [headline(rep)]
    out.extend(f"hint: {h}" for h in hints)
    # labels padded as in the whole report, so a row reads the same brief or verbose
    width = max(len(r.label) for r in rows)
    for label, value, details, _ in shown:
        out.append(f"  {label:<{width}}  {value}")
        for d in details[:max_details]:
            out.append(f"  {'':<{width}}    - {d}")
        if len(details) > max_details:
            out.append(f"  {'':<{width}}    … {_more(len(details) - max_details)}")
    for note in _notes(rep):
        out.append(f"  note: {note}")
    out.extend(f"  {what}: {where}" for what, where in share_lines(rep))
    more = _more_names(folded)
    if more:
        out.append(f"  {MORE_TEXT}: {more}")
    return "\n".join(out)


# Inline styles only: JupyterLab strips a <style> element from the outputs of
# an untrusted notebook (what Binder and a fresh clone show first), and keeps
# style attributes. Colours that read on light and dark themes alike.
_TABLE = "border-collapse:collapse;font-size:12px;margin:2px 0;width:auto;table-layout:auto"
_CELL = (
    "padding:2px 8px;text-align:left;vertical-align:top;"
    "border-bottom:1px solid rgba(128,128,128,0.25)"
)
_TH = f"{_CELL};font-weight:600;white-space:nowrap"
_TD = f"{_CELL};white-space:normal"
_TH_WRAP = f"{_CELL};font-weight:600;white-space:normal"
_UL = "margin:0;padding-left:16px;text-align:left"
_LI = "text-align:left"
_CAPTION = "text-align:left;font-weight:600;padding:2px 0;caption-side:top"
_HINT = "text-align:left;padding:1px 8px;font-size:12px;color:#1a6b3c"
_HEADLINE = "text-align:left;font-weight:600;font-size:12px;padding:2px 0"
_ERR = "color:#c62828"
_SUMMARY = "cursor:pointer;font-size:12px;color:#777;text-align:left"
_DOC_LINK = "font-weight:400;font-size:10px;color:#888;text-decoration:none;vertical-align:super"


def _rows_html(rows: Sequence[Row], max_details: int) -> str:
    e = html.escape
    out = []
    for label, value, details, _ in rows:
        style = f"{_TD};{_ERR}" if label == "error" else _TD
        det = ""
        if details:
            det = (
                f'<ul style="{_UL}">'
                + "".join(f'<li style="{_LI}">{_linked(e(d))}</li>' for d in details[:max_details])
                + "</ul>"
            )
        if len(details) > max_details:
            rest = "".join(f'<li style="{_LI}">{_linked(e(d))}</li>' for d in details[max_details:])
            det += (
                f'<details><summary style="{_SUMMARY}">{e(_more(len(details) - max_details))}'
                f'</summary><ul style="{_UL}">{rest}</ul></details>'
            )
        doc = ROW_DOCS.get(label)
        head = e(label)
        if doc:
            head += (
                f' <a href="{DOCS}{doc}" target="_blank" rel="noopener" '
                f'title="how this is measured (docs)" style="{_DOC_LINK}">?</a>'
            )
        out.append(
            f'<tr><th style="{_TH}">{head}</th><td style="{style}">{e(value)}{det}</td></tr>'
        )
    return "".join(out)


def report_html(
    rep: Any,
    max_details: int = MAX_DETAILS,
    verbose: bool = False,
    hints: Sequence[str] = (),
) -> str:
    """A report as HTML (every string escaped, inline styles): the headline,
    the hints, a table of the rows that matter; the rest in a ``<details>``
    (every row in the table with ``verbose``). The headline and the hints are
    blocks of their own, as wide as the output (a caption would be as narrow
    as a table of few rows)."""
    e = html.escape
    rows = report_rows(rep, hinted=bool(hints))
    shown, folded = _fold(rows, verbose)
    hint_lines = "".join(
        f'<div class="sm-hint" style="{_HINT}">hint: {_linked(e(h))}</div>' for h in hints
    )
    notes = "".join(f'<tr><td colspan=2 style="{_TD}"><i>{e(n)}</i></td></tr>' for n in _notes(rep))
    body = _rows_html(shown, max_details) + _share_html(rep) + notes
    out = (
        f'<div class="sm-report-html" style="text-align:left">'
        f'<div class="sm-headline" style="{_HEADLINE}">{e(headline(rep))}</div>'
        + hint_lines
        + (f'<table class="sm-report" style="{_TABLE}">{body}</table>' if body else "")
    )
    if folded:
        out += (
            f'<details class="sm-more"><summary style="{_SUMMARY}">'
            f"more: {e(_more_names(folded))}</summary>"
            f'<table class="sm-report sm-more-rows" style="{_TABLE}">'
            + _rows_html(folded, max_details)
            + "</table></details>"
        )
    return out + "</div>"


HISTORY_COLUMNS = (
    ("cell_label", "cell"),
    ("label", "code"),
    ("stance_label", "stance"),
    ("wall_s", "wall"),
    ("compile_s", "compile"),
    ("compiles", "compiles"),
    ("recompiles", "recompiles"),
    ("graph_breaks", "breaks"),
    ("hits_misses", "hits/misses"),
    ("guard_s", "guards"),
    ("error", "error"),
)


#: Shown when some cell of the history measured memory.
MEMORY_COLUMN = ("peak_bytes", "peak mem")
#: Shown when some frame of the history recompiled: its entries of the limit.
BUDGET_COLUMN = ("budget", "entries")

#: Shown when some cell of the history compiled with Inductor's caches: their
#: state and the FX graph cache's hits/misses (``warm 1/0``).
CACHE_COLUMNS = (("caches", "caches (FX)"),)


def _columns(reports: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    reports = list(reports)
    columns = HISTORY_COLUMNS
    tight = [r.tightest_budget for r in reports]
    if any(b is not None and (b.entries > 1 or b.near) for b in tight):
        i = [k for k, _ in columns].index("recompiles") + 1
        columns = (*columns[:i], BUDGET_COLUMN, *columns[i:])
    if any(r.memory for r in reports):
        i = [k for k, _ in columns].index("guard_s") + 1
        columns = (*columns[:i], MEMORY_COLUMN, *columns[i:])
    if any(r.compile_caches.state for r in reports):
        i = [k for k, _ in columns].index("compile_s") + 1
        columns = (*columns[:i], *CACHE_COLUMNS, *columns[i:])
    return columns


def _cell(key: str, v: Any) -> str:
    if key.endswith("_s"):
        return fmt_s(v)
    if key.endswith("_bytes"):
        return fmt_bytes(v) if v is not None else ""
    text = "" if v is None else str(v)
    return shorten(text) if key == "error" else text


def text_table(head: Sequence[str], body: Sequence[Sequence[str]], indent: str = "") -> str:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(indent + line for line in out)


def _td(text: str, shown: str | None = None, extra: str = "", columns: int = 0) -> str:
    """A table cell, inline-styled: a short one stays on one line, a long one
    wraps (so a table fits 1,000 px). ``shown``: its HTML when not ``text``
    escaped; ``columns``: the table's (a wide one is set tighter)."""
    wrap = "white-space:nowrap" if len(text) <= 22 else "white-space:normal;min-width:7em"
    body = html.escape(text) if shown is None else shown
    if shown is None and len(text) > 12 and "_" in text:
        # a long name (aot_eager_then_compile) may break after an underscore
        wrap, body = "white-space:normal", body.replace("_", "_<wbr>")
    return f'<td style="{_CELL};{wrap}{extra}{_tight(columns)}">{body}</td>'


def styled_table(
    head: Sequence[str], rows: Sequence[str], caption: str = "", cls: str = "sm-table"
) -> str:
    """An inline-styled table of ``rows`` (``<tr>`` … ``</tr>`` each) under
    ``head``, that keeps its layout in an untrusted notebook; a table of many
    columns is set tighter, its headers wrapping at a slash, so it fits 1,000 px."""
    e = html.escape
    cap = f'<caption style="{_CAPTION}">{e(caption)}</caption>' if caption else ""
    tight = _tight(len(head))
    th = "".join(f'<th style="{_TH_WRAP}{tight}">{e(h).replace("/", "/<wbr>")}</th>' for h in head)
    return (
        f'<div style="overflow-x:auto;text-align:left"><table class="sm-report {cls}" '
        f'style="{_TABLE}{tight}">{cap}<tr>{th}</tr>{"".join(rows)}</table></div>'
    )


#: Columns from which a table is set tighter (smaller type, less padding).
WIDE = 9


def _tight(columns: int) -> str:
    """The style that sets a table of ``columns`` tighter ("" for a narrow one;
    the last declaration wins)."""
    return ";font-size:11px;padding:2px 4px" if columns >= WIDE else ""


def html_table(head: Sequence[str], body: Sequence[Sequence[str]], caption: str = "") -> str:
    """An escaped HTML table with the report style."""
    rows = ["<tr>" + "".join(_td(c, columns=len(head)) for c in r) + "</tr>" for r in body]
    return styled_table(head, rows, caption)


def _history_body(reports: Iterable[Any]) -> tuple[list[str], list[list[str]]]:
    reports = list(reports)
    columns = _columns(reports)
    rows = [r.summary_row() for r in reports]
    for rep, row in zip(reports, rows):
        # the history's own columns: the cell as the notebook names it, two counts in one
        row["cell_label"] = cell_label(rep)
        row["hits_misses"] = f"{row['cache_hits']}/{row['cache_misses']}"
        # the compile caches' state, with the FX graph cache's hits/misses
        row["caches"] = (
            f"{row['cache_state']} {row['fx_cache_hits']}/{row['fx_cache_misses']}"
            if row.get("cache_state")
            else ""
        )
    return [h for _, h in columns], [[_cell(k, row[k]) for k, _ in columns] for row in rows]


def history_text(reports: Iterable[Any]) -> str:
    head, body = _history_body(reports)
    if not body:
        return "stance_magic history: no measured cells yet"
    return text_table(head, body)


def history_html(reports: Iterable[Any]) -> str:
    head, body = _history_body(reports)
    if not body:
        return "<p>stance_magic history: no measured cells yet</p>"
    return html_table(head, body)


# A history's item: a CellReport. A view imports no report class, so the item
# type is a parameter: stance_magic.history() is a History[CellReport].
_R = TypeVar("_R")


class History(list[_R], Generic[_R]):
    """The session's reports, oldest first, that display as a table."""

    def __str__(self) -> str:
        return history_text(self)

    def _repr_html_(self) -> str:
        return history_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


# -- across ranks (stance_magic.ranks.RankReport) ------------------------------


def _rank_columns(view: Any) -> list[tuple[str, Any]]:
    cols: list[tuple[str, Any]] = [("rank", lambda r: str(r.rank))]
    if len({r.host for r in view.rows}) > 1:
        cols.append(("host", lambda r: r.host))
    cols += [
        ("stance", lambda r: r.stance),
        ("wall", lambda r: fmt_s(r.wall_s)),
        ("compile", lambda r: fmt_s(r.compile_s)),
        ("compiles", lambda r: str(r.compiles)),
        ("recompiles", lambda r: str(r.recompiles)),
        ("breaks", lambda r: str(r.graph_breaks)),
        ("hits/misses", lambda r: f"{r.cache_hits}/{r.cache_misses}"),
        ("guards", lambda r: fmt_s(r.lookup_s)),
    ]
    if any(r.peak_bytes is not None for r in view.rows):
        cols.append(("peak memory", lambda r: fmt_bytes(r.peak_bytes)))
    if any(r.refused for r in view.rows):
        cols.append(("refused", lambda r: str(r.refused_recompiles)))
    if any(r.error for r in view.rows):
        cols.append(("error", lambda r: shorten(r.error, 48)))
    return cols


def _ranks_title(view: Any) -> str:
    n = view.execution_count
    which = f", In [{n}] on rank 0" if n is not None else ""
    return f"stance_magic across {view.world_size} ranks{which}"


def _gather_line(view: Any) -> str:
    what = "full reports" if view.mode == "full" else "summaries"
    return (
        f"gathered {what} with torch.distributed.gather_object in {fmt_s(view.gather_s)} at "
        f"rank 0 (waiting for the last rank included); rank 0 sent {fmt_bytes(view.payload_bytes)}"
    )


def _folded(view: Any, shown: list[Any]) -> str:
    n = len(view.rows) - len(shown)
    return (
        f"… {n} more rank{'s' if n != 1 else ''} not flagged (all rows: "
        "stance_magic.history()[-1].ranks.rows)"
        if n
        else ""
    )


def _flag_lines(view: Any) -> list[str]:
    if not view.divergent:
        if view.world_size > 1:
            head = [
                "no divergence: every rank ran the same stance and compiled, recompiled "
                "and broke its graphs alike"
            ]
        else:
            head = ["one rank: nothing to compare"]
    else:
        head = [f"DIVERGED: {f.message}" for f in view.divergent]
    return head + [f.message for f in view.flags if not f.divergence]


def ranks_text(view: Any, max_details: int = MAX_DETAILS, verbose: bool = False) -> str:
    """A :class:`~stance_magic.ranks.RankReport` as text: one row per rank,
    where they diverged, how the gather went."""
    cols = _rank_columns(view)
    shown = view.shown
    body = [[get(r) for _, get in cols] for r in shown]
    out = [_ranks_title(view), text_table([h for h, _ in cols], body, indent="  ")]
    folded = _folded(view, shown)
    if folded:
        out.append("  " + folded)
    out += [f"  {line}" for line in _flag_lines(view)]
    out.append(f"  note: {_gather_line(view)}")
    if view.mode == "full" and view.reports:
        for rank, rep in enumerate(view.reports):
            out.append(f"\n--- rank {rank} ---\n{report_text(rep, max_details, verbose)}")
    return "\n".join(out)


def ranks_html(view: Any, max_details: int = MAX_DETAILS, verbose: bool = False) -> str:
    """A :class:`~stance_magic.ranks.RankReport` as HTML (every string escaped);
    diverged ranks in the error colour."""
    e = html.escape
    cols = _rank_columns(view)
    shown = view.shown
    flagged = set(view.flagged_ranks)
    body = [
        ('<tr class="sm-err">' if r.rank in flagged else "<tr>")
        + "".join(
            _td(get(r), extra=f";{_ERR}" if r.rank in flagged else "", columns=len(cols))
            for _, get in cols
        )
        + "</tr>"
        for r in shown
    ]
    table = styled_table([h for h, _ in cols], body, _ranks_title(view))
    items = []
    folded = _folded(view, shown)
    if folded:
        items.append(f'<li style="{_LI}">{e(folded)}</li>')
    for line in _flag_lines(view):
        if line.startswith("DIVERGED: "):
            items.append(
                f'<li class="sm-err" style="{_LI};{_ERR}"><b>diverged</b>: '
                f"{e(line[len('DIVERGED: ') :])}</li>"
            )
        else:
            items.append(f'<li style="{_LI}">{e(line)}</li>')
    items.append(f'<li style="{_LI}"><i>{e(_gather_line(view))}</i></li>')
    parts = [
        table,
        f'<ul class="sm-ranks" style="margin:2px 0 6px;font-size:12px">{"".join(items)}</ul>',
    ]
    if view.mode == "full" and view.reports:
        for rank, rep in enumerate(view.reports):
            parts.append(
                f"<details><summary>rank {rank}: full report</summary>"
                f"{report_html(rep, max_details, verbose)}</details>"
            )
    return "".join(parts)


def summary_line(rep: Any, session: Any = None) -> str:
    """One line about a measured cell, for the panel's live area header
    (``session``: the session stance, named when the cell ran under its own).

    Examples
    --------
    >>> from stance_magic.report import CellReport
    >>> summary_line(
    ...     CellReport(stance="default", index=3, wall_s=0.5, compile_s=0.4, compiles=1, graphs=1)
    ... )
    'cell 3 · default · 500.0 ms: compiled 1 graph in 400.0 ms'
    """
    stance = _stance_line(rep)
    if session is not None and stance != str(session):
        stance += f" (its own; session: {session})"
    line = f"{cell_label(rep)} · {stance} · {fmt_s(rep.wall_s)}: {' · '.join(headline_parts(rep))}"
    if rep.error:
        line += f" · failed: {rep.error}"
    return line


def _error_details(rep: Any) -> list[str]:
    """The user's line that made the failing call, where the traceback has one."""
    where = getattr(rep, "error_where", "")
    return [f"raised at {where}"] if where else []


@dataclass
class BreakEntry:
    """One line of the session's graph-break to-do list."""

    kind: str
    place: str
    todo: str
    url: str
    count: int = 0
    frames_after: int = 0
    compile_s_after: float = 0.0
    cells: list[str] = field(default_factory=list)


class BreakList(list[BreakEntry]):
    """The session's graph breaks grouped by cause and place, most costly
    first (``stance_magic.breaks()``, ``%stance breaks``)."""

    @classmethod
    def of(cls, reports: Iterable[Any]) -> BreakList:
        groups: dict[tuple[str, str], list[tuple[Any, str]]] = {}
        for rep in reports:
            for g in rep.graph_break_details:
                key = (g.kind, g.user_where or g.where)
                groups.setdefault(key, []).append((g, cell_label(rep)))
        entries = []
        for (kind, place), found in groups.items():
            first = found[0][0]
            entries.append(
                BreakEntry(
                    kind,
                    place,
                    break_todo(first),
                    first.url,
                    count=sum(g.count for g, _ in found),
                    frames_after=sum(g.frames_after for g, _ in found),
                    compile_s_after=sum(g.compile_s_after for g, _ in found),
                    cells=list(dict.fromkeys(label for _, label in found if label)),
                )
            )
        return cls(sorted(entries, key=lambda b: (-b.compile_s_after, -b.count)))

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(b.count),
                b.todo.split(": ", 1)[1] if ": " in b.todo else b.todo,
                b.place,
                fmt_s(b.compile_s_after) if b.frames_after else "",
                ", ".join(b.cells),
                b.url,
            ]
            for b in self
        ]

    _HEAD = ("breaks", "cause (and hint)", "where", "compiled after", "cells", "docs")

    def __str__(self) -> str:
        if not self:
            return "stance_magic: no graph breaks in the measured cells"
        return "\n".join(
            f"{i}. {b.todo}"
            + (f"\n   docs: {b.url}" if b.url else "")
            + (f"\n   cells: {', '.join(b.cells)}" if b.cells else "")
            for i, b in enumerate(self, 1)
        )

    def _repr_html_(self) -> str:
        if not self:
            return "<p>stance_magic: no graph breaks in the measured cells</p>"
        e = html.escape
        body = [
            "<tr>" + "".join(_td(c, _linked(e(c)), columns=len(self._HEAD)) for c in row) + "</tr>"
            for row in self._rows()
        ]
        return styled_table(self._HEAD, body, "graph breaks to fix, most costly first")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def advice_html(lines: Iterable[str]) -> str:
    items = "".join(f'<li style="{_LI}">{html.escape(a)}</li>' for a in lines)
    return f'<ul class="sm-advice" style="{_UL};margin:2px 0 6px;font-size:12px">{items}</ul>'


def _compiles_value(rep: Any) -> str:
    text = _plural(rep.compiles, "frame") + " traced"
    if rep.backward_compiles:
        text += f" + {_plural(rep.backward_compiles, 'backward graph')}"
    backends = sorted({f.backend for f in rep.frames if f.backend})
    text += f"; {_plural(rep.graphs, 'graph')} compiled"
    if backends:
        text += f" ({', '.join(backends)})"
    raised = sum(1 for f in rep.frames if f.failed and f.raised)
    eager = rep.failed_compiles - raised
    if raised:
        text += f"; {raised} FAILED"
    if eager:
        text += f"; {eager} not compiled (torch ran {'it' if eager == 1 else 'them'} eagerly)"
    if rep.loaded_functions:
        n = len(rep.loaded_functions)
        text += f"; {_plural(n, 'compiled function')} loaded (no tracing)"
    used = sum(1 for p in rep.precompiled if p.outcome == "hit")
    unused = sum(1 for p in rep.precompiled if p.outcome not in ("hit", "miss"))
    if used:
        text += f"; {_plural(used, 'precompiled frame')} used (no tracing)"
    if unused:
        text += f"; {_plural(unused, 'precompiled frame')} not used (traced again)"
    return text


def _precompiled_line(p: Any) -> str:
    if p.outcome == "hit":
        return f"{p.where}: Dynamo's precompiled frame, no tracing (caching_precompile)"
    return f"{p.where}: precompiled frame not used, traced again: {p.why}"


def _load_line(x: Any) -> str:
    text = f"{x.where}: loaded with torch.compiler.load_compiled_function, {fmt_s(x.seconds)}"
    if x.error:
        text += f" [FAILED, {x.error}]"
    return text


def _frame_line(rep: Any, f: Any) -> str:
    text = f"{f.where}: {fmt_s(f.seconds)}"
    tags = []
    if not f.graph and not f.failed:
        tags.append("no graph: nothing for a backend to compile")
    elif f.backend and len({g.backend for g in rep.frames if g.backend}) > 1:
        tags.append(f"backend {f.backend}")
    if f.aot:
        tags.append("aot_compile: ahead of any call")
    if f.during_eager_call:
        tags.append("during the eager first call")
    if f.failed:
        tags.append(f"FAILED, {f.failed}" if f.raised else f"not compiled, ran eagerly: {f.failed}")
    if tags:
        text += f" [{'; '.join(tags)}]"
    return text


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
            "the profiler slows the rest of the cell"
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
        if lk.sampled > lk.calibrated and lk.sample_first:
            why.append(f"the first {lk.sample_first} of each, then 1 in {lk.sample_every}")
        elif lk.sampled > lk.calibrated:
            why.append("the first of each, then a sample")
        if lk.calibrated:
            why.append(f"{lk.calibrated} ran under the profiler, which slows them")
        text += (
            f"; {lk.timed} of {lk.timed + lk.sampled} lookups of the called functions timed "
            f"({'; '.join(why)}), the total extrapolated from them per function"
        )
    return text


def parts_text(p: Any) -> str:
    """``17.8 µs = wrapper 7.4 µs + lookup 1.5 µs + compiled code 8.9 µs``."""
    if not p.calls:
        return ""
    lookup = "lookup" if p.lookup_bounded else "into Dynamo and lookup"
    text = f"{fmt_s(p.call_s)} = torch.compile's wrapper {fmt_s(p.wrapper_s)}"
    text += f" + {lookup} {fmt_s(p.lookup_s)} + compiled code {fmt_s(p.compiled_s)}"
    return text


#: Who sets the pace of a compiled call on a GPU (CallParts.gpu_bound).
PACE = {
    True: "the GPU sets the pace",
    False: "the GPU waits for the host's launches",
    None: "neither side clearly sets the pace",
}


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
        where = f"{t.name} ({t.where})" if t.where else t.name
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


def _recompile_lines(rep: Any) -> list[str]:
    """Each recompile with torch's first reason, then the guard that failed on
    every other cache entry (torch's record keeps only the first)."""
    out = []
    for r in rep.recompile_details:
        line = f"{r.where}: {failure_text(r)}"
        others = [f.reason for f in r.failures[1:]]
        if others:
            line += f" (other entries failed on: {'; '.join(others)})"
        if getattr(r, "called_from", ""):
            line += f"; called from {r.called_from}"
        out.append(line)
    return out


def _limit_value(lim: Any) -> str:
    n = lim.limit if lim.limit is not None else "?"
    if getattr(lim, "per_call", False):
        text = f"{lim.where} is at the recompile_limit={n} of its torch.compile"
    else:
        text = f"{lim.where} is at {lim.setting} = {n}"
    if lim.compile_id:
        text = f"hit ({lim.compile_id}): {text}"
    if lim.eager_calls:
        text += f"; {_plural(lim.eager_calls, 'call')} ran eagerly because of it"
    return text


def _limit_details(lim: Any) -> list[str]:
    out = [
        "torch stops compiling a frame at its limit: every later call that no cache entry "
        "matches runs eagerly, silently"
    ]
    for f in lim.failures:
        out.append(f"guard that failed: {failure_text(f)}")
    return out


def _lookup_details(lk: Any) -> list[str]:
    out = [lookup_method(lk)]
    bound = lookup_bound(lk)
    if bound:
        out.append(bound)
    looked_up = [t for t in lk.targets if t.timed or t.untimed or t.sampled]
    if len(looked_up) > 1 or any(t.untimed for t in looked_up):
        for t in looked_up:
            line = f"{t.name}"
            if t.where:
                line += f" ({t.where})"
            parts = []
            if t.timed:
                parts.append(f"{_plural(t.timed, 'lookup')} × {fmt_s(t.per_lookup_s)}")
            if t.sampled:
                parts.append(f"{t.sampled} more counted, not timed")
            if t.untimed:
                parts.append(f"{t.untimed} nested lookups not timed")
            out.append(f"{line}: {', '.join(parts)}")
    return out


#: why calls ran eagerly, were refused or failed (the account's reasons)
_CALL_WHY = {
    ("eager", "first call"): "eager_then_compile runs a function's first call eagerly and "
    "compiles from the second, with dynamic shapes inferred from the first calls",
    ("eager", "force_eager"): "force_eager: torch.compile ran the original code",
    ("eager", "eager_on_recompile"): "eager_on_recompile: run eagerly instead of recompiling",
    ("eager", "eager_on_recompile, nothing cached"): "eager_on_recompile with no compiled code "
    "to use: no lookup, no compile",
    ("eager", "recompile limit"): "their frame is at torch's recompile limit",
    ("eager", "compile failed"): "torch's compile failed and it ran the frame eagerly instead",
    ("eager", "skipped"): "torch compiled nothing for them (their frames are in Dynamo's "
    "skip list, or hold no tensor)",
    ("refused", "fail_on_recompile"): "fail_on_recompile raised rather than recompile",
    ("refused", "skip_guard_eval_unsafe"): "skip_guard_eval_unsafe raised: a recompile was "
    "needed and the stance allows none",
    ("refused", "aot_compile's guards"): "an aot-compiled function's own guard check failed: "
    "it cannot recompile, and torch raised",
    ("failed", "compile error"): "torch's compile raised and the error reached the caller",
    ("failed", "its code raised"): "the call raised (its own code, or an error torch passed on)",
}
_RAN = {"eager": "ran eagerly", "refused": "refused", "failed": "raised"}


def call_account_text(calls: Any) -> str:
    """``5 calls: 1 compiled, then ran; 3 ran cached code; 1 ran eagerly``."""
    parts = []
    if calls.compiled:
        parts.append(f"{calls.compiled} compiled, then ran")
    if calls.cached:
        parts.append(f"{calls.cached} ran cached code")
    for outcome in ("eager", "refused", "failed"):
        n = sum(getattr(calls, outcome).values())
        if n:
            parts.append(f"{n} {_RAN[outcome]}")
    return f"{_plural(calls.total, 'call')}: {'; '.join(parts)}"


def _call_rows(rep: Any) -> list[Row]:
    """Every call of a compiled function by how it ended: one row, where some
    call ran eagerly, was refused or failed."""
    calls = rep.calls
    if not calls.unusual:
        return []
    details = []
    for outcome in ("eager", "refused", "failed"):
        for why, n in getattr(calls, outcome).items():
            text = f"{n} {_RAN[outcome]}: {_CALL_WHY.get((outcome, why), why)}"
            details.append(text)
            if why == "first call" and rep.compiles_during_eager_calls:
                details.append(
                    f"meanwhile torch compiled {_plural(rep.compiles_during_eager_calls, 'frame')} "
                    "that the eager call reached a second time (nested frames count their own "
                    "calls: torch's behaviour)"
                )
    return [Row("calls", call_account_text(calls), details, "")]


def _cache_rows(rep: Any) -> list[Row]:
    """Compile time by where it came from: Dynamo tracing, then AOTAutograd's
    and Inductor's FX graph cache (hit: loaded; miss: generated), per compile."""
    verdict = cache_verdict(rep.compile_caches)
    if not verdict:
        return []
    details = [cache_line(f) for f in rep.frames if f.caches]
    return [Row("compile caches", verdict, details, "value")]


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
            f"caches off ({' and '.join(cc.off)}): {_plural(cc.consulted, 'compile')} "
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


# -- what --trace and --timeline wrote ------------------------------------------


def share_lines(rep: Any) -> list[tuple[str, str]]:
    """(what, where) rows: the trace file, tlparse's report, the timeline."""
    sh = rep.shared
    rows = []
    if sh.trace_file:
        ids = sh.trace_compile_ids
        what = f"trace ({len(ids)} compile id{'s' if len(ids) != 1 else ''})"
        rows.append((what, _shown(sh.trace_file)))
    if sh.tlparse_index:
        rows.append(("tlparse", _shown(sh.tlparse_index)))
    if sh.timeline_file:
        rows.append(("timeline", _shown(sh.timeline_file)))
    return rows


def _share_html(rep: Any) -> str:
    """Rows for the report's table; tlparse's index and the timeline as links
    (a notebook opens ``file`` links relative to the notebook's folder)."""
    e = html.escape
    out = []
    for what, where in share_lines(rep):
        href = _href(where)
        value = f'<a href="{e(href)}" target="_blank">{e(where)}</a>' if href else e(where)
        if what == "timeline":
            value += " (open in ui.perfetto.dev or chrome://tracing)"
        out.append(f'<tr><th style="{_TH}">{e(what)}</th><td style="{_TD}">{value}</td></tr>')
    return "".join(out)


def _shown(path: str) -> str:
    """A path as the report shows it: from the current directory (the
    notebook's folder) when it is under it, else as it is."""
    rel = _href(path)
    return rel if rel is not None else path


def _href(path: str) -> str | None:
    """A link a notebook can follow: relative to the current directory when
    the file is under it (Jupyter serves files from there), else None."""
    try:
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(os.getcwd()))
    except ValueError:
        return None
    if rel.startswith(".."):
        return None
    return "/".join(Path(rel).parts)
