"""Dynamo's precompiled frames (``torch._dynamo.config.caching_precompile``),
made safe for notebook cells.

With ``caching_precompile`` on, torch records each compiled function's Dynamo
state (its bytecode, guards and compiled graphs) and
``torch.compiler.save_cache_artifacts()`` carries it (artifact kind
``precompile``, files under ``<inductor cache dir>/dynamo/``); a later
``torch.compile(fn)`` looks it up by ``sha256(qualname + first line)``
(``torch/_dynamo/package.py``) and, on a hit, skips Dynamo's tracing
altogether. torch checks that the source did not change only for code whose
module ``inspect.getmodule`` finds: a notebook cell's code has none, so an
edited cell (or an edited helper from another cell that the function calls)
would silently run its old compiled code.

:class:`SourceCheck` closes that gap while it is installed:

* when torch builds a package's cache entry, every piece of cell code the
  compile traced (the function itself and the cell functions it inlined) is
  fingerprinted (its bytecode, names and constants; not its file or line
  numbers, which change from kernel to kernel) and the fingerprints ride in
  the entry itself (an attribute of torch's pickled ``_DynamoCacheEntry``,
  so they travel in the cache directory and in the mega-cache blob);
* when torch loads an entry for a function, each fingerprinted piece is
  looked up again (the function, then the helpers by name in its globals)
  and compared: an entry whose cell code changed, or that cannot be checked
  (saved without fingerprints, a helper no longer found by name) is not
  used: torch sees a miss and traces the function again.

Functions from ``.py`` files keep torch's own check. Every load is noted
(:meth:`SourceCheck.events`) for the report. Nothing here imports torch at
import time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

from .watch import faithful

#: torch release where caching_precompile and its Dynamo cache are usable
#: (PR #155913 and the mega-cache integration, #163533)
PRECOMPILE_SINCE = (2, 10)

#: the attribute of torch's _DynamoCacheEntry that carries the fingerprints
ENTRY_ATTR = "_stance_magic_cell_code"

#: What happened to a lookup of Dynamo's cache (see PrecompileEvent.outcome).
HIT = "hit"  # a precompiled entry, checked (or from a .py file): no tracing
STALE = "stale"  # the cell's code changed since it was saved: traced again
UNCHECKED = "unchecked"  # cell code that cannot be checked: traced again
#: the entry was saved without its compiled graphs (torch: "Backend not
#: found"; a training step's backward had not run): torch traces it again
INCOMPLETE = "incomplete"
#: torch could not install the entry (rebuilding its guards raised): traced
#: again instead of the error reaching torch.compile's caller
UNLOADABLE = "unloadable"
MISS = "miss"  # nothing saved for this function
#: torch installed the entry, but its guards did not match the call (another
#: dtype, shape, ...): the frame was traced again in the same cell (the
#: report decides this from the window, see build.caches._precompiled)
GUARDS_MISSED = "guards"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrecompileEvent:
    """One lookup of Dynamo's precompiled frames (at ``torch.compile(fn)``)."""

    name: str
    filename: str
    line: int | None
    outcome: str
    #: why an entry was not used (the piece of code that changed, ...)
    why: str = ""
    #: when (the recorder's clock, ``time.perf_counter``)
    at: float = 0.0


def available() -> str | None:
    """None where this torch has caching_precompile; else why not, in one line."""
    from .version import torch_str, torch_version

    if torch_version() < PRECOMPILE_SINCE:
        return (
            f"torch {torch_str()} has no usable caching_precompile (Dynamo's precompiled "
            f"frames): torch {'.'.join(map(str, PRECOMPILE_SINCE))} or later"
        )
    try:
        import torch._dynamo.config as config
        import torch._dynamo.package as package
    except ImportError as exc:  # pragma: no cover - a torch without it
        return f"torch has no Dynamo package cache ({exc})"
    if not hasattr(config, "caching_precompile") or not hasattr(package, "DynamoCache"):
        return f"torch {torch_str()} has no caching_precompile"
    return None


def enabled() -> bool:
    """Whether torch's caching_precompile is on now."""
    try:
        import torch._dynamo.config as config
    except ImportError:  # pragma: no cover
        return False
    return bool(getattr(config, "caching_precompile", False))


