"""Frames and attribution: what a torch.compile call called, the nn.Module
behind a compiled frame, and how the report names a frame."""

from __future__ import annotations

import functools
import os
import re
import types
import weakref
from typing import Any, Callable

from .version import TorchSupportError, torch_str

#: How many frames the guard hook walks up from a lookup to find the
#: torch.compile call that made it (torch's own skipped frames in between:
#: ``Module.__call__``, ``_call_impl``).
_WALK_LIMIT = 12
#: Frames walked up from an untimed lookup to the torch.compile call running it.
_OWNER_WALK_LIMIT = 64


_MISSING = object()


def _compile_wrapper_code(ef: Any) -> Any:
    """The code object of torch.compile's ``compile_wrapper`` closure."""
    ctx = getattr(ef, "_TorchDynamoContext", None)
    call = vars(ctx).get("__call__") if ctx is not None else None
    code = getattr(call, "__code__", None)
    for const in getattr(code, "co_consts", ()):
        if getattr(const, "co_name", None) == "compile_wrapper":
            return const
    raise TorchSupportError(
        f"torch {torch_str()}: torch.compile's compile_wrapper was not found; "
        "cache lookups cannot be timed"
    )


def _find_owner(frame: Any, owner: int) -> Any:
    """The compile_wrapper frame ``owner`` if the lookup made from ``frame``
    is the one of the function it called: reached through torch's own
    (skipped) frames only, within a few frames. Else None."""
    torch_dir = _torch_dir()
    f = frame
    for _ in range(_WALK_LIMIT):
        if f is None:
            return None
        if id(f) == owner:
            return f
        if not f.f_code.co_filename.startswith(torch_dir):
            return None
        f = f.f_back
    return None


def _hops(frame: Any, target: Any) -> int:
    """How many ``f_back`` steps lead from ``frame`` to ``target`` (0: it is
    ``target``); -1 when ``target`` is not within :data:`_WALK_LIMIT` of it."""
    f = frame
    for n in range(_WALK_LIMIT):
        if f is None:
            return -1
        if f is target:
            return n
        f = f.f_back
    return -1


def _direct_owner(frame: Any, owner: int) -> Any:
    """The compile_wrapper frame ``owner`` when it is reached from ``frame``
    through torch's own frames only (no user frame in between), else None."""
    torch_dir = _torch_dir()
    here = __file__
    f = frame
    for _ in range(400):
        if f is None:
            return None
        if id(f) == owner:
            return f
        name = f.f_code.co_filename
        if not name.startswith(torch_dir) and name != here:
            return None
        f = f.f_back
    return None


def _caller_key(frame: Any) -> Any:
    """What a lookup without a timed start is attributed to: the module a
    torch frame (``_call_impl``) was calling, else the calling code."""
    code = frame.f_code
    if code.co_filename.startswith(_torch_dir()):
        self_obj = frame.f_locals.get("self")
        if self_obj is not None and _is_module(self_obj):
            return self_obj
    return code


