"""Every difference between the torch releases stance_magic supports, each
named for the releases it serves (the README's torch-release table lists them)."""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any, Callable

from .frames import _is_module, describe_callable
from .stances import DELAYED_STANCES
from .version import torch_version

#: 2.8 calls ``guard_manager_testing_hook_fn(guard_manager, local_scope)``;
#: 2.9 added the guard builder (whose ``f_code`` names the compiled frame).
#: A hook of the wrong arity raises inside Dynamo and breaks the user's
#: compile, so the recorder's hook takes both forms.
TESTING_HOOK_BUILDER_SINCE = (2, 9)

#: From 2.10 a recompile reason ends each failed guard with torch's pointer to
#: its source line (``  # return x * n  # file:line in fn``); 2.8 gives the
#: guard alone, and the report then has no guard source (2.9 not tested).
GUARD_SOURCE_SINCE = (2, 10)

#: From 2.10 a ``fail_on_recompile`` refusal names the guards that failed:
#: its callback asks torch for each cache entry's failed guard
#: (``get_and_maybe_log_recompilation_reasons(..., skip_logging=True)``) and
#: lists them in its error. 2.8's callback raises "Detected recompile when
#: torch.compile stance is 'fail_on_recompile'" without looking at the
#: guards (2.9 not tested): there the recorder asks torch's own guard check
#: (``guards.get_guard_fail_reason_helper``, the function 2.10's list comes
#: from, without its logging) for the refused frame's entries, just before
#: torch's callback raises (see :func:`listing_refusals`), so the report names
#: the guards on every release.
REFUSAL_GUARDS_SINCE = (2, 10)

#: From 2.13 torch raises an ``IndexError`` met while tracing as it is; 2.8 and
#: 2.10 (2.9, 2.11, 2.12 not tested) rewrap it, as every exception outside
#: ``_compile``'s list of Dynamo's own errors, in an
#: ``InternalTorchDynamoError('IndexError: ...')``, while the compile record
#: keeps ``fail_type='IndexError'``. The type of the error that reached the
#: cell therefore says nothing sure about which record failed: the recorder
#: marks the exception torch was unwinding when it wrote each record
#: (:func:`~stance_magic.probe.records.mark_unwinding`) and the report asks the
#: cell's error for that mark on every release.
INDEX_ERROR_UNWRAPPED_SINCE = (2, 13)

#: torch 2.13 added ``torch._dynamo.config.dynamo_profiler`` (pytorch pull
#: request 173942: Dynamo's tracing time by function), the same module in
#: 2.13, 2.14 and 2.15; before it a report has per-frame figures only (see
#: probe.tracing). In 2.13-2.15, with it on, a frame that graph-breaks fails
#: in torch's own ``mark_bytecode_tracing_stop``; measured cells record that
#: frame's timing themselves (``TracingProfile._make_pop``).
TRACING_PROFILER_SINCE = (2, 13)

#: Up to this release torch's profiler also emits a ``TorchDynamo Cache
#: Lookup`` event for frames with nothing compiled (the cold call itself and
#: torch's own frames run by a fresh graph: 9 for one cold compile of a
#: lambda in 2.8, none in 2.13): ``-g`` then counts and times those too, and
#: the report says so.
PROFILER_EMPTY_LOOKUPS_UNTIL = (2, 12)

#: From 2.9 the per-call callback of ``eager_then_compile`` /
#: ``aot_eager_then_compile`` is linked to torch.compile's own one, so cache
#: entries match it. 2.8 matches by address alone: its cache serves a later
#: call only when that call's new callback lands where the previous one was
#: freed, so whether it recompiles depends on the allocator (see
#: :func:`callback_ref`); the report counts what torch did.
DELAYED_CALLBACK_LINKED_SINCE = (2, 9)