def set_enabled(on: bool) -> None:
    """Turn torch's caching_precompile on or off (it applies to the
    ``torch.compile`` calls made afterwards)."""
    import torch._dynamo.config as config

    config.caching_precompile = bool(on)


# -- fingerprints -----------------------------------------------------------


def fingerprint(code: Any) -> str:
    """A code object's (or torch's SerializedCode's) behaviour, as a hash: its
    bytecode, names, arguments, flags and constants (nested code included),
    not its file, name of the cell or line numbers."""
    h = hashlib.sha256()
    _feed(h, code)
    return h.hexdigest()[:32]


_FIELDS = (
    "co_argcount",
    "co_posonlyargcount",
    "co_kwonlyargcount",
    "co_flags",
    "co_code",
    "co_names",
    "co_varnames",
    "co_freevars",
    "co_cellvars",
)


def _feed(h: Any, code: Any) -> None:
    for name in _FIELDS:
        h.update(repr(getattr(code, name, None)).encode())
    for const in getattr(code, "co_consts", ()) or ():
        if isinstance(const, types.CodeType) or hasattr(const, "co_code"):
            h.update(b"<code>")
            _feed(h, const)
        else:
            h.update(repr(const).encode())
        h.update(b"|")


def failed_guards(code: Any, local_scope: Any) -> list[str]:
    """The guards of ``code``'s precompiled frames (installed by torch at
    ``torch.compile``) that fail on a frame's locals, as torch words them
    (its ``check_verbose``): why Dynamo traced that frame again. Empty for a
    code with none, or a torch that cannot list them."""
    if code is None:
        return []
    import torch._C._dynamo.eval_frame as c_eval_frame

    entries = getattr(c_eval_frame, "_debug_get_precompile_entries", None)
    if entries is None:
        return []
    out: list[str] = []
    for entry in entries(code):
        info = entry.guard_manager.check_verbose(local_scope)
        if not info.result:
            out.extend(str(p).strip() for p in info.verbose_code_parts or ["a guard"])
    return out


def is_cell_code(code: types.CodeType) -> bool:
    """Code torch's own source check cannot cover: no module found for it
    (a notebook cell's, an ``exec``'d string's)."""
    try:
        return inspect.getmodule(code) is None
    except Exception:
        return True


def _qualname(code: types.CodeType) -> str:
    """A code object's qualified name (its plain name before Python 3.11)."""
    return getattr(code, "co_qualname", code.co_name)


def _named(fn: Any) -> tuple[str, tuple[str, int | None]]:
    """How a lookup's event names ``fn``: (name, (file, first line))."""
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
    return name, (getattr(code, "co_filename", ""), getattr(code, "co_firstlineno", None))


