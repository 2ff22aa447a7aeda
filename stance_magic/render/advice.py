"""At most three one-line hints per cell, each from a number measured in it."""

from __future__ import annotations

from typing import Any

from ..causes import OWN_GRAPH, decisive, guarded_name
from ..text import fmt_bytes, fmt_s
from ..text import plural as _n
from .recompiles import limit_setting

MAX_HINTS = 3
#: Guard evaluation above this share of the steady-state time earns a hint.
GUARD_SHARE = 0.10
#: ... over at least this many lookups (a cell of one call says little).
MIN_LOOKUPS = 10
#: A first run peaking this many times above another's earns a memory hint.
MEMORY_RATIO = 1.25
#: torch.compile's own work (its wrapper and the lookup) above this share of
#: a compiled call earns a hint: the compiled piece is small.
OVERHEAD_SHARE = 0.4
#: The -u hint only where the lookup (as torch's profiler bounds it) is at
#: least this share of a compiled call: -u saves part of the lookup, nothing
#: else (a 1-argument function: 7-10 %, and -u saves nothing measurable).
LOOKUP_SHARE = 0.15


def _causes(rep: Any) -> list[tuple[str, str]]:
    details = list(getattr(rep, "recompile_details", []) or [])
    if details:
        return [decisive(r.failures, r.reason) for r in details]
    return [decisive([], r) for r in rep.recompiles]


def _size_recompiles(rep: Any) -> list[str]:
    return [text for kind, text in _causes(rep) if kind == "size"]


def _kind_recompiles(rep: Any) -> list[str]:
    return [text for kind, text in _causes(rep) if kind in ("rank", "dtype")]


def _limit_hint(lim: Any) -> str:
    """What to do about a frame at its recompile limit, from the guards that
    failed on the attempt that hit it."""
    kind, text = decisive(lim.failures)
    if getattr(lim, "per_call", False):
        head = f"{lim.where} hit the {limit_setting(lim)}"
        raise_it = (
            f"raise recompile_limit= in its torch.compile call (now {lim.limit}; "
            "torch._dynamo.config.recompile_limit does not apply to it) if more graphs "
            "are expected"
        )
    else:
        head = f"{lim.where} hit {limit_setting(lim)} ({lim.limit})"
        raise_it = f"raise {limit_setting(lim)} (now {lim.limit}) if more graphs are expected"
    if lim.eager_calls:
        head += f" and ran {_n(lim.eager_calls, 'call')} eagerly"
    if kind == "size":
        auto = getattr(lim, "automatic_dynamic", None)
        why = "torch._dynamo.config.automatic_dynamic_shapes is off, " if auto is False else ""
        return (
            f"{head}: a size changes ({text}); {why}torch._dynamo.mark_dynamic(x, dim) or "
            f"torch.compile(dynamic=True) serves every size with one graph; or {raise_it}"
        )
    if kind == "value":
        name, is_global = guarded_name(text)
        where = "global" if is_global else "argument"
        return (
            f"{head}: the Python number `{name}` ({where}) changes ({text}) and each value "
            f"is a constant of its graph; pass it as a tensor, or torch.compile(dynamic=True) "
            f"for an int argument; or {raise_it}"
        )
    if kind in OWN_GRAPH:
        return f"{head}: each {kind} needs a graph of its own ({text}); {raise_it}"
    detail = f" ({text})" if text else ""
    return f"{head}{detail}: {raise_it}"


def _cudagraph_hints(rep: Any) -> list[str]:
    """CUDA graphs recorded again, in "why it recompiled" terms: a changing
    batch size (one graph per size, dynamic or not), or graphs torch could
    not replay; and graphs torch ran without CUDA graphs."""
    cg = getattr(rep, "cudagraphs", None)
    if cg is None or cg.empty:
        return []
    hints = []
    for f in cg.frames:
        if f.for_new_sizes:
            hints.append(
                f"CUDA graphs of {f.frame} re-recorded {_n(f.for_new_sizes, 'time')}: the "
                "batch size changes; pad it to a few fixed sizes (each size records a graph "
                "of its own, and a recompile too unless it is marked dynamic)"
            )
        if f.rerecorded:
            why = f" ({f.why[0]})" if f.why else ""
            hints.append(
                f"CUDA graphs of {f.frame} re-recorded {_n(f.rerecorded, 'time')} because torch "
                f"could not replay them{why}: keep the inputs it treats as static (parameters, "
                "buffers) in place, and clone outputs you keep across calls"
            )
    if cg.overwritten_output:
        at = f" (made at {cg.overwritten_made_at})" if cg.overwritten_made_at else ""
        hints.append(
            f"an output of an earlier CUDA-graph run{at} was read after a later run overwrote "
            "it: clone what you keep across calls (`y = model(x).clone()`), or call "
            "torch.compiler.cudagraph_mark_step_begin() before each step"
        )
    for f in cg.pending_backward:
        hints.append(
            f"CUDA graphs of {f} stayed in warm-up: outputs of an earlier call still wait "
            "for their backward; call backward() each step, detach the outputs or run under "
            "torch.no_grad(), or call torch.compiler.cudagraph_mark_step_begin() before "
            "each step"
        )
    reasons = [s for s in cg.skips if s.reason]
    if reasons:
        s = max(reasons, key=lambda x: x.count)
        at = f" at {s.where}" if s.where else (f" in {s.frame}" if s.frame else "")
        hints.append(
            f"{_n(cg.skipped, 'graph')} ran without CUDA graphs{at}: {s.reason}"
            + (f" (the graph's devices: {', '.join(s.devices)})" if s.devices else "")
        )
    return hints


