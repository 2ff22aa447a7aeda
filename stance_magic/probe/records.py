"""torch's compile records (``CompilationMetrics``): what kind each is, its
phases and total, the recompile limit it hit, cache entries and limits."""

from __future__ import annotations

import functools
import itertools
import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from ..place import Place
from .frames import _describe_frame, keep_user_frames
from .releases import RECORD_STACK_TRACE_SINCE
from .shapes import GraphShapes
from .version import _eval_frame, require_torch, torch_version


@dataclass
class LimitHit:
    """A frame that reached torch's recompile limit: torch runs it eagerly
    from then on whenever none of its cache entries matches."""

    #: (name, file, line) of the frame, as the report names it
    frame: tuple[str, str, int | None]
    #: torch's config name (``recompile_limit``, ``accumulated_recompile_limit``)
    config: str
    limit: int | None
    compile_id: str | None = None
    #: the limit is the torch.compile call's own ``recompile_limit=``, not
    #: torch._dynamo.config's (see releases.PER_CALL_RECOMPILE_LIMIT_SINCE)
    per_call: bool = False


@dataclass
class FrameBudget:
    """A frame's cache entries against torch's recompile limit, at the end of
    a window: torch stops compiling the frame when they reach the limit."""

    frame: tuple[str, str, int | None]
    entries: int
    limit: int | None
    config: str
    #: ``limit`` is the torch.compile call's own ``recompile_limit=``
    per_call: bool = False


@dataclass
class RecordInfo:
    """What the recorder learnt about one compile record while it was made."""

    module: tuple[str, str, int | None] | None = None
    backend: str | None = None
    #: compiled while a call ran eagerly (eager_then_compile's first call)
    during_eager_call: bool = False
    #: calls eager_then_compile had seen of this frame when it compiled
    example_calls: int | None = None
    #: the stance torch had when it compiled (the block's, or one its code set)
    stance: str | None = None
    #: the frame whose lookup missed, for a record torch wrote without a
    #: code name (the one that hit the recompile limit)
    frame: tuple[str, str, int | None] | None = None
    #: the recompile limit this attempt hit (torch then ran the frame eagerly)
    limit: LimitHit | None = None
    #: every cache entry's failed guard, as torch listed them before recompiling
    guard_failures: list[str] = field(default_factory=list)
    #: the guards of the code's precompiled frames (caching_precompile) that
    #: failed on this frame's locals, as torch words them: why it was traced
    precompile_failures: list[str] = field(default_factory=list)
    #: AOTAutograd ran in this compile (False: the backend never used it)
    aot_autograd: bool | None = None
    #: an exception was propagating when torch wrote the record: the compile
    #: did not finish (a backend raised, the cell was interrupted)
    exception: str | None = None
    #: the mark left on that exception (see :func:`mark_unwinding`)
    unwinding: int | None = None
    #: that exception reached the caller of the compiled function (the call
    #: raised it: see Recorder._resolve), caught there or not
    reached_caller: bool = False
    #: the code object compiled (torch's _compile had it), for its cache entries
    code: Any = field(default=None, repr=False, compare=False)
    #: the graph's inputs as handed to the backend (None: no graph reached one)
    shapes: GraphShapes | None = None
    #: the user's frames that led to this compile, innermost (the line that
    #: called the compiled function) first: (name, file, line)
    user_stack: list[tuple[str, str, int]] = field(default_factory=list)
    #: torch.compile(...).aot_compile(...) wrote it: "aot_compile" (the
    #: record that stands for the whole, named by :attr:`frame`) or "aot_compile
    #: part" (a further record of the same; not counted again)
    aot: str | None = None
    #: the aot compile's seconds (torch's span over its records), whether a
    #: graph reached the backend, and why it failed
    aot_seconds: float | None = None
    aot_graph: bool = False
    aot_failed: str | None = None
    #: the functions Dynamo traced for this frame, as torch's dynamo_profiler
    #: timed them (empty: it was off, or this torch has none; see probe.tracing)
    traced: list[Any] = field(default_factory=list, repr=False, compare=False)


#: The attribute of an exception that names the compile records torch wrote
#: while it unwound (:func:`mark_unwinding`).
_UNWOUND_ATTR = "_stance_magic_unwound_records"
_marks = itertools.count(1)


