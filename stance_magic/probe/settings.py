"""torch's compile settings in force: the values of ``torch._dynamo.config``
and ``torch._inductor.config`` that differ from their defaults.

A report keeps them (:attr:`stance_magic.report.CellReport.settings`) so
that two cells can be compared (``%stance diff``) without reading torch
again. Read from torch's own ``ConfigModule``: ``_get_dict(skip_default=True)``
(what ``codegen_config`` reads, the same in 2.8 to 2.15; an alias such as
``cache_size_limit`` is read as the setting it names, ``recompile_limit``).
torch keeps a hash of the settings in its compile-cache key (``get_hash()``,
cached until a setting changes); the others (``compile_ignored``: the
recompile limit, logging) are read one by one (27 in 2.13's Dynamo, none in
Inductor's). While torch's own dirty flag is clear and its digest is the
one seen last, nothing changed and the last snapshot is handed out again
(about 0.6 µs); read only for a report that saw torch.compile.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MODULES", "settings"]

#: The setting modules read, by the name a user types (only those already
#: imported: reading one never imports it).
MODULES = ("torch._dynamo.config", "torch._inductor.config")

#: A value's text is cut to this many characters.
WIDTH = 80

#: module -> (its fingerprint, its snapshot): reused while the fingerprint is the same
_LAST: dict[str, tuple[Any, dict[str, tuple[str, str]]]] = {}
#: module -> a reader of each compile_ignored setting's user value
_IGNORED: dict[str, list[Any]] = {}
#: the last result, handed out again while no module's fingerprint changed
_ALL: list[Any] = [None, None]  # [fingerprints, settings]


def _reader(entry: Any) -> Any:
    """A function that reads a setting's value as the user set it (a
    ContextVar in recent torch: its bound ``get``; a plain attribute in 2.8)."""
    value = entry.user_override
    get = getattr(value, "get", None)
    return get if get is not None else (lambda: entry.user_override)


def _fingerprint(mod: Any, name: str) -> Any:
    """What changes when any setting of ``mod`` does: torch's hash of those
    in its cache key, and the user's values of the others."""
    ignored = _IGNORED.get(name)
    if ignored is None:
        keys = getattr(mod, "_compile_ignored_keys", ())
        ignored = _IGNORED[name] = [
            _reader(mod._config[k]) for k in sorted(keys) if k in mod._config
        ]
    return mod.get_hash(), *[read() for read in ignored]


def _text(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def _snapshot(mod: Any, name: str) -> dict[str, tuple[str, str]]:
    values = mod._get_dict(skip_default=True)
    entries = mod._config
    out = {}
    for key in sorted(values):
        entry = entries.get(key)
        default = entry.default if entry is not None else None
        value, default_text = _text(values[key]), _text(default)
        if value != default_text:  # an env default equal to torch's
            out[f"{name}.{key}"] = (value, default_text)
    return out


#: module -> torch's digest object when this module last read it
_SEEN: dict[str, Any] = {}


def _kept(mod: Any) -> tuple[Any, Any] | None:
    """(dirty, digest): what torch keeps of its hash between calls of
    ``get_hash`` (ContextVars from 2.11 or so, plain attributes in 2.8);
    None where this torch keeps neither. Every ``setattr``, ``delattr`` and
    ``patch`` sets it dirty, and each new hash is a new ``bytes``."""
    var = mod.__dict__.get("_hash_dirty_var")
    if var is not None:
        return var.get(), mod.__dict__["_hash_cache_var"].get()
    if "_is_dirty" in mod.__dict__:
        return mod.__dict__["_is_dirty"], mod.__dict__.get("_hash_digest")
    return None


def _unchanged() -> bool:
    """No setting of any module changed since the last snapshot, as torch's
    own dirty flag and digest say (about 0.3 µs)."""
    if _ALL[0] is None:
        return False
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            if _SEEN.get(name) is not None:
                return False
            continue
        kept = _kept(mod)
        if kept is None or kept[0] or kept[1] is None or kept[1] is not _SEEN.get(name):
            return False
    return True


def settings() -> dict[str, tuple[str, str]]:
    """Every compile setting that differs from torch's default, by its full
    name (``torch._dynamo.config.recompile_limit``): ``(value, default)``,
    each as its ``repr`` (cut to :data:`WIDTH`). While no setting changed,
    the same dict as the last call (reports share it: read it, never write)."""
    if _unchanged():
        return _ALL[1]  # type: ignore[no-any-return]
    keys = []
    for name in MODULES:
        mod = sys.modules.get(name)
        try:
            keys.append(_fingerprint(mod, name) if mod is not None else None)
            kept = _kept(mod) if mod is not None else None
            _SEEN[name] = kept[1] if kept is not None else None
        except Exception:  # a torch whose config module reads otherwise
            keys.append(None)
    if keys == _ALL[0]:
        return _ALL[1]  # type: ignore[no-any-return]
    out: dict[str, tuple[str, str]] = {}
    for name, key in zip(MODULES, keys):
        if key is None:
            continue
        last = _LAST.get(name)
        if last is None or last[0] != key:
            try:
                last = (key, _snapshot(sys.modules[name], name))
            except Exception:
                continue
            _LAST[name] = last
        out.update(last[1])
    _ALL[0], _ALL[1] = keys, out
    return out