#: The attribute that links a Dynamo callback to the callback or backend it
#: wraps: ``_torchdynamo_orig_callable`` in 2.8, ``_torchdynamo_orig_backend``
#: from 2.9 (where the former only links torch.compile's wrapper to the
#: user's function); ``eval_frame.innermost_backend`` follows it from 2.12.
#: Both are followed, newest first.
BACKEND_LINKS = ("_torchdynamo_orig_backend", "_torchdynamo_orig_callable")


def delayed_callback_unlinked(stance: str) -> bool:
    """True when this torch matches the cache entries of a call under
    ``stance`` by its callback's address alone (torch 2.8 under
    ``eager_then_compile`` / ``aot_eager_then_compile``): a recompile with no
    failed guard is then that address changing, not anything the user did."""
    return stance in DELAYED_STANCES and torch_version() < DELAYED_CALLBACK_LINKED_SINCE


def delayed_stance_warning(stance: str) -> str | None:
    """One line for a user choosing ``stance`` on a torch whose per-call
    callback under it is not linked (torch 2.8); None elsewhere."""
    if not delayed_callback_unlinked(stance):
        return None
    from .version import torch_str

    return (
        f"torch {torch_str()} under {stance}: torch matches its cache entries by the "
        "address of a callback it builds for every call, so a call may recompile with no "
        "guard failed, and one can crash the process (its cache entries keep that "
        "callback after it is freed; measured or not); torch 2.9 fixed it"
    )


def callback_ref(callback: Any) -> Callable[[], Any]:
    """A weak reference to the callback torch runs a frame with (``ref()`` gives
    it back, or None once torch dropped it).

    torch 2.8 builds a new callback for every call under ``eager_then_compile``
    / ``aot_eager_then_compile`` and tells cache entries apart by its
    address: the cache hits only because the previous call's callback is
    freed and its address reused. Holding it a moment longer makes every
    call recompile, so the recorder never holds it (2.9 and later link each
    new callback to the one torch.compile made, and are unaffected).
    """
    try:
        return weakref.ref(callback)
    except TypeError:  # None, False, True: nothing to hold
        return lambda: callback


def inline_wrapped(frame: Any, owner: int) -> tuple[str, str, int | None] | None:
    """What torch.compile's ``external_utils.wrap_inline`` wrapper (the
    compiled frame ``inner``) calls, named as the report names a callable.

    torch 2.8 to 2.12 wrap a function whose source they cannot find
    (``inspect.getsourcefile`` is None, as for code ``exec``'d from a string)
    and their records name ``inner`` in torch's own file; 2.13 compiles the
    function's own frame whatever its file. The wrapper is the
    ``fn`` of the torch.compile call (the compile_wrapper frame ``owner``, up
    from ``frame``), and it keeps the function as ``__wrapped__``.
    """
    f = frame
    for _ in range(400):
        if f is None:
            return None
        if id(f) == owner:
            fn = getattr(f.f_locals.get("fn"), "__wrapped__", None)
            if fn is None or _is_module(fn):
                return None
            return describe_callable(fn)
        f = f.f_back
    return None


def innermost_backend(callback: Any) -> Any:
    """The backend at the bottom of a Dynamo callback's wrapper chain.

    torch 2.12+ has ``eval_frame.innermost_backend``; older releases link the
    same chain through ``_torchdynamo_orig_callable`` (see
    :data:`BACKEND_LINKS`), and 2.8's delayed-compile callback of
    ``eager_then_compile`` / ``aot_eager_then_compile`` (``callback_fn``) has
    no link at all: the callback it wraps is in its closure.
    """
    fn = callback
    for _ in range(32):
        nxt = _next_in_chain(fn)
        if nxt is None or not callable(nxt):
            return fn
        fn = nxt
    return fn


def _next_in_chain(fn: Any) -> Any:
    """What a Dynamo callback wraps (see :func:`innermost_backend`), or None."""
    for attr in BACKEND_LINKS:
        nxt = getattr(fn, attr, None)
        if nxt is not None:
            return nxt
    return _delayed_compile_callback_of(fn)