#: A compile's exclusive phases, in order: the keys of every phase breakdown
#: (a record's, a report's ``compile_breakdown``, its ``<phase>_s`` columns,
#: the render's labels). The last is what the others leave of the total.
PHASES = ("dynamo", "aot_autograd", "backend", "codegen", "other")


def mark_unwinding(info: RecordInfo, exc: BaseException | None) -> None:
    """Note on ``exc``, the exception torch is unwinding while it writes a
    compile record, that it passed through this record (``info``).

    The record keeps the type torch caught (``fail_type``), which is not
    always the type that reaches the user: torch rewraps errors outside its
    own list in an ``InternalTorchDynamoError`` (which ones changes between
    releases, see ``releases.INDEX_ERROR_UNWRAPPED_SINCE``), and a frame whose
    compile fails softly runs eagerly while a later error of the same type
    may end the cell. The exception object itself is what tells; exceptions
    take no weak reference, and holding it would hold its traceback, so a
    number is left on it instead (torch leaves attributes on its exceptions
    too).
    """
    if exc is None:
        return
    mark = next(_marks)
    try:
        marks = getattr(exc, _UNWOUND_ATTR, ())
        setattr(exc, _UNWOUND_ATTR, (*marks, mark))
    except Exception:  # an exception that takes no attribute: nothing to tell
        return
    info.unwinding = mark


def reached_cell(info: RecordInfo, error: BaseException | None) -> bool:
    """Whether the exception torch unwound while it wrote this record is the
    cell's ``error``, or the cause it was raised from (``raise ... from``)."""
    if info.unwinding is None or error is None:
        return False
    seen: set[int] = set()
    exc: BaseException | None = error
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if info.unwinding in getattr(exc, _UNWOUND_ATTR, ()):
            return True
        exc = exc.__cause__
    return False


def _example_calls(rec: Any) -> int | None:
    """Calls eager_then_compile had seen of a record's frame when it compiled."""
    inputs = getattr(_eval_frame(), "_EXAMPLE_INPUTS", None)
    if not inputs:
        return None
    key = f"{getattr(rec, 'co_filename', '')}{getattr(rec, 'co_firstlineno', '')}"
    seen = inputs.get(key)
    return len(seen) if seen is not None else None


def is_module_wrapper(rec: Any) -> bool:
    """torch.compile(module) compiles a wrapper frame around the module call."""
    filename = getattr(rec, "co_filename", None) or ""
    return getattr(rec, "co_name", None) == "inner" and filename.endswith(
        ("_dynamo/external_utils.py",)
    )


def record_phases(rec: Any, aot_autograd: bool | None = None) -> dict[str, float]:
    """Exclusive compile phases of one CompilationMetrics record, in seconds.

    torch's cumulative fields nest (Dynamo contains AOTAutograd contains
    Inductor contains code generation); they are unnested here so that the
    phases add up to the record's total. ``backend`` is Inductor's own time
    without code generation, or the whole backend call for a backend that
    does not go through AOTAutograd (``eager``, a user's callable).

    ``aot_autograd=False`` says AOTAutograd never ran in this compile (the
    recorder saw it build no dispatcher): torch's
    ``aot_autograd_cumulative_compile_time_us`` then times the whole backend
    call, which is the backend's time, not AOTAutograd's. But for an
    AOTAutograd cache hit (the record counts one): AOTAutograd then loads
    its compiled graphs without building a dispatcher, Inductor times
    nothing, and that time is AOTAutograd's.
    """

    def us(name: str) -> float:
        v = getattr(rec, name, None)
        return (v or 0) / 1e6

    total = record_total_s(rec)
    inductor = us("inductor_cumulative_compile_time_us")
    codegen = min(us("inductor_code_gen_cumulative_compile_time_us"), inductor)
    if getattr(rec, "is_forward", True) is False:
        # A lazily compiled backward graph: AOTAutograd (and Inductor under it).
        dynamo, aot, backend = 0.0, total - inductor, inductor - codegen
    else:
        dynamo_total = min(us("dynamo_cumulative_compile_time_us") or total, total)
        aot_total = us("aot_autograd_cumulative_compile_time_us")
        aot_hit = (getattr(rec, "aotautograd_local_cache_hit_count", 0) or 0) + (
            getattr(rec, "aotautograd_remote_cache_hit_count", 0) or 0
        )
        if aot_total and aot_autograd is False and not aot_hit:
            backend_total = min(aot_total, dynamo_total)
            aot = 0.0
            backend = backend_total - codegen
        elif aot_total:
            backend_total = min(aot_total, dynamo_total)
            aot = backend_total - inductor
            backend = inductor - codegen
        else:
            backend_total = min(getattr(rec, "backend_compile_time_s", None) or 0.0, dynamo_total)
            aot = 0.0
            backend = backend_total - codegen
        dynamo = dynamo_total - backend_total
    measured = (dynamo, aot, backend, codegen)
    parts = {phase: max(s, 0.0) for phase, s in zip(PHASES, measured)}
    parts[PHASES[-1]] = max(total - sum(parts.values()), 0.0)  # "other"
    return parts