def _all_lookups(k: int) -> str:
    return "the one cache lookup was a hit" if k == 1 else f"all {k} cache lookups were hits"


def _measured_parts(parts: Any) -> bool:
    """Enough timed calls, their lookup bounded by torch's profiler."""
    return parts is not None and parts.calls >= MIN_LOOKUPS and parts.lookup_bounded


def _lookup_matters(parts: Any) -> bool:
    """-u saves part of the lookup only: worth a hint where the lookup is a
    real share of a call (or where the calls' parts are not known)."""
    if not _measured_parts(parts) or not parts.call_s:
        return True
    if parts.gpu_bound:
        return False  # the GPU's work hides the host's lookup
    return (parts.lookup_s or 0.0) >= LOOKUP_SHARE * parts.call_s


def _overhead_hint(parts: Any, c: Any, error: Any) -> str | None:
    """torch.compile's own work (its wrapper, the lookup) a large share of
    each compiled call: the compiled piece is small."""
    if not _measured_parts(parts) or not parts.call_s or error:
        return None
    if c is not None and c.break_even_calls is not None:
        return None  # compiling pays off here, measured
    if parts.gpu_bound:
        return None  # the GPU's work hides torch.compile's own
    own = (parts.wrapper_s or 0.0) + (parts.lookup_s or 0.0)
    if own < OVERHEAD_SHARE * parts.call_s:
        return None
    return (
        f"{own / parts.call_s:.0%} of each compiled call is torch.compile's own work (its "
        f"wrapper {fmt_s(parts.wrapper_s)}, the cache lookup {fmt_s(parts.lookup_s)}), "
        f"the compiled code {fmt_s(parts.compiled_s)}: compile a larger piece (the loop, or "
        "the model around it) so that one call does more work; --compare shows whether "
        "this cell gains at all"
    )


def _lookup_hint(rep: Any, c: Any, compiled_runs: int) -> str | None:
    """Cache lookups a real share of the run or the cell: -u."""
    if rep.skip_guard_eval_unsafe:
        return None
    if c is not None:
        if not (rep.lookups.per_lookup_s and c.compiled_s) or rep.recompiles:
            return None
        lookups_per_run = (rep.cache_hits + rep.cache_misses) / max(compiled_runs, 1)
        guard_run = rep.lookups.per_lookup_s * lookups_per_run
        share = guard_run / c.compiled_s
        if share < GUARD_SHARE:
            return None
        return (
            f"cache lookups are {share:.0%} of the steady-state run "
            f"({fmt_s(guard_run)} of {fmt_s(c.compiled_s)}): -u "
            "(skip_guard_eval_unsafe) skips most guards and may help, but only once no "
            "further recompiles are needed; otherwise results are silently wrong"
        )
    lk = rep.lookups
    if (
        not lk.seconds
        or rep.error
        or lk.timed < MIN_LOOKUPS
        or not rep.wall_s
        or rep.compiles
        or lk.seconds / rep.wall_s < GUARD_SHARE
    ):
        return None
    return (
        f"cache lookups are {lk.seconds / rep.wall_s:.0%} of this cell "
        f"({fmt_s(lk.seconds)} of {fmt_s(rep.wall_s)}): -u (skip_guard_eval_unsafe) "
        "skips most guards and may help once warmed up, with its risk of silently "
        "wrong results"
    )


