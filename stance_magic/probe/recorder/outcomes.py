"""How a cache miss and a torch.compile call ended: the words the
recorder's events and the call account use (``CALL_``, ``WHY_``, ``MISS_``)."""

from __future__ import annotations

#: What torch did after a cache miss.
MISS_COMPILED = "compiled"  # a compile record followed (also a failed one)
MISS_LIMIT = "limit"  # the frame is at its recompile limit: ran eagerly
MISS_EAGER = "eager"  # eager_on_recompile was in force: ran eagerly
MISS_REFUSED = "refused"  # fail_on_recompile was in force: raised
MISS_NONE = "none"  # nothing compiled and no stance explains it
#: How a call of a compiled function ended: exactly one of these per call
#: (see Recorder._resolve), each with why (the WHY_ names).
CALL_CACHED = "cached"  # ran compiled code found in the cache
CALL_COMPILED = "compiled"  # compiled (a frame of it at least), then ran it
CALL_EAGER = "eager"  # ran without compiled code
CALL_REFUSED = "refused"  # torch refused the recompile it needed: raised
CALL_FAILED = "failed"  # raised: a compile error, or its own code
CALL_OUTCOMES = (CALL_CACHED, CALL_COMPILED, CALL_EAGER, CALL_REFUSED, CALL_FAILED)
WHY_FORCE_EAGER = "force_eager"
WHY_FIRST_CALL = "first call"  # eager_then_compile's first call of a function
WHY_EAGER_ON_RECOMPILE = "eager_on_recompile"  # a miss, run eagerly instead
WHY_NOTHING_CACHED = "eager_on_recompile, nothing cached"
WHY_LIMIT = "recompile limit"
WHY_COMPILE_FAILED = "compile failed"  # torch fell back to eager (suppress_errors)
WHY_SKIPPED = "skipped"  # torch compiled nothing: Dynamo skipped the frame
WHY_FAIL_ON_RECOMPILE = "fail_on_recompile"
WHY_UNSAFE = "skip_guard_eval_unsafe"
WHY_COMPILE_ERROR = "compile error"
WHY_OWN_ERROR = "its code raised"
WHY_AOT = "aot_compile"  # an aot-compiled function's own compiled code
WHY_PRECOMPILED = "precompiled"  # Dynamo's precompiled frame (caching_precompile)
WHY_AOT_GUARDS = "aot_compile's guards"  # its guard check failed: it raised
#: RecordInfo.aot: the record of an aot_compile, or a further record of one
AOT_COMPILE = "aot_compile"
AOT_PART = "aot_compile part"
#: eager calls with no miss of their own (Window.eager_calls)
_NO_MISS_EAGER = frozenset({WHY_FORCE_EAGER, WHY_FIRST_CALL, WHY_NOTHING_CACHED, WHY_SKIPPED})