#: Named parts of Inductor's work that torch's records time (µs fields, the
#: same in 2.8, 2.10 and 2.13); each is nested inside the exclusive phases
#: of a compile record, or timed at run time in a runtime record:
#: ``triton_compile_time_us`` is torch's wait for its compile workers
#: (``async_compile.precompile`` / ``.wait``: Triton kernels on a GPU, the
#: C++ kernels on a CPU), ``compile_time_autotune_time_us`` max-autotune's
#: benchmarks of kernel choices, ``runtime_triton_autotune_time_us`` Triton's
#: autotuning of a kernel's launch configurations (at its first run),
#: ``runtime_cudagraphify_time_us`` recording CUDA graphs.
KERNEL_FIELDS = {
    "kernel_compile": "triton_compile_time_us",
    "autotune": "compile_time_autotune_time_us",
    "runtime_autotune": "runtime_triton_autotune_time_us",
    "cudagraph_record": "runtime_cudagraphify_time_us",
}


def record_kernel_phases(rec: Any) -> dict[str, float]:
    """The named parts of :data:`KERNEL_FIELDS` that one record times, in
    seconds (only those above zero: a torch without a field, a backend that
    does not use them, a CPU, add nothing)."""
    out = {}
    for key, name in KERNEL_FIELDS.items():
        v = getattr(rec, name, None)
        if isinstance(v, (int, float)) and v > 0:
            out[key] = v / 1e6
    return out


def record_total_s(rec: Any) -> float:
    """Wall seconds torch attributes to one compile record."""
    v = getattr(rec, "entire_frame_compile_time_s", None)
    if v is None:
        d = getattr(rec, "duration_us", None)
        v = (d or 0) / 1e6
    return float(v)


def is_frame_compile(rec: Any) -> bool:
    """A Dynamo frame compile (not a lazy backward nor a runtime record).

    torch writes the attempt that hits the recompile limit without a code
    name, with its ``fail_type`` set: it counts as a (failed) frame compile.
    """
    return (
        getattr(rec, "is_forward", True) is not False
        and not getattr(rec, "is_runtime", False)
        and (getattr(rec, "co_name", None) is not None or bool(getattr(rec, "fail_type", None)))
    )


_LIMIT_TEXT = re.compile(
    r"exceeding the (?P<name>\w+) cache size limit \(currently set to (?P<n>\d+)\)"
)


def _limit_from_record(rec: Any, frame_of: Any) -> LimitHit | None:
    """The recompile limit a failed record says it hit, read from torch's text
    (when the limit check itself was not seen)."""
    reason = getattr(rec, "fail_reason", None) or ""
    # 2.13: "Dynamo recompile limit exceeded …"; 2.8: "recompile_limit reached"
    if not any(k in reason.lower() for k in ("recompile limit", "recompile_limit", "cache_size")):
        return None
    m = _LIMIT_TEXT.search(reason)
    name = m.group("name") if m else recompile_limit_name()
    limit = int(m.group("n")) if m else _config_value(name)
    frame = _describe_frame(frame_of, None)
    return LimitHit(frame=frame, config=name, limit=limit, compile_id=None)


@functools.cache
def recompile_limit_name() -> str:
    """The installed torch's name for the per-frame recompile limit (one
    for the process: a config's names are its release's)."""
    from torch._dynamo import config

    return "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"


def dynamo_config_flag(name: str) -> bool | None:
    """A boolean of ``torch._dynamo.config`` (None where this torch has none)."""
    from torch._dynamo import config

    value = getattr(config, name, None)
    return value if isinstance(value, bool) else None


