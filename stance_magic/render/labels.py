"""Every label a report shows, in one place: the rows' names, the tables'
column headers, the compile phases', caches' and kernel parts' names, the
words for how a call ended, and where the docs explain each row.

The section modules use these names, never the strings: renaming a row is a
change here alone (the docs link, the brief report's fold and the tests read
the same constant).
"""

from __future__ import annotations

# -- the rows of a cell report, in their order ---------------------------------

STANCE = "stance"
WALL = "wall time"
COMPILE_TIME = "compile time"
COMPILES = "compiles"
TRACING = "tracing by function"
COMPILE_CACHES = "compile caches"
RECOMPILES = "recompiles"
RECOMPILE_LIMIT = "recompile limit"
RECOMPILE_BUDGET = "recompile budget"
DYNAMIC_SHAPES = "dynamic shapes"
WHY_RECOMPILED = "why it recompiled"
#: the same row where every recompile was refused (fail_on_recompile): none happened
WHY_WOULD_RECOMPILE = "why it would recompile"
GRAPH_BREAKS = "graph breaks"
CUDA_GRAPHS = "CUDA graphs"
#: Dynamo's code cache (each frame's cache entries of compiled code), its
#: row the lookups that found an entry and those that did not (``2000 hits,
#: 0 misses``): "code cache" wherever it is meant, as against the "compile
#: caches" (AOTAutograd's and the FX graph cache); ``hits/misses`` as a
#: table's column, ``cache_hits`` and ``cache_misses`` in the CSV.
CACHE_HITS = "code cache"
#: The time Dynamo spends finding a call's compiled code (building the
#: frame's locals and running the guards): "cache lookups" wherever it is
#: shown (the row, the charts), "lookups" as a table's column, ``lookup_s``
#: in the CSV; never "guards" (that is only a part of it).
CACHE_LOOKUPS = "cache lookups"
LOOKUPS_COLUMN = "lookups"
COMPILED_CALL = "a compiled call"
#: A device's memory row (``memory (cuda:0)``).
MEMORY = "memory ({device})"
#: The most memory a run held above its start: "peak memory" wherever it is
#: shown (the comparison's row, the history's, sweep's and ranks' column,
#: the charts), ``peak_bytes`` in the CSV and JSON; never "peak mem" or
#: "memory peaks".
PEAK_MEMORY = "peak memory"
#: A cell's wall time less its compile time and its cache lookups (the code
#: running, compiled or eager, and all else the cell did): "execution" as
#: every chart's segment and summary names it; never "rest of the cell".
EXECUTION = "execution"
EAGER_FALLBACKS = "eager fallbacks"
REFUSED_RECOMPILES = "refused recompiles"
CALLS = "calls"
#: --compare -m: the peak memory of the eager, first and steady compiled runs
MEMORY_PEAKS = PEAK_MEMORY
EAGER_STEADY = "eager (steady)"
COMPILED_STEADY = "compiled (steady)"
SPEEDUP = "speedup"
BREAK_EVEN = "break-even"
ERROR = "error"

#: What --trace and --timeline wrote, as the report's rows name it (the
#: trace's row names its compile ids too).
TRACE = "trace ({ids})"
TLPARSE = "tlparse"
TIMELINE = "timeline"

#: Where the docs explain how each figure is measured (linked from the
#: report's folded rows, so no report repeats the explanation).
DOCS = "https://github.com/stance-magic/stance_magic/blob/main/docs/"
#: The page (and its section) explaining a row, by the row's label.
ROW_DOCS = {
    COMPILE_TIME: "measurement.md",
    COMPILES: "compile-time.md",
    TRACING: "compile-time.md#where-the-compile-time-went-by-function",
    COMPILE_CACHES: "compile-time.md",
    RECOMPILES: "recompiles.md",
    RECOMPILE_LIMIT: "recompiles.md",
    RECOMPILE_BUDGET: "recompiles.md",
    WHY_RECOMPILED: "recompiles.md",
    WHY_WOULD_RECOMPILE: "recompiles.md",
    DYNAMIC_SHAPES: "recompiles.md",
    GRAPH_BREAKS: "graph-breaks.md",
    CUDA_GRAPHS: "cuda.md",
    CACHE_HITS: "measurement.md",
    CACHE_LOOKUPS: "call-anatomy.md#how-it-is-measured",
    COMPILED_CALL: "call-anatomy.md",
    CALLS: "measurement.md",
    EAGER_FALLBACKS: "measurement.md",
    REFUSED_RECOMPILES: "measurement.md",
}

#: How the text report says where the rest is.
MORE_TEXT = "more with -v"


def _more(n: int) -> str:
    """Where the ``n`` detail lines a row folds are."""
    return f"and {n} more (all in the report's data and %stance history --json)"


# -- the names inside the rows ---------------------------------------------------

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

#: How the report names Inductor's parts that torch's records time (see
#: ``probe.KERNEL_FIELDS``).
KERNEL_LABELS = {
    "kernel_compile": "kernel compilation (compile workers: Triton on a GPU, C++ on a CPU)",
    "autotune": "autotuning (max-autotune's benchmarks)",
    "runtime_autotune": "Triton autotuning",
    "cudagraph_record": "CUDA graph recording",
}

#: Who sets the pace of a compiled call on a GPU (CallParts.gpu_bound).
PACE = {
    True: "the GPU sets the pace",
    False: "the GPU waits for the host's launches",
    None: "neither side clearly sets the pace",
}

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
#: How a call ended, in words (in the account's and the headline's order).
_RAN = {"eager": "ran eagerly", "refused": "refused", "failed": "raised"}

# -- the tables' column headers ----------------------------------------------------

#: The history's columns: (the summary row's key, the header).
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
    ("lookup_s", LOOKUPS_COLUMN),
    ("error", "error"),
)

#: Shown when some cell of the history measured memory.
MEMORY_COLUMN = ("peak_bytes", PEAK_MEMORY)
#: Shown when some frame of the history recompiled: the recompile budget of
#: the cell's fullest frame (its cache entries of the limit, ``3/8``).
BUDGET_COLUMN = ("budget", "budget")

#: Shown when some cell of the history compiled with Inductor's caches: their
#: state and the FX graph cache's hits/misses (``warm 1/0``).
CACHE_COLUMNS = (("caches", "caches (FX)"),)

#: The ranks table's headers, by the figure each column shows (some columns
#: only where a rank has something in them).
RANK_COLUMNS = {
    "rank": "rank",
    "host": "host",
    "stance": "stance",
    "wall_s": "wall",
    "compile_s": "compile",
    "compiles": "compiles",
    "recompiles": "recompiles",
    "graph_breaks": "breaks",
    "hits_misses": "hits/misses",
    "lookup_s": LOOKUPS_COLUMN,
    "peak_bytes": PEAK_MEMORY,
    "refused_recompiles": "refused",
    "error": "error",
}

#: The graph-break list's columns (``stance_magic.breaks()`` as a table).
BREAK_COLUMNS = ("breaks", "cause (and hint)", "where", "compiled after", "cells", "docs")
