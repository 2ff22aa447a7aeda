"""The torch version gate: which torch stance_magic supports, checked once."""

from __future__ import annotations

import re
from typing import Any

#: Oldest torch stance_magic supports, and the oldest the matrix tests
#: (``make test-matrix``): ``torch.compiler.set_stance`` came in 2.6, its six
#: stances in 2.7, and ``set_guard_complete_hook`` (cache hits and misses,
#: every lookup timed where it happens) in 2.8.
MIN_TORCH = (2, 8)
#: Newest torch release the matrix tests.
TESTED_UP_TO = (2, 15)


class TorchSupportError(RuntimeError):
    """The installed torch lacks something stance_magic needs."""


#: (torch.__version__, its (major, minor)): read once per version string
_VERSION: tuple[Any, tuple[int, int]] | None = None


def torch_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed torch, importing it if needed."""
    global _VERSION
    import torch

    text = torch.__version__
    cached = _VERSION
    if cached is not None and cached[0] is text:
        return cached[1]
    m = re.match(r"(\d+)\.(\d+)", text)
    if not m:  # pragma: no cover - torch always has a numeric version
        raise TorchSupportError(f"cannot read torch version {text!r}")
    _VERSION = (text, (int(m.group(1)), int(m.group(2))))
    return _VERSION[1]


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


_TORCH_CHECKED = False
_EVAL_FRAME: Any = None


def require_torch() -> None:
    """Raise :class:`TorchSupportError` unless torch >= :data:`MIN_TORCH` (checked once)."""
    global _TORCH_CHECKED
    if _TORCH_CHECKED:
        return
    v = torch_version()
    if v < MIN_TORCH:
        import torch

        raise TorchSupportError(
            f"stance_magic needs torch >= {_fmt(MIN_TORCH)} (for its guard-complete hook); "
            f"this is torch {torch.__version__}: pip install 'torch>={_fmt(MIN_TORCH)}'"
        )
    _TORCH_CHECKED = True


def torch_problem() -> str | None:
    """One line saying why stance_magic cannot work with this torch, or None.

    Examples
    --------
    >>> torch_problem() is None  # a supported torch
    True
    """
    try:
        import torch  # noqa: F401
    except ImportError as err:
        return f"stance_magic needs torch >= {_fmt(MIN_TORCH)}; torch cannot be imported ({err})"
    try:
        require_torch()
    except TorchSupportError as err:
        return str(err)
    return None


def _eval_frame() -> Any:
    global _EVAL_FRAME
    if _EVAL_FRAME is not None:
        return _EVAL_FRAME
    require_torch()
    from torch._dynamo import eval_frame

    for name in ("_stance", "_set_stance", "_callback_from_stance", "DynamoStance"):
        if not hasattr(eval_frame, name):
            raise TorchSupportError(
                f"torch._dynamo.eval_frame.{name} is missing in this torch "
                f"({torch_str()}); stance_magic supports torch "
                f"{_fmt(MIN_TORCH)} to {_fmt(TESTED_UP_TO)}"
            )
    _EVAL_FRAME = eval_frame
    return eval_frame


def torch_str() -> str:
    import torch

    return torch.__version__