def _config_value(name: Any) -> int | None:
    from torch._dynamo import config

    value = getattr(config, str(name), None)
    return value if isinstance(value, int) else None


def _cache_entry_count(code: Any, unknown: int | None = 1) -> int | None:
    """Cache entries a code object has now (0 after torch.compiler.reset());
    ``unknown`` where it cannot be told."""
    if code is None or not isinstance(code, types.CodeType):
        return unknown
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    try:
        return len(_debug_get_cache_entry_list(code))
    except Exception:
        return unknown


def _aot_dispatch_count() -> int:
    """How many times AOTAutograd built a dispatcher in this process (torch
    times each under this name); a compile that adds none never ran it."""
    metrics = _compilation_time_metrics()
    return len(metrics.get("create_aot_dispatcher_function", ()))


@functools.cache
def _compilation_time_metrics() -> dict[str, Any]:
    """torch's dictionary of timed compile phases (one per process)."""
    from torch._dynamo.utils import compilation_time_metrics

    return compilation_time_metrics


def is_backward_compile(rec: Any) -> bool:
    return getattr(rec, "is_forward", True) is False and not getattr(rec, "is_runtime", False)


def cache_entries(fn: Callable[..., Any]) -> list[Any]:
    """Cache entries of a function (pass the original, not the compiled wrapper)."""
    require_torch()
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    code = getattr(fn, "__code__", fn)
    return list(_debug_get_cache_entry_list(code))


def deque_limit() -> int | None:
    from torch._dynamo import utils

    return utils._compilation_metrics.maxlen


_STACK_LINE = re.compile(r"^Line: (?P<line>\d+), Name: (?P<name>.*?), Filename: (?P<file>.*)$")


def record_user_frames(rec: Any) -> list[tuple[str, str, int]] | None:
    """The user's frames of a record's own ``stack_trace`` (torch's stack when
    Dynamo started, without the compiled frame itself), innermost first,
    chosen as the recorder chooses them from the live stack
    (:func:`~stance_magic.probe.frames.keep_user_frames`); None where this
    torch writes no such field (see ``releases.RECORD_STACK_TRACE_SINCE``)."""
    stack = getattr(rec, "stack_trace", None)
    if torch_version() < RECORD_STACK_TRACE_SINCE or stack is None:
        return None
    frames = []
    for text in list(stack)[:-1]:  # the last one is the compiled frame
        m = _STACK_LINE.match(str(text))
        if m:
            frames.append((m.group("name"), m.group("file"), int(m.group("line"))))
    return keep_user_frames(reversed(frames))


# --------------------------------------------------------------------------
# a compile record, read once for the report
# --------------------------------------------------------------------------