def advise(rep: Any) -> list[str]:
    """Hints for one report (with its --compare figures, if any), most useful first."""
    hints: list[str] = []
    for lim in getattr(rep, "recompile_limits", []) or []:
        hints.append(_limit_hint(lim))
    full = rep.tightest_budget
    if full is not None and full.left == 1 and not getattr(rep, "recompile_limits", None):
        hints.append(
            f"{full.where} uses {full.entries} of its {full.limit} cache entries "
            f"({'the ' if full.per_call else ''}{limit_setting(full)}): the next recompile "
            "is its last, after which torch runs every new case eagerly, silently"
        )
    sized = _size_recompiles(rep)
    if sized and rep.stance not in ("eager_then_compile", "aot_eager_then_compile"):
        hints.append(
            f"{len(sized)} recompile{'s' if len(sized) != 1 else ''} from changing shapes "
            f"({sized[0]}): try %%stance eager_then_compile, or "
            "torch._dynamo.mark_dynamic on the changing dimension"
        )
    hints.extend(_cudagraph_hints(rep))
    if not getattr(rep, "recompile_limits", None):
        for c in getattr(rep, "causes", []) or []:
            if c.kind not in ("size", "rank", "dtype"):  # those have their own hint below
                hints.append(str(c))
    kinds = _kind_recompiles(rep)
    if kinds:
        what = "rank" if "rank" in kinds[0].lower() else "dtype"
        hints.append(
            f"{_n(len(kinds), 'recompile')} from a change of {what} ({kinds[0]}): each {what} "
            "needs a graph of its own, and neither dynamic shapes nor eager_then_compile "
            f"help; keep the input's {what} fixed if this recurs"
        )
    c = getattr(rep, "compare", None)
    compiled_runs = len(c.runs.get("compiled", ())) if c is not None else 0
    overhead = _overhead_hint(rep.call_parts, c, rep.error)
    if overhead:
        hints.append(overhead)
    if _lookup_matters(rep.call_parts):
        lookup = _lookup_hint(rep, c, compiled_runs)
        if lookup:
            hints.append(lookup)
    if c is not None:
        if c.break_even_calls is None:
            hints.append(
                f"compiled ({fmt_s(c.compiled_s)}) is not faster than eager "
                f"({fmt_s(c.eager_s)}) here: compiling this cell does not pay off"
            )
        elif c.break_even_calls > compiled_runs:
            hints.append(
                f"compile time ({fmt_s(rep.compile_s)}) is paid back after "
                f"{_n(c.break_even_calls, 'run')} at a {c.speedup:.2f}× speedup; "
                f"this cell ran {compiled_runs}"
            )
    if c is not None and c.eager_peak_bytes and c.compiled_first_peak_bytes:
        ratio = c.compiled_first_peak_bytes / c.eager_peak_bytes
        if ratio >= MEMORY_RATIO:
            hints.append(
                f"the first compiled run peaked at {fmt_bytes(c.compiled_first_peak_bytes)}, "
                f"{ratio:.1f}× the eager run's {fmt_bytes(c.eager_peak_bytes)}: "
                "aot_eager_then_compile runs a first call under AOT eager, which often "
                "needs less"
            )
    if rep.graph_break_details:
        top = max(rep.graph_break_details, key=lambda g: g.count)
        n = rep.graph_break_count
        hints.append(f"{n} graph break{'s' if n != 1 else ''}; top reason: {top.summary}")
    if (
        rep.stance == "default"
        and not rep.skip_guard_eval_unsafe
        and not rep.compiles
        and not rep.cache_misses
        and rep.cache_hits
        and not rep.error
    ):
        hints.append(
            f"{_all_lookups(rep.cache_hits)}, nothing compiled: "
            "warm-up looks done; %stance fail_on_recompile turns a surprise recompile into an error"
        )
    return hints[:MAX_HINTS]


def advise_sweep(result: Any) -> list[str]:
    """Hints for a sweep: the fastest stance and what each costs relative to it."""
    ok = [r for r in result.reports if not r.error]
    if len(ok) < 2:
        return []
    hints = []
    compiled = [r for r in ok if r.compiles]
    eager = next((r for r in ok if r.stance == "force_eager"), None)
    if compiled:
        best = min(compiled, key=lambda r: r.wall_s)
        line = (
            f"cheapest first run among the stances that compiled: {best.stance} "
            f"({fmt_s(best.wall_s)}, {_n(best.compiles, 'compile')}, "
            f"{fmt_s(best.compile_s)} compiling)"
        )
        if eager is not None:
            line += f"; force_eager took {fmt_s(eager.wall_s)}"
        hints.append(line)
    hints.extend(_sweep_memory(ok))
    most = max(ok, key=lambda r: len(r.recompiles))
    if most.recompiles:
        hints.append(f"{most.stance} recompiled {len(most.recompiles)}×: {most.recompiles[0]}")
    return hints[:MAX_HINTS]


def _sweep_memory(reports: list[Any]) -> list[str]:
    """The stance whose first run needs most memory against the least
    (force_eager's eager run is the baseline, said beside them)."""
    measured = [r for r in reports if r.peak_bytes]
    stances = [r for r in measured if r.stance != "force_eager"]
    if len(stances) < 2:
        return []
    low = min(stances, key=lambda r: r.peak_bytes)
    high = max(stances, key=lambda r: r.peak_bytes)
    if high.peak_bytes < MEMORY_RATIO * low.peak_bytes:
        return []
    saved = 1 - low.peak_bytes / high.peak_bytes
    line = (
        f"first-run memory: {low.stance} peaked at {fmt_bytes(low.peak_bytes)}, {saved:.0%} "
        f"below {high.stance} ({fmt_bytes(high.peak_bytes)})"
    )
    eager = next((r for r in measured if r.stance == "force_eager"), None)
    if eager is not None:
        line += f"; eager: {fmt_bytes(eager.peak_bytes)}"
    return [line]
