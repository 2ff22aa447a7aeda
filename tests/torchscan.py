"""What of torch's code a process has bound where: every function, class and
method of torch's loaded modules, read from the modules themselves (never
from stance_magic's own list of what it replaces).

:func:`scan` maps each place (``module.attr``, ``module.Class.attr``, and
the functions in the own ``__dict__`` of an object torch keeps at module
level, such as ``torch._dynamo.package.DynamoCache``) to what is bound
there; :func:`changed` compares two scans: a place whose object is another
one now, or a place that appeared and holds stance_magic's code.
:func:`faithful` says whether a replacement carries the original's name,
qualified name, docstring, signature and ``__wrapped__`` (what ``?`` and
``inspect.signature`` show in a notebook).
"""

from __future__ import annotations

import inspect
import os
import sys
import types
import warnings
from typing import Any

import stance_magic

_OURS = os.path.dirname(stance_magic.__file__)

#: What a scanned place holds: code, where a replacement would be noticed.
_CODE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    staticmethod,
    classmethod,
    property,
    type,
)


def _code_like(v: Any) -> bool:
    try:
        return isinstance(v, _CODE)
    except Exception:  # an object whose __class__ raises
        return False


def _own_dict(obj: Any) -> dict[str, Any]:
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return d if isinstance(d, dict) else {}


def scan() -> dict[str, Any]:
    """Every place of torch's loaded modules that holds code, and what it holds."""
    with warnings.catch_warnings():
        # (torch.distributed's deprecated aliases warn when looked at)
        warnings.simplefilter("ignore")
        return _scan()


def _scan() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "torch" or name.startswith("torch.")):
            continue
        d = _own_dict(mod)
        for k, v in list(d.items()):
            if isinstance(v, types.ModuleType):
                continue
            if _code_like(v):
                out[f"{name}.{k}"] = v
            if isinstance(v, type):
                if getattr(v, "__module__", None) != name:
                    continue  # scanned where it is defined
                try:
                    attrs = list(vars(v).items())
                except TypeError:
                    continue
                for ck, cv in attrs:
                    if _code_like(cv):
                        out[f"{name}.{k}.{ck}"] = cv
            elif not _code_like(v) and type(v).__module__.startswith("torch"):
                # an object torch keeps at module level (a cache, a registry):
                # the functions bound on the object itself
                for ok, ov in list(_own_dict(v).items()):
                    if isinstance(ov, (types.FunctionType, types.MethodType)):
                        out[f"{name}.{k}.{ok}"] = ov
    return out


def ours(v: Any) -> bool:
    """Whether ``v`` is stance_magic's code (a function defined in its package)."""
    fn = getattr(v, "__func__", v)
    for attr in ("fget", "__func__"):
        fn = getattr(fn, attr, fn)
    if isinstance(fn, type):
        return False
    code = getattr(fn, "__code__", None)
    return isinstance(code, types.CodeType) and code.co_filename.startswith(_OURS)


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Places whose code is another object now (before, after), and places
    that appeared holding stance_magic's code (None, after)."""
    out: dict[str, tuple[Any, Any]] = {}
    for k, v in after.items():
        if k in before:
            if before[k] is not v:
                out[k] = (before[k], v)
        elif ours(v):
            out[k] = (None, v)
    return out


def _signature(fn: Any) -> str | None:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return None


def bound_original(key: str) -> Any:
    """What a place that appeared on an object torch keeps at module level
    (``module.obj.attr``) shadows: the method of the object's class, bound."""
    parts = key.split(".")
    for i in range(len(parts) - 2, 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None:
            obj = getattr(mod, parts[i])
            return getattr(type(obj), parts[i + 1]).__get__(obj, type(obj))
    raise KeyError(key)


def faithful(original: Any, replacement: Any) -> list[str]:
    """What ``replacement`` does not carry of ``original`` (empty: all of it);
    a staticmethod or classmethod by its function."""
    if isinstance(original, (staticmethod, classmethod)) and type(replacement) is type(original):
        original, replacement = original.__func__, replacement.__func__
    missing = []
    wrapped = getattr(replacement, "__wrapped__", None)
    # (a bound method is made afresh at each look-up: equal, not the same)
    if not (
        wrapped is original or (isinstance(original, types.MethodType) and wrapped == original)
    ):
        missing.append("__wrapped__")
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        if getattr(replacement, attr, None) != getattr(original, attr, None):
            missing.append(attr)
    if _signature(replacement) != _signature(original):
        missing.append("signature")
    return missing
