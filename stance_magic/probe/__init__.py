"""Every torch internal that stance_magic touches, in one place.

The rest of stance_magic talks to torch only through this package. Each
private API is looked up behind a check of the installed torch, so a torch
upgrade that moves one of them breaks a module here with a clear message
(:class:`TorchSupportError`), never a user's cell.

Nothing here imports torch at import time: ``import stance_magic`` stays
light, and torch is imported the first time a function here needs it.

One module per torch concern: :mod:`.version` (the version gate, re-exported
here), :mod:`.releases` (every difference between torch releases),
:mod:`.stances`, :mod:`.backends`, :mod:`.frames` (what a call called, how a
frame is named), :mod:`.records` (compile records), :mod:`.breaks` (graph
breaks and torch's registry), :mod:`.shapes` (dynamic dimensions),
:mod:`.profiler` (lookups and memory), :mod:`.device` (CUDA and the clocks),
:mod:`.cudagraphs` (CUDA graphs recorded, replayed and skipped),
:mod:`.recorder` (the hooks and their windows). The names the rest of
stance_magic uses are handed on here (and only those: a test that needs
another reads it from its module).
"""

from __future__ import annotations

from .backends import (
    backend_problem,
    is_test_backend,
    list_backends,
    usable_backends,
)
from .breaks import (
    break_summary,
    graph_break_type,
)
from .caches import watch as cache_watch
from .cudagraphs import CudagraphWindow
from .cudagraphs import overwritten_output as cudagraph_overwritten_output
from .cudagraphs import user_line as cudagraph_user_line
from .cudagraphs import watch as cudagraph_watch
from .device import cuda_in_use, sync_if_cuda
from .frames import (
    NOTEBOOK,
    is_user_file,
    raised_from,
    resume_parts,
)
from .monitoring import EX_CALLS_SEEN
from .profiler import (
    CACHE_LOOKUP_EVENT,
    COMPILED_REGION_EVENT,
    CPU_MEMORY_METHOD,
    CellProfiler,
    MemoryFigure,
    ProfilerBusy,
    ProfilerWatch,
    quiet_fd2,
)
from .recorder import (
    CALL_CACHED,
    CALL_COMPILED,
    CALL_EAGER,
    CALL_FAILED,
    CALL_OUTCOMES,
    CALL_REFUSED,
    MISS_EAGER,
    MISS_LIMIT,
    MISS_REFUSED,
    SAMPLE_EVERY,
    SAMPLE_FIRST,
    WHY_AOT,
    WHY_AOT_GUARDS,
    WHY_COMPILE_ERROR,
    WHY_COMPILE_FAILED,
    WHY_EAGER_ON_RECOMPILE,
    WHY_FAIL_ON_RECOMPILE,
    WHY_FIRST_CALL,
    WHY_FORCE_EAGER,
    WHY_LIMIT,
    WHY_NOTHING_CACHED,
    WHY_OWN_ERROR,
    WHY_PRECOMPILED,
    WHY_SKIPPED,
    WHY_UNSAFE,
    Recorder,
    Target,
    Window,
)
from .records import (
    CompileRecord,
    FrameBudget,
    LimitHit,
    cache_entries,
    deque_limit,
    dynamo_config_flag,
    first_line,
    is_backward_compile,
    is_frame_compile,
    reached_cell,
    record_total_s,
    record_user_frames,
    split_recompile_reason,
)
from .releases import (
    DELAYED_CALLBACK_LINKED_SINCE,
    GUARD_SOURCE_SINCE,
    INDEX_ERROR_UNWRAPPED_SINCE,
    PER_CALL_RECOMPILE_LIMIT_SINCE,
    PROFILER_EMPTY_LOOKUPS_UNTIL,
    RECOMPILE_USER_CONTEXTS_SINCE,
    RECORD_STACK_TRACE_SINCE,
    REFUSAL_GUARDS_SINCE,
    TESTING_HOOK_BUILDER_SINCE,
    callback_ref,
    delayed_callback_unlinked,
    delayed_stance_warning,
)
from .stances import (
    COMPILED_REGION_MESSAGE,
    DELAYED_STANCES,
    CompiledRegionError,
    missing_stance_hint,
    no_disk_caches,
    reset_compiled_code,
    set_stance,
    supported_stances,
    torch_stance,
)
from .version import (
    MIN_TORCH,
    TESTED_UP_TO,
    TorchSupportError,
    torch_problem,
    torch_str,
    torch_version,
)
from .watch import Watch, Watched
from .watch import uninstall_all as uninstall_watches