def message_line(text: str) -> str:
    """The first line of a torch message, without a trailing guard pointer."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else text
    return first.split("  # ")[0].split(" # ")[0].rstrip()


@dataclass
class CompileRecord:
    """One of torch's compile records (``CompilationMetrics``), as the report
    reads it: every field read once here, with a default (the records grew
    from 84 fields in torch 2.8 to 99 in 2.13), beside what the recorder
    learnt while torch made it (:class:`RecordInfo`)."""

    compile_id: str
    #: "frame" (Dynamo compiled a frame, or refused at the recompile limit),
    #: "backward" (a lazily compiled backward graph), None (another record)
    kind: str | None
    co_name: str | None
    filename: str
    line: int | None
    seconds: float
    phases: dict[str, float]
    guard_count: int | None
    recompile_reason: str | None
    fail_type: str | None
    fail_reason: str | None
    #: a backend compiled a graph (torch timed its backend compile)
    backend_graph: bool
    #: a frame compiled from an empty cache (nothing to recompile)
    cold: bool
    start_time_us: int | None
    #: torch.compile(module)'s wrapper frame around the module call
    module_wrapper: bool
    info: RecordInfo = field(default_factory=RecordInfo)
    #: the named parts of :func:`record_kernel_phases`
    kernel_phases: dict[str, float] = field(default_factory=dict)
    #: a runtime record (timed at the first runs, not in a compile)
    runtime: bool = False
    #: the reason torch wrote for skipping CUDA graphs in this compile
    cudagraph_skip_reason: str | None = None

    @property
    def failed(self) -> str | None:
        """``fail_type: first line of fail_reason`` when the compile failed."""
        if not self.fail_type:
            return None
        return f"{self.fail_type}: {message_line(self.fail_reason or '')}".rstrip(": ")


def read_record(rec: Any, info: RecordInfo | None = None) -> CompileRecord:
    """A :class:`CompileRecord` from one of torch's records."""
    info = info if info is not None else RecordInfo()
    if info.aot is not None:
        return _aot_record(rec, info)
    if is_frame_compile(rec):
        kind: str | None = "frame"
    elif is_backward_compile(rec):
        kind = "backward"
    else:
        kind = None
    reason = getattr(rec, "recompile_reason", None)
    acc = getattr(rec, "accumulated_cache_size", None)
    return CompileRecord(
        compile_id=str(getattr(rec, "compile_id", "")),
        kind=kind,
        co_name=getattr(rec, "co_name", None),
        filename=getattr(rec, "co_filename", None) or "",
        line=getattr(rec, "co_firstlineno", None),
        seconds=record_total_s(rec),
        phases=record_phases(rec, info.aot_autograd) if kind else {},
        guard_count=getattr(rec, "guard_count", None),
        recompile_reason=reason,
        fail_type=getattr(rec, "fail_type", None),
        fail_reason=getattr(rec, "fail_reason", None),
        backend_graph=getattr(rec, "backend_compile_time_s", None) is not None,
        cold=kind == "frame" and (acc == 0 or (acc is None and not reason)),
        start_time_us=getattr(rec, "start_time_us", None),
        module_wrapper=is_module_wrapper(rec),
        info=info,
        kernel_phases=record_kernel_phases(rec),
        runtime=bool(getattr(rec, "is_runtime", False)),
        cudagraph_skip_reason=getattr(rec, "cudagraph_skip_reason", None) or None,
    )


def _aot_record(rec: Any, info: RecordInfo) -> CompileRecord:
    """An aot_compile's record: a frame compile (Dynamo traced the function,
    the backend compiled its graph) named after the function; a further
    record of the same aot_compile is part of it (kind None)."""
    head = info.aot == "aot_compile"
    name, filename, line = info.frame or ("?", "", None)
    return CompileRecord(
        compile_id="aot",
        kind="frame" if head else None,
        co_name=name,
        filename=filename,
        line=line,
        seconds=info.aot_seconds if info.aot_seconds is not None else record_total_s(rec),
        phases=record_phases(rec, info.aot_autograd),
        guard_count=getattr(rec, "guard_count", None),
        fail_type=info.aot_failed,
        recompile_reason=None,
        fail_reason=getattr(rec, "fail_reason", None),
        backend_graph=info.aot_graph,
        cold=False,  # no cache lookup before it: no miss
        start_time_us=getattr(rec, "start_time_us", None),
        module_wrapper=False,
        info=info,
    )


_USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?')
_GUARD_POINTER = re.compile(r"(?P<file>.+?):(?P<line>\d+)(?P<rest>(?: in \S+)?)$")


def split_recompile_reason(text: str, short_path: Callable[[str], str]) -> tuple[str, str]:
    """(reason, guard source) from a ``recompile_reason``.

    torch writes the failed guard, then ``  # <source line>  # <file:line in
    fn>`` (its path cut to a few characters) and, on later lines, a "User
    stack trace" naming the file in full (2.13+). The guard's source comes
    back as ``<source line> (<file>:<line> in <fn>)``, the path as
    ``short_path`` writes it (``In [N]`` for a notebook cell).
    """
    first = next((ln for ln in text.strip().splitlines() if ln.strip()), text).strip()
    parts = [p.strip() for p in first.split("  # ")]
    reason = parts[0]
    code = parts[1] if len(parts) > 1 else ""
    frames = list(_USER_FRAME.finditer(text))
    if frames:
        m = frames[-1]
        at = Place(m.group("fn") or "", short_path(m.group("file")), int(m.group("line")))
        where = at.within if at.name else at.where
    else:
        # torch < 2.13 gives no user stack: only its own pointer, ``file:line in fn``
        where = parts[2] if len(parts) > 2 else ""
        m = _GUARD_POINTER.match(where)
        if m and short_path(m.group("file")).startswith("In ["):
            at = Place(file=short_path(m.group("file")), line=int(m.group("line")))
            where = at.where + m.group("rest")
    if code and where:
        return reason, f"{code} ({where})"
    return reason, code or where
