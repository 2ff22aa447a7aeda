"""Stances: which the installed torch has, setting one, and the state of
compiled code (reset, disk caches)."""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

from .version import _eval_frame, _fmt, require_torch, torch_str

#: Stances and the first torch release that has them. Names that the
#: installed torch documents beyond these are picked up too (see
#: :func:`supported_stances`); this table only serves to explain a missing one.
STANCE_SINCE: dict[str, tuple[int, int]] = {
    "default": (2, 6),
    "force_eager": (2, 6),
    "eager_on_recompile": (2, 6),
    "fail_on_recompile": (2, 6),
    "eager_then_compile": (2, 7),
    "aot_eager_then_compile": (2, 7),
}

#: The message torch raises when set_stance is called inside a compiled region.
COMPILED_REGION_MESSAGE = "attempted to set_stance in a torch.compile region"


def torch_stance() -> tuple[str, bool, Any]:
    """The stance torch has now: ``(name, skip_guard_eval_unsafe, backend)``."""
    return stance_of(torch_stance_value())


def torch_stance_value() -> Any:
    """torch's own stance value now (``eval_frame._stance``, a ``DynamoStance``).

    ``set_stance`` (function, context manager and decorator alike) puts a new
    value in place and gives the prior one back, and never changes a value
    (read on 2.8, 2.13 and 2.15): the same value is the same stance, so a
    caller may keep what it made of one (:func:`stance_magic.current_stance`)."""
    return _eval_frame()._stance


def stance_of(value: Any) -> tuple[str, bool, Any]:
    """``(name, skip_guard_eval_unsafe, backend)`` of a torch stance value."""
    return value.stance, bool(value.skip_guard_eval_unsafe), value.backend


def _documented_stances() -> list[str]:
    """Stance names listed in the installed torch's set_stance docstring."""
    import torch

    doc = torch.compiler.set_stance.__doc__ or ""
    return re.findall(r'^\s*- "([a-z_]+)":', doc, flags=re.M)


_SUPPORTED: tuple[str, ...] | None = None


def supported_stances() -> tuple[str, ...]:
    """Stance names the installed torch accepts, in a stable order.

    Candidates are our table plus every name torch documents; each is tried
    by asking torch's own dispatcher (``_callback_from_stance``) under that
    stance with a dummy callback, which raises for a name torch does not
    know and runs nothing.
    """
    global _SUPPORTED
    if _SUPPORTED is None:
        ef = _eval_frame()
        candidates = list(STANCE_SINCE)
        candidates += [n for n in _documented_stances() if n not in candidates]

        def dummy(*args: Any, **kwargs: Any) -> None:  # pragma: no cover
            return None

        dummy._torchdynamo_orig_backend = dummy  # type: ignore[attr-defined]
        accepted = []
        saved = ef._stance
        # torch's own function, not the recorder's wrapper around it
        dispatch = getattr(ef._callback_from_stance, "__wrapped__", ef._callback_from_stance)
        try:
            for name in candidates:
                ef._stance = ef.DynamoStance(name)
                try:
                    dispatch(dummy)
                except RuntimeError:
                    continue
                accepted.append(name)
        finally:
            ef._stance = saved
        _SUPPORTED = tuple(accepted)
    return _SUPPORTED


def missing_stance_hint(name: str) -> str | None:
    """For a stance this torch lacks but a newer one has, say which torch."""
    since = STANCE_SINCE.get(name)
    if since is None or name in supported_stances():
        return None
    return f"stance {name!r} needs torch >= {_fmt(since)} (installed: {torch_str()})"


def set_stance(name: str, skip_guard_eval_unsafe: bool, backend: Any) -> Any:
    """Call ``torch.compiler.set_stance`` (function form) and return its handle.

    A call from inside a compiled region raises :class:`CompiledRegionError`
    carrying torch's own message.
    """
    require_torch()
    import torch

    if _dynamo_is_tracing():
        # Dynamo is tracing the caller: say so here, rather than letting it
        # trip over torch's forbidden set_stance with an opaque trace error.
        raise CompiledRegionError(COMPILED_REGION_MESSAGE)
    # Otherwise torch decides, per thread: it refuses only while this thread
    # runs inside a compiled region (its eval-frame callback is set). Another
    # thread compiling at the same time does not count, although
    # torch.compiler.is_compiling() (one flag for the process) is then True.
    try:
        return torch.compiler.set_stance(
            name,
            skip_guard_eval_unsafe=skip_guard_eval_unsafe,
            force_backend=backend,
        )
    except RuntimeError as err:
        if COMPILED_REGION_MESSAGE in str(err):
            raise CompiledRegionError(str(err)) from err
        raise


def _dynamo_is_tracing() -> bool:
    """True only while Dynamo traces the calling code: Dynamo folds
    ``torch.compiler.is_dynamo_compiling()`` to True in the code it traces,
    and it returns False when run (in any thread)."""
    import torch

    check = getattr(torch.compiler, "is_dynamo_compiling", None)
    return bool(check()) if check is not None else False


class CompiledRegionError(RuntimeError):
    """stance_magic was asked to change the stance inside a compiled region."""

    def __init__(self, torch_message: str) -> None:
        super().__init__(
            f"{torch_message}: the stance cannot change inside a function that "
            "torch.compile is tracing or running; change it before calling the "
            "compiled function (for example with %%stance on the cell that calls it)"
        )


def reset_compiled_code() -> None:
    """Forget all compiled code (``torch.compiler.reset()``)."""
    require_torch()
    import torch

    torch.compiler.reset()
    # eager_then_compile remembers each function's first inputs outside the
    # caches reset() clears; forget them too, or a "cold" run compiles at once.
    from torch._dynamo import eval_frame

    inputs = getattr(eval_frame, "_EXAMPLE_INPUTS", None)
    if inputs:
        inputs.clear()


@contextlib.contextmanager
def no_disk_caches() -> Iterator[None]:
    """Turn off Inductor's FX graph cache and AOTAutograd's cache for a block,
    so a compile after :func:`reset_compiled_code` is really from cold."""
    require_torch()
    import torch._functorch.config as fconf
    import torch._inductor.config as iconf

    saved = []
    for mod, name in ((iconf, "fx_graph_cache"), (fconf, "enable_autograd_cache")):
        if hasattr(mod, name):
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, False)
    try:
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


#: Stances that build a new callback for every torch.compile call and compile
#: from the second call on (see releases.DELAYED_CALLBACK_LINKED_SINCE).
DELAYED_STANCES = frozenset({"eager_then_compile", "aot_eager_then_compile"})

#: Stances under which a torch.compile call can run its function eagerly
#: without looking anything up (nothing compiled yet, or compiling disabled).
_EAGER_STANCES = frozenset(
    {"force_eager", "eager_on_recompile", "eager_then_compile", "aot_eager_then_compile"}
)
