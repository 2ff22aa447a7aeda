"""``--compare``'s figures and ``--sweep``'s diffs, from the runs the session
timed (:mod:`stance_magic.session.compare`): the steady state of each side,
the speedup, after how many runs the compile pays for itself, the warnings
about the spread, and each stance of a sweep against default."""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

from ..render.labels import PEAK_MEMORY
from ..report import CellReport, Comparison
from ..report.results import Steady

__all__ = ["against_default", "break_even", "comparison", "steady"]

#: Spread above which a steady-state figure is flagged as not to be trusted:
#: interquartile range over median (torch.utils.benchmark flags 10 %; the
#: range stands in below four steady runs), or slowest over fastest run
#: (%timeit warns at 4x).
IQR_LIMIT = 0.10
RATIO_LIMIT = 4.0


def steady(runs: Sequence[float], what: str, warmup: int = 1) -> Steady:
    """Steady state of ``runs``: the first ``warmup`` runs excluded (all
    but the last if that leaves none)."""
    runs = list(runs)
    warmup = min(max(warmup, 1), len(runs) - 1) if len(runs) > 1 else 0
    kept = runs[warmup:]
    med = statistics.median(kept)
    if len(kept) >= 4:
        q = statistics.quantiles(kept, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = max(kept) - min(kept)
    warning = None
    if len(runs) == 1:
        warning = f"{what}: one run only, no warm-up excluded (use --repeat 5 or more)"
    elif len(kept) >= 2 and med > 0 and iqr / med > IQR_LIMIT:
        # under four runs there are no quartiles: the range stands in
        spread = "IQR" if len(kept) >= 4 else "range"
        warning = (
            f"{what}: spread too wide to trust ({spread} {iqr / med:.0%} of the median "
            f"over {len(kept)} runs)"
        )
    elif min(kept) > 0 and max(kept) / min(kept) > RATIO_LIMIT:
        warning = f"{what}: the slowest run took {max(kept) / min(kept):.1f}× the fastest"
    return Steady(kept, med, min(kept), max(kept), iqr, len(kept), warning)


def break_even(
    warmup_total: float, compiled: float, eager: float, warmup_runs: int = 1
) -> int | None:
    """Runs after which compiling has paid for itself, or None if it never does.

    The first ``warmup_runs`` compiled runs (the ones that compiled) cost
    ``warmup_total`` together; after k >= warmup_runs runs the compiled cell
    has cost ``warmup_total + (k - warmup_runs) * compiled`` and the eager one
    ``k * eager``. The smallest such k where compiled is no dearer is
    ``ceil((warmup_total - warmup_runs * compiled) / (eager - compiled))``.
    """
    if eager <= compiled:
        return None
    k = math.ceil((warmup_total - warmup_runs * compiled) / (eager - compiled))
    return max(warmup_runs, k, 1)


def comparison(
    eager_runs: list[float],
    compiled_runs: list[float],
    compiled_in: list[bool],
    *,
    stance_name: str,
    compile_s: float,
    memory: bool,
    eager_peak: int | None = None,
    first_peak: int | None = None,
    steady_peak: int | None = None,
    synchronized: bool = False,
) -> tuple[Comparison, Steady, Steady, list[str], list[str]]:
    """``--compare``'s figures from its runs: (the comparison, eager's and the
    compiled side's steady state, the warnings, the notes). ``compiled_in``
    says which compiled runs compiled something; ``compile_s`` is the window's
    compile time."""
    repeat = len(compiled_runs)
    notes: list[str] = []
    if memory:
        notes.append(
            f"{PEAK_MEMORY} (-m): eager and steady compiled from one extra run each; "
            "the first compiled run was timed with memory measuring on"
        )
    # Warm-up: every run up to the last one that compiled (eager_then_compile
    # compiles on its second run, a recompile can come later still).
    warmup = max((i + 1 for i, c in enumerate(compiled_in) if c), default=1)
    se = steady(eager_runs, "eager")
    sc = steady(compiled_runs, "compiled", warmup=warmup)
    warnings = [w for w in (se.warning, sc.warning) if w]
    if repeat == 1:
        # No steady state: take the compiled run without its compile time.
        sc.median = max(compiled_runs[0] - compile_s, 0.0)
        warnings = [
            "one run each: steady state estimated as the compiled run minus its compile "
            "time (use --repeat 5 or more)"
        ]
    elif warmup >= repeat:
        warnings.append(
            f"the last of the {repeat} compiled runs still compiled: no steady state "
            "yet (use a larger --repeat)"
        )
    if not any(compiled_in) and stance_name == "eager_then_compile" and repeat < 3:
        warnings.append(
            "eager_then_compile runs the first call eagerly and compiles on the second: "
            "use --repeat 3 or more to see the compiled code"
        )
    w = min(warmup, len(compiled_runs))
    made = Comparison(
        eager_s=se.median,
        compiled_s=sc.median,
        speedup=se.median / sc.median if sc.median > 0 else None,
        break_even_calls=break_even(sum(compiled_runs[:w]), sc.median, se.median, w),
        runs={"eager": eager_runs, "compiled": compiled_runs},
        eager_peak_bytes=eager_peak,
        compiled_first_peak_bytes=first_peak,
        compiled_steady_peak_bytes=steady_peak,
        synchronized=synchronized,
    )
    return made, se, sc, warnings, notes


def against_default(reports: Sequence[CellReport]) -> list[Any]:
    """Each other stance's run of a sweep against default's: a
    :class:`~stance_magic.report.CellDiff` each (``%stance diff default
    STANCE`` shows one whole); none without a default run."""
    from .diff import diff_cells

    base = next((r for r in reports if r.stance_label == "default"), None)
    if base is None:
        return []
    return [diff_cells(base, r) for r in reports if r is not base]
