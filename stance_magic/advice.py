"""At most three one-line hints per cell, each from a number measured in it."""

from __future__ import annotations

import re
from typing import Any

from .render import fmt_s

MAX_HINTS = 3
#: Guard evaluation above this share of the steady-state time earns a hint.
GUARD_SHARE = 0.10
#: ... over at least this many lookups (a cell of one call says little).
MIN_LOOKUPS = 10

#: A dimension changed its size: dynamic shapes can serve it with one graph.
_SIZE = re.compile(r"size mismatch at index|size\(\)", re.I)
#: The rank or the dtype changed: no dynamic dimension covers that.
_KIND = re.compile(r"rank mismatch|dtype mismatch", re.I)


def _size_recompiles(rep: Any) -> list[str]:
    return [r for r in rep.recompiles if _SIZE.search(r) and not _KIND.search(r)]


def _kind_recompiles(rep: Any) -> list[str]:
    return [r for r in rep.recompiles if _KIND.search(r)]


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


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
                f"guard evaluation is {share:.0%} of the steady-state run "
                f"({fmt_s(guard_run)} of {fmt_s(rep.compiled_s)}): -u "
                "(skip_guard_eval_unsafe) may help, but only once no further "
                "recompiles are needed; otherwise results are silently wrong"
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
            f"guard evaluation is {rep.guard_s / rep.wall_s:.0%} of this cell "
            f"({fmt_s(rep.guard_s)} of {fmt_s(rep.wall_s)}): -u (skip_guard_eval_unsafe) "
            "may help once warmed up, with its risk of silently wrong results"
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
    most = max(ok, key=lambda r: len(r.recompiles))
    if most.recompiles:
        hints.append(f"{most.stance} recompiled {len(most.recompiles)}×: {most.recompiles[0]}")
    return hints[:MAX_HINTS]