def _delayed_compile_callback_of(fn: Any) -> Any:
    """torch 2.8: the callback closed over by ``_create_delayed_compile_callback``."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_name != "callback_fn" or "callback" not in code.co_freevars:
        return None
    if not code.co_filename.endswith(os.path.join("_dynamo", "eval_frame.py")):
        return None
    cell = fn.__closure__[code.co_freevars.index("callback")]
    try:
        return cell.cell_contents
    except ValueError:  # pragma: no cover - an empty cell
        return None


#: From 2.10 (the ``recompile_user_contexts`` field of ``CompilationMetrics``
#: in ``.ci/torch_facts.py``'s 2.10 run; the hook list read in the 2.13 and
#: 2.15 sources; 2.8 has neither; 2.9 not tested) torch calls every function
#: registered with ``torch._dynamo.utils.register_hook_for_recompile_user_context``
#: in each frame compile (the first one too: the call is outside its recompile
#: check) and keeps their strings, cut to 256 characters, as the record's
#: ``recompile_user_contexts`` set. An empty string is kept too (``{""}``);
#: only an empty hook list leaves the field None. torch has no unregister
#: function: the recorder takes its own hook out of torch's list when the
#: last window closes, leaving the user's hooks where they are.
RECOMPILE_USER_CONTEXTS_SINCE = (2, 10)

#: ``torch.compile(fn, recompile_limit=N)``: a limit for one torch.compile
#: call, in the 2.13 and 2.15 sources (not in 2.8; 2.9 to 2.12 not tested).
#: torch keeps it on the call's ``ConvertFrameAssert`` (``_recompile_limit``,
#: one per torch.compile call) and patches ``config.recompile_limit`` to it
#: for each compile that call makes, so torch's own check and log name
#: ``config.recompile_limit`` with the per-call value. It is read wherever the
#: attribute exists, so an untested release that has it is not misreported.
PER_CALL_RECOMPILE_LIMIT_SINCE = (2, 13)

#: From 2.10 (``.ci/torch_facts.py``'s 2.10 run; 2.9 not tested; 2.8 has no
#: such field) a compile record has ``stack_trace``: the Python stack when
#: Dynamo started, outermost first, as ``Line: L, Name: n, Filename: f``,
#: ending with the compiled frame itself. In 2.13 and 2.15 torch cuts one
#: frame too many from its inner end under the default stance (its skip count
#: expects a frame that is no longer there): the line that called the
#: compiled function is missing (a helper's ``return g(x)``, or the cell's own
#: ``f(x)``), while under ``eager_then_compile`` torch's own wrapper is cut
#: instead. The recorder therefore reads the caller from the live stack at
#: compile time, on every release, and the tests check it against this field
#: where torch has it.
RECORD_STACK_TRACE_SINCE = (2, 10)


def recompile_context_registry() -> tuple[Callable[[Any], None], Callable[[], Any]] | None:
    """torch's ``(register_hook_for_recompile_user_context,
    get_hook_for_recompile_user_context)``, or None where this torch has no
    such hooks (see :data:`RECOMPILE_USER_CONTEXTS_SINCE`)."""
    if torch_version() < RECOMPILE_USER_CONTEXTS_SINCE:
        return None
    return _context_registry()


@functools.cache
def _context_registry() -> tuple[Callable[[Any], None], Callable[[], Any]] | None:
    from torch._dynamo import utils

    register = getattr(utils, "register_hook_for_recompile_user_context", None)
    get = getattr(utils, "get_hook_for_recompile_user_context", None)
    if register is None or get is None:
        return None
    return register, get


def per_call_recompile_limit(frame: Any) -> tuple[bool, int | None]:
    """Whether the compile running above ``frame`` was made by a torch.compile
    call given ``recompile_limit=``, and that limit.

    The compile's ``ConvertFrameAssert.__call__`` is on the stack (its
    ``self`` is the torch.compile call's own object, see
    :data:`PER_CALL_RECOMPILE_LIMIT_SINCE`); ``(False, None)`` where it has
    no such limit, or this torch none at all.
    """
    f = frame
    for _ in range(64):
        if f is None:
            return False, None
        code = f.f_code
        if code.co_name == "__call__" and code.co_filename.endswith(
            os.path.join("_dynamo", "convert_frame.py")
        ):
            owner = f.f_locals.get("self")
            if type(owner).__name__ == "ConvertFrameAssert":
                limit = getattr(owner, "_recompile_limit", None)
                if isinstance(limit, int) and not isinstance(limit, bool):
                    return True, limit
                return False, None
        f = f.f_back
    return False, None


def callback_recompile_limit(callback: Any) -> int | None:
    """The ``recompile_limit=`` of the torch.compile call whose callback this
    is (torch.compile's own, as it hands it to ``_callback_from_stance``), or
    None: followed down the callback's wrapper chain (``CatchErrorsWrapper``
    → ``ConvertFrame`` keeps it; see :data:`PER_CALL_RECOMPILE_LIMIT_SINCE`)."""
    fn = callback
    for _ in range(32):
        if fn is None:
            return None
        limit = getattr(fn, "_recompile_limit", None) if not isinstance(fn, type) else None
        if isinstance(limit, int) and not isinstance(limit, bool):
            return limit
        fn = _next_in_chain(fn)
    return None


def listing_refusals(
    dispatch: Callable[[Any], Any], note: Callable[[list[str], Any], None]
) -> Callable[[Any], Any]:
    """torch's ``_callback_from_stance`` (``dispatch``), made to tell ``note``
    the guards a ``fail_on_recompile`` refusal failed on, where torch's own
    refusal does not list them (before :data:`REFUSAL_GUARDS_SINCE`); on
    later releases ``dispatch`` itself.

    The callback torch returns under ``fail_on_recompile`` is wrapped: called
    for a frame, the wrapper lists each cache entry's failed guard as torch's
    guard check words it, hands the list and the frame to ``note``, and calls
    torch's callback, which raises. It links to torch's callback as torch's
    links to the backend (``_torchdynamo_orig_callable``), so cache entries
    match as before.
    """
    if torch_version() >= REFUSAL_GUARDS_SINCE:
        return dispatch
    from torch._dynamo import eval_frame, guards, trace_rules

    helper = getattr(guards, "get_guard_fail_reason_helper", None)
    if helper is None:  # pragma: no cover - every supported release has it
        return dispatch
    deleted = getattr(guards, "DeletedGuardManagerWrapper", ())

    def failed_guards(frame: Any, cache_entry: Any) -> list[str]:
        reasons = []
        f_locals = frame.f_locals
        while cache_entry is not None:
            manager = cache_entry.guard_manager
            if deleted and isinstance(manager, deleted):
                reason = f"{cache_entry.compile_id}: {manager.invalidation_reason}"
            else:
                reason = helper(manager, f_locals, cache_entry.compile_id)
            if reason:
                reasons.append(reason)
            cache_entry = cache_entry.next
        return reasons

    def _callback_from_stance(callback: Any) -> Any:
        result = dispatch(callback)
        if (
            result is callback
            or callback is None
            or callback is False
            or eval_frame._stance.stance != "fail_on_recompile"
        ):
            return result
        refuse = result

        def fail_callback(frame: Any, cache_entry: Any, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            if not trace_rules.check(frame.f_code):  # torch's callback refuses it
                try:
                    note(failed_guards(frame, cache_entry), frame)
                except Exception:  # a nicety: never change what torch does
                    pass
            return refuse(frame, cache_entry, *args, **kwargs)

        fail_callback._torchdynamo_orig_callable = refuse  # type: ignore[attr-defined]
        return fail_callback

    _callback_from_stance.__wrapped__ = dispatch  # type: ignore[attr-defined]
    return _callback_from_stance