__all__ = [
    "CACHE_LOOKUP_EVENT",
    "CALL_CACHED",
    "CALL_COMPILED",
    "CALL_EAGER",
    "CALL_FAILED",
    "CALL_OUTCOMES",
    "CALL_REFUSED",
    "COMPILED_REGION_EVENT",
    "COMPILED_REGION_MESSAGE",
    "CPU_MEMORY_METHOD",
    "DELAYED_CALLBACK_LINKED_SINCE",
    "DELAYED_STANCES",
    "EX_CALLS_SEEN",
    "GUARD_SOURCE_SINCE",
    "INDEX_ERROR_UNWRAPPED_SINCE",
    "MIN_TORCH",
    "MISS_EAGER",
    "MISS_LIMIT",
    "MISS_REFUSED",
    "NOTEBOOK",
    "PER_CALL_RECOMPILE_LIMIT_SINCE",
    "PROFILER_EMPTY_LOOKUPS_UNTIL",
    "RECOMPILE_USER_CONTEXTS_SINCE",
    "RECORD_STACK_TRACE_SINCE",
    "REFUSAL_GUARDS_SINCE",
    "SAMPLE_EVERY",
    "SAMPLE_FIRST",
    "TESTED_UP_TO",
    "TESTING_HOOK_BUILDER_SINCE",
    "WHY_AOT",
    "WHY_AOT_GUARDS",
    "WHY_COMPILE_ERROR",
    "WHY_COMPILE_FAILED",
    "WHY_EAGER_ON_RECOMPILE",
    "WHY_FAIL_ON_RECOMPILE",
    "WHY_FIRST_CALL",
    "WHY_FORCE_EAGER",
    "WHY_LIMIT",
    "WHY_NOTHING_CACHED",
    "WHY_OWN_ERROR",
    "WHY_PRECOMPILED",
    "WHY_SKIPPED",
    "WHY_UNSAFE",
    "CellProfiler",
    "CompileRecord",
    "CompiledRegionError",
    "CudagraphWindow",
    "FrameBudget",
    "LimitHit",
    "MemoryFigure",
    "ProfilerBusy",
    "ProfilerWatch",
    "Recorder",
    "Target",
    "TorchSupportError",
    "Watch",
    "Watched",
    "Window",
    "backend_problem",
    "break_summary",
    "cache_entries",
    "cache_watch",
    "callback_ref",
    "cuda_in_use",
    "cudagraph_overwritten_output",
    "cudagraph_user_line",
    "cudagraph_watch",
    "delayed_callback_unlinked",
    "delayed_stance_warning",
    "deque_limit",
    "dynamo_config_flag",
    "first_line",
    "graph_break_type",
    "is_backward_compile",
    "is_frame_compile",
    "is_test_backend",
    "is_user_file",
    "list_backends",
    "missing_stance_hint",
    "no_disk_caches",
    "quiet_fd2",
    "raised_from",
    "reached_cell",
    "record_total_s",
    "record_user_frames",
    "reset_compiled_code",
    "resume_parts",
    "set_stance",
    "split_recompile_reason",
    "supported_stances",
    "sync_if_cuda",
    "torch_problem",
    "torch_stance",
    "torch_str",
    "torch_version",
    "uninstall_watches",
    "usable_backends",
]