def _resolve(fn: Any, qualname: str) -> types.CodeType | None:
    """The code now behind ``qualname`` as seen from ``fn``'s globals (a
    top-level function, or a class's method): None where it cannot be found
    (a nested function, a name rebound to something else)."""
    if "<locals>" in qualname:
        return None
    g = getattr(fn, "__globals__", None)
    if g is None:
        return None
    parts = qualname.split(".")
    obj: Any = g.get(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def check_entry(fn: Any, entry: Any) -> tuple[str, str]:
    """Whether torch's cache entry ``entry`` (a ``_DynamoCacheEntry``) may
    serve ``fn`` (the innermost function torch.compile wraps): (HIT, ""), or
    (STALE | UNCHECKED, why)."""
    main = getattr(fn, "__code__", None)
    if not isinstance(main, types.CodeType) or not is_cell_code(main):
        return HIT, ""  # a .py file's function: torch's own check
    saved: dict[str, str] | None = getattr(entry, ENTRY_ATTR, None)
    if saved is None:
        return UNCHECKED, "saved without stance_magic's source check (cell code torch cannot check)"
    mine = _qualname(main)
    for qualname, fp in saved.items():
        code = main if qualname == mine else _resolve(fn, qualname)
        if code is None:
            return UNCHECKED, f"{qualname} is no longer found by that name"
        if fingerprint(code) != fp:
            return STALE, f"the cell's code of {qualname} changed since it was saved"
    if mine not in saved:
        return UNCHECKED, f"{mine} was not among the code saved"
    return HIT, ""


# -- torch's package hooks ------------------------------------------------------


class SourceCheck:
    """Torch's Dynamo cache, checked against the cells' code (see the module
    docstring). :meth:`install` once (the extension and the engine do);
    :meth:`uninstall` puts torch's functions back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed: list[tuple[Any, str, Any, Any]] = []
        #: whether this torch has caching_precompile (see possible)
        self._possible: bool | None = None
        self._events: list[PrecompileEvent] = []
        self._clock: Any = None
        #: put in by a measuring window (the user turned torch's
        #: caching_precompile on), not by the extension or
        #: ``stance_magic.precompile``: out again when the last window
        #: closes, unless the extension holds the wrappers
        self.by_window = False

    @property
    def installed(self) -> bool:
        return bool(self._installed)

    @property
    def possible(self) -> bool:
        """Whether this torch has caching_precompile to check (read once: a
        measured window asks at its start whether the user turned it on)."""
        possible = self._possible
        if possible is None:
            possible = self._possible = available() is None
        return possible

    def events(self, since: int = 0) -> list[PrecompileEvent]:
        """The lookups noted since index ``since`` (see :meth:`mark`)."""
        return self._events[since:]

    def mark(self) -> int:
        return len(self._events)

    def install(self, by_window: bool = False) -> bool:
        """Put the hooks in (once); False where this torch has no Dynamo
        cache. ``by_window``: a measuring window asks (see :attr:`by_window`)."""
        if self._installed:
            self.by_window = self.by_window and by_window
            return True
        if available() is not None:
            return False
        import time

        import torch._dynamo.package as package

        self._clock = time.perf_counter
        try:
            cache = package.DynamoCache
            pkg = package.CompilePackage
            self._patch(pkg, "add_inlined_source", self._inlined_wrapper)
            self._patch(pkg, "cache_entry", self._entry_wrapper)
            self._patch(pkg, "install", self._install_wrapper)
            # the instance's own attribute: torch calls DynamoCache.load(fn)
            self._patch(cache, "load", self._load_wrapper, instance=True)
        except AttributeError:
            # a torch whose package cache is laid out otherwise: no check
            # rather than half of one
            self.uninstall()
            return False
        self.by_window = by_window
        return True

    def uninstall(self) -> None:
        self.by_window = False
        while self._installed:
            owner, name, original, had = self._installed.pop()
            if had:
                setattr(owner, name, original)
            else:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass

    def _patch(self, owner: Any, name: str, make: Any, instance: bool = False) -> None:
        had = name in vars(owner) if instance else True
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        self._installed.append((owner, name, original, had))

    # CompilePackage.add_inlined_source(self, sources): the code a compile traced
    def _inlined_wrapper(self, orig: Any) -> Any:
        def add_inlined_source(package: Any, sources: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            try:
                cells = package.__dict__.setdefault(ENTRY_ATTR, {})
                for code in sources or ():
                    if isinstance(code, types.CodeType) and is_cell_code(code):
                        cells[_qualname(code)] = fingerprint(code)
            except Exception:
                _log.debug("stance_magic: no fingerprint", exc_info=True)
            return orig(package, sources)

        add_inlined_source._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(add_inlined_source, orig)

    # CompilePackage.cache_entry(self): the entry torch pickles; ours rides on it
    def _entry_wrapper(self, orig: Any) -> Any:
        def cache_entry(package: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            entry = orig(package)
            try:
                cells = dict(package.__dict__.get(ENTRY_ATTR, {}))
                fn = getattr(package, "_innermost_fn", None)
                main = getattr(fn, "__code__", None)
                if isinstance(main, types.CodeType) and is_cell_code(main):
                    cells[_qualname(main)] = fingerprint(main)
                if cells:
                    setattr(entry, ENTRY_ATTR, cells)
            except Exception:
                _log.debug("stance_magic: no fingerprint", exc_info=True)
            try:
                _record_module_aliases(package, entry)
            except Exception:
                _log.debug("stance_magic: module aliases not recorded", exc_info=True)
            return entry

        cache_entry._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(cache_entry, orig)

    # CompilePackage.install(self, backends): the saved frames put in place
    def _install_wrapper(self, orig: Any) -> Any:
        check = self

        def install(package: Any, backends: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            try:
                _in_own_globals(package)
            except Exception:
                _log.debug("stance_magic: globals not checked", exc_info=True)
            scopes = _scopes_before(package)
            try:
                result = orig(package, backends)
                try:
                    _past_bound_names(scopes)
                except Exception:
                    _log.debug("stance_magic: torch's name counter not moved", exc_info=True)
                return result
            except RuntimeError:
                raise  # torch's own fallback: it traces the function again
            except Exception as err:
                # torch 2.13 raises AttributeError rebuilding a dropped
                # closure guard of some frames (GPT-2's) and lets it reach
                # torch.compile's caller: start the package afresh and hand
                # torch the error it falls back on (it traces again)
                try:
                    package.uninstall()
                except Exception:
                    pass
                package._codes = {}
                package._initialized = False
                check._unloadable(package, err)
                raise RuntimeError(
                    f"stance_magic: torch could not install a precompiled frame: {err}"
                ) from err

        install._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(install, orig)

    def _unloadable(self, package: Any, err: BaseException) -> None:
        name, where = _named(getattr(package, "_innermost_fn", None))
        # the lookup was noted a hit: it is not one
        with self._lock:
            for i in range(len(self._events) - 1, -1, -1):
                e = self._events[i]
                if e.name == name and e.outcome in (HIT, INCOMPLETE):
                    del self._events[i]
                    break
        why = f"torch could not rebuild its guards ({type(err).__name__}: {err})"
        self._note(name, where, UNLOADABLE, why)
        _not_a_hit()

    # DynamoCache.load(fn): an entry for fn, or None (a miss)
    def _load_wrapper(self, orig: Any) -> Any:
        check = self

        def load(fn: Any) -> Any:
            __tracebackhide__ = True  # (IPython shows the user's frames and torch's)
            result = orig(fn)
            try:
                return check._checked(fn, result)
            except Exception:
                _log.debug("stance_magic: precompile check failed", exc_info=True)
                return result

        load._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(load, orig)

    def _checked(self, fn: Any, result: Any) -> Any:
        from torch._dynamo.eval_frame import innermost_fn

        inner = innermost_fn(fn)
        name, where = _named(inner)
        if result is None:
            self._note(name, where, MISS)
            return None
        outcome, why = check_entry(inner, getattr(result, "dynamo", None))
        if outcome == HIT:
            missing = _missing_backends(result)
            if missing:
                # torch installs it and then traces the function again
                why = (
                    f"saved without its compiled graph{'s' if missing > 1 else ''} (before "
                    "a training step's backward ran, or from a backend that saves none)"
                )
                self._note(name, where, INCOMPLETE, why)
                return result
        self._note(name, where, outcome, why)
        if outcome == HIT:
            return result
        _not_a_hit()  # torch counted a hit: it traces the function instead
        return None

    def _note(self, name: str, where: tuple[str, int | None], outcome: str, why: str = "") -> None:
        at = self._clock() if self._clock is not None else 0.0
        with self._lock:
            self._events.append(PrecompileEvent(name, where[0], where[1], outcome, why, at))


#: the process's one check (the hooks are process-wide, as torch's cache is)
SOURCE_CHECK = SourceCheck()


def _not_a_hit() -> None:
    """torch's Dynamo-cache counters, corrected: the lookup it counted a hit
    was not used (the function is traced again): a miss."""
    from torch._dynamo.utils import counters

    c = counters["dynamo_cache"]
    if c.get("dynamo_cache_hit", 0) > 0:
        c["dynamo_cache_hit"] -= 1
    c["dynamo_cache_miss"] += 1


def _missing_backends(result: Any) -> int:
    """How many of the compiled graphs a loaded entry names it lacks."""
    try:
        wanted = set(result.dynamo.backend_ids)
        have = set(result.backends or {})
    except Exception:
        return 0
    return len(wanted - have)


#: A load's names this far past the counter are not torch's (its counter
#: starts at 0 in each process and counts one a name): left alone.
_NAME_COUNTER_MAX_STEP = 100_000


def _scopes_before(package: Any) -> list[tuple[dict[str, Any], set[str]]]:
    """The module globals ``package``'s frames install into, each with the
    names it holds before the install (on torch that needs
    :func:`_past_bound_names`; empty elsewhere)."""
    if names_skip_bound():
        return []
    out: list[tuple[dict[str, Any], set[str]]] = []
    seen: set[int] = set()
    for entry in dict(getattr(package, "_codes", None) or {}).values():
        module = sys.modules.get(getattr(entry, "python_module", None) or "")
        scope = getattr(module, "__dict__", None)
        if isinstance(scope, dict) and id(scope) not in seen:
            seen.add(id(scope))
            out.append((scope, set(scope)))
    return out


def names_skip_bound() -> bool:
    """Whether torch mints Dynamo's global names past those bound in the
    scope (``bytecode_transformation.unique_id_unbound_in``, torch 2.15:
    pytorch#196817): then a load needs no help (see :func:`_past_bound_names`)."""
    bt = sys.modules.get("torch._dynamo.bytecode_transformation")
    return bt is None or hasattr(bt, "unique_id_unbound_in")


def _counter_value(counter: Any) -> int | None:
    """An ``itertools.count()``'s next value, from its repr (``count(5)``)."""
    text = repr(counter)
    inner = text[len("count(") : -1] if text.startswith("count(") and text.endswith(")") else ""
    return int(inner) if inner.isdigit() else None


def _past_bound_names(scopes: list[tuple[dict[str, Any], set[str]]]) -> int:
    """Move torch's name counter past the names an install bound; the steps moved.

    Before torch 2.15 Dynamo names the globals it installs (``__builtins_dict___0``,
    ``__resume_at_30_1``, ``__import_...``) from one process-wide counter
    (``bytecode_transformation.unique_id``: ``f"{prefix}_{next(_unique_id_counter)}"``,
    read in 2.10, 2.13 and 2.14). A process that loaded saved frames binds the
    saving process's names in the module's globals (``CompilePackage.install``)
    while its own counter starts at 0, so its next trace in that module (an
    edited global, default argument or closure variable: the saved guards
    refuse the call) mints a bound name and raises ``AssertionError: Name
    '__builtins_dict___0' already exists in scope`` (``CleanupHook.create``;
    bare torch with ``load_cache_artifacts`` too). torch 2.15 skips bound
    names (:func:`names_skip_bound`); here the counter is advanced past each
    new name's number, as if this process had minted them (the names stay
    unique: a counter's numbers are never reused)."""
    bt = sys.modules.get("torch._dynamo.bytecode_transformation")
    counter = getattr(bt, "_unique_id_counter", None)
    now = _counter_value(counter) if counter is not None else None
    if not scopes or now is None:
        return 0
    top = -1
    for scope, before in scopes:
        for name in set(scope) - before:
            number = name.rpartition("_")[2]
            if name.startswith("__") and number.isdigit():
                top = max(top, int(number))
    steps = top + 1 - now
    if steps <= 0 or steps > _NAME_COUNTER_MAX_STEP:
        return 0
    for _ in range(steps):
        next(counter)  # type: ignore[call-overload]
    return steps


def _in_own_globals(package: Any) -> None:
    """Name, in a package torch is about to install, the module whose globals
    the saved function's code runs with.

    torch records a function's ``__module__`` and rebuilds the saved frame's
    guards on that module's globals (``CompilePackage.install``). A function
    wrapped by a decorator of another file (``functools.wraps``, as
    transformers wraps GPT-2's ``forward``) has its own file's
    ``__module__``, while the code that runs is the decorator's, with the
    decorator's globals: a guard on one of those names then fails
    (``KeyError on G['...']``) and torch traces the frame again in every new
    process. The entry of that code is given the module of the globals it
    runs with (where that module is imported and holds them); any other is
    left as torch saved it.
    """
    fn = getattr(package, "_innermost_fn", None)
    code = getattr(fn, "__code__", None)
    scope = getattr(fn, "__globals__", None)
    codes = getattr(package, "_codes", None)
    if code is None or not isinstance(scope, dict) or not isinstance(codes, dict):
        return
    entry = codes.get(code)
    name = scope.get("__name__")
    if entry is None or not isinstance(name, str) or getattr(entry, "python_module", name) == name:
        return
    module = sys.modules.get(name)
    if module is None or getattr(module, "__dict__", None) is not scope:
        return
    if not _globals_found(entry, scope):
        # torch saved code that reads a global it does not install (a
        # module alias named in the saving process, saved without the
        # extension: see _record_module_aliases): left as torch saved it,
        # whose guards then refuse it and Dynamo traces again, rather than
        # code that raises NameError at its first call
        return
    codes[code] = dataclasses.replace(entry, python_module=name)


def _globals_found(entry: Any, scope: dict[str, Any]) -> bool:
    """Whether every global the entry's saved code reads is in ``scope`` or
    is one torch installs with it (its import aliases, backends, resume
    functions, the builtins dictionary)."""
    import builtins

    known = set(scope) | set(vars(builtins))
    known.update(str(n) for n in getattr(entry, "import_sources", {}) or {})
    known.update(str(n) for n in getattr(entry, "backend_ids", ()) or ())
    known.update(str(n) for n in getattr(entry, "function_names", ()) or ())
    return all(
        name in known or name.startswith("__builtins_dict__") for name in _saved_globals(entry)
    )


def _saved_globals(entry: Any) -> set[str]:
    """The globals the saved code of a code entry (each guarded code and the
    code nested in it) reads, writes or deletes."""
    import dis

    from torch._dynamo.package import SerializedCode

    names: set[str] = set()
    for guarded in entry.guarded_codes:
        todo = [SerializedCode.to_code_object(guarded.dynamo_code)]
        while todo:
            code = todo.pop()
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            names.update(
                str(ins.argval)
                for ins in dis.get_instructions(code)
                if ins.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL")
            )
    return names


#: the global torch's code generation loads a module by where the frame's
#: globals lack it (``PyCodegen.create_load_python_module``):
#: ``___module_<last part of its name>_<id>_c<compile id>``
MODULE_ALIAS = "___module_"


def _record_module_aliases(package: Any, entry: Any) -> None:
    """Record, with each code entry torch is about to save, the modules its
    code loads by an alias torch made up.

    Where the frame's globals do not hold a module its generated code needs
    (GPT-2's output is rebuilt from ``collections``; a returned
    ``itertools.count`` from ``itertools``), torch installs the module under
    ``___module_<name>_<id>_c<n>`` in those globals for this process only,
    and does not list it among the entry's import sources: a new process
    loading the entry lacks it (NameError at the first call on torch 2.13;
    on 2.15 the guards refuse the frame and Dynamo traces it again). Each
    alias the saved code reads, found bound to an imported module in the
    globals it runs with, is added to the entry's import sources, which torch
    installs at load (and takes out at uninstall) as it does its own
    ``__import_*`` aliases.
    """
    fn_scope = getattr(getattr(package, "_innermost_fn", None), "__globals__", None)
    in_fn_scope = _module_aliases(fn_scope)
    for code_entry in getattr(entry, "codes", ()) or ():
        sources = getattr(code_entry, "import_sources", None)
        if not isinstance(sources, dict):
            continue
        module = sys.modules.get(getattr(code_entry, "python_module", ""))
        # the globals the code runs with first
        aliases = {**_module_aliases(getattr(module, "__dict__", None)), **in_fn_scope}
        if not aliases:
            continue  # nothing to record: the saved code is not read
        for name in (_saved_globals(code_entry) & aliases.keys()) - sources.keys():
            sources[name] = aliases[name]


def _module_aliases(scope: Any) -> dict[str, str]:
    """The :data:`MODULE_ALIAS` names in ``scope`` bound to an imported
    module, with that module's name."""
    if not isinstance(scope, dict):
        return {}
    return {
        name: value.__name__
        for name, value in scope.items()
        if name.startswith(MODULE_ALIAS)
        and isinstance(value, types.ModuleType)
        and sys.modules.get(value.__name__) is value
    }
