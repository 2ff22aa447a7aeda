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
:mod:`.profiler` (lookups and memory), :mod:`.recorder` (the hooks and their
windows). The names the rest of stance_magic uses are re-exported here.
"""

from __future__ import annotations

from .backends import (  # noqa: F401
    BACKEND_PACKAGES,
    TORCHSCRIPT_BACKENDS,
    backend_name,
    backend_problem,
    is_test_backend,
    list_backends,
    usable_backends,
)
from .breaks import (  # noqa: F401
    BreakType,
    GraphBreakEvent,
    break_summary,
    graph_break_type,
    parse_graph_break,
)
from .frames import (  # noqa: F401
    NOTEBOOK,
    describe_callable,
    is_user_file,
    resume_parts,
)
from .profiler import (  # noqa: F401
    CACHE_LOOKUP_EVENT,
    COMPILED_REGION_EVENT,
    CPU_MEMORY_METHOD,
    CUDA_MEMORY_METHOD,
    CellProfiler,
    MemoryFigure,
    ProfilerBusy,
    _quiet_fd2,
)
from .recorder import (  # noqa: F401
    MISS_COMPILED,
    MISS_EAGER,
    MISS_LIMIT,
    MISS_NONE,
    MISS_REFUSED,
    SAMPLE_EVERY,
    SAMPLE_FIRST,
    MissEvent,
    Recorder,
    Target,
    Window,
    _BreakHandler,
)
from .records import (  # noqa: F401
    CompileRecord,
    FrameBudget,
    LimitHit,
    RecordInfo,
    cache_entries,
    deque_limit,
    dynamo_config_flag,
    first_line,
    is_backward_compile,
    is_frame_compile,
    is_module_wrapper,
    reached_cell,
    read_record,
    recompile_limit_name,
    record_phases,
    record_total_s,
    record_user_frames,
    split_recompile_reason,
)
from .releases import (  # noqa: F401
    BACKEND_LINKS,
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
    inline_wrapped,
    innermost_backend,
)
from .shapes import (  # noqa: F401
    WHY_AUTOMATIC,
    WHY_DYNAMIC_TRUE,
    WHY_MARKED,
    WHY_THEN_COMPILE,
    GraphShapes,
)
from .stances import (  # noqa: F401
    COMPILED_REGION_MESSAGE,
    DELAYED_STANCES,
    STANCE_SINCE,
    CompiledRegionError,
    missing_stance_hint,
    no_disk_caches,
    reset_compiled_code,
    set_stance,
    supported_stances,
    torch_stance,
)
from .version import (  # noqa: F401
    MIN_TORCH,
    TESTED_UP_TO,
    TorchSupportError,
    _torch_str,
    require_torch,
    torch_problem,
    torch_version,
)
