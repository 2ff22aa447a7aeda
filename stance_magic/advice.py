"""At most three one-line hints per cell, each from a number measured in it."""

from __future__ import annotations

import re
from typing import Any

from .text import fmt_bytes, fmt_s
from .text import plural as _n

MAX_HINTS = 3
#: Guard evaluation above this share of the steady-state time earns a hint.
GUARD_SHARE = 0.10
#: ... over at least this many lookups (a cell of one call says little).
MIN_LOOKUPS = 10
#: A first run peaking this many times above another's earns a memory hint.
MEMORY_RATIO = 1.25

#: A dimension changed its size: dynamic shapes can serve it with one graph.
_SIZE = re.compile(r"size mismatch at index|size\(\)", re.I)
#: The rank or the dtype changed: no dynamic dimension covers that.
_KIND = re.compile(r"rank mismatch|dtype mismatch", re.I)


def _size_recompiles(rep: Any) -> list[str]:
    return [r for r in rep.recompiles if _SIZE.search(r) and not _KIND.search(r)]


def _kind_recompiles(rep: Any) -> list[str]:
    return [r for r in rep.recompiles if _KIND.search(r)]


def _all_lookups(k: int) -> str:
    return "the one cache lookup was a hit" if k == 1 else f"all {k} cache lookups were hits"


def advise(rep: Any, compare: Any = None) -> list[str]:
    """Hints for one report (and its --compare result), most useful first."""
    hints: list[str] = []
    sized = _size_recompiles(rep)
    if sized and rep.stance not in ("eager_then_compile", "aot_eager_then_compile"):
        hints.append(
            f"{len(sized)} recompile{'s' if len(sized) != 1 else ''} from changing shapes "
            f"({sized[0]}): try %%stance eager_then_compile, or "
            "torch._dynamo.mark_dynamic on the changing dimension"
        )
    kinds = _kind_recompiles(rep)
    if kinds:
        what = "rank" if "rank" in kinds[0].lower() else "dtype"
        hints.append(
            f"{_n(len(kinds), 'recompile')} from a change of {what} ({kinds[0]}): each {what} "
            "needs a graph of its own, and neither dynamic shapes nor eager_then_compile "
            f"help; keep the input's {what} fixed if this recurs"
        )
    if compare is not None and rep.guard_per_call_s and rep.compiled_s:
        runs = max(len(compare.compiled_runs), 1)
        lookups_per_run = (rep.cache_hits + rep.cache_misses) / runs
        guard_run = rep.guard_per_call_s * lookups_per_run
        share = guard_run / rep.compiled_s
        if share >= GUARD_SHARE and not rep.recompiles and not rep.skip_guard_eval_unsafe:
            hints.append(
                f"cache lookups (guards) are {share:.0%} of the steady-state run "
                f"({fmt_s(guard_run)} of {fmt_s(rep.compiled_s)}): -u "
                "(skip_guard_eval_unsafe) skips most guards and may help, but only once no "
                "further recompiles are needed; otherwise results are silently wrong"
            )
    elif (
        compare is None
        and rep.guard_s
        and not rep.error
        and rep.guard_lookups_timed >= MIN_LOOKUPS
        and rep.wall_s
        and rep.guard_s / rep.wall_s >= GUARD_SHARE
        and not rep.compiles
        and not rep.skip_guard_eval_unsafe
    ):
        hints.append(
            f"cache lookups (guards) are {rep.guard_s / rep.wall_s:.0%} of this cell "
            f"({fmt_s(rep.guard_s)} of {fmt_s(rep.wall_s)}): -u (skip_guard_eval_unsafe) "
            "skips most guards and may help once warmed up, with its risk of silently "
            "wrong results"
        )
    if compare is not None:
        runs = len(compare.compiled_runs)
        if rep.break_even_calls is None:
            hints.append(
                f"compiled ({fmt_s(rep.compiled_s)}) is not faster than eager "
                f"({fmt_s(rep.eager_s)}) here: compiling this cell does not pay off"
            )
        elif rep.break_even_calls > runs:
            hints.append(
                f"compile time ({fmt_s(rep.compile_s)}) is paid back after "
                f"{rep.break_even_calls} runs at a {rep.speedup:.2f}× speedup; "
                f"this cell ran {runs}"
            )
    if compare is not None and rep.eager_peak_bytes and rep.compiled_first_peak_bytes:
        ratio = rep.compiled_first_peak_bytes / rep.eager_peak_bytes
        if ratio >= MEMORY_RATIO:
            hints.append(
                f"the first compiled run peaked at {fmt_bytes(rep.compiled_first_peak_bytes)}, "
                f"{ratio:.1f}× the eager run's {fmt_bytes(rep.eager_peak_bytes)}: "
                "aot_eager_then_compile runs a first call under AOT eager, which often "
                "needs less"
            )
    if rep.graph_break_details:
        top = max(rep.graph_break_details, key=lambda g: g.count)
        n = sum(g.count for g in rep.graph_break_details)
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