def describe_callable(obj: Any) -> tuple[str, str, int | None]:
    """(name, file, line) of what torch.compile was given or called, an
    ``nn.Module`` named by its class."""
    if obj is None:
        return "(unknown)", "", None
    if isinstance(obj, types.CodeType):
        if obj.co_name.startswith(_RESUME_PREFIX):
            fn, line = resume_parts(obj.co_name) or (obj.co_name, 0)
            return f"{fn} after the graph break at line {line}", obj.co_filename, line
        return (
            f"{obj.co_name} (frames it calls)",
            obj.co_filename,
            obj.co_firstlineno,
        )
    mod = _module_of(obj)
    if mod is not None:
        return _module_location(mod)
    code = getattr(obj, "__code__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if code is not None:
        return name or code.co_name, code.co_filename, code.co_firstlineno
    return name or type(obj).__name__, "", None


def _module_of(obj: Any) -> Any:
    """The nn.Module behind a callable torch.compile was given: the module
    itself, a bound method of it, or a wrapper closing over it."""
    if _is_module(obj):
        return obj
    bound = getattr(obj, "__self__", None)
    if bound is not None and _is_module(bound):
        return bound
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if _is_module(value):
            return value
        bound = getattr(value, "__self__", None)
        if bound is not None and _is_module(bound):
            return bound
    return None


def _module_in_scope(scope: Any, code: Any = None) -> Any:
    """The nn.Module a frame being compiled is the ``forward`` of: its first
    argument when that is called ``self`` or the frame is the module's own
    ``forward`` (a hook that takes the module first is not its forward), the
    first of a decorator's ``*args``, or the ``fn`` of torch's wrapper for
    ``torch.nn`` modules."""
    if not isinstance(scope, dict) or not scope:
        return None
    name, first = next(iter(scope.items()))
    if _is_module(first):
        forward = getattr(type(first).forward, "__code__", None)
        if name == "self" or (code is not None and code is forward):
            return first
    if name == "args" and isinstance(first, tuple) and first and _is_module(first[0]):
        return first[0]  # a decorator's wrapper(*args, **kwargs) around forward
    fn = scope.get("fn")
    if fn is not None and _is_module(fn):
        return fn
    return None


#: User frames kept per compile (innermost first).
USER_FRAMES = 12


def user_frames(frame: Any, limit: int = USER_FRAMES) -> list[tuple[str, str, int]]:
    """The user's frames on the stack above ``frame`` (a compile under way),
    innermost first, as ``(name, file, line)``: the line that called the
    compiled function, then its callers.

    torch's frames (the compile itself, torch.compile's wrapper, nn.Module's
    call machinery) and the standard library's are skipped wherever they are;
    the walk ends at the first frame of the harness running the user's code
    (stance_magic, IPython, ipykernel), so a notebook cell's own line is the
    last one kept (and the ``%%stance`` line that ran it is not).
    """

    def walk() -> Any:
        f = frame
        for _ in range(400):
            if f is None:
                return
            yield f.f_code.co_name, f.f_code.co_filename, f.f_lineno or 0
            f = f.f_back

    return keep_user_frames(walk(), limit)


def keep_user_frames(frames: Any, limit: int = USER_FRAMES) -> list[tuple[str, str, int]]:
    """The frames :func:`user_frames` keeps of ``(name, file, line)`` triples
    given innermost first."""
    harness = _harness_dirs()
    out: list[tuple[str, str, int]] = []
    for name, filename, line in frames:
        if len(out) >= limit:
            break
        if filename.startswith(harness):
            break
        if is_user_file(filename):
            out.append((name, filename, line))
    return out


def raised_from(exc: BaseException, limit: int = USER_FRAMES) -> list[tuple[str, str, int]]:
    """The user's frames of an exception's traceback, innermost first, as
    :func:`user_frames` gives them: the line that made the failing call (a
    torch.compile'd function refused, a compile error), then its callers.
    torch's, the standard library's and the harness's frames are left out
    wherever they are (stance_magic's wrappers inside torch's frames too)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((code.co_name, code.co_filename, tb.tb_lineno or 0))
        tb = tb.tb_next
    return [f for f in reversed(frames) if is_user_file(f[1])][:limit]


def is_user_file(filename: str) -> bool:
    """Whether :func:`user_frames` keeps a frame of this file."""
    return not (
        filename.startswith((_torch_dir(), *_harness_dirs())) or _library(filename, _skipped_dirs())
    )


def _library(filename: str, stdlib: tuple[str, ...]) -> bool:
    """A frame of the standard library (not of a package installed under it)."""
    if filename.startswith("<frozen "):
        return True
    return filename.startswith(stdlib) and not any(
        p in filename for p in ("site-packages", "dist-packages")
    )


@functools.cache
def _skipped_dirs() -> tuple[str, ...]:
    """The standard library's directories (contextlib, threading, runpy)."""
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {paths.get("stdlib"), paths.get("platstdlib")}
    return tuple(sorted(os.path.join(d, "") for d in dirs if d))


@functools.cache
def _harness_dirs() -> tuple[str, ...]:
    """The packages that run the user's code: stance_magic, IPython, ipykernel."""
    import importlib.util

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = [here]
    for pkg in ("IPython", "ipykernel"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(spec.origin))
    return tuple(os.path.join(d, "") for d in dirs)


@functools.cache
def _torch_dir() -> str:
    import torch

    return os.path.dirname(torch.__file__) + os.sep


def _is_module(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


#: forward function -> the file ``inspect.getsourcefile`` finds for it (it
#: stats files: read once per function, not once per measured cell)
_SOURCE_FILES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _module_location(mod: Any) -> tuple[str, str, int | None]:
    forward = type(mod).forward
    code = getattr(forward, "__code__", None)
    try:
        filename = _SOURCE_FILES[forward]
    except (KeyError, TypeError):
        import inspect

        try:
            filename = inspect.getsourcefile(forward) or ""
        except TypeError:
            filename = ""
        try:
            _SOURCE_FILES[forward] = filename
        except TypeError:  # pragma: no cover - not weak-referenceable
            pass
    return f"{type(mod).__name__}.forward", filename, code.co_firstlineno if code else None


def _compiling_code(frame: Any) -> Any:
    """The code object Dynamo's ``_compile`` is compiling, from the stack
    above a compile record being written (a few frames up), or None."""
    f = frame
    for _ in range(_WALK_LIMIT):
        if f is None:
            return None
        code = f.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            value = f.f_locals.get("code")
            return value if isinstance(value, types.CodeType) else None
        f = f.f_back
    return None


#: The file of a notebook-defined object whose cell cannot be told.
NOTEBOOK = "<notebook>"

_IDENTITY = re.compile(r"___check_(?P<kind>obj|type)_id\((?P<expr>.+?), \d+\)")
_SUBSCRIPT = re.compile(r"^(?P<scope>[GL])\[['\"](?P<name>[^'\"]+)['\"]\](?P<rest>.*)$")


def _identity_context(
    frame: Any, failures: list[str]
) -> dict[str, tuple[str, str, int | None, str]]:
    """Where the objects that failed an identity guard come from now.

    torch guards a global class or function it read by its id, and a module
    or object argument by its type's id; re-running the cell that defines
    them makes a new object, and the guard fails. For each such guard, the
    object the name holds now (read from the frame being looked up) is named
    with the file and line it was defined at, so the report can say "a new
    class since In [3]"."""
    out: dict[str, tuple[str, str, int | None, str]] = {}
    for text in failures:
        m = _IDENTITY.search(text)
        if m is None:
            continue
        expr = m.group("expr")
        try:
            obj = _eval_guard_source(frame, expr)
        except Exception:
            continue
        if obj is _MISSING:
            continue
        if m.group("kind") == "type":
            obj = type(obj)
        where = _defined_at(obj)
        if where is not None:
            out[expr] = where
    return out


def _eval_guard_source(frame: Any, expr: str) -> Any:
    """The object a guard's source names (``G['Block']``, ``L['m']``, ``m``,
    ``G['helper'].__code__``), read from the frame; only names and attributes."""
    m = _SUBSCRIPT.match(expr)
    if m:
        scope = frame.f_globals if m.group("scope") == "G" else frame.f_locals
        obj = scope.get(m.group("name"), _MISSING)
        rest = m.group("rest")
    else:
        name, _, rest = expr.partition(".")
        rest = "." + rest if rest else ""
        if not name.isidentifier():
            return _MISSING
        obj = frame.f_locals.get(name, frame.f_globals.get(name, _MISSING))
    for attr in filter(None, rest.split(".")):
        if obj is _MISSING or not attr.isidentifier():
            return _MISSING
        obj = getattr(obj, attr, _MISSING)
    return obj


def _defined_at(obj: Any) -> tuple[str, str, int | None, str] | None:
    """(name, file, line, what) where a class, function or code object was defined."""
    if isinstance(obj, types.CodeType):
        return obj.co_name, obj.co_filename, obj.co_firstlineno, "function"
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        name = getattr(obj, "__qualname__", code.co_name)
        return name, code.co_filename, code.co_firstlineno, "function"
    if isinstance(obj, type):
        for value in vars(obj).values():
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                return obj.__qualname__, code.co_filename, None, "class"
        # a class without methods: only its module says it is the notebook's
        return obj.__qualname__, NOTEBOOK if obj.__module__ == "__main__" else "", None, "class"
    return None


def _weak(obj: Any) -> Callable[[], Any]:
    """A weak reference where the object takes one (a model must not be kept
    alive by the recorder), else a strong one."""

    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def _describe_frame(code: Any, key: Any) -> tuple[str, str, int | None]:
    """How a report names the frame of a cache miss: from its code object
    (a resume function by its graph break), else from what was called."""
    if isinstance(code, types.CodeType):
        resumed = resume_parts(code.co_name)
        if resumed:
            fn, line = resumed
            return f"{fn} after the graph break at line {line}", code.co_filename, line
        if key is not None and not isinstance(key, types.CodeType):
            name, filename, line = describe_callable(key)
            # the function itself, or torch's own wrapper around a module
            if filename == code.co_filename or code.co_filename.startswith(_torch_dir()):
                return name, filename, line
        return code.co_name, code.co_filename, code.co_firstlineno
    if key is None:
        return "(unknown)", "", None
    return describe_callable(key)


#: a resume function's name: ``torch_dynamo_resume_in_f_at_14``
_RESUME_PREFIX = "torch_dynamo_resume_in_"
_RESUME_NAME = re.compile(re.escape(_RESUME_PREFIX) + r"(.+)_at_(\d+)$")


def resume_parts(co_name: str | None) -> tuple[str, int] | None:
    """``("f", 14)`` from a resume function's name, else None.

    Every window's recompile budgets name their frames through here: a name
    without the prefix is answered without the regex (the first
    ``Pattern.match`` after compiled code has run took 17-22 µs here, a
    ``startswith`` well under one)."""
    if not co_name or not co_name.startswith(_RESUME_PREFIX):
        return None
    m = _RESUME_NAME.match(co_name)
    return (m.group(1), int(m.group(2))) if m else None
